//! Reading and validating `nccl/plan.toml` (format `dic-nccl-plan/1`, docs/nccl-plan.md).
//!
//! Everything a rank needs is checked here, before any socket opens: the format version,
//! the world, every rank's placement, every group's members, and that each collective of
//! the schedule names a group kind that every rank of its stage belongs to. Errors carry
//! the byte span of the offending table so the CLI can point at it.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use toml::Spanned;

pub use dic_compiler::ir::NCCL_PLAN_FORMAT as PLAN_FORMAT;

/// A plan file that cannot be run: what is wrong and, where known, where.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    pub message: String,
    pub span: Option<Range<usize>>,
    pub help: Option<String>,
}

impl PlanError {
    fn at(span: Range<usize>, message: impl Into<String>) -> PlanError {
        PlanError {
            message: message.into(),
            span: Some(span),
            help: None,
        }
    }
    fn help(mut self, help: impl Into<String>) -> PlanError {
        self.help = Some(help.into());
        self
    }
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RawPlan {
    format: Spanned<String>,
    deployment: String,
    model: String,
    layout: String,
    world_size: Spanned<u64>,
    rendezvous: Spanned<Rendezvous>,
    ranks: Vec<Spanned<RankPlacement>>,
    groups: Vec<Spanned<RawGroup>>,
    decode_step: Spanned<Schedule>,
    prefill_chunk: Spanned<Schedule>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Rendezvous {
    pub address_env: String,
    pub port: u16,
    pub timeout_seconds: u64,
}

/// Every rank's node, GPU and position: the compiler's type, so writer and reader share it.
pub use dic_compiler::analysis::comm::RankPlacement;

#[derive(Debug, Clone, Deserialize)]
struct RawGroup {
    name: String,
    kind: String,
    #[serde(default)]
    link: Option<String>,
    members: Vec<u64>,
}

/// A communicator to build: its name (`tp.0`), kind, link class and member ranks in
/// group-rank order.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: String,
    pub kind: GroupKind,
    pub link: Option<String>,
    pub members: Vec<usize>,
}

/// Group kinds: the compiler's, so writer and reader share one vocabulary.
pub use dic_compiler::analysis::comm::GroupKind;

/// The collectives a schedule names: the compiler's, so writer and reader share one
/// vocabulary and one cost model.
pub use dic_compiler::analysis::comm::Collective;

/// Element types the schedule moves: the compiler's, so writer and reader share one
/// vocabulary.
pub use dic_compiler::analysis::comm::DType;

#[derive(Debug, Clone, Deserialize)]
struct Schedule {
    tokens: u64,
    predicted_us: f64,
    stages: Vec<Spanned<RawStage>>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawStage {
    stage: u64,
    layers: [u64; 2],
    collectives: Vec<Spanned<RawCollective>>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawCollective {
    group_kind: String,
    collective: String,
    layers: [u64; 2],
    per_layer: u64,
    /// Calls per step; plans written before hybrid models had only `per_layer`.
    #[serde(default)]
    calls: Option<u64>,
    bytes: u64,
    dtype: String,
    predicted_us: f64,
    /// The α-β figures of the prediction (plans written before these lines lack them).
    #[serde(default)]
    link_type: Option<String>,
    #[serde(default)]
    link_bandwidth_gbps: Option<f64>,
    #[serde(default)]
    link_latency_us: Option<f64>,
}

/// One line of a stage's schedule: `calls` calls of `collective` on the rank's group of
/// `group`, `bytes` each (nccl-tests' S), with dic's predicted time of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub group: GroupKind,
    pub collective: Collective,
    pub layers: [u64; 2],
    pub calls: u64,
    pub bytes: u64,
    pub dtype: DType,
    pub predicted_us: f64,
    /// The link figures dic predicted with, to predict the call at another size.
    pub fabric: Option<LinkFigures>,
}

pub use dic_compiler::analysis::comm::LinkFigures;

impl Step {
    /// dic's predicted time of one call of `bytes` (µs) with the plan's link figures;
    /// `None` for plans without them.
    pub fn predicted_at(&self, bytes: u64, group_size: usize) -> Option<f64> {
        let f = self.fabric?;
        let at = f.placement(group_size as u64);
        Some(
            dic_compiler::analysis::comm::collective_time(
                self.collective,
                bytes as f64,
                group_size as u64,
                &at,
            ) * 1e6,
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub stage: u64,
    pub layers: [u64; 2],
    pub steps: Vec<Step>,
}

/// Which pass of the model a schedule describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Decode,
    Prefill,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Decode => "decode step",
            Phase::Prefill => "prefill chunk",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepSchedule {
    pub tokens: u64,
    pub predicted_us: f64,
    pub stages: Vec<Stage>,
}

/// A validated plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub deployment: String,
    pub model: String,
    pub layout: String,
    pub world_size: usize,
    pub rendezvous: Rendezvous,
    pub ranks: Vec<RankPlacement>,
    pub groups: Vec<Group>,
    pub decode: StepSchedule,
    pub prefill: StepSchedule,
    /// FNV-1a of the file's bytes: ranks compare it at rendezvous.
    pub digest: u64,
}

impl Plan {
    pub fn schedule(&self, phase: Phase) -> &StepSchedule {
        match phase {
            Phase::Decode => &self.decode,
            Phase::Prefill => &self.prefill,
        }
    }

    /// The largest message of any call of either schedule, in bytes.
    pub fn largest_call_bytes(&self) -> u64 {
        [&self.decode, &self.prefill]
            .iter()
            .flat_map(|s| s.stages.iter())
            .flat_map(|st| st.steps.iter())
            .map(|step| step.bytes)
            .max()
            .unwrap_or(0)
    }

    /// The group of `kind` that `rank` belongs to (the first, for PP pairs where a middle
    /// stage's rank is in two: see [`Plan::pp_next`]).
    pub fn group_of(&self, rank: usize, kind: GroupKind) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.kind == kind && g.members.contains(&rank))
    }

    /// The rank of the next PP stage that `rank` hands activations to.
    pub fn pp_next(&self, rank: usize) -> Option<usize> {
        self.groups
            .iter()
            .find(|g| g.kind == GroupKind::Pp && g.members.first() == Some(&rank))
            .map(|g| g.members[1])
    }

    /// The rank of the previous PP stage that `rank` receives activations from.
    pub fn pp_prev(&self, rank: usize) -> Option<usize> {
        self.groups
            .iter()
            .find(|g| g.kind == GroupKind::Pp && g.members.get(1) == Some(&rank))
            .map(|g| g.members[0])
    }
}

/// FNV-1a, 64 bit: a stable digest of the plan's bytes (not a security measure).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Largest world a plan may declare: 512 nodes of 8 GPUs, 56 GB200 NVL72 racks. Rank 0
/// holds a connection to every rank (the rendezvous, the gather of results), and each
/// connection has a sender thread: past a few thousand that is no longer a sane process.
pub const MAX_WORLD: u64 = 4096;
/// The longest timeout a plan or `--timeout` may set (a day): beyond it a deadline is no
/// bound at all, and `Instant + Duration` can overflow.
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;
/// The largest message of one call (after `--scale`): buffers of this size are allocated
/// per call, so the bound keeps a hand-edited plan from exhausting memory mid-run.
pub const MAX_CALL_BYTES: u64 = 8 << 30;

/// `s` with every control character (C0, DEL, C1: escape sequences, bells, newlines)
/// written as a Rust escape (`\u{1b}`), so a plan's strings cannot drive a terminal or
/// forge lines in a report.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Letters, digits and `_`, not starting with a digit, at most 64 characters.
fn is_identifier(s: &str) -> bool {
    s.len() <= 64
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What `rendezvous.address_env` may name, for the diagnostic's help.
const ADDRESS_ENV_HELP: &str = "address_env names the variable that holds rank 0's address: upper-case letters, digits and `_`, ending in `_ADDR`, `_ADDRESS`, `_HOST` or `_IP`, or `HOSTNAME` (dic writes `DIC_HEAD_ADDR`)";

/// Words that make a variable's name secret-shaped: such a variable is never read as an
/// address (its value would be printed in errors and sent to DNS).
const SECRET_WORDS: [&str; 9] = [
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// Whether the plan may read rank 0's address from the variable `name`: an address-shaped
/// name (`*_ADDR`, `*_ADDRESS`, `*_HOST`, `*_IP`, `HOSTNAME`) that is not secret-shaped.
/// On refusal, why (without the variable's value, which is never read).
pub fn check_address_env(name: &str) -> Result<(), String> {
    let well_formed = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !well_formed {
        return Err("is not an environment variable name dic reads an address from".into());
    }
    if name == crate::auth::SECRET_ENV {
        return Err("is the job's secret, not an address".into());
    }
    if let Some(word) = SECRET_WORDS.iter().find(|w| {
        name.split('_')
            .any(|part| part == **w || part.ends_with(**w))
    }) {
        return Err(format!(
            "looks like a secret (`{word}`): dic does not read it as an address"
        ));
    }
    let address_shaped = name == "HOSTNAME"
        || ["_ADDR", "_ADDRESS", "_HOST", "_IP"]
            .iter()
            .any(|suffix| name.ends_with(suffix));
    if !address_shaped {
        return Err("does not name an address variable".into());
    }
    Ok(())
}

/// Parse and validate a plan file's text.
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    // The version first, so a future format gets "unknown format", not a field error.
    if let Ok(v) = text.parse::<toml::Table>() {
        match v.get("format").and_then(|f| f.as_str()) {
            Some(PLAN_FORMAT) => {}
            Some(other) => {
                return Err(PlanError {
                    message: format!(
                        "plan format `{}` is not one this dic reads (`{PLAN_FORMAT}`)",
                        printable(other)
                    ),
                    span: find(text, other),
                    help: Some("recompile the deployment with this dic: `dic compile`".into()),
                })
            }
            None => {
                return Err(PlanError {
                    message: "not a dic NCCL plan: the `format` key is missing".into(),
                    span: None,
                    help: Some(format!("a plan starts with `format = \"{PLAN_FORMAT}\"`")),
                })
            }
        }
    }
    let raw: RawPlan = toml::from_str(text).map_err(|e| PlanError {
        // toml's message may span lines; any other control character is escaped
        message: format!(
            "invalid plan: {}",
            e.message()
                .split('\n')
                .map(printable)
                .collect::<Vec<_>>()
                .join("\n")
        ),
        span: e.span(),
        help: Some("`dic run` takes the `nccl/plan.toml` that `dic compile` writes".into()),
    })?;
    validate(raw, digest(text.as_bytes()))
}

fn find(text: &str, needle: &str) -> Option<Range<usize>> {
    text.find(needle).map(|i| i..i + needle.len())
}

fn validate(raw: RawPlan, digest: u64) -> Result<Plan, PlanError> {
    let _ = raw.format;
    let world = *raw.world_size.get_ref();
    if world == 0 || world > MAX_WORLD {
        return Err(PlanError::at(
            raw.world_size.span(),
            format!("world_size {world} is outside 1..={MAX_WORLD}"),
        ));
    }
    let world = world as usize;
    let rendezvous_span = raw.rendezvous.span();
    let rendezvous = raw.rendezvous.into_inner();
    check_rendezvous(&rendezvous, rendezvous_span)?;
    let ranks = checked_ranks(&raw.ranks, world, raw.world_size.span())?;
    let stages: BTreeSet<u64> = ranks.iter().map(|r| r.pp_stage).collect();
    let mut groups = Vec::new();
    let mut names = BTreeSet::new();
    for g in &raw.groups {
        groups.push(checked_group(g, world, &mut names)?);
    }
    check_partitions(&groups, &raw.groups, world)?;
    let decode = schedule(&raw.decode_step, "decode_step", &ranks, &groups, &stages)?;
    let prefill = schedule(
        &raw.prefill_chunk,
        "prefill_chunk",
        &ranks,
        &groups,
        &stages,
    )?;
    Ok(Plan {
        deployment: printable(&raw.deployment),
        model: printable(&raw.model),
        layout: printable(&raw.layout),
        world_size: world,
        rendezvous,
        ranks,
        groups,
        decode,
        prefill,
        digest,
    })
}

/// The rendezvous: an environment variable's name for the address, a timeout in range.
fn check_rendezvous(rendezvous: &Rendezvous, span: Range<usize>) -> Result<(), PlanError> {
    if let Err(why) = check_address_env(&rendezvous.address_env) {
        return Err(PlanError::at(
            span,
            format!(
                "rendezvous.address_env `{}` {why}",
                printable(&rendezvous.address_env)
            ),
        )
        .help(ADDRESS_ENV_HELP));
    }
    if rendezvous.timeout_seconds == 0 || rendezvous.timeout_seconds > MAX_TIMEOUT_SECONDS {
        return Err(PlanError {
            message: format!(
                "rendezvous.timeout_seconds must be between 1 and {MAX_TIMEOUT_SECONDS}"
            ),
            span: None,
            help: None,
        });
    }
    Ok(())
}

/// The ranks, sorted: exactly 0..world, each once.
fn checked_ranks(
    raw: &[Spanned<RankPlacement>],
    world: usize,
    world_span: Range<usize>,
) -> Result<Vec<RankPlacement>, PlanError> {
    let mut seen = vec![false; world];
    for r in raw {
        let rank = r.get_ref().rank;
        if rank >= world as u64 {
            return Err(PlanError::at(
                r.span(),
                format!("rank {rank} is outside the world (world_size = {world})"),
            ));
        }
        if std::mem::replace(&mut seen[rank as usize], true) {
            return Err(PlanError::at(
                r.span(),
                format!("rank {rank} is listed twice"),
            ));
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(PlanError {
            message: format!(
                "world_size is {world} but rank {missing} has no [[ranks]] entry ({} listed)",
                raw.len()
            ),
            span: Some(world_span),
            help: None,
        });
    }
    let mut ranks: Vec<RankPlacement> = raw.iter().map(|r| r.get_ref().clone()).collect();
    ranks.sort_by_key(|r| r.rank);
    Ok(ranks)
}

/// One group: a known kind, a name not in `names` (added), members inside the world and
/// distinct, a link that is a name, a PP group a pair.
fn checked_group(
    g: &Spanned<RawGroup>,
    world: usize,
    names: &mut BTreeSet<String>,
) -> Result<Group, PlanError> {
    let span = g.span();
    let raw_group = g.get_ref();
    // Names reach terminals, reports and messages: control characters escaped here,
    // once, so no output path can forget.
    let name = printable(&raw_group.name);
    let kind = GroupKind::parse(&raw_group.kind).ok_or_else(|| {
        PlanError::at(
            span.clone(),
            format!(
                "group `{}` has unknown kind `{}`",
                name,
                printable(&raw_group.kind)
            ),
        )
        .help("kinds are tp, pp, ep, dcp, pcp and dp")
    })?;
    if !names.insert(name.clone()) {
        return Err(PlanError::at(
            span,
            format!("group `{name}` is defined twice"),
        ));
    }
    if raw_group.members.is_empty() {
        return Err(PlanError::at(
            span,
            format!("group `{name}` has no members"),
        ));
    }
    let mut members = Vec::new();
    for &m in &raw_group.members {
        if m >= world as u64 {
            return Err(PlanError::at(
                span,
                format!("group `{name}` names rank {m}, outside the world (world_size = {world})"),
            ));
        }
        if members.contains(&(m as usize)) {
            return Err(PlanError::at(
                span,
                format!("group `{name}` lists rank {m} twice"),
            ));
        }
        members.push(m as usize);
    }
    // A link name becomes a `.dist` identifier under `--calibrate`.
    let link = match &raw_group.link {
        Some(l) if !is_identifier(l) => {
            return Err(PlanError::at(
                span,
                format!(
                    "group `{name}` has link `{}`, which is not a name (letters, digits and `_`, up to 64)",
                    printable(l)
                ),
            )
            .help("link names are the catalog's (`nvlink4`, `ib_ndr`); recompile the plan"))
        }
        l => l.clone(),
    };
    if kind == GroupKind::Pp && members.len() != 2 {
        return Err(PlanError::at(
            span,
            format!(
                "PP group `{name}` must be a pair (sender, receiver), not {} ranks",
                members.len()
            ),
        ));
    }
    Ok(Group {
        name,
        kind,
        link,
        members,
    })
}

/// Every rank in at most one group of each partitioning kind (TP, EP, DCP, PCP), and in
/// exactly one TP group.
fn check_partitions(
    groups: &[Group],
    raw: &[Spanned<RawGroup>],
    world: usize,
) -> Result<(), PlanError> {
    for kind in [GroupKind::Tp, GroupKind::Ep, GroupKind::Dcp, GroupKind::Pcp] {
        let of_kind: Vec<&Group> = groups.iter().filter(|g| g.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let mut owner: BTreeMap<usize, &str> = BTreeMap::new();
        for g in &of_kind {
            for &m in &g.members {
                if let Some(other) = owner.insert(m, &g.name) {
                    return Err(PlanError {
                        message: format!(
                            "rank {m} is in two {} groups, `{other}` and `{}`",
                            kind.name(),
                            g.name
                        ),
                        span: raw_span(raw, &g.name),
                        help: None,
                    });
                }
            }
        }
        if kind == GroupKind::Tp {
            if let Some(r) = (0..world).find(|r| !owner.contains_key(r)) {
                return Err(PlanError {
                    message: format!("rank {r} is in no tp group"),
                    span: None,
                    help: Some("every rank needs a TP group, of size 1 without TP".into()),
                });
            }
        }
    }
    Ok(())
}

fn raw_span(groups: &[Spanned<RawGroup>], name: &str) -> Option<Range<usize>> {
    groups
        .iter()
        .find(|g| printable(&g.get_ref().name) == name)
        .map(|g| g.span())
}

fn schedule(
    raw: &Spanned<Schedule>,
    table: &str,
    ranks: &[RankPlacement],
    groups: &[Group],
    stages: &BTreeSet<u64>,
) -> Result<StepSchedule, PlanError> {
    let s = raw.get_ref();
    let mut out = Vec::new();
    for st in &s.stages {
        let span = st.span();
        let rs = st.get_ref();
        if !stages.contains(&rs.stage) {
            return Err(PlanError::at(
                span,
                format!(
                    "{table}: stage {} has no ranks (ranks' pp_stage values: {:?})",
                    rs.stage, stages
                ),
            ));
        }
        if rs.layers[0] > rs.layers[1] {
            return Err(PlanError::at(
                span,
                format!(
                    "{table}: stage {} has layers {:?}, first after last",
                    rs.stage, rs.layers
                ),
            ));
        }
        let stage_ranks: Vec<usize> = ranks
            .iter()
            .filter(|r| r.pp_stage == rs.stage)
            .map(|r| r.rank as usize)
            .collect();
        let mut steps = Vec::new();
        for c in &rs.collectives {
            let cspan = c.span();
            let rc = c.get_ref();
            let kind = GroupKind::parse(&rc.group_kind).ok_or_else(|| {
                PlanError::at(
                    cspan.clone(),
                    format!(
                        "{table}: unknown group kind `{}`",
                        printable(&rc.group_kind)
                    ),
                )
            })?;
            let collective = Collective::parse(&rc.collective).ok_or_else(|| {
                PlanError::at(
                    cspan.clone(),
                    format!("{table}: unknown collective `{}`", printable(&rc.collective)),
                )
                .help("collectives are all_reduce, all_gather, reduce_scatter, all_to_all, send_recv and broadcast")
            })?;
            let dtype = DType::parse(&rc.dtype).ok_or_else(|| {
                PlanError::at(
                    cspan.clone(),
                    format!("{table}: unknown dtype `{}`", printable(&rc.dtype)),
                )
            })?;
            if rc.layers[0] > rc.layers[1] {
                return Err(PlanError::at(
                    cspan,
                    format!("{table}: layers {:?}, first after last", rc.layers),
                ));
            }
            let calls = rc
                .calls
                .unwrap_or_else(|| (rc.layers[1] - rc.layers[0] + 1).saturating_mul(rc.per_layer));
            if calls > 1_000_000 || rc.bytes > MAX_CALL_BYTES {
                return Err(PlanError::at(
                    cspan,
                    format!(
                        "{table}: {} calls of {} bytes is beyond what a step can hold",
                        calls, rc.bytes
                    ),
                ));
            }
            // Every rank of the stage must have the group this collective runs on.
            for &r in &stage_ranks {
                let ok = match kind {
                    GroupKind::Pp => groups
                        .iter()
                        .any(|g| g.kind == GroupKind::Pp && g.members[0] == r),
                    k => groups.iter().any(|g| g.kind == k && g.members.contains(&r)),
                };
                if !ok {
                    return Err(PlanError::at(
                        cspan,
                        format!(
                            "{table}: stage {} runs {} on its {} group, but rank {r} has none",
                            rs.stage,
                            collective.name(),
                            kind.name()
                        ),
                    )
                    .help("the plan's groups and schedule disagree; recompile it"));
                }
            }
            if kind == GroupKind::Pp && collective != Collective::SendRecv {
                return Err(PlanError::at(
                    cspan,
                    format!(
                        "{table}: the PP hand-off is send_recv, not {}",
                        collective.name()
                    ),
                ));
            }
            steps.push(Step {
                group: kind,
                collective,
                layers: rc.layers,
                calls,
                bytes: rc.bytes,
                dtype,
                predicted_us: rc.predicted_us,
                fabric: match (
                    rc.link_type
                        .as_deref()
                        .and_then(dic_compiler::program::LinkType::parse),
                    rc.link_bandwidth_gbps,
                    rc.link_latency_us,
                ) {
                    (Some(link_type), Some(bw), Some(lat)) if bw > 0.0 && lat >= 0.0 => {
                        Some(LinkFigures {
                            link_type,
                            bandwidth: bw * 1e9,
                            latency: lat * 1e-6,
                        })
                    }
                    _ => None,
                },
            });
        }
        out.push(Stage {
            stage: rs.stage,
            layers: rs.layers,
            steps,
        });
    }
    Ok(StepSchedule {
        tokens: s.tokens,
        predicted_us: s.predicted_us,
        stages: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_env_is_an_address_variable_and_never_a_secret() {
        for ok in [
            "DIC_HEAD_ADDR",
            "MASTER_ADDR",
            "LWS_LEADER_ADDRESS",
            "POD_IP",
            "HOSTNAME",
            "HEAD_HOST",
        ] {
            assert_eq!(check_address_env(ok), Ok(()), "{ok}");
        }
        for bad in [
            "DIC_JOB_SECRET",
            "HOME",
            "PATH",
            "AWS_SECRET_ACCESS_KEY",
            "HF_TOKEN",
            "API_KEY_ADDR",
            "DB_PASSWORD_HOST",
            "dic_head_addr",
            "",
            "A B_ADDR",
            "X\u{1b}_ADDR",
        ] {
            assert!(check_address_env(bad).is_err(), "{bad}");
        }
        assert!(check_address_env("DIC_JOB_SECRET")
            .unwrap_err()
            .contains("secret"));
        assert!(check_address_env("GITHUB_TOKEN_ADDR")
            .unwrap_err()
            .contains("TOKEN"));
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("tp.0"), "tp.0");
        assert_eq!(printable("a\u{1b}[2J\nb\u{7}"), "a\\u{1b}[2J\\u{a}b\\u{7}");
        assert_eq!(printable("é ✓ \u{85}"), "é ✓ \\u{85}");
    }
}
