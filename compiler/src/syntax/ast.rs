//! The abstract syntax tree of one `.dist` file.
//!
//! Produced by [`super::parser`]; every node carries a byte [`Span`] into its file.
//! No pest type appears here. A file that failed to parse in places still yields the
//! items that did parse (recovery happens at item boundaries), plus diagnostics.

use crate::span::{Span, Spanned};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceAst {
    pub items: Vec<Item>,
    /// Comments, in source order (kept for the formatter and hover docs).
    pub comments: Vec<Comment>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    pub span: Span,
    /// The comment text including its `//` or `/* */`.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Import(Import),
    Definition(Definition),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Import(i) => i.span,
            Item::Definition(d) => d.span,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImportTarget {
    /// `import std.models.llama_3_1_70b` or `import std.gpus.*`: dotted segments;
    /// a trailing `*` segment imports every item of the module.
    Module(Vec<Spanned<String>>),
    /// `import "./hardware.dist"`: every definition of that file.
    File(Spanned<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub target: ImportTarget,
    pub span: Span,
}

/// `kind name [= base] [{ entries }]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub kind: Spanned<String>,
    pub name: Spanned<String>,
    pub base: Option<Spanned<String>>,
    /// Shared, so resolved definitions point at their bodies without copying them.
    pub body: Option<Arc<Block>>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub entries: Vec<Entry>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Op {
    Assign,
    Le,
    Ge,
    Lt,
    Gt,
    Eq,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Assign => "=",
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Eq => "==",
        }
    }
}

/// `key op value`, e.g. `memory = 80 GiB` or `ttft.p95 <= 800 ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Dotted key segments (`ttft.p95` → `["ttft", "p95"]`).
    pub key: Vec<Spanned<String>>,
    pub key_span: Span,
    pub op: Spanned<Op>,
    pub value: Expr,
    pub span: Span,
}

impl Entry {
    pub fn key_text(&self) -> String {
        self.key
            .iter()
            .map(|k| k.node.as_str())
            .collect::<Vec<_>>()
            .join(".")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// `80 GiB`, `0.9`, `2k tokens`, `90%`. `text` is the number as written.
    Quantity {
        value: f64,
        text: String,
        unit: Option<Spanned<String>>,
    },
    /// `$55.04/h`: the amount and the time unit after the slash, if any.
    Money {
        value: f64,
        text: String,
        per: Option<Spanned<String>>,
    },
    Str(String),
    /// `name`, `tp 8`, `vllm { … }`, `llama_3_1_70b { weights = fp8 }`.
    Reference {
        name: Spanned<String>,
        count: Option<Spanned<u64>>,
        overrides: Option<Block>,
    },
    /// `[a, b]`
    List(Vec<Expr>),
    /// `{ a = 1 }` without a name.
    Object(Block),
    /// `2 × p5_48xlarge`, `tp 8 × pp 2`: two or more factors.
    Product(Vec<Expr>),
}
