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

/// Write `text` to `path` through a temporary file and a rename, so a reader (or a crash)
/// sees the old file or the new one, never half of one.
pub fn write_atomic(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".dic.tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
