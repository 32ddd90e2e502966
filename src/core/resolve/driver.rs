//! Driver rules: how the target driver runs a build (natively, through CUDA minor-version
//! compatibility, through forward compatibility, or not at all), conda-forge's `__cuda` virtual
//! package, and GPUs that need a newer driver or were dropped by a driver branch. This module
//! performs no I/O.

use super::codes::*;
use super::types::{Build, Ctx, Gpu, Modes};
use super::unconfirmed::{self, Grade, Judged};
use super::{err, warn};
use crate::core::compat::{DriverReq, GpuKind, Os, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::DriverMode;
use crate::core::spec::{Source, Spec};
use crate::core::version::{self, Route, Version};

/// The drivers a build needs: natively, and at least (the CUDA major's minor-version
/// compatibility floor; none before CUDA 11), with the lowest value physics leaves for the
/// floor when the table marks it unconfirmed.
pub(super) struct DriverFacts {
    pub native: Option<DriverReq>,
    pub floor: Option<DriverReq>,
    floor_lowest: Option<Version>,
}

pub(super) fn facts(table: &Table, build: &Build, os: Os) -> DriverFacts {
    DriverFacts {
        native: table.native_driver(&build.cuda, os),
        floor: table.family_floor(build.cuda.major(), os),
        floor_lowest: table.first_driver_reporting(build.cuda.major()),
    }
}

impl DriverFacts {
    /// The floor as stated, then, when unconfirmed, at its lowest and absent.
    fn floor_readings(&self) -> Vec<Option<Version>> {
        match &self.floor {
            None => vec![None],
            Some(f) if !f.confidence.is_unconfirmed() => vec![Some(f.version.clone())],
            Some(f) => vec![
                Some(f.version.clone()),
                // Without a confirmed branch row nothing bounds it from below.
                Some(self.floor_lowest.clone().unwrap_or_else(Version::zero)),
                None,
            ],
        }
    }

    /// The native driver as stated, then, when unconfirmed, at the lowest the family floor
    /// allows and absent (no driver known to run it natively).
    fn native_readings(&self, floors: &[Option<Version>]) -> Vec<Option<Version>> {
        match &self.native {
            None => vec![None],
            Some(n) if !n.confidence.is_unconfirmed() => vec![Some(n.version.clone())],
            Some(n) => {
                let lowest_floor = floors.iter().flatten().min();
                vec![
                    Some(n.version.clone()),
                    Some(version::lowest_native(lowest_floor)),
                    None,
                ]
            }
        }
    }

    /// How `driver` runs the build under every reading of these facts; the stated one first.
    pub(super) fn modes(&self, driver: &Version) -> Vec<DriverMode> {
        if self.native.is_none() && self.floor.is_none() {
            // No driver facts at all (a table without the row): nothing to check against.
            return vec![DriverMode::Native];
        }
        let floors = self.floor_readings();
        let natives = self.native_readings(&floors);
        let mut out = Vec::new();
        for n in &natives {
            for f in &floors {
                out.push(match version::route(driver, n.as_ref(), f.as_ref()) {
                    Route::Native => DriverMode::Native,
                    Route::MinorCompat => DriverMode::MinorCompat,
                    Route::TooOld => DriverMode::TooOld,
                });
            }
        }
        out
    }
}

fn grade(m: DriverMode) -> Grade {
    match m {
        DriverMode::Native | DriverMode::ForwardCompat => Grade::Clean,
        DriverMode::MinorCompat => Grade::Warned,
        DriverMode::TooOld => Grade::Failed,
    }
}

/// The warning for a spec that names no target driver.
pub(super) fn note_missing(spec: &Spec, diags: &mut Vec<Diagnostic>) {
    if spec.target.driver.is_none() {
        diags.push(warn(NO_TARGET_DRIVER, "target", "no [target] driver: driver compatibility is not checked (the lock still records the minimum)".into()).with_hint("add e.g. driver = \"535.104.05\", the lowest driver on your machines"));
    }
}

/// Check the spec's target driver against a build; the modes it runs the build in, or `None`
/// when the spec names no driver.
pub(super) fn check(
    cx: &Ctx,
    source: Source,
    build: &Build,
    facts: &DriverFacts,
    out: &mut Vec<Diagnostic>,
) -> Option<Modes> {
    let driver = cx.spec.target.driver.as_ref()?;
    let modes = judge(cx.spec, cx.gpus, build, facts, driver, out);
    // conda-forge CUDA builds depend on __cuda >= major (the driver's highest CUDA).
    if source == Source::CondaForge {
        out.extend(virtual_cuda(cx.table, build, driver));
    }
    gpu_drivers(cx.gpus, driver, out);
    Some(modes)
}

/// The mode a driver runs a build in, judged over every reading of the unconfirmed driver
/// facts, with the diagnostics that calls for.
fn judge(
    spec: &Spec,
    gpus: &[Gpu],
    build: &Build,
    facts: &DriverFacts,
    driver: &Version,
    out: &mut Vec<Diagnostic>,
) -> Modes {
    let mut readings = facts.modes(driver);
    let judged = unconfirmed::judge(readings.iter().map(|m| grade(*m)));
    let native_txt = facts
        .native
        .as_ref()
        .map(|n| n.version.to_string())
        .unwrap_or_else(|| "unknown".into());
    let cuda_label = format!("CUDA {}", build.cuda);
    let stated = match readings[0] {
        DriverMode::TooOld if spec.target.forward_compat => {
            let m = forward_compat(gpus, build, driver, &cuda_label, &judged, out);
            // The image carries cuda-compat: whatever reading leaves the driver short, the
            // compat libraries run the build.
            for r in readings.iter_mut().filter(|r| **r != DriverMode::Native) {
                *r = m;
            }
            m
        }
        DriverMode::TooOld => {
            let d = too_old(build, facts, driver, &native_txt, &cuda_label);
            out.push(unconfirmed::decide(d, &judged));
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
            out.push(d);
            if judged.worst == Grade::Failed {
                let floor = facts.floor.as_ref().map(|f| f.version.to_string());
                out.push(warn(
                    UNCONFIRMED_FACT,
                    "target.driver",
                    format!(
                        "driver {driver} runs {cuda_label} builds only if the unconfirmed minor-version compatibility floor (>= {}) holds; natively they need >= {native_txt}",
                        floor.unwrap_or_default()
                    ),
                ));
            }
            DriverMode::MinorCompat
        }
        DriverMode::ForwardCompat => DriverMode::ForwardCompat,
        DriverMode::Native => {
            if judged.stated_is_uncertain() {
                out.push(warn(
                    UNCONFIRMED_FACT,
                    "target.driver",
                    format!("the driver {cuda_label} needs natively ({native_txt}) is not confirmed by NVIDIA's table"),
                ));
            }
            DriverMode::Native
        }
    };
    Modes { stated, readings }
}

/// A driver too old for the build, when the spec asks for forward compatibility: it works on
/// data-center GPUs and Jetson only.
fn forward_compat(
    gpus: &[Gpu],
    build: &Build,
    driver: &Version,
    cuda_label: &str,
    judged: &Judged,
    out: &mut Vec<Diagnostic>,
) -> DriverMode {
    let consumer: Vec<String> = gpus
        .iter()
        .filter(|g| !g.kind.is_some_and(GpuKind::forward_compatible))
        .map(Gpu::label)
        .collect();
    if gpus.is_empty() || !consumer.is_empty() {
        // Needed only when the driver is too old: certain only when every reading says so.
        out.push(unconfirmed::decide(err(
            FORWARD_COMPAT_UNSUPPORTED,
            "target.forward-compat",
            format!(
                "forward compatibility (cuda-compat) works on data-center GPUs and Jetson only, not {}",
                if consumer.is_empty() { "unnamed GPUs".to_string() } else { consumer.join(", ") }
            ),
        ), judged));
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
    let row = table.driver_max_cuda(driver);
    let max = row.map(|b| b.max_cuda.clone());
    let ok = max
        .as_ref()
        .is_some_and(|mx| mx.major() >= build.cuda.major());
    // An unconfirmed branch row read as absent: the driver could report anything.
    let absent = row
        .is_some_and(|b| b.confidence.is_unconfirmed())
        .then_some(Grade::Clean);
    (!ok).then(|| {
        unconfirmed::decide(err(
            VIRTUAL_PACKAGE_UNSATISFIED,
            "target.driver",
            format!(
                "conda-forge's CUDA {} builds need the virtual package __cuda >= {}, but driver {driver} reports CUDA {}",
                build.cuda,
                build.cuda.major(),
                max.map(|m| m.to_string()).unwrap_or_else(|| "(none)".into())
            ),
        ), &unconfirmed::judge(std::iter::once(Grade::Failed).chain(absent)))
    })
}

/// GPUs that need a newer driver than the target's, or that its branch no longer drives.
fn gpu_drivers(gpus: &[Gpu], driver: &Version, out: &mut Vec<Diagnostic>) {
    for g in gpus {
        if let Some((min, confidence)) = g.min_drivers.first() {
            if driver < min {
                // Without the first fact, the others still bound the driver.
                let others = g.min_drivers[1..]
                    .iter()
                    .any(|(m, c)| !c.is_unconfirmed() && driver < m);
                let absent = confidence.is_unconfirmed().then_some(if others {
                    Grade::Failed
                } else {
                    Grade::Clean
                });
                let judged = unconfirmed::judge(std::iter::once(Grade::Failed).chain(absent));
                out.push(unconfirmed::decide(
                    err(
                        DRIVER_TOO_OLD,
                        "target.driver",
                        format!(
                            "{} needs driver >= {min}, the target has {driver}",
                            g.label()
                        ),
                    ),
                    &judged,
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
