//! `dic compile --out DIR` never loses a user's file: foreign files make it refuse, a
//! project folder used as DIR is left alone, a folder without `.dic-generated` is replaced
//! only when it is the whole set dic writes, files saved into the folder while compiles
//! run are kept, folders named like dic's own but not on its journal are left alone,
//! concurrent compiles into one DIR all succeed and leave one consistent result, a killed
//! compile's leftovers are recovered by the next one and reported by `--check`, and
//! scripts follow the umask.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use common::dic;
use std::path::{Path, PathBuf};
use std::process::Command;

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/prod.dist")
        .to_string_lossy()
        .into_owned()
}

fn compile(out: &Path, extra: &[&str]) -> std::process::Output {
    let example = example();
    let mut args = vec!["compile", example.as_str(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    dic(&args)
}

/// A small project whose deployment is named like one of its own folders.
fn project(dir: &Path) -> PathBuf {
    let src = dir.join("project");
    std::fs::create_dir_all(src.join("chat")).unwrap();
    std::fs::write(src.join("chat/notes.md"), "my notes\n").unwrap();
    std::fs::write(src.join("chat/model.dist"), "// imported\n").unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::create_dir_all(src.join("common")).unwrap();
    std::fs::copy(
        examples.join("common/chat.dist"),
        src.join("common/chat.dist"),
    )
    .unwrap();
    std::fs::copy(examples.join("prod.dist"), src.join("prod.dist")).unwrap();
    src
}

#[test]
fn foreign_files_are_never_replaced() {
    let dir = common::fresh_dir("foreign");
    let src = project(&dir);
    // `--out` at the project folder: `chat/` is the user's, not dic's
    let o = dic(&[
        "compile",
        src.join("prod.dist").to_str().unwrap(),
        "--out",
        src.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("did not generate") && err.contains("notes.md"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(src.join("chat/notes.md")).unwrap(),
        "my notes\n"
    );
    assert!(src.join("chat/model.dist").exists());
    assert!(!src.join("chat/vllm").exists(), "nothing written");

    // a folder dic wrote, plus one file of the user's: refused, every file kept
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    std::fs::write(out.join("chat/vllm/README.txt"), "keep me").unwrap();
    let before = std::fs::read(out.join("chat/vllm/commands.json")).unwrap();
    let o = compile(&out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("vllm/README.txt"));
    assert_eq!(
        std::fs::read_to_string(out.join("chat/vllm/README.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read(out.join("chat/vllm/commands.json")).unwrap(),
        before
    );

    // a link in the folder is not dic's either, and is never followed
    std::fs::remove_file(out.join("chat/vllm/README.txt")).unwrap();
    #[cfg(unix)]
    {
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "outside").unwrap();
        std::os::unix::fs::symlink(&outside, out.join("chat/link")).unwrap();
        assert_eq!(compile(&out, &[]).status.code(), Some(2));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside");
        std::fs::remove_file(out.join("chat/link")).unwrap();
    }
    // a deployment path that is a file
    let out2 = dir.join("out2");
    std::fs::create_dir_all(&out2).unwrap();
    std::fs::write(out2.join("chat"), "a file named like the deployment").unwrap();
    assert_eq!(compile(&out2, &[]).status.code(), Some(2));
    assert!(out2.join("chat").is_file());
    // once the user's files are gone, compiling works again
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
}

/// A folder written by a dic from before `.dic-generated`: replaced when it holds exactly
/// the files dic generates; anything else, or only some of those names (a user's own
/// `report.md`), makes it refuse.
#[test]
fn folders_from_before_the_manifest_are_replaced_only_when_all_files_are_dics() {
    let dir = common::fresh_dir("legacy");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    std::fs::remove_file(out.join("chat/.dic-generated")).unwrap();
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    assert!(out.join("chat/.dic-generated").exists());
    std::fs::remove_file(out.join("chat/.dic-generated")).unwrap();
    std::fs::write(out.join("chat/notes.md"), "mine").unwrap();
    let o = compile(&out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("notes.md"));
    assert_eq!(
        std::fs::read_to_string(out.join("chat/notes.md")).unwrap(),
        "mine"
    );

    // the user's own folder holding files with names dic writes, and nothing else
    let mine = dir.join("mine");
    std::fs::create_dir_all(mine.join("chat/vllm")).unwrap();
    std::fs::write(mine.join("chat/report.md"), "my report").unwrap();
    std::fs::write(mine.join("chat/vllm/node-0.sh"), "my script").unwrap();
    let o = compile(&mine, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no `.dic-generated`") && err.contains("k8s/deployment.yaml"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("chat/report.md")).unwrap(),
        "my report"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("chat/vllm/node-0.sh")).unwrap(),
        "my script"
    );
    assert!(!mine.join("chat/report.html").exists(), "nothing written");
    // an empty folder holds nothing to lose
    std::fs::remove_dir_all(mine.join("chat")).unwrap();
    std::fs::create_dir_all(mine.join("chat")).unwrap();
    assert_eq!(compile(&mine, &[]).status.code(), Some(0));
}

/// Folders named like dic's staging and parked folders that dic did not create (they are
/// not on the journal in `.dic-lock`) are left alone, and a journal edited to point
/// outside DIR is ignored.
#[test]
fn folders_named_like_dics_own_are_left_alone() {
    let dir = common::fresh_dir("lookalikes");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    let token = "0123456789abcdef0123456789abcdef";
    let lookalikes = [
        ".dic-staging-999999".to_string(),
        format!(".dic-staging-{token}"),
        ".dic-old-999999-chat".to_string(),
        format!(".dic-old-{token}-chat"),
        ".dic-old-1-other".to_string(),
    ];
    for name in &lookalikes {
        std::fs::create_dir_all(out.join(name)).unwrap();
        std::fs::write(out.join(name).join("mine.txt"), name).unwrap();
    }
    let victim = dir.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "keep").unwrap();
    std::fs::write(
        out.join(".dic-lock"),
        format!("staging\t../victim\nstaging\t.dic-staging-../../victim\nparked\t.dic-old-{token}-..\t..\n"),
    )
    .unwrap();
    for round in 0..2 {
        let o = compile(&out, &[]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let check = compile(&out, &["--check"]);
        assert_eq!(
            check.status.code(),
            Some(0),
            "round {round}: {}",
            String::from_utf8_lossy(&check.stdout)
        );
        // even with the deployment folder missing, a look-alike is not put in its place
        std::fs::remove_dir_all(out.join("chat")).unwrap();
    }
    for name in &lookalikes {
        assert_eq!(
            std::fs::read_to_string(out.join(name).join("mine.txt")).unwrap(),
            *name
        );
    }
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt")).unwrap(),
        "keep"
    );

    // the lock file is dic's only as a plain file: a link is not followed (nor written
    // through), a FIFO does not make the compile wait
    #[cfg(unix)]
    {
        let linked = dir.join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(victim.join("keep.txt"), linked.join(".dic-lock")).unwrap();
        let o = compile(&linked, &[]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("not a plain file"));
        assert_eq!(
            std::fs::read_to_string(victim.join("keep.txt")).unwrap(),
            "keep"
        );
        let fifo = dir.join("fifo");
        std::fs::create_dir_all(&fifo).unwrap();
        let made = Command::new("mkfifo")
            .arg(fifo.join(".dic-lock"))
            .status()
            .unwrap();
        assert!(made.success());
        let mut child = start_compile(&fifo);
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                panic!("a FIFO named .dic-lock kept the compile waiting");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(2));
    }
}

/// A tiny deterministic generator for the delays below (no dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Saves `DIR/chat/user-<round>-<i>.txt` every 2 ms while `child` runs (after `delay`);
/// returns the files saved (a save into a folder that is being swapped may fail, as an
/// editor's would: that file was never saved).
fn save_while_running(
    out: &Path,
    child: &mut std::process::Child,
    round: usize,
    delay: std::time::Duration,
    stop_after: std::time::Duration,
) -> Vec<PathBuf> {
    let started = std::time::Instant::now();
    std::thread::sleep(delay);
    let mut saved = Vec::new();
    for i in 0.. {
        if child.try_wait().unwrap().is_some() || started.elapsed() > stop_after {
            break;
        }
        let path = out.join(format!("chat/user-{round}-{i}.txt"));
        if std::fs::write(&path, format!("saved {round} {i}")).is_ok() {
            saved.push(path);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    saved
}

/// The saved files that are gone or changed; the rest are removed again.
fn lost_files(saved: &[PathBuf]) -> Vec<PathBuf> {
    let mut lost = Vec::new();
    for path in saved {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (round, i) = name
            .trim_start_matches("user-")
            .trim_end_matches(".txt")
            .split_once('-')
            .unwrap();
        match std::fs::read_to_string(path) {
            Ok(text) if text == format!("saved {round} {i}") => {
                std::fs::remove_file(path).unwrap();
            }
            _ => lost.push(path.clone()),
        }
    }
    lost
}

fn start_compile(out: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_dic"))
        .args(["compile", &example(), "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A load test (a few seconds): a user keeps saving files into `DIR/chat/` while compiles
/// run, 40 times. Each compile either refuses (a file was there before it looked) or
/// replaces the folder; no saved file is ever lost. Before the swap re-checked the folder
/// under the lock, 319 of 716 such files were deleted.
#[test]
fn files_saved_while_compiles_run_are_never_lost() {
    let dir = common::fresh_dir("writer");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    let mut rng = Lcg(0x5eed);
    let (mut saved_total, mut lost) = (0, Vec::new());
    for round in 0..40 {
        let mut child = start_compile(&out);
        let delay = std::time::Duration::from_millis(rng.below(40));
        let saved = save_while_running(
            &out,
            &mut child,
            round,
            delay,
            std::time::Duration::from_secs(5),
        );
        let status = child.wait().unwrap();
        assert!(
            matches!(status.code(), Some(0 | 2)),
            "round {round}: {status}"
        );
        saved_total += saved.len();
        lost.extend(lost_files(&saved));
    }
    assert!(
        lost.is_empty(),
        "{} of {saved_total} lost: {lost:?}",
        lost.len()
    );
    assert!(saved_total > 40, "only {saved_total} files saved");
    assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
}

#[test]
fn concurrent_compiles_into_one_folder_all_succeed() {
    let dir = common::fresh_dir("concurrent");
    let out = dir.join("out");
    for round in 0..4 {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let out = out.clone();
                std::thread::spawn(move || compile(&out, &[]))
            })
            .collect();
        for h in handles {
            let o = h.join().unwrap();
            assert_eq!(
                o.status.code(),
                Some(0),
                "round {round}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
        let leftovers: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".dic-") && n != ".dic-lock")
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// What a writer killed between its two renames leaves: its journal in `.dic-lock`
/// naming a staging folder and the deployment folder it parked.
fn leave_a_killed_writers_journal(out: &Path) -> (String, String) {
    let token = "00112233445566778899aabbccddeeff";
    let staging = format!(".dic-staging-{token}");
    let parked = format!(".dic-old-{token}-chat");
    std::fs::create_dir_all(out.join(&staging).join("chat")).unwrap();
    std::fs::write(
        out.join(".dic-lock"),
        format!("staging\t{staging}\nparked\t{parked}\tchat\n"),
    )
    .unwrap();
    (staging, parked)
}

#[test]
fn a_killed_compile_is_recovered_and_reported() {
    let dir = common::fresh_dir("killed");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    // killed between the two renames: the deployment folder parked, with a file the
    // user saved just before; it goes back, and the compile refuses over the user's file
    let (staging, parked) = leave_a_killed_writers_journal(&out);
    std::fs::rename(out.join("chat"), out.join(&parked)).unwrap();
    std::fs::write(out.join(&parked).join("mine.txt"), "mine").unwrap();
    let o = compile(&out, &["--check"]);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains(&format!("stale: {parked}")), "{report}");
    assert!(report.contains(&format!("stale: {staging}")), "{report}");
    assert_eq!(compile(&out, &[]).status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(out.join("chat/mine.txt")).unwrap(),
        "mine"
    );
    assert!(!out.join(&parked).exists());
    assert!(!out.join(&staging).exists());
    std::fs::remove_file(out.join("chat/mine.txt")).unwrap();
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));

    // killed while emptying the parked folder, after the new folder was in: the user's
    // file moves into the new folder, dic's old files go
    let (_, parked) = leave_a_killed_writers_journal(&out);
    copy_folder(&out.join("chat"), &out.join(&parked));
    std::fs::write(out.join(&parked).join("vllm/mine.txt"), "mine").unwrap();
    assert_eq!(compile(&out, &[]).status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(out.join("chat/vllm/mine.txt")).unwrap(),
        "mine"
    );
    assert!(!out.join(&parked).exists());
    std::fs::remove_file(out.join("chat/vllm/mine.txt")).unwrap();

    // a file saved there with the name of one dic just generated stays parked, and the
    // compile says where until the user moves it
    let (_, parked) = leave_a_killed_writers_journal(&out);
    std::fs::create_dir_all(out.join(&parked)).unwrap();
    std::fs::write(out.join(&parked).join("report.md"), "my report").unwrap();
    for _ in 0..2 {
        let o = compile(&out, &[]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("report.md") && err.contains(&parked), "{err}");
        assert_eq!(
            std::fs::read_to_string(out.join(&parked).join("report.md")).unwrap(),
            "my report"
        );
    }
    std::fs::rename(out.join(&parked).join("report.md"), dir.join("report.md")).unwrap();
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
    assert!(!out.join(&parked).exists());
}

fn copy_folder(from: &Path, to: &Path) {
    for path in common::files_under(from) {
        let rel = path.strip_prefix(from).unwrap();
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&path, to.join(rel)).unwrap();
    }
}

/// A load test (a few seconds): compiles SIGKILLed at 30 moments while a user saves files
/// into the folder and keeps files of their own beside it. After each kill the folder is
/// a whole set (every file its list names) or missing; the next compile recovers; no user
/// file is lost.
#[cfg(unix)]
#[test]
fn compiles_killed_mid_write_lose_nothing() {
    let dir = common::fresh_dir("sigkill");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    std::fs::write(out.join("notes.md"), "beside").unwrap();
    std::fs::create_dir_all(out.join(".dic-staging-mine")).unwrap();
    std::fs::write(out.join(".dic-staging-mine/keep.txt"), "keep").unwrap();
    let mut rng = Lcg(0x0dead);
    let (mut saved_total, mut lost, mut partial) = (0, Vec::new(), Vec::new());
    for round in 0..30 {
        let mut child = start_compile(&out);
        let delay = std::time::Duration::from_millis(rng.below(30));
        let kill_after = std::time::Duration::from_millis(rng.below(80));
        let saved = save_while_running(&out, &mut child, round, delay, delay + kill_after);
        let _ = child.kill();
        let _ = child.wait();
        // never half a set: the deployment folder has every file its list names
        let chat = out.join("chat");
        if chat.exists() {
            let list = std::fs::read_to_string(chat.join(".dic-generated")).unwrap_or_default();
            let whole = !list.is_empty()
                && list
                    .lines()
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .all(|l| chat.join(l).is_file());
            if !whole {
                partial.push(round);
            }
        }
        let recovered = compile(&out, &[]);
        assert!(
            matches!(recovered.status.code(), Some(0 | 2)),
            "round {round}: {}",
            String::from_utf8_lossy(&recovered.stderr)
        );
        saved_total += saved.len();
        lost.extend(lost_files(&saved));
        let o = compile(&out, &[]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
    }
    assert!(
        lost.is_empty(),
        "{} of {saved_total} lost: {lost:?}",
        lost.len()
    );
    assert!(
        partial.is_empty(),
        "half-written after the kills of rounds {partial:?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("notes.md")).unwrap(),
        "beside"
    );
    assert_eq!(
        std::fs::read_to_string(out.join(".dic-staging-mine/keep.txt")).unwrap(),
        "keep"
    );
}

#[cfg(unix)]
#[test]
fn scripts_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::fresh_dir("umask");
    let out = dir.join("out");
    let o = Command::new("bash")
        .arg("-c")
        .arg("umask 077 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_dic"))
        .args(["compile", &example(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mode = |p: &str| std::fs::metadata(out.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("chat/vllm/node-0.sh"), 0o700);
    assert_eq!(mode("chat/vllm/commands.json"), 0o600);
}
