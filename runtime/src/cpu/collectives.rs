//! The CPU backend's collectives on the mesh: ring AllReduce (reduce-scatter + all-gather)
//! for large buffers and a binomial tree (reduce + broadcast) for small ones, ring
//! AllGather and ReduceScatter, pairwise All-to-All, binomial Broadcast, gather-release
//! barrier.

use super::*;
use crate::plan::DType;

/// Which AllReduce algorithm to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllReduceAlgorithm {
    /// Tree below [`TREE_THRESHOLD`] bytes, ring above (as NCCL picks by size).
    Auto,
    Ring,
    Tree,
}

/// A group's communicator on the CPU backend: a view of the mesh over the members.
pub struct CpuComm {
    mesh: Rc<Mesh>,
    name: String,
    members: Vec<usize>,
    me: usize,
    pub algorithm: AllReduceAlgorithm,
    context: String,
}

/// A host buffer with its element type.
#[derive(Debug, Clone)]
pub struct HostBuffer {
    pub dtype: DType,
    pub data: Vec<u8>,
}

impl CpuComm {
    /// `members` are world ranks in group-rank order; this process must be one of them.
    pub fn new(mesh: Rc<Mesh>, name: &str, members: Vec<usize>) -> CommResult<CpuComm> {
        let me = members
            .iter()
            .position(|&m| m == mesh.rank)
            .ok_or_else(|| CommError::new(format!("rank {} is not in group {name}", mesh.rank)))?;
        Ok(CpuComm {
            mesh,
            name: name.to_string(),
            members,
            me,
            algorithm: AllReduceAlgorithm::Auto,
            context: String::new(),
        })
    }

    /// The mesh this communicator runs on (to build another group over the same ranks).
    pub fn mesh(&self) -> Rc<Mesh> {
        self.mesh.clone()
    }

    /// The group's world ranks, in group-rank order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    fn label(&self, op: &str) {
        let mut s = format!("{op} on {}", self.name);
        if !self.context.is_empty() {
            s.push_str(" (");
            s.push_str(&self.context);
            s.push(')');
        }
        self.mesh.set_context(&s);
    }

    fn world(&self, g: usize) -> usize {
        self.members[g]
    }
    fn next(&self) -> usize {
        self.world((self.me + 1) % self.members.len())
    }
    fn prev(&self) -> usize {
        let p = self.members.len();
        self.world((self.me + p - 1) % p)
    }

    /// Element ranges of `p` nearly equal chunks of `n` elements, in bytes.
    fn chunks(n_bytes: usize, esize: usize, p: usize) -> Vec<std::ops::Range<usize>> {
        let n = n_bytes / esize;
        (0..p)
            .map(|i| (i * n / p) * esize..((i + 1) * n / p) * esize)
            .collect()
    }

    fn ring_all_reduce(&self, buf: &mut HostBuffer) -> CommResult<()> {
        let p = self.members.len();
        let (next, prev, r) = (self.next(), self.prev(), self.me);
        let chunks = Self::chunks(buf.data.len(), buf.dtype.size(), p);
        let mut scratch = Vec::new();
        for s in 0..p - 1 {
            let send = chunks[(r + p - s) % p].clone();
            self.mesh.send(next, &buf.data[send])?;
            let recv = chunks[(r + 2 * p - s - 1) % p].clone();
            scratch.resize(recv.len(), 0);
            self.mesh.recv_into(prev, &mut scratch)?;
            add_into(buf.dtype, &mut buf.data[recv], &scratch)?;
        }
        for s in 0..p - 1 {
            let send = chunks[(r + 1 + p - s) % p].clone();
            self.mesh.send(next, &buf.data[send])?;
            let recv = chunks[(r + p - s) % p].clone();
            self.mesh.recv_into(prev, &mut buf.data[recv])?;
        }
        Ok(())
    }

    fn tree_all_reduce(&self, buf: &mut HostBuffer) -> CommResult<()> {
        let p = self.members.len();
        let r = self.me;
        // Binomial reduce to group rank 0.
        let mut mask = 1;
        let mut scratch = vec![0u8; buf.data.len()];
        while mask < p {
            if r & mask != 0 {
                self.mesh.send(self.world(r - mask), &buf.data)?;
                break;
            }
            if r + mask < p {
                self.mesh.recv_into(self.world(r + mask), &mut scratch)?;
                add_into(buf.dtype, &mut buf.data, &scratch)?;
            }
            mask <<= 1;
        }
        self.binomial_broadcast(&mut buf.data, 0)
    }

    fn binomial_broadcast(&self, data: &mut [u8], root: usize) -> CommResult<()> {
        let p = self.members.len();
        let vr = (self.me + p - root) % p; // rank relative to the root
        let mut mask = 1;
        while mask < p {
            if vr & mask != 0 {
                let src = (vr - mask + root) % p;
                self.mesh.recv_into(self.world(src), data)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < p {
                let dst = (vr + mask + root) % p;
                self.mesh.send(self.world(dst), data)?;
            }
            mask >>= 1;
        }
        Ok(())
    }
}

fn check_len(what: &str, got: usize, want: usize) -> CommResult<()> {
    if got != want {
        return Err(CommError::new(format!(
            "{what}: buffer of {got} bytes, expected {want}"
        )));
    }
    Ok(())
}

impl Communicator for CpuComm {
    type Buffer = HostBuffer;

    fn rank(&self) -> usize {
        self.me
    }
    fn size(&self) -> usize {
        self.members.len()
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn set_context(&mut self, context: &str) {
        self.context = context.to_string();
    }
    fn alloc(&mut self, dtype: DType, bytes: usize) -> CommResult<HostBuffer> {
        // `dic run` checks the plan's buffers against the machine before it starts; this
        // turns what that cannot foresee (another process took the memory) into an error
        // naming the rank, not an abort.
        let mut data = Vec::new();
        data.try_reserve_exact(bytes).map_err(|_| {
            CommError::new(format!(
                "rank {}: cannot allocate a buffer of {:.2} GiB for {}: out of memory",
                self.mesh.rank,
                bytes as f64 / (1u64 << 30) as f64,
                self.name
            ))
        })?;
        data.resize(bytes, 0);
        Ok(HostBuffer { dtype, data })
    }
    fn upload(&mut self, buf: &mut HostBuffer, host: &[u8]) -> CommResult<()> {
        check_len("upload", host.len(), buf.data.len())?;
        buf.data.copy_from_slice(host);
        Ok(())
    }
    fn download(&mut self, buf: &HostBuffer) -> CommResult<Vec<u8>> {
        Ok(buf.data.clone())
    }

    fn all_reduce(&mut self, buf: &mut HostBuffer) -> CommResult<()> {
        self.label("all_reduce");
        let p = self.members.len();
        if p == 1 {
            return Ok(());
        }
        let elements = buf.data.len() / buf.dtype.size();
        let ring = match self.algorithm {
            AllReduceAlgorithm::Ring => true,
            AllReduceAlgorithm::Tree => false,
            AllReduceAlgorithm::Auto => buf.data.len() >= TREE_THRESHOLD,
        };
        if ring && elements >= p {
            self.ring_all_reduce(buf)
        } else {
            self.tree_all_reduce(buf)
        }
    }

    fn all_gather(&mut self, send: &HostBuffer, recv: &mut HostBuffer) -> CommResult<()> {
        self.label("all_gather");
        let p = self.members.len();
        let n = send.data.len();
        check_len("all_gather", recv.data.len(), n * p)?;
        let r = self.me;
        recv.data[r * n..(r + 1) * n].copy_from_slice(&send.data);
        let (next, prev) = (self.next(), self.prev());
        for s in 0..p.saturating_sub(1) {
            let b = (r + p - s) % p;
            self.mesh.send(next, &recv.data[b * n..(b + 1) * n])?;
            let c = (r + 2 * p - s - 1) % p;
            self.mesh
                .recv_into(prev, &mut recv.data[c * n..(c + 1) * n])?;
        }
        Ok(())
    }

    fn reduce_scatter(&mut self, send: &HostBuffer, recv: &mut HostBuffer) -> CommResult<()> {
        self.label("reduce_scatter");
        let p = self.members.len();
        let n = recv.data.len();
        check_len("reduce_scatter", send.data.len(), n * p)?;
        let r = self.me;
        if p == 1 {
            recv.data.copy_from_slice(&send.data);
            return Ok(());
        }
        let (next, prev) = (self.next(), self.prev());
        let block = |b: usize| b * n..(b + 1) * n;
        let mut acc = send.data[block((r + p - 1) % p)].to_vec();
        for s in 0..p - 1 {
            self.mesh.send(next, &acc)?;
            let b = (r + 2 * p - s - 2) % p;
            acc.resize(n, 0);
            self.mesh.recv_into(prev, &mut acc)?;
            add_into(send.dtype, &mut acc, &send.data[block(b)])?;
        }
        recv.data.copy_from_slice(&acc);
        Ok(())
    }

    fn all_to_all(&mut self, send: &HostBuffer, recv: &mut HostBuffer) -> CommResult<()> {
        self.label("all_to_all");
        let p = self.members.len();
        check_len("all_to_all", recv.data.len(), send.data.len())?;
        let n = send.data.len() / p;
        let r = self.me;
        // Pairwise exchange: round k sends to r+k and receives from r−k.
        for k in 1..p {
            let to = (r + k) % p;
            self.mesh
                .send(self.world(to), &send.data[to * n..(to + 1) * n])?;
        }
        recv.data[r * n..(r + 1) * n].copy_from_slice(&send.data[r * n..(r + 1) * n]);
        for k in 1..p {
            let from = (r + p - k) % p;
            self.mesh
                .recv_into(self.world(from), &mut recv.data[from * n..(from + 1) * n])?;
        }
        Ok(())
    }

    fn send(&mut self, buf: &HostBuffer, peer: usize) -> CommResult<()> {
        self.label("send");
        self.mesh.send(self.world(peer), &buf.data)
    }

    fn recv(&mut self, buf: &mut HostBuffer, peer: usize) -> CommResult<()> {
        self.label("recv");
        self.mesh.recv_into(self.world(peer), &mut buf.data)
    }

    fn broadcast(&mut self, buf: &mut HostBuffer, root: usize) -> CommResult<()> {
        self.label("broadcast");
        self.binomial_broadcast(&mut buf.data, root)
    }

    fn barrier(&mut self) -> CommResult<()> {
        self.label("barrier");
        let p = self.members.len();
        if p == 1 {
            return Ok(());
        }
        if self.me == 0 {
            for g in 1..p {
                self.mesh.recv(self.world(g), 0)?;
            }
            for g in 1..p {
                self.mesh.send(self.world(g), &[])?;
            }
        } else {
            self.mesh.send(self.world(0), &[])?;
            self.mesh.recv(self.world(0), 0)?;
        }
        Ok(())
    }

    fn synchronize(&mut self) -> CommResult<()> {
        Ok(())
    }
}
