//! dic's compiler core.
//!
//! A one-way pipeline with no IO: source text arrives through [`source::World`], is
//! parsed ([`syntax`]), resolved across files and the stdlib ([`resolve`]), and checked
//! for types and units into a typed [`program::Program`] ([`check`]). Later stages
//! (analysis, planning, IR) read only that program. The CLI, the language server and
//! the tests all drive [`driver`].

pub mod analysis;
pub mod architecture;
pub mod check;
pub mod diagnostics;
pub mod driver;
pub mod front;
pub mod import_hf;
pub mod ir;
pub mod layers;
pub mod observe;
pub mod planner;
pub mod program;
pub mod reference;
pub mod resolve;
pub mod sample;
pub mod schema;
pub mod secrets;
pub mod source;
pub mod span;
pub mod stdlib;
pub mod syntax;
pub mod text_rules;
pub mod units;
pub mod vllm_args;
