//! Rows 7 and 8 of docs/vllm-rules.md: on a block-FP8 checkpoint (`weight_block_size`
//! in its `quantization_config`, dic's `weight_block`) vLLM 0.33 refuses a layout whose TP
//! shards of a linear layer or of an expert are not whole scale blocks
//! (`fp8_utils.validate_fp8_block_shape`, `validate_fp8_block_shape_moe`). The checker,
//! its help and the planner's TP sizes read the one rule (`analysis/rules/shape.rs`).

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use dic_compiler::analysis::rules::{moe_refusal, tp_refusal, valid_tp_sizes};
use dic_compiler::diagnostics::{Code, Diagnostic};
use dic_compiler::driver::{self, Checked};
use dic_compiler::program::Layout;
use dic_compiler::source::MemoryWorld;

fn compile(src: &str) -> Checked {
    let head = "import std.nodes.dgx_h100\n";
    let world = MemoryWorld::new().with("c.dist", &format!("{head}{src}"));
    driver::compile_file(&world, "c.dist").unwrap()
}

fn codes(c: &Checked) -> Vec<Code> {
    c.diagnostics.iter().map(|d| d.code).collect()
}

/// The first diagnostic with `code`; fails the test when there is none.
fn first(c: &Checked, code: Code) -> &Diagnostic {
    c.diagnostics
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("{code} expected: {:?}", codes(c)))
}

/// The same refusal from a `.dist` file, with a help that proposes TP sizes vLLM accepts.
#[test]
fn a_block_fp8_tp_the_shards_cannot_hold_is_e0411_with_working_sizes() {
    let src = |block: &str| {
        format!(
            "import std.models.qwen3_32b\n\
             model q = qwen3_32b {{ weights = fp8, prequantized = true{block} }}\n\
             cluster two {{ nodes = 2 × dgx_h100 }}\n\
             deploy d {{ model = q, cluster = two, layout = tp 16 }}\n"
        )
    };
    let blocks = compile(&src(", weight_block = [128, 128]"));
    let e = first(&blocks, Code::WidthNotDivisible);
    assert!(e.message.contains("1600"), "{}", e.message);
    let help = e.help.clone().unwrap_or_default();
    assert!(help.contains("use tp 1, tp 2, tp 4, tp 8"), "{help}");
    let per_tensor = compile(&src(""));
    assert!(
        !codes(&per_tensor).contains(&Code::WidthNotDivisible),
        "{:?}",
        codes(&per_tensor)
    );
}

/// Qwen3-235B-A22B-FP8's experts (moe_intermediate 1,536, hidden 4,096) at tp 4 × dp 8
/// without `ep`: each expert split 32 ways, 48 per rank; not whole 128-blocks, and
/// gcd(128, 128, 48, 4096) = 16 is below the 32 `refine_fp8_moe_block_shape` needs, so
/// vLLM raises "The output_size of gate's and up's weight = 48 is not divisible by weight
/// quantization block_n = 128." At tp 4 × dp 4 (96 per rank) the scales are refined to
/// 32-blocks (gcd 32) and vLLM starts; with `ep` each rank holds whole experts.
#[test]
fn block_fp8_experts_split_into_whole_or_refinable_blocks() {
    let c = compile(
        "import std.models.qwen3_235b_a22b_fp8\n\
         cluster four { nodes = 4 × dgx_h100 }\n\
         deploy d { model = qwen3_235b_a22b_fp8, cluster = four, layout = tp 4 × dp 8 }\n",
    );
    let e = first(&c, Code::WidthNotDivisible);
    assert!(
        e.message
            .contains("weight = 48 is not divisible by weight quantization block_n = 128"),
        "{}",
        e.message
    );
    let help = e.help.clone().unwrap_or_default();
    assert!(help.contains("at most 16 ranks"), "{help}");
    let m = dic_compiler::analysis::catalog::model("qwen3_235b_a22b_fp8").unwrap();
    assert_eq!(m.detail.weight_block, vec![128, 128]);
    let l = |tp, dp, ep| Layout {
        tp,
        dp,
        ep,
        ..Layout::default()
    };
    assert!(moe_refusal(&m, &l(4, 8, false)).is_some());
    assert!(moe_refusal(&m, &l(4, 4, false)).is_none());
    assert!(moe_refusal(&m, &l(4, 8, true)).is_none());
}

/// DeepSeek-V3's three dense layers (intermediate 18,432) at tp 32: 576 inputs per rank,
/// 4.5 blocks of 128; tp 16 gives 1,152 = 9 blocks (and the MLA projections: q_b_proj
/// 128 × 192 / 16 = 1,536, kv_b_proj 128 × 256 / 16 = 2,048, o_proj 128 × 128 / 16 = 1,024,
/// all whole blocks).
#[test]
fn deepseek_v3_dense_layers_cap_its_tp_at_16() {
    let m = dic_compiler::analysis::catalog::model("deepseek_v3").unwrap();
    assert!(tp_refusal(&m, 16).is_none());
    let why = tp_refusal(&m, 32).unwrap().1;
    assert!(
        why.contains("= 576") && why.contains("MLP down projection"),
        "{why}"
    );
    assert_eq!(valid_tp_sizes(&m, 64), vec![1, 2, 4, 8, 16]);
}

/// E0401's help proposes a layout on the same GPUs; for Qwen3-235B-A22B-FP8 written as
/// `tp 32` on four nodes without `ep`, every `tp × dp = 32` split gives the experts 48
/// columns per rank, which vLLM refuses (above), so the help must not propose one.
#[test]
fn the_tp_across_nodes_help_proposes_no_expert_split_vllm_refuses() {
    let src = |layout: &str| {
        format!(
            "import std.models.qwen3_235b_a22b_fp8\n\
             cluster four {{ nodes = 4 × dgx_h100 }}\n\
             deploy d {{ model = qwen3_235b_a22b_fp8, cluster = four, layout = {layout}, engine = vllm {{ max_model_len = 8192 tokens }} }}\n"
        )
    };
    let c = compile(&src("tp 32"));
    let e = first(&c, Code::TpAcrossNodes);
    let help = e.help.clone().unwrap_or_default();
    let proposed = help.split('`').nth(1).unwrap_or_else(|| panic!("{help}"));
    let again = compile(&src(proposed));
    assert!(
        !codes(&again).contains(&Code::WidthNotDivisible),
        "E0401 proposed `{proposed}`, which vLLM refuses: {:?}",
        again
            .diagnostics
            .iter()
            .map(|d| &d.message)
            .collect::<Vec<_>>()
    );
}
