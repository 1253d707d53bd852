//! The editor's open documents, and the compiler `World` that overlays them on the disk:
//! an import of an open file sees its unsaved text.

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

/// Open documents first, then the disk.
pub struct OverlayWorld<'a> {
    pub documents: &'a Documents,
}

impl World for OverlayWorld<'_> {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        if let Some(d) = self.documents.get(path) {
            return Ok(d.text.as_bytes().to_vec());
        }
        let p = std::path::Path::new(path);
        if p.is_dir() {
            return Err(ReadError::IsADirectory);
        }
        std::fs::read(p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::NotFound,
            _ => ReadError::Other(e.to_string()),
        })
    }
}
