//! Prometheus' text exposition format (version 0.0.4), as vLLM's `/metrics` serves it
//! through `prometheus_client`: `# HELP`/`# TYPE` lines, and samples
//! `name{label="value",…} value [timestamp]`. Only what `dic observe` needs is kept: the
//! samples, their labels and values. Hand-written rather than a crate: the format is five
//! line shapes, and the crates that parse it pull in regex and time libraries for
//! timestamps dic does not read.
//!
//! Input is untrusted (a file or an HTTP body): lines and labels are bounded, and a
//! malformed line is an error naming its line number, never a panic.

use std::collections::BTreeMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// Most samples one exposition may hold (a vLLM engine serves a few thousand).
pub const MAX_SAMPLES: usize = 1_000_000;
/// Most labels on one sample.
const MAX_LABELS: usize = 64;

/// A line that is not a comment, a blank or a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Parses a whole exposition.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if out.len() >= MAX_SAMPLES {
            return Err(ParseError {
                line: i + 1,
                message: format!("more than {MAX_SAMPLES} samples"),
            });
        }
        let sample = parse_sample(line).map_err(|message| ParseError {
            line: i + 1,
            message,
        })?;
        out.push(sample);
    }
    Ok(out)
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or_else(|| "a sample needs a value after its name".to_string())?;
    let name = &line[..name_end];
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        || name.is_empty()
    {
        return Err(format!("`{name}` is not a metric name"));
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    let mut fields = rest.split_whitespace();
    let value_text = fields
        .next()
        .ok_or_else(|| format!("`{name}` has no value"))?;
    let value = parse_value(value_text)?;
    // An optional timestamp (ms since the epoch); dic reads the time of a scrape from its
    // source, not from samples.
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("`{ts}` after the value of `{name}` is not a timestamp"))?;
    }
    if fields.next().is_some() {
        return Err(format!("unexpected text after the value of `{name}`"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        t => t
            .parse::<f64>()
            .map_err(|_| format!("`{t}` is not a number")),
    }
}

/// Parses `key="value",…}` (after the opening brace); returns the labels and the text
/// after the closing brace.
fn parse_labels(mut s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start();
        if let Some(tail) = s.strip_prefix('}') {
            return Ok((labels, tail));
        }
        if labels.len() >= MAX_LABELS {
            return Err(format!("more than {MAX_LABELS} labels on one sample"));
        }
        let eq = s
            .find('=')
            .ok_or_else(|| "a label needs `=` and a quoted value".to_string())?;
        let key = s[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{key}` is not a label name"));
        }
        let after = s[eq + 1..].trim_start();
        let body = after
            .strip_prefix('"')
            .ok_or_else(|| format!("the value of label `{key}` must be quoted"))?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label `{key}` ends inside an escape")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("the value of label `{key}` is not closed")),
            }
        };
        labels.insert(key.to_string(), value);
        s = body[end + 1..].trim_start();
        if let Some(tail) = s.strip_prefix(',') {
            s = tail;
        } else if !s.starts_with('}') {
            return Err("labels must be separated by `,`".to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_labels_and_special_values() {
        let text = "# HELP vllm:num_requests_running Number of requests.\n\
                    # TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n\
                    vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"a\\\"b\"} 12\n\
                    process_start_time_seconds 1.7e9 1700000000000\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "vllm:num_requests_running");
        assert_eq!(s[0].label("engine"), Some("0"));
        assert_eq!(s[0].value, 3.0);
        assert_eq!(s[1].label("le"), Some("+Inf"));
        assert_eq!(s[1].label("model_name"), Some("a\"b"));
        assert_eq!(s[2].value, 1.7e9);
    }

    #[test]
    fn malformed_lines_are_errors_with_their_line() {
        for (text, line) in [
            ("ok 1\nbad{le=\"1\" 2\n", 2),
            ("x{le=1} 2\n", 1),
            ("x 1 2 3\n", 1),
            ("x one\n", 1),
            ("x{a=\"1\" b=\"2\"} 1\n", 1),
            ("{a=\"1\"} 1\n", 1),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
    }
}
