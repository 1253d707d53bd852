//! GPUs resolve from the names `nvidia-smi` prints, case- and separator-insensitively,
//! both through the stdlib lookup and inside `.dist` files.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::program::Body;
use dic_compiler::schema::Kind;
use dic_compiler::source::MemoryWorld;
use dic_compiler::stdlib::find_gpu;

#[test]
fn nvidia_smi_names_resolve() {
    for (printed, want) in [
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("nvidia h100 80gb hbm3", "h100_sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm_80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100_sxm_40gb"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA H200", "h200_sxm"),
        ("Tesla T4", "t4"),
        ("NVIDIA L40S", "l40s"),
        ("h100_sxm", "h100_sxm"),
        ("H100-SXM", "h100_sxm"),
        ("AMD Instinct MI300X", "mi300x"),
    ] {
        let got = find_gpu(printed).map(|(_, n)| n);
        assert_eq!(got.as_deref(), Some(want), "{printed}");
    }
    assert_eq!(find_gpu("NVIDIA H1000"), None);
}

#[test]
fn a_node_may_name_its_gpu_as_nvidia_smi_prints_it() {
    let src = "node box { gpus = 8 × \"NVIDIA A100-SXM4-80GB\" }\nnode bad { gpus = 2 × \"NVIDIA Z9000\" }\n";
    let world = MemoryWorld::new().with("n.dist", src);
    let checked = dic_compiler::driver::check_file(&world, "n.dist").unwrap();
    let codes: Vec<&str> = checked
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(codes, ["E0201"], "only the unknown GPU is an error");
    let node = checked.program.user_defs_of(Kind::Node).next().unwrap();
    let Body::Node(n) = &node.body else { panic!() };
    assert_eq!(n.gpu_count, 8);
    assert_eq!(
        checked.program.def(n.gpu.unwrap()).unwrap().name,
        "a100_sxm_80gb"
    );
}
