//! The protocol's coordinates ↔ the compiler's: `file://` URIs ↔ the paths the compiler's
//! `World` reads, the read-only documents (the stdlib and the explain pages: virtual
//! `dic-stdlib:`/`dic-explain:` documents for the VS Code extension, files in a cache
//! folder for every other editor), and LSP positions (line + column in the negotiated
//! encoding, UTF-8 or UTF-16) ↔ byte offsets.

use dic_compiler::source::SourceDb;
use dic_compiler::span::{ColumnEncoding, FileId, LineCol, LineIndex, Span};
use lsp_types::{Location, Position, Range, Uri};
use std::str::FromStr;

/// Scheme of the read-only stdlib documents (`dic-stdlib:/std/links.dist`).
pub const STDLIB_SCHEME: &str = "dic-stdlib";
/// Scheme of the explain pages (`dic-explain:/E0201.md`), the diagnostics' code links.
pub const EXPLAIN_SCHEME: &str = "dic-explain";

/// The compiler path of a document: a file path for `file:` URIs, the stdlib's pseudo
/// path for `dic-stdlib:` ones; other schemes get their URI text (checked in memory only).
/// (A stdlib file in the read-only folder maps back through [`Protocol::uri_to_path`].)
pub fn uri_to_path(uri: &Uri) -> String {
    let s = uri.as_str();
    if let Some(rest) = s.strip_prefix("file://") {
        // file:///abs/path (host empty) or file://host/path (host ignored)
        let path = match rest.find('/') {
            Some(i) => &rest[i..],
            None => rest,
        };
        return percent_decode(path);
    }
    if let Some(rest) = s.strip_prefix(&format!("{STDLIB_SCHEME}:")) {
        return percent_decode(rest.trim_start_matches('/'));
    }
    s.to_string()
}

/// The URI of a file the compiler loaded (`std/…` stdlib files get `dic-stdlib:`; see
/// [`Protocol::path_to_uri`] for the folder of files).
pub fn path_to_uri(path: &str, is_stdlib: bool) -> Uri {
    let text = if is_stdlib {
        format!("{STDLIB_SCHEME}:/{}", percent_encode(path))
    } else if path.starts_with('/') {
        format!("file://{}", percent_encode(path))
    } else if path.contains(':') {
        path.to_string()
    } else {
        // relative (only from tests' in-memory worlds)
        format!("file:///{}", percent_encode(path))
    };
    Uri::from_str(&text).unwrap_or_else(|_| Uri::from_str("file:///invalid").expect("valid uri"))
}

pub fn explain_uri(code: &str) -> Option<Uri> {
    Uri::from_str(&format!("{EXPLAIN_SCHEME}:/{code}.md")).ok()
}

fn percent_encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the read-only documents live for this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnlyDocs {
    /// `dic-stdlib:` and `dic-explain:` URIs, served by `dic/virtualDocument` (the VS Code
    /// extension asks for this in its initialization options).
    Virtual,
    /// Files under this folder (`std/…`, `explain/CODE.md`) that any editor opens
    /// (written once per dic version by [`crate::docs_folder`]).
    Folder(&'static str),
}

/// What was negotiated with this client: the position encoding for position ↔ offset
/// conversion, and where the read-only documents live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    pub columns: ColumnEncoding,
    pub docs: ReadOnlyDocs,
}

impl Protocol {
    /// Positions in `columns`, read-only documents virtual.
    pub fn new(columns: ColumnEncoding) -> Protocol {
        Protocol {
            columns,
            docs: ReadOnlyDocs::Virtual,
        }
    }

    /// The compiler path of a document; a stdlib file in the read-only folder is the
    /// stdlib's own path (`std/models.dist`), so it is treated as the stdlib.
    pub fn uri_to_path(self, uri: &Uri) -> String {
        let path = uri_to_path(uri);
        if let ReadOnlyDocs::Folder(folder) = self.docs {
            if let Some(rest) = path.strip_prefix(folder) {
                if let Some(std) = rest.strip_prefix('/').filter(|r| r.starts_with("std/")) {
                    return std.to_string();
                }
            }
        }
        path
    }

    /// The URI of a file the compiler loaded: stdlib files in the read-only folder or
    /// virtual.
    pub fn path_to_uri(self, path: &str, is_stdlib: bool) -> Uri {
        match self.docs {
            ReadOnlyDocs::Folder(folder) if is_stdlib => {
                path_to_uri(&format!("{folder}/{path}"), false)
            }
            _ => path_to_uri(path, is_stdlib),
        }
    }

    /// The explain page of a diagnostic code (the code's link).
    pub fn explain_uri(self, code: &str) -> Option<Uri> {
        match self.docs {
            ReadOnlyDocs::Folder(folder) => {
                Some(path_to_uri(&format!("{folder}/explain/{code}.md"), false))
            }
            ReadOnlyDocs::Virtual => explain_uri(code),
        }
    }

    pub fn position(self, lines: &LineIndex, text: &str, offset: usize) -> Position {
        let lc = lines.line_col(text, offset, self.columns);
        Position::new(lc.line, lc.character)
    }

    pub fn range(self, lines: &LineIndex, text: &str, span: Span) -> Range {
        Range::new(
            self.position(lines, text, span.start as usize),
            self.position(lines, text, span.end as usize),
        )
    }

    pub fn offset(self, lines: &LineIndex, text: &str, pos: Position) -> usize {
        lines.offset(
            text,
            LineCol {
                line: pos.line,
                character: pos.character,
            },
            self.columns,
        )
    }

    /// A span of a file the compiler loaded, as a protocol location.
    pub fn location(self, db: &SourceDb, file: FileId, span: Span) -> Location {
        let f = db.get(file);
        Location::new(
            self.path_to_uri(&f.name, f.is_stdlib),
            self.range(&f.lines, &f.text, span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_uris() {
        for p in ["/work/a b/prod.dist", "/tmp/日本/x.dist", "/x/100%.dist"] {
            assert_eq!(uri_to_path(&path_to_uri(p, false)), p);
        }
        assert_eq!(
            path_to_uri("std/links.dist", true).as_str(),
            "dic-stdlib:/std/links.dist"
        );
        assert_eq!(
            uri_to_path(&path_to_uri("std/links.dist", true)),
            "std/links.dist"
        );
    }

    #[test]
    fn read_only_documents_in_a_folder_are_files_that_map_back_to_the_stdlib() {
        let p = Protocol {
            columns: ColumnEncoding::Utf16,
            docs: ReadOnlyDocs::Folder("/home/u/.cache/dic/docs-0.1.0-abc"),
        };
        let uri = p.path_to_uri("std/links.dist", true);
        assert_eq!(
            uri.as_str(),
            "file:///home/u/.cache/dic/docs-0.1.0-abc/std/links.dist"
        );
        assert_eq!(p.uri_to_path(&uri), "std/links.dist");
        // The user's own files stay themselves, even in that folder.
        let own = p.path_to_uri("/home/u/.cache/dic/docs-0.1.0-abc/mine.dist", false);
        assert_eq!(
            p.uri_to_path(&own),
            "/home/u/.cache/dic/docs-0.1.0-abc/mine.dist"
        );
        assert_eq!(
            p.explain_uri("E0201").unwrap().as_str(),
            "file:///home/u/.cache/dic/docs-0.1.0-abc/explain/E0201.md"
        );
        assert_eq!(
            Protocol::new(ColumnEncoding::Utf8)
                .explain_uri("E0201")
                .unwrap()
                .as_str(),
            "dic-explain:/E0201.md"
        );
    }
}
