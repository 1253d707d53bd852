//! Fuzzing every input surface for a bounded time (each target stops at its case count or
//! after [`BUDGET`], whichever comes first, so CI's time stays fixed):
//! - `.dist` text: real examples mutated byte- and token-wise through the whole driver
//!   (parse, resolve, check, analysis, planner, lowering) and every target;
//! - `config.json`: real Hugging Face configs with values swapped for hostile ones;
//! - `plan.toml`: a real plan with lines dropped, numbers made extreme, bytes flipped;
//! - LSP frames: random bytes and mangled headers through the transport's frame reader;
//! - rendezvous frames: random bytes at rank 0's port and from a fake rank 0.
//!
//! Every case must end without a panic; the front end's must also end in bounded time.
//! Seeds are fixed (a deterministic xorshift), so a failure reproduces.

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

use dic_compiler::source::MemoryWorld;
use std::time::{Duration, Instant};

/// Wall-clock budget of one target.
const BUDGET: Duration = Duration::from_secs(6);

/// A small deterministic generator (xorshift64*), so runs reproduce without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Values that broke parsers and arithmetic somewhere: extremes, non-numbers, injections.
const HOSTILE: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1e308",
    "-1e308",
    "1e-320",
    "18446744073709551615",
    "9223372036854775808",
    "4294967296",
    "NaN",
    "inf",
    "\"\"",
    "\"$(touch x)\"",
    "\"--trust-remote-code\"",
    "\"on\"",
    "\"\\n\"",
    "[]",
    "{}",
    "null",
    "true",
    "[[[[[[[[[[1]]]]]]]]]]",
    "0.5",
    "1099511627776",
    "\"a\\u0000b\"",
    "65536",
    "1048577",
];

/// Applies one random edit to `text`: a byte flip, a deletion, a duplication, a line
/// swap, or a number replaced by a hostile value.
fn mutate(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    if b.is_empty() {
        return b;
    }
    match rng.below(6) {
        0 => {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        1 => {
            let i = rng.below(b.len());
            let n = rng.below(40).min(b.len() - i);
            b.drain(i..i + n);
        }
        2 => {
            let i = rng.below(b.len());
            let n = rng.below(200).min(b.len() - i);
            let piece = b[i..i + n].to_vec();
            let at = rng.below(b.len());
            b.splice(at..at, piece);
        }
        3 => {
            let mut lines: Vec<&str> = text.lines().collect();
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            lines.swap(i, j);
            b = lines.join("\n").into_bytes();
        }
        _ => {
            // replace the n-th run of digits
            let runs: Vec<(usize, usize)> = {
                let mut v = Vec::new();
                let mut i = 0;
                while i < b.len() {
                    if b[i].is_ascii_digit() {
                        let s = i;
                        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                            i += 1;
                        }
                        v.push((s, i));
                    } else {
                        i += 1;
                    }
                }
                v
            };
            if !runs.is_empty() {
                let (s, e) = *rng.pick(&runs);
                let v = rng.pick(HOSTILE).as_bytes().to_vec();
                b.splice(s..e, v);
            }
        }
    }
    b
}

fn examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["examples", "examples/common", "examples/mistakes"] {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "dist") {
                let name = p.to_string_lossy().replace('\\', "/");
                out.push((name, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn fuzz_dist_text_through_the_whole_pipeline() {
    let examples = examples();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let mut cases = 0;
    while cases < 4000 && start.elapsed() < BUDGET {
        let (name, text) = rng.pick(&examples).clone();
        let mut bytes = text.into_bytes();
        for _ in 0..1 + rng.below(4) {
            let t = String::from_utf8_lossy(&bytes).into_owned();
            bytes = mutate(&mut rng, &t);
        }
        // the fragments the examples import stay in the world, unmutated
        let mut world = MemoryWorld::new();
        for (n, t) in &examples {
            world = world.with(n, t);
        }
        let world = world.with_bytes(&name, &bytes);
        let one = Instant::now();
        let checked = dic_compiler::driver::compile_file(&world, &name).expect("in memory");
        if !checked.has_errors() {
            let _ = dic_targets::render(&checked.plan, &checked.forecast);
        }
        assert!(
            one.elapsed() < Duration::from_secs(5),
            "case {cases} ({name}) took {:?}:\n{}",
            one.elapsed(),
            String::from_utf8_lossy(&bytes)
        );
        cases += 1;
    }
    eprintln!("fuzz .dist: {cases} cases in {:?}", start.elapsed());
    assert!(cases >= 20, "only {cases} cases ran");
}

#[test]
fn fuzz_config_json_through_import_hf() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/hf");
    let mut configs: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with("_config.json"))
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .collect()
        })
        .unwrap_or_default();
    // a config of our own, so the target runs without ../shared too
    configs.push(r#"{"architectures":["LlamaForCausalLM"],"num_hidden_layers":32,"hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256,"max_position_embeddings":131072,"torch_dtype":"bfloat16","quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]},"text_config":{"hidden_size":8}}"#.into());
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let start = Instant::now();
    let mut cases = 0;
    while cases < 20000 && start.elapsed() < BUDGET {
        let base = rng.pick(&configs).clone();
        let mut v: serde_json::Value = match serde_json::from_str(&base) {
            Ok(v) => v,
            Err(_) => continue,
        };
        // swap 1–4 values (at the top or one level down) for hostile ones
        for _ in 0..1 + rng.below(4) {
            let Some(obj) = v.as_object_mut() else { break };
            let keys: Vec<String> = obj.keys().cloned().collect();
            let k = rng.pick(&keys).clone();
            let hostile: serde_json::Value =
                serde_json::from_str(rng.pick::<&str>(HOSTILE)).unwrap_or(serde_json::Value::Null);
            match obj.get_mut(&k) {
                Some(serde_json::Value::Object(inner)) if !inner.is_empty() => {
                    let ik: Vec<String> = inner.keys().cloned().collect();
                    let ik = rng.pick(&ik).clone();
                    inner.insert(ik, hostile);
                }
                _ => {
                    obj.insert(k, hostile);
                }
            }
        }
        let text = if rng.below(10) == 0 {
            String::from_utf8_lossy(&mutate(&mut rng, &v.to_string())).into_owned()
        } else {
            v.to_string()
        };
        let quant = (rng.below(3) == 0)
            .then_some(r#"{"quantization":{"quant_algo":"FP8","kv_cache_quant_algo":"FP8"}}"#);
        let imported = dic_compiler::import_hf::import(&dic_compiler::import_hf::ImportRequest {
            config: &text,
            quant_config: quant,
            name: "m",
            repo: Some("org/model"),
            source_name: "config.json",
        });
        if let Ok(dist) = imported {
            // what it writes is .dist the compiler reads without panicking
            let world = MemoryWorld::new().with("m.dist", &dist);
            let _ = dic_compiler::driver::check_file(&world, "m.dist");
        }
        cases += 1;
    }
    eprintln!("fuzz config.json: {cases} cases in {:?}", start.elapsed());
    assert!(cases >= 100, "only {cases} cases ran");
}

#[test]
fn fuzz_plan_toml_through_the_runtime_validator() {
    let out = std::env::temp_dir().join(format!("dic-fuzz-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dic"))
        .args([
            "compile",
            "examples/llama405b_ib.dist",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let plan = std::fs::read_to_string(out.join("big/nccl/plan.toml")).unwrap();
    assert!(dic_runtime::plan::parse(&plan).is_ok());
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let start = Instant::now();
    let mut cases = 0;
    let mut rejected = 0;
    while cases < 10000 && start.elapsed() < BUDGET {
        let mut text = plan.clone();
        for _ in 0..1 + rng.below(3) {
            text = String::from_utf8_lossy(&mutate(&mut rng, &text)).into_owned();
        }
        if dic_runtime::plan::parse(&text).is_err() {
            rejected += 1;
        }
        cases += 1;
    }
    eprintln!(
        "fuzz plan.toml: {cases} cases ({rejected} rejected) in {:?}",
        start.elapsed()
    );
    assert!(
        cases >= 100 && rejected > 0,
        "{cases} cases, {rejected} rejected"
    );
}

#[test]
fn fuzz_lsp_frames_through_the_transport() {
    use dic_lsp::transport::{Frame, FrameReader};
    let valid = br#"{"jsonrpc":"2.0","id":1,"method":"textDocument/hover","params":{}}"#;
    let mut rng = Rng(0x0bad_5eed_1234_5678);
    let start = Instant::now();
    let mut cases = 0;
    while cases < 50000 && start.elapsed() < BUDGET {
        let mut stream = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let body: Vec<u8> = match rng.below(4) {
                0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
                1 => mutate(&mut rng, std::str::from_utf8(valid).unwrap()),
                2 => valid.to_vec(),
                _ => rng.pick(HOSTILE).as_bytes().to_vec(),
            };
            let header = match rng.below(6) {
                0 => format!("Content-Length: {}\r\n", rng.next()),
                1 => "Content-Length: -3\r\n".to_string(),
                2 => format!("content-length:{}\r\nContent-Type: x\r\n", body.len()),
                3 => String::from_utf8_lossy(&mutate(
                    &mut rng,
                    &format!("Content-Length: {}\r\n", body.len()),
                ))
                .into_owned(),
                _ => format!("Content-Length: {}\r\n", body.len()),
            };
            stream.extend(header.as_bytes());
            stream.extend(b"\r\n");
            stream.extend(&body);
        }
        let mut input = FrameReader::new(std::io::BufReader::new(stream.as_slice()));
        let mut frames = 0;
        loop {
            match input.read_frame() {
                Frame::Eof => break,
                _ => frames += 1,
            }
            assert!(frames <= stream.len() + 1, "the reader does not advance");
        }
        cases += 1;
    }
    eprintln!("fuzz LSP frames: {cases} cases in {:?}", start.elapsed());
    assert!(cases >= 100, "only {cases} cases ran");
}

#[test]
fn fuzz_rendezvous_frames_from_strangers_and_a_fake_rank_0() {
    use dic_runtime::auth::JobKey;
    use dic_runtime::rendezvous;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let key = JobKey::from_secret("fuzz rendezvous secret 0123").unwrap();
    let mut rng = Rng(0x5eed_0f5e_c2e7);
    // Rank 0 of a 2-rank world with a 3 s deadline, fed random connections: it must end
    // by its deadline, naming rank 1 as missing, never with a panic or a registration.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let k = key.clone();
    let served = std::thread::spawn(move || {
        rendezvous::serve(server, 2, 42, 1, &[], &k, Duration::from_secs(3))
    });
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_millis(2500) && sent < 60 {
        if let Ok(mut s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_millis(50))).ok();
            let n = rng.below(120);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let _ = s.write_all(&junk);
            if rng.below(3) == 0 {
                let mut b = [0u8; 64];
                let _ = s.read(&mut b);
            }
        }
        sent += 1;
    }
    eprintln!("fuzz rendezvous: {sent} stranger connections");
    let result = served.join().expect("rank 0 did not panic");
    let err = result.expect_err("nobody authenticated");
    assert!(err.message.contains("never joined"), "{}", err.message);
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );

    // A fake rank 0 answering joins with random bytes: every join ends with an error
    // within its timeout.
    for case in 0..40 {
        let fake = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = fake.local_addr().unwrap();
        let mut bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
        if case % 2 == 0 {
            // start like a real rank 0, then go random
            let mut opening = 0x3249_4352u32.to_le_bytes().to_vec();
            opening.extend((0..16).map(|_| rng.next() as u8));
            opening.append(&mut bytes);
            bytes = opening;
        }
        let feeder = std::thread::spawn(move || {
            if let Ok((mut s, _)) = fake.accept() {
                let _ = s.write_all(&bytes);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t = Instant::now();
        let joined = rendezvous::join(addr, 1, 8, 42, 1, &key, Duration::from_secs(1));
        assert!(joined.is_err(), "case {case}: a fake rank 0 was believed");
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "case {case}: {:?}",
            t.elapsed()
        );
        feeder.join().unwrap();
    }
}
