//! The language features, each a pure function of a [`Snapshot`](crate::snapshot::Snapshot)
//! (and the request's position) to protocol values.

pub mod actions;
pub mod completion;
pub mod diagnostics;
pub mod hover;
pub mod navigation;
