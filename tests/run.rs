//! `dic run`, end to end through the binary: every example's plan replayed by real rank
//! processes on loopback (scaled down for a 2-core machine), and the faults — a killed
//! rank, a hung rank, a rank that never joins, a rank with a different plan, and plans
//! edited by hand, which are rejected before any socket opens.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;
mod run_support;

use common::dic;
use run_support::*;
use std::io::{BufRead, BufReader, Read};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The deployments of the examples (not the shared fragments or the mistake files).
fn compile_examples() -> PathBuf {
    let out = scratch("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dist"))
        .collect();
    files.sort();
    for f in files {
        let f = f.to_str().unwrap();
        let o = dic(&["compile", f, "--out", out.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    out
}

#[test]
fn every_example_plan_runs_locally_and_checks_exactly() {
    let _serial = serial();
    let dir = compile_examples();
    let all = plans(&dir);
    assert!(all.len() >= 9, "{all:?}");
    for plan in &all {
        let o = dic(&[
            "run",
            plan.to_str().unwrap(),
            "--local",
            "--scale",
            "0.0005",
            "--iterations",
            "1",
            "--max-calls",
            "2",
            "--json",
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{}: {stderr}", plan.display());
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let text = std::fs::read_to_string(plan).unwrap();
        let schedule_lines = text.matches("[[decode_step.stages.collectives]]").count()
            + text.matches("[[prefill_chunk.stages.collectives]]").count();
        let lines = v["lines"].as_array().unwrap();
        assert_eq!(
            lines.len(),
            schedule_lines,
            "{}: every schedule line measured",
            plan.display()
        );
        // The plan carries the link figures it predicted with: re-predicting a line at
        // the plan's own size gives the plan's figure, and at the run's (scaled) size no
        // more than that (like with like).
        let parsed = dic_runtime::plan::parse(&text).unwrap();
        for stage in parsed.decode.stages.iter().chain(&parsed.prefill.stages) {
            for step in &stage.steps {
                let size = parsed
                    .groups
                    .iter()
                    .find(|g| g.kind == step.group)
                    .map_or(1, |g| g.members.len());
                let again = step.predicted_at(step.bytes, size).unwrap();
                assert!(
                    (again - step.predicted_us).abs() <= 1e-6 * step.predicted_us.max(1.0),
                    "{}: {again} vs {}",
                    plan.display(),
                    step.predicted_us
                );
                assert!(step.predicted_at(step.bytes / 100, size).unwrap() <= again);
            }
        }
        for l in lines {
            assert!(
                l["predicted_run_us"].as_f64().unwrap()
                    <= l["predicted_us"].as_f64().unwrap() + 1e-9,
                "{l}"
            );
            assert!(l["measured_us"].as_f64().unwrap() > 0.0, "{l}");
            // Everything but the PP hand-off (checked on the receiver) is verified exactly.
            assert_eq!(l["verified"], true, "{}: {l}", plan.display());
            assert!(l["busbw_gbps"].as_f64().unwrap() >= 0.0);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn one_process_per_node_joins_into_one_run() {
    let _serial = serial();
    // What the Kubernetes preflight Job does: `dic run --node N` on each node.
    let (_, plan) = compile_one("examples/llama405b_ib.dist", "nodes");
    let node = |n: &str, port: u16| {
        Command::new(env!("CARGO_BIN_EXE_dic"))
            .args(["run", plan.to_str().unwrap(), "--node", n, "--rendezvous"])
            .arg(format!("127.0.0.1:{port}"))
            .args([
                "--scale",
                "0.0005",
                "--iterations",
                "1",
                "--max-calls",
                "2",
                "--timeout",
                "60",
            ])
            .env("DIC_JOB_SECRET", TEST_SECRET)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Node 0 picks the rendezvous port (0) and says which; node 1 follows it.
    let mut n0 = node("0", 0);
    let mut err0 = BufReader::new(n0.stderr.take().unwrap());
    let mut said = String::new();
    let port: u16 = loop {
        let mut line = String::new();
        assert!(
            err0.read_line(&mut line).unwrap() > 0,
            "node 0 ended: {said}"
        );
        said.push_str(&line);
        if let Some(p) = line
            .trim()
            .strip_prefix("dic run: rank 0 serves the rendezvous on port ")
        {
            break p.parse().unwrap();
        }
    };
    let rest0 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err0.read_to_string(&mut s);
        s
    });
    let n1 = node("1", port);
    let (o0, o1) = (
        n0.wait_with_output().unwrap(),
        n1.wait_with_output().unwrap(),
    );
    assert!(o0.status.success(), "{said}{}", rest0.join().unwrap());
    assert!(
        o1.status.success(),
        "{}",
        String::from_utf8_lossy(&o1.stderr)
    );
    let table = String::from_utf8_lossy(&o0.stdout);
    assert!(
        table.contains("16 ranks") && table.contains("send_recv"),
        "{table}"
    );
    assert!(o1.stdout.is_empty(), "only rank 0's node reports");
}

#[test]
fn calibration_writes_links_that_dic_predicts_with() {
    let _serial = serial();
    let (out, plan) = compile_one("examples/llama405b_ib.dist", "calibrate");
    let cal = out.join("measured.dist");
    let o = dic(&[
        "run",
        plan.to_str().unwrap(),
        "--local",
        // Sizes up to 64 MiB × 0.1: large enough that the bandwidth term, not the noise
        // of 16 processes on a 2-core machine, decides whether time grows with size.
        "--scale",
        "0.1",
        "--iterations",
        "1",
        "--max-calls",
        "1",
        "--calibrate",
        cal.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&cal).unwrap();
    assert!(
        text.contains("link measured_nvswitch_h100 = nvswitch_h100 {"),
        "{text}"
    );
    assert!(
        dic(&["check", cal.to_str().unwrap()]).status.success(),
        "{text}"
    );
    // A deployment on nodes whose NVSwitch is the measured one: the TP AllReduce's
    // predicted time follows the (much slower) loopback figures.
    let example = std::fs::read_to_string("examples/llama405b_ib.dist").unwrap();
    let using = example
        .replace("import std.", "import \"./measured.dist\"\nimport std.")
        .replace("nodes = 2 × dgx_h100", "nodes = 2 × measured_node")
        // loopback is far below the SLO; this test is about the prediction, not the SLO
        .replace("  slo = batch\n", "")
        + "\nnode measured_node = dgx_h100 { scale_up = measured_nvswitch_h100 }\n";
    let file = out.join("using.dist");
    std::fs::write(&file, using).unwrap();
    let o = dic(&[
        "compile",
        file.to_str().unwrap(),
        "--out",
        out.join("using").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = std::fs::read_to_string(&plan).unwrap();
    let after = std::fs::read_to_string(out.join("using/big/nccl/plan.toml")).unwrap();
    let tp_time = |t: &str| -> f64 {
        let i = t.find("group_kind = \"tp\"").unwrap();
        let j = t[i..].find("predicted_us = ").unwrap() + i + 15;
        t[j..].lines().next().unwrap().parse().unwrap()
    };
    assert!(
        tp_time(&after) > 10.0 * tp_time(&before),
        "{} vs {}",
        tp_time(&after),
        tp_time(&before)
    );
}

fn start_rank(plan: &Path, rank: usize, port: u16, timeout: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dic"))
        .args([
            "run",
            plan.to_str().unwrap(),
            "--rank",
            &rank.to_string(),
            "--rendezvous",
            &format!("127.0.0.1:{port}"),
            "--timeout",
            &timeout.to_string(),
            "--scale",
            "0.001",
            "--iterations",
            "100000",
            "--child",
        ])
        .env("DIC_JOB_SECRET", TEST_SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Start `ranks` (rank 0 first, on a port it picks and announces) with their plans.
/// Every child's stdout is drained on a thread (a full pipe would stall it); the
/// receivers tick when a child reports progress, i.e. it is inside the replay.
fn start_job(
    ranks: &[usize],
    timeout: u64,
    plan_for: &dyn Fn(usize) -> PathBuf,
) -> (Vec<Child>, Vec<std::sync::mpsc::Receiver<()>>) {
    assert_eq!(ranks.first(), Some(&0));
    let drain = |out: BufReader<std::process::ChildStdout>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if line.contains("progress") {
                    let _ = tx.send(());
                }
            }
        });
        rx
    };
    let mut rank0 = start_rank(&plan_for(0), 0, 0, timeout);
    let mut out0 = BufReader::new(rank0.stdout.take().unwrap());
    let port = read_port(&mut out0);
    let mut ticks = vec![drain(out0)];
    let mut children = vec![rank0];
    for &r in &ranks[1..] {
        let mut c = start_rank(&plan_for(r), r, port, timeout);
        ticks.push(drain(BufReader::new(c.stdout.take().unwrap())));
        children.push(c);
    }
    (children, ticks)
}

/// All 8 ranks of the 8-rank plan, started with `timeout` and inside the replay.
fn running_job(timeout: u64) -> Vec<Child> {
    let plan = eight_rank_plan();
    let all: Vec<usize> = (0..8).collect();
    let (children, ticks) = start_job(&all, timeout, &|_| plan.clone());
    for t in ticks {
        t.recv_timeout(Duration::from_secs(20))
            .expect("rank reports progress");
    }
    children
}

#[test]
fn a_killed_rank_is_named_by_every_other_rank() {
    let _serial = serial();
    let mut ranks = running_job(5);
    ranks[2].kill().unwrap();
    let (results, took) = wait_all(ranks, Duration::from_secs(30));
    assert!(took < Duration::from_secs(15), "took {took:?}");
    for (r, (ok, err)) in results.iter().enumerate() {
        if r == 2 {
            continue;
        }
        assert!(!ok, "rank {r} should fail");
        assert!(
            err.contains("rank 2"),
            "rank {r} does not name rank 2: {err}"
        );
        assert!(
            err.contains("all_reduce on tp.0"),
            "rank {r} does not name the collective: {err}"
        );
    }
}

#[test]
fn a_hung_rank_makes_everyone_exit_within_the_timeout() {
    let _serial = serial();
    let mut ranks = running_job(3);
    let hung = ranks.remove(1);
    // SAFETY: sends SIGSTOP to our own child process.
    #[allow(unsafe_code)] // FFI: kill(2) with SIGSTOP, which std's Child cannot send
    unsafe {
        libc::kill(hung.id() as i32, libc::SIGSTOP)
    };
    let (results, took) = wait_all(ranks, Duration::from_secs(30));
    let mut hung = hung;
    let _ = hung.kill();
    let _ = hung.wait();
    assert!(
        took < Duration::from_secs(12),
        "took {took:?} with a 3 s timeout"
    );
    for (ok, err) in &results {
        assert!(!ok);
        assert!(err.contains("rank 1"), "does not name rank 1: {err}");
    }
    assert!(
        results
            .iter()
            .any(|(_, e)| e.contains("sent nothing for 3 s")),
        "{results:?}"
    );
}

#[test]
fn a_rank_that_never_joins_is_named_at_rendezvous() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let (ranks, _ticks) = start_job(&[0, 1, 3, 4, 5, 6, 7], 6, &|_| plan.clone());
    let (results, took) = wait_all(ranks, Duration::from_secs(20));
    assert!(took < Duration::from_secs(14), "took {took:?}");
    for (ok, err) in &results {
        assert!(!ok);
        assert!(err.contains("rank 2 never joined within 6 s"), "{err}");
    }
}

#[test]
fn a_rank_with_a_different_plan_is_refused() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let other = plan.with_file_name("other.toml");
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(&other, text.replace("tokens = ", "tokens = 1")).unwrap();
    let all: Vec<usize> = (0..8).collect();
    let (ranks, _ticks) = start_job(&all, 5, &|r| {
        if r == 3 {
            other.clone()
        } else {
            plan.clone()
        }
    });
    let (results, _) = wait_all(ranks, Duration::from_secs(20));
    for (ok, err) in &results {
        assert!(!ok);
        assert!(err.contains("rank 3 runs a different plan file"), "{err}");
    }
}

fn edited(what: &str, from: &str, to: &str) -> (String, std::process::Output) {
    let plan = eight_rank_plan();
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains(from), "{what}: `{from}` not in the plan");
    let path = plan.with_file_name(format!("edited-{what}.toml"));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    // Rank 1 with no rank 0 anywhere: a plan that got past validation would wait for
    // the rendezvous for the full timeout; a rejected one exits at once.
    let start = Instant::now();
    let o = dic(&[
        "run",
        path.to_str().unwrap(),
        "--rank",
        "1",
        "--rendezvous",
        "127.0.0.1:9",
        "--timeout",
        "30",
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{what}: not rejected up front"
    );
    assert_eq!(o.status.code(), Some(2), "{what}");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    // Stable across runs: the file name is in a temp dir.
    (err.replace(path.to_str().unwrap(), "plan.toml"), o)
}

#[test]
fn plans_edited_by_hand_are_rejected_before_any_socket_opens() {
    let _serial = serial();
    let cases = [
        (
            "version",
            "format = \"dic-nccl-plan/1\"",
            "format = \"dic-nccl-plan/9\"",
        ),
        ("rank-outside-world", "rank = 7\n", "rank = 9\n"),
        (
            "group-overlap",
            "members = [0, 1, 2, 3]",
            "members = [0, 1, 2, 4]",
        ),
        (
            "group-member-outside",
            "members = [4, 5, 6, 7]",
            "members = [4, 5, 6, 11]",
        ),
        ("group-kind", "kind = \"tp\"", "kind = \"xp\""),
        ("world-size", "world_size = 8", "world_size = 9"),
        (
            "schedule-kind",
            "group_kind = \"tp\"",
            "group_kind = \"ep\"",
        ),
        ("not-toml", "[rendezvous]", "[rendezvous"),
    ];
    let mut all = String::new();
    for (what, from, to) in cases {
        let (err, _) = edited(what, from, to);
        all.push_str(&format!("--- {what}\n{err}\n"));
    }
    insta::assert_snapshot!(all);
}

/// A rank of a job that finishes quickly (one scaled-down iteration).
fn finishing_rank(plan: &Path, rank: usize, port: u16, secret: &str) -> Child {
    finishing_rank_within(plan, rank, port, secret, 20)
}

/// [`finishing_rank`] with a timeout of `timeout` seconds.
fn finishing_rank_within(plan: &Path, rank: usize, port: u16, secret: &str, timeout: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(["run", plan.to_str().unwrap(), "--rank", &rank.to_string()])
        .args([
            "--rendezvous",
            &format!("127.0.0.1:{port}"),
            "--timeout",
            &timeout.to_string(),
        ])
        .args([
            "--scale",
            "0.001",
            "--iterations",
            "1",
            "--max-calls",
            "1",
            "--child",
        ])
        .env("DIC_JOB_SECRET", secret)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads rank 0's `--child` JSON lines up to the one announcing its rendezvous port.
fn read_port(out: &mut BufReader<std::process::ChildStdout>) -> u16 {
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "rank 0 ended before listening"
        );
        if let Some(rest) = line.split("\"port\":").nth(1) {
            return rest
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .unwrap();
        }
    }
}

/// Rank 0's announced rendezvous port (from its `--child` JSON lines); the rest of its
/// stdout is drained on a thread.
fn announced_port(rank0: &mut Child) -> u16 {
    let mut out = BufReader::new(rank0.stdout.take().unwrap());
    let port = read_port(&mut out);
    std::thread::spawn(move || for _ in out.lines() {});
    port
}

/// Strangers at rank 0's port — an old-style hello claiming rank 999, a silent client, a
/// real rank with the wrong secret — neither join nor end the rendezvous, learn nothing
/// (no digest, no roster), and the job's own ranks still complete it.
#[test]
fn strangers_can_neither_join_nor_stop_a_rendezvous() {
    use std::io::Write;
    let _serial = serial();
    let plan = eight_rank_plan();
    let mut rank0 = finishing_rank(&plan, 0, 0, TEST_SECRET);
    let port = announced_port(&mut rank0);
    let addr = format!("127.0.0.1:{port}");
    // 22 bytes in the old protocol's shape: magic, rank 999, a digest, a port
    let mut old_hello = std::net::TcpStream::connect(&addr).unwrap();
    let mut bytes = 0x4449_4352u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&999u64.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1234u16.to_le_bytes());
    old_hello.write_all(&bytes).unwrap();
    let silent = std::net::TcpStream::connect(&addr).unwrap();
    let wrong = finishing_rank(&plan, 1, port, "not the job's secret, but long enough");
    let wrong = wait_all(vec![wrong], Duration::from_secs(20)).0.remove(0);
    assert!(!wrong.0, "a rank with another secret must not join");
    assert!(wrong.1.contains("DIC_JOB_SECRET differs"), "{}", wrong.1);
    // what the old-style client got: rank 0's opening (magic + nonce) and nothing else
    old_hello
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let _ = old_hello.read_to_end(&mut got);
    assert!(got.len() <= 21, "a stranger was sent {} bytes", got.len());
    // the real ranks join and the job completes
    let mut children = vec![rank0];
    for r in 1..8 {
        children.push(finishing_rank(&plan, r, port, TEST_SECRET));
    }
    let (results, took) = wait_all(children, Duration::from_secs(60));
    for (r, (ok, err)) in results.iter().enumerate() {
        assert!(ok, "rank {r}: {err}");
    }
    assert!(took < Duration::from_secs(40), "took {took:?}");
    drop(silent);
}

/// A fake rank 0 that announces a world of 2^32 - 1 ranks: the joining rank refuses it
/// (its plan says 8) at once, without allocating for it.
#[test]
fn a_fake_rank_0_is_refused_by_the_joining_rank() {
    use std::io::Write;
    let _serial = serial();
    let plan = eight_rank_plan();
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = fake.local_addr().unwrap().port();
    let rank1 = finishing_rank(&plan, 1, port, TEST_SECRET);
    let (mut s, _) = fake.accept().unwrap();
    let mut opening = 0x3249_4352u32.to_le_bytes().to_vec();
    opening.extend_from_slice(&[7u8; 16]);
    s.write_all(&opening).unwrap();
    let mut hello = [0u8; 70];
    s.read_exact(&mut hello).unwrap();
    let mut reply = vec![0u8]; // OK
    reply.extend_from_slice(&u32::MAX.to_le_bytes());
    let _ = s.write_all(&reply);
    let (results, took) = wait_all(vec![rank1], Duration::from_secs(20));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!results[0].0);
    assert!(
        results[0].1.contains("announced a world of 4294967295"),
        "{}",
        results[0].1
    );
}

/// Numbers that overflowed a deadline or an allocation, and a rank without the job's
/// secret: usage errors before any socket opens.
#[test]
fn absurd_timeouts_sizes_and_missing_secrets_are_usage_errors() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let p = plan.to_str().unwrap();
    let o = dic(&["run", p, "--local", "--timeout", "18446744073709551615"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = dic(&["run", p, "--local", "--scale", "1e30"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("lower --scale"));
    let o = Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(["run", p, "--rank", "1", "--rendezvous", "127.0.0.1:9"])
        .env_remove("DIC_JOB_SECRET")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("DIC_JOB_SECRET"));
    let text = std::fs::read_to_string(&plan).unwrap();
    let dir = scratch("absurd");
    std::fs::create_dir_all(&dir).unwrap();
    let timeout_line = text
        .lines()
        .find(|l| l.starts_with("timeout_seconds"))
        .unwrap();
    let bytes_line = text.lines().find(|l| l.starts_with("bytes = ")).unwrap();
    for (name, edited) in [
        (
            "timeout",
            text.replace(timeout_line, "timeout_seconds = 18446744073709551615"),
        ),
        (
            "bytes",
            text.replacen(bytes_line, "bytes = 1099511627776", 1),
        ),
    ] {
        let f = dir.join(format!("{name}.toml"));
        std::fs::write(&f, edited).unwrap();
        let o = dic(&["run", f.to_str().unwrap(), "--local"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The preflight Job passes the secret in the variable `dic run` reads.
#[test]
fn the_preflight_job_and_the_runtime_agree_on_the_secret_variable() {
    assert_eq!(
        dic_targets::k8s::dic_runtime_secret_env(),
        dic_runtime::auth::SECRET_ENV
    );
}

/// `--expect-transport` reads NCCL's own log, so it needs the NCCL backend and ranks this
/// process starts (`--local`/`--node`); anything else is a usage error before any socket.
#[test]
fn expecting_a_transport_needs_the_nccl_backend_and_ranks_dic_starts() {
    let plan = eight_rank_plan();
    let plan = plan.to_str().unwrap();
    for args in [
        vec!["run", plan, "--local", "--expect-transport", "net-ib"],
        vec![
            "run",
            plan,
            "--rank",
            "0",
            "--backend",
            "nccl",
            "--expect-transport",
            "net-ib",
        ],
    ] {
        let o = common::dic(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--expect-transport") || err.contains("NCCL backend"),
            "{args:?}: {err}"
        );
    }
    let o = common::dic(&["run", plan, "--local", "--expect-transport", "infiniband"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("net-ib"));
}

/// Runs the 8-rank job (rank 0 first, then ranks 1–7 once `before_ranks` has done its
/// mischief at rank 0's port); returns whether every rank succeeded, their stderr and the
/// time from the start of ranks 1–7 to the end of the job.
fn job_with(
    plan: &Path,
    before_ranks: &mut dyn FnMut(&str),
) -> (bool, Vec<(bool, String)>, Duration) {
    let mut rank0 = finishing_rank(plan, 0, 0, TEST_SECRET);
    let port = announced_port(&mut rank0);
    before_ranks(&format!("127.0.0.1:{port}"));
    let start = Instant::now();
    let mut children = vec![rank0];
    for r in 1..8 {
        children.push(finishing_rank(plan, r, port, TEST_SECRET));
    }
    let (results, _) = wait_all(children, Duration::from_secs(90));
    let ok = results.iter().all(|(ok, _)| *ok);
    (ok, results, start.elapsed())
}

/// Ten clients that connect to rank 0's rendezvous port and say nothing: handled one by
/// one, each held rank 0 for its 2 s handshake wait (20 s in all, past the job's 20 s
/// timeout: "rank 1 never joined"). Handled concurrently, they cost the job nothing.
#[test]
fn ten_silent_connections_do_not_delay_a_join() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let (ok, results, baseline) = job_with(&plan, &mut |_| {});
    assert!(ok, "{results:?}");
    let mut silent = Vec::new();
    let (ok, results, took) = job_with(&plan, &mut |addr| {
        for _ in 0..10 {
            silent.push(std::net::TcpStream::connect(addr).unwrap());
        }
    });
    eprintln!("8-rank job: {baseline:?} alone, {took:?} with 10 silent connections first");
    assert!(ok, "{results:?}");
    // One handshake wait is 2 s; serial handling costs 10 of them.
    assert!(
        took < baseline + Duration::from_secs(3),
        "the silent connections delayed the job: {took:?} against {baseline:?}"
    );
    drop(silent);
}

/// The handshake a client of another job (or an attacker who knows the protocol but not
/// the secret) sends rank 0: a well-formed hello for rank 1 whose tag is under `key` and
/// over `challenge`. Returns what rank 0 answered after its opening.
fn forged_hello(
    addr: &str,
    key: &dic_runtime::auth::JobKey,
    digest: u64,
    stale_challenge: bool,
) -> Vec<u8> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut opening = [0u8; 20];
    s.read_exact(&mut opening).unwrap();
    let challenge = if stale_challenge {
        [9u8; 16]
    } else {
        opening[4..].try_into().unwrap()
    };
    let mut body = 1u64.to_le_bytes().to_vec();
    body.extend_from_slice(&digest.to_le_bytes());
    body.extend_from_slice(&4321u16.to_le_bytes());
    let mine = [5u8; 16];
    let mut hello = opening[..4].to_vec();
    hello.extend_from_slice(&body);
    hello.extend_from_slice(&mine);
    hello.extend_from_slice(&key.tag(&[b"hello", &challenge, &body, &mine]));
    s.write_all(&hello).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

/// Hostile clients at rank 0's port while the job forms — garbage, the right magic then a
/// megabyte (a length prefix the size of the address space), a hello tagged with another
/// job's key, a replayed hello (the right key over a stale nonce), a client that sends a
/// byte every 300 ms, one that connects and hangs up, and a flood of 300 connections
/// (more than rank 0 keeps in flight): each is refused (at most the opening and a "not
/// authenticated" byte), and the honest ranks still complete the job promptly.
#[test]
fn malicious_peers_are_refused_without_affecting_honest_ranks() {
    use std::io::Write;
    let _serial = serial();
    let plan = eight_rank_plan();
    let digest = dic_runtime::plan::digest(&std::fs::read(&plan).unwrap());
    let (ok, results, baseline) = job_with(&plan, &mut |_| {});
    assert!(ok, "{results:?}");
    let mut held = Vec::new();
    let mut answers = Vec::new();
    let (ok, results, took) = job_with(&plan, &mut |addr| {
        let mut garbage = std::net::TcpStream::connect(addr).unwrap();
        garbage.write_all(&[0xA5; 70]).unwrap();
        held.push(garbage);
        let mut huge = std::net::TcpStream::connect(addr).unwrap();
        let mut bytes = 0x3249_4352u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        bytes.resize(1 << 20, 0xFF);
        let _ = huge.write_all(&bytes);
        held.push(huge);
        let other =
            dic_runtime::auth::JobKey::from_secret("another job's secret, long enough").unwrap();
        answers.push(("wrong key", forged_hello(addr, &other, digest, false)));
        let ours = dic_runtime::auth::JobKey::from_secret(TEST_SECRET).unwrap();
        answers.push(("replayed nonce", forged_hello(addr, &ours, digest, true)));
        let slow = std::net::TcpStream::connect(addr).unwrap();
        let dribble = std::thread::spawn(move || {
            for b in 0x3249_4352u32.to_le_bytes().iter().cycle().take(20) {
                if (&slow).write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        drop(std::net::TcpStream::connect(addr).unwrap());
        for _ in 0..300 {
            held.push(std::net::TcpStream::connect(addr).unwrap());
        }
        drop(dribble);
    });
    eprintln!("8-rank job: {baseline:?} alone, {took:?} with hostile clients first");
    assert!(ok, "{results:?}");
    for (what, got) in &answers {
        // the opening was read by the client; what came after is one refusal byte
        assert_eq!(got, &[2u8], "{what}: rank 0 answered {got:?}");
    }
    assert!(
        took < baseline + Duration::from_secs(3),
        "hostile clients delayed the job: {took:?} against {baseline:?}"
    );
}

/// A rank with the wrong secret and a client that never finishes its handshake: rank 0
/// and every rank that came say why rank 2 is missing, not only that it never joined.
#[test]
fn a_rank_that_fails_its_handshake_is_named_with_the_cause() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let mut rank0 = finishing_rank_within(&plan, 0, 0, TEST_SECRET, 6);
    let port = announced_port(&mut rank0);
    let silent = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let mut children = vec![rank0];
    for r in 1..8 {
        let secret = if r == 2 {
            "a different secret, long enough"
        } else {
            TEST_SECRET
        };
        children.push(finishing_rank_within(&plan, r, port, secret, 6));
    }
    let (results, took) = wait_all(children, Duration::from_secs(40));
    drop(silent);
    assert!(took < Duration::from_secs(25), "took {took:?}");
    assert!(
        results[2].1.contains("DIC_JOB_SECRET differs"),
        "{}",
        results[2].1
    );
    for (r, (ok, err)) in results.iter().enumerate() {
        assert!(!ok, "rank {r} should fail");
        if r == 2 {
            continue;
        }
        assert!(err.contains("rank 2 never joined"), "rank {r}: {err}");
        assert!(
            err.contains("says it is rank 2 but does not verify: wrong job secret"),
            "rank {r}: {err}"
        );
        assert!(
            err.contains("timed out reading the handshake from 127.0.0.1:"),
            "rank {r}: {err}"
        );
    }
}
