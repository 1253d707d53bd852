//! The router of a disaggregated (prefill/decode) deployment, configured once for both
//! targets: `vllm-router` (the vLLM project's Rust router, pinned to
//! [`VLLM_ROUTER_VERSION`]) runs the two legs of every request over NIXL, with its
//! policies, health checks and Prometheus metrics; dic's `pd_front.py`
//! (`targets/templates/`, aiohttp) stands on both sides of it for what that build does not
//! do: the client's API key, strict framing, body and time bounds, client
//! `kv_transfer_params` removed, and every prefill answer checked for the KV transfer it
//! must announce (vllm-router reaches the prefill servers through the front's loopback
//! prefill guard, `http://127.0.0.1:<guard port>/prefill/<i>`).
//!
//! In: the decode pool's plan and each pool's upstream URLs, as the target writes them
//! (`"http://${DIC_ADDR_…}:8000"` in a script, `http://chat-prefill:8000` in a pod). Out:
//! the words of both command lines, and `router.sh` for bare metal. Only dic's own
//! constants and the caller's URLs reach the words: nothing here needs quoting.

use dic_compiler::ir::{DeploymentPlan, DisaggPlan};
use serde::Serialize;

/// The vllm-router release dic configures (its flags were read from this build's `--help`).
pub const VLLM_ROUTER_VERSION: &str = "0.1.17";
/// uvloop, pinned: the front's event loop when present (about 40% less CPU per request in
/// the load test); installed beside vllm-router, which brings aiohttp.
pub const UVLOOP: &str = "uvloop==0.23.0";

/// The pip requirements of the router's Python.
pub fn router_packages() -> [String; 2] {
    [
        format!("vllm-router=={VLLM_ROUTER_VERSION}"),
        UVLOOP.to_string(),
    ]
}
/// dic's hardening layer, the same text in `vllm/` and in the router's ConfigMap.
pub const FRONT: &str = include_str!("../templates/pd_front.py");
/// Its file name next to `router.sh` and in the ConfigMap.
pub const FRONT_FILE: &str = "pd_front.py";
/// The router's own ports besides the client's: vllm-router's and the prefill guard's on
/// the loopback (only the front, and only vllm-router, reach them), and vllm-router's
/// Prometheus metrics.
#[derive(Debug, Clone, Copy)]
pub struct RouterPorts {
    pub vllm_router: u64,
    pub guard: u64,
    pub metrics: u64,
}

/// The ports both targets deploy (29000 is vllm-router's default for metrics).
pub const PORTS: RouterPorts = RouterPorts {
    vllm_router: 18000,
    guard: 18001,
    metrics: 29000,
};
/// The variable holding the engines' API key: the front checks clients against it.
pub const API_KEY_ENV: &str = "VLLM_API_KEY";
/// The variable vllm-router sends to the engines as `Authorization: Bearer` (read from
/// the environment, so the key is never on a command line).
pub const ROUTER_KEY_ENV: &str = "OPENAI_API_KEY";
/// How long one request may take end to end (vllm-router) and between two reads of an
/// answer (the front): a whole non-streamed generation must fit.
pub const REQUEST_TIMEOUT_SECONDS: u64 = 600;
/// How long a client may take to send its headers or its body, and stay idle between
/// requests.
pub const CLIENT_TIMEOUT_SECONDS: u64 = 30;
/// A prompt's JSON bytes per token, bounded from above: a token is a few characters, and a
/// non-ASCII one escaped as `\uXXXX` (a surrogate pair twice) is at most 12 bytes each.
const JSON_BYTES_PER_TOKEN: u64 = 32;
/// The rest of a request: messages' structure, sampling options, tools.
const REQUEST_OVERHEAD_BYTES: u64 = 1 << 20;

/// The largest request body worth reading: a prompt of the whole context in JSON, plus
/// the request around it. Larger is not a prompt the engines could take.
pub fn max_body(d: &DeploymentPlan) -> u64 {
    d.engine
        .max_model_len
        .saturating_mul(JSON_BYTES_PER_TOKEN)
        .saturating_add(REQUEST_OVERHEAD_BYTES)
}

/// The prefill servers as vllm-router sees them: the front's guard, one path per server.
pub fn guarded_prefill(ports: RouterPorts, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("http://127.0.0.1:{}/prefill/{i}", ports.guard))
        .collect()
}

/// vllm-router's flags (after the program): P/D mode with NIXL, the prefill servers
/// through the guard, the decode servers directly; with two servers or more in a pool,
/// cache-aware prefill (prompts sharing a prefix meet their cache) and power-of-two decode
/// (vllm-router refuses power-of-two over one server), else round robin; no retries (a
/// failed prefill leg is not repeated on its own), bounded payload and time, health checks
/// every 10 s, metrics on `metrics_host`. The engines' key comes from [`ROUTER_KEY_ENV`].
pub fn vllm_router_flags(
    d: &DeploymentPlan,
    ports: RouterPorts,
    prefill_count: usize,
    decode: &[String],
    metrics_host: &str,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        ports.vllm_router.to_string(),
        "--vllm-pd-disaggregation".into(),
        "--kv-connector".into(),
        "nixl".into(),
    ];
    for p in guarded_prefill(ports, prefill_count) {
        a.push("--prefill".into());
        a.push(p);
    }
    for url in decode {
        a.push("--decode".into());
        a.push(url.clone());
    }
    let policy = |servers: usize, several: &str| {
        if servers >= 2 { several } else { "round_robin" }.to_string()
    };
    a.push("--disable-retries".into());
    for (flag, value) in [
        ("--prefill-policy", policy(prefill_count, "cache_aware")),
        ("--decode-policy", policy(decode.len(), "power_of_two")),
        (
            "--request-timeout-secs",
            REQUEST_TIMEOUT_SECONDS.to_string(),
        ),
        ("--max-payload-size", max_body(d).to_string()),
        ("--health-check-interval-secs", "10".to_string()),
        (
            "--worker-startup-timeout-secs",
            d.kubernetes.startup_seconds.max(600).to_string(),
        ),
        ("--prometheus-host", metrics_host.to_string()),
        ("--prometheus-port", ports.metrics.to_string()),
    ] {
        a.push(flag.into());
        a.push(value);
    }
    a
}

/// The front's flags (after `python3 SCRIPT`): where clients reach it (`host`, `port`),
/// vllm-router behind it, the guard and the real prefill servers, the key's variable when
/// the deployment has one, and its bounds.
pub fn front_flags(
    d: &DeploymentPlan,
    ports: RouterPorts,
    host: &str,
    port: u64,
    prefill: &[String],
) -> Vec<String> {
    let mut a = vec![
        "--host".to_string(),
        host.to_string(),
        "--port".into(),
        port.to_string(),
        "--router".into(),
        format!("http://127.0.0.1:{}", ports.vllm_router),
        "--guard-port".into(),
        ports.guard.to_string(),
    ];
    for url in prefill {
        a.push("--prefill".into());
        a.push(url.clone());
    }
    if d.kubernetes.api_key_secret.is_some() {
        a.push("--api-key-env".into());
        a.push(API_KEY_ENV.into());
    }
    for (flag, value) in [
        ("--max-body", max_body(d)),
        ("--read-timeout", REQUEST_TIMEOUT_SECONDS),
        ("--client-timeout", CLIENT_TIMEOUT_SECONDS),
    ] {
        a.push(flag.into());
        a.push(value.to_string());
    }
    a
}

/// The variable that holds the address of cluster node `node` (`dgx_h200-0` →
/// `DIC_ADDR_DGX_H200_0`): only letters, digits and `_`, so it is safe in a script.
pub fn node_addr_var(node: &str) -> String {
    let mut v = String::from("DIC_ADDR_");
    v.extend(node.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    v
}

/// The variable the operator sets to the address clients reach the router at.
pub const ROUTER_ADDR: &str = "DIC_ROUTER_ADDR";

/// The router script's template (`templates/router.sh.j2`): every value it receives is
/// already quoted for bash (`shell::quote`, the flags' own quoting) or is dic's own text
/// (variable names of letters, digits and `_`). No quotes inside `${VAR:?message}`: bash
/// would look for their partners.
const ROUTER_SCRIPT: &str = include_str!("../templates/router.sh.j2");

/// One address variable the script checks: `DIC_ADDR_…` and the cluster node it names.
#[derive(Serialize)]
struct NodeVar {
    var: String,
    node: String,
}

/// `router.sh`: checks every address variable and the tools, then runs vllm-router on the
/// loopback and the front on `$DIC_ROUTER_ADDR`, side by side; either exiting stops the
/// other, so a supervisor sees the failure.
pub fn router_script(d: &DeploymentPlan, x: &DisaggPlan) -> Result<String, String> {
    let mut node_vars: Vec<NodeVar> = Vec::new();
    for (node, _) in x.prefill_servers.iter().chain(&x.decode_servers) {
        let var = node_addr_var(node);
        if !node_vars.iter().any(|v| v.var == var) {
            node_vars.push(NodeVar {
                var,
                node: node.clone(),
            });
        }
    }
    let urls = |servers: &[(String, u64)]| -> Vec<String> {
        servers
            .iter()
            .map(|(node, port)| format!("\"http://${{{}}}:{port}\"", node_addr_var(node)))
            .collect()
    };
    let router = vllm_router_flags(
        d,
        PORTS,
        x.prefill_servers.len(),
        &urls(&x.decode_servers),
        "127.0.0.1",
    );
    let front = front_flags(
        d,
        PORTS,
        &format!("\"${{{ROUTER_ADDR}}}\""),
        x.router_port,
        &urls(&x.prefill_servers),
    );
    let ctx = minijinja::context! {
        deployment => crate::shell::quote(&x.deployment),
        router_version => VLLM_ROUTER_VERSION,
        router_port => PORTS.vllm_router,
        metrics_port => PORTS.metrics,
        guard_port => PORTS.guard,
        client_port => x.router_port,
        front_file => FRONT_FILE,
        packages => router_packages().join(" "),
        router_addr => ROUTER_ADDR,
        node_vars => node_vars,
        api_key => d.kubernetes.api_key_secret.is_some(),
        api_key_env => API_KEY_ENV,
        router_key_env => ROUTER_KEY_ENV,
        router_flags => wrap(&router),
        front_flags => wrap(&front),
    };
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.render_str(ROUTER_SCRIPT, ctx)
        .map_err(|e| format!("vllm/router.sh: {e}"))
}

/// Flags two to a line (a flag and its value), continued with `\`.
fn wrap(words: &[String]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for w in words {
        match lines.last_mut() {
            Some(l) if !w.starts_with("--") => {
                l.push(' ');
                l.push_str(w);
            }
            _ => lines.push(w.clone()),
        }
    }
    lines.join(" \\\n  ")
}
