//! The GPU each generated pod asks for and lands on, read from the Kubernetes objects:
//! every node group's pods select their own GPU product (a mixed cluster's parts never
//! land on the other group's nodes), and AMD GPUs get vLLM's ROCm image and the AMD
//! device plugin's resource, both decided in the launch plan (issue 38).

#![allow(clippy::unwrap_used)] // a test or benchmark: a failed unwrap is a failure

mod common;

use dic::disk::DiskWorld;
use serde_json::Value;

fn parse(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// The pod templates of a Deployment, Job or LeaderWorkerSet (leader and worker).
fn pod_templates(obj: &Value) -> Vec<Value> {
    match obj["kind"].as_str() {
        Some("Deployment" | "Job") => vec![obj["spec"]["template"].clone()],
        Some("LeaderWorkerSet") => ["leaderTemplate", "workerTemplate"]
            .iter()
            .map(|k| obj["spec"]["leaderWorkerTemplate"][k].clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// Each deployment's pods select nodes of its own GPU: the `*/gpu.product` values of every
/// pod template are labels of the GPU its node group has (the catalog's `names` as GPU
/// Feature Discovery writes them), so a mixed cluster's H100 part never lands on the A100
/// nodes. Compared with the stdlib, not with the launch plan the objects came from.
#[test]
fn every_node_groups_pods_select_their_own_gpu() {
    use dic_compiler::program::Body;
    use dic_compiler::schema::Kind;
    let catalog = &dic_compiler::analysis::catalog::stdlib().program;
    let mut mixed_parts = 0;
    for path in common::dist_files("examples")
        .into_iter()
        .filter(|p| !p.contains("/mistakes/") && !p.contains("/common/"))
    {
        let checked = dic_compiler::driver::compile_file(&DiskWorld, &path).unwrap();
        let files = dic_targets::render(&checked.plan, &checked.forecast).unwrap();
        for d in &checked.plan.deployments {
            let Some(Body::Gpu(gpu)) = catalog.by_name(Kind::Gpu, &d.gpu.name).map(|g| &g.body)
            else {
                continue;
            };
            let own: Vec<String> = gpu.names.iter().map(|n| n.replace(' ', "-")).collect();
            let prefix = format!("{}/k8s/", d.name);
            for (file, text) in files.iter().filter(|(f, _)| f.starts_with(&prefix)) {
                if file.ends_with("kustomization.yaml") {
                    continue;
                }
                let v = parse(text);
                if v.get("kind").is_none() {
                    continue;
                }
                for t in pod_templates(&v) {
                    let terms = &t["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
                    for term in terms.as_array().into_iter().flatten() {
                        for e in term["matchExpressions"].as_array().into_iter().flatten() {
                            if !e["key"].as_str().unwrap().ends_with("gpu.product") {
                                continue;
                            }
                            for value in e["values"].as_array().unwrap() {
                                let value = value.as_str().unwrap();
                                assert!(
                                    own.iter().any(|o| o == value),
                                    "{path} {file}: {} pods select `{value}`, not one of {own:?}",
                                    d.gpu.name
                                );
                            }
                        }
                    }
                }
            }
            if d.part_of.is_some() {
                mixed_parts += 1;
            }
        }
    }
    assert!(mixed_parts >= 2, "no example splits over node groups");
}

/// AMD GPUs run vLLM's ROCm image, and their pods ask the AMD device plugin's resource
/// (which hands the container `/dev/kfd` and the GPUs' `/dev/dri` nodes) and tolerate its
/// taint: both decided in the launch plan, nothing NVIDIA's in the objects. The
/// manifests pass the offline validator.
#[test]
fn amd_gpus_get_the_rocm_image_and_the_amd_device_plugin() {
    let world = dic_compiler::source::MemoryWorld::new().with(
        "amd.dist",
        "import std.nodes.mi300x_8\nimport std.nodes.mi355x_8\nimport std.models.llama_3_1_70b\n\
         cluster one { nodes = 1 × mi300x_8 }\n\
         cluster two { nodes = 2 × mi355x_8 }\n\
         deploy a { model = llama_3_1_70b, cluster = one, layout = tp 4 × dp 2 }\n\
         deploy b { model = llama_3_1_70b, cluster = two, layout = tp 8 × pp 2 }\n",
    );
    let checked = dic_compiler::driver::compile_file(&world, "amd.dist").unwrap();
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    for d in &checked.plan.deployments {
        assert_eq!(
            d.kubernetes.image,
            dic_compiler::ir::ROCM_IMAGE,
            "{}",
            d.name
        );
        assert_eq!(d.gpu.resource, "amd.com/gpu", "{}", d.name);
    }
    assert_eq!(
        dic_compiler::ir::ROCM_IMAGE,
        "vllm/vllm-openai-rocm:v0.33.0"
    );
    let files = dic_targets::render_launch(&checked.plan).unwrap();
    let mut manifests = Vec::new();
    for (file, text) in files
        .iter()
        .filter(|(f, _)| f.contains("/k8s/") && !f.ends_with("kustomization.yaml"))
    {
        assert!(!text.contains("nvidia.com/"), "{file}:\n{text}");
        for t in pod_templates(&parse(text)) {
            for c in t["spec"]["containers"].as_array().unwrap() {
                if c["name"] != "vllm" {
                    continue;
                }
                assert_eq!(c["image"], "vllm/vllm-openai-rocm:v0.33.0", "{file}");
                assert!(
                    c["resources"]["limits"]["amd.com/gpu"].is_string()
                        || c["resources"]["limits"]["amd.com/gpu"].is_number(),
                    "{file}: {}",
                    c["resources"]
                );
            }
            let tolerated = t["spec"]["tolerations"].as_array().unwrap();
            assert!(
                tolerated.iter().any(|x| x["key"] == "amd.com/gpu"),
                "{file}"
            );
        }
        manifests.push((file.clone(), text.clone()));
    }
    assert!(manifests
        .iter()
        .any(|(f, _)| f.ends_with("leaderworkerset.yaml")));
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let dir = common::fresh_dir("k8s-validate-amd");
    let paths: Vec<std::path::PathBuf> = manifests
        .iter()
        .enumerate()
        .map(|(i, (f, text))| {
            let path = dir.join(format!("{i}-{}", f.replace('/', "__")));
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let report = common::validate_k8s(&shared, "1.33", None, &paths);
    assert!(report.contains(" 0 warnings"), "{report}");
    eprintln!("{}", report.trim());
}
