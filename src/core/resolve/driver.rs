//! Driver rules: how the target driver runs a build (natively, through CUDA minor-version
//! compatibility, through forward compatibility, or not at all), conda-forge's `__cuda` virtual
//! package, and GPUs that need a newer driver or were dropped by a driver branch. This module
//! performs no I/O.

use super::build::Build;
use super::codes::*;
use super::gpu::Gpu;
use super::{err, soften, warn};
use crate::core::compat::{Confidence, DriverReq, GpuKind, Os, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::DriverMode;
use crate::core::spec::{Source, Spec};
use crate::core::version::Version;

/// The drivers a build needs: natively, and at least (the CUDA major's minor-version
/// compatibility floor; none before CUDA 11).
pub(super) struct DriverFacts {
    pub native: Option<DriverReq>,
    pub floor: Option<DriverReq>,
}

pub(super) fn facts(table: &Table, build: &Build, os: Os) -> DriverFacts {
    DriverFacts {
        native: table.toolkit_driver(&build.cuda, os),
        floor: table.family_floor(build.cuda.major(), os),
    }
}

/// The warning for a spec that names no target driver.
pub(super) fn note_missing(spec: &Spec, diags: &mut Vec<Diagnostic>) {
    if spec.target.driver.is_none() {
        diags.push(warn(NO_TARGET_DRIVER, "target", "no [target] driver: driver compatibility is not checked (the lock still records the minimum)".into()).with_hint("add e.g. driver = \"535.104.05\", the lowest driver on your machines"));
    }
}

/// Check the spec's target driver against a build; the mode it runs the build in, or `None`
/// when the spec names no driver.
pub(super) fn check(
    spec: &Spec,
    table: &Table,
    source: Source,
    gpus: &[Gpu],
    build: &Build,
    facts: &DriverFacts,
    out: &mut Vec<Diagnostic>,
) -> Option<DriverMode> {
    let driver = spec.target.driver.as_ref()?;
    let mode = judge(spec, gpus, build, facts, driver, out);
    // conda-forge CUDA builds depend on __cuda >= major (the driver's highest CUDA).
    if source == Source::CondaForge {
        out.extend(virtual_cuda(table, build, driver));
    }
    gpu_drivers(gpus, driver, out);
    Some(mode)
}

/// The mode a driver runs a build in, with the diagnostic that mode calls for.
fn judge(
    spec: &Spec,
    gpus: &[Gpu],
    build: &Build,
    facts: &DriverFacts,
    driver: &Version,
    out: &mut Vec<Diagnostic>,
) -> DriverMode {
    let m = match (&facts.native, &facts.floor) {
        (Some(n), _) if *driver >= n.version => DriverMode::Native,
        (_, Some(f)) if *driver >= f.version => DriverMode::MinorCompat,
        (None, None) => DriverMode::Native,
        _ => DriverMode::TooOld,
    };
    let native_confidence = facts
        .native
        .as_ref()
        .map_or(Confidence::Primary, |n| n.confidence);
    let confidence = match m {
        DriverMode::Native => native_confidence,
        _ => facts
            .floor
            .as_ref()
            .map_or(Confidence::Primary, |f| f.confidence)
            .max(native_confidence),
    };
    let native_txt = facts
        .native
        .as_ref()
        .map(|n| n.version.to_string())
        .unwrap_or_else(|| "unknown".into());
    let cuda_label = format!("CUDA {}", build.cuda);
    match m {
        DriverMode::TooOld if spec.target.forward_compat => {
            forward_compat(gpus, build, driver, &cuda_label, out)
        }
        DriverMode::TooOld => {
            let d = too_old(build, facts, driver, &native_txt, &cuda_label);
            out.push(soften(d, confidence));
            DriverMode::TooOld
        }
        DriverMode::MinorCompat => {
            let mut d = warn(
                DRIVER_MINOR_COMPAT,
                "target.driver",
                format!(
                    "driver {driver} runs {cuda_label} builds only through CUDA minor-version compatibility (natively from {native_txt}): PTX JIT of newer PTX and newer driver features can fail"
                ),
            );
            d.hint = Some(format!(
                "upgrade the target driver to >= {native_txt} for full support"
            ));
            out.push(soften(d, confidence));
            DriverMode::MinorCompat
        }
        DriverMode::ForwardCompat => DriverMode::ForwardCompat,
        DriverMode::Native => {
            if confidence.is_unconfirmed() {
                out.push(warn(
                    UNCONFIRMED_FACT,
                    "target.driver",
                    format!("the driver {cuda_label} needs natively ({native_txt}) is not confirmed by NVIDIA's table"),
                ));
            }
            DriverMode::Native
        }
    }
}

/// A driver too old for the build, when the spec asks for forward compatibility: it works on
/// data-center GPUs and Jetson only.
fn forward_compat(
    gpus: &[Gpu],
    build: &Build,
    driver: &Version,
    cuda_label: &str,
    out: &mut Vec<Diagnostic>,
) -> DriverMode {
    let consumer: Vec<String> = gpus
        .iter()
        .filter(|g| !g.kind.is_some_and(GpuKind::forward_compatible))
        .map(Gpu::label)
        .collect();
    if gpus.is_empty() || !consumer.is_empty() {
        out.push(err(
            FORWARD_COMPAT_UNSUPPORTED,
            "target.forward-compat",
            format!(
                "forward compatibility (cuda-compat) works on data-center GPUs and Jetson only, not {}",
                if consumer.is_empty() { "unnamed GPUs".to_string() } else { consumer.join(", ") }
            ),
        ));
        DriverMode::TooOld
    } else {
        out.push(warn(
            FORWARD_COMPAT,
            "target.driver",
            format!(
                "driver {driver} runs {cuda_label} builds only through forward compatibility: the image must carry cuda-compat for {} (the nvidia/cuda base images do)",
                build.cuda.major_minor()
            ),
        ));
        DriverMode::ForwardCompat
    }
}

/// The error for a driver too old for the build by any route.
fn too_old(
    build: &Build,
    facts: &DriverFacts,
    driver: &Version,
    native_txt: &str,
    cuda_label: &str,
) -> Diagnostic {
    let floor_txt = match &facts.floor {
        Some(f) => format!(
            ">= {} through minor-version compatibility, >= {native_txt} natively",
            f.version
        ),
        None => format!(
            ">= {native_txt} (CUDA {} has no minor-version compatibility)",
            build.cuda.major()
        ),
    };
    err(
        DRIVER_TOO_OLD,
        "target.driver",
        format!("driver {driver} is too old for {cuda_label} builds: they need {floor_txt}"),
    )
}

/// conda-forge's CUDA builds need `__cuda >= major`, which the driver reports.
fn virtual_cuda(table: &Table, build: &Build, driver: &Version) -> Option<Diagnostic> {
    let max = table.driver_max_cuda(driver).map(|b| b.max_cuda.clone());
    let ok = max
        .as_ref()
        .is_some_and(|mx| mx.major() >= build.cuda.major());
    (!ok).then(|| {
        err(
            VIRTUAL_PACKAGE_UNSATISFIED,
            "target.driver",
            format!(
                "conda-forge's CUDA {} builds need the virtual package __cuda >= {}, but driver {driver} reports CUDA {}",
                build.cuda,
                build.cuda.major(),
                max.map(|m| m.to_string()).unwrap_or_else(|| "(none)".into())
            ),
        )
    })
}

/// GPUs that need a newer driver than the target's, or that its branch no longer drives.
fn gpu_drivers(gpus: &[Gpu], driver: &Version, out: &mut Vec<Diagnostic>) {
    for g in gpus {
        if let Some(min) = &g.min_driver {
            if driver < min {
                out.push(err(
                    DRIVER_TOO_OLD,
                    "target.driver",
                    format!(
                        "{} needs driver >= {min}, the target has {driver}",
                        g.label()
                    ),
                ));
            }
        }
        if let Some(last) = g.last_branch {
            if driver.major() > last {
                out.push(warn(
                    DRIVER_DROPS_GPU,
                    "target.gpus",
                    format!(
                        "{} GPUs ({}) are driven by branches up to R{last}; driver {driver} no longer supports them",
                        g.family.clone().unwrap_or_default(),
                        g.label()
                    ),
                ));
            }
        }
    }
}
