//! The stdlib as data for analysis: GPUs, links and models by name, for `dic estimate`
//! and the calibration (which have no `.dist` file of their own). The stdlib is checked
//! once per process.

use super::scenario::{GpuSpec, LinkSpec};
use crate::program::{Body, Model};
use crate::schema::Kind;

pub fn stdlib() -> &'static crate::front::FrontEnd {
    crate::front::stdlib()
}

pub fn link(name: &str) -> Option<LinkSpec> {
    let d = stdlib().program.by_name(Kind::Link, name)?;
    match &d.body {
        Body::Link(l) => Some(LinkSpec::from_link(&d.name, l)),
        _ => None,
    }
}

/// A GPU by stdlib name or `nvidia-smi` name, with its scale-up link name.
pub fn gpu(query: &str) -> Option<(GpuSpec, Option<LinkSpec>)> {
    let (_, name) = crate::stdlib::find_gpu(query)?;
    let p = &stdlib().program;
    let d = p.by_name(Kind::Gpu, &name)?;
    let Body::Gpu(g) = &d.body else { return None };
    let pcie = g
        .pcie
        .and_then(|id| p.def(id))
        .and_then(|l| match &l.body {
            Body::Link(x) => Some(LinkSpec::from_link(&l.name, x)),
            _ => None,
        })
        .or_else(|| link("pcie4"))?;
    let scale_up = g
        .scale_up
        .and_then(|id| p.def(id))
        .and_then(|l| match &l.body {
            Body::Link(x) => Some(LinkSpec::from_link(&l.name, x)),
            _ => None,
        });
    Some((GpuSpec::from_gpu(&d.name, g, pcie), scale_up))
}

/// The scale-up link of the stdlib's reference node of `count` GPUs named `gpu` (its
/// stdlib name): an HGX/DGX board's NVSwitch, where the GPU's own entry names only its
/// NVLink generation. `None` when the stdlib has no such node.
pub fn node_scale_up(gpu: &str, count: u64) -> Option<LinkSpec> {
    let p = &stdlib().program;
    p.defs
        .iter()
        .flatten()
        .filter(|d| d.kind == Kind::Node)
        .find_map(|d| {
            let Body::Node(n) = &d.body else { return None };
            if n.gpu_count != count || p.def(n.gpu?)?.name != gpu {
                return None;
            }
            let l = p.def(n.scale_up?)?;
            match &l.body {
                Body::Link(x) => Some(LinkSpec::from_link(&l.name, x)),
                _ => None,
            }
        })
}

pub fn model(name: &str) -> Option<Model> {
    match &stdlib().program.by_name(Kind::Model, name)?.body {
        Body::Model(m) => Some(m.clone()),
        _ => None,
    }
}

pub fn model_names() -> Vec<String> {
    stdlib()
        .program
        .defs
        .iter()
        .flatten()
        .filter(|d| d.kind == Kind::Model)
        .map(|d| d.name.clone())
        .collect()
}
