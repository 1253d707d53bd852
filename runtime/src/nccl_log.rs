//! Which transports NCCL chose, read from its own INFO log (`NCCL_DEBUG=INFO`,
//! `NCCL_DEBUG_SUBSYS=INIT,NET`, one file per process through `NCCL_DEBUG_FILE`), and
//! whether they are the fabric the plan assumed. NCCL logs each channel's connection as
//! `Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`, peers on one node as
//! `via P2P/CUMEM` or `via SHM`, and NVLink SHARP as `NVLS`; a broken RDMA setup shows
//! up as `via NET/Socket` (vLLM's docs give this check by hand). Pure text in, verdict out.

use std::collections::BTreeSet;

/// A transport NCCL reports for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    /// InfiniBand or RoCE verbs (`NET/IB`).
    NetIb,
    /// A libfabric plugin: AWS EFA (`NET/AWS Libfabric`, `NET/OFI`, `NET/Libfabric`).
    NetOfi,
    /// TCP sockets (`NET/Socket`).
    NetSocket,
    /// GPU peer to peer over NVLink or PCIe (`P2P`), multi-node NVLink included.
    P2p,
    /// Host shared memory (`SHM`).
    Shm,
    /// NVLink SHARP (`NVLS`).
    Nvls,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::NetIb => "NET/IB",
            Transport::NetOfi => "NET/OFI (libfabric)",
            Transport::NetSocket => "NET/Socket",
            Transport::P2p => "P2P",
            Transport::Shm => "SHM",
            Transport::Nvls => "NVLS",
        }
    }
}

/// Every transport a log mentions for a connection.
pub fn transports(log: &str) -> BTreeSet<Transport> {
    let mut out = BTreeSet::new();
    for line in log.lines() {
        if line.contains("NVLS") && (line.contains("comm") || line.contains("multicast")) {
            out.insert(Transport::Nvls);
        }
        let Some((_, via)) = line.split_once(" via ") else {
            continue;
        };
        let t = if via.starts_with("NET/IB") {
            Transport::NetIb
        } else if via.starts_with("NET/Socket") {
            Transport::NetSocket
        } else if via.starts_with("NET/AWS Libfabric")
            || via.starts_with("NET/OFI")
            || via.starts_with("NET/Libfabric")
        {
            Transport::NetOfi
        } else if via.starts_with("P2P") {
            Transport::P2p
        } else if via.starts_with("SHM") {
            Transport::Shm
        } else {
            continue;
        };
        out.insert(t);
    }
    out
}

/// The fabric a plan assumes between nodes (`dic run --expect-transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// InfiniBand or RoCE: some connection over `NET/IB`, none over sockets.
    NetIb,
    /// EFA through the aws-ofi-nccl plugin: `NET/OFI`, none over sockets.
    NetOfi,
    /// Plain TCP (no RDMA): sockets are expected.
    NetSocket,
    /// Multi-node NVLink (GB200/GB300 trays in one NVLink domain): no network at all.
    Nvlink,
}

impl std::str::FromStr for Expected {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "net-ib" => Ok(Expected::NetIb),
            "net-ofi" => Ok(Expected::NetOfi),
            "net-socket" => Ok(Expected::NetSocket),
            "nvlink" => Ok(Expected::Nvlink),
            _ => Err(format!(
                "unknown transport `{s}`: use net-ib, net-ofi, net-socket or nvlink"
            )),
        }
    }
}

impl Expected {
    /// The spelling `--expect-transport` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Expected::NetIb => "net-ib",
            Expected::NetOfi => "net-ofi",
            Expected::NetSocket => "net-socket",
            Expected::Nvlink => "nvlink",
        }
    }
}

/// Whether the transports seen match what the plan assumed; the error says what NCCL
/// did instead and the usual cause.
pub fn verify(expected: Expected, seen: &BTreeSet<Transport>) -> Result<(), String> {
    let list = || {
        if seen.is_empty() {
            "no connection lines (was NCCL_DEBUG=INFO honoured?)".to_string()
        } else {
            seen.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
        }
    };
    let net = [Transport::NetIb, Transport::NetOfi, Transport::NetSocket];
    match expected {
        Expected::NetIb | Expected::NetOfi => {
            let want = if expected == Expected::NetIb {
                Transport::NetIb
            } else {
                Transport::NetOfi
            };
            if seen.contains(&Transport::NetSocket) {
                return Err(format!(
                    "NCCL fell back to TCP sockets (saw {}) where the plan assumes {}: the RDMA devices are not usable in this pod (device plugin resource, IPC_LOCK, NCCL_IB_HCA, or the NCCL net plugin)",
                    list(),
                    want.name()
                ));
            }
            if !seen.contains(&want) {
                return Err(format!(
                    "NCCL never used {} between nodes (saw {})",
                    want.name(),
                    list()
                ));
            }
            Ok(())
        }
        Expected::NetSocket => {
            if seen.iter().any(|t| net.contains(t)) {
                Ok(())
            } else {
                Err(format!("NCCL made no network connection (saw {})", list()))
            }
        }
        Expected::Nvlink => {
            if let Some(t) = seen.iter().find(|t| net.contains(t)) {
                return Err(format!(
                    "NCCL went over the network ({}) where the plan assumes multi-node NVLink: the pods did not get an IMEX channel (ComputeDomain) or are not in one NVLink clique (saw {})",
                    t.name(),
                    list()
                ));
            }
            if !seen.contains(&Transport::P2p) && !seen.contains(&Transport::Nvls) {
                return Err(format!(
                    "NCCL never used NVLink peer to peer (saw {})",
                    list()
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IB: &str =
        "node-a:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
        node-a:123:456 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/CUMEM\n";
    const FALLBACK: &str = "node-a:123:456 [0] NCCL INFO NET/IB : No device found.\n\
        node-a:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n";
    const EFA: &str =
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA\n";
    const MNNVL: &str = "h:1:2 [0] NCCL INFO Channel 00/1 : 0[0] -> 4[0] via P2P/MNNVL\n\
        h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0\n";

    #[test]
    fn transports_are_read_from_connection_lines() {
        assert_eq!(
            transports(IB),
            BTreeSet::from([Transport::NetIb, Transport::P2p])
        );
        assert_eq!(transports(FALLBACK), BTreeSet::from([Transport::NetSocket]));
        assert_eq!(transports(EFA), BTreeSet::from([Transport::NetOfi]));
        assert_eq!(
            transports(MNNVL),
            BTreeSet::from([Transport::P2p, Transport::Nvls])
        );
    }

    #[test]
    fn a_fallback_to_sockets_fails_an_rdma_plan() {
        assert!(verify(Expected::NetIb, &transports(IB)).is_ok());
        let e = verify(Expected::NetIb, &transports(FALLBACK)).unwrap_err();
        assert!(e.contains("fell back to TCP sockets"), "{e}");
        assert!(verify(Expected::NetOfi, &transports(EFA)).is_ok());
        assert!(verify(Expected::NetOfi, &transports(IB)).is_err());
        assert!(verify(Expected::NetSocket, &transports(FALLBACK)).is_ok());
        assert!(verify(Expected::Nvlink, &transports(MNNVL)).is_ok());
        assert!(verify(Expected::Nvlink, &transports(IB)).is_err());
        assert!(verify(Expected::NetIb, &BTreeSet::new()).is_err());
        for e in [
            Expected::NetIb,
            Expected::NetOfi,
            Expected::NetSocket,
            Expected::Nvlink,
        ] {
            assert_eq!(e.as_str().parse::<Expected>(), Ok(e));
        }
    }
}
