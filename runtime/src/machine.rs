//! What this machine can hold, read before `dic run` forks a rank or opens a socket: its
//! CPUs, the memory new processes may use (`MemAvailable`, capped by the cgroup's limit),
//! the per-process address-space limit, and the open-file and thread limits. [`check`]
//! compares a set of ranks with them and says, with numbers, every bound they exceed, so
//! `--local` refuses a plan it cannot fork and a call too large for memory is a message
//! before the run, not an abort in the middle of it.
//!
//! The estimates are deliberately simple: a rank costs [`RANK_BASE_BYTES`] plus its
//! largest call's buffers (`replay::peak_buffer_bytes`), one thread per peer plus two, and
//! two sockets per peer; the launcher two pipes and two threads per rank.

use crate::handshake::MAX_PENDING;
use crate::plan::Plan;
use crate::replay::{peak_buffer_bytes, ReplayOptions};
use crate::session::peers_of;
use std::path::Path;

/// Ranks per CPU `--local` starts at most: ranks mostly wait on each other, but past this
/// the heartbeats of a loaded machine arrive late enough to be mistaken for a hung rank.
pub const RANKS_PER_CPU: u64 = 64;
/// Memory one rank process uses besides its buffers (code, stacks, queues), a generous
/// round figure: a rank of an 8-rank debug-build job measures 10 MiB resident.
pub const RANK_BASE_BYTES: u64 = 32 << 20;
/// Address space a rank uses besides its buffers (thread stacks, allocator arenas).
const ADDRESS_SPACE_OVERHEAD: u64 = 1 << 30;
/// File descriptors any dic process needs besides its ranks' (stdio, the plan, libraries).
const FILES_BASE: u64 = 32;

/// This machine's limits; `None` where there is none (or it cannot be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub cpus: u64,
    /// Bytes new processes may use together.
    pub memory_available: Option<u64>,
    /// Each process's address-space limit (`ulimit -v`).
    pub address_space: Option<u64>,
    /// Open files per process (`ulimit -n`).
    pub open_files: Option<u64>,
    /// Threads this user (or this cgroup) may run (`ulimit -u`, threads-max, pids.max).
    pub threads: Option<u64>,
}

/// What a set of ranks will ask of the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    /// Rank processes this command starts (0 when it runs one rank itself).
    pub forks: u64,
    /// Every rank's peak buffer bytes (without [`RANK_BASE_BYTES`]), by world rank.
    pub buffers: Vec<(usize, u64)>,
    /// Threads of every rank together (and the launcher's).
    pub threads: u64,
    /// File descriptors the busiest process holds at once.
    pub files: u64,
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

impl Machine {
    /// Read this machine's limits (Linux `/proc`, cgroup v2, `getrlimit`).
    pub fn this() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb.saturating_mul(1024))
        });
        let cgroup = Path::new("/sys/fs/cgroup");
        let cgroup_free = match (
            read_number(&cgroup.join("memory.max")),
            read_number(&cgroup.join("memory.current")),
        ) {
            (Some(max), Some(current)) => Some(max.saturating_sub(current)),
            _ => None,
        };
        let pids_free = match (
            read_number(&cgroup.join("pids.max")),
            read_number(&cgroup.join("pids.current")),
        ) {
            (Some(max), Some(current)) => Some(max.saturating_sub(current)),
            _ => None,
        };
        let threads = [
            rlimit(libc::RLIMIT_NPROC),
            read_number(Path::new("/proc/sys/kernel/threads-max")),
            pids_free,
        ]
        .into_iter()
        .flatten()
        .min();
        Machine {
            cpus,
            memory_available: [meminfo, cgroup_free].into_iter().flatten().min(),
            address_space: rlimit(libc::RLIMIT_AS),
            open_files: rlimit(libc::RLIMIT_NOFILE),
            threads,
        }
    }
}

/// Raise this process's open-file limit to its hard limit (children inherit it): rank 0
/// holds two sockets per rank, past the usual soft limit of 1024 for a few hundred ranks.
#[allow(unsafe_code)] // FFI: getrlimit/setrlimit(2), which std does not wrap
pub fn raise_open_files() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit this function owns.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// What running `ranks` of `plan` asks of this machine; `forks` when each runs as a child
/// process of this one (`--local`, `--node`), not in this process (`--rank`).
pub fn demand(
    plan: &Plan,
    ranks: &[usize],
    forks: bool,
    replay: &ReplayOptions,
    calibrate: &[u64],
) -> Demand {
    let peers: Vec<u64> = ranks
        .iter()
        .map(|&r| peers_of(plan, r).len() as u64)
        .collect();
    let threads = peers.iter().map(|p| p + 2).sum::<u64>()
        + if forks { 2 * ranks.len() as u64 + 1 } else { 0 };
    // A rank holds each peer's socket and its writer's clone; rank 0 also every
    // registration and every handshake in flight at the rendezvous.
    let rank_files = ranks
        .iter()
        .zip(&peers)
        .map(|(&r, p)| {
            let rendezvous = if r == 0 {
                (plan.world_size + MAX_PENDING) as u64
            } else {
                1
            };
            (2 * p).max(rendezvous) + 2
        })
        .max()
        .unwrap_or(0);
    let launcher_files = if forks { 2 * ranks.len() as u64 } else { 0 };
    Demand {
        forks: if forks { ranks.len() as u64 } else { 0 },
        buffers: ranks
            .iter()
            .map(|&r| (r, peak_buffer_bytes(plan, r, replay, calibrate)))
            .collect(),
        threads,
        files: rank_files.max(launcher_files),
    }
}

/// A number in a one-line file (`max` and unreadable files are `None`).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The soft limit of `resource`; `None` when unlimited.
#[allow(unsafe_code)] // FFI: getrlimit(2), which std does not wrap
fn rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a local this function owns.
    let ok = unsafe { libc::getrlimit(resource, &mut l) } == 0;
    (ok && l.rlim_cur != libc::RLIM_INFINITY).then_some(l.rlim_cur)
}

/// Every bound `demand` exceeds on `machine`, each a phrase with its numbers; empty when
/// it fits.
pub fn check(demand: &Demand, machine: &Machine) -> Vec<String> {
    let mut over = Vec::new();
    let ranks = demand.buffers.len() as u64;
    if demand.forks > 0 {
        let by_cpu = RANKS_PER_CPU.saturating_mul(machine.cpus);
        if demand.forks > by_cpu {
            over.push(format!(
                "CPUs: at most {by_cpu} ranks on {} CPU{} ({RANKS_PER_CPU} per CPU)",
                machine.cpus,
                if machine.cpus == 1 { "" } else { "s" }
            ));
        }
    }
    let total = demand
        .buffers
        .iter()
        .fold(0u64, |acc, (_, b)| acc.saturating_add(*b))
        .saturating_add(RANK_BASE_BYTES.saturating_mul(ranks));
    if let Some(available) = machine.memory_available {
        if total > available {
            let largest = demand
                .buffers
                .iter()
                .max_by_key(|(r, b)| (*b, std::cmp::Reverse(*r)));
            over.push(format!(
                "memory: {} rank{} need {} ({} MiB each, plus buffers of up to {} for the largest call{}), and {} is available",
                ranks,
                if ranks == 1 { "" } else { "s" },
                gib(total),
                RANK_BASE_BYTES >> 20,
                gib(largest.map_or(0, |(_, b)| *b)),
                largest.map_or(String::new(), |(r, _)| format!(", on rank {r}")),
                gib(available)
            ));
        }
    }
    if let Some(limit) = machine.address_space {
        if let Some((rank, b)) = demand
            .buffers
            .iter()
            .find(|(_, b)| b.saturating_add(ADDRESS_SPACE_OVERHEAD) > limit)
        {
            over.push(format!(
                "memory: rank {rank}'s buffers need {} and the address-space limit (ulimit -v) is {}",
                gib(*b),
                gib(limit)
            ));
        }
    }
    if let Some(limit) = machine.open_files {
        let need = demand.files.saturating_add(FILES_BASE);
        if need > limit {
            over.push(format!(
                "open files: {need} needed and the limit (ulimit -n) is {limit}"
            ));
        }
    }
    if let Some(limit) = machine.threads {
        if demand.threads > limit {
            over.push(format!(
                "threads: {} needed and the limit (ulimit -u, threads-max or the cgroup's pids.max) is {limit}",
                demand.threads
            ));
        }
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Machine {
        Machine {
            cpus: 2,
            memory_available: Some(8 << 30),
            address_space: None,
            open_files: Some(1024),
            threads: Some(10_000),
        }
    }

    #[test]
    fn a_plan_that_fits_passes_and_one_that_does_not_says_every_bound() {
        let fits = Demand {
            forks: 8,
            buffers: (0..8).map(|r| (r, 1 << 20)).collect(),
            threads: 80,
            files: 40,
        };
        assert!(check(&fits, &small()).is_empty());
        let wide = Demand {
            forks: 4096,
            buffers: (0..4096).map(|r| (r, 1 << 20)).collect(),
            threads: 30_000,
            files: 2 * 4096,
        };
        let over = check(&wide, &small()).join("; ");
        for bound in [
            "CPUs: at most 128 ranks on 2 CPUs",
            "memory: 4096 ranks need",
            "open files: 8224 needed",
            "threads: 30000",
        ] {
            assert!(over.contains(bound), "{bound}: {over}");
        }
    }

    #[test]
    fn one_huge_call_is_over_memory_and_address_space() {
        let mut m = small();
        m.address_space = Some(3 << 30);
        let one = Demand {
            forks: 0,
            buffers: vec![(0, 32 << 30)],
            threads: 3,
            files: 4,
        };
        let over = check(&one, &m).join("; ");
        assert!(over.contains("32.0 GiB"), "{over}");
        assert!(
            over.contains("address-space limit (ulimit -v) is 3.0 GiB"),
            "{over}"
        );
        assert!(
            !over.contains("CPU"),
            "one rank run in place forks nothing: {over}"
        );
    }

    #[test]
    fn this_machine_reads() {
        let m = Machine::this();
        assert!(m.cpus >= 1);
        assert!(m.memory_available.is_some_and(|b| b > 0));
    }
}
