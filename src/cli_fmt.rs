//! `dic fmt`: formats files in place (atomically), or with `--check` reports the ones
//! that are not formatted. A file with syntax errors is never rewritten.

use dic::exit::{ERRORS as EXIT_ERRORS, OK as EXIT_OK, USAGE as EXIT_USAGE};
use dic::render;
use dic_compiler::source::SourceDb;
use std::sync::Arc;

pub fn run(files: &[String], check: bool) -> u8 {
    let mut code = EXIT_OK;
    for path in files {
        let text =
            match dic::disk::read_regular(std::path::Path::new(path), dic::disk::MAX_INPUT_BYTES) {
                Ok(b) => match String::from_utf8(b) {
                    Ok(t) => t,
                    Err(_) => {
                        eprintln!("error[E0105]: `{path}` is not valid UTF-8; not formatted");
                        code = code.max(EXIT_ERRORS);
                        continue;
                    }
                },
                Err(e) => {
                    eprintln!("error: cannot read `{path}`: {e}");
                    code = EXIT_USAGE;
                    continue;
                }
            };
        let mut db = SourceDb::new();
        let file = db.add(path, Arc::from(text.as_str()), false);
        let (ast, diags) = dic_compiler::syntax::parse(&text, file);
        if !diags.is_empty() {
            eprint!("{}", render::human(&db, &diags, false, 100));
            eprintln!("{path}: not formatted: fix the syntax errors first");
            code = code.max(EXIT_ERRORS);
            continue;
        }
        let formatted = dic_compiler::syntax::fmt::format(&text, &ast);
        if formatted == text {
            continue;
        }
        if check {
            println!("{path}: not formatted");
            code = code.max(EXIT_ERRORS);
            continue;
        }
        if let Err(e) = dic::disk::write_atomic(std::path::Path::new(path), &formatted) {
            eprintln!("error: cannot write `{path}`: {e}");
            code = EXIT_USAGE;
        } else {
            println!("{path}: formatted");
        }
    }
    code
}
