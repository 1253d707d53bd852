//! Source text as tokens of code: comments and the insides of string and character
//! literals blanked, test-only items (`#[cfg(test)]`, `#[test]`) marked; and the functions
//! measured on them.

/// `text` with comments and the insides of string and character literals replaced by
/// spaces (newlines kept, so line numbers hold).
pub fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    out.push(' ');
                    i += 1;
                }
                out.push(blank(c[i]));
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            // After a backslash the escaped character is skipped: '\'' ends at its last quote.
            let literal_end = if next == Some('\\') {
                (i + 3..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match literal_end {
                Some(end) => {
                    out.push('\'');
                    out.extend(std::iter::repeat_n(' ', end - i - 1));
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else if is_ident(c[i]) && (i == 0 || !is_ident(c[i - 1])) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // A raw string: r"…", r#"…"#, br"…".
            let hashes = c[i..].iter().take_while(|&&ch| ch == '#').count();
            if (word == "r" || word == "br") && c.get(i + hashes) == Some(&'"') {
                out.push_str(&word);
                out.extend(std::iter::repeat_n('#', hashes));
                out.push('"');
                i += hashes + 1;
                let closing: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let closing: Vec<char> = closing.chars().collect();
                while i < c.len() && !c[i..].starts_with(&closing) {
                    out.push(blank(c[i]));
                    i += 1;
                }
                out.extend(closing.iter());
                i += closing.len();
            } else {
                out.push_str(&word);
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub text: String,
    pub line: usize,
}

/// Identifiers (keywords included), `::`, and single punctuation characters.
pub fn tokens(code: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = code.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\n' {
            line += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let mut word = ch.to_string();
            while let Some(&n) = chars.peek() {
                if n.is_alphanumeric() || n == '_' {
                    word.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Token { text: word, line });
        } else if ch == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push(Token {
                text: "::".into(),
                line,
            });
        } else if !ch.is_whitespace() && ch != '"' {
            out.push(Token {
                text: ch.to_string(),
                line,
            });
        }
    }
    out
}

/// The index of the token closing the bracket opened at `open` (`{`, `(` or `[`).
pub fn closing(toks: &[Token], open: usize) -> usize {
    let (o, c) = match toks[open].text.as_str() {
        "{" => ("{", "}"),
        "(" => ("(", ")"),
        _ => ("[", "]"),
    };
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        if t.text == o {
            depth += 1;
        } else if t.text == c {
            depth -= 1;
            if depth == 0 {
                return j;
            }
        }
    }
    toks.len() - 1
}

/// The index of the last token of the item starting at `start`: its `;` or the `}`
/// closing its body (a `use` ends at its `;`, braces of its groups included).
pub fn item_end(toks: &[Token], start: usize) -> usize {
    let mut j = start;
    let is_use = toks.get(start).is_some_and(|t| t.text == "use")
        || toks.get(start + 1).is_some_and(|t| t.text == "use");
    while j < toks.len() {
        match toks[j].text.as_str() {
            ";" => return j,
            "{" if !is_use => return closing(toks, j),
            "(" | "[" | "{" => j = closing(toks, j),
            _ => {}
        }
        j += 1;
    }
    toks.len() - 1
}

/// Whether the attribute starting at `hash` (`#`, `[`, …) is `#[test]` or a `cfg` naming
/// `test` (`#[cfg(test)]`, `#[cfg(all(test, …))]`), and the index after it.
pub fn attribute(toks: &[Token], hash: usize) -> (bool, usize) {
    let end = closing(toks, hash + 1);
    let words: Vec<&str> = toks[hash + 2..end]
        .iter()
        .map(|t| t.text.as_str())
        .collect();
    let test = words == ["test"]
        || (words.first() == Some(&"cfg") && words.contains(&"test") && !words.contains(&"not"));
    (test, end + 1)
}

/// A token list with the test-only items (`#[cfg(test)]`, `#[test]`) marked.
pub struct Lexed {
    pub toks: Vec<Token>,
    pub test_only: Vec<bool>,
}

pub fn lex(text: &str) -> Lexed {
    let toks = tokens(&code_only(text));
    let mut test_only = vec![false; toks.len()];
    let mut i = 0;
    while i < toks.len() {
        let is_attr = toks[i].text == "#" && toks.get(i + 1).is_some_and(|t| t.text == "[");
        if !is_attr {
            i += 1;
            continue;
        }
        let (test, mut after) = attribute(&toks, i);
        // Further attributes on the same item.
        while after + 1 < toks.len() && toks[after].text == "#" && toks[after + 1].text == "[" {
            after = attribute(&toks, after).1;
        }
        if test {
            let end = item_end(&toks, after);
            for flag in &mut test_only[i..=end] {
                *flag = true;
            }
            i = end + 1;
        } else {
            i = after;
        }
    }
    Lexed { toks, test_only }
}

// ---------------------------------------------------------------------------------------
// (c) functions

/// Every function with a body outside test-only items: (name, lines from `fn` to `}`).
pub fn functions(lexed: &Lexed) -> Vec<(String, usize)> {
    let toks = &lexed.toks;
    let mut out = Vec::new();
    for i in 0..toks.len().saturating_sub(1) {
        if toks[i].text != "fn" || lexed.test_only[i] {
            continue;
        }
        let name = &toks[i + 1].text;
        if !name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
            continue; // a `fn(…)` pointer type
        }
        // The body: the first `{` outside the signature's brackets, unless a `;` ends it.
        let mut j = i + 2;
        let body = loop {
            match toks.get(j).map(|t| t.text.as_str()) {
                None | Some(";") => break None,
                Some("{") => break Some(j),
                Some("(") | Some("[") => j = closing(toks, j) + 1,
                Some(_) => j += 1,
            }
        };
        if let Some(open) = body {
            let close = closing(toks, open);
            out.push((name.clone(), toks[close].line - toks[i].line + 1));
        }
    }
    out
}

#[test]
fn code_only_blanks_comments_and_literals() {
    let code =
        code_only("let a = \"{ // }\"; // }\n/* { /* } */ */ let b = '{'; 'a: loop {}\nr#\"}\"#");
    assert_eq!(code.matches('{').count(), 1, "{code}");
    assert_eq!(code.matches('}').count(), 1, "{code}");
    assert_eq!(code.lines().count(), 3);
    assert!(code.contains("'a: loop"));
    // An escaped quote inside a character literal does not end it.
    assert!(!code_only("let v = ['\\'','}'];").contains('}'));
}

#[test]
fn functions_are_measured_from_fn_to_brace_and_tests_skipped() {
    let src = "fn a() {\n  let x = \"}\";\n}\ntrait T { fn b(&self); }\n#[cfg(test)]\nmod tests {\n  fn c() {\n  }\n}\n#[test]\nfn d() {}\nfn e(f: fn(u8) -> u8) -> u8 where u8: Copy {\n\n}";
    let fns = functions(&lex(src));
    assert_eq!(fns, vec![("a".to_string(), 3), ("e".to_string(), 3)]);
}
