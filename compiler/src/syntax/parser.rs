//! The parser: `.dist` text → [`SourceAst`] + diagnostics.
//!
//! pest parses one top-level item at a time; on a syntax error the parser reports it
//! (with friendly names for the expected tokens), skips to the next line that starts
//! an item, and goes on, so a partial AST always comes back. pest's types never leave
//! this module. Input that could exhaust the stack (nesting beyond
//! [`trivia::MAX_NESTING`]) is rejected before pest runs.

use super::ast::*;
use super::trivia;
use crate::diagnostics::{Code, Diagnostic};
use crate::span::{FileId, Span, Spanned};
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser as _;

#[derive(pest_derive::Parser)]
#[grammar = "../../grammar/dist.pest"]
struct DistParser;

/// Parses one file. Never panics; every problem becomes a diagnostic.
pub fn parse(text: &str, file: FileId) -> (SourceAst, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let mut ast = SourceAst::default();
    let scan = trivia::scan(text);
    ast.comments = scan
        .comments
        .into_iter()
        .map(|(span, text)| Comment { span, text })
        .collect();
    if let Some(at) = scan.too_deep_at {
        diags.push(
            Diagnostic::new(
                Code::NestingTooDeep,
                format!("nesting deeper than {} levels", trivia::MAX_NESTING),
            )
            .primary(file, Span::new(at, at + 1), "this bracket is too deep")
            .help("flatten the structure: .dist values need only a few levels"),
        );
        return (ast, diags);
    }
    let limit = match scan.unterminated_comment {
        Some(at) => {
            diags.push(
                Diagnostic::new(Code::Unterminated, "unterminated block comment")
                    .primary(file, Span::new(at, at + 2), "this comment is never closed")
                    .help("close it with `*/`"),
            );
            at
        }
        None => text.len(),
    };
    let text = &text[..limit];

    // Fast path: a file without syntax errors is one pest call.
    if let Ok(mut pairs) = DistParser::parse(Rule::file, text) {
        let mut lower = Lower {
            file,
            base: 0,
            text,
            comments: &ast.comments,
            diags: &mut diags,
        };
        let items: Vec<Item> = pairs
            .next()
            .map(|f| {
                f.into_inner()
                    .filter(|p| p.as_rule() == Rule::item)
                    .filter_map(|p| lower.item(p))
                    .collect()
            })
            .unwrap_or_default();
        ast.items = items;
        return (ast, diags);
    }

    // Recovery path: one item at a time, resuming after each error at the next line that
    // starts an item. Each item is first parsed within its own stretch of text (up to the
    // next top-level line) so that pest's per-call setup stays proportional to the item.
    let mut pos = trivia::skip(text, 0);
    while pos < text.len() {
        let boundary = trivia::recovery_point(text, pos);
        let mut attempt = DistParser::parse(Rule::item, &text[pos..boundary]);
        if let Err(e) = &attempt {
            let at = match e.location {
                InputLocation::Pos(p) => p,
                InputLocation::Span((s, _)) => s,
            };
            if pos + at >= boundary && boundary < text.len() {
                // The item runs past its stretch (a block continues at column 0): retry on the rest.
                attempt = DistParser::parse(Rule::item, &text[pos..]);
            }
        }
        match attempt {
            Ok(mut pairs) => {
                let Some(pair) = pairs.next() else { break };
                let end = pos + pair.as_span().end();
                let mut lower = Lower {
                    file,
                    base: pos,
                    text,
                    comments: &ast.comments,
                    diags: &mut diags,
                };
                if let Some(item) = lower.item(pair) {
                    ast.items.push(item);
                }
                if end <= pos {
                    break;
                }
                pos = trivia::skip(text, end);
            }
            Err(err) => {
                let at = match err.location {
                    InputLocation::Pos(p) => pos + p,
                    InputLocation::Span((s, _)) => pos + s,
                };
                diags.push(syntax_error(text, file, at, &err.variant));
                let next = trivia::recovery_point(text, at);
                pos = trivia::skip(text, next.max(pos + 1).min(text.len()));
            }
        }
    }
    (ast, diags)
}

fn syntax_error(text: &str, file: FileId, at: usize, variant: &ErrorVariant<Rule>) -> Diagnostic {
    let found = describe_found(text, at);
    // An opening quote with no closing quote on its line is the likely culprit.
    if let Some(q) = unterminated_string_before(text, at) {
        return Diagnostic::new(Code::Unterminated, "unterminated string")
            .primary(file, Span::new(q, q + 1), "this string is never closed")
            .help("close it with `\"` on the same line");
    }
    let expected = match variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives.iter().filter_map(|r| friendly(*r)).collect();
            names.sort();
            names.dedup();
            names
        }
        ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let message = if expected.is_empty() {
        format!("unexpected {found}")
    } else {
        format!("expected {}, found {found}", join_or(&expected))
    };
    let end = next_char_boundary(text, at);
    let mut d =
        Diagnostic::new(Code::SyntaxError, message).primary(file, Span::new(at, end), "here");
    if found == "end of file" {
        d = d.help("a `{` or `[` is probably never closed");
    } else if text[at..].starts_with('=') {
        d = d.help("a definition reads `kind name = base { … }`; a field reads `name = value`");
    }
    d
}

fn next_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return at;
    }
    let mut end = at + 1;
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

fn describe_found(text: &str, at: usize) -> String {
    let rest = &text[at.min(text.len())..];
    match rest.chars().next() {
        None => "end of file".to_string(),
        Some(c) if c.is_alphanumeric() || c == '_' => {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                .take(40)
                .collect();
            format!("`{word}`")
        }
        Some('\n') | Some('\r') => "end of line".to_string(),
        Some(c) => format!("`{c}`"),
    }
}

fn unterminated_string_before(text: &str, at: usize) -> Option<usize> {
    let line_start = text[..at.min(text.len())]
        .rfind('\n')
        .map(|n| n + 1)
        .unwrap_or(0);
    let line_end = text[line_start..]
        .find('\n')
        .map(|n| line_start + n)
        .unwrap_or(text.len());
    let line = &text[line_start..line_end];
    let mut open: Option<usize> = None;
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '/' if open.is_none() && line[i..].starts_with("//") => break,
            '"' => {
                open = if open.is_some() {
                    None
                } else {
                    Some(line_start + i)
                }
            }
            '\\' if open.is_some() => {
                chars.next();
            }
            _ => {}
        }
    }
    open
}

fn join_or(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Friendly names for grammar rules in "expected …" lists; `None` hides a rule.
fn friendly(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::item | Rule::definition => "a definition or `import`",
        Rule::import | Rule::kw_import => "`import`",
        Rule::module_path => "a module path like `std.models.llama_3_1_70b`",
        Rule::glob => "`*`",
        Rule::block => "`{`",
        Rule::entry | Rule::key => "a field name",
        Rule::op => "`=` or a comparison (`<=`, `>=`)",
        Rule::expr | Rule::term => "a value",
        Rule::times => "`×`",
        Rule::reference => "a name",
        Rule::count => "a count",
        Rule::list => "`[`",
        Rule::quantity | Rule::number => "a number",
        Rule::money => "a price like `$12.50/h`",
        Rule::unit | Rule::unit_word => "a unit",
        Rule::string => "a string",
        Rule::ident => "a name",
        _ => return None,
    })
}

/// Turns pest pairs into AST nodes; offsets are shifted by `base` (the item's start).
struct Lower<'d> {
    file: FileId,
    base: usize,
    text: &'d str,
    comments: &'d [Comment],
    diags: &'d mut Vec<Diagnostic>,
}

impl Lower<'_> {
    /// The span of a pair, without the trailing whitespace and comments that pest's
    /// implicit skipping attaches to rules ending in an optional or repeated part.
    fn span(&self, pair: &Pair<Rule>) -> Span {
        let s = pair.as_span();
        let start = self.base + s.start();
        let mut end = self.base + s.end();
        let bytes = self.text.as_bytes();
        loop {
            while end > start && bytes[end - 1].is_ascii_whitespace() {
                end -= 1;
            }
            match self
                .comments
                .binary_search_by_key(&(end as u32), |c| c.span.end)
            {
                Ok(i) if self.comments[i].span.start as usize >= start => {
                    end = self.comments[i].span.start as usize
                }
                _ => break,
            }
        }
        Span::new(start, end)
    }

    fn spanned_str(&self, pair: &Pair<Rule>) -> Spanned<String> {
        Spanned::new(pair.as_str().to_string(), self.span(pair))
    }

    fn item(&mut self, pair: Pair<Rule>) -> Option<Item> {
        let inner = pair.into_inner().next()?;
        match inner.as_rule() {
            Rule::import => self.import(inner).map(Item::Import),
            Rule::definition => self.definition(inner).map(Item::Definition),
            _ => None,
        }
    }

    fn import(&mut self, pair: Pair<Rule>) -> Option<Import> {
        let span = self.span(&pair);
        let target = pair.into_inner().find(|p| p.as_rule() != Rule::kw_import)?;
        let target = match target.as_rule() {
            Rule::string => {
                let s = self.string(&target);
                ImportTarget::File(Spanned::new(s, self.span(&target)))
            }
            _ => ImportTarget::Module(target.into_inner().map(|p| self.spanned_str(&p)).collect()),
        };
        Some(Import { target, span })
    }

    fn definition(&mut self, pair: Pair<Rule>) -> Option<Definition> {
        let span = self.span(&pair);
        let mut kind = None;
        let mut name = None;
        let mut base = None;
        let mut body = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident if kind.is_none() => kind = Some(self.spanned_str(&p)),
                Rule::ident if name.is_none() => name = Some(self.spanned_str(&p)),
                Rule::ident => base = Some(self.spanned_str(&p)),
                Rule::block => body = Some(std::sync::Arc::new(self.block(p))),
                _ => {}
            }
        }
        Some(Definition {
            kind: kind?,
            name: name?,
            base,
            body,
            span,
        })
    }

    fn block(&mut self, pair: Pair<Rule>) -> Block {
        let span = self.span(&pair);
        let entries = pair
            .into_inner()
            .filter(|p| p.as_rule() == Rule::entry)
            .filter_map(|p| self.entry(p))
            .collect();
        Block { entries, span }
    }

    fn entry(&mut self, pair: Pair<Rule>) -> Option<Entry> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let key_pair = it.next()?;
        let key_span = self.span(&key_pair);
        let key = key_pair
            .into_inner()
            .map(|p| self.spanned_str(&p))
            .collect();
        let op_pair = it.next()?;
        let op = match op_pair.as_str() {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            ">" => Op::Gt,
            "==" => Op::Eq,
            _ => Op::Assign,
        };
        let op = Spanned::new(op, self.span(&op_pair));
        let value = self.expr(it.next()?)?;
        Some(Entry {
            key,
            key_span,
            op,
            value,
            span,
        })
    }

    fn expr(&mut self, pair: Pair<Rule>) -> Option<Expr> {
        let span = self.span(&pair);
        let mut terms: Vec<Expr> = pair
            .into_inner()
            .filter(|p| p.as_rule() == Rule::term)
            .filter_map(|p| self.term(p))
            .collect();
        match terms.len() {
            0 => None,
            1 => terms.pop(),
            _ => Some(Expr {
                kind: ExprKind::Product(terms),
                span,
            }),
        }
    }

    fn term(&mut self, pair: Pair<Rule>) -> Option<Expr> {
        let inner = pair.into_inner().next()?;
        let span = self.span(&inner);
        let kind = match inner.as_rule() {
            Rule::quantity => {
                let mut it = inner.into_inner();
                let num = it.next()?;
                let value = self.number(&num)?;
                let unit = it.next().map(|u| self.spanned_str(&u));
                ExprKind::Quantity {
                    value,
                    text: num.as_str().to_string(),
                    unit,
                }
            }
            Rule::money => {
                let mut it = inner.into_inner();
                let num = it.next()?;
                let value = self.number(&num)?;
                let per = it.next().map(|u| self.spanned_str(&u));
                ExprKind::Money {
                    value,
                    text: num.as_str().to_string(),
                    per,
                }
            }
            Rule::string => ExprKind::Str(self.string(&inner)),
            Rule::list => ExprKind::List(
                inner
                    .into_inner()
                    .filter(|p| p.as_rule() == Rule::expr)
                    .filter_map(|p| self.expr(p))
                    .collect(),
            ),
            Rule::block => ExprKind::Object(self.block(inner)),
            Rule::reference => {
                let mut name = None;
                let mut count = None;
                let mut overrides = None;
                for p in inner.into_inner() {
                    match p.as_rule() {
                        Rule::ident => name = Some(self.spanned_str(&p)),
                        Rule::count => {
                            let s = self.span(&p);
                            match p.as_str().parse::<u64>() {
                                Ok(n) => count = Some(Spanned::new(n, s)),
                                Err(_) => {
                                    self.diags.push(
                                        Diagnostic::new(Code::InvalidNumber, "count too large")
                                            .primary(self.file, s, "does not fit in 64 bits"),
                                    );
                                    count = Some(Spanned::new(u64::MAX, s));
                                }
                            }
                        }
                        Rule::block => overrides = Some(self.block(p)),
                        _ => {}
                    }
                }
                ExprKind::Reference {
                    name: name?,
                    count,
                    overrides,
                }
            }
            _ => return None,
        };
        Some(Expr { kind, span })
    }

    /// Number text → f64: `_` separators, `k`/`M`/`B`/`T` magnitudes (×10³…10¹²).
    fn number(&mut self, pair: &Pair<Rule>) -> Option<f64> {
        let raw = pair.as_str();
        let (digits, scale) = match raw.chars().last() {
            Some('k') => (&raw[..raw.len() - 1], 1e3),
            Some('M') => (&raw[..raw.len() - 1], 1e6),
            Some('B') => (&raw[..raw.len() - 1], 1e9),
            Some('T') => (&raw[..raw.len() - 1], 1e12),
            _ => (raw, 1.0),
        };
        let cleaned: String = digits.chars().filter(|c| *c != '_').collect();
        match cleaned.parse::<f64>() {
            Ok(v) if (v * scale).is_finite() => Some(v * scale),
            _ => {
                self.diags.push(
                    Diagnostic::new(
                        Code::InvalidNumber,
                        format!("number `{raw}` is out of range"),
                    )
                    .primary(self.file, self.span(pair), "too large to represent")
                    .help("numbers must be finite and below about 1.8e308"),
                );
                Some(0.0)
            }
        }
    }

    /// String literal → its value, reporting bad escapes.
    fn string(&mut self, pair: &Pair<Rule>) -> String {
        let raw = pair.as_str();
        let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
        let start = self.span(pair).start as usize + 1;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((j, other)) => {
                    self.diags.push(
                        Diagnostic::new(
                            Code::InvalidEscape,
                            format!("invalid escape `\\{other}` in a string"),
                        )
                        .primary(
                            self.file,
                            Span::new(start + i, start + j + other.len_utf8()),
                            "not an escape",
                        )
                        .help("the escapes are `\\\"`, `\\\\`, `\\n` and `\\t`"),
                    );
                    out.push(other);
                }
                None => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> SourceAst {
        let (ast, diags) = parse(src, FileId(0));
        assert!(diags.is_empty(), "{diags:#?}");
        ast
    }

    #[test]
    fn parses_the_design_sketch() {
        let ast = ok(r#"
import std.instances.aws.p5_48xlarge   // 8 × H100
import "./hw.dist"
cluster prod { nodes = 2 × p5_48xlarge, price = $55.04/h }
model llama = llama_3_1_70b { weights = fp8, kv_cache = fp8 }
workload chat { prompt = 2k tokens, output = 512 tokens, rate = 40 req/s }
slo chat { ttft.p95 <= 800 ms, tpot.p95 <= 40 ms }
deploy chat {
  model = llama, cluster = prod
  layout = tp 8 x pp 1 * dp 2
  engine = vllm { gpu_memory_utilization = 0.90, }
  tags = ["a", "b",]
}
"#);
        assert_eq!(ast.items.len(), 7);
        assert_eq!(ast.comments.len(), 1);
        let Item::Definition(d) = &ast.items[6] else {
            panic!()
        };
        let layout = &d.body.as_ref().unwrap().entries[2].value;
        let ExprKind::Product(f) = &layout.kind else {
            panic!("{layout:?}")
        };
        assert_eq!(f.len(), 3);
        let Item::Definition(w) = &ast.items[4] else {
            panic!()
        };
        let ExprKind::Quantity { value, unit, .. } =
            &w.body.as_ref().unwrap().entries[0].value.kind
        else {
            panic!()
        };
        assert_eq!(*value, 2000.0);
        assert_eq!(unit.as_ref().unwrap().node, "tokens");
    }

    #[test]
    fn units_do_not_swallow_the_next_key() {
        let ast = ok("gpu g { a = 2 b = 3 }");
        let Item::Definition(d) = &ast.items[0] else {
            panic!()
        };
        assert_eq!(d.body.as_ref().unwrap().entries.len(), 2);
    }

    #[test]
    fn magnitudes_and_bytes() {
        let ast = ok("model m { parameters = 70.6B, x = 1 B, y = 1TB, z = 1_000 }");
        let Item::Definition(d) = &ast.items[0] else {
            panic!()
        };
        let vals: Vec<_> = d
            .body
            .as_ref()
            .unwrap()
            .entries
            .iter()
            .map(|e| match &e.value.kind {
                ExprKind::Quantity { value, unit, .. } => {
                    (*value, unit.as_ref().map(|u| u.node.clone()))
                }
                _ => panic!(),
            })
            .collect();
        assert_eq!(vals[0], (70.6e9, None));
        assert_eq!(vals[1], (1.0, Some("B".into())));
        assert_eq!(vals[2], (1.0, Some("TB".into())));
        assert_eq!(vals[3], (1000.0, None));
    }

    #[test]
    fn recovers_at_the_next_item() {
        let (ast, diags) = parse("gpu a { memory = }\ngpu b { memory = 80 GiB }\n", FileId(0));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::SyntaxError);
        assert_eq!(ast.items.len(), 1);
    }

    #[test]
    fn pathological_input_is_a_diagnostic() {
        let deep = format!(
            "x y {{ a = {}1{} }}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let (_, d) = parse(&deep, FileId(0));
        assert_eq!(d[0].code, Code::NestingTooDeep);
        let (_, d) = parse("gpu a { memory = 1e999 GiB }", FileId(0));
        assert_eq!(d[0].code, Code::InvalidNumber);
        let (_, d) = parse("gpu a { name = \"abc }\n", FileId(0));
        assert_eq!(d[0].code, Code::Unterminated);
        let (_, d) = parse("/* open", FileId(0));
        assert_eq!(d[0].code, Code::Unterminated);
        let (_, d) = parse("gpu a { s = \"\\q\" }", FileId(0));
        assert_eq!(d[0].code, Code::InvalidEscape);
    }
}
