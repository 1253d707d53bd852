//! The language reference, generated from the schema: every kind, every field with its
//! type, units, whether it is required, what it becomes on vLLM's command line and an
//! example. `docs/language.md` is [`language_reference`] (a test fails when the file is
//! stale), and the language server's hover shows [`field_text`], the same words.

use crate::schema::{all_schemas, Field, Kind, Ty, VllmFlag, LAYOUT_FACTORS, VLLM_OPTIONS};
use crate::units::Dimension;
use std::fmt::Write;

/// An example value of a type, as it would be written in a `.dist` file.
pub fn example(ty: &Ty) -> String {
    match ty {
        Ty::Quantity(d, _) | Ty::Bound(d) => {
            let q = match d {
                Dimension::Bytes => "80 GiB",
                Dimension::Bandwidth => "3.35 TB/s",
                Dimension::Time => "800 ms",
                Dimension::Tokens => "8k tokens",
                Dimension::TokenRate => "2000 tokens/s",
                Dimension::RequestRate => "4 req/s",
                Dimension::FlopRate => "989 TFLOPS",
                Dimension::Money => "$1200",
                Dimension::MoneyRate => "$98.32/h",
                Dimension::Ratio => "0.9",
            };
            match ty {
                Ty::Bound(Dimension::Time) => format!("<= {q}"),
                Ty::Bound(_) => format!(">= {q}"),
                _ => q.to_string(),
            }
        }
        Ty::Int { min, .. } => (*min).max(1).to_string(),
        Ty::Bool => "true".into(),
        Ty::Str(rule) => format!("\"{}\"", text_example(*rule)),
        Ty::Enum(opts) => opts.first().copied().unwrap_or("…").to_string(),
        Ty::Ref(k) => format!("my_{}", k.keyword()),
        Ty::List(inner) => format!("[{}]", example(inner)),
        Ty::CountOf(k) => format!("8 × my_{}", k.keyword()),
        Ty::Groups(k) => format!("2 × my_{}", k.keyword()),
        Ty::Layout => "tp 8 × pp 2 × dp 2".into(),
        Ty::Engine => "vllm { max_model_len = 8k tokens }".into(),
        Ty::Block(fields) => fields
            .first()
            .map(|f| format!("{{ {} }}", entry_example(f)))
            .unwrap_or_else(|| "{ }".into()),
    }
}

/// A field's example entry, as written in a definition: a value its range holds (a link's
/// `latency = 2 us`, a model's `parameters = 70.6B`), and a bound in the bound's own form
/// (`ttft.p95 <= 800 ms`, `throughput >= 2000 tokens/s`).
pub fn entry_example(f: &Field) -> String {
    if let Some((_, value)) = FIELD_EXAMPLES.iter().find(|(name, _)| *name == f.name) {
        return format!("{} = {value}", f.name);
    }
    match f.ty {
        Ty::Bound(Dimension::Time) => format!(
            "{}.p95 <= {}",
            f.name,
            example(&Ty::Quantity(
                Dimension::Time,
                crate::schema::default_range(Dimension::Time)
            ))
        ),
        Ty::Bound(d) => format!(
            "{} >= {}",
            f.name,
            example(&Ty::Quantity(d, crate::schema::default_range(d)))
        ),
        Ty::Quantity(d, range) => {
            // Candidates per dimension, in base units: the first the range holds.
            let candidates: &[(&str, f64)] = match d {
                Dimension::Time => &[("800 ms", 0.8), ("2 us", 2e-6), ("30 s", 30.0)],
                Dimension::Ratio => &[("0.9", 0.9), ("70.6B", 70.6e9), ("2", 2.0)],
                Dimension::Bytes => &[("80 GiB", 80.0 * 1073741824.0), ("64 MiB", 67108864.0)],
                _ => &[],
            };
            let value = candidates
                .iter()
                .find(|(_, v)| range.contains(*v))
                .map_or_else(|| example(&f.ty), |(text, _)| text.to_string());
            format!("{} = {value}", f.name)
        }
        _ => format!("{} = {}", f.name, example(&f.ty)),
    }
}

/// Fields whose type's generic example would not check: text with a shape of its own.
const FIELD_EXAMPLES: &[(&str, &str)] = &[
    ("adapters", "[\"sql=org/sql-lora\"]"),
    ("weight_block", "[128, 128]"),
];

/// The units line of a quantity's reference text: its symbols, or how an amount of money
/// or a plain number is written (they have no unit symbols).
fn units_text(d: Dimension) -> String {
    match d {
        Dimension::Money => "`$` before the amount (`$1200`)".into(),
        Dimension::MoneyRate => {
            "`$` before the amount, a time after it: `/h`, `/min`, `/s`, `/day`, `/month`".into()
        }
        Dimension::Ratio => "none (a plain number; `%`, and `k`, `M`, `B`, `T` magnitudes)".into(),
        _ => d.unit_list(),
    }
}

/// A string each text rule accepts (`crate::text_rules`), for the reference's examples.
fn text_example(rule: crate::text_rules::TextRule) -> &'static str {
    use crate::text_rules::TextRule as R;
    match rule {
        R::Free | R::Argument => "my-text",
        R::EnvAssignment => "NCCL_DEBUG=INFO",
        R::Annotation => "example.com/team=inference",
        R::DnsLabel => "inference",
        R::ResourceName => "rdma/ib",
        R::Image => "vllm/vllm-openai:v0.33.0",
        R::Capability => "IPC_LOCK",
        R::ClassName => "Qwen3MoeForCausalLM",
        R::Interface => "eth0",
        R::Label => "example.com/pool=gpu",
        R::Toleration => "nvidia.com/gpu:NoSchedule",
        R::AbsolutePath => "/mnt/models",
        R::Url => "http://prometheus:9090",
    }
}

/// What an engine option becomes on `vllm serve`'s command line.
fn vllm_text(v: VllmFlag) -> String {
    match v {
        VllmFlag::Value(f) => format!("`{f} VALUE` (always emitted, with the value dic resolved)"),
        VllmFlag::WhenSet(f) => format!("`{f} VALUE` (emitted when set; vLLM's default otherwise)"),
        VllmFlag::Switch { on, off: Some(off) } => format!("`{on}` when true, `{off}` when false"),
        VllmFlag::Switch { on, off: None } => format!("`{on}` when true"),
        VllmFlag::Flags(fs) => format!(
            "{} (each the block sets or implies)",
            fs.iter()
                .map(|f| format!("`{f} VALUE`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        VllmFlag::DicOnly(why) => format!("nothing: dic's own ({why})"),
        VllmFlag::Passthrough => {
            "appended as written, after dic's flags (checked against vLLM 0.33's options)".into()
        }
    }
}

/// A field's reference text: what it is, its type (with units for quantities), whether it
/// is required, the vLLM flag it becomes, and an example. Hover shows this.
pub fn field_text(f: &Field) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", f.doc);
    let _ = write!(out, "- type: {}", f.ty.describe());
    if let Ty::Quantity(d, _) | Ty::Bound(d) = f.ty {
        let _ = write!(out, "; units: {}", units_text(d));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "- {}",
        if f.required { "required" } else { "optional" }
    );
    if let Some(v) = f.vllm {
        let _ = writeln!(out, "- vLLM: {}", vllm_text(v));
    }
    let _ = writeln!(out, "- example: `{}`", entry_example(f));
    out
}

fn fields_section(out: &mut String, heading: &str, fields: &[Field]) {
    for f in fields {
        let _ = writeln!(out, "{heading} `{}`\n", f.name);
        out.push_str(&field_text(f));
        out.push('\n');
        if let Ty::Block(inner) = f.ty {
            let _ = writeln!(out, "Fields of `{} = {{ … }}`:\n", f.name);
            fields_section(out, &format!("{heading}#"), inner);
        }
        if f.ty == Ty::Layout && f.name == "layout" {
            let _ = writeln!(
                out,
                "Fields of a disaggregated `layout = {{ … }}` (prefill and decode pools, vLLM's P/D with the NIXL connector; see `examples/pd_70b_h200.dist`):\n"
            );
            fields_section(
                out,
                &format!("{heading}#"),
                crate::schema::POOL_LAYOUT_FIELDS,
            );
        }
    }
}

/// `docs/language.md`.
pub fn language_reference() -> String {
    let mut out = String::from(
        "# The `.dist` language reference\n\n\
Generated from the compiler's schema (`compiler/src/schema.rs`) by `compiler/src/reference.rs`;\n\
`cargo test` fails when this file is stale (rerun with `DIC_UPDATE_DOCS=1`). The language\n\
server's hover shows the same text for each field.\n\n\
A file is a list of imports and definitions: `kind name [= base] { field = value, … }`.\n\
Each kind is its own namespace. `import std.models.llama_3_1_70b` brings a stdlib\n\
definition in; `import \"./hardware.dist\"` another file's. A definition that extends a\n\
base (`model m = llama_3_1_70b { weights = fp8 }`) inherits its fields and overrides some.\n\n\
## Quantities and units\n\n\
Quantities carry units and are checked dimensionally. Magnitudes `k`, `M`, `B`, `T` are\n\
decimal (`8k tokens` is 8,000 tokens, not 8,192); `GiB` is binary, `GB` decimal.\n\n\
| dimension | written as | units |\n|---|---|---|\n",
    );
    for d in [
        Dimension::Bytes,
        Dimension::Bandwidth,
        Dimension::Time,
        Dimension::Tokens,
        Dimension::TokenRate,
        Dimension::RequestRate,
        Dimension::FlopRate,
        Dimension::Money,
        Dimension::MoneyRate,
        Dimension::Ratio,
    ] {
        let _ = writeln!(out, "| {d:?} | {} | {} |", d.describe(), d.unit_list());
    }
    out.push_str("\n## Layouts\n\n`layout = tp 8 × pp 2 × dp 2`, optionally `× ep`, `dcp N`, `pcp N`; or `auto` (the planner picks).\n\n| factor | meaning |\n|---|---|\n");
    for (f, m) in LAYOUT_FACTORS {
        let _ = writeln!(out, "| `{f}` | {m} |");
    }
    out.push_str("\n## Kinds\n\n");
    for k in Kind::ALL {
        let s = k.schema();
        let _ = writeln!(out, "- [`{}`](#{}): {}", k.keyword(), k.keyword(), s.doc);
    }
    out.push('\n');
    for s in all_schemas() {
        let _ = writeln!(out, "## {}\n\n{}\n", s.kind.keyword(), s.doc);
        fields_section(&mut out, "###", s.fields);
        if s.kind == Kind::Deploy {
            out.push_str(
                "### `engine = vllm { … }` options\n\nIn the order their flags are emitted.\n\n",
            );
            fields_section(&mut out, "####", VLLM_OPTIONS);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_its_text_and_an_example_that_names_it() {
        let text = language_reference();
        for s in all_schemas() {
            for f in s.fields {
                assert!(text.contains(&format!("`{}`", f.name)), "{}", f.name);
                assert!(field_text(f).contains(&format!("`{}", entry_example(f))));
            }
        }
        assert!(text.contains("`--max-model-len VALUE`"));
        assert!(text.contains("`8k tokens` is 8,000 tokens"));
    }
}
