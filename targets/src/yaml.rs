//! YAML output that every reader types the same way.
//!
//! Kubernetes tooling still includes YAML 1.1 readers (kubectl's sigs.k8s.io/yaml goes
//! through go-yaml v2 rules for some paths, Helm, many CI linters), and YAML 1.1 reads the
//! plain scalars `on`, `yes`, `n`, `12:30` (sexagesimal), `2024-01-01` (a timestamp),
//! `1_000`, `=` (the value key) and `<<` (the merge key) as something other than a string.
//! serde_yaml_ng follows YAML 1.2 and leaves those plain. So objects are serialized to a
//! JSON value first and written here: a string is plain only when no YAML version could
//! read it as anything else ([`plain_is_safe`]); otherwise it is single-quoted, a
//! multi-line string is a literal block, and anything with control characters is
//! double-quoted with JSON escapes (a JSON string is a valid YAML double-quoted scalar).
//! Layout follows serde_yaml_ng (2-space indent, sequences at their key's column), so a
//! manifest reads as before.

use serde_json::Value;

/// `value` as a YAML document (no `---`), ending in a newline.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        other => {
            out.push_str(&inline(other, 0));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn mapping(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    let mut first = true;
    for (k, v) in m {
        if !first {
            pad(out, indent);
        }
        first = false;
        out.push_str(&scalar_string(k, indent, false));
        out.push(':');
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                pad(out, indent + 2);
                mapping(out, inner, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                pad(out, indent);
                sequence(out, items, indent);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other, indent + 2));
                out.push('\n');
            }
        }
    }
}

/// A sequence whose first `- ` is already at the cursor (column `indent`).
fn sequence(out: &mut String, items: &[Value], indent: usize) {
    let mut first = true;
    for v in items {
        if !first {
            pad(out, indent);
        }
        first = false;
        out.push_str("- ");
        match v {
            Value::Object(inner) if !inner.is_empty() => mapping(out, inner, indent + 2),
            Value::Array(inner) if !inner.is_empty() => sequence(out, inner, indent + 2),
            other => {
                out.push_str(&inline(other, indent + 2));
                out.push('\n');
            }
        }
    }
}

/// A scalar or an empty collection, written after `key: ` or `- `; `indent` is the
/// column a block scalar's lines start at.
fn inline(v: &Value, indent: usize) -> String {
    debug_assert!(!is_block(v));
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar_string(s, indent, true),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// A string as a plain, single-quoted, literal-block or double-quoted scalar.
fn scalar_string(s: &str, indent: usize, block_allowed: bool) -> String {
    if plain_is_safe(s) {
        return s.to_string();
    }
    let printable =
        !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') && !s.contains('\u{feff}');
    if printable && !s.contains('\n') && !s.contains('\t') {
        return format!("'{}'", s.replace('\'', "''"));
    }
    if printable && block_allowed && literal_block_keeps(s) {
        let body = s.trim_end_matches('\n');
        let trailing = s.len() - body.len();
        let chomp = match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        };
        let mut out = format!("|{chomp}\n");
        for (i, line) in s.split('\n').enumerate() {
            // The final empty piece after a trailing newline is the chomping's business.
            if i == s.matches('\n').count() && line.is_empty() {
                break;
            }
            if !line.is_empty() {
                out.push_str(&" ".repeat(indent));
                out.push_str(line);
            }
            out.push('\n');
        }
        // The caller adds the newline that ends the entry.
        out.pop();
        return out;
    }
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A literal block reproduces `s` exactly when its first non-empty line does not start
/// with a space (the block's indentation is taken from it) and no line is blanks only.
fn literal_block_keeps(s: &str) -> bool {
    let first_content = s.split('\n').find(|l| !l.is_empty());
    first_content.is_some_and(|l| !l.starts_with([' ', '\t']))
        && s.split('\n').all(|l| l.is_empty() || !l.trim().is_empty())
        && !s.contains('\r')
}

/// True when `s` written plain is a string to every YAML 1.1 and 1.2 reader: only
/// `[A-Za-z0-9_./:@+$-]` (no spaces, flow or comment indicators, `=` or `<`), not
/// starting with an indicator, not a YAML 1.1 boolean or null word in any case, and,
/// when it starts like a number, containing a letter no number, date or time can hold
/// (so `4Gi` stays plain and `1e3`, `0x1F`, `12:30`, `2024-01-01`, `1_000` are quoted).
pub fn plain_is_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./:@+$-".contains(c))
    {
        return false;
    }
    // `-x` is plain (a flag in a command); `-`, `:x`, `@x`, `$x`, `+1`, `.5` are not.
    if ":@$+.".contains(first) || s == "-" || s.starts_with("- ") || s.ends_with(':') {
        return false;
    }
    const WORDS: &[&str] = &[
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
    ];
    if WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return false;
    }
    let number_like = first.is_ascii_digit()
        || (first == '-' && s[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.'));
    let unsigned = s.trim_start_matches(['-', '+']).to_ascii_lowercase();
    if unsigned == ".inf" || unsigned == ".nan" {
        return false;
    }
    if number_like {
        const NUMERIC: &str = "0123456789abcdefABCDEFxXoObB_:.+-eEtTzZ";
        return s.chars().any(|c| !NUMERIC.contains(c));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_1_1_specials_are_quoted() {
        for s in [
            "on",
            "off",
            "yes",
            "no",
            "Y",
            "n",
            "TRUE",
            "Null",
            "~",
            "12:30",
            "1:2:3",
            "2024-01-01",
            "1_000",
            "=",
            "<<",
            "0x1F",
            "1e3",
            "0777",
            ".inf",
            "-.inf",
            ".5",
            "+1",
            "-",
            "",
            " x",
            "x ",
            "a: b",
            "a #b",
            "*a",
            "&a",
            "!t",
            "%x",
            "@x",
            "'s'",
            "\"q\"",
            "?x",
            "10.0.0.1",
            "8000",
        ] {
            assert!(!plain_is_safe(s), "{s:?} must not be plain");
        }
        for s in [
            "vllm/vllm-openai:v0.33.0",
            "4Gi",
            "-c",
            "--port",
            "nvidia.com/gpu",
            "eth0",
            "NVIDIA-GB200",
            "/bin/bash",
            "app.kubernetes.io/name",
        ] {
            assert!(plain_is_safe(s), "{s:?} should stay plain");
        }
    }

    #[test]
    fn layout_matches_serde_yaml_ng() {
        let v = json!({
            "a": {"b": 1, "c": ["x", {"d": "e", "f": []}], "g": {}},
            "h": "on",
            "i": "line one\nline two",
            "j": "it's",
            "k": "bell\u{7}",
            "l": [["n1", "n2"]],
            "m": true,
            "n": null,
        });
        let want = "a:\n  b: 1\n  c:\n  - x\n  - d: e\n    f: []\n  g: {}\nh: 'on'\ni: |-\n  line one\n  line two\nj: 'it''s'\nk: \"bell\\u0007\"\nl:\n- - n1\n  - n2\nm: true\n'n': null\n";
        assert_eq!(to_string(&v), want);
        // (`n` is YAML 1.1's `false`, as a key too); serde_yaml_ng reads every scalar back
        // as what it was
        let back: serde_json::Value = serde_yaml_ng::from_str(&to_string(&v)).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn block_scalars_keep_every_byte() {
        for s in [
            "a\nb\n",
            "a\nb\n\n",
            "a\n\nb",
            "set -e\nexec \"$@\"",
            "  leading\nx",
            "x\n  \ny",
            "tab\tin\nline",
        ] {
            let v = json!({"k": [{"s": s}]});
            let back: serde_json::Value = serde_yaml_ng::from_str(&to_string(&v)).unwrap();
            assert_eq!(back, v, "{s:?}\n{}", to_string(&v));
        }
    }
}
