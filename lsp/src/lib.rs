//! dic's language server (`dic lsp`): the compiler's diagnostics, hovers, navigation,
//! completion, formatting and quick fixes in editors, over stdio. Synchronous and ordered:
//! one loop handles every message in turn; diagnostics are debounced and a result for a
//! version the editor has already replaced is dropped.
//!
//! - [`convert`]: URIs ↔ compiler paths, LSP positions ↔ byte offsets (UTF-8 or UTF-16)
//! - [`docs_folder`]: the stdlib and explain pages as files, for editors without virtual
//!   documents
//! - [`documents`]: open documents and the world that overlays them on the disk
//! - [`snapshot`]: one check of one document and its name occurrences
//! - [`features`]: diagnostics, hover, definition/references/symbols, completion, actions
//! - [`server`]: the message loop

pub mod convert;
pub mod docs_folder;
pub mod documents;
pub mod features;
pub mod server;
pub mod snapshot;
pub mod transport;

pub use server::{run_stdio, Server};
