//! The communicators and the per-step collective schedule the NCCL runtime replays.

use super::*;

/// The communicators and the per-step collective schedule the NCCL runtime replays.
pub(super) fn comm_plan(ds: &DeploymentScenario, a: &Analysis) -> CommPlan {
    use crate::analysis::comm::{
        dcp_groups, dp_group, ep_groups, pcp_groups, pp_pairs, rank_placements, step_comm,
        tp_groups, CommContext, StageBlocks,
    };
    let s = &ds.scenario;
    let l = s.layout;
    let cx = CommContext::new(s);
    let mut groups = Vec::new();
    use crate::analysis::comm::GroupKind;
    let mut add = |kind: GroupKind, link: Option<&str>, members: Vec<Vec<u64>>, indexed: bool| {
        for (i, g) in members.into_iter().enumerate() {
            groups.push(GroupPlan {
                name: if indexed {
                    format!("{kind}.{i}")
                } else {
                    kind.to_string()
                },
                kind,
                link: link.map(str::to_string),
                members: g,
            });
        }
    };
    let tp_link = Some(&*cx.tp.link_name);
    add(GroupKind::Tp, tp_link, tp_groups(s), true);
    if l.pp > 1 {
        add(
            GroupKind::Pp,
            cx.pp.as_ref().map(|p| &*p.link_name),
            pp_pairs(s),
            true,
        );
    }
    if cx.ep.is_some() {
        add(
            GroupKind::Ep,
            cx.ep.as_ref().map(|p| &*p.link_name),
            ep_groups(s),
            true,
        );
    }
    if l.dcp > 1 {
        add(GroupKind::Dcp, tp_link, dcp_groups(s), true);
    }
    if l.pcp > 1 {
        add(GroupKind::Pcp, tp_link, pcp_groups(s), true);
    }
    if l.dp > 1 {
        // rank 0 of every replica: the DP "group" used for start-up and weight checks
        add(GroupKind::Dp, None, vec![dp_group(s)], false);
    }
    let parts = crate::analysis::memory::pp_partition(s.model.layers, l.pp);
    let schedule = |tokens: f64| {
        let mut stages = Vec::new();
        let mut first = 0;
        let mut total = 0.0;
        for (i, &count) in parts.iter().enumerate() {
            let last_stage = i + 1 == parts.len();
            let blocks = StageBlocks::of(&s.model, first..first + count);
            let moe = blocks.moe;
            let moe_first = (first..first + count)
                .find(|x| crate::architecture::is_moe_layer(&s.model, *x))
                .unwrap_or(first);
            let last = first + count.saturating_sub(1);
            let collectives = step_comm(s, &cx, tokens, &blocks, last_stage)
                .into_iter()
                .map(|c| {
                    // `dic run` replays with NCCL: the plan predicts NCCL's time.
                    let time = c.nccl_time;
                    total += time * 1e6;
                    // Where it runs and how often per layer that has it; `calls` is the
                    // count (a hybrid model's layers do not all have every block).
                    let (layers, per_layer) = match c.group {
                        GroupKind::Pp => ([last, last], 1),
                        GroupKind::Ep => ([moe_first, last], c.count.div_ceil(moe.max(1))),
                        _ => ([first, last], c.count.div_ceil(count.max(1))),
                    };
                    CollectiveStep {
                        group_kind: c.group,
                        collective: c.collective,
                        layers,
                        per_layer,
                        calls: c.count,
                        bytes: c.bytes.round() as u64,
                        dtype: crate::analysis::comm::ACTIVATION_DTYPE,
                        predicted_us: time * 1e6 / c.count.max(1) as f64,
                        link_type: c.fabric.link_type,
                        link_bandwidth_gbps: c.fabric.bandwidth / 1e9,
                        link_latency_us: c.fabric.latency * 1e6,
                    }
                })
                .collect();
            stages.push(StageSchedule {
                stage: i as u64,
                layers: [first, last],
                collectives,
            });
            first += count;
        }
        StepSchedule {
            tokens: tokens.round() as u64,
            stages,
            predicted_us: total,
        }
    };
    // The decode step at the most requests a replica can run (max_num_seqs, or fewer
    // when the KV cache holds fewer at the workload's mean context: the memory model's
    // bound, not the performance model's operating point, so a refit of the step model
    // never changes what `dic run` replays).
    let most = a
        .prediction
        .as_ref()
        .map(|p| p.running_cap)
        .unwrap_or(s.engine.max_num_seqs as f64);
    let micro = (most / l.pp.max(1) as f64).max(1.0);
    CommPlan {
        world_size: l.gpus(),
        ranks: rank_placements(s),
        groups,
        decode_step: schedule(micro.ceil()),
        prefill_chunk: schedule(s.engine.max_num_batched_tokens as f64),
    }
}
