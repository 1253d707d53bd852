//! `dic run PLAN`: the NCCL runtime's command. Reads and validates the plan (a bad plan is
//! a diagnostic and exit 2 before any socket opens), then either runs every rank on this
//! machine (`--local`, with a progress bar) or one rank of a cluster (`--rank R`, with the
//! rendezvous address from the plan's environment variable), and prints the per-collective
//! report at rank 0; `--calibrate FILE` also writes the measured links as a `.dist` file.

use dic::exit::{ERRORS, OK, USAGE};
use dic_runtime::auth::{JobKey, SECRET_ENV};
use dic_runtime::local::{self, ChildEvent, LocalError};
use dic_runtime::machine;
use dic_runtime::plan::{self, Plan};
use dic_runtime::replay::ReplayOptions;
use dic_runtime::session::{self, BackendKind, RankEvent, RankOptions};
use dic_runtime::summary::{calibration_dist, render_table, RunSummary};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The deployment's `nccl/plan.toml` (from `dic compile`).
    plan: String,
    /// Run every rank of the plan as a process on this machine, over loopback.
    #[arg(long, conflicts_with = "rank")]
    local: bool,
    /// Run one rank (one process per GPU on a cluster); rank 0 serves the rendezvous.
    #[arg(long, conflicts_with = "node")]
    rank: Option<usize>,
    /// Run the ranks the plan places on node N, one process each (the Kubernetes
    /// preflight Job runs one of these per node).
    #[arg(long, conflicts_with = "local")]
    node: Option<u64>,
    /// Multiply every message size by this (e.g. 0.001 to fit a laptop).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Replays of the decode step and the prefill chunk.
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// Cap on the calls of one schedule line per replay (0: as many as the plan says).
    #[arg(long, default_value_t = 0)]
    max_calls: u64,
    /// Seconds a rank waits for a peer before giving up (default: the plan's).
    #[arg(long)]
    timeout: Option<u64>,
    /// Rank 0's rendezvous address, host:port (default: $<plan's address_env>:<plan's port>).
    #[arg(long)]
    rendezvous: Option<String>,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// With `--backend nccl` and `--local` or `--node`: have NCCL log its connections and
    /// fail unless it used this fabric between nodes (net-ib: InfiniBand/RoCE, net-ofi:
    /// EFA, net-socket: TCP, nvlink: multi-node NVLink). The Kubernetes preflight passes
    /// the fabric the plan assumes, so a broken RDMA setup fails it.
    #[arg(long, value_parser = parse_transport)]
    expect_transport: Option<dic_runtime::nccl_log::Expected>,
    /// Also measure α and β per link class and write them to this `.dist` file.
    #[arg(long)]
    calibrate: Option<String>,
    /// Print the report as JSON (the same as `--format json`).
    #[arg(long)]
    json: bool,
    /// `human` or `json`.
    #[arg(long, value_enum)]
    format: Option<dic::Format>,
    /// Speak JSON lines on stdout (used by `--local` for its children).
    #[arg(long, hide = true)]
    child: bool,
}

#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
enum Backend {
    Cpu,
    Nccl,
}

fn parse_transport(s: &str) -> Result<dic_runtime::nccl_log::Expected, String> {
    s.parse()
}

fn read_plan(path: &str) -> Result<Plan, u8> {
    let text = match dic::disk::read_text(std::path::Path::new(path)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{path}`: {e}");
            return Err(USAGE);
        }
    };
    plan::parse(&text).map_err(|e| {
        eprint!(
            "{}",
            dic::render::plain_error(
                path,
                &displayable(&text),
                &e.message,
                e.span.clone(),
                e.help.as_deref(),
                100
            )
        );
        USAGE
    })
}

/// `text` with each control character but line breaks and tabs replaced by as many `?`
/// as it has bytes: an excerpt of a hostile plan cannot drive the terminal, and every
/// byte offset (a diagnostic's span) still points at the same place.
fn displayable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && !matches!(c, '\n' | '\r' | '\t') {
                "?".repeat(c.len_utf8())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Refuse, before any fork or socket, ranks this machine cannot hold (`forks`: as child
/// processes of this one). `what` names them for the message.
fn check_machine(
    a: &RunArgs,
    plan: &Plan,
    ranks: &[usize],
    forks: bool,
    what: &str,
) -> Result<(), u8> {
    machine::raise_open_files();
    let calibrate = if a.calibrate.is_some() {
        calibration_sizes(a.scale)
    } else {
        Vec::new()
    };
    let demand = machine::demand(plan, ranks, forks, &replay_options(a), &calibrate);
    let over = machine::check(&demand, &machine::Machine::this());
    if over.is_empty() {
        return Ok(());
    }
    eprintln!(
        "error: {what}; this machine cannot hold {}: {}\n  help: lower --scale, or run fewer ranks per machine (`--node N` on each node, `--rank R` per GPU)",
        if ranks.len() == 1 { "it" } else { "them" },
        over.join("; ")
    );
    Err(USAGE)
}

pub fn run(a: RunArgs) -> u8 {
    if let Err(code) = check_flags(&a) {
        return code;
    }
    let plan = match read_plan(&a.plan) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Err(code) = check_scale(&a, &plan) {
        return code;
    }
    let timeout = Duration::from_secs(a.timeout.unwrap_or(plan.rendezvous.timeout_seconds).max(1));
    let (secret, key) = match job_key(&a) {
        Ok(k) => k,
        Err(code) => return code,
    };
    if a.local {
        let all: Vec<usize> = (0..plan.world_size).collect();
        let what = format!("--local would start {} rank processes", all.len());
        if let Err(code) = check_machine(&a, &plan, &all, true, &what) {
            return code;
        }
        return run_children(&a, &plan, &all, None, timeout, &secret);
    }
    if let Some(node) = a.node {
        return run_node(&a, &plan, node, timeout, &secret);
    }
    let Some(rank) = a.rank else {
        eprintln!("error: say where to run: `--local` (every rank here), `--node N` (one node's ranks) or `--rank R` (one rank)");
        return USAGE;
    };
    run_one_rank(&a, &plan, rank, key, timeout)
}

/// The flags that make sense without the plan.
fn check_flags(a: &RunArgs) -> Result<(), u8> {
    if !(a.scale > 0.0 && a.scale.is_finite()) {
        eprintln!("error: --scale must be a positive number");
        return Err(USAGE);
    }
    if a.iterations == 0 {
        eprintln!("error: --iterations must be at least 1");
        return Err(USAGE);
    }
    if a.backend == Backend::Nccl && !cfg!(feature = "nccl") {
        eprintln!("error: this dic was built without the NCCL backend; rebuild with `cargo build --release --features nccl`");
        return Err(USAGE);
    }
    if a.expect_transport.is_some() && (a.backend != Backend::Nccl || a.rank.is_some()) {
        eprintln!("error: --expect-transport reads NCCL's own log: it needs --backend nccl and --local or --node (dic sets NCCL's logging for the ranks it starts)");
        return Err(USAGE);
    }
    if a.timeout
        .is_some_and(|t| t == 0 || t > plan::MAX_TIMEOUT_SECONDS)
    {
        eprintln!(
            "error: --timeout must be between 1 and {} seconds",
            plan::MAX_TIMEOUT_SECONDS
        );
        return Err(USAGE);
    }
    Ok(())
}

/// `--scale` against the plan's largest message.
fn check_scale(a: &RunArgs, plan: &Plan) -> Result<(), u8> {
    let largest = plan.largest_call_bytes() as f64 * a.scale;
    if largest > plan::MAX_CALL_BYTES as f64 {
        eprintln!(
            "error: with --scale {} the largest message is {:.1} GiB; dic run sends at most {} GiB per call (lower --scale)",
            a.scale,
            largest / (1u64 << 30) as f64,
            plan::MAX_CALL_BYTES >> 30
        );
        return Err(USAGE);
    }
    Ok(())
}

/// The job's secret and its key: the secret authenticates every handshake; `--local`
/// makes one for its children, ranks on a cluster must all be given the same one.
fn job_key(a: &RunArgs) -> Result<(String, JobKey), u8> {
    let secret = match std::env::var(SECRET_ENV) {
        Ok(s) => s,
        Err(_) if a.local => match JobKey::generate() {
            Ok((s, _)) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return Err(ERRORS);
            }
        },
        Err(_) => {
            eprintln!("error: set {SECRET_ENV} to the job's secret on every node (the same value everywhere, e.g. from `openssl rand -hex 32`); ranks without it cannot join");
            return Err(USAGE);
        }
    };
    let key = match JobKey::from_secret(&secret) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            return Err(USAGE);
        }
    };
    Ok((secret, key))
}

/// `--node N`: the ranks the plan puts on node `node`, as children of this process.
fn run_node(a: &RunArgs, plan: &Plan, node: u64, timeout: Duration, secret: &str) -> u8 {
    let ranks: Vec<usize> = plan
        .ranks
        .iter()
        .filter(|r| r.node == node)
        .map(|r| r.rank as usize)
        .collect();
    if ranks.is_empty() {
        eprintln!("error: the plan places no rank on node {node}");
        return USAGE;
    }
    let what = format!("--node {node} would start {} rank processes", ranks.len());
    if let Err(code) = check_machine(a, plan, &ranks, true, &what) {
        return code;
    }
    let rendezvous = match rendezvous_addr(a, plan, node == 0) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("error: {msg}");
            return USAGE;
        }
    };
    if rendezvous.port() == 0 && node != 0 {
        eprintln!("error: rendezvous port 0 (pick one) only works on the node of rank 0");
        return USAGE;
    }
    run_children(a, plan, &ranks, Some(rendezvous), timeout, secret)
}

/// `--rank R`: one rank in this process (a child of `--local`/`--node`, or run by hand).
fn run_one_rank(a: &RunArgs, plan: &Plan, rank: usize, key: JobKey, timeout: Duration) -> u8 {
    if rank >= plan.world_size {
        eprintln!(
            "error: rank {rank} is outside the plan's world (ranks 0–{} of deployment {})",
            plan.world_size - 1,
            plan.deployment
        );
        return USAGE;
    }
    if let Err(code) = check_machine(
        a,
        plan,
        &[rank],
        false,
        &format!("rank {rank} cannot run here"),
    ) {
        return code;
    }
    let rendezvous = match rendezvous_addr(a, plan, rank == 0) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("error: {msg}");
            return USAGE;
        }
    };
    let opts = RankOptions {
        rank,
        rendezvous,
        // Listen on loopback only when rank 0 is on loopback (every rank on this machine).
        bind: if rendezvous.ip().is_loopback() {
            IpAddr::from([127, 0, 0, 1])
        } else {
            IpAddr::from([0, 0, 0, 0])
        },
        key,
        timeout,
        replay: replay_options(a),
        calibrate: if a.calibrate.is_some() {
            calibration_sizes(a.scale)
        } else {
            Vec::new()
        },
        calibration_calls: 10,
        backend: if a.backend == Backend::Nccl {
            BackendKind::Nccl
        } else {
            BackendKind::Cpu
        },
    };
    let child = a.child;
    let mut last_report = std::time::Instant::now();
    let mut events = |ev: RankEvent| match ev {
        RankEvent::Listening(port) if child => emit(&ChildEvent::Listening { port }),
        RankEvent::Listening(port) => eprintln!("rank 0: rendezvous on port {port}"),
        RankEvent::Progress(done, total) => {
            if child {
                emit(&ChildEvent::Progress { done, total });
            } else if last_report.elapsed() > Duration::from_secs(2) || done == total {
                last_report = std::time::Instant::now();
                eprintln!("rank {rank}: {done}/{total} schedule lines");
            }
        }
    };
    match session::run_rank(plan, &opts, &mut events) {
        Ok(Some(summary)) => {
            if child {
                emit(&ChildEvent::Summary(Box::new(summary)));
                OK
            } else {
                finish(a, plan, &summary)
            }
        }
        Ok(None) => OK,
        Err(e) => {
            if child {
                emit(&ChildEvent::Error {
                    message: e.message.clone(),
                    culprit: e.culprit,
                });
            }
            eprintln!("error: rank {rank}: {}", e.message);
            ERRORS
        }
    }
}

fn emit(ev: &ChildEvent) {
    if let Ok(line) = serde_json::to_string(ev) {
        println!("{line}");
    }
}

fn replay_options(a: &RunArgs) -> ReplayOptions {
    ReplayOptions {
        scale: a.scale,
        iterations: a.iterations,
        max_calls: a.max_calls,
    }
}

/// 16 KiB upward by powers of four to 64 MiB × `--scale` (at least four sizes), so the
/// fit sees both the latency and the bandwidth regime.
fn calibration_sizes(scale: f64) -> Vec<u64> {
    let cap = ((64u64 << 20) as f64 * scale) as u64;
    let mut sizes = Vec::new();
    let mut s = 16u64 << 10;
    while s <= cap || sizes.len() < 4 {
        sizes.push(s);
        s *= 4;
    }
    sizes
}

fn rendezvous_addr(a: &RunArgs, plan: &Plan, serves: bool) -> Result<SocketAddr, String> {
    if let Some(text) = &a.rendezvous {
        // The command line's own text: safe to echo.
        return text
            .to_socket_addrs()
            .map_err(|e| format!("rendezvous address `{text}`: {e}"))?
            .next()
            .ok_or_else(|| format!("rendezvous address `{text}` resolves to nothing"));
    }
    // The plan's variable was checked at validation to be address-shaped and not a
    // secret; its value is still never printed, only the variable's name.
    let env = &plan.rendezvous.address_env;
    let port = plan.rendezvous.port;
    let host = match std::env::var(env) {
        Ok(host) if !host.is_empty() => host,
        _ if serves => return Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        _ => {
            return Err(format!(
                "set {env} to rank 0's address (or pass --rendezvous host:port)"
            ))
        }
    };
    if !looks_like_host(&host) {
        return Err(format!(
            "${env} does not hold a host name or IP address (its value is not shown); set it to rank 0's address"
        ));
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("rank 0's address in ${env} does not resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("rank 0's address in ${env} resolves to nothing"))
}

/// A DNS name or an IP address (v6 with or without brackets), by its characters alone.
fn looks_like_host(s: &str) -> bool {
    let s = s
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_' | '%'))
}

/// Run `ranks` as child processes; `rendezvous` is rank 0's address (None: loopback on a
/// free port, for `--local`).
fn run_children(
    a: &RunArgs,
    plan: &Plan,
    ranks: &[usize],
    rendezvous: Option<SocketAddr>,
    timeout: Duration,
    secret: &str,
) -> u8 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find the dic executable: {e}");
            return USAGE;
        }
    };
    let plan_path = a.plan.clone();
    let mut common = vec![
        "--timeout".to_string(),
        timeout.as_secs().to_string(),
        "--scale".into(),
        a.scale.to_string(),
        "--iterations".into(),
        a.iterations.to_string(),
        "--max-calls".into(),
        a.max_calls.to_string(),
        "--backend".into(),
        if a.backend == Backend::Nccl {
            "nccl"
        } else {
            "cpu"
        }
        .into(),
        "--child".into(),
    ];
    if a.calibrate.is_some() {
        // The children only measure; this process writes the file.
        common.push("--calibrate".into());
        common.push("-".into());
    }
    let args = move |rank: usize, rendezvous: &str| {
        let mut v = vec![
            "run".to_string(),
            plan_path.clone(),
            "--rank".into(),
            rank.to_string(),
            "--rendezvous".into(),
            rendezvous.to_string(),
        ];
        v.extend(common.iter().cloned());
        v
    };
    eprintln!(
        "dic run: {} of {} ranks of deployment {} on this machine",
        ranks.len(),
        plan.world_size,
        plan.deployment
    );
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} schedule lines · {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // Port 0 (or `--local`): rank 0, started first, picks a free port; the rest follow.
    let rendezvous = rendezvous.filter(|r| r.port() != 0).map(|r| r.to_string());
    // NCCL writes its INFO log per process (`%p`) into a folder of this run's own.
    let log_dir = std::env::temp_dir().join(format!("dic-nccl-{}", std::process::id()));
    let log_file = log_dir.join("rank-%p.log").to_string_lossy().into_owned();
    let mut env: Vec<(&str, &str)> = vec![(SECRET_ENV, secret)];
    if a.expect_transport.is_some() {
        if let Err(e) = std::fs::create_dir_all(&log_dir) {
            eprintln!("error: cannot create `{}`: {e}", log_dir.display());
            return USAGE;
        }
        env.extend([
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
            ("NCCL_DEBUG_FILE", log_file.as_str()),
        ]);
    }
    let result = local::run_ranks(
        &local::RankCommand {
            exe: &exe,
            args: &args,
            env: &env,
        },
        ranks,
        rendezvous,
        timeout,
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
        &mut |port| {
            // the other nodes need it (`--node N --rendezvous host:PORT`); `--local` does not
            if a.node.is_some() {
                bar.suspend(|| eprintln!("dic run: rank 0 serves the rendezvous on port {port}"))
            }
        },
    );
    bar.finish_and_clear();
    let transport = match (&result, a.expect_transport) {
        (Ok(_), Some(expected)) => check_transport(&log_dir, expected),
        _ => OK,
    };
    if a.expect_transport.is_some() {
        let _ = std::fs::remove_dir_all(&log_dir);
    }
    if transport != OK {
        return transport;
    }
    match result {
        Ok(Some(summary)) => finish(a, plan, &summary),
        Ok(None) => OK,
        Err(LocalError::Spawn(msg)) => {
            eprintln!("error: {msg}");
            USAGE
        }
        Err(LocalError::Ranks(failures)) => {
            let blamed: std::collections::BTreeSet<usize> =
                failures.iter().filter_map(|f| f.culprit).collect();
            eprintln!(
                "error: the run failed{}",
                if blamed.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; rank{} at fault: {}",
                        if blamed.len() > 1 { "s" } else { "" },
                        blamed
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
            for f in &failures {
                eprintln!("  rank {}: {}", f.rank, f.message);
            }
            ERRORS
        }
    }
}

/// Reads every rank's NCCL log in `dir` and checks the transports against `expected`.
fn check_transport(dir: &std::path::Path, expected: dic_runtime::nccl_log::Expected) -> u8 {
    use dic_runtime::nccl_log::{transports, verify};
    let mut seen = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(text) = dic::disk::read_text(&e.path()) {
            seen.extend(transports(&text));
        }
    }
    match verify(expected, &seen) {
        Ok(()) => {
            eprintln!(
                "dic run: NCCL used {} as the plan assumes ({})",
                seen.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
                expected.as_str()
            );
            OK
        }
        Err(why) => {
            eprintln!("error: {why}");
            ERRORS
        }
    }
}

fn finish(a: &RunArgs, plan: &Plan, summary: &RunSummary) -> u8 {
    if dic::Format::json(a.format, a.json) {
        match serde_json::to_string_pretty(summary) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ERRORS;
            }
        }
    } else {
        print!("{}", render_table(summary));
        // The predictions are re-made at the sizes that ran; the fabric is the planned
        // one: say when what was measured is not that, so the columns are not read as a
        // verdict, and how to compare like with like.
        if a.backend == Backend::Cpu {
            println!("note: the CPU backend moves the data over TCP between processes{}; its times measure dic's runtime and this machine, not the GPU fabric the predictions describe: run --backend nccl on the deployment's nodes to compare{}", if a.local { " on this machine" } else { "" }, if a.calibrate.is_none() { ", or add --calibrate - for dic's model with this fabric's measured latency and bandwidth (model@run)" } else { "" });
        }
    }
    if let Some(path) = a.calibrate.as_deref().filter(|p| *p != "-") {
        let text = calibration_dist(plan, &summary.calibration);
        if let Err(e) = dic::disk::write_atomic(std::path::Path::new(path), &text) {
            eprintln!("error: cannot write `{path}`: {e}");
            return USAGE;
        }
        eprintln!("wrote {path} ({} link classes)", summary.calibration.len());
    }
    OK
}
