//! The registry of diagnostic codes.
//!
//! Codes are stable and grouped by stage: E01 syntax, E02 names and imports, E03 types
//! and units, E04 topology and parallelism, E05 memory, E06 SLOs, E07 planning, E08
//! targets, E09 importers, E10 what `dic observe` measured on running engines; W warnings
//! (W10 `dic observe` too); A advice. Each code's explain page is `compiler/explain/CODE.md`,
//! embedded here, so the mapping is one table and a test checks that every page's example
//! produces its own code.

use super::Severity;
use serde::{Serialize, Serializer};

macro_rules! codes {
    ($($variant:ident = $code:literal, $sev:ident, $title:literal;)*) => {
        /// A stable diagnostic code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($variant),* }

        impl Code {
            /// Every code, in registry order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code as users see it, e.g. `E0201`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code),* }
            }

            /// A one-line title for listings.
            pub fn title(self) -> &'static str {
                match self { $(Code::$variant => $title),* }
            }

            pub fn default_severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$sev),* }
            }

            /// The Markdown page `dic explain CODE` prints.
            pub fn explanation(self) -> &'static str {
                match self { $(Code::$variant => include_str!(concat!("../../explain/", $code, ".md"))),* }
            }

            /// Parses `E0201` (case-insensitive).
            pub fn parse(s: &str) -> Option<Code> {
                let s = s.trim().to_ascii_uppercase();
                Code::ALL.iter().copied().find(|c| c.as_str() == s)
            }
        }
    };
}

codes! {
    SyntaxError = "E0101", Error, "syntax error";
    Unterminated = "E0102", Error, "unterminated string or comment";
    NestingTooDeep = "E0103", Error, "nesting too deep";
    InvalidNumber = "E0104", Error, "number out of range";
    InvalidUtf8 = "E0105", Error, "file is not valid UTF-8";
    InvalidEscape = "E0106", Error, "invalid escape in a string";
    FileTooLarge = "E0107", Error, "file too large";

    UnknownName = "E0201", Error, "unknown name";
    DuplicateDefinition = "E0202", Error, "name defined twice";
    UnknownModule = "E0203", Error, "unknown stdlib module or item";
    ImportCycle = "E0204", Error, "import cycle";
    UnreadableImport = "E0205", Error, "imported file cannot be read";
    BaseKindMismatch = "E0206", Error, "definition extends a different kind";
    ExtensionCycle = "E0207", Error, "definition extends itself";
    KubernetesNameClash = "E0208", Error, "deployments share a Kubernetes name";

    UnknownKind = "E0301", Error, "unknown definition kind";
    UnknownField = "E0302", Error, "unknown field";
    TypeMismatch = "E0303", Error, "value of the wrong type";
    UnitMismatch = "E0304", Error, "quantity in the wrong unit";
    UnknownUnit = "E0305", Error, "unknown unit";
    MissingField = "E0306", Error, "required field missing";
    OutOfRange = "E0307", Error, "value out of range";
    DuplicateField = "E0308", Error, "field set twice";
    UnknownOption = "E0309", Error, "unknown option value";
    WrongOperator = "E0310", Error, "wrong operator for this field";
    InvalidLayout = "E0311", Error, "invalid layout";
    InvalidText = "E0312", Error, "string not allowed in this field";
    InvalidLayerPattern = "E0313", Error, "invalid layer pattern";
    InvalidExtraArg = "E0314", Error, "vLLM option or variable dic cannot pass through";
    SpecMethodUnavailable = "E0315", Error, "speculative method the model cannot run";
    InlineSecret = "E0316", Error, "credential written in plain text";
    LoraUnsupported = "E0317", Error, "LoRA adapters on a model vLLM cannot serve them on";

    TpAcrossNodes = "E0401", Error, "tensor parallelism across nodes";
    HeadsNotDivisible = "E0402", Error, "attention heads not divisible by TP";
    TooManyStages = "E0403", Error, "more pipeline stages than layers";
    EpOnDense = "E0404", Error, "expert parallelism on a dense model";
    NotEnoughGpus = "E0405", Error, "layout needs more GPUs than the cluster has";
    PartialNode = "E0406", Error, "world size not a whole number of nodes";
    InvalidDcp = "E0407", Error, "invalid decode context parallelism";
    ClusterOversubscribed = "E0408", Error, "deployments oversubscribe the cluster";
    NodeGroupNotInCluster = "E0409", Error, "node group not in the cluster";
    PoolsCannotPair = "E0410", Error, "disaggregated pools the KV connector cannot pair";
    WidthNotDivisible = "E0411", Error, "an MLP or expert width TP cannot split";
    EplbRefused = "E0412", Error, "expert load balancing vLLM refuses on this layout";
    DboRefused = "E0413", Error, "dual batch overlap without an all-to-all backend it runs with";

    DoesNotFit = "E0501", Error, "model does not fit in GPU memory";
    RequestDoesNotFit = "E0502", Error, "one request of max_model_len does not fit the KV cache";
    ModelLenTooLong = "E0503", Error, "max_model_len beyond the model's context";
    BatchBelowSeqs = "E0504", Error, "max_num_batched_tokens below max_num_seqs";
    RequestTooLong = "E0505", Error, "the workload's requests exceed max_model_len";
    DeepEpBuffersDoNotFit = "E0506", Error, "DeepEP's buffers do not fit beside the model";
    SeqsAboveMambaBlocks = "E0507", Error, "max_num_seqs above the Mamba cache blocks";
    HostMemoryShort = "E0508", Error, "the KV offload buffer does not fit the node's CPU memory";
    PodMemoryBelowOffload = "E0509", Error, "the pod's memory is below what its KV offload buffer needs";
    BatchBelowModelLen = "E0510", Error, "chunked prefill off and max_num_batched_tokens below max_model_len";
    OffloadWithoutPrefixCaching = "E0511", Error, "KV offload on a hybrid model without prefix caching";

    SloInfeasible = "E0601", Error, "SLO cannot be met";
    Overloaded = "E0602", Error, "the declared load exceeds what the layout serves";

    NoLayout = "E0701", Error, "no layout to compile";

    UnsupportedLaunch = "E0801", Error, "deployment cannot be launched by the target";
    FormatNeedsNewerGpu = "E0802", Error, "weight format this GPU or dtype cannot run";
    NoAttentionBackend = "E0803", Error, "no attention backend for this model, KV cache and GPU";

    UnsupportedConfig = "E0901", Error, "Hugging Face config cannot be mapped";

    SloMissedObserved = "E1001", Error, "an SLO measured over its bound on the running engines";
    CalibrationOutOfRange = "E1002", Error, "a fitted calibration factor is outside 0.5 to 2";

    UnusedImport = "W0201", Warning, "unused import";
    DecimalBinaryMemory = "W0301", Warning, "GPU memory given in decimal units";
    TpOverPcie = "W0401", Warning, "tensor parallelism over PCIe";
    EpOverSlowFabric = "W0402", Warning, "expert all-to-all across nodes on a slow fabric";
    PipelineBubble = "W0403", Warning, "pipeline bubble dominates";
    MoreGpusWorse = "W0404", Warning, "more GPUs make it worse";
    SpeculationSlower = "W0405", Warning, "speculative decoding makes TPOT worse";
    AggregatedWins = "W0406", Warning, "aggregated serving beats this disaggregated split";
    TransferDominates = "W0407", Warning, "the KV transfer between pools costs more than the prefill";
    All2AllUnused = "W0408", Warning, "all2all_backend has no effect on this layout";
    EpBeyondExperts = "W0409", Warning, "expert parallelism over more ranks than experts";
    CapacityUnderFailure = "W0410", Warning, "the SLOs break with a replica down or a node lost";
    SpeculationCostsGoodput = "W0411", Warning, "turning speculative decoding off carries more load within the SLOs";
    LoadNotAdmitted = "W0501", Warning, "the declared load cannot be admitted";
    FormatNotNative = "W0502", Warning, "weight format not native on this GPU";
    PrefixCachingOff = "W0503", Warning, "the workload reuses prefixes but prefix caching is off";
    OffloadWithoutReuse = "W0504", Warning, "KV offloading under a workload without prefix reuse";
    HostMemoryUnchecked = "W0505", Warning, "KV offloading on a node that states no CPU memory";
    LmcacheServerMissing = "W0506", Warning, "LMCache offloading without the LMCache server vLLM connects to";
    NoProductLabel = "W0801", Warning, "GPU without a product label: no node affinity";
    KvCapacityDiffers = "W1001", Warning, "the engines' KV cache differs from the prediction";
    WorkloadDrift = "W1002", Warning, "the measured workload differs from the declared one";
    DeclaredRateDiffers = "W1003", Warning, "measured acceptance or prefix-hit rate differs from the declared";
    UnpredictedPreemptions = "W1004", Warning, "vLLM preempted requests where dic predicted none";

    DpBeatsTp = "A0401", Advice, "DP replicas would beat a wider TP";
    QuantizeToFit = "A0501", Advice, "quantization would fit on fewer GPUs";
    CheaperLayout = "A0701", Advice, "a cheaper layout meets the same SLOs";
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_parse_back_are_unique_and_each_has_its_page() {
        let mut seen = std::collections::BTreeSet::new();
        for &code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            assert_eq!(Code::parse(&code.as_str().to_lowercase()), Some(code));
            assert!(
                code.explanation()
                    .starts_with(&format!("# {}: {}", code.as_str(), code.title())),
                "{}: the page must start with `# {}: {}`",
                code.as_str(),
                code.as_str(),
                code.title()
            );
        }
        assert_eq!(Code::parse("E9999"), None);
        // and every page in compiler/explain belongs to a code
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("explain");
        for e in std::fs::read_dir(dir).expect("compiler/explain").flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let stem = name.trim_end_matches(".md");
            assert!(Code::parse(stem).is_some(), "{name} belongs to no code");
        }
    }
}
