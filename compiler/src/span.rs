//! Byte spans and line/column conversion.
//!
//! Every AST node carries a [`Span`]: a half-open byte range inside one source file,
//! identified by [`FileId`]. Line/column positions are computed only at the edges
//! (terminal rendering, the language server) through [`LineIndex`], which also knows
//! UTF-16 columns for LSP clients that negotiate them.

use serde::Serialize;

/// Index of a file in [`crate::source::SourceDb`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FileId(pub u32);

/// A half-open byte range `[start, end)` in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: clamp_u32(start),
            end: clamp_u32(end.max(start)),
        }
    }
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
    pub fn contains(&self, offset: usize) -> bool {
        (self.start as usize) <= offset && offset <= (self.end as usize)
    }
    pub fn shifted(self, by: usize) -> Span {
        Span::new(self.start as usize + by, self.end as usize + by)
    }
}

fn clamp_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A span together with the file it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FileSpan {
    pub file: FileId,
    pub span: Span,
}

impl FileSpan {
    pub fn new(file: FileId, span: Span) -> FileSpan {
        FileSpan { file, span }
    }
}

/// A value with the span it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub node: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(node: T, span: Span) -> Self {
        Spanned { node, span }
    }
}

/// Zero-based line and column. `character` counts in the unit the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LineCol {
    pub line: u32,
    pub character: u32,
}

/// How columns are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnEncoding {
    Utf8,
    Utf16,
    /// Unicode scalar values (what a terminal user counts as characters).
    Chars,
}

/// Line starts of one text, for byte offset ↔ (line, column) conversion.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    /// Lines made only of ASCII: every encoding's column is the byte count there, so a
    /// position on a long line costs O(1), not a walk from the line's start.
    ascii: Vec<bool>,
    len: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut line_starts = vec![0];
        let mut ascii = Vec::new();
        let mut line_ascii = true;
        for (i, b) in text.bytes().enumerate() {
            line_ascii &= b.is_ascii();
            if b == b'\n' {
                line_starts.push(i + 1);
                ascii.push(line_ascii);
                line_ascii = true;
            }
        }
        ascii.push(line_ascii);
        LineIndex {
            line_starts,
            ascii,
            len: text.len(),
        }
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Byte offset of the start of `line` (clamped to the text).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line).copied().unwrap_or(self.len)
    }

    /// Position of `offset` (clamped to the text and to a char boundary).
    pub fn line_col(&self, text: &str, offset: usize, enc: ColumnEncoding) -> LineCol {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = match self.line_starts.binary_search(&offset) {
            Ok(l) => l,
            Err(l) => l - 1,
        };
        let start = self.line_starts[line];
        let segment = &text[start..offset];
        let character = match enc {
            _ if self.ascii.get(line) == Some(&true) => segment.len(),
            ColumnEncoding::Utf8 => segment.len(),
            ColumnEncoding::Utf16 => segment.chars().map(char::len_utf16).sum(),
            ColumnEncoding::Chars => segment.chars().count(),
        };
        LineCol {
            line: line as u32,
            character: character as u32,
        }
    }

    /// Byte offset of a position; a column past the end of its line clamps to the line end
    /// (before `\r\n`), and a line past the end clamps to the end of the text.
    pub fn offset(&self, text: &str, pos: LineCol, enc: ColumnEncoding) -> usize {
        let line = pos.line as usize;
        if line >= self.line_starts.len() {
            return text.len();
        }
        let start = self.line_starts[line];
        let end = self
            .line_starts
            .get(line + 1)
            .map(|s| s - 1)
            .unwrap_or(text.len());
        let mut line_text = &text[start..end];
        if let Some(stripped) = line_text.strip_suffix('\r') {
            line_text = stripped;
        }
        let mut count = 0u32;
        for (i, ch) in line_text.char_indices() {
            if count >= pos.character {
                return start + i;
            }
            count += match enc {
                ColumnEncoding::Utf8 => ch.len_utf8() as u32,
                ColumnEncoding::Utf16 => ch.len_utf16() as u32,
                ColumnEncoding::Chars => 1,
            };
        }
        start + line_text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_columns_count_surrogate_pairs() {
        let text = "a = 1\n// 😀 名 x\r\nb";
        let idx = LineIndex::new(text);
        let x = text.find('x').unwrap();
        let pos = idx.line_col(text, x, ColumnEncoding::Utf16);
        assert_eq!(
            pos,
            LineCol {
                line: 1,
                character: 8
            }
        );
        assert_eq!(idx.offset(text, pos, ColumnEncoding::Utf16), x);
        let pos8 = idx.line_col(text, x, ColumnEncoding::Utf8);
        assert_eq!(pos8.character, 3 + 4 + 1 + 3 + 1);
        assert_eq!(idx.offset(text, pos8, ColumnEncoding::Utf8), x);
        // past the end of a CRLF line clamps before the \r
        let eol = idx.offset(
            text,
            LineCol {
                line: 1,
                character: 99,
            },
            ColumnEncoding::Utf16,
        );
        assert_eq!(&text[eol..eol + 2], "\r\n");
        assert_eq!(
            idx.line_col(text, text.len(), ColumnEncoding::Chars).line,
            2
        );
    }
}
