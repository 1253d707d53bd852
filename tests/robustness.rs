//! Bad input never panics, hangs or overflows the stack: a property-based fuzzer for the
//! parser, resolver and checker (bounded: proptest's case count), plus the classic
//! pathological inputs. The formatter's round trip is a property too.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::source::MemoryWorld;
use proptest::prelude::*;

fn check_bytes(bytes: &[u8]) -> dic_compiler::driver::Checked {
    let world = MemoryWorld::new()
        .with_bytes("f.dist", bytes)
        .with("other.dist", "import \"./f.dist\"\nmodel x = y {}");
    dic_compiler::driver::check_file(&world, "f.dist").expect("in memory")
}

const TOKENS: &[&str] = &[
    "gpu",
    "model",
    "node",
    "cluster",
    "deploy",
    "workload",
    "slo",
    "link",
    "modle",
    "import",
    "std.gpus.*",
    "std.models.llama_3_1_8b",
    "\"./other.dist\"",
    "\"./f.dist\"",
    "\"NVIDIA H100 80GB HBM3\"",
    "{",
    "}",
    "[",
    "]",
    "=",
    "<=",
    ">=",
    ",",
    "×",
    "x",
    "*",
    "2",
    "8",
    "0",
    "-1",
    "2k",
    "1e999",
    "80",
    "GiB",
    "GB/s",
    "Gb/s",
    "tokens",
    "req/s",
    "ms",
    "%",
    "$3.5/h",
    "$1/fortnight",
    "tp",
    "pp",
    "dp",
    "ep",
    "auto",
    "vllm",
    "layout",
    "memory",
    "nodes",
    "llama_3_1_8b",
    "h100_sxm",
    "ttft.p95",
    "true",
    "\n",
    "// c\n",
    "/* b */",
    "/*",
    "\"",
    "\\",
    "a.b.c",
    "é",
    "😀",
    "\r\n",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = check_bytes(&bytes);
    }

    #[test]
    fn token_soup_never_panics_and_formats_stably(src in token_soup()) {
        let checked = check_bytes(src.as_bytes());
        for d in &checked.diagnostics {
            if let Some(l) = d.location() {
                let f = checked.db.get(l.file);
                prop_assert!(l.span.end as usize <= f.text.len());
                prop_assert!(f.text.is_char_boundary(l.span.start as usize) && f.text.is_char_boundary(l.span.end as usize));
            }
        }
        let (ast, diags) = dic_compiler::syntax::parse(&src, dic_compiler::span::FileId(0));
        if diags.is_empty() {
            let once = dic_compiler::syntax::fmt::format(&src, &ast);
            let (ast2, diags2) = dic_compiler::syntax::parse(&once, dic_compiler::span::FileId(0));
            prop_assert!(diags2.is_empty(), "formatted text does not parse: {:?}\n{}", diags2, once);
            prop_assert_eq!(dic_compiler::syntax::fmt::format(&once, &ast2), once);
        }
    }
}

#[test]
fn pathological_inputs_are_diagnostics() {
    let deep = format!(
        "gpu g {{ names = {}\"x\"{} }}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let c = check_bytes(deep.as_bytes());
    assert!(c.diagnostics.iter().any(|d| d.code.as_str() == "E0103"));
    let c = check_bytes("model m { parameters = 1e999 }".as_bytes());
    assert!(c.diagnostics.iter().any(|d| d.code.as_str() == "E0104"));
    let long_line = "x".repeat(1_000_000);
    let _ = check_bytes(long_line.as_bytes());
    let many = "workload w { prompt = 1 tokens, output = 1 tokens, rate = 1 req/s }\n".repeat(5000);
    let c = check_bytes(many.as_bytes());
    assert!(
        c.diagnostics
            .iter()
            .filter(|d| d.code.as_str() == "E0202")
            .count()
            >= 4999
    );
}

#[test]
fn import_cycles_and_missing_files() {
    let world = MemoryWorld::new()
        .with(
            "a.dist",
            "import \"./b.dist\"\nlink la { type = pcie, bandwidth = 1 GB/s, latency = 1 us }",
        )
        .with(
            "b.dist",
            "import \"./a.dist\"\nlink lb { type = pcie, bandwidth = 1 GB/s, latency = 1 us }",
        );
    let c = dic_compiler::driver::check_file(&world, "a.dist").unwrap();
    let codes: Vec<&str> = c.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["E0204"], "{codes:?}");
    let world = MemoryWorld::new().with("a.dist", "import \"../x/missing.dist\"");
    let c = dic_compiler::driver::check_file(&world, "a.dist").unwrap();
    assert_eq!(c.diagnostics[0].code.as_str(), "E0205");
    assert!(c.diagnostics[0].labels[0]
        .message
        .contains("../x/missing.dist"));
    let world = MemoryWorld::new();
    assert!(dic_compiler::driver::check_file(&world, "none.dist").is_err());
}

#[test]
fn extension_cycles_and_kind_mismatches() {
    let c = check_bytes(b"model a = b {}\nmodel b = a {}\n");
    assert!(c.diagnostics.iter().any(|d| d.code.as_str() == "E0207"));
    let c = check_bytes(b"import std.gpus.h100_sxm\nmodel m = h100_sxm {}\n");
    assert!(c
        .diagnostics
        .iter()
        .any(|d| d.code.as_str() == "E0201" || d.code.as_str() == "E0206"));
}
