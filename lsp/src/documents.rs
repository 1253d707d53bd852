//! The editor's open documents, and the compiler `World` that overlays them on the files
//! the CLI reads: an import of an open file sees its unsaved text.

use dic_compiler::source::{ReadError, World};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Document {
    pub version: i32,
    pub text: Arc<str>,
}

/// Open documents by compiler path.
#[derive(Debug, Default, Clone)]
pub struct Documents {
    open: BTreeMap<String, Document>,
}

impl Documents {
    pub fn open(&mut self, path: String, version: i32, text: String) {
        self.open.insert(
            path,
            Document {
                version,
                text: text.into(),
            },
        );
    }

    /// Full-text change; returns false for a document that is not open.
    pub fn change(&mut self, path: &str, version: i32, text: String) -> bool {
        match self.open.get_mut(path) {
            Some(d) => {
                d.version = version;
                d.text = text.into();
                true
            }
            None => false,
        }
    }

    pub fn close(&mut self, path: &str) {
        self.open.remove(path);
    }

    pub fn get(&self, path: &str) -> Option<&Document> {
        self.open.get(path)
    }

    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.open.keys()
    }
}

/// Open documents first, then `files` (the CLI's disk world; the server itself does no
/// file IO).
pub struct OverlayWorld<'a> {
    pub documents: &'a Documents,
    pub files: &'a dyn World,
}

impl World for OverlayWorld<'_> {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        match self.documents.get(path) {
            Some(d) => Ok(d.text.as_bytes().to_vec()),
            None => self.files.read(path),
        }
    }
}
