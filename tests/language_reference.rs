//! `docs/language.md` is the language reference generated from the schema
//! (`dic_compiler::reference`): this test fails when the file is stale. Rerun with
//! `DIC_UPDATE_DOCS=1` to rewrite it, and review the diff.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

#[test]
fn the_language_reference_is_current() {
    let text = dic_compiler::reference::language_reference();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md");
    if std::env::var("DIC_UPDATE_DOCS").is_ok() {
        std::fs::write(path, &text).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        stored == text,
        "docs/language.md is stale: rerun with DIC_UPDATE_DOCS=1 and review the diff"
    );
}

/// Every example the reference gives checks where it is written: each field's example
/// entry, in a definition of its kind (an engine option inside `engine = vllm { … }`),
/// draws none of the errors about a value — unknown field, type, unit, range, option,
/// operator. (Missing required fields and the example's placeholder names, `my_gpu`, are
/// not the example's to give.)
#[test]
fn every_example_in_the_reference_checks() {
    use dic_compiler::diagnostics::Code;
    use dic_compiler::schema::{all_schemas, VLLM_OPTIONS};
    let about_the_value = [
        Code::UnknownField,
        Code::TypeMismatch,
        Code::UnitMismatch,
        Code::UnknownUnit,
        Code::OutOfRange,
        Code::UnknownOption,
        Code::WrongOperator,
        Code::InvalidLayout,
        Code::InvalidText,
    ];
    let mut cases = Vec::new();
    for s in all_schemas() {
        for f in s.fields {
            let entry = dic_compiler::reference::entry_example(f);
            cases.push(format!("{} x {{ {entry} }}\n", s.kind.keyword()));
        }
    }
    for f in VLLM_OPTIONS {
        let entry = dic_compiler::reference::entry_example(f);
        cases.push(format!("deploy x {{ engine = vllm {{ {entry} }} }}\n"));
    }
    let mut wrong = Vec::new();
    for text in &cases {
        let world = dic_compiler::source::MemoryWorld::new().with("e.dist", text);
        let checked = dic_compiler::driver::check_text(&world, "e.dist", text);
        for d in &checked.diagnostics {
            // The model's rules between fields (`experts` needs `experts_per_token`,
            // `dense_layers` within `layers`) ask for the other fields, not another value.
            let between_fields = (d.code == Code::OutOfRange
                && (d.message.contains(" needs ") || d.message.contains(" exceeds `")))
                || d.message.contains(", the model has ");
            if about_the_value.contains(&d.code) && !between_fields {
                wrong.push(format!("{}: {} {}", text.trim(), d.code, d.message));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} examples do not check:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
