//! Where `dic observe` reads a deployment's metrics: engines' `/metrics` over HTTP, a
//! Prometheus query endpoint, or saved exposition files. The IO half of
//! [`dic_compiler::observe`]: everything here returns samples; the comparison is the core's.
//!
//! HTTP is plain `http://` GET with timeouts and a size bound, written here rather than
//! taken from a client crate: the endpoints are in-cluster (a pod's port, a Prometheus
//! service, a `kubectl port-forward`), and the client crates bring URL and TLS stacks of
//! twenty-odd crates for what is one request line. `https://` is refused with a message
//! saying what to do instead.

use dic_compiler::observe::exposition::{self, Sample};
use dic_compiler::observe::names;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The most one response may hold (a vLLM engine's `/metrics` is ~100 KiB).
pub const MAX_BODY_BYTES: u64 = 64 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

/// A plain-HTTP GET: the body of a 200 response.
pub fn http_get(url: &str) -> Result<String, String> {
    let rest = match url.strip_prefix("http://") {
        Some(r) => r,
        None if url.starts_with("https://") => {
            return Err(format!(
                "`{url}`: dic reads plain http only; use the service's in-cluster http port, \
                 `kubectl port-forward`, or save the page to a file (`curl -s URL > m.prom`)"
            ))
        }
        None => return Err(format!("`{url}` is not an http:// URL")),
    };
    let (host_port, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host_port.is_empty()
        || host_port.contains('@')
        || !path.is_ascii()
        || path.contains(['\r', '\n', ' '])
    {
        return Err(format!("`{url}` is not a URL dic can request"));
    }
    let with_port = if host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host_port.to_string()
    } else {
        format!("{host_port}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("`{url}`: cannot resolve `{host_port}`: {e}"))?
        .next()
        .ok_or_else(|| format!("`{url}`: `{host_port}` has no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("`{url}`: {e}"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let host = host_port.split(':').next().unwrap_or(host_port);
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/plain\r\nUser-Agent: dic-observe\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("`{url}`: {e}"))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_BODY_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("`{url}`: {e}"))?;
    if raw.len() as u64 > MAX_BODY_BYTES {
        return Err(format!(
            "`{url}`: the response is over {} MiB",
            MAX_BODY_BYTES >> 20
        ));
    }
    let text = String::from_utf8(raw).map_err(|_| format!("`{url}`: the response is not UTF-8"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("`{url}`: not an HTTP response"))?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("`{url}`: {status}"));
    }
    if head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    }) {
        return Err(format!(
            "`{url}`: chunked responses are not read (HTTP/1.0 was asked)"
        ));
    }
    Ok(body.to_string())
}

/// Reads one source: an `http://` URL (scraped now) or a saved exposition file.
pub fn read_source(source: &str) -> Result<Vec<Sample>, String> {
    let text = if source.starts_with("http://") || source.starts_with("https://") {
        http_get(source)?
    } else {
        crate::disk::read_text(std::path::Path::new(source))
            .map_err(|e| format!("cannot read `{source}`: {e}"))?
    };
    exposition::parse(&text).map_err(|e| format!("`{source}`: {e}"))
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant-vector results of one PromQL query, as samples named `name`.
fn prometheus_query(base: &str, query: &str, name: &str) -> Result<Vec<Sample>, String> {
    let url = format!(
        "{}/api/v1/query?query={}",
        base.trim_end_matches('/'),
        encode(query)
    );
    let body = http_get(&url)?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("Prometheus at `{base}`: {e}"))?;
    if v["status"] != "success" {
        return Err(format!(
            "Prometheus at `{base}`: {}",
            v["error"].as_str().unwrap_or("query failed")
        ));
    }
    let mut out = Vec::new();
    for r in v["data"]["result"].as_array().into_iter().flatten() {
        let value = r["value"][1].as_str().and_then(|s| s.parse::<f64>().ok());
        let Some(value) = value else { continue };
        let labels = r["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k != "__name__")
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

/// A deployment's series over the last `window` from a Prometheus query endpoint, as the
/// samples of one window: counters and histogram parts as `increase(…[window])` summed
/// per engine (and bucket), gauges as they are now.
pub fn read_prometheus(base: &str, model: &str, window_s: u64) -> Result<Vec<Sample>, String> {
    let model = model.replace('\\', "\\\\").replace('"', "\\\"");
    let sel = format!("{{model_name=\"{model}\"}}");
    let w = format!("{window_s}s");
    let mut out = Vec::new();
    for c in names::COUNTERS {
        let q = format!("sum by (engine) (increase({c}_total{sel}[{w}]))");
        out.extend(prometheus_query(base, &q, &format!("{c}_total"))?);
    }
    for h in names::HISTOGRAMS {
        let q = format!("sum by (engine, le) (increase({h}_bucket{sel}[{w}]))");
        out.extend(prometheus_query(base, &q, &format!("{h}_bucket"))?);
        for part in ["sum", "count"] {
            let q = format!("sum by (engine) (increase({h}_{part}{sel}[{w}]))");
            out.extend(prometheus_query(base, &q, &format!("{h}_{part}"))?);
        }
    }
    for g in names::GAUGES {
        out.extend(prometheus_query(base, &format!("{g}{sel}"), g)?);
    }
    Ok(out)
}
