//! [`EngineOption`]: the typed key of each engine option, named by its row of the
//! schema's engine table.

use crate::schema::{engine_option, Field, VLLM_OPTIONS};

/// The options of the `vllm { … }` block, one per row of [`VLLM_OPTIONS`] (each row
/// names its own): what the checker matches on, exhaustively, to fill
/// [`crate::program::VllmOptions`], so an option added to the table is read or the build
/// fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineOption {
    Port,
    GpuMemoryUtilization,
    MaxModelLen,
    MaxNumSeqs,
    MaxNumBatchedTokens,
    BlockSize,
    EnforceEager,
    CudagraphMode,
    KvCacheMemory,
    EnablePrefixCaching,
    Speculative,
    CpuOffload,
    All2allBackend,
    Dbo,
    Launcher,
    ExtraArgs,
    Env,
    ActivationMemory,
    NonTorchMemory,
    CudaGraphMemory,
}

impl EngineOption {
    /// The option's row of [`VLLM_OPTIONS`].
    pub fn field(self) -> Option<&'static Field> {
        VLLM_OPTIONS.iter().find(|f| f.engine == Some(self))
    }

    /// The option's name in a `.dist` file (`max_num_seqs`).
    pub fn name(self) -> &'static str {
        self.field().map_or("", |f| f.name)
    }

    /// The option written as `name`.
    pub fn named(name: &str) -> Option<EngineOption> {
        engine_option(name)?.engine
    }
}
