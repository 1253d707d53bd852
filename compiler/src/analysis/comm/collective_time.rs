//! What one collective costs: the α-β time of NCCL's algorithms over the slowest link
//! crossed ([`collective_time`]), and vLLM's TP all-reduce as vLLM runs it inside one
//! NVLink node ([`vllm_all_reduce_time`]: its custom kernel, NCCL, the NVSwitch's own
//! reduction), with the latency and bandwidth fitted on the kernel tables ([`LinkFit`],
//! `DEEPEP_FITS`).

use super::placement::Placement;
use super::Collective;
use crate::analysis::gemm::KernelFamily;
use crate::program::LinkType;

/// NCCL's base latency per collective call (LL protocol, `baseLatencies` in
/// NVIDIA/nccl src/graph/tuning.cc, reference §2.3); the per-hop α comes from the link.
pub const NCCL_BASE_LATENCY: f64 = 6.6e-6;
/// NVLS (NVLink SHARP) fixed latency: NCCL's NVLS Simple hwLatency, 25 µs (reference §2.3).
pub const NVLS_LATENCY: f64 = 25e-6;

/// α-β time of one collective over `p` ranks. `bytes` is the per-rank buffer (AllReduce),
/// the total gathered/scattered array (AllGather, ReduceScatter), the bytes one rank
/// sends to all others (AllToAll) or the message (SendRecv). AllReduce takes the fastest
/// of the algorithms NCCL would consider on that link: ring, tree, and NVLS on NVSwitch.
pub fn collective_time(kind: Collective, bytes: f64, p: u64, link: &Placement) -> f64 {
    if p <= 1 || bytes <= 0.0 {
        return 0.0;
    }
    let pf = p as f64;
    let a = link.latency;
    let b = link.bandwidth.max(1.0);
    NCCL_BASE_LATENCY
        + match kind {
            Collective::AllReduce => {
                // ring: 2(p−1)α + 2(p−1)/p · S/B (reference §2.2)
                let ring = kind.alpha_beta(bytes, p, a, b);
                // double binary tree: 2·log2(p)·α + 2·S/B (NCCL tree algBw = busBw / 2)
                let tree = 2.0 * pf.log2().ceil() * a + 2.0 * bytes / b;
                // NVLS: each rank sends S into the switch once and receives the reduction once
                let nvls = if link.link_type == LinkType::Nvswitch && p > 2 {
                    NVLS_LATENCY + bytes / b
                } else {
                    f64::INFINITY
                };
                ring.min(tree).min(nvls)
            }
            // ring AllGather/ReduceScatter, pairwise All-to-All, Send/Recv, binomial Broadcast
            _ => kind.alpha_beta(bytes, p, a, b),
        }
}

/// vLLM's custom all-reduce (`custom_all_reduce.py`): one-shot and two-shot kernels over
/// NVLink peer memory, used instead of NCCL for 2, 4, 6 or 8 GPUs of one fully
/// NVLink-connected node and messages up to 8 MiB. Its fixed latency, per architecture, is
/// the median of the kernel tables' CUDA-graph runs at ≤ 8 KiB
/// (../shared/calibration/kernels/*/allreduce.csv.gz: H100 and H200 for Hopper, B200 for
/// Blackwell); other architectures take Hopper's. `calibration/tests/calibration.rs`
/// re-derives them and bounds the residual.
pub const CUSTOM_ALL_REDUCE_LATENCY_HOPPER: f64 = 4.569e-6;
pub const CUSTOM_ALL_REDUCE_LATENCY_BLACKWELL: f64 = 7.034e-6;
pub const CUSTOM_ALL_REDUCE_MAX_BYTES: f64 = 8.0 * 1024.0 * 1024.0;

/// The custom all-reduce's fixed latency on a GPU architecture.
pub fn custom_all_reduce_latency(architecture: Option<&str>) -> f64 {
    match KernelFamily::of(architecture) {
        KernelFamily::Blackwell => CUSTOM_ALL_REDUCE_LATENCY_BLACKWELL,
        KernelFamily::Hopper => CUSTOM_ALL_REDUCE_LATENCY_HOPPER,
    }
}

/// A transfer measured inside one NVLink node: a fixed latency, then the bytes on the
/// wire at a share of the placement's bandwidth (the link's × [`LINK_EFFICIENCY`]). Its
/// two constants are fitted on the kernel tables (`dic_calibration::kernels`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFit {
    pub latency: f64,
    pub efficiency: f64,
}

impl LinkFit {
    pub fn time(&self, wire_bytes: f64, bandwidth: f64) -> f64 {
        self.latency + wire_bytes / (bandwidth.max(1.0) * self.efficiency)
    }
}

/// NCCL's all-reduce inside one NVLink node as vLLM calls it (pynccl, above the custom
/// all-reduce's 8 MiB): `latency + 2(p−1)/p · S / (B · efficiency)`. Fitted per
/// architecture on the kernel tables' messages of 8 MiB to 1 GiB on 2, 4 and 8 GPUs
/// (../shared/calibration/kernels/*/allreduce.csv.gz: H100 and H200 for Hopper, B200 for
/// Blackwell; the calibration crate's tests re-run the fit). The measured bus bandwidth
/// is well below NVLS's ideal (S/B): 0.58 ms for 128 MiB on 8 H100s, 0.44 ms on 8 B200s.
pub const NCCL_NVLINK_ALL_REDUCE_HOPPER: LinkFit = LinkFit {
    latency: 30e-6,
    efficiency: 0.98,
};
pub const NCCL_NVLINK_ALL_REDUCE_BLACKWELL: LinkFit = LinkFit {
    latency: 30e-6,
    efficiency: 0.86,
};

/// The NVLink all-reduce constants of a GPU architecture (Hopper's for those without
/// tables).
pub fn nccl_nvlink_all_reduce(architecture: Option<&str>) -> LinkFit {
    match KernelFamily::of(architecture) {
        KernelFamily::Blackwell => NCCL_NVLINK_ALL_REDUCE_BLACKWELL,
        KernelFamily::Hopper => NCCL_NVLINK_ALL_REDUCE_HOPPER,
    }
}

/// The all-reduce's bytes on the wire per rank: the ring's `2(p−1)/p · S`.
pub fn all_reduce_wire_bytes(bytes: f64, p: u64) -> f64 {
    let pf = p.max(1) as f64;
    2.0 * (pf - 1.0) / pf * bytes
}

/// DeepEP's kernels as vLLM's `deepep_low_latency` and `deepep_high_throughput` backends
/// run them inside one NVLink node: dispatch and combine, each a [`LinkFit`] over the
/// bytes a rank sends (its tokens × the distinct remote ranks of their experts × hidden ×
/// 2 B), fitted per architecture on the kernel tables
/// (../shared/calibration/kernels/*/moe_a2a.csv.gz, EP 8 on one node; median |error|
/// 8–14%). Their fixed costs dominate a decode step's exchange: about 50 µs per
/// low-latency dispatch or combine, 80–260 µs per high-throughput one.
pub const DEEPEP_FITS: [(KernelFamily, &str, [LinkFit; 2]); 4] = [
    (
        KernelFamily::Hopper,
        "deepep_low_latency",
        [
            LinkFit {
                latency: 52e-6,
                efficiency: 0.35,
            },
            LinkFit {
                latency: 48e-6,
                efficiency: 0.44,
            },
        ],
    ),
    (
        KernelFamily::Hopper,
        "deepep_high_throughput",
        [
            LinkFit {
                latency: 244e-6,
                efficiency: 0.67,
            },
            LinkFit {
                latency: 80e-6,
                efficiency: 0.49,
            },
        ],
    ),
    (
        KernelFamily::Blackwell,
        "deepep_low_latency",
        [
            LinkFit {
                latency: 52e-6,
                efficiency: 0.23,
            },
            LinkFit {
                latency: 60e-6,
                efficiency: 0.8,
            },
        ],
    ),
    (
        KernelFamily::Blackwell,
        "deepep_high_throughput",
        [
            LinkFit {
                latency: 262e-6,
                efficiency: 0.25,
            },
            LinkFit {
                latency: 94e-6,
                efficiency: 0.16,
            },
        ],
    ),
];

/// The fitted dispatch and combine of a DeepEP backend on an architecture (Hopper's for
/// architectures without tables); `None` for other backends.
pub fn deepep_fit(architecture: Option<&str>, backend: &str) -> Option<[LinkFit; 2]> {
    let family = KernelFamily::of(architecture);
    DEEPEP_FITS
        .iter()
        .find(|(f, b, _)| *f == family && *b == backend)
        .map(|e| e.2)
}

/// A TP all-reduce as vLLM runs it: its custom all-reduce where that applies (and is
/// faster), NCCL otherwise (inside one NVLink node as measured, [`nccl_nvlink_all_reduce`]).
/// The NCCL plan keeps [`collective_time`]: `dic run` replays with NCCL.
pub fn vllm_all_reduce_time(
    bytes: f64,
    p: u64,
    link: &Placement,
    architecture: Option<&str>,
) -> f64 {
    if p <= 1 || bytes <= 0.0 {
        return 0.0;
    }
    let nccl = if link.within_one_nvlink_node() {
        let wire = if nvls_all_reduce(link, p, bytes, architecture) {
            bytes
        } else {
            all_reduce_wire_bytes(bytes, p)
        };
        nccl_nvlink_all_reduce(architecture).time(wire, link.bandwidth)
    } else {
        collective_time(Collective::AllReduce, bytes, p, link)
    };
    let custom = matches!(p, 2 | 4 | 6 | 8)
        && link.within_one_nvlink_node()
        && bytes <= CUSTOM_ALL_REDUCE_MAX_BYTES;
    if custom {
        let pf = p as f64;
        nccl.min(
            custom_all_reduce_latency(architecture)
                + 2.0 * (pf - 1.0) / pf * bytes / link.bandwidth.max(1.0),
        )
    } else {
        nccl
    }
}

/// Whether an all-reduce past the custom kernel's range runs on the NVSwitch's own
/// reduction (NVLS): each rank sends its `S` bytes into the switch once and receives the
/// sum once, where a ring moves `2(p−1)/p · S`. vLLM's symmetric-memory all-reduce
/// (`VLLM_ALLREDUCE_USE_SYMM_MEM`, on by default) runs `multimem_all_reduce_` for 4, 6
/// and 8 GPUs on Hopper and 6 and 8 on Blackwell, up to 32–128 MiB by GPU count
/// (`all_reduce_utils.SYMM_MEM_ALL_REDUCE_MAX_SIZES`), and NCCL above picks its NVLS
/// algorithm on an NVSwitch of more than two GPUs. The exception is 4 Blackwell GPUs up to
/// 32 MiB, where vLLM's symmetric memory runs its two-shot kernel, a ring's bytes. Both
/// are charged at the bandwidth fitted on the kernel tables' large messages
/// ([`nccl_nvlink_all_reduce`]).
pub fn nvls_all_reduce(link: &Placement, p: u64, bytes: f64, architecture: Option<&str>) -> bool {
    const TWO_SHOT_MAX_BYTES: f64 = 32.0 * 1024.0 * 1024.0;
    let blackwell_two_shot = KernelFamily::of(architecture) == KernelFamily::Blackwell
        && p == 4
        && bytes <= TWO_SHOT_MAX_BYTES;
    link.link_type == LinkType::Nvswitch && !link.spans_nodes && p >= 4 && !blackwell_two_shot
}
