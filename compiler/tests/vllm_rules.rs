//! Keeps `docs/vllm-rules.md` (vLLM 0.33's start-up checks mapped to dic's codes, issue 38)
//! true to the code: every code a row names exists in `Code`, every row has a vLLM
//! `file:function` and a status, and the counts and the "Not caught yet" lists agree with
//! the table.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failure

use dic_compiler::diagnostics::Code;
use std::collections::BTreeMap;

const DOC: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/vllm-rules.md"
));

/// The statuses a row may have, as they start its last cell, and the words the counts
/// line uses for each.
const STATUSES: [(&str, &str); 6] = [
    ("caught", "caught"),
    ("partial", "partial"),
    ("stricter", "stricter"),
    ("by construction", "by construction"),
    ("out of scope", "out of scope"),
    ("NOT CAUGHT", "not caught"),
];

/// One row of the table.
#[derive(Debug)]
struct Row {
    number: usize,
    /// `vllm/….py:Function` without the backticks.
    site: String,
    codes: Vec<Code>,
    /// One of `STATUSES`' first words.
    status: &'static str,
}

/// The site cell: `` `vllm/dir/file.py:Class.method` ``.
fn parse_site(cell: &str) -> Result<String, String> {
    let inner = cell
        .strip_prefix('`')
        .and_then(|c| c.strip_suffix('`'))
        .ok_or_else(|| format!("site `{cell}` is not in backticks"))?;
    let (file, function) = inner
        .split_once(".py:")
        .ok_or_else(|| format!("site `{inner}` is not `file.py:function`"))?;
    let path_ok = file.starts_with("vllm/")
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/');
    let ident = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !path_ok || !function.split('.').all(ident) {
        return Err(format!("site `{inner}` is not `vllm/….py:Name[.name]`"));
    }
    Ok(inner.to_string())
}

/// The dic cell: `—`, or codes separated by commas, each one `Code` knows.
fn parse_codes(cell: &str) -> Result<Vec<Code>, String> {
    if cell == "—" {
        return Ok(Vec::new());
    }
    cell.split(',')
        .map(|c| Code::parse(c).ok_or_else(|| format!("`{}` is not a dic code", c.trim())))
        .collect()
}

/// The status cell: a status word, then for anything but `caught` a `: why`.
fn parse_status(cell: &str, codes: &[Code]) -> Result<&'static str, String> {
    let (status, _) = STATUSES
        .iter()
        .find(|(s, _)| cell == *s || cell.starts_with(&format!("{s}:")))
        .ok_or_else(|| format!("status `{cell}` does not start with one of {STATUSES:?}"))?;
    if *status != "caught" && !cell.starts_with(&format!("{status}: ")) {
        return Err(format!("status `{status}` needs `: why`"));
    }
    match *status {
        "caught" | "partial" | "stricter" if codes.is_empty() => {
            Err(format!("status `{status}` names no dic code"))
        }
        "NOT CAUGHT" | "out of scope" if !codes.is_empty() => {
            Err(format!("status `{status}` names a dic code"))
        }
        _ => Ok(status),
    }
}

/// One table line into a row (`None` for lines that are not numbered rows).
fn parse_row(line: &str) -> Option<Result<Row, String>> {
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let number = cells.get(1)?.parse::<usize>().ok()?;
    // `| # | site | condition | message | dic | status |`: 6 cells between 7 bars.
    if cells.len() != 8 || !cells[0].is_empty() || !cells[7].is_empty() {
        return Some(Err(format!(
            "row {number} has {} cells, not 6 (a `|` inside a cell?)",
            cells.len().saturating_sub(2)
        )));
    }
    let row = (|| {
        if cells[3].is_empty() || cells[4].is_empty() {
            return Err("empty condition or message".to_string());
        }
        let site = parse_site(cells[2])?;
        let codes = parse_codes(cells[5])?;
        let status = parse_status(cells[6], &codes)?;
        Ok(Row {
            number,
            site,
            codes,
            status,
        })
    })();
    Some(row.map_err(|e| format!("row {number}: {e}")))
}

fn rows(doc: &str) -> Vec<Row> {
    let rows: Vec<Row> = doc
        .lines()
        .filter_map(parse_row)
        .collect::<Result<_, _>>()
        .unwrap();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.number, i + 1, "rows are numbered 1, 2, 3, … in order");
    }
    rows
}

/// The `- #N `site` — …` items under `heading` up to the next blank-line-separated
/// paragraph that is not a list.
fn listed(doc: &str, heading: &str) -> BTreeMap<usize, String> {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}`"));
    let mut items = BTreeMap::new();
    let mut seen_item = false;
    for line in doc[start + heading.len()..].lines().skip(1) {
        if let Some(rest) = line.strip_prefix("- #") {
            seen_item = true;
            let (number, rest) = rest.split_once(' ').unwrap();
            let site = rest.split('`').nth(1).unwrap().to_string();
            assert!(
                items.insert(number.parse().unwrap(), site).is_none(),
                "#{number} listed twice under `{heading}`"
            );
        } else if (seen_item && !line.trim().is_empty()) || line.trim_end().ends_with(':') {
            // The list ends at its first other line, or, empty, at the next list's
            // introduction (`Caught in part (…):`).
            break;
        }
    }
    items
}

#[test]
fn every_row_has_a_site_a_status_and_codes_that_exist() {
    let rows = rows(DOC);
    assert!(rows.len() >= 60, "only {} rows", rows.len());
    // Each code a row names is one dic still has (`rows` parsed them with `Code::parse`),
    // and the table names at least the structural ones it is built around.
    let named: Vec<Code> = rows.iter().flat_map(|r| r.codes.clone()).collect();
    for code in [
        Code::HeadsNotDivisible,
        Code::InvalidDcp,
        Code::RequestDoesNotFit,
    ] {
        assert!(named.contains(&code), "{code} named nowhere");
    }
}

#[test]
fn a_row_naming_a_code_dic_lacks_is_refused() {
    let good = "| 1 | `vllm/config/model.py:ModelConfig.verify_with_parallel_config` | heads % tp | \"…\" | E0402 | caught |";
    assert!(parse_row(good).unwrap().is_ok());
    let gone = good.replace("E0402", "E0499");
    let err = parse_row(&gone).unwrap().unwrap_err();
    assert!(err.contains("E0499"), "{err}");
    let no_site = good.replace(
        "`vllm/config/model.py:ModelConfig.verify_with_parallel_config`",
        "model.py",
    );
    assert!(parse_row(&no_site).unwrap().is_err());
    let no_status = good.replace("| caught |", "| fine |");
    assert!(parse_row(&no_status).unwrap().is_err());
    let unexplained = good.replace("| E0402 | caught |", "| — | NOT CAUGHT |");
    assert!(parse_row(&unexplained).unwrap().is_err());
    let pipe_in_cell = good.replace("heads % tp", "heads | tp");
    assert!(parse_row(&pipe_in_cell).unwrap().is_err());
}

#[test]
fn the_counts_line_matches_the_table() {
    let rows = rows(DOC);
    let mut expected = format!("Counts: {} checks: ", rows.len());
    let parts: Vec<String> = STATUSES
        .iter()
        .map(|(status, word)| {
            let n = rows.iter().filter(|r| r.status == *status).count();
            format!("{n} {word}")
        })
        .collect();
    expected.push_str(&parts.join(", "));
    expected.push('.');
    assert!(
        DOC.lines().any(|l| l == expected),
        "the counts line should read:\n{expected}"
    );
}

#[test]
fn the_work_lists_match_the_table() {
    let rows = rows(DOC);
    for (heading, status) in [
        ("## Not caught yet", "NOT CAUGHT"),
        ("Caught in part", "partial"),
        ("Stricter than vLLM", "stricter"),
    ] {
        let want: BTreeMap<usize, String> = rows
            .iter()
            .filter(|r| r.status == status)
            .map(|r| (r.number, r.site.clone()))
            .collect();
        assert_eq!(listed(DOC, heading), want, "the list under `{heading}`");
    }
}
