//! Shell quoting for generated scripts: every value that came from the user is single-
//! quoted, so a model name like `$(rm -rf ~)` or `a'b` is passed through literally.
//! Only dic's own environment references (`${DIC_HEAD_ADDR}`) are expanded, on purpose.

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Arg {
    /// Passed as is.
    Literal(String),
    /// The value of an environment variable set by the operator or the pod
    /// (`${NAME}` in JSON and scripts).
    Env(&'static str),
}

impl Arg {
    pub fn lit(s: impl Into<String>) -> Arg {
        Arg::Literal(s.into())
    }
    /// The form used in `commands.json`.
    pub fn json_form(&self) -> String {
        match self {
            Arg::Literal(s) => s.clone(),
            Arg::Env(v) => format!("${{{v}}}"),
        }
    }
    /// The form used in a bash script: literals single-quoted, references double-quoted.
    pub fn shell_form(&self) -> String {
        match self {
            Arg::Literal(s) => quote(s),
            Arg::Env(v) => format!("\"${{{v}}}\""),
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
            Arg::Env("DIC_HEAD_ADDR").shell_form(),
            "\"${DIC_HEAD_ADDR}\""
        );
    }
}
