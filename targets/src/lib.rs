//! dic's code generators: the planned deployment (the IR) in, files out.
//!
//! Empty until the compile milestone: vLLM launch configs, Kubernetes manifests, the NCCL
//! runtime's plan and the cost report will live here, each reading only the IR.
