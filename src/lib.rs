//! The `dic` command line's library half: what the binary and the integration tests
//! share — diagnostic rendering ([`render`]), the disk [`World`](dic_compiler::source::World)
//! ([`disk`]) and the exit-code contract ([`exit`]).

pub mod disk;
pub mod out_dir;
pub mod render;

/// Exit codes: a contract scripts and CI rely on.
pub mod exit {
    /// Success; warnings allowed.
    pub const OK: u8 = 0;
    /// Errors found, or `--check` found drift.
    pub const ERRORS: u8 = 1;
    /// Usage error, or a file that cannot be read.
    pub const USAGE: u8 = 2;
}
