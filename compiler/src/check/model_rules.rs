//! Consistency rules inside one model definition (heads, MoE, MLA fields).

use super::*;

impl<'s, 'w> Checker<'s, 'w> {
    /// Consistency rules inside one model definition.
    pub(super) fn model_rules(
        &mut self,
        file: FileId,
        raw: &RawDef,
        f: &BTreeMap<String, FieldValue>,
        m: &Model,
    ) -> bool {
        let mut ok = true;
        let at = |name: &str| {
            f.get(name)
                .map(|v| v.at)
                .unwrap_or(FileSpan::new(file, raw.name.span))
        };
        let mut fail = |this: &mut Self, at: FileSpan, msg: String, label: &str, help: String| {
            this.push(
                Diagnostic::new(Code::OutOfRange, msg)
                    .primary(at.file, at.span, label)
                    .help(help),
            );
            ok = false;
        };
        if m.kv_heads > m.heads {
            fail(
                self,
                at("kv_heads"),
                format!("`kv_heads` ({}) exceeds `heads` ({})", m.kv_heads, m.heads),
                "too many KV heads",
                "GQA shares each KV head among several query heads: kv_heads ≤ heads".into(),
            );
        } else if !m.heads.is_multiple_of(m.kv_heads.max(1)) {
            fail(
                self,
                at("kv_heads"),
                format!(
                    "`heads` ({}) is not a multiple of `kv_heads` ({})",
                    m.heads, m.kv_heads
                ),
                "does not divide heads",
                "check the model's config.json".into(),
            );
        }
        if m.experts > 0 && (m.experts_per_token == 0 || m.experts_per_token > m.experts) {
            fail(
                self,
                at("experts_per_token"),
                format!(
                    "a MoE model needs 1 ≤ `experts_per_token` ≤ `experts` ({})",
                    m.experts
                ),
                "top-k missing or too large",
                "set `experts_per_token` (num_experts_per_tok in config.json)".into(),
            );
        }
        if m.experts > 0 && m.moe_intermediate == 0 {
            fail(
                self,
                at("experts"),
                "a MoE model needs `moe_intermediate`".into(),
                "expert size missing",
                "set `moe_intermediate` (moe_intermediate_size in config.json)".into(),
            );
        }
        if m.attention == Attention::Mla && (m.kv_lora_rank == 0 || m.qk_rope_head_dim == 0) {
            fail(
                self,
                at("attention"),
                "MLA attention needs `kv_lora_rank` and `qk_rope_head_dim`".into(),
                "latent ranks missing",
                "copy them from config.json".into(),
            );
        }
        if m.dense_layers > m.layers {
            fail(
                self,
                at("dense_layers"),
                format!(
                    "`dense_layers` ({}) exceeds `layers` ({})",
                    m.dense_layers, m.layers
                ),
                "more than all layers",
                "dense_layers counts leading dense layers".into(),
            );
        }
        if m.sliding_layers > m.layers {
            fail(
                self,
                at("sliding_layers"),
                format!(
                    "`sliding_layers` ({}) exceeds `layers` ({})",
                    m.sliding_layers, m.layers
                ),
                "more than all layers",
                "count only the windowed layers".into(),
            );
        }
        ok
    }
}
