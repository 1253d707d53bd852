//! What each kind of string field may contain.
//!
//! A `.dist` string ends up in a shell script, an argv, a YAML document or a Kubernetes
//! object name. Quoting at each output keeps a value literal, but it cannot make a value
//! *mean* the right thing: `served_model_name = "-h"` is a perfectly quoted option, an
//! environment variable named `A$(x)` is no name at all, and a namespace with a capital
//! letter is refused by the API server. So every string field has a [`TextRule`] in the
//! schema, and the checker refuses values that break it (E0312) before anything is
//! generated. The targets re-check the few rules whose breach would be unsafe (defence in
//! depth), through the same functions.
//!
//! The rules follow their upstream definitions: POSIX environment names (as bash accepts
//! them), Kubernetes DNS-1123 labels and qualified names (apimachinery's validation), the
//! OCI/Docker image reference grammar (distribution/reference), Linux capability names.

/// Longest string dic accepts in any field (bytes); a longer one is refused, not carried.
pub const MAX_TEXT: usize = 4096;

/// What a string field may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRule {
    /// Any printable text (no control characters), e.g. a region or a generation name.
    Free,
    /// A value passed as a program's argument (a model path, a served name): printable,
    /// not empty, no leading `-` (it would be read as an option).
    Argument,
    /// `NAME=value` with NAME a POSIX environment variable name.
    EnvAssignment,
    /// `key=value` with key a Kubernetes qualified name (`example.com/key`).
    Annotation,
    /// A Kubernetes DNS-1123 label: a namespace, a Secret's name.
    DnsLabel,
    /// A Kubernetes extended resource name: `rdma/ib`, `vpc.amazonaws.com/efa`.
    ResourceName,
    /// A container image reference: `registry/repo:tag` or `repo@sha256:…`.
    Image,
    /// A Linux capability: `IPC_LOCK`, `SYS_RESOURCE`.
    Capability,
    /// A Python class name, as config.json's `architectures` names a model's:
    /// `Qwen3MoeForCausalLM`.
    ClassName,
    /// A network interface, or NCCL's list syntax for them (`^docker,lo`, `=eth0`, `enp`).
    Interface,
    /// `key=value` with a qualified-name key and a label value: a node selector, a label.
    Label,
    /// A toleration in `kubectl taint` syntax: `key[=value][:Effect]`.
    Toleration,
    /// An absolute path on a node: `/mnt/models`.
    AbsolutePath,
    /// An `http://` or `https://` URL: a Prometheus server.
    Url,
}

impl TextRule {
    /// What the rule asks for, as a help line.
    pub fn describe(self) -> &'static str {
        match self {
            TextRule::Free => "printable text without control characters",
            TextRule::Argument => {
                "a repository, path or name that does not start with `-`"
            }
            TextRule::EnvAssignment => {
                "`NAME=value` where NAME is letters, digits and `_`, not starting with a digit"
            }
            TextRule::Annotation => {
                "`key=value` where key is a Kubernetes qualified name such as `example.com/key`"
            }
            TextRule::DnsLabel => {
                "at most 63 lower-case letters, digits and `-`, starting and ending with a letter or digit"
            }
            TextRule::ResourceName => {
                "a Kubernetes resource name such as `rdma/ib` or `vpc.amazonaws.com/efa`"
            }
            TextRule::Image => {
                "an image reference such as `vllm/vllm-openai:v0.33.0` or `repo@sha256:<64 hex digits>`"
            }
            TextRule::Capability => {
                "a Linux capability dic grants: `IPC_LOCK`, `SYS_RAWIO`, `SYS_NICE`, `SYS_RESOURCE` or `SYS_PTRACE`"
            }
            TextRule::ClassName => {
                "a class name: at most 128 letters, digits and `_`, not starting with a digit (`Qwen3MoeForCausalLM`)"
            }
            TextRule::Interface => {
                "an interface name or NCCL's list of prefixes (`enp`, `^docker,lo`, `=eth0`)"
            }
            TextRule::Label => {
                "`key=value` with a Kubernetes label key (`example.com/key`) and a label value (at most 63 of letters, digits and `._-`)"
            }
            TextRule::Toleration => {
                "`key[=value][:Effect]` as `kubectl taint` writes it, Effect one of NoSchedule, PreferNoSchedule, NoExecute"
            }
            TextRule::AbsolutePath => "an absolute path such as `/mnt/models`, without `..`",
            TextRule::Url => "an `http://` or `https://` URL without spaces",
        }
    }

    /// Checks `s`; the error says what is wrong with it.
    pub fn check(self, s: &str) -> Result<(), String> {
        if s.len() > MAX_TEXT {
            return Err(format!(
                "is {} bytes long; dic accepts at most {MAX_TEXT}",
                s.len()
            ));
        }
        if let Some(c) = s.chars().find(|c| c.is_control()) {
            return Err(format!("contains the control character {:?}", c));
        }
        match self {
            TextRule::Free => Ok(()),
            TextRule::Argument => argument(s),
            TextRule::EnvAssignment => {
                let (name, _) = s.split_once('=').ok_or("has no `=`")?;
                env_name(name)
            }
            TextRule::Annotation => {
                let (key, _) = s.split_once('=').ok_or("has no `=`")?;
                qualified_name(key)
            }
            TextRule::DnsLabel => dns_label(s),
            TextRule::ResourceName => resource_name(s),
            TextRule::Image => image(s),
            TextRule::Capability => capability(s),
            TextRule::ClassName => class_name(s),
            TextRule::Interface => interface(s),
            TextRule::Label => {
                let (key, value) = s.split_once('=').ok_or("has no `=`")?;
                qualified_name(key)?;
                if value.is_empty() {
                    Ok(())
                } else {
                    label_value(value).map_err(|e| format!("value `{value}` {e}"))
                }
            }
            TextRule::Toleration => toleration(s).map(|_| ()),
            TextRule::AbsolutePath => {
                if !s.starts_with('/') || s.split('/').any(|c| c == "..") {
                    Err("is not an absolute path without `..`".into())
                } else {
                    Ok(())
                }
            }
            TextRule::Url => {
                let rest = s
                    .strip_prefix("http://")
                    .or_else(|| s.strip_prefix("https://"))
                    .ok_or("does not start with `http://` or `https://`")?;
                if rest.is_empty()
                    || rest.contains(char::is_whitespace)
                    || rest.contains(['"', '\'', '`'])
                {
                    Err("has no host, or has spaces or quotes".into())
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// A toleration written as `kubectl taint` does: `key[=value][:Effect]` → (key, value,
/// effect). Without a value it tolerates the key whatever its value (`Exists`).
pub fn toleration(s: &str) -> Result<(&str, Option<&str>, Option<&str>), String> {
    let (kv, effect) = match s.rsplit_once(':') {
        Some((kv, e)) => (kv, Some(e)),
        None => (s, None),
    };
    if let Some(e) = effect {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e) {
            return Err(format!(
                "effect `{e}` is not NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (kv, None),
    };
    qualified_name(key)?;
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        label_value(v).map_err(|e| format!("value `{v}` {e}"))?;
    }
    Ok((key, value, effect))
}

/// A value that becomes one word of a command line.
pub fn argument(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.starts_with('-') {
        return Err("starts with `-`, so the program would read it as an option".into());
    }
    Ok(())
}

/// A POSIX environment variable name as bash accepts it: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn env_name(s: &str) -> Result<(), String> {
    let mut chars = s.chars();
    match chars.next() {
        None => return Err("has an empty name before `=`".into()),
        Some(c) if c.is_ascii_digit() => {
            return Err(format!("name `{s}` starts with a digit"));
        }
        _ => {}
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return Err(format!(
            "name `{s}` contains {c:?}; a variable name is letters, digits and `_`"
        ));
    }
    Ok(())
}

/// Kubernetes DNS-1123 label (namespaces, Secret names, Service names).
pub fn dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 63 {
        return Err(format!("is {} characters long (1 to 63)", s.len()));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("contains {c:?}"));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("starts or ends with `-`".into());
    }
    Ok(())
}

/// DNS-1123 subdomain: dot-separated labels, 253 characters at most.
fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err(format!("prefix is {} characters long (1 to 253)", s.len()));
    }
    s.split('.').try_for_each(dns_label)
}

/// A Kubernetes extended resource name: a qualified name with its domain prefix (the API
/// server refuses an unprefixed one: only built-in resources such as `cpu` have none).
pub fn resource_name(s: &str) -> Result<(), String> {
    if !s.contains('/') {
        return Err("has no `domain/` prefix; extended resources are fully qualified".into());
    }
    qualified_name(s)
}

/// Kubernetes qualified name: `[prefix/]name`, name ≤ 63 of `[A-Za-z0-9._-]` starting and
/// ending alphanumeric, prefix a DNS-1123 subdomain.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        dns_subdomain(p)?;
    }
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "name part is {} characters long (1 to 63)",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
    {
        return Err(format!("contains {c:?}"));
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(name.chars().next()) || !edge_ok(name.chars().last()) {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A container image reference (distribution/reference's grammar, simplified to the
/// characters it allows): lower-case repository path components, an optional
/// `host[:port]/` in front, then `:tag` and/or `@algorithm:hex`.
pub fn image(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    let (name_tag, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let (alg, hex) = d.split_once(':').ok_or("digest has no `algorithm:`")?;
        if alg.is_empty()
            || !alg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+._-".contains(c))
        {
            return Err(format!("digest algorithm `{alg}` is not valid"));
        }
        if hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err("digest is not at least 32 hexadecimal digits".into());
        }
    }
    // A tag follows the last `:` after the last `/` (a `:` before it is a registry port).
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(t) = tag {
        let ok_first = t
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if t.is_empty()
            || t.len() > 128
            || !ok_first
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(format!(
                "tag `{t}` is not valid (letters, digits, `_.-`, at most 128)"
            ));
        }
    }
    if name.is_empty() || name.len() > 255 {
        return Err("repository name is empty or longer than 255 characters".into());
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a registry host when it has a `.` or `:` or is `localhost`.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let (h, port) = host
            .split_once(':')
            .map_or((host, None), |(h, p)| (h, Some(p)));
        if h.is_empty()
            || !h
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
            || port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(format!(
                "registry `{host}` is not a host name with an optional port"
            ));
        }
    }
    for p in parts {
        let alnum =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !alnum(p.chars().next())
            || !alnum(p.chars().last())
            || !p
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        {
            return Err(format!(
                "repository component `{p}` is not lower-case letters, digits and `._-`"
            ));
        }
    }
    Ok(())
}

/// A Kubernetes label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending with a
/// letter or digit (empty is allowed by Kubernetes but matches no GPU product).
pub fn label_value(s: &str) -> Result<(), String> {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if s.is_empty()
        || s.len() > 63
        || !edge(s.chars().next())
        || !edge(s.chars().last())
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err("is not a Kubernetes label value".into());
    }
    Ok(())
}

/// The Linux capabilities a network profile may add to a pod, each for a known need:
/// `IPC_LOCK` (RDMA pins memory; vLLM's GPUDirect RDMA guide), `SYS_RAWIO` (llm-d's
/// wide expert parallelism), `SYS_NICE` and `SYS_RESOURCE` (NUMA binding, memlock
/// limits), `SYS_PTRACE` (CUDA IPC between processes where the runtime requires it).
pub const GRANTABLE_CAPABILITIES: &[&str] = &[
    "IPC_LOCK",
    "SYS_RAWIO",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_PTRACE",
];

/// A Linux capability as Kubernetes writes it (`IPC_LOCK`, optionally `CAP_IPC_LOCK`), one
/// of [`GRANTABLE_CAPABILITIES`]: `ALL` and `SYS_ADMIN` make the container root on the
/// node in all but name, and anything else has no use dic knows.
/// A Python class name: letters, digits and `_`, not starting with a digit, at most 128.
pub fn class_name(s: &str) -> Result<(), String> {
    let first = s.chars().next().ok_or("is empty")?;
    if s.len() > 128
        || first.is_ascii_digit()
        || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(
            "is not a class name (letters, digits and `_`, not starting with a digit)".into(),
        );
    }
    Ok(())
}

pub fn capability(s: &str) -> Result<(), String> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return Err("is not upper-case letters, digits and `_`".into());
    }
    let name = s.strip_prefix("CAP_").unwrap_or(s);
    match name {
        "ALL" => Err("grants every capability: the container would be root on the node; name the ones RDMA needs (`IPC_LOCK`)".into()),
        "SYS_ADMIN" => Err("is root on the node in all but name: dic does not grant it; RDMA needs `IPC_LOCK`".into()),
        _ if GRANTABLE_CAPABILITIES.contains(&name) => Ok(()),
        _ => Err(format!(
            "is not a capability dic grants (it grants {})",
            GRANTABLE_CAPABILITIES.join(", ")
        )),
    }
}

/// NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME: comma-separated interface names or prefixes,
/// optionally preceded by `^` (exclude) or `=` (exact).
pub fn interface(s: &str) -> Result<(), String> {
    let body = s.strip_prefix(['^', '=']).unwrap_or(s);
    if body.is_empty() {
        return Err("is empty".into());
    }
    for name in body.split(',') {
        if name.is_empty()
            || name.len() > 15
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.:@-".contains(c))
        {
            return Err(format!(
                "`{name}` is not an interface name (at most 15 of letters, digits, `_.:@-`)"
            ));
        }
    }
    Ok(())
}

/// The Kubernetes name of a deployment: a DNS-1035 label (lower case, digits and `-`,
/// starting with a letter), at most 50 characters so dic's suffixes (`-preflight`,
/// `-leader`) still fit in 63. Different deployment names can map to one Kubernetes name
/// (`Chat`/`chat`, `a_b`/`a__b`); the checker refuses that (E0208) since their objects
/// would overwrite each other.
pub fn kubernetes_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "d-");
    }
    let mut out: String = out.chars().take(50).collect();
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        "dic".into()
    } else {
        out
    }
}

/// True when an environment variable's name says it holds a credential (an inlined
/// secret): dic writes it into scripts and manifests in plain text.
pub fn names_a_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "API_KEY",
        "APIKEY",
        "CREDENTIAL",
        "PRIVATE_KEY",
    ]
    .iter()
    .any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_assignment() {
        let r = TextRule::EnvAssignment;
        assert!(r.check("NCCL_IB_HCA=mlx5").is_ok());
        assert!(
            r.check("_X=a b $(c)").is_ok(),
            "the value is quoted, not checked"
        );
        for bad in [
            "A$(touch /tmp/x)B=1",
            "A`x`=1",
            "A${IFS}=1",
            "A;B=1",
            "A\nB=1",
            "-A=1",
            "{A}=1",
            "1A=1",
            "=1",
            "A",
        ] {
            assert!(r.check(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn arguments() {
        assert!(argument("meta-llama/Llama-3.1-8B").is_ok());
        assert!(argument("/models/llama").is_ok());
        assert!(
            argument("/models/My Model").is_ok(),
            "quoting keeps spaces literal"
        );
        for bad in ["--trust-remote-code", "-h", "", "-"] {
            assert!(argument(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn kubernetes_names() {
        assert!(dns_label("prod-2").is_ok());
        for bad in ["Prod", "a_b", "-a", "a-", "", &"a".repeat(64), "a.b"] {
            assert!(dns_label(bad).is_err(), "{bad:?}");
        }
        assert!(label_value("NVIDIA-H100-80GB-HBM3").is_ok());
        assert!(label_value("NVIDIA H100").is_err());
        assert!(label_value("x$(y)").is_err());
        assert!(qualified_name("rdma/ib").is_ok());
        assert!(qualified_name("vpc.amazonaws.com/efa").is_ok());
        assert!(qualified_name("nvidia.com/gpu").is_ok());
        assert!(resource_name("rdma/ib").is_ok());
        assert!(resource_name("a_b").is_err() && resource_name("on").is_err());
        for bad in ["rdma/", "/x", "a b", "Bad_Domain.com/x", "x/y/z"] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn images() {
        for ok in [
            "vllm/vllm-openai:v0.33.0",
            "nvcr.io/nvidia/tritonserver:24.05-py3",
            "localhost:5000/dic:latest",
            "registry.example.com:443/team/dic",
            "busybox",
            "vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "vllm/vllm-openai:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(image(ok).is_ok(), "{ok}: {:?}", image(ok));
        }
        for bad in [
            "",
            "Vllm/x",
            "x:",
            "x:-bad",
            "a b",
            "x@sha256:zz",
            "-x",
            "x//y",
            "on",
        ] {
            if bad == "on" {
                // A bare word is a valid Docker Hub name; YAML quoting keeps it a string.
                assert!(image(bad).is_ok());
                continue;
            }
            assert!(image(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn interfaces_and_capabilities() {
        for ok in [
            "eth0",
            "enp1s0f0",
            "bond0",
            "^docker,lo",
            "=eth0",
            "ib0,ib1",
        ] {
            assert!(interface(ok).is_ok(), "{ok}");
        }
        for bad in ["", "^", "eth0 ; rm", "a$(x)", "averyveryverylongname0"] {
            assert!(interface(bad).is_err(), "{bad:?}");
        }
        assert!(capability("IPC_LOCK").is_ok());
        assert!(capability("CAP_IPC_LOCK").is_ok());
        assert!(capability("ipc_lock").is_err());
        for refused in [
            "ALL",
            "SYS_ADMIN",
            "CAP_SYS_ADMIN",
            "NET_ADMIN",
            "SYS_MODULE",
            "IPC_LOCKED",
        ] {
            assert!(capability(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn control_characters_and_length() {
        assert!(TextRule::Free.check("a\u{0}b").is_err());
        assert!(TextRule::Free.check("a\u{1b}[31m").is_err());
        assert!(TextRule::Free.check(&"x".repeat(MAX_TEXT + 1)).is_err());
        assert!(TextRule::Free.check("Ünïcode ok").is_ok());
    }

    #[test]
    fn kubernetes_names_are_dns_1035_labels() {
        for (name, want) in [
            ("chat", "chat"),
            ("Chat", "chat"),
            ("a__b", "a-b"),
            ("_1x", "d-1x"),
            ("__", "dic"),
            ("llama_70b_prod", "llama-70b-prod"),
        ] {
            assert_eq!(kubernetes_name(name), want);
            assert!(dns_label(&kubernetes_name(name)).is_ok());
        }
        let long = "x".repeat(80);
        assert_eq!(kubernetes_name(&long).len(), 50);
    }

    #[test]
    fn secret_names() {
        assert!(names_a_secret("HF_TOKEN"));
        assert!(names_a_secret("hf_api_key"));
        assert!(!names_a_secret("NCCL_IB_HCA"));
    }
}
