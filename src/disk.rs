//! The CLI's [`World`]: files on disk. The only place the compiler's input touches the
//! filesystem.
//!
//! Every input file dic reads (a `.dist` file or import, a `config.json`, a plan) goes
//! through [`read_regular`]: regular files only (a FIFO, `/dev/zero`, `/dev/stdin` or a
//! socket would block or never end) and at most [`MAX_INPUT_BYTES`], so a read is
//! bounded in time and memory. Imports are identified by their canonical path
//! ([`World::identity`]), so links to `.` cannot multiply one file into 2^N paths.

use dic_compiler::source::{ReadError, World};
use std::io::Read;

/// The largest input file dic reads: 100× the largest real `.dist` file or model config.
pub const MAX_INPUT_BYTES: u64 = dic_compiler::source::MAX_SOURCE_BYTES as u64;

/// The bytes of a regular file of at most `max` bytes.
pub fn read_regular(path: &std::path::Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let not_found = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Other(e.to_string()),
    };
    let meta = std::fs::metadata(path).map_err(not_found)?;
    if meta.is_dir() {
        return Err(ReadError::IsADirectory);
    }
    if !meta.is_file() {
        return Err(ReadError::Other(
            "is not a regular file (a device, pipe or socket); dic reads only files".into(),
        ));
    }
    let too_big = |n: u64| {
        ReadError::Other(format!(
            "is {:.1} MiB; dic reads input files of at most {} MiB",
            n as f64 / 1048576.0,
            max >> 20
        ))
    };
    if meta.len() > max {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .map_err(not_found)?
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Other(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text, with the error as a sentence.
pub fn read_text(path: &std::path::Path) -> Result<String, String> {
    let bytes = read_regular(path, MAX_INPUT_BYTES).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| "is not valid UTF-8".to_string())
}

pub struct DiskWorld;

impl World for DiskWorld {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        read_regular(std::path::Path::new(path), MAX_INPUT_BYTES)
    }

    fn identity(&self, path: &str) -> Option<String> {
        std::fs::canonicalize(path)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
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

/// The name standard input goes by (`dic check -`, `dic plan -`, `dic compile -`): in
/// diagnostics, summaries and JSON alike. Its imports resolve from the current folder.
pub const STDIN_LABEL: &str = "<stdin>";

/// The disk, plus standard input under [`STDIN_LABEL`] when the command was given `-`.
pub struct InputWorld {
    stdin: Option<Vec<u8>>,
}

impl InputWorld {
    /// The world to read `path` through and the name to check it under: `-` reads
    /// standard input now (bounded like any file), any other path stays on disk.
    pub fn for_path(path: &str) -> Result<(InputWorld, String), String> {
        if path != "-" {
            return Ok((InputWorld { stdin: None }, path.to_string()));
        }
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            return Err(format!(
                "standard input is over {} MiB",
                MAX_INPUT_BYTES >> 20
            ));
        }
        Ok((InputWorld { stdin: Some(bytes) }, STDIN_LABEL.to_string()))
    }
}

impl World for InputWorld {
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        match &self.stdin {
            Some(bytes) if path == STDIN_LABEL => Ok(bytes.clone()),
            _ => DiskWorld.read(path),
        }
    }

    fn identity(&self, path: &str) -> Option<String> {
        match &self.stdin {
            Some(_) if path == STDIN_LABEL => None,
            _ => DiskWorld.identity(path),
        }
    }
}
