//! GPU architectures: the target's GPUs looked up in the table, and whether a build carries a
//! cubin or PTX for each. This module performs no I/O.

use super::codes::*;
use super::types::{Build, Gpu, Modes};
use super::unconfirmed::{self, Grade};
use super::{err, warn};
use crate::core::compat::{DriverReq, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::{DriverMode, LockedGpu};
use crate::core::spec::Spec;
use crate::core::version::{self, Cc, Coverage};

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
                    min_drivers: m
                        .row
                        .and_then(|r| r.min_driver.clone().map(|v| (v, r.confidence)))
                        .into_iter()
                        .chain(arch.and_then(|a| a.min_driver.clone().map(|v| (v, a.confidence))))
                        .collect(),
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
    let named = table.gpus_named_in(input);
    if named.len() > 1 {
        let list = named
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ");
        return err(
            UNKNOWN_GPU,
            "target.gpus",
            format!("`{input}` names more than one GPU"),
        )
        .with_hint(format!("one GPU per entry: gpus = [{list}]"));
    }
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
/// JIT under minor-version compatibility fails, so the driver's modes matter here. Each GPU is
/// judged over every reading of the unconfirmed facts (architectures, PTX, driver mode).
pub(super) fn coverage(
    gpus: &[Gpu],
    build: &Build,
    modes: Option<&Modes>,
    native: Option<&DriverReq>,
    out: &mut Vec<Diagnostic>,
) -> Vec<LockedGpu> {
    let mode_readings: Vec<Option<DriverMode>> = match modes {
        Some(m) => m.readings.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut locked = Vec::new();
    for g in gpus {
        let outcomes: Vec<Outcome> = arch_readings(build, g.cc)
            .iter()
            .flat_map(|(cubins, ptx)| {
                let reach = version::coverage(cubins, ptx, g.cc);
                mode_readings
                    .iter()
                    .map(move |m| Outcome { reach, mode: *m })
            })
            .collect();
        let judged = unconfirmed::judge(outcomes.iter().map(Outcome::grade));
        let stated = outcomes[0];
        let runs_via = match stated.reach {
            Coverage::Cubin(c) => {
                if judged.stated_is_uncertain() {
                    out.push(unconfirmed(format!(
                        "that this build carries {} for {} is not confirmed",
                        c.sm(),
                        g.label()
                    )));
                }
                c.sm()
            }
            Coverage::Ptx(p) => {
                let ptx = compute(&p);
                let d = ptx_jit(g, &ptx, stated.mode, native);
                if d.is_error() {
                    out.push(unconfirmed::decide(d, &judged));
                } else {
                    out.push(d);
                    if judged.worst == Grade::Failed {
                        out.push(unconfirmed(ptx_doubt(g, &ptx, &outcomes)));
                    }
                }
                ptx
            }
            Coverage::None => {
                out.push(unconfirmed::decide(
                    err(
                        ARCH_NOT_IN_WHEEL,
                        "target.gpus",
                        format!(
                            "{} is not in this build's GPU architectures ({}): torch would fail with \"no kernel image is available for execution on the device\"",
                            g.label(),
                            arch_txt(build)
                        ),
                    ),
                    &judged,
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

/// How one reading reaches a GPU: the build's code for it, and the driver's mode.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    reach: Coverage,
    mode: Option<DriverMode>,
}

impl Outcome {
    fn grade(&self) -> Grade {
        match self.reach {
            Coverage::Cubin(_) => Grade::Clean,
            Coverage::Ptx(_) if self.mode == Some(DriverMode::MinorCompat) => Grade::Failed,
            Coverage::Ptx(_) => Grade::Warned,
            Coverage::None => Grade::Failed,
        }
    }
}

/// The build's (cubins, PTX) under every reading of its unconfirmed facts, the stated one
/// first: cubins whose presence is in doubt present or not; a whole list in doubt empty or
/// holding this very device; a PTX list in doubt empty or as large as the build allows.
fn arch_readings(build: &Build, device: Cc) -> Vec<(Vec<Cc>, Vec<Cc>)> {
    let mut cubins = vec![build.arch.clone()];
    if build
        .arch
        .iter()
        .any(|c| build.unconfirmed_arch.contains(c))
    {
        cubins.push(
            build
                .arch
                .iter()
                .filter(|c| !build.unconfirmed_arch.contains(c))
                .copied()
                .collect(),
        );
    }
    if build.arch_confidence.is_unconfirmed() {
        cubins.push(Vec::new());
        cubins.push(vec![device]);
    }
    let mut out = Vec::new();
    for c in cubins {
        out.push((c.clone(), build.ptx.clone()));
        if build.ptx_confidence.is_unconfirmed() {
            out.push((c.clone(), Vec::new()));
            let possible = version::possible_ptx(&c);
            out.push((c, possible));
        }
    }
    out
}

/// Why a GPU that the stated facts run through PTX could fail under another reading.
fn ptx_doubt(g: &Gpu, ptx: &str, outcomes: &[Outcome]) -> String {
    if outcomes.iter().any(|o| o.reach == Coverage::None) {
        format!("that this build carries {ptx} for {} is not confirmed: without it torch would fail with \"no kernel image is available for execution on the device\"", g.label())
    } else {
        format!("{} runs this build only by JIT-compiling its PTX ({ptx}), which fails under minor-version compatibility, and that the driver runs it natively is not confirmed", g.label())
    }
}

fn unconfirmed(message: String) -> Diagnostic {
    warn(UNCONFIRMED_FACT, "target.gpus", message)
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
