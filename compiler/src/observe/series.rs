//! vLLM 0.33's own metric series, read into one deployment's measurements.
//!
//! Names and labels are vLLM's (`vllm/v1/metrics/loggers.py`, `PrometheusStatLogger`, and
//! `vllm/v1/spec_decode/metrics.py`): every series carries `model_name` and `engine` (the
//! DP rank); counters are exposed with `prometheus_client`'s `_total` suffix, histograms
//! as cumulative `_bucket{le=…}`, `_sum` and `_count`; `vllm:cache_config_info` is a gauge
//! of 1 whose labels are `CacheConfig.metrics_info()` (every cache setting as a string,
//! `num_gpu_blocks` and, since 0.33, `kv_cache_size_tokens` among them).
//!
//! A [`Snapshot`] sums the engines of one scrape (counters and histograms add up across
//! DP ranks and replicas; gauges of requests add up; KV usage is averaged). Two snapshots
//! of the same engines make a window ([`Snapshot::since`]): counters and histograms become
//! what happened between them. A Prometheus query endpoint answers with a window already
//! (`increase(…[W])`), built by the command line into the same samples.

use super::exposition::Sample;
use std::collections::{BTreeMap, BTreeSet};

/// The series `dic observe` reads, as vLLM 0.33 names them (without `_total`/`_bucket`).
pub mod names {
    pub const CACHE_CONFIG_INFO: &str = "vllm:cache_config_info";
    pub const KV_CACHE_USAGE: &str = "vllm:kv_cache_usage_perc";
    pub const RUNNING: &str = "vllm:num_requests_running";
    pub const WAITING: &str = "vllm:num_requests_waiting";
    pub const PREEMPTIONS: &str = "vllm:num_preemptions";
    pub const PREFIX_HITS: &str = "vllm:prefix_cache_hits";
    pub const PREFIX_QUERIES: &str = "vllm:prefix_cache_queries";
    pub const REQUEST_SUCCESS: &str = "vllm:request_success";
    pub const GENERATION_TOKENS: &str = "vllm:generation_tokens";
    pub const SPEC_ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens";
    pub const SPEC_DRAFTED: &str = "vllm:spec_decode_num_draft_tokens";
    pub const TTFT: &str = "vllm:time_to_first_token_seconds";
    pub const ITL: &str = "vllm:inter_token_latency_seconds";
    pub const TPOT: &str = "vllm:request_time_per_output_token_seconds";
    pub const E2E: &str = "vllm:e2e_request_latency_seconds";
    pub const PREFILL_TIME: &str = "vllm:request_prefill_time_seconds";
    pub const DECODE_TIME: &str = "vllm:request_decode_time_seconds";
    pub const PROMPT_TOKENS: &str = "vllm:request_prompt_tokens";
    pub const OUTPUT_TOKENS: &str = "vllm:request_generation_tokens";

    /// Counters (read with `_total`).
    pub const COUNTERS: &[&str] = &[
        PREEMPTIONS,
        PREFIX_HITS,
        PREFIX_QUERIES,
        REQUEST_SUCCESS,
        GENERATION_TOKENS,
        SPEC_ACCEPTED,
        SPEC_DRAFTED,
    ];
    /// Histograms (read as `_bucket`, `_sum`, `_count`).
    pub const HISTOGRAMS: &[&str] = &[
        TTFT,
        ITL,
        TPOT,
        E2E,
        PREFILL_TIME,
        DECODE_TIME,
        PROMPT_TOKENS,
        OUTPUT_TOKENS,
    ];
    /// Gauges (read as they are at the end of the window).
    pub const GAUGES: &[&str] = &[KV_CACHE_USAGE, RUNNING, WAITING, CACHE_CONFIG_INFO];
}

/// A cumulative histogram summed over engines: bucket upper bounds (ascending, `+Inf`
/// last) with the count at or below each, and the sum and count of observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// The mean observation; `None` without observations.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `q` quantile as Prometheus' `histogram_quantile` computes it: linear inside
    /// the bucket that holds it, the lower bound of the first bucket being 0, and the
    /// highest finite bound when it falls in `+Inf`.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last().map(|b| b.1).unwrap_or(0.0);
        if total <= 0.0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total;
        let mut prev = (0.0, 0.0);
        for &(le, cum) in &self.buckets {
            if cum >= rank {
                if le.is_infinite() {
                    return Some(prev.0);
                }
                let in_bucket = cum - prev.1;
                if in_bucket <= 0.0 {
                    return Some(le);
                }
                return Some(prev.0 + (le - prev.0) * (rank - prev.1) / in_bucket);
            }
            prev = (le, cum);
        }
        Some(prev.0)
    }

    /// What was observed after `earlier` (the same engines, scraped before).
    fn since(&self, earlier: &Histogram) -> Histogram {
        let before: BTreeMap<u64, f64> = earlier
            .buckets
            .iter()
            .map(|(le, c)| (le.to_bits(), *c))
            .collect();
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(le, c)| {
                    (
                        *le,
                        (c - before.get(&le.to_bits()).copied().unwrap_or(0.0)).max(0.0),
                    )
                })
                .collect(),
            sum: (self.sum - earlier.sum).max(0.0),
            count: (self.count - earlier.count).max(0.0),
        }
    }
}

/// One engine's cache settings as `vllm:cache_config_info` states them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheInfo {
    pub engine: String,
    pub num_gpu_blocks: Option<f64>,
    pub block_size: Option<f64>,
    /// The group-aware capacity vLLM 0.33 logs as "GPU KV cache size: N tokens".
    pub kv_cache_size_tokens: Option<f64>,
    pub gpu_memory_utilization: Option<f64>,
    pub cache_dtype: Option<String>,
    pub enable_prefix_caching: Option<bool>,
}

impl CacheInfo {
    /// Tokens the engine's KV cache holds.
    pub fn kv_tokens(&self) -> Option<f64> {
        self.kv_cache_size_tokens
            .or(match (self.num_gpu_blocks, self.block_size) {
                (Some(n), Some(b)) => Some(n * b),
                _ => None,
            })
    }
}

/// One scrape (or one Prometheus window) of the engines of a deployment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The `engine` label values seen (DP ranks; one per source without the label).
    pub engines: BTreeSet<String>,
    pub counters: BTreeMap<&'static str, f64>,
    pub histograms: BTreeMap<&'static str, Histogram>,
    /// Gauges summed over engines (requests running and waiting).
    pub gauges: BTreeMap<&'static str, f64>,
    /// `vllm:kv_cache_usage_perc` averaged over engines (0–1).
    pub kv_usage: Option<f64>,
    pub cache: Vec<CacheInfo>,
}

fn counter_name(sample: &str) -> Option<&'static str> {
    let base = sample.strip_suffix("_total").unwrap_or(sample);
    names::COUNTERS.iter().copied().find(|n| *n == base)
}

fn histogram_part(sample: &str) -> Option<(&'static str, &str)> {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix) {
            if let Some(n) = names::HISTOGRAMS.iter().copied().find(|n| *n == base) {
                return Some((n, suffix));
            }
        }
    }
    None
}

fn gauge_name(sample: &str) -> Option<&'static str> {
    names::GAUGES.iter().copied().find(|n| *n == sample)
}

impl Snapshot {
    /// The snapshot of `samples` whose `model_name` is `model` (every sample when `None`).
    /// `source` names the scrape, for engines of sources that carry no `engine` label.
    pub fn from_samples(samples: &[Sample], model: Option<&str>, source: &str) -> Snapshot {
        let mut s = Snapshot::default();
        let mut buckets: BTreeMap<&'static str, BTreeMap<u64, f64>> = BTreeMap::new();
        let mut usage = Vec::new();
        for x in samples {
            if let (Some(m), Some(label)) = (model, x.label("model_name")) {
                if m != label {
                    continue;
                }
            }
            if !x.value.is_finite() {
                continue;
            }
            let engine = format!("{source}#{}", x.label("engine").unwrap_or("0"));
            if x.name.starts_with("vllm:") {
                s.engines.insert(engine.clone());
            }
            if x.name.ends_with("_created") {
                continue;
            }
            if let Some(c) = counter_name(&x.name) {
                *s.counters.entry(c).or_default() += x.value;
            } else if let Some((h, part)) = histogram_part(&x.name) {
                let hist = s.histograms.entry(h).or_default();
                match part {
                    "_sum" => hist.sum += x.value,
                    "_count" => hist.count += x.value,
                    _ => {
                        if let Some(le) = x.label("le").and_then(parse_le) {
                            *buckets
                                .entry(h)
                                .or_default()
                                .entry(le.to_bits())
                                .or_default() += x.value;
                        }
                    }
                }
            } else if let Some(g) = gauge_name(&x.name) {
                match g {
                    names::KV_CACHE_USAGE => usage.push(x.value),
                    names::CACHE_CONFIG_INFO => s.cache.push(cache_info(x, engine)),
                    _ => *s.gauges.entry(g).or_default() += x.value,
                }
            }
        }
        for (h, b) in buckets {
            let mut list: Vec<(f64, f64)> =
                b.into_iter().map(|(k, v)| (f64::from_bits(k), v)).collect();
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            s.histograms.entry(h).or_default().buckets = list;
        }
        if !usage.is_empty() {
            s.kv_usage = Some(usage.iter().sum::<f64>() / usage.len() as f64);
        }
        s
    }

    /// Adds another source's engines (one `/metrics` per engine or per pod).
    pub fn merge(&mut self, other: Snapshot) {
        self.engines.extend(other.engines);
        for (k, v) in other.counters {
            *self.counters.entry(k).or_default() += v;
        }
        for (k, v) in other.gauges {
            *self.gauges.entry(k).or_default() += v;
        }
        for (k, h) in other.histograms {
            let mine = self.histograms.entry(k).or_default();
            mine.sum += h.sum;
            mine.count += h.count;
            let mut by: BTreeMap<u64, f64> = mine
                .buckets
                .iter()
                .map(|(le, c)| (le.to_bits(), *c))
                .collect();
            for (le, c) in h.buckets {
                *by.entry(le.to_bits()).or_default() += c;
            }
            let mut list: Vec<(f64, f64)> = by
                .into_iter()
                .map(|(k, v)| (f64::from_bits(k), v))
                .collect();
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            mine.buckets = list;
        }
        self.kv_usage = match (self.kv_usage, other.kv_usage) {
            (Some(a), Some(b)) => Some((a + b) / 2.0),
            (a, b) => a.or(b),
        };
        self.cache.extend(other.cache);
    }

    /// What happened between `earlier` and this snapshot: counters and histograms as
    /// differences, gauges and cache settings as they are now.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut s = self.clone();
        for (k, v) in s.counters.iter_mut() {
            *v = (*v - earlier.counters.get(k).copied().unwrap_or(0.0)).max(0.0);
        }
        for (k, h) in s.histograms.iter_mut() {
            if let Some(e) = earlier.histograms.get(k) {
                *h = h.since(e);
            }
        }
        s
    }

    pub fn counter(&self, name: &str) -> Option<f64> {
        self.counters.get(name).copied()
    }

    pub fn histogram(&self, name: &str) -> Option<&Histogram> {
        self.histograms.get(name).filter(|h| h.count > 0.0)
    }
}

fn parse_le(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        t => t.parse().ok(),
    }
}

fn cache_info(x: &Sample, engine: String) -> CacheInfo {
    let num = |k: &str| x.label(k).and_then(|v| v.parse::<f64>().ok());
    CacheInfo {
        engine,
        num_gpu_blocks: num("num_gpu_blocks"),
        block_size: num("block_size"),
        kv_cache_size_tokens: num("kv_cache_size_tokens"),
        gpu_memory_utilization: num("gpu_memory_utilization"),
        cache_dtype: x.label("cache_dtype").map(str::to_string),
        enable_prefix_caching: x.label("enable_prefix_caching").map(|v| v == "True"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::exposition::parse;

    #[test]
    fn histogram_quantile_interpolates_as_prometheus_does() {
        // 10 observations ≤ 0.1, 30 ≤ 0.5, 40 in all: p50 is rank 20, halfway through
        // the (0.1, 0.5] bucket's 20 → 0.3; p95 is rank 38, in +Inf → 0.5.
        let h = Histogram {
            buckets: vec![(0.1, 10.0), (0.5, 30.0), (f64::INFINITY, 40.0)],
            sum: 12.0,
            count: 40.0,
        };
        assert!((h.quantile(0.5).unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(h.quantile(0.95), Some(0.5));
        assert!((h.quantile(0.125).unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(h.mean(), Some(0.3));
    }

    #[test]
    fn engines_add_up_and_a_window_is_a_difference() {
        let end = "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 5\n\
                   vllm:num_preemptions_total{engine=\"1\",model_name=\"m\"} 2\n\
                   vllm:num_preemptions_total{engine=\"0\",model_name=\"other\"} 100\n\
                   vllm:request_prompt_tokens_bucket{engine=\"0\",le=\"1000.0\",model_name=\"m\"} 4\n\
                   vllm:request_prompt_tokens_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 6\n\
                   vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 6000\n\
                   vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 6\n\
                   vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n\
                   vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 4\n";
        let start = "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 1\n\
                     vllm:request_prompt_tokens_bucket{engine=\"0\",le=\"1000.0\",model_name=\"m\"} 2\n\
                     vllm:request_prompt_tokens_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 2\n\
                     vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 1000\n\
                     vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 2\n";
        let e = Snapshot::from_samples(&parse(end).unwrap(), Some("m"), "a");
        let s = Snapshot::from_samples(&parse(start).unwrap(), Some("m"), "a");
        assert_eq!(e.engines.len(), 2);
        assert_eq!(e.counter(names::PREEMPTIONS), Some(7.0));
        assert_eq!(e.gauges[names::RUNNING], 7.0);
        let w = e.since(&s);
        assert_eq!(w.counter(names::PREEMPTIONS), Some(6.0));
        let h = w.histogram(names::PROMPT_TOKENS).unwrap();
        assert_eq!((h.count, h.sum), (4.0, 5000.0));
        assert_eq!(h.buckets, vec![(1000.0, 2.0), (f64::INFINITY, 4.0)]);
    }
}
