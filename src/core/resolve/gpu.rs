//! GPU architectures: the target's GPUs looked up in the table, and whether a build carries a
//! cubin or PTX for each. This module performs no I/O.

use super::build::Build;
use super::codes::*;
use super::{err, soften, warn};
use crate::core::compat::{DriverReq, GpuKind, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::{DriverMode, LockedGpu};
use crate::core::spec::Spec;
use crate::core::version::{self, Cc, Coverage, Version};

/// A target GPU after lookup.
#[derive(Debug, Clone)]
pub(super) struct Gpu {
    pub input: String,
    pub model: Option<String>,
    pub cc: Cc,
    pub kind: Option<GpuKind>,
    pub min_driver: Option<Version>,
    pub last_branch: Option<u64>,
    pub family: Option<String>,
}

impl Gpu {
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{m} ({})", self.cc.sm()),
            None => self.cc.sm(),
        }
    }
}

/// Look up the spec's GPUs; unknown ones are errors, and no GPUs at all is a warning.
pub(super) fn lookup(spec: &Spec, table: &Table, diags: &mut Vec<Diagnostic>) -> Vec<Gpu> {
    let mut gpus = Vec::new();
    for input in &spec.target.gpus {
        match table.find_gpu(input) {
            Some(m) => {
                let arch = table.arch_row(m.cc);
                gpus.push(Gpu {
                    input: input.clone(),
                    model: m.row.map(|r| r.name.clone()),
                    cc: m.cc,
                    kind: m.row.map(|r| r.kind),
                    min_driver: m
                        .row
                        .and_then(|r| r.min_driver.clone())
                        .or_else(|| arch.and_then(|a| a.min_driver.clone())),
                    last_branch: arch.and_then(|a| a.last_branch),
                    family: arch.map(|a| a.family.clone()),
                });
            }
            None => diags.push(unknown(table, input)),
        }
    }
    if spec.target.gpus.is_empty() {
        diags.push(
            warn(
                NO_TARGET_GPUS,
                "target",
                "no [target] gpus: GPU architecture coverage is not checked".into(),
            )
            .with_hint("add e.g. gpus = [\"A100\", \"8.9\"]"),
        );
    }
    gpus
}

/// The error for a GPU the table does not know, with the closest names.
fn unknown(table: &Table, input: &str) -> Diagnostic {
    let sugg = table.gpu_suggestions(input);
    let hint = if sugg.is_empty() {
        "name a known model (`envbuild table gpu`) or give its compute capability, e.g. \"8.9\""
            .to_string()
    } else {
        format!(
            "did you mean {}? Or give the compute capability, e.g. \"8.9\"",
            sugg.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    err(UNKNOWN_GPU, "target.gpus", format!("unknown GPU `{input}`")).with_hint(hint)
}

/// How each GPU runs the build (a cubin or PTX JIT), with the diagnostics that calls for. PTX
/// JIT under minor-version compatibility fails, so `mode` matters here.
pub(super) fn coverage(
    gpus: &[Gpu],
    build: &Build,
    mode: Option<DriverMode>,
    native: Option<&DriverReq>,
    out: &mut Vec<Diagnostic>,
) -> Vec<LockedGpu> {
    let mut locked = Vec::new();
    for g in gpus {
        let runs_via = match version::coverage(&build.arch, &build.ptx, g.cc) {
            Coverage::Cubin(c) => {
                if build.arch_confidence.is_unconfirmed() || build.unconfirmed_arch.contains(&c) {
                    out.push(warn(
                        UNCONFIRMED_FACT,
                        "target.gpus",
                        format!(
                            "that this build carries {} for {} is not confirmed",
                            c.sm(),
                            g.label()
                        ),
                    ));
                }
                c.sm()
            }
            Coverage::Ptx(p) => {
                let ptx = compute(&p);
                out.push(ptx_jit(g, &ptx, mode, native));
                ptx
            }
            Coverage::None => {
                out.push(soften(
                    err(
                        ARCH_NOT_IN_WHEEL,
                        "target.gpus",
                        format!(
                            "{} is not in this build's GPU architectures ({}): torch would fail with \"no kernel image is available for execution on the device\"",
                            g.label(),
                            arch_txt(build)
                        ),
                    ),
                    build.arch_confidence.max(build.ptx_confidence),
                ));
                continue;
            }
        };
        locked.push(LockedGpu {
            input: g.input.clone(),
            model: g.model.clone(),
            cc: g.cc.to_string(),
            runs_via,
        });
    }
    locked
}

/// A GPU that runs the build only through PTX JIT: slow, and impossible under minor-version
/// compatibility.
fn ptx_jit(g: &Gpu, ptx: &str, mode: Option<DriverMode>, native: Option<&DriverReq>) -> Diagnostic {
    if mode == Some(DriverMode::MinorCompat) {
        err(
            DRIVER_TOO_OLD,
            "target.driver",
            format!(
                "{} runs this build only by JIT-compiling its PTX ({ptx}), which needs the native driver (>= {}); under minor-version compatibility it fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                g.label(),
                native.map(|n| n.version.to_string()).unwrap_or_default()
            ),
        )
    } else {
        warn(
            PTX_JIT,
            "target.gpus",
            format!("{} has no cubin in this build and runs through PTX JIT ({ptx}): slow first start, and cached kernels are lost with the container", g.label()),
        )
    }
}

/// `compute_90`: the name of a PTX target.
pub(super) fn compute(p: &Cc) -> String {
    format!("compute_{}{}", p.major, p.minor)
}

/// The build's cubins and PTX, for a message: `sm_80 sm_90 compute_90`.
fn arch_txt(build: &Build) -> String {
    let mut s: Vec<String> = build.arch.iter().map(Cc::sm).collect();
    s.extend(build.ptx.iter().map(compute));
    s.join(" ")
}
