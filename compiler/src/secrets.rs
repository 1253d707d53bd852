//! What a credential looks like: tokens of the formats their issuers document (Hugging
//! Face `hf_…`, OpenAI/Anthropic `sk-…`, JSON Web Tokens, AWS access key ids, GitHub,
//! Google and Slack tokens) and PEM private-key blocks, found anywhere inside a string.
//!
//! dic writes `extra_args` and `env` values into scripts, manifests and report.json in
//! plain text, so the checker refuses a value holding one (E0316), and messages that
//! quote a value cut each token to its prefix ([`redact_secrets`]). Model ids, paths,
//! numbers and JSON without a token are not credentials.

/// What a token-shaped value is: a credential a provider issued, recognised by its
/// published prefix and alphabet. dic writes `extra_args` and `env` into scripts,
/// manifests and report.json in plain text, so such a value is refused wherever it sits
/// inside a string (after `=`, inside JSON or a URL), whatever the variable is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretShape {
    /// What the credential is, e.g. "a Hugging Face token".
    pub what: &'static str,
    /// The prefix it starts with.
    pub prefix: &'static str,
    /// What a message shows instead of the value: the prefix and `…` (`hf_…`).
    pub shown: &'static str,
}

/// One credential format: its prefix and how the rest of the token reads.
struct TokenFormat {
    shape: SecretShape,
    /// Characters the body (after the prefix) may contain.
    body: fn(char) -> bool,
    /// Fewest body characters a real token has (shorter ones are ordinary words).
    min_body: usize,
    /// Most body characters (`usize::MAX`: no limit).
    max_body: usize,
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}
fn alnum_dash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}
fn upper_digit(c: char) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}
fn jwt_char(c: char) -> bool {
    alnum_dash(c) || c == '.'
}

const fn shape(what: &'static str, prefix: &'static str, shown: &'static str) -> SecretShape {
    SecretShape {
        what,
        prefix,
        shown,
    }
}

/// A PEM private-key block (any algorithm: RSA, EC, OPENSSH, PKCS#8).
const PRIVATE_KEY: SecretShape = shape(
    "a private key",
    "-----BEGIN",
    "-----BEGIN … PRIVATE KEY-----",
);

fn is_private_key(s: &str) -> bool {
    s.contains("-----BEGIN") && s.contains("PRIVATE KEY")
}

/// The formats recognised, from each issuer's documentation of its token prefixes.
const TOKEN_FORMATS: &[TokenFormat] = &[
    TokenFormat {
        shape: shape("a Hugging Face token", "hf_", "hf_…"),
        body: alnum,
        min_body: 30,
        max_body: 64,
    },
    TokenFormat {
        shape: shape("a GitHub token", "ghp_", "ghp_…"),
        body: alnum,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("a GitHub token", "gho_", "gho_…"),
        body: alnum,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("a GitHub token", "ghu_", "ghu_…"),
        body: alnum,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("a GitHub token", "ghs_", "ghs_…"),
        body: alnum,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("a GitHub token", "ghr_", "ghr_…"),
        body: alnum,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("a GitHub token", "github_pat_", "github_pat_…"),
        body: alnum_dash,
        min_body: 30,
        max_body: 255,
    },
    TokenFormat {
        shape: shape("an OpenAI or Anthropic API key", "sk-", "sk-…"),
        body: alnum_dash,
        min_body: 20,
        max_body: usize::MAX,
    },
    TokenFormat {
        shape: shape("an AWS access key id", "AKIA", "AKIA…"),
        body: upper_digit,
        min_body: 16,
        max_body: 16,
    },
    TokenFormat {
        shape: shape("an AWS temporary access key id", "ASIA", "ASIA…"),
        body: upper_digit,
        min_body: 16,
        max_body: 16,
    },
    TokenFormat {
        shape: shape("a Google API key", "AIza", "AIza…"),
        body: alnum_dash,
        min_body: 35,
        max_body: 35,
    },
    TokenFormat {
        shape: shape("a Slack token", "xoxb-", "xoxb-…"),
        body: alnum_dash,
        min_body: 20,
        max_body: usize::MAX,
    },
    TokenFormat {
        shape: shape("a Slack token", "xoxp-", "xoxp-…"),
        body: alnum_dash,
        min_body: 20,
        max_body: usize::MAX,
    },
    TokenFormat {
        shape: shape("a JSON Web Token", "eyJ", "eyJ…"),
        body: jwt_char,
        min_body: 20,
        max_body: usize::MAX,
    },
];

/// The credential `s` holds, if it holds one: a token of a known format starting at a
/// word boundary, or a PEM private-key block. Model ids (`meta-llama/…`), paths,
/// numbers and JSON without such a token are not credentials.
pub fn secret_shape(s: &str) -> Option<SecretShape> {
    if s.contains("-----BEGIN") && s.contains("PRIVATE KEY") {
        return Some(shape(
            "a private key",
            "-----BEGIN … PRIVATE KEY-----",
            "-----BEGIN … PRIVATE KEY-----…",
        ));
    }
    secret_tokens(s).next().map(|(_, f)| f.shape)
}

/// `s` with every token of a known format cut to its prefix (`hf_…`), for messages that
/// quote a value: a diagnostic must not print the credential it refuses.
pub fn redact_secrets(s: &str) -> String {
    if is_private_key(s) {
        return PRIVATE_KEY.shown.into();
    }
    let mut out = String::with_capacity(s.len());
    let mut from = 0;
    for (range, f) in secret_tokens(s) {
        out.push_str(&s[from..range.start]);
        out.push_str(f.shape.shown);
        from = range.end;
    }
    out.push_str(&s[from..]);
    out
}

/// Each token of a known format in `s`: its byte range and format, left to right.
fn secret_tokens(
    s: &str,
) -> impl Iterator<Item = (std::ops::Range<usize>, &'static TokenFormat)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < s.len() {
            let start = at;
            let boundary = s[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_' && c != '-');
            at += s[start..].chars().next().map_or(1, char::len_utf8);
            if !boundary {
                continue;
            }
            let rest = &s[start..];
            for f in TOKEN_FORMATS {
                let Some(body) = rest.strip_prefix(f.shape.prefix) else {
                    continue;
                };
                let len = body.chars().take_while(|c| (f.body)(*c)).count();
                if len >= f.min_body && len <= f.max_body && token_like(f, &body[..len]) {
                    let end = start + f.shape.prefix.len() + len;
                    at = end;
                    return Some((start..end, f));
                }
            }
        }
        None
    })
}

/// Whether a body that has a format's alphabet and length reads as a token, not a word:
/// a fixed-length format (AWS, Google) is specific enough; a variable-length body is
/// random, so it has a digit or both cases (a word such as `sk-my-own-model-name` has
/// neither); a JWT is dot-separated parts, the second also JSON (`eyJ`).
fn token_like(f: &TokenFormat, body: &str) -> bool {
    if f.shape.prefix == "eyJ" {
        // header.payload.signature (the signature may be empty; a trailing `.` ends a
        // sentence)
        let parts: Vec<&str> = body.trim_end_matches('.').split('.').collect();
        return (2..=3).contains(&parts.len())
            && parts[0].len() >= 8
            && parts[1].starts_with("eyJ");
    }
    let has = |p: fn(&char) -> bool| body.chars().any(|c| p(&c));
    f.min_body == f.max_body
        || has(char::is_ascii_digit)
        || (has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase))
}

#[cfg(test)]
/// Fake tokens of each format (right prefix, alphabet and length; issued by no one).
pub(crate) const FAKE_TOKENS: &[(&str, &str)] = &[
    ("hf_Xk3v9QmZr7TbLw2NcYp5HsDfJg8AeUo1Ri", "a Hugging Face token"),
    ("sk-proj-4fQz9XvLm2Rt7YbNw3Kc8HsPj5Dg1AeU", "an OpenAI or Anthropic API key"),
    ("sk-ant-api03-Zq8Wn4Lx7Rb2Tm9Kc5Hv", "an OpenAI or Anthropic API key"),
    ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "a JSON Web Token"),
    ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
    ("AKIAQWERTYUIOPASDFGH", "an AWS access key id"),
    ("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", "a Hugging Face token"),
    ("ASIAY34FZKBOKMUTVV7A", "an AWS temporary access key id"),
    ("ghp_R7mX2kQ9vLw4Tb8Nc3Yp6HsDj1Fg5AeUo0Zi", "a GitHub token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "a GitHub token"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjEAAAAA", "a private key"),
    ("-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA", "a private key"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shaped_values_are_secrets_wherever_they_sit() {
        for (token, what) in FAKE_TOKENS {
            for s in [
                token.to_string(),
                format!("WANDB_SETTING={token}"),
                format!(r#"{{"headers": {{"Authorization": "Bearer {token}"}}}}"#),
                format!("https://proxy.example.com/v1?key={token}&x=1"),
            ] {
                assert_eq!(secret_shape(&s).map(|x| x.what), Some(*what), "{s}");
                let shown = redact_secrets(&s);
                assert!(!shown.contains(&token[token.len() - 8..]), "{shown}");
            }
        }
    }

    #[test]
    fn ordinary_values_are_not_secrets() {
        for s in [
            "meta-llama/Llama-3.1-70B-Instruct",
            "/mnt/models/hf_cache/hub",
            "hf_transfer",
            "HF_HUB_ENABLE_HF_TRANSFER=1",
            "8192",
            "0.92",
            "deepseek_r1",
            "FLASHINFER",
            r#"{"pass_config": {"fuse_allreduce_rms": true}, "mode": 3}"#,
            "--lora-modules",
            "sql-lora=org/sql-lora-adapter-with-a-long-name-2024",
            "task-classification-model-v2-2024-finetuned",
            "ASIAPACIFIC",
            "AKIA",
            "sk-learn",
            "sk-my-own-classifier-model-name-for-tasks",
            "eyJ",
            "nvidia/Kimi-K2.6-NVFP4",
            "s3://bucket/models/llama-3.1-8b/",
        ] {
            assert_eq!(secret_shape(s), None, "{s}");
            assert_eq!(redact_secrets(s), s);
        }
    }
}
