//! The `dic` command line's library half: what the binary and the integration tests
//! share — diagnostic rendering ([`render`]), the disk [`World`](dic_compiler::source::World)
//! ([`disk`]) and the exit-code contract ([`exit`]).

pub mod disk;
pub mod metrics_source;
pub mod out_dir;
pub mod render;

/// `--format human|json`, the same on every command that prints results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For a terminal (diagnostics on stderr).
    Human,
    /// One JSON document on stdout.
    Json,
}

impl Format {
    /// JSON when either `--format json` or the older `--json` asks for it.
    pub fn json(format: Option<Format>, json: bool) -> bool {
        json || format == Some(Format::Json)
    }
}

/// Exit codes: a contract scripts and CI rely on.
pub mod exit {
    /// Success; warnings allowed.
    pub const OK: u8 = 0;
    /// Errors found, or `--check` found drift.
    pub const ERRORS: u8 = 1;
    /// Usage error, or a file that cannot be read.
    pub const USAGE: u8 = 2;
}
