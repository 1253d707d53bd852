//! A prompt's prefill on a MoE engine with data-parallel attention: beside the prompt, the
//! other DP ranks' experts see only their own steady share of prompt tokens, which follows
//! their load (`StepModel::prefill_time`).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::analysis::perf::{StepModel, FITTED};
use dic_compiler::source::MemoryWorld;

/// DeepSeek-V3 `tp 1 × dp 16 × ep` on two 8 × H200 nodes, 2048-token prompts and
/// `output` tokens out.
fn deepseek_dp16(output: &str) -> dic_compiler::analysis::Scenario {
    let src = format!(
        "import std.instances.aws.p5e_48xlarge\nimport std.models.deepseek_v3\n\
cluster moe {{ nodes = 2 × p5e_48xlarge }}\n\
workload chat {{ prompt = 2k tokens, output = {output}, rate = 1 req/s }}\n\
deploy ds {{ model = deepseek_v3, cluster = moe, workload = chat, layout = tp 1 × dp 16 × ep, \
engine = vllm {{ max_model_len = 32k tokens }} }}\n"
    );
    let world = MemoryWorld::new().with("p.dist", &src);
    let checked = dic_compiler::driver::check_file(&world, "p.dist").unwrap();
    checked.deployments[0].scenario.scenario.clone()
}

/// One request per DP rank: a rank whose requests emit 1024 tokens each brings a
/// 2048-token prompt every 1024 steps, 2 prompt tokens per step, and one whose requests
/// emit 16 brings 128. A 2048-token prompt's prefill therefore routes 2048 + 15 × 2 =
/// 2078 tokens through the experts in the first case and 2048 + 15 × 128 = 3968 in the
/// second, and takes longer there; with every rank taken to carry a whole chunk (32,768
/// tokens either way) the two were equal.
#[test]
fn the_other_ranks_prompt_tokens_follow_their_load() {
    let time = |output: &str| {
        let s = deepseek_dp16(output);
        StepModel::new(&s).prefill_time(2048.0, 0.0, 1.0, 2560.0, &FITTED)
    };
    let (long_outputs, short_outputs) = (time("1k tokens"), time("16 tokens"));
    assert!(
        short_outputs > long_outputs * 1.02,
        "prefill {:.2} ms (16 out) vs {:.2} ms (1k out)",
        short_outputs * 1e3,
        long_outputs * 1e3
    );
    // Idle ranks add nothing: the prefill at no running requests is the one at 1k out
    // less the 30 tokens, within 2%.
    let s = deepseek_dp16("1k tokens");
    let idle = StepModel::new(&s).prefill_time(2048.0, 0.0, 0.0, 2560.0, &FITTED);
    assert!(idle <= long_outputs && idle > long_outputs * 0.98);
}
