//! Per-layer kinds of a model and the compact pattern language that writes them.
//!
//! A layer has a *mixer* (how tokens see each other: full attention, a sliding window,
//! linear attention / Gated DeltaNet, Mamba-2, DeepSeek V4's compressed attention, or
//! none) and an *FFN* (dense MLP, MoE, or none). A model's `layer_pattern` lists them
//! compactly:
//!
//! ```text
//! pattern := term (("," | ":") term)*
//! term    := [COUNT] atom [("×" | "x" | "*") COUNT]
//! atom    := "(" pattern ")" | layer
//! layer   := mixer ["+" ffn] | ffn
//! mixer   := full | sliding | linear | mamba | none | compressed<RATIO>
//! ffn     := dense | moe | none          (alone: a layer with no mixer)
//! ```
//!
//! `"(3 linear, full) × 16"` is Qwen3.5's 64 layers; `"(5 sliding, full) × 10"` Gemma's;
//! `"mamba+none, moe, ..."` Nemotron-H's one-block layers. A layer without `+ffn` takes
//! the model's FFN rule (`dense_layers`, `moe_layer_step`). Pure: text in, layers out.

use serde::Serialize;

/// How a layer mixes tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mixer {
    /// Full attention (MHA/GQA/MLA): KV grows with every token.
    Full,
    /// Attention over the last `sliding_window` tokens.
    Sliding,
    /// Linear attention (Gated DeltaNet): a fixed state per request.
    Linear,
    /// Mamba-2: a fixed conv + SSM state per request.
    Mamba,
    /// DeepSeek V4: full attention over tokens compressed `ratio`:1, plus a sliding window.
    Compressed(u32),
    /// No token mixing (an FFN-only block).
    None,
}

/// A layer's feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ffn {
    Dense,
    Moe,
    None,
}

/// One layer as written: the FFN is `None` when the pattern leaves it to the model's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WrittenLayer {
    pub mixer: Mixer,
    pub ffn: Option<Ffn>,
}

/// One layer, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct LayerKind {
    pub mixer: Mixer,
    pub ffn: Ffn,
}

impl Mixer {
    pub fn name(self) -> String {
        match self {
            Mixer::Full => "full".into(),
            Mixer::Sliding => "sliding".into(),
            Mixer::Linear => "linear".into(),
            Mixer::Mamba => "mamba".into(),
            Mixer::Compressed(r) => format!("compressed{r}"),
            Mixer::None => "none".into(),
        }
    }

    /// Attention whose cache grows with the context (full or compressed).
    pub fn grows_with_context(self) -> bool {
        matches!(self, Mixer::Full | Mixer::Compressed(_))
    }

    /// A fixed-size recurrent state per request (linear attention, Mamba).
    pub fn is_recurrent(self) -> bool {
        matches!(self, Mixer::Linear | Mixer::Mamba)
    }
}

impl Ffn {
    pub fn name(self) -> &'static str {
        match self {
            Ffn::Dense => "dense",
            Ffn::Moe => "moe",
            Ffn::None => "none",
        }
    }
}

/// Why a pattern does not parse: the message and the byte offset in the pattern text.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternError {
    pub message: String,
    pub offset: usize,
}

/// The most layers a pattern may expand to (the schema's `layers` bound).
pub const MAX_LAYERS: usize = 4096;

/// Parses and expands a pattern to one entry per layer.
pub fn parse(text: &str) -> Result<Vec<WrittenLayer>, PatternError> {
    let mut p = Parser { text, pos: 0 };
    let out = p.sequence(0)?;
    p.skip_space();
    if p.pos < text.len() {
        return Err(p.error("expected `,`, `:` or the end of the pattern"));
    }
    if out.is_empty() {
        return Err(PatternError {
            message: "the pattern lists no layers".into(),
            offset: 0,
        });
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> PatternError {
        PatternError {
            message: message.to_string(),
            offset: self.pos,
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn count(&mut self) -> Option<Result<usize, PatternError>> {
        self.skip_space();
        let digits: usize = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        let start = self.pos;
        self.pos += digits;
        Some(match self.text[start..self.pos].parse::<usize>() {
            Ok(n) if (1..=MAX_LAYERS).contains(&n) => Ok(n),
            _ => Err(PatternError {
                message: format!("a count is 1 to {MAX_LAYERS}"),
                offset: start,
            }),
        })
    }

    fn sequence(&mut self, depth: usize) -> Result<Vec<WrittenLayer>, PatternError> {
        if depth > 16 {
            return Err(self.error("parentheses nest more than 16 deep"));
        }
        let mut out = Vec::new();
        loop {
            let term = self.term(depth)?;
            if out.len() + term.len() > MAX_LAYERS {
                return Err(self.error(&format!("the pattern expands past {MAX_LAYERS} layers")));
            }
            out.extend(term);
            if !(self.eat(",") || self.eat(":")) {
                return Ok(out);
            }
        }
    }

    fn term(&mut self, depth: usize) -> Result<Vec<WrittenLayer>, PatternError> {
        let before = self.count().transpose()?.unwrap_or(1);
        let atom = if self.eat("(") {
            let inner = self.sequence(depth + 1)?;
            if !self.eat(")") {
                return Err(self.error("expected `)`"));
            }
            inner
        } else {
            vec![self.layer()?]
        };
        let after = if self.eat("×") || self.eat("x") || self.eat("*") {
            match self.count() {
                Some(n) => n?,
                None => return Err(self.error("expected a count after `×`")),
            }
        } else {
            1
        };
        let times = before.saturating_mul(after);
        if atom.len().saturating_mul(times) > MAX_LAYERS {
            return Err(self.error(&format!("the pattern expands past {MAX_LAYERS} layers")));
        }
        let mut out = Vec::with_capacity(atom.len() * times);
        for _ in 0..times {
            out.extend_from_slice(&atom);
        }
        Ok(out)
    }

    fn word(&mut self) -> &str {
        self.skip_space();
        let len = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let start = self.pos;
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn layer(&mut self) -> Result<WrittenLayer, PatternError> {
        let at = {
            self.skip_space();
            self.pos
        };
        let word = self.word().to_string();
        let unknown = |w: &str| {
            PatternError {
            message: format!(
                "`{w}` is not a layer kind: write full, sliding, linear, mamba, none, compressedN, or an FFN alone (dense, moe)"
            ),
            offset: at,
        }
        };
        let mixer = match word.as_str() {
            "full" => Some(Mixer::Full),
            "sliding" => Some(Mixer::Sliding),
            "linear" => Some(Mixer::Linear),
            "mamba" => Some(Mixer::Mamba),
            "none" => Some(Mixer::None),
            "dense" | "moe" => None,
            "" => return Err(self.error("expected a layer kind")),
            w => match w.strip_prefix("compressed").map(str::parse::<u32>) {
                Some(Ok(r)) if (2..=4096).contains(&r) => Some(Mixer::Compressed(r)),
                Some(_) => {
                    return Err(PatternError {
                        message: "a compression ratio is 2 to 4096, e.g. `compressed4`".into(),
                        offset: at,
                    })
                }
                None => return Err(unknown(w)),
            },
        };
        let Some(mixer) = mixer else {
            // An FFN alone: a block without a mixer.
            let ffn = if word == "dense" {
                Ffn::Dense
            } else {
                Ffn::Moe
            };
            return Ok(WrittenLayer {
                mixer: Mixer::None,
                ffn: Some(ffn),
            });
        };
        let ffn = if self.eat("+") {
            let at = self.pos;
            Some(match self.word() {
                "dense" => Ffn::Dense,
                "moe" => Ffn::Moe,
                "none" => Ffn::None,
                w => {
                    return Err(PatternError {
                        message: format!("`{w}` is not an FFN: write dense, moe or none"),
                        offset: at,
                    })
                }
            })
        } else {
            None
        };
        Ok(WrittenLayer { mixer, ffn })
    }
}

fn written_name(l: &WrittenLayer) -> String {
    match (l.mixer, l.ffn) {
        (Mixer::None, Some(Ffn::Dense)) => "dense".into(),
        (Mixer::None, Some(Ffn::Moe)) => "moe".into(),
        (m, None) => m.name(),
        (m, Some(f)) => format!("{}+{}", m.name(), f.name()),
    }
}

/// A compact pattern for `layers`: greedily, the longest stretch that repeats a period
/// (of up to 16 layers) at least twice becomes `(…) × n`, its body written the same way;
/// runs of one kind are counted (`4 sliding`).
pub fn format(layers: &[WrittenLayer]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < layers.len() {
        let rest = &layers[i..];
        // (period, repetitions) covering the most layers; ties to the shorter period.
        let mut best = (1, 1);
        for period in 1..=16.min(rest.len() / 2) {
            let mut reps = 1;
            while (reps + 1) * period <= rest.len()
                && rest[reps * period..(reps + 1) * period] == rest[..period]
            {
                reps += 1;
            }
            if reps >= 2 && period * reps > best.0 * best.1 {
                best = (period, reps);
            }
        }
        let (period, reps) = best;
        parts.push(if period == 1 && reps == 1 {
            written_name(&rest[0])
        } else if period == 1 {
            format!("{reps} {}", written_name(&rest[0]))
        } else {
            format!("({}) × {reps}", format(&rest[..period]))
        });
        i += period * reps;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(p: &str) -> Vec<String> {
        parse(p).unwrap().iter().map(written_name).collect()
    }

    #[test]
    fn patterns_expand() {
        assert_eq!(kinds("(3 linear, full) × 2").len(), 8);
        assert_eq!(
            kinds("(3 linear : full) x 2")[3..5],
            ["full".to_string(), "linear".to_string()]
        );
        assert_eq!(
            kinds("mamba+none, moe, full+none"),
            ["mamba+none", "moe", "full+none"]
        );
        assert_eq!(kinds("2 (sliding, full)").len(), 4);
        assert_eq!(kinds("compressed4, compressed128")[1], "compressed128");
    }

    #[test]
    fn bad_patterns_say_where() {
        let e = parse("3 linear, fool").unwrap_err();
        assert_eq!(e.offset, 10);
        assert!(e.message.contains("`fool`"));
        assert!(parse("(full").unwrap_err().message.contains("`)`"));
        assert!(parse("full × 0").is_err());
        assert!(parse("(full) × 4096 × 2").is_err() || parse("((full) × 4096) × 2").is_err());
        assert!(parse("").is_err());
        assert!(parse("full+mamba")
            .unwrap_err()
            .message
            .contains("not an FFN"));
    }

    #[test]
    fn format_round_trips_compactly() {
        for p in [
            "(3 linear, full) × 16",
            "(5 sliding, full) × 10",
            "(sliding, full) × 18",
            "full, (4 sliding, full) × 9, 2 sliding",
            "mamba+none, moe, mamba+none, full+none, 3 dense",
            "48 full",
        ] {
            let layers = parse(p).unwrap();
            let written = format(&layers);
            assert_eq!(parse(&written).unwrap(), layers, "{p} → {written}");
            assert!(written.len() <= p.len() + 2, "{p} → {written}");
        }
        // Nemotron-H's 52 one-block layers.
        let nemotron: String = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
            .chars()
            .map(|c| match c {
                'M' => "mamba+none,",
                'E' => "moe,",
                _ => "full+none,",
            })
            .collect();
        let layers = parse(nemotron.trim_end_matches(',')).unwrap();
        let written = format(&layers);
        assert_eq!(parse(&written).unwrap(), layers);
        assert!(written.len() < 200, "{written}");
    }
}
