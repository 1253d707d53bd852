//! Syntax: the `.dist` grammar's parser, AST and formatter.
//!
//! Input: source text. Output: [`ast::SourceAst`] plus diagnostics. The pest types
//! stay inside [`parser`]; everything downstream sees only the AST.

pub mod ast;
pub mod fmt;
pub mod parser;
mod trivia;

pub use parser::parse;
