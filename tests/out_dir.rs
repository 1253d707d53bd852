//! `dic compile --out DIR` never loses a user's file: foreign files make it refuse, a
//! project folder used as DIR is left alone, concurrent compiles into one DIR all succeed
//! and leave one consistent result, a killed compile's leftovers are recovered by the next
//! one and reported by `--check`, and scripts follow the umask.

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

/// A folder written by a dic from before `.dic-generated`: the files dic generates count as
/// its own (they are replaced), anything else still makes it refuse.
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

#[test]
fn a_killed_compile_is_recovered_and_reported() {
    let dir = common::fresh_dir("killed");
    let out = dir.join("out");
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    // what a writer killed between its two renames leaves: the old folder parked, the
    // deployment folder missing, a staging folder
    std::fs::rename(out.join("chat"), out.join(".dic-old-999999-chat")).unwrap();
    std::fs::create_dir_all(out.join(".dic-staging-999999/chat")).unwrap();
    let o = compile(&out, &["--check"]);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("stale: .dic-old-999999-chat"), "{report}");
    assert!(report.contains("stale: .dic-staging-999999"), "{report}");
    // the next compile puts the parked folder back first, then replaces it as usual
    assert_eq!(compile(&out, &[]).status.code(), Some(0));
    assert_eq!(compile(&out, &["--check"]).status.code(), Some(0));
    assert!(!out.join(".dic-old-999999-chat").exists());
    assert!(!out.join(".dic-staging-999999").exists());

    // and a real SIGKILL at a random moment never leaves a half-written folder behind
    #[cfg(unix)]
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dic"))
            .args(["compile", &example(), "--out", out.to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let o = compile(&out, &[]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            compile(&out, &["--check"]).status.code(),
            Some(0),
            "after a kill at {delay_ms} ms"
        );
    }
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
