//! `dic run` under attack on its limits: a plan cannot read secrets as addresses, a stopped rank ends a `--local` job within its
//! timeout, plans larger than the machine or the schema are refused before forking, a
//! call too large for memory fails with a message, and control characters in plan
//! strings are escaped on output.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;
mod run_support;

use common::dic;
use run_support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The child processes of `pid` (by their parent in /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …: comm may hold spaces, so split after its ')'
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Threads of process `pid`.
fn threads_of(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Threads:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// A rank stopped (SIGSTOP) mid-replay under `--local`: its neighbours notice after the
/// 3 s timeout, and the launcher ends the job then, not after another timeout + 5 s.
#[test]
fn a_stopped_rank_under_local_ends_the_job_within_its_timeout() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let launcher = Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(["run", plan.to_str().unwrap(), "--local", "--timeout", "3"])
        .args(["--scale", "0.001", "--iterations", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every rank is in the replay once it runs its heartbeat and sender threads.
    let start = Instant::now();
    let ranks = loop {
        let kids = children_of(launcher.id());
        if kids.len() == 8 && kids.iter().all(|&k| threads_of(k) >= 3) {
            break kids;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the job did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let rank1 = ranks
        .iter()
        .copied()
        .find(|&k| {
            std::fs::read(format!("/proc/{k}/cmdline"))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w[0] == b"--rank" && w[1] == b"1")
        })
        .unwrap();
    let stopped = Instant::now();
    // SAFETY: sends SIGSTOP to a grandchild this test started (through the launcher).
    #[allow(unsafe_code)] // FFI: kill(2) with SIGSTOP
    unsafe {
        libc::kill(rank1 as i32, libc::SIGSTOP)
    };
    let (results, _) = wait_all(vec![launcher], Duration::from_secs(30));
    let took = stopped.elapsed();
    eprintln!("a stopped rank ended the --local job {took:?} after SIGSTOP (timeout 3 s)");
    let (ok, err) = &results[0];
    assert!(!ok);
    assert!(err.contains("rank at fault: 1"), "{err}");
    // 3 s of silence, up to one heartbeat (0.75 s) before it, and the reports
    assert!(
        took < Duration::from_secs(6),
        "took {took:?} with a 3 s timeout: {err}"
    );
}

/// A plan of `world` ranks, each its own TP group of one, with empty schedules.
fn plan_of_world(world: usize, dir: &Path) -> PathBuf {
    let mut t = String::from(
        "format = \"dic-nccl-plan/1\"\ndeployment = \"wide\"\nmodel = \"m\"\nlayout = \"l\"\n",
    );
    t.push_str(&format!("world_size = {world}\n\n[rendezvous]\naddress_env = \"DIC_HEAD_ADDR\"\nport = 29600\ntimeout_seconds = 30\n"));
    for r in 0..world {
        t.push_str(&format!("\n[[ranks]]\nrank = {r}\nnode = {}\nlocal_gpu = {}\ndp_replica = {r}\npp_stage = 0\ntp_rank = 0\n", r / 8, r % 8));
    }
    for r in 0..world {
        t.push_str(&format!(
            "\n[[groups]]\nname = \"tp.{r}\"\nkind = \"tp\"\nmembers = [{r}]\n"
        ));
    }
    t.push_str("\n[decode_step]\ntokens = 1\npredicted_us = 0.0\nstages = []\n\n[prefill_chunk]\ntokens = 1\npredicted_us = 0.0\nstages = []\n");
    std::fs::create_dir_all(dir).unwrap();
    let f = dir.join(format!("world-{world}.toml"));
    std::fs::write(&f, t).unwrap();
    f
}

/// `dic` with its address space or open files limited (set in the child before exec).
fn dic_limited(
    args: &[&str],
    resource: libc::__rlimit_resource_t,
    limit: u64,
) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(env!("CARGO_BIN_EXE_dic"));
    c.args(args).env("DIC_JOB_SECRET", TEST_SECRET);
    // SAFETY: setrlimit(2) between fork and exec touches only the child.
    #[allow(unsafe_code)] // FFI: setrlimit in pre_exec
    unsafe {
        c.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &l) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    c.output().unwrap()
}

/// `--local` checks the machine before it forks: 4096 ranks (the most a plan may hold) do
/// not fit in 64 open files (or this machine's CPUs), and the message says what would;
/// a plan past the schema's bound is refused as a plan.
#[test]
fn local_refuses_plans_larger_than_the_machine_and_the_schema_bounds_ranks() {
    let _serial = serial();
    let dir = scratch("wide");
    let plan = plan_of_world(4096, &dir);
    let start = Instant::now();
    let o = dic_limited(
        &["run", plan.to_str().unwrap(), "--local"],
        libc::RLIMIT_NOFILE,
        64,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--local would start 4096 rank processes"),
        "{err}"
    );
    assert!(err.contains("open files"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    let plan = plan_of_world(5000, &dir);
    let o = dic(&["run", plan.to_str().unwrap(), "--local"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("world_size 5000 is outside 1..=4096"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A call whose buffers do not fit in memory (here: 4 GiB under a 3 GiB address space)
/// is refused with a message before any rank connects, not killed by SIGABRT mid-run.
#[test]
fn a_call_too_large_for_memory_fails_with_a_message() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let text = std::fs::read_to_string(&plan).unwrap();
    let bytes_line = text.lines().find(|l| l.starts_with("bytes = ")).unwrap();
    let big = plan.with_file_name("big-call.toml");
    std::fs::write(&big, text.replacen(bytes_line, "bytes = 4294967296", 1)).unwrap();
    let big = big.to_str().unwrap();
    for args in [
        vec![
            "run",
            big,
            "--local",
            "--iterations",
            "1",
            "--max-calls",
            "1",
            "--timeout",
            "20",
        ],
        vec![
            "run",
            big,
            "--rank",
            "0",
            "--rendezvous",
            "127.0.0.1:0",
            "--timeout",
            "5",
        ],
    ] {
        let o = dic_limited(&args, libc::RLIMIT_AS, 3 << 30);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("SIGABRT") && !err.contains("signal"), "{err}");
        assert!(err.contains("memory"), "{args:?}: {err}");
        assert!(err.contains("GiB"), "{args:?}: {err}");
    }
}

/// Control characters in a plan's strings (an escape sequence in the deployment's name, a
/// bell in a group's) reach neither the terminal nor the report raw; a link name, which
/// becomes a `.dist` identifier under `--calibrate`, must be one.
#[test]
fn control_characters_in_plan_strings_are_escaped_on_output() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let text = std::fs::read_to_string(&plan).unwrap();
    let dep = text
        .lines()
        .find(|l| l.starts_with("deployment = "))
        .unwrap();
    let evil = text
        .replacen(
            dep,
            "deployment = \"evil\\u001b[2J\\u001b]0;pwned\\u0007\\nfake line\"",
            1,
        )
        .replacen("name = \"tp.0\"", "name = \"tp.0\\u001b[31m\"", 1);
    let f = plan.with_file_name("control.toml");
    std::fs::write(&f, &evil).unwrap();
    let o = dic(&[
        "run",
        f.to_str().unwrap(),
        "--local",
        "--scale",
        "0.001",
        "--iterations",
        "1",
        "--max-calls",
        "1",
    ]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    for s in [&out, &err] {
        assert!(
            !s.contains('\u{1b}') && !s.contains('\u{7}'),
            "raw control characters: {s:?}"
        );
        assert!(!s.contains("\nfake line"), "{s}");
    }
    assert!(out.contains("evil\\u{1b}[2J"), "{out}");
    // an unknown group kind echoes the group's name in the diagnostic
    let bad_kind = evil.replacen("kind = \"tp\"", "kind = \"x\\u001b[5m\"", 1);
    std::fs::write(&f, &bad_kind).unwrap();
    let o = dic(&["run", f.to_str().unwrap(), "--local"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    // a raw escape byte in the file: a TOML error whose excerpt shows the line
    std::fs::write(
        &f,
        text.replacen("[rendezvous]", "[rendezvous]\u{1b}[2J", 1),
    )
    .unwrap();
    let o = dic(&["run", f.to_str().unwrap(), "--local"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    // a link name that is not an identifier
    let link = text.lines().find(|l| l.starts_with("link = ")).unwrap();
    std::fs::write(
        &f,
        text.replacen(link, "link = \"x {\\n}\\nlink evil = y\"", 1),
    )
    .unwrap();
    let o = dic(&["run", f.to_str().unwrap(), "--local"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("link"), "{err}");
}

/// `address_env` names the variable holding rank 0's address: a plan that names the
/// job's secret (or any variable that is not an address) is refused before anything reads
/// it, and an address variable whose value is not a host name is refused without echoing
/// or resolving it.
#[test]
fn a_plan_cannot_read_secrets_or_arbitrary_variables_as_addresses() {
    let _serial = serial();
    let plan = eight_rank_plan();
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("address_env = \"DIC_HEAD_ADDR\""));
    let secret = "s3cr3t-value-that-must-not-leak-0123456789";
    for name in [
        "DIC_JOB_SECRET",
        "HOME",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN_ADDR",
        "dic_head_addr",
    ] {
        let f = plan.with_file_name(format!("env-{name}.toml"));
        std::fs::write(
            &f,
            text.replace("\"DIC_HEAD_ADDR\"", &format!("\"{name}\"")),
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_dic"))
            .args(["run", f.to_str().unwrap(), "--rank", "1", "--timeout", "2"])
            .env("DIC_JOB_SECRET", secret)
            .env(name, secret)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(!err.contains(secret), "{name}: the value leaked: {err}");
        assert!(err.contains("address_env"), "{name}: {err}");
    }
    for value in [secret, "10.0.0.1; rm -rf /", "\u{1b}[2Jhost"] {
        let o = Command::new(env!("CARGO_BIN_EXE_dic"))
            .args([
                "run",
                plan.to_str().unwrap(),
                "--rank",
                "1",
                "--timeout",
                "2",
            ])
            .env("DIC_JOB_SECRET", secret)
            .env("DIC_HEAD_ADDR", value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{value:?}: {err}");
        assert!(
            !err.contains(value) && !err.contains('\u{1b}'),
            "the value leaked: {err}"
        );
        assert!(err.contains("DIC_HEAD_ADDR"), "{err}");
    }
}
