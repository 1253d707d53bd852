//! dic's native communication runtime: builds a deployment's TP/PP/DP/EP communicators
//! from its compiled `nccl/plan.toml` and replays the model's communication at its real
//! (or scaled) message sizes, to validate and measure a fabric before vLLM starts.
//!
//! Pipeline: [`plan`] (parse + validate, no sockets) → [`rendezvous`] (rank 0 serves the
//! roster) → [`cpu::Mesh`] (TCP between ranks that share a group) → a backend's
//! communicators ([`cpu`], or `nccl` behind the feature) → [`replay`] → [`summary`] at
//! rank 0. [`session`] runs one rank end to end; [`local`] runs every rank as a child
//! process on this machine, after [`machine`] checked that it can hold them;
//! [`handshake`] reads every accepted connection's hello side by side, so no client can
//! hold up the others.

pub mod auth;
pub mod comm;
pub mod cpu;
pub mod handshake;
pub mod local;
pub mod machine;
#[cfg(feature = "nccl")]
#[allow(unsafe_code)] // the NCCL FFI (cudarc): the one place unsafe code is allowed in dic
pub mod nccl;
pub mod nccl_log;
pub mod options;
pub mod plan;
pub mod rendezvous;
pub mod replay;
pub mod session;
pub mod summary;
