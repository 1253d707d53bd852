//! The KV-cache pool of one PP stage, as vLLM 0.33's hybrid KV-cache manager lays it out.
//!
//! Each layer on the stage has a cache spec (`vllm/v1/kv_cache_interface.py`):
//! full attention grows with every token; a sliding window holds at most
//! `window − 1 + max_num_batched_tokens` tokens plus one block
//! (`SlidingWindowSpec.max_memory_usage_bytes`); Mamba and linear attention hold one
//! fixed state per request (`MambaSpec`, one block). A uniform full-attention model has
//! one group: `bytes_per_block = layers × block_size × bytes_per_token`. A hybrid model
//! (`kv_cache_utils._get_kv_cache_groups_uniform_page_size`):
//!
//! 1. with recurrent layers, the attention block size is raised so one attention page
//!    holds a whole state (`HybridAttentionMambaModelConfig`: `16 × ceil(state /
//!    (16 × attention bytes per token))`), and the state page is padded to it;
//! 2. page sizes are unified: a layer kind with smaller pages gets proportionally more
//!    tokens per block (`unify_kv_cache_spec_page_size`);
//! 3. layers are grouped by kind into groups of `group_size` layers — the smallest kind's
//!    count, or the largest when it is under 1.5× the smallest — padding each kind up to
//!    whole groups; the groups share one block pool whose block is
//!    `group_size × page_size` bytes;
//! 4. `max_concurrency = num_blocks / Σ_groups blocks one request needs`, and the logged
//!    token count is `max_concurrency × max_model_len` (`get_max_concurrency_for_kv_cache_config`).
//!
//! DeepSeek V4's compressed attention is laid out by a packed planner
//! (`_get_kv_cache_config_packed`); it is modelled by bytes per request (its compressed
//! entries per token plus its window). Pure arithmetic.

use crate::layers::Mixer;
use crate::program::{Attention, Model};
use serde::Serialize;

/// vLLM's kernel block alignment when it raises the block size for Mamba states.
const MAMBA_BLOCK_ALIGNMENT: f64 = 16.0;

/// The cache one layer keeps on one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CacheSpec {
    /// Grows with every token: bytes per token.
    Full { per_token: f64 },
    /// A window of `window` tokens: bytes per token.
    Sliding { per_token: f64, window: f64 },
    /// A fixed state per request.
    State { bytes: f64 },
    /// DeepSeek V4: `per_token` of compressed entries (already divided by the ratio) plus
    /// a window of uncompressed entries.
    Compressed {
        per_token: f64,
        window_per_token: f64,
        window: f64,
    },
}

/// Bytes of one KV element of the cache dtype (the model's dtype for `auto`).
pub fn kv_element_bytes(m: &Model) -> f64 {
    kv_bytes(&m.kv_cache, &m.dtype)
}

/// Bytes per KV element: `auto` follows the model's dtype; FP8 variants are one byte.
pub fn kv_bytes(kv_cache: &str, dtype: &str) -> f64 {
    match kv_cache {
        "fp8" | "fp8_e4m3" | "fp8_e5m2" => 1.0,
        "fp16" | "bf16" => 2.0,
        _ => {
            if dtype == "fp32" {
                4.0
            } else {
                2.0
            }
        }
    }
}

fn dtype_bytes(d: &str) -> f64 {
    match d {
        "fp32" => 4.0,
        "fp8" | "fp8_e4m3" | "fp8_e5m2" => 1.0,
        _ => 2.0,
    }
}

/// The sparse-attention indexer's cache per token: FP8 keys plus one fp32 scale per 128
/// (`DeepseekV32IndexerCache`: `index_head_dim + index_head_dim / 128 × 4` bytes).
fn indexer_bytes(m: &Model) -> f64 {
    let d = m.detail.indexer_head_dim as f64;
    if d == 0.0 {
        0.0
    } else {
        d + (d / 128.0).floor() * 4.0
    }
}

/// The cache spec of layer kind `mixer` on one rank of a TP group of `tp`; `None` for a
/// layer without attention or state.
pub fn cache_spec(m: &Model, mixer: Mixer, tp: u64) -> Option<CacheSpec> {
    let elem = kv_element_bytes(m);
    let tp = tp.max(1);
    let d = &m.detail;
    let gqa = |kv_heads: u64, head_dim: u64| {
        let v = if m.attention != Attention::Mla && m.v_head_dim > 0 {
            m.v_head_dim
        } else {
            head_dim
        };
        // KV heads split over TP, at least one per rank (vLLM `get_num_kv_heads`).
        (kv_heads / tp).max(1) as f64 * (head_dim + v) as f64 * elem
    };
    let state_elem = d.state_dtype.as_deref().map(dtype_bytes);
    match mixer {
        Mixer::None => None,
        Mixer::Full => Some(CacheSpec::Full {
            per_token: match m.attention {
                // MLA keeps the latent once per token on every rank, unsplit by TP.
                Attention::Mla => (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * elem,
                _ => gqa(m.kv_heads, m.head_dim),
            } + indexer_bytes(m),
        }),
        Mixer::Sliding => Some(CacheSpec::Sliding {
            per_token: gqa(
                if d.sliding_kv_heads > 0 {
                    d.sliding_kv_heads
                } else {
                    m.kv_heads
                },
                if d.sliding_head_dim > 0 {
                    d.sliding_head_dim
                } else {
                    m.head_dim
                },
            ),
            window: m.sliding_window.unwrap_or(0.0),
        }),
        Mixer::Linear => {
            // `MambaStateShapeCalculator.gated_delta_net_state_shape`: conv state
            // (kernel − 1) × conv_dim / TP, recurrent state value_heads / TP × k × v; both
            // in the model's dtype unless a state dtype is set.
            let la = d.linear.unwrap_or_default();
            // In f64: each factor is bounded by the schema, not their products.
            let conv_dim = (2.0 * la.key_heads as f64 * la.key_dim as f64
                + la.value_heads as f64 * la.value_dim as f64)
                / tp as f64;
            let conv = la.conv_kernel.saturating_sub(1) as f64 * conv_dim.floor();
            let recurrent = (la.value_heads / tp) as f64 * la.key_dim as f64 * la.value_dim as f64;
            let model = dtype_bytes(&m.dtype);
            Some(CacheSpec::State {
                bytes: conv * model + recurrent * state_elem.unwrap_or(model),
            })
        }
        Mixer::Mamba => {
            // `mamba2_state_shape`: groups extended to TP when TP does not divide them.
            let mb = d.mamba.unwrap_or_default();
            let groups = if mb.groups.is_multiple_of(tp) {
                mb.groups
            } else {
                mb.groups + tp - mb.groups
            };
            let conv_dim = ((mb.heads as f64 * mb.head_dim as f64
                + 2.0 * groups as f64 * mb.state as f64)
                / tp as f64)
                .floor();
            let conv = mb.conv_kernel.saturating_sub(1) as f64 * conv_dim;
            let ssm = (mb.heads / tp) as f64 * mb.head_dim as f64 * mb.state as f64;
            let model = dtype_bytes(&m.dtype);
            Some(CacheSpec::State {
                bytes: conv * model + ssm * state_elem.unwrap_or(model),
            })
        }
        Mixer::Compressed(ratio) => {
            // One shared latent of head_dim per entry: with an FP8 cache in vLLM's
            // `fp8_ds_mla` layout, the NoPE part in FP8, the RoPE part in 16 bits and an
            // 8-byte scale (584 B for V4's 448 + 64: `DeepseekV4Attention.get_kv_cache_spec`,
            // `state_content_bytes`); else head_dim in the cache's dtype. [approximation:
            // the pages' 576-byte alignment and the compressor's own states are left out]
            let rope = m.qk_rope_head_dim.min(m.head_dim) as f64;
            let entry = if elem == 1.0 {
                m.head_dim as f64 - rope + 2.0 * rope + 8.0
            } else {
                m.head_dim as f64 * elem
            };
            let idx = if ratio <= 4 { indexer_bytes(m) } else { 0.0 };
            Some(CacheSpec::Compressed {
                per_token: (entry + idx) / ratio as f64,
                window_per_token: entry,
                window: m.sliding_window.unwrap_or(0.0),
            })
        }
    }
}

/// [`cache_spec`] per mixer kind, computed once each (a stage's layers repeat a few kinds).
pub struct SpecCache<'a> {
    m: &'a Model,
    tp: u64,
    seen: Vec<(Mixer, Option<CacheSpec>)>,
}

impl<'a> SpecCache<'a> {
    pub fn new(m: &'a Model, tp: u64) -> Self {
        SpecCache {
            m,
            tp,
            seen: Vec::new(),
        }
    }

    pub fn get(&mut self, mixer: Mixer) -> Option<CacheSpec> {
        if let Some((_, s)) = self.seen.iter().find(|(k, _)| *k == mixer) {
            return *s;
        }
        let s = cache_spec(self.m, mixer, self.tp);
        self.seen.push((mixer, s));
        s
    }
}

/// One KV-cache group kind: its spec, how many groups of it, and tokens per block.
#[derive(Debug, Clone, Copy, Serialize)]
struct Group {
    #[serde(skip)]
    spec: CacheSpecKey,
    groups: f64,
    block_tokens: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CacheSpecKey {
    Full,
    Sliding(f64),
    State,
}

/// One stage's pool.
#[derive(Debug, Clone, Serialize)]
pub struct KvPool {
    /// Bytes available for the cache on each GPU of the stage (may be ≤ 0).
    pub available: f64,
    /// Tokens per block of the full-attention layers (raised for Mamba states).
    pub block_size: u64,
    /// Bytes of one block across the stage's layers (`group_size × page_size`).
    pub bytes_per_block: f64,
    pub num_blocks: u64,
    /// Bytes per token of the layers whose cache grows with the context.
    pub growing_bytes_per_token: f64,
    /// True when the stage has more than one kind of cache.
    pub hybrid: bool,
    groups: Vec<Group>,
    /// Bytes per request of `len` tokens, for the packed (compressed) layout: (per token,
    /// fixed).
    packed: Option<(f64, f64)>,
    /// Prefill tokens per step (a sliding window also holds a chunk in flight).
    chunk: f64,
    /// DCP shards each request's tokens over this many ranks.
    dcp: f64,
    /// Blocks each Mamba/linear-attention group holds per request
    /// ([`state_blocks_per_request`]).
    state_blocks: f64,
}

/// Blocks each Mamba or linear-attention group holds per request
/// (`MambaSpec.max_memory_usage_bytes`): `1 + k` speculative tokens' states, or with prefix
/// caching on (vLLM 0.33's default, which sets `mamba_cache_mode = "align"` for hybrid
/// models, `MambaModelConfig.verify_and_update_config`) `2 + k` plus one prefill
/// checkpoint block where the layer exports checkpoints (`MambaMixer2` always;
/// `checkpoint`).
pub fn state_blocks_per_request(align: bool, speculative_tokens: u64, checkpoint: bool) -> f64 {
    let k = speculative_tokens as f64;
    if align {
        2.0 + k + if checkpoint { 1.0 } else { 0.0 }
    } else {
        1.0 + k
    }
}

impl KvPool {
    /// Lays out the pool for the layers `specs` (one per layer with a cache) of a stage.
    ///
    /// With DCP each rank keeps its own KV heads' bytes per token (the page is not
    /// smaller) for `1/dcp` of each request's tokens (`FullAttentionSpec.max_memory_usage_bytes`:
    /// `cdiv(max_model_len, dcp)`); dividing the page as well counted DCP twice.
    pub fn new(
        specs: &[CacheSpec],
        available: f64,
        block_size: u64,
        chunk: u64,
        dcp: u64,
        state_blocks: f64,
    ) -> Self {
        let dcp_f = dcp.max(1) as f64;
        let bs = block_size.max(1) as f64;
        let growing: f64 = specs
            .iter()
            .map(|s| match s {
                CacheSpec::Full { per_token } => *per_token,
                CacheSpec::Compressed { per_token, .. } => *per_token,
                _ => 0.0,
            })
            .sum::<f64>()
            / dcp_f;
        let mut pool = KvPool {
            available,
            block_size: block_size.max(1),
            bytes_per_block: 0.0,
            num_blocks: 0,
            growing_bytes_per_token: growing,
            hybrid: false,
            groups: Vec::new(),
            packed: None,
            chunk: chunk as f64,
            dcp: dcp_f,
            state_blocks: state_blocks.max(1.0),
        };
        if specs.is_empty() {
            return pool;
        }
        if specs
            .iter()
            .any(|s| matches!(s, CacheSpec::Compressed { .. }))
        {
            let mut per_token = 0.0;
            let mut fixed = 0.0;
            for s in specs {
                match *s {
                    CacheSpec::Full { per_token: b } => per_token += b,
                    CacheSpec::Sliding {
                        per_token: b,
                        window,
                    } => fixed += b * (window + bs),
                    CacheSpec::State { bytes } => fixed += bytes,
                    CacheSpec::Compressed {
                        per_token: b,
                        window_per_token,
                        window,
                    } => {
                        per_token += b;
                        fixed += window_per_token * (window + bs);
                    }
                }
            }
            pool.hybrid = true;
            pool.packed = Some((per_token / dcp_f, fixed));
            pool.bytes_per_block = per_token * bs / dcp_f;
            pool.num_blocks = if available > 0.0 && pool.bytes_per_block > 0.0 {
                (available / pool.bytes_per_block).floor() as u64
            } else {
                0
            };
            return pool;
        }
        // Kinds with their per-token bytes (attention) or state bytes, and layer counts.
        let mut kinds: Vec<(CacheSpecKey, f64, usize)> = Vec::new();
        for s in specs {
            let (key, size) = match *s {
                CacheSpec::Full { per_token } => (CacheSpecKey::Full, per_token),
                CacheSpec::Sliding { per_token, window } => {
                    (CacheSpecKey::Sliding(window), per_token)
                }
                CacheSpec::State { bytes } => (CacheSpecKey::State, bytes),
                CacheSpec::Compressed { .. } => unreachable!("handled above"),
            };
            match kinds.iter_mut().find(|(k, b, _)| *k == key && *b == size) {
                Some(k) => k.2 += 1,
                None => kinds.push((key, size, 1)),
            }
        }
        if kinds.len() == 1 && kinds[0].0 == CacheSpecKey::Full {
            // One group of every layer.
            let (_, per_token, count) = kinds[0];
            pool.bytes_per_block = count as f64 * per_token * bs;
            pool.groups.push(Group {
                spec: CacheSpecKey::Full,
                groups: 1.0,
                block_tokens: bs,
            });
        } else {
            pool.hybrid = true;
            let attn_per_token = kinds
                .iter()
                .filter(|k| k.0 != CacheSpecKey::State)
                .map(|k| k.1)
                .fold(0.0, f64::max);
            let state = kinds
                .iter()
                .filter(|k| k.0 == CacheSpecKey::State)
                .map(|k| k.1)
                .fold(0.0, f64::max);
            let mut block = bs;
            if state > 0.0 && attn_per_token > 0.0 {
                let raised = MAMBA_BLOCK_ALIGNMENT
                    * (state / (MAMBA_BLOCK_ALIGNMENT * attn_per_token)).ceil();
                block = block.max(raised);
            }
            pool.block_size = block as u64;
            let page = if attn_per_token > 0.0 {
                (block * attn_per_token).max(state)
            } else {
                state
            };
            let counts: Vec<usize> = kinds.iter().map(|k| k.2).collect();
            let min = counts.iter().copied().min().unwrap_or(1).max(1);
            let max = counts.iter().copied().max().unwrap_or(1);
            let group_size = if (max as f64) < min as f64 * 1.5 {
                max
            } else {
                min
            };
            pool.bytes_per_block = group_size as f64 * page;
            for (key, size, count) in kinds {
                pool.groups.push(Group {
                    spec: key,
                    groups: count.div_ceil(group_size) as f64,
                    block_tokens: if key == CacheSpecKey::State {
                        f64::INFINITY
                    } else {
                        // A kind with smaller pages gets more tokens per block.
                        page / size
                    },
                });
            }
        }
        pool.num_blocks = if available > 0.0 && pool.bytes_per_block > 0.0 {
            (available / pool.bytes_per_block).floor() as u64
        } else {
            0
        };
        pool
    }

    /// Blocks one request of `len` tokens holds. `startup` uses vLLM's startup sizing
    /// (a window also holds a prefill chunk); otherwise a decoding request's steady need.
    fn blocks_for(&self, len: f64, startup: bool) -> f64 {
        let len = len / self.dcp;
        self.groups
            .iter()
            .map(|g| {
                g.groups
                    * match g.spec {
                        CacheSpecKey::Full => (len / g.block_tokens).ceil(),
                        CacheSpecKey::Sliding(w) => {
                            let held = if startup {
                                (w - 1.0 + self.chunk).min(len)
                            } else {
                                w.min(len)
                            };
                            (held / g.block_tokens).ceil() + 1.0
                        }
                        CacheSpecKey::State => self.state_blocks,
                    }
            })
            .sum()
    }

    /// Requests of `len` tokens the pool holds at once; `startup`: vLLM's logged sizing.
    pub fn requests(&self, len: f64, startup: bool) -> f64 {
        if self.available <= 0.0 {
            return 0.0;
        }
        if let Some((per_token, fixed)) = self.packed {
            let need = per_token * len + fixed;
            return if need > 0.0 {
                self.available / need
            } else {
                f64::INFINITY
            };
        }
        let blocks = self.blocks_for(len, startup);
        if blocks <= 0.0 {
            return f64::INFINITY;
        }
        self.num_blocks as f64 / blocks
    }

    /// Bytes one request of `len` tokens needs (vLLM's startup sizing).
    pub fn bytes_per_request(&self, len: f64) -> f64 {
        if let Some((per_token, fixed)) = self.packed {
            return per_token * len + fixed;
        }
        self.blocks_for(len, true) * self.bytes_per_block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_pool_is_layers_times_block() {
        let specs = vec![CacheSpec::Full { per_token: 4096.0 }; 32];
        let p = KvPool::new(&specs, 32.0 * 4096.0 * 16.0 * 100.0, 16, 8192, 1, 1.0);
        assert_eq!(p.num_blocks, 100);
        assert!((p.requests(1600.0, true) - 1.0).abs() < 1e-9);
        assert!(!p.hybrid);
    }

    #[test]
    fn sliding_layers_hold_window_plus_chunk() {
        // gpt-oss style: 2 kinds, equal counts → group size 18, 2 groups.
        let mut specs = vec![CacheSpec::Full { per_token: 2048.0 }; 18];
        specs.extend(vec![
            CacheSpec::Sliding {
                per_token: 2048.0,
                window: 128.0
            };
            18
        ]);
        let p = KvPool::new(&specs, 18.0 * 2048.0 * 16.0 * 10_000.0, 16, 8192, 1, 1.0);
        assert_eq!(p.num_blocks, 10_000);
        // 131072 tokens: full 8192 blocks; window min(127 + 8192, 131072) → 520 + 1.
        let need = 8192.0 + 521.0;
        assert!((p.requests(131_072.0, true) - 10_000.0 / need).abs() < 1e-9);
    }

    #[test]
    fn dcp_shards_tokens_once_not_the_page_too() {
        // 32 layers × 4,096 B per token per rank, block 16: 100 blocks of 2 MiB whatever
        // the DCP. At dcp 2 a request of 3,200 tokens keeps 1,600 on each rank: 100 blocks,
        // so the pool holds exactly one (it held two when the page was halved as well).
        let specs = vec![CacheSpec::Full { per_token: 4096.0 }; 32];
        let p = KvPool::new(&specs, 32.0 * 4096.0 * 16.0 * 100.0, 16, 8192, 2, 1.0);
        assert_eq!(p.num_blocks, 100);
        assert!((p.requests(3200.0, true) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn mamba_groups_hold_three_blocks_per_request_with_prefix_caching() {
        assert_eq!(state_blocks_per_request(true, 0, true), 3.0);
        assert_eq!(state_blocks_per_request(true, 2, false), 4.0);
        assert_eq!(state_blocks_per_request(false, 0, true), 1.0);
        assert_eq!(state_blocks_per_request(false, 3, true), 4.0);
    }
}
