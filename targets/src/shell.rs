//! Shell quoting for generated scripts: every value that came from the user is single-
//! quoted, so a model name like `$(rm -rf ~)` or `a'b` is passed through literally.
//! Only dic's own environment references (`${DIC_HEAD_ADDR}`) are expanded, on purpose.

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Arg {
    /// Passed as is.
    Literal(String),
    /// The value of an environment variable set by the operator or the pod, between a
    /// fixed prefix and suffix of dic's own (`--address=${DIC_HEAD_ADDR}:6379`).
    Env {
        prefix: &'static str,
        var: &'static str,
        suffix: &'static str,
    },
}

impl Arg {
    pub fn lit(s: impl Into<String>) -> Arg {
        Arg::Literal(s.into())
    }
    /// `${var}` alone.
    pub fn env(var: &'static str) -> Arg {
        Arg::Env {
            prefix: "",
            var,
            suffix: "",
        }
    }
    /// True when the argument reads `var`.
    pub fn reads(&self, v: &str) -> bool {
        matches!(self, Arg::Env { var, .. } if *var == v)
    }
    /// The form used in `commands.json`.
    pub fn json_form(&self) -> String {
        match self {
            Arg::Literal(s) => s.clone(),
            Arg::Env {
                prefix,
                var,
                suffix,
            } => format!("{prefix}${{{var}}}{suffix}"),
        }
    }
    /// The form used in a bash script: literals single-quoted, references double-quoted
    /// (prefix and suffix are dic's own constants, never user input).
    pub fn shell_form(&self) -> String {
        match self {
            Arg::Literal(s) => quote(s),
            Arg::Env {
                prefix,
                var,
                suffix,
            } => format!("\"{prefix}${{{var}}}{suffix}\""),
        }
    }
}

/// Single-quotes `s` for bash (POSIX): `'` becomes `'\''`. Words made only of safe
/// characters stay bare for readability.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A command line for a script.
pub fn line(args: &[Arg]) -> String {
    args.iter()
        .map(Arg::shell_form)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_everything_dangerous() {
        assert_eq!(quote("meta-llama/Llama-3.1-8B"), "meta-llama/Llama-3.1-8B");
        assert_eq!(quote("$(touch x)"), "'$(touch x)'");
        assert_eq!(quote("a'b"), "'a'\\''b'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("`x`;y"), "'`x`;y'");
        assert_eq!(
            Arg::env("DIC_HEAD_ADDR").shell_form(),
            "\"${DIC_HEAD_ADDR}\""
        );
        let a = Arg::Env {
            prefix: "--address=",
            var: "DIC_HEAD_ADDR",
            suffix: ":6379",
        };
        assert_eq!(a.shell_form(), "\"--address=${DIC_HEAD_ADDR}:6379\"");
        assert_eq!(a.json_form(), "--address=${DIC_HEAD_ADDR}:6379");
    }
}
