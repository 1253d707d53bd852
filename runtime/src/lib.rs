//! dic's native communication runtime: builds TP/PP/DP/EP communicators from a compiled
//! plan and runs the model's communication pattern to validate and measure a fabric.
//!
//! Empty until the runtime milestone (CPU backend for tests, NCCL backend behind the
//! `nccl` feature).
