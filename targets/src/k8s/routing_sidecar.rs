//! llm-d's routing sidecar on a disaggregated deployment's decode pods behind the endpoint
//! picker ([`dic_compiler::ir::RoutingSidecar`]): a native sidecar (an init container
//! with `restartPolicy: Always`, as llm-d's manifests run it) listening on the
//! InferencePool's target port; for each request it has the prefill server the picker
//! named (`x-prefiller-host-port`) compute the prompt, then sends the request with the
//! KV-transfer parameters to the pod's own vLLM on `--vllm-port`.
//!
//! Flags and defaults are llm-d-inference-scheduler v0.8.0's `pkg/sidecar/proxy/options.go`
//! (`AddFlags`): `--port` (default 8000), `--vllm-port` (default 8001; the sidecar reaches
//! `localhost:<vllm-port>`, `Options::Complete`), `--kv-connector`, and `--secure-proxy`
//! (default true: a self-signed TLS listener, which the Gateway's plain-HTTP backend
//! would not speak; llm-d's P/D manifests turn it off). The shape follows
//! `deploy/components/vllm-sim-pd/deployments.yaml` and `Dockerfile.sidecar`.

use super::*;
use dic_compiler::ir::RoutingSidecar;

/// The user the sidecar's image runs as (`Dockerfile.sidecar`: `USER 65532:65532`).
const SIDECAR_USER: i64 = 65532;

/// The sidecar's arguments: listen on the pool's port, forward to vLLM's, speak NIXL's
/// protocol, plain HTTP.
pub(super) fn sidecar_args(port: u64, s: &RoutingSidecar) -> Vec<String> {
    vec![
        format!("--port={port}"),
        format!("--vllm-port={}", s.vllm_port),
        format!("--kv-connector={}", s.connector),
        "--secure-proxy=false".to_string(),
    ]
}

/// The routing sidecar of a decode pod behind the picker, or None for any other pod.
pub(super) fn routing_sidecar(d: &DeploymentPlan) -> Option<Container> {
    let pd = d.kubernetes.gateway.as_ref()?.pd.as_ref()?;
    let s = pd.sidecar.as_ref()?;
    // [estimate] a Go reverse proxy streaming one pod's responses: small, like the
    // picker's other helpers.
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), quantity("1")),
            ("memory".to_string(), quantity("512Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), quantity("512Mi"))])),
        ..Default::default()
    };
    let mut security = super::router::unprivileged(true);
    security.run_as_non_root = Some(true);
    security.run_as_user = Some(SIDECAR_USER);
    security.run_as_group = Some(SIDECAR_USER);
    Some(Container {
        name: "routing-sidecar".into(),
        image: Some(s.image.clone()),
        args: Some(sidecar_args(pd.target_port, s)),
        ports: Some(vec![ContainerPort {
            name: Some("sidecar".into()),
            container_port: pd.target_port as i32,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        // Its own health (`GET /health`, `pkg/sidecar/proxy/proxy.go`): vLLM's probes
        // say when the pod serves.
        readiness_probe: Some(health("sidecar", 5, 3)),
        restart_policy: Some("Always".into()),
        resources: Some(resources),
        security_context: Some(security),
        ..Default::default()
    })
}
