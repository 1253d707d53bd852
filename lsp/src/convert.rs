//! The protocol's coordinates ↔ the compiler's: `file://` URIs ↔ the paths the compiler's
//! `World` reads, the virtual `dic-stdlib:` and `dic-explain:` documents, and LSP
//! positions (line + column in the negotiated encoding, UTF-8 or UTF-16) ↔ byte offsets.

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

/// The URI of a file the compiler loaded (`std/…` stdlib files get `dic-stdlib:`).
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

/// Position ↔ offset conversion in the negotiated encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding(pub ColumnEncoding);

impl Encoding {
    pub fn position(self, lines: &LineIndex, text: &str, offset: usize) -> Position {
        let lc = lines.line_col(text, offset, self.0);
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
            self.0,
        )
    }

    /// A span of a file the compiler loaded, as a protocol location.
    pub fn location(self, db: &SourceDb, file: FileId, span: Span) -> Location {
        let f = db.get(file);
        Location::new(
            path_to_uri(&f.name, f.is_stdlib),
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
}
