//! The `Communicator` abstraction both backends implement, its error type, and the
//! element arithmetic (sum in the plan's dtype) and known per-rank patterns that make
//! every collective's result checkable bit for bit.

use crate::plan::{Collective, DType};
use half::{bf16, f16};

/// A failed collective: what happened and, when one is to blame, which world rank.
#[derive(Debug, Clone, PartialEq)]
pub struct CommError {
    pub message: String,
    /// The world rank that died, hung, never joined or broke the protocol.
    pub culprit: Option<usize>,
}

impl CommError {
    pub fn new(message: impl Into<String>) -> CommError {
        CommError {
            message: message.into(),
            culprit: None,
        }
    }
    pub fn blame(rank: usize, message: impl Into<String>) -> CommError {
        CommError {
            message: message.into(),
            culprit: Some(rank),
        }
    }
}

impl std::fmt::Display for CommError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type CommResult<T> = Result<T, CommError>;

/// One group's communicator: collective operations over the group's members, addressed by
/// group rank (0..size). Buffers belong to the backend (host memory for the CPU backend,
/// device memory for NCCL), so timing measures the collective, not copies.
///
/// Sizes follow NCCL: `all_gather` sends `n` bytes and receives `n × size`;
/// `reduce_scatter` sends `n × size` and receives `n`; `all_to_all` sends and receives
/// `n × size`, block `j` going to group rank `j`. Reductions are sums in the buffer's dtype.
pub trait Communicator {
    type Buffer;
    /// This process's rank in the group.
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// The group's name in the plan (`tp.0`), for messages.
    fn name(&self) -> &str;
    fn alloc(&mut self, dtype: DType, bytes: usize) -> CommResult<Self::Buffer>;
    fn upload(&mut self, buf: &mut Self::Buffer, host: &[u8]) -> CommResult<()>;
    fn download(&mut self, buf: &Self::Buffer) -> CommResult<Vec<u8>>;
    fn all_reduce(&mut self, buf: &mut Self::Buffer) -> CommResult<()>;
    fn all_gather(&mut self, send: &Self::Buffer, recv: &mut Self::Buffer) -> CommResult<()>;
    fn reduce_scatter(&mut self, send: &Self::Buffer, recv: &mut Self::Buffer) -> CommResult<()>;
    fn all_to_all(&mut self, send: &Self::Buffer, recv: &mut Self::Buffer) -> CommResult<()>;
    fn send(&mut self, buf: &Self::Buffer, peer: usize) -> CommResult<()>;
    fn recv(&mut self, buf: &mut Self::Buffer, peer: usize) -> CommResult<()>;
    fn broadcast(&mut self, buf: &mut Self::Buffer, root: usize) -> CommResult<()>;
    fn barrier(&mut self) -> CommResult<()>;
    /// Wait until every operation issued so far has completed (NCCL is asynchronous).
    fn synchronize(&mut self) -> CommResult<()>;
    /// Name what the caller is doing, for error messages ("decode step, layer 12").
    fn set_context(&mut self, context: &str);
}

/// `dst[i] += src[i]` element-wise in `dtype` (bytes in little-endian element order).
pub fn add_into(dtype: DType, dst: &mut [u8], src: &[u8]) -> CommResult<()> {
    debug_assert_eq!(dst.len(), src.len());
    match dtype {
        DType::F32 => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                let v = f32::from_le_bytes(d[..4].try_into().expect("fixed-size slice"))
                    + f32::from_le_bytes(s[..4].try_into().expect("fixed-size slice"));
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
        DType::I32 => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                let v = i32::from_le_bytes(d[..4].try_into().expect("fixed-size slice"))
                    .wrapping_add(i32::from_le_bytes(
                        s[..4].try_into().expect("fixed-size slice"),
                    ));
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
        DType::Bf16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                let v = bf16::from_le_bytes([d[0], d[1]]).to_f32()
                    + bf16::from_le_bytes([s[0], s[1]]).to_f32();
                d.copy_from_slice(&bf16::from_f32(v).to_le_bytes());
            }
        }
        DType::F16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                let v = f16::from_le_bytes([d[0], d[1]]).to_f32()
                    + f16::from_le_bytes([s[0], s[1]]).to_f32();
                d.copy_from_slice(&f16::from_f32(v).to_le_bytes());
            }
        }
        DType::Fp8 => {
            return Err(CommError::new(
                "fp8 reductions are not supported (NCCL has no fp8 sum either)",
            ))
        }
    }
    Ok(())
}

/// The small integer rank `g` contributes at element `i` of a reduction: 1, 2 or 3, so a
/// sum over up to 85 ranks (≤ 255) is exact in bf16 and any summation order gives the same
/// bits — a wrong algorithm (a chunk reduced twice or not at all) changes the result.
fn reduce_value(g: usize, i: usize) -> u32 {
    1 + ((g + i) % 3) as u32
}

fn encode(dtype: DType, v: u32, out: &mut Vec<u8>) {
    match dtype {
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        DType::Bf16 => out.extend_from_slice(&bf16::from_f32(v as f32).to_le_bytes()),
        DType::F16 => out.extend_from_slice(&f16::from_f32(v as f32).to_le_bytes()),
        DType::Fp8 => out.push(v as u8),
    }
}

/// Input a reduction gets from group rank `g`: `bytes / dtype.size()` elements.
pub fn reduce_input(dtype: DType, g: usize, bytes: usize) -> Vec<u8> {
    let n = bytes / dtype.size();
    let mut out = Vec::with_capacity(bytes);
    for i in 0..n {
        encode(dtype, reduce_value(g, i), &mut out);
    }
    out
}

/// The exact result of summing `reduce_input` over `p` ranks, elements `from..from+n`.
pub fn reduce_expected(dtype: DType, p: usize, from: usize, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for i in from..from + n {
        let sum: u32 = (0..p).map(|g| reduce_value(g, i)).sum();
        encode(dtype, sum, &mut out);
    }
    out
}

/// Byte `i` of the data group rank `g` sends (moves without arithmetic: gathers, All-to-All,
/// point to point, broadcast). Distinct per rank and position, so a misplaced block shows.
pub fn data_byte(g: usize, i: usize) -> u8 {
    let x = (g as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D);
    (x ^ (x >> 29)) as u8
}

pub fn data_input(g: usize, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| data_byte(g, i)).collect()
}

/// Buffer sizes (send, receive) of one call of `collective` whose nccl-tests size is
/// `bytes`, on `p` ranks, rounded up so every rank's block is whole elements.
pub fn buffer_sizes(collective: Collective, bytes: u64, p: usize, dtype: DType) -> (usize, usize) {
    let e = dtype.size();
    let p = p.max(1);
    let whole = |b: u64, blocks: usize| -> usize {
        let unit = e * blocks;
        (b as usize).div_ceil(unit).max(1) * unit
    };
    match collective {
        Collective::AllReduce | Collective::SendRecv | Collective::Broadcast => {
            let n = whole(bytes, 1);
            (n, n)
        }
        Collective::AllGather => {
            let total = whole(bytes, p);
            (total / p, total)
        }
        Collective::ReduceScatter => {
            let total = whole(bytes, p);
            (total, total / p)
        }
        Collective::AllToAll => {
            let total = whole(bytes, p);
            (total, total)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_sums_of_the_pattern_are_exact_and_order_free() {
        let p = 72;
        let mut acc = reduce_input(DType::Bf16, p - 1, 64);
        for g in (0..p - 1).rev() {
            add_into(DType::Bf16, &mut acc, &reduce_input(DType::Bf16, g, 64))
                .expect("same length");
        }
        assert_eq!(acc, reduce_expected(DType::Bf16, p, 0, 32));
    }

    #[test]
    fn sizes_round_up_to_whole_blocks() {
        assert_eq!(
            buffer_sizes(Collective::AllGather, 10, 4, DType::Bf16),
            (4, 16)
        );
        assert_eq!(
            buffer_sizes(Collective::AllReduce, 3, 4, DType::F32),
            (4, 4)
        );
        assert_eq!(
            buffer_sizes(Collective::AllToAll, 64, 8, DType::Bf16),
            (64, 64)
        );
    }
}
