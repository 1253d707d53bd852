//! What the `dic run` suites share: one test at a time, fresh folders, an example's
//! plan compiled, the job secret hand-started ranks use, and waiting for their exits.

#![allow(dead_code)] // each suite uses its own part

use crate::common::dic;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The tests here time real processes against timeouts; run them one at a time so the
/// 72-process example run does not starve a fault test's heartbeats.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh folder for one test's output.
pub fn scratch(what: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("dic-run-{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn plans(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("nccl/plan.toml"))
        .filter(|p| p.exists())
        .collect();
    v.sort();
    v
}

/// Compile one example into a fresh folder; the folder and its only plan.
pub fn compile_one(example: &str, what: &str) -> (PathBuf, PathBuf) {
    let out = scratch(what);
    let o = dic(&["compile", example, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan = plans(&out).into_iter().next().unwrap();
    (out, plan)
}

/// An 8-rank plan (70B, TP 4 × DP 2 on H200) replayed many times, so a fault lands
/// mid-run; ranks 4–7 share no group with ranks 0–3.
pub fn eight_rank_plan() -> PathBuf {
    let (_, plan) = compile_one("examples/h200_70b_tp4.dist", "faults");
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("world_size = 8"), "{text}");
    plan
}

/// The job secret the hand-started ranks share (as a cluster's launcher would give them).
pub const TEST_SECRET: &str = "tests/run.rs job secret 0123456789";

/// Wait for every child to exit; return (exit success, stderr) per child and the time.
pub fn wait_all(children: Vec<Child>, limit: Duration) -> (Vec<(bool, String)>, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    for mut c in children {
        loop {
            if let Some(_st) = c.try_wait().unwrap() {
                break;
            }
            if start.elapsed() > limit {
                let _ = c.kill();
                panic!("a rank was still running after {limit:?}: the job hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = c.wait_with_output().unwrap();
        out.push((
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ));
    }
    (out, start.elapsed())
}
