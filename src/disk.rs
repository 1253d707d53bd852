//! The CLI's [`World`]: files on disk. The only place the compiler's input touches the
//! filesystem.

use dic_compiler::source::{ReadError, World};

pub struct DiskWorld;

impl World for DiskWorld {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
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
