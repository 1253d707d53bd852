//! Units and dimensions.
//!
//! A quantity literal is a number and a unit; the unit fixes its dimension and its
//! factor to the base unit (bytes, bytes/s, seconds, tokens, tokens/s, requests/s,
//! FLOP/s, dollars, dollars/hour). Decimal and binary prefixes are different units
//! (`GB` = 10⁹ B, `GiB` = 2³⁰ B), and so are bytes and bits (`GB/s` vs `Gb/s`).
//! Nothing converts between dimensions: a unit of the wrong dimension is a diagnostic.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    Bytes,
    Bandwidth,
    Time,
    Tokens,
    TokenRate,
    RequestRate,
    FlopRate,
    Money,
    MoneyRate,
    /// A plain number; `%` is a unit of it.
    Ratio,
}

impl Dimension {
    pub fn describe(self) -> &'static str {
        match self {
            Dimension::Bytes => "a size in bytes (e.g. `80 GiB`)",
            Dimension::Bandwidth => "a bandwidth (e.g. `3.35 TB/s` or `400 Gb/s`)",
            Dimension::Time => "a time (e.g. `800 ms`)",
            Dimension::Tokens => "a number of tokens (e.g. `2k tokens`; `k` is 1,000, not 1,024)",
            Dimension::TokenRate => "a token rate (e.g. `2000 tokens/s`)",
            Dimension::RequestRate => "a request rate (e.g. `40 req/s`)",
            Dimension::FlopRate => "a compute rate (e.g. `989 TFLOPS`)",
            Dimension::Money => "an amount of money (e.g. `$1200`)",
            Dimension::MoneyRate => "a price per hour (e.g. `$98.32/h`)",
            Dimension::Ratio => "a plain number (e.g. `0.9` or `90%`)",
        }
    }

    /// The unit symbols of this dimension, for help texts: `ns, us, µs, ms, s, min, h`.
    pub fn unit_list(self) -> String {
        self.units()
            .map(|u| u.symbol)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The units of this dimension, for completion and suggestions.
    pub fn units(self) -> impl Iterator<Item = &'static Unit> {
        UNITS.iter().filter(move |u| u.dim == self)
    }

    /// Base unit symbol used when printing.
    pub fn base_symbol(self) -> &'static str {
        match self {
            Dimension::Bytes => "B",
            Dimension::Bandwidth => "B/s",
            Dimension::Time => "s",
            Dimension::Tokens => "tokens",
            Dimension::TokenRate => "tokens/s",
            Dimension::RequestRate => "req/s",
            Dimension::FlopRate => "FLOP/s",
            Dimension::Money => "$",
            Dimension::MoneyRate => "$/h",
            Dimension::Ratio => "",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    pub symbol: &'static str,
    pub dim: Dimension,
    /// Multiply a value in this unit by `factor` to get base units.
    pub factor: f64,
}

const K: f64 = 1e3;
const KI: f64 = 1024.0;

macro_rules! u {
    ($s:literal, $d:ident, $f:expr) => {
        Unit {
            symbol: $s,
            dim: Dimension::$d,
            factor: $f,
        }
    };
}

/// Every unit the language knows. Case matters: `Gb/s` (bits) ≠ `GB/s` (bytes).
pub static UNITS: &[Unit] = &[
    u!("B", Bytes, 1.0),
    u!("KB", Bytes, K),
    u!("MB", Bytes, K * K),
    u!("GB", Bytes, K * K * K),
    u!("TB", Bytes, K * K * K * K),
    u!("KiB", Bytes, KI),
    u!("MiB", Bytes, KI * KI),
    u!("GiB", Bytes, KI * KI * KI),
    u!("TiB", Bytes, KI * KI * KI * KI),
    u!("B/s", Bandwidth, 1.0),
    u!("KB/s", Bandwidth, K),
    u!("MB/s", Bandwidth, K * K),
    u!("GB/s", Bandwidth, K * K * K),
    u!("TB/s", Bandwidth, K * K * K * K),
    u!("MiB/s", Bandwidth, KI * KI),
    u!("GiB/s", Bandwidth, KI * KI * KI),
    u!("Mb/s", Bandwidth, K * K / 8.0),
    u!("Gb/s", Bandwidth, K * K * K / 8.0),
    u!("Tb/s", Bandwidth, K * K * K * K / 8.0),
    u!("Mbps", Bandwidth, K * K / 8.0),
    u!("Gbps", Bandwidth, K * K * K / 8.0),
    u!("Tbps", Bandwidth, K * K * K * K / 8.0),
    u!("ns", Time, 1e-9),
    u!("us", Time, 1e-6),
    u!("µs", Time, 1e-6),
    u!("ms", Time, 1e-3),
    u!("s", Time, 1.0),
    u!("min", Time, 60.0),
    u!("h", Time, 3600.0),
    u!("tokens", Tokens, 1.0),
    u!("token", Tokens, 1.0),
    u!("tok", Tokens, 1.0),
    u!("tokens/s", TokenRate, 1.0),
    u!("token/s", TokenRate, 1.0),
    u!("tok/s", TokenRate, 1.0),
    u!("tokens/min", TokenRate, 1.0 / 60.0),
    u!("req/s", RequestRate, 1.0),
    u!("req/min", RequestRate, 1.0 / 60.0),
    u!("req/h", RequestRate, 1.0 / 3600.0),
    u!("GFLOPS", FlopRate, 1e9),
    u!("TFLOPS", FlopRate, 1e12),
    u!("PFLOPS", FlopRate, 1e15),
    u!("TFLOP/s", FlopRate, 1e12),
    u!("PFLOP/s", FlopRate, 1e15),
    u!("%", Ratio, 0.01),
];

/// Looks a unit symbol up exactly (case-sensitive).
pub fn lookup(symbol: &str) -> Option<&'static Unit> {
    UNITS.iter().find(|u| u.symbol == symbol)
}

/// Money literal `$X` or `$X/h` → dimension and factor; `None` for an unknown time unit.
pub fn money(per: Option<&str>) -> Option<(Dimension, f64)> {
    match per {
        None => Some((Dimension::Money, 1.0)),
        Some("h") | Some("hr") | Some("hour") => Some((Dimension::MoneyRate, 1.0)),
        Some("min") => Some((Dimension::MoneyRate, 60.0)),
        Some("s") => Some((Dimension::MoneyRate, 3600.0)),
        Some("day") => Some((Dimension::MoneyRate, 1.0 / 24.0)),
        Some("month") | Some("mo") => Some((Dimension::MoneyRate, 1.0 / 730.0)),
        _ => None,
    }
}

/// Spellings people write for a unit dic spells otherwise (`20 rps`), and dic's symbol.
const ALIASES: &[(&str, &str)] = &[
    ("rps", "req/s"),
    ("qps", "req/s"),
    ("req/sec", "req/s"),
    ("requests/s", "req/s"),
    ("tps", "tok/s"),
    ("tokens/sec", "tokens/s"),
    ("tok/sec", "tok/s"),
];

/// A help line for an unknown unit where the field expects `dim`: a common alias of one
/// of its units, else the nearest of its units (by edit distance), else the nearest of
/// any unit, with a word on bits vs bytes.
pub fn suggest_for(symbol: &str, dim: Dimension) -> Option<String> {
    let lower = symbol.to_ascii_lowercase();
    let alias = ALIASES
        .iter()
        .find(|(a, u)| *a == lower && lookup(u).is_some_and(|u| u.dim == dim));
    if let Some((_, unit)) = alias {
        return Some(format!("did you mean `{unit}`?"));
    }
    // The nearest of the field's units, ties to the table's first (`tokens` before
    // `token`), within did_you_mean's distance.
    let nearest =
        crate::diagnostics::did_you_mean(symbol, dim.units().map(|u| u.symbol)).and_then(|found| {
            let distance =
                |u: &str| crate::diagnostics::edit_distance(&lower, &u.to_ascii_lowercase());
            let best = distance(found);
            dim.units().map(|u| u.symbol).find(|u| distance(u) == best)
        });
    nearest
        .map(|s| format!("did you mean `{s}`?"))
        .or_else(|| suggest(symbol))
}

/// A help line for an unknown unit: a near miss, with a word on bits vs bytes.
pub fn suggest(symbol: &str) -> Option<String> {
    let lower = symbol.to_ascii_lowercase();
    if matches!(lower.as_str(), "gb/s" | "tb/s" | "mb/s") && lookup(symbol).is_none() {
        let up = symbol.to_ascii_uppercase();
        let bits = format!("{}b/s", &up[..1]);
        return Some(format!(
            "write `{up}` for bytes per second or `{bits}` for bits per second (8× smaller)"
        ));
    }
    let candidates = UNITS.iter().map(|u| u.symbol);
    crate::diagnostics::did_you_mean(symbol, candidates).map(|s| format!("did you mean `{s}`?"))
}

/// Formats a byte count in binary units with two decimals (`152.30 GiB`).
pub fn fmt_bytes(bytes: f64) -> String {
    let gib = KI * KI * KI;
    if bytes.abs() >= gib {
        format!("{:.2} GiB", bytes / gib)
    } else if bytes.abs() >= KI * KI {
        format!("{:.1} MiB", bytes / (KI * KI))
    } else {
        format!("{bytes:.0} B")
    }
}

/// A number as written in `.dist`: whole numbers without a fraction.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.is_finite() && v.abs() >= 1e15 {
        // `1e300`, not three hundred digits.
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_whole_plain_and_huge_in_exponent_form() {
        assert_eq!(fmt_num(4096.0), "4096");
        assert_eq!(fmt_num(0.5), "0.5");
        assert_eq!(fmt_num(1e300), "1e300");
        assert_eq!(fmt_num(-2.5e20), "-2.5e20");
        assert_eq!(fmt_num(f64::NAN), "NaN");
    }

    #[test]
    fn decimal_and_binary_differ() {
        assert_eq!(lookup("GB").unwrap().factor, 1e9);
        assert_eq!(lookup("GiB").unwrap().factor, 1073741824.0);
        assert_eq!(
            lookup("Gb/s").unwrap().factor * 8.0,
            lookup("GB/s").unwrap().factor
        );
        assert!(lookup("gib").is_none());
        assert_eq!(suggest("GIB").as_deref(), Some("did you mean `GiB`?"));
        assert!(suggest("gb/s").unwrap().contains("bits"));
        // by what the field expects: a rate of requests, a count of tokens
        let mean = |s: &str, d| suggest_for(s, d).unwrap_or_default();
        assert_eq!(mean("rps", Dimension::RequestRate), "did you mean `req/s`?");
        assert_eq!(mean("tokns", Dimension::Tokens), "did you mean `tokens`?");
        assert_eq!(mean("tps", Dimension::TokenRate), "did you mean `tok/s`?");
        assert_eq!(mean("mss", Dimension::Time), "did you mean `ms`?");
        assert_eq!(fmt_bytes(152.3 * 1073741824.0), "152.30 GiB");
    }
}
