//! A small scanner for what the grammar skips: whitespace and comments.
//!
//! The parser uses it to find where the next item starts, to collect comments for the
//! formatter, and to reject pathological input (unterminated comments, nesting deeper
//! than [`MAX_NESTING`]) before pest's recursive descent sees it.

use crate::span::Span;

/// Deepest `{`/`[` nesting accepted. Real files nest 3–4 levels.
pub const MAX_NESTING: usize = 64;

pub struct Scan {
    pub comments: Vec<(Span, String)>,
    /// Start of an unterminated block comment, if any.
    pub unterminated_comment: Option<usize>,
    /// Offset of the first bracket that exceeds [`MAX_NESTING`].
    pub too_deep_at: Option<usize>,
}

/// Walks the whole text once, tracking strings so that `//` inside a string is not a comment.
pub fn scan(text: &str) -> Scan {
    let bytes = text.as_bytes();
    let mut out = Scan {
        comments: Vec::new(),
        unterminated_comment: None,
        too_deep_at: None,
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map(|n| i + n).unwrap_or(text.len());
                let comment = text[i..end].trim_end_matches('\r');
                out.comments
                    .push((Span::new(i, i + comment.len()), comment.to_string()));
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => match text[i + 2..].find("*/") {
                Some(n) => {
                    let end = i + 2 + n + 2;
                    out.comments
                        .push((Span::new(i, end), text[i..end].to_string()));
                    i = end;
                }
                None => {
                    out.unterminated_comment = Some(i);
                    return out;
                }
            },
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING && out.too_deep_at.is_none() {
                    out.too_deep_at = Some(i);
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The offset of the first byte at or after `pos` that is neither whitespace nor comment.
pub fn skip(text: &str, mut pos: usize) -> usize {
    let bytes = text.as_bytes();
    loop {
        while pos < bytes.len() && (bytes[pos].is_ascii_whitespace()) {
            pos += 1;
        }
        if text[pos..].starts_with("\u{FEFF}") {
            pos += 3;
            continue;
        }
        if text[pos..].starts_with("//") {
            pos = text[pos..]
                .find('\n')
                .map(|n| pos + n)
                .unwrap_or(text.len());
            continue;
        }
        if text[pos..].starts_with("/*") {
            pos = text[pos + 2..]
                .find("*/")
                .map(|n| pos + 2 + n + 2)
                .unwrap_or(text.len());
            continue;
        }
        return pos;
    }
}

/// Where to resume after a syntax error at `err`: the next line that starts (column 0)
/// with an identifier character, i.e. the next top-level item, or the end of the text.
pub fn recovery_point(text: &str, err: usize) -> usize {
    let mut pos = err;
    while let Some(n) = text[pos..].find('\n') {
        pos += n + 1;
        match text.as_bytes().get(pos) {
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => return pos,
            _ => {}
        }
    }
    text.len()
}
