//! The standard library: `.dist` sources embedded in the binary.
//!
//! Each file is a module (`std/gpus.dist` is `std.gpus`). They are ordinary source:
//! parsed by the same parser (once per process, cached), served to the resolver under
//! their pseudo paths so diagnostics and "defined here" labels can point into them, and
//! tested to check clean. Every figure in them cites its source in a comment.

use crate::span::FileId;
use crate::syntax::ast::{Expr, ExprKind, Item, SourceAst};
use std::sync::{Arc, OnceLock};

/// One embedded module.
pub struct StdModule {
    /// Dotted module name, e.g. `std.instances.aws`.
    pub module: &'static str,
    /// Pseudo path shown in diagnostics, e.g. `std/instances/aws.dist`.
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! module {
    ($module:literal, $file:literal) => {
        StdModule {
            module: $module,
            path: concat!("std/", $file),
            text: include_str!(concat!("../../stdlib/", $file)),
        }
    };
}

pub static MODULES: &[StdModule] = &[
    module!("std.gpus", "gpus.dist"),
    module!("std.links", "links.dist"),
    module!("std.networks", "networks.dist"),
    module!("std.nodes", "nodes.dist"),
    module!("std.instances.aws", "instances/aws.dist"),
    module!("std.instances.gcp", "instances/gcp.dist"),
    module!("std.instances.azure", "instances/azure.dist"),
    module!("std.instances.lambda", "instances/lambda.dist"),
    module!("std.models", "models.dist"),
];

pub fn module(name: &str) -> Option<(usize, &'static StdModule)> {
    MODULES.iter().enumerate().find(|(_, m)| m.module == name)
}

pub fn by_path(path: &str) -> Option<(usize, &'static StdModule)> {
    MODULES.iter().enumerate().find(|(_, m)| m.path == path)
}

/// The parsed AST of every module, parsed once per process. Parse errors in the stdlib
/// are a bug caught by the stdlib tests; here they leave the items that did parse.
pub fn parsed(index: usize) -> Arc<SourceAst> {
    static PARSED: OnceLock<Vec<Arc<SourceAst>>> = OnceLock::new();
    PARSED.get_or_init(|| {
        MODULES
            .iter()
            .map(|m| Arc::new(crate::syntax::parse(m.text, FileId(0)).0))
            .collect()
    })[index]
        .clone()
}

/// Names of the definitions of a module, with their kind keyword.
pub fn items(index: usize) -> Vec<(String, String)> {
    parsed(index)
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Definition(d) => Some((d.kind.node.clone(), d.name.node.clone())),
            Item::Import(_) => None,
        })
        .collect()
}

/// Every stdlib definition: (module index, kind keyword, name).
pub fn all_items() -> Vec<(usize, String, String)> {
    (0..MODULES.len())
        .flat_map(|m| items(m).into_iter().map(move |(k, n)| (m, k, n)))
        .collect()
}

/// Where a stdlib definition of this name lives.
pub fn find(name: &str) -> Option<(usize, String)> {
    all_items()
        .into_iter()
        .find(|(_, _, n)| n == name)
        .map(|(m, k, _)| (m, k))
}

/// Normalises a GPU name for matching: lower case, letters and digits only.
pub fn normalize_gpu_name(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(|c| c.to_lowercase())
        .collect()
}

/// Finds a stdlib GPU by its definition name or by a name as `nvidia-smi` prints it
/// ("NVIDIA H100 80GB HBM3"), case- and separator-insensitively. Returns (module, name).
pub fn find_gpu(query: &str) -> Option<(usize, String)> {
    let q = normalize_gpu_name(query);
    let q_short = q.strip_prefix("nvidia").unwrap_or(&q).to_string();
    for (m, _) in MODULES.iter().enumerate() {
        for item in &parsed(m).items {
            let Item::Definition(d) = item else { continue };
            if d.kind.node != "gpu" {
                continue;
            }
            let mut names = vec![d.name.node.clone()];
            if let Some(body) = &d.body {
                for e in &body.entries {
                    if e.key_text() == "names" {
                        if let ExprKind::List(items) = &e.value.kind {
                            names.extend(items.iter().filter_map(|x: &Expr| match &x.kind {
                                ExprKind::Str(s) => Some(s.clone()),
                                _ => None,
                            }));
                        }
                    }
                }
            }
            for n in names {
                let n = normalize_gpu_name(&n);
                let n_short = n.strip_prefix("nvidia").unwrap_or(&n);
                if n == q || n_short == q_short {
                    return Some((m, d.name.node.clone()));
                }
            }
        }
    }
    None
}
