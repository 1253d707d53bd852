//! What one rank runs with: its rank, rank 0's address, the bind address, the job's key,
//! the timeout, the replay and calibration settings and the backend. Shared by the session
//! (which runs a rank) and the backends (the NCCL one replays with it), so neither imports
//! the other for it.

use crate::auth::JobKey;
use crate::replay::ReplayOptions;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Nccl,
}

#[derive(Debug, Clone)]
pub struct RankOptions {
    pub rank: usize,
    /// Rank 0's rendezvous address (rank 0 listens on its port, on `bind`).
    pub rendezvous: SocketAddr,
    /// The address this rank's listeners bind: loopback when every rank runs on this
    /// machine (`--local`), every interface on a cluster.
    pub bind: IpAddr,
    /// The job's key: every handshake is authenticated with it.
    pub key: JobKey,
    pub timeout: Duration,
    pub replay: ReplayOptions,
    /// Message sizes for `--calibrate` (empty: no calibration).
    pub calibrate: Vec<u64>,
    pub calibration_calls: u64,
    pub backend: BackendKind,
}
