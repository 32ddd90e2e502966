//! Resolution: a validated spec plus the compatibility table give a lock, or diagnostics with
//! codes and hints. Every problem is reported at once. This module performs no I/O; "today" is
//! the table's `as_of` date, so the same inputs give the same answer on every machine.

use crate::core::compat::{variant_cuda, variant_of, Confidence, GpuKind, Os, Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::lock::{Install, Lock, LockedGpu, LockedImage, LOCK_VERSION};
use crate::core::spec::{Platform, Source, Spec};
use crate::core::version::{coverage, Cc, Coverage, Version};
use std::collections::BTreeMap;

/// Diagnostic codes of resolution (spec parsing adds INVALID_SPEC, UNPINNED_VERSION,
/// UNSAFE_VALUE). Documented in the README.
pub mod codes {
    use crate::core::diag::Code;
    // errors
    pub const DRIVER_TOO_OLD: Code = "DRIVER_TOO_OLD";
    pub const ARCH_NOT_IN_WHEEL: Code = "ARCH_NOT_IN_WHEEL";
    pub const PYTHON_UNSUPPORTED: Code = "PYTHON_UNSUPPORTED";
    pub const CHANNEL_DISCONTINUED: Code = "CHANNEL_DISCONTINUED";
    pub const CHANNEL_REQUIRED: Code = "CHANNEL_REQUIRED";
    pub const NO_SUCH_VARIANT: Code = "NO_SUCH_VARIANT";
    pub const NO_SUCH_PACKAGE_VERSION: Code = "NO_SUCH_PACKAGE_VERSION";
    pub const GLIBC_TOO_OLD: Code = "GLIBC_TOO_OLD";
    pub const VIRTUAL_PACKAGE_UNSATISFIED: Code = "VIRTUAL_PACKAGE_UNSATISFIED";
    pub const UNKNOWN_GPU: Code = "UNKNOWN_GPU";
    pub const CONFLICTING_PIN: Code = "CONFLICTING_PIN";
    pub const FORWARD_COMPAT_UNSUPPORTED: Code = "FORWARD_COMPAT_UNSUPPORTED";
    // warnings
    pub const DRIVER_MINOR_COMPAT: Code = "DRIVER_MINOR_COMPAT";
    pub const FORWARD_COMPAT: Code = "FORWARD_COMPAT";
    pub const PYTHON_EOL: Code = "PYTHON_EOL";
    pub const PYTHON_EXPERIMENTAL: Code = "PYTHON_EXPERIMENTAL";
    pub const UNCONFIRMED_FACT: Code = "UNCONFIRMED_FACT";
    pub const PTX_JIT: Code = "PTX_JIT";
    pub const DRIVER_DROPS_GPU: Code = "DRIVER_DROPS_GPU";
    pub const NO_TARGET_DRIVER: Code = "NO_TARGET_DRIVER";
    pub const NO_TARGET_GPUS: Code = "NO_TARGET_GPUS";
    pub const TORCHAUDIO_FROZEN: Code = "TORCHAUDIO_FROZEN";
    pub const EXPERIMENTAL_VARIANT: Code = "EXPERIMENTAL_VARIANT";
    pub const CHANNEL_MIX: Code = "CHANNEL_MIX";
    /// Every code above.
    pub const ALL: &[Code] = &[
        DRIVER_TOO_OLD,
        ARCH_NOT_IN_WHEEL,
        PYTHON_UNSUPPORTED,
        CHANNEL_DISCONTINUED,
        CHANNEL_REQUIRED,
        NO_SUCH_VARIANT,
        NO_SUCH_PACKAGE_VERSION,
        GLIBC_TOO_OLD,
        VIRTUAL_PACKAGE_UNSATISFIED,
        UNKNOWN_GPU,
        CONFLICTING_PIN,
        FORWARD_COMPAT_UNSUPPORTED,
        DRIVER_MINOR_COMPAT,
        FORWARD_COMPAT,
        PYTHON_EOL,
        PYTHON_EXPERIMENTAL,
        UNCONFIRMED_FACT,
        PTX_JIT,
        DRIVER_DROPS_GPU,
        NO_TARGET_DRIVER,
        NO_TARGET_GPUS,
        TORCHAUDIO_FROZEN,
        EXPERIMENTAL_VARIANT,
        CHANNEL_MIX,
    ];
}
use codes::*;

/// The PyTorch wheel index.
pub const INDEX_BASE: &str = "https://download.pytorch.org/whl";
/// JupyterLab for the dev image when the spec pins none. 4.4.10 works with httpx 0.28 (4.2.x
/// fails at start: `AsyncClient.__init__() got an unexpected keyword argument 'proxies'`,
/// checked with pip on 2026-11-30) and needs Python >= 3.9; older Pythons get the last 3.x,
/// which has no httpx-based extension manager.
pub fn default_jupyterlab(python: &Version) -> &'static str {
    if python.major_minor() == "3.7" || python.major_minor() == "3.8" {
        "3.6.8"
    } else {
        "4.4.10"
    }
}

/// The outcome: a lock when no error was found, and every diagnostic either way.
#[derive(Debug, Clone)]
pub struct Resolution {
    pub lock: Option<Lock>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Resolution {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// A target GPU after lookup.
#[derive(Debug, Clone)]
struct Gpu {
    input: String,
    model: Option<String>,
    cc: Cc,
    kind: Option<GpuKind>,
    min_driver: Option<Version>,
    last_branch: Option<u64>,
    family: Option<String>,
}

impl Gpu {
    fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{m} ({})", self.cc.sm()),
            None => self.cc.sm(),
        }
    }
}

/// One concrete build of torch: a wheel variant, a pytorch-channel selector or a conda-forge
/// CUDA build.
#[derive(Debug, Clone)]
struct Build {
    /// The spec value that selects it (`cuda` or `pytorch-cuda`), as major.minor.
    selector: Version,
    variant: Option<String>,
    cuda: Version,
    cudnn: Option<String>,
    nccl: Option<String>,
    arch: Vec<Cc>,
    ptx: Vec<Cc>,
    arch_confidence: Confidence,
    unconfirmed_arch: Vec<Cc>,
    ptx_confidence: Confidence,
    glibc: Version,
    glibc_confidence: Confidence,
    /// Warnings that come with choosing this build at all.
    notes: Vec<Diagnostic>,
}

fn v(s: &str) -> Version {
    // Only used on literals below.
    Version::parse(s).unwrap_or_else(|| Version::parse("0").expect("0 parses"))
}

fn err(code: &'static str, key: &str, message: String) -> Diagnostic {
    let mut d = Diagnostic::error(code, message);
    d.field = Some(key.to_string());
    d
}

fn warn(code: &'static str, key: &str, message: String) -> Diagnostic {
    let mut d = Diagnostic::warning(code, message);
    d.field = Some(key.to_string());
    d
}

/// An error decided by an unconfirmed fact becomes an UNCONFIRMED_FACT warning.
fn soften(d: Diagnostic, confidence: Confidence) -> Diagnostic {
    if d.is_error() && confidence.is_unconfirmed() {
        let mut w = Diagnostic::warning(
            UNCONFIRMED_FACT,
            format!(
                "{} (the table marks this fact unconfirmed, so it does not fail the lock)",
                d.message
            ),
        );
        w.hint = d.hint;
        w.field = d.field;
        w
    } else {
        d
    }
}

/// The selectors a source offers for a torch row, as major.minor CUDA versions.
fn selectors(t: &TorchRow, source: Source, platform: Platform) -> Vec<Version> {
    match source {
        Source::PytorchIndex | Source::Pypi => t
            .variants
            .iter()
            .chain(&t.experimental_variants)
            .filter_map(|var| variant_cuda(var))
            .collect(),
        Source::PytorchChannel => t.pytorch_channel.clone(),
        Source::CondaForge => match platform {
            Platform::Win64 => t.conda_forge_win.clone(),
            _ => t.conda_forge.clone(),
        },
    }
}

/// Describe the selectors for a message: `cu118, cu121, cu124` or `11.8, 12.1`.
fn list_selectors(t: &TorchRow, source: Source, platform: Platform) -> String {
    let s = selectors(t, source, platform);
    if s.is_empty() {
        return "none".into();
    }
    s.iter()
        .map(|x| match source {
            Source::PytorchIndex | Source::Pypi => variant_of(x),
            _ => x.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The build a source gives for a torch row and selector, or why there is none.
fn build_for(
    table: &Table,
    t: &TorchRow,
    source: Source,
    platform: Platform,
    selector: &Version,
) -> Result<Build, Diagnostic> {
    let series = v(&t.series());
    let mut notes = Vec::new();
    match source {
        Source::PytorchIndex | Source::Pypi => {
            let variant = variant_of(selector);
            let listed = t.variants.contains(&variant);
            let experimental = t.experimental_variants.contains(&variant);
            let key = if source == Source::Pypi {
                "pytorch"
            } else {
                "cuda"
            };
            if !listed && !experimental {
                return Err(err(
                    NO_SUCH_VARIANT,
                    key,
                    format!(
                        "torch {} has no {variant} wheels on the PyTorch index; it has {}",
                        t.version,
                        list_selectors(t, Source::PytorchIndex, platform)
                    ),
                ));
            }
            if experimental {
                notes.push(warn(
                    EXPERIMENTAL_VARIANT,
                    key,
                    format!(
                        "the {variant} build of torch {} is marked experimental by PyTorch",
                        t.version
                    ),
                ));
            }
            let w = table.wheel_row(&series, &variant).ok_or_else(|| {
                err(
                    NO_SUCH_VARIANT,
                    key,
                    format!(
                        "the table has no build facts for torch {} {variant}",
                        t.version
                    ),
                )
            })?;
            let (arch, ptx, mut arch_confidence) = match platform {
                Platform::LinuxAarch64 => {
                    let a = table
                        .wheel_aarch64
                        .iter()
                        .find(|r| r.variant == variant)
                        .ok_or_else(|| {
                            err(
                                NO_SUCH_VARIANT,
                                key,
                                format!("no Linux aarch64 CUDA wheels are known for {variant}"),
                            )
                        })?;
                    notes.push(warn(
                        UNCONFIRMED_FACT,
                        "target.platform",
                        format!("which torch releases publish Linux aarch64 {variant} wheels is not confirmed; torch {} is assumed to", t.version),
                    ));
                    (a.arch.clone(), a.ptx.clone(), a.confidence)
                }
                _ => (w.arch.clone(), w.ptx.clone(), w.confidence),
            };
            if platform == Platform::Win64 {
                notes.push(warn(
                    UNCONFIRMED_FACT,
                    "target.platform",
                    "Windows wheels may carry a different GPU architecture list than Linux; the Linux list is assumed".into(),
                ));
                arch_confidence = Confidence::Unconfirmed;
            }
            let (glibc, glibc_confidence) = match platform {
                Platform::LinuxAarch64 if t.version < v("2.6") => (v("2.17"), Confidence::Primary),
                Platform::LinuxAarch64 => (v("2.28"), Confidence::Primary),
                _ => (t.glibc.clone(), t.glibc_confidence),
            };
            Ok(Build {
                selector: selector.clone(),
                variant: Some(variant),
                cuda: w.cuda.clone(),
                cudnn: Some(w.cudnn.clone()),
                nccl: w.nccl.clone(),
                arch,
                ptx,
                arch_confidence,
                unconfirmed_arch: if platform == Platform::Linux64 {
                    w.unconfirmed_arch.clone()
                } else {
                    Vec::new()
                },
                ptx_confidence: w.ptx_confidence,
                glibc,
                glibc_confidence,
                notes,
            })
        }
        Source::PytorchChannel => {
            if !t.pytorch_channel.contains(selector) {
                return Err(err(
                    NO_SUCH_VARIANT,
                    "pytorch-cuda",
                    format!(
                        "{}={selector} is not published for torch {} on the pytorch channel; it has {}",
                        t.channel_selector(),
                        t.version,
                        list_selectors(t, source, platform)
                    ),
                ));
            }
            if platform == Platform::LinuxAarch64 {
                return Err(err(
                    NO_SUCH_VARIANT,
                    "target.platform",
                    "the pytorch conda channel published no Linux aarch64 CUDA builds".into(),
                ));
            }
            // The channel's builds came from the same builder images as the wheels.
            let w = table
                .wheel_row(&series, &variant_of(selector))
                .ok_or_else(|| {
                    err(
                        NO_SUCH_VARIANT,
                        "pytorch-cuda",
                        format!(
                            "the table has no build facts for torch {} with CUDA {selector}",
                            t.version
                        ),
                    )
                })?;
            Ok(Build {
                selector: selector.clone(),
                variant: None,
                cuda: w.cuda.clone(),
                cudnn: Some(w.cudnn.clone()),
                nccl: w.nccl.clone(),
                arch: w.arch.clone(),
                ptx: w.ptx.clone(),
                arch_confidence: w.confidence,
                unconfirmed_arch: w.unconfirmed_arch.clone(),
                ptx_confidence: w.ptx_confidence,
                glibc: v("2.17"),
                glibc_confidence: Confidence::Primary,
                notes,
            })
        }
        Source::CondaForge => {
            let builds = selectors(t, source, platform);
            if builds.is_empty() {
                return Err(err(
                    NO_SUCH_PACKAGE_VERSION,
                    "pytorch",
                    format!(
                        "conda-forge has no CUDA build of pytorch {} for {}",
                        t.version,
                        platform.as_str()
                    ),
                ));
            }
            if !builds.contains(selector) {
                return Err(err(
                    NO_SUCH_VARIANT,
                    "cuda",
                    format!(
                        "conda-forge's pytorch {} has no CUDA {selector} build; it has {}",
                        t.version,
                        list_selectors(t, source, platform)
                    ),
                ));
            }
            if platform == Platform::LinuxAarch64 && t.version < v("2.4") {
                return Err(err(
                    NO_SUCH_VARIANT,
                    "target.platform",
                    format!(
                        "conda-forge has Linux aarch64 CUDA builds of pytorch from 2.4 on, not {}",
                        t.version
                    ),
                ));
            }
            if t.conda_forge_confidence.is_unconfirmed() {
                notes.push(warn(
                    UNCONFIRMED_FACT,
                    "pytorch",
                    format!("that conda-forge publishes pytorch {} itself (not only another {}.x) is not confirmed", t.version, t.series()),
                ));
            }
            let b = table.conda_forge_build(selector).ok_or_else(|| {
                err(
                    NO_SUCH_VARIANT,
                    "cuda",
                    format!("the table has no conda-forge build facts for CUDA {selector}"),
                )
            })?;
            Ok(Build {
                selector: selector.clone(),
                variant: None,
                cuda: selector.clone(),
                cudnn: None,
                nccl: None,
                arch: b.arch.clone(),
                ptx: b.ptx.clone(),
                arch_confidence: b.confidence,
                unconfirmed_arch: Vec::new(),
                ptx_confidence: b.confidence,
                glibc: b.glibc.clone(),
                glibc_confidence: b.confidence,
                notes,
            })
        }
    }
}

/// How the target driver runs a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DriverMode {
    Native,
    MinorCompat,
    ForwardCompat,
    TooOld,
}

struct DriverFacts {
    native: Option<crate::core::compat::DriverReq>,
    floor: Option<crate::core::compat::DriverReq>,
}

fn driver_facts(table: &Table, build: &Build, os: Os) -> DriverFacts {
    DriverFacts {
        native: table.toolkit_driver(&build.cuda, os),
        floor: table.family_floor(build.cuda.major(), os),
    }
}

/// Check a build against the target: driver, GPU architectures, glibc, conda's `__cuda`.
/// Returns the diagnostics and, when a driver is given, the mode it runs in.
fn check_build(
    spec: &Spec,
    table: &Table,
    source: Source,
    gpus: &[Gpu],
    build: &Build,
) -> (Vec<Diagnostic>, Option<DriverMode>, Vec<LockedGpu>) {
    let mut out = Vec::new();
    let os = spec.target.platform.os();
    let facts = driver_facts(table, build, os);
    let cuda_label = format!("CUDA {}", build.cuda);
    let mut mode = None;

    if let Some(driver) = &spec.target.driver {
        let m = match (&facts.native, &facts.floor) {
            (Some(n), _) if *driver >= n.version => DriverMode::Native,
            (_, Some(f)) if *driver >= f.version => DriverMode::MinorCompat,
            (None, None) => DriverMode::Native,
            _ => DriverMode::TooOld,
        };
        let confidence = match m {
            DriverMode::Native => facts
                .native
                .as_ref()
                .map_or(Confidence::Primary, |n| n.confidence),
            _ => facts
                .floor
                .as_ref()
                .map_or(Confidence::Primary, |f| f.confidence)
                .max(
                    facts
                        .native
                        .as_ref()
                        .map_or(Confidence::Primary, |n| n.confidence),
                ),
        };
        let native_txt = facts
            .native
            .as_ref()
            .map(|n| n.version.to_string())
            .unwrap_or_else(|| "unknown".into());
        let m = match m {
            DriverMode::TooOld if spec.target.forward_compat => {
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
            DriverMode::TooOld => {
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
                out.push(soften(
                    err(
                        DRIVER_TOO_OLD,
                        "target.driver",
                        format!("driver {driver} is too old for {cuda_label} builds: they need {floor_txt}"),
                    ),
                    confidence,
                ));
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
        };
        mode = Some(m);

        // conda-forge CUDA builds depend on __cuda >= major (the driver's highest CUDA).
        if source == Source::CondaForge {
            let max = table.driver_max_cuda(driver).map(|b| b.max_cuda.clone());
            let ok = max
                .as_ref()
                .is_some_and(|mx| mx.major() >= build.cuda.major());
            if !ok {
                out.push(err(
                    VIRTUAL_PACKAGE_UNSATISFIED,
                    "target.driver",
                    format!(
                        "conda-forge's CUDA {} builds need the virtual package __cuda >= {}, but driver {driver} reports CUDA {}",
                        build.cuda,
                        build.cuda.major(),
                        max.map(|m| m.to_string()).unwrap_or_else(|| "(none)".into())
                    ),
                ));
            }
        }

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

    let mut locked = Vec::new();
    let arch_txt = || {
        let mut s: Vec<String> = build.arch.iter().map(Cc::sm).collect();
        s.extend(
            build
                .ptx
                .iter()
                .map(|p| format!("compute_{}{}", p.major, p.minor)),
        );
        s.join(" ")
    };
    for g in gpus {
        match coverage(&build.arch, &build.ptx, g.cc) {
            Coverage::Cubin(c) => {
                if build.arch_confidence.is_unconfirmed() || build.unconfirmed_arch.contains(&c) {
                    out.push(warn(
                        UNCONFIRMED_FACT,
                        "target.gpus",
                        format!("that this build carries {} for {} is not confirmed", c.sm(), g.label()),
                    ));
                }
                locked.push(LockedGpu { input: g.input.clone(), model: g.model.clone(), cc: g.cc.to_string(), runs_via: c.sm() });
            }
            Coverage::Ptx(p) => {
                let ptx = format!("compute_{}{}", p.major, p.minor);
                if mode == Some(DriverMode::MinorCompat) {
                    out.push(err(
                        DRIVER_TOO_OLD,
                        "target.driver",
                        format!(
                            "{} runs this build only by JIT-compiling its PTX ({ptx}), which needs the native driver (>= {}); under minor-version compatibility it fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                            g.label(),
                            facts.native.as_ref().map(|n| n.version.to_string()).unwrap_or_default()
                        ),
                    ));
                } else {
                    out.push(warn(
                        PTX_JIT,
                        "target.gpus",
                        format!("{} has no cubin in this build and runs through PTX JIT ({ptx}): slow first start, and cached kernels are lost with the container", g.label()),
                    ));
                }
                locked.push(LockedGpu { input: g.input.clone(), model: g.model.clone(), cc: g.cc.to_string(), runs_via: ptx });
            }
            Coverage::None => out.push(soften(
                err(
                    ARCH_NOT_IN_WHEEL,
                    "target.gpus",
                    format!(
                        "{} is not in this build's GPU architectures ({}): torch would fail with \"no kernel image is available for execution on the device\"",
                        g.label(),
                        arch_txt()
                    ),
                ),
                build.arch_confidence.max(build.ptx_confidence),
            )),
        }
    }

    if let Some(glibc) = &spec.target.glibc {
        if *glibc < build.glibc {
            out.push(soften(
                err(
                    GLIBC_TOO_OLD,
                    "target.glibc",
                    format!(
                        "this build of torch {} needs glibc >= {}, the target has {glibc}",
                        spec.pytorch, build.glibc
                    ),
                ),
                build.glibc_confidence,
            ));
        }
    }
    (out, mode, locked)
}

/// A concrete, working alternative for the hint, or `None`.
fn suggest(
    spec: &Spec,
    table: &Table,
    gpus: &[Gpu],
    exclude: Option<(&Version, Source, &Version)>,
) -> Option<String> {
    let platform = spec.target.platform;
    let python = &spec.python;
    // Some(number of warnings) when the build works for the target; fewer is better.
    let works = |t: &TorchRow, source: Source, sel: &Version| -> Option<usize> {
        if exclude.is_some_and(|(et, es, esel)| *et == t.version && es == source && esel == sel) {
            return None;
        }
        if !t.python.iter().any(|p| python.starts_with(p)) {
            return None;
        }
        if source == Source::PytorchChannel && spec.target.platform == Platform::Win64 {
            return None;
        }
        let b = build_for(table, t, source, platform, sel).ok()?;
        let (diags, _, _) = check_build(spec, table, source, gpus, &b);
        if diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        Some(diags.len() + b.notes.len())
    };
    let describe = |t: &TorchRow, source: Source, sel: &Version| -> String {
        let torch = if t.version == spec.pytorch {
            String::new()
        } else {
            format!("pytorch = \"{}\" with ", t.version)
        };
        match source {
            Source::PytorchIndex => format!(
                "{torch}source = \"pytorch-index\", cuda = \"{sel}\" (the {} wheels)",
                variant_of(sel)
            ),
            Source::Pypi => format!("{torch}source = \"pypi\""),
            Source::PytorchChannel => format!("{torch}pytorch-cuda = \"{sel}\""),
            Source::CondaForge => format!("{torch}channels = [\"conda-forge\"], cuda = \"{sel}\""),
        }
    };
    // The same torch first, from the same kind of source, then from the other sources; then
    // other torch releases, newest first. Prefer builds the target driver runs natively.
    let same: Vec<&TorchRow> = table.torch_row(&spec.pytorch).into_iter().collect();
    let others: Vec<&TorchRow> = table
        .torch
        .iter()
        .rev()
        .filter(|t| t.version != spec.pytorch)
        .collect();
    let mut sources = vec![spec.source];
    for s in [
        Source::PytorchIndex,
        Source::CondaForge,
        Source::PytorchChannel,
    ] {
        if !sources.contains(&s) {
            sources.push(s);
        }
    }
    // Rank: the same release from the same source, then the same release from another source,
    // then newer-first other releases; a clean build (no warnings) beats one with warnings,
    // except that staying on the same release and source matters most.
    let mut best: Option<(u8, String)> = None;
    for (same_torch, rows) in [(true, &same), (false, &others)] {
        for t in rows.iter() {
            for &source in &sources {
                let mut sels = selectors(t, source, platform);
                sels.reverse();
                for sel in &sels {
                    let Some(warnings) = works(t, source, sel) else {
                        continue;
                    };
                    let same_source = source == spec.source;
                    let tier = match (same_torch, same_source, warnings == 0) {
                        (true, true, true) => 0,
                        (true, false, true) => 1,
                        (true, true, false) => 2,
                        (false, true, true) => 3,
                        (true, false, false) => 4,
                        (false, false, true) => 5,
                        (false, _, false) => 6,
                    };
                    if best.as_ref().is_none_or(|(b, _)| tier < *b) {
                        best = Some((tier, describe(t, source, sel)));
                    }
                }
            }
        }
    }
    best.map(|(_, d)| d)
}

fn hint_with(d: Diagnostic, alt: &Option<String>, fallback: &str) -> Diagnostic {
    if d.hint.is_some() && !d.is_error() {
        return d;
    }
    let hint = match alt {
        Some(a) => format!("use {a}: it satisfies the driver and every GPU"),
        None => fallback.to_string(),
    };
    d.with_hint(hint)
}

/// Resolve a spec. `spec_sha256` is the hash of its canonical form (see `spec_hash`).
pub fn resolve(spec: &Spec, table: &Table, spec_sha256: &str) -> Resolution {
    let mut diags: Vec<Diagnostic> = Vec::new();
    let platform = spec.target.platform;

    let Some(t) = table.torch_row(&spec.pytorch) else {
        let series = spec.pytorch.major_minor();
        let same_series: Vec<String> = table
            .torch
            .iter()
            .filter(|r| r.series() == series)
            .map(|r| r.version.to_string())
            .collect();
        let hint = if same_series.is_empty() {
            format!(
                "known releases run from {} to {}; `envbuild table torch` lists them",
                table
                    .torch
                    .first()
                    .map(|r| r.version.to_string())
                    .unwrap_or_default(),
                table
                    .newest_torch()
                    .map(|r| r.version.to_string())
                    .unwrap_or_default()
            )
        } else {
            format!("the {series} releases are {}", same_series.join(", "))
        };
        diags.push(
            err(
                NO_SUCH_PACKAGE_VERSION,
                "pytorch",
                format!("PyTorch {} is not a known release", spec.pytorch),
            )
            .with_hint(hint),
        );
        return Resolution {
            lock: None,
            diagnostics: diags,
        };
    };

    // GPUs.
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
            None => {
                let sugg = table.gpu_suggestions(input);
                let hint = if sugg.is_empty() {
                    "name a known model (`envbuild table gpu`) or give its compute capability, e.g. \"8.9\"".to_string()
                } else {
                    format!(
                        "did you mean {}? Or give the compute capability, e.g. \"8.9\"",
                        sugg.iter()
                            .map(|s| format!("`{s}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    )
                };
                diags.push(
                    err(UNKNOWN_GPU, "target.gpus", format!("unknown GPU `{input}`"))
                        .with_hint(hint),
                );
            }
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
    if spec.target.driver.is_none() {
        diags.push(warn(NO_TARGET_DRIVER, "target", "no [target] driver: driver compatibility is not checked (the lock still records the minimum)".into()).with_hint("add e.g. driver = \"535.104.05\", the lowest driver on your machines"));
    }

    // Python.
    let py_minor = v(&spec.python.major_minor());
    let mut python_ok = true;
    if !t.python.contains(&py_minor) {
        python_ok = false;
        let newest_for_py = table
            .torch
            .iter()
            .rev()
            .find(|r| r.python.contains(&py_minor))
            .map(|r| r.version.to_string());
        let range = format!(
            "{}–{}",
            t.python.first().map(|p| p.to_string()).unwrap_or_default(),
            t.python.last().map(|p| p.to_string()).unwrap_or_default()
        );
        let hint = match newest_for_py {
            Some(nv) => format!("use python = \"{}\", or pytorch = \"{nv}\" (the newest release with Python {py_minor} wheels)", t.python.last().map(|p| p.to_string()).unwrap_or_default()),
            None => format!("use a Python in {range}"),
        };
        diags.push(
            err(
                PYTHON_UNSUPPORTED,
                "python",
                format!(
                    "torch {} has no wheels for Python {py_minor} (it supports {range})",
                    t.version
                ),
            )
            .with_hint(hint),
        );
    } else if t.python_experimental.contains(&py_minor) {
        diags.push(warn(
            PYTHON_EXPERIMENTAL,
            "python",
            format!(
                "Python {py_minor} support in torch {} is experimental",
                t.version
            ),
        ));
    }
    if let Some(row) = table.python_row(&py_minor) {
        if row.eol.as_str() <= table.meta.as_of.as_str() {
            diags.push(
                warn(
                    PYTHON_EOL,
                    "python",
                    format!(
                        "Python {py_minor} reached end of life on {} (no more security fixes)",
                        row.eol
                    ),
                )
                .with_hint(format!(
                    "move to a supported Python; torch {} supports up to {}",
                    t.version,
                    t.python.last().map(|p| p.to_string()).unwrap_or_default()
                )),
            );
        }
    }

    // Channel end and required channels.
    let channel_row = table.channel_row("pytorch");
    if spec.source == Source::PytorchChannel {
        if let Some(last) = channel_row.and_then(|c| c.last_torch.as_ref()) {
            if spec.pytorch > *last {
                let mut d = err(
                    CHANNEL_DISCONTINUED,
                    "pytorch",
                    format!("PyTorch {} is not published on the `pytorch` conda channel: its last release is {last} (the channel ended in {})", spec.pytorch, channel_row.and_then(|c| c.ended.clone()).unwrap_or_default()),
                );
                let alt = suggest(spec, table, &gpus, None);
                d.hint = Some(match alt {
                    Some(a) => format!("use {a}, or pytorch = \"{last}\" on the channel"),
                    None => format!(
                        "use source = \"pytorch-index\" with `cuda`, or pytorch = \"{last}\""
                    ),
                });
                diags.push(d);
                return Resolution {
                    lock: None,
                    diagnostics: diags,
                };
            }
        }
    }

    // The selector and the build.
    let selector = match spec.source {
        Source::PytorchChannel => spec.pytorch_cuda.clone(),
        Source::CondaForge | Source::PytorchIndex => spec.cuda.clone(),
        Source::Pypi => variant_cuda(&t.pypi_default),
    };
    let Some(selector) = selector else {
        diags.push(err(NO_SUCH_VARIANT, "cuda", "no CUDA selector".into()));
        return Resolution {
            lock: None,
            diagnostics: diags,
        };
    };
    if spec.source == Source::Pypi {
        let no_cuda = match platform {
            Platform::Win64 => Some("PyPI's Windows torch wheel is CPU-only: CUDA wheels for Windows come only from the PyTorch index"),
            Platform::LinuxAarch64 if t.version < v("2.11") => Some("PyPI's Linux aarch64 torch wheel is CPU-only before 2.11"),
            _ => None,
        };
        if let Some(why) = no_cuda {
            diags.push(
                err(NO_SUCH_VARIANT, "source", why.to_string()).with_hint(format!(
                    "use source = \"pytorch-index\" with cuda = \"{}\"",
                    selector
                )),
            );
            return Resolution {
                lock: None,
                diagnostics: diags,
            };
        }
        if t.pypi_default_confidence.is_unconfirmed() {
            diags.push(warn(
                UNCONFIRMED_FACT,
                "pytorch",
                format!(
                    "that PyPI's torch {} is the {} build is not confirmed",
                    t.version, t.pypi_default
                ),
            ));
        }
    }
    let build = match build_for(table, t, spec.source, platform, &selector) {
        Ok(b) => b,
        Err(d) => {
            let alt = suggest(spec, table, &gpus, None);
            diags.push(hint_with(
                d,
                &alt,
                "`envbuild table torch` lists every release and its builds",
            ));
            return Resolution {
                lock: None,
                diagnostics: diags,
            };
        }
    };
    diags.extend(build.notes.iter().cloned());

    let (checks, mode, locked_gpus) = check_build(spec, table, spec.source, &gpus, &build);
    let any_error = checks.iter().any(Diagnostic::is_error);
    let alt = if any_error {
        suggest(
            spec,
            table,
            &gpus,
            Some((&t.version, spec.source, &build.selector)),
        )
    } else {
        None
    };
    for d in checks {
        let d = if d.is_error() {
            match d.code {
                DRIVER_TOO_OLD
                | ARCH_NOT_IN_WHEEL
                | GLIBC_TOO_OLD
                | VIRTUAL_PACKAGE_UNSATISFIED => {
                    let fallback = match d.code {
                        GLIBC_TOO_OLD => "torch <= 2.5.1 wheels need only glibc 2.17; or raise the target's glibc",
                        DRIVER_TOO_OLD => "upgrade the driver on the target machines",
                        _ => "no release in the table satisfies the driver and every GPU; check `envbuild table`",
                    };
                    hint_with(d, &alt, fallback)
                }
                _ => d,
            }
        } else {
            d
        };
        diags.push(d);
    }

    // Channels.
    let channels = spec.channels.clone();
    if spec.source == Source::PytorchChannel {
        for needed in ["pytorch", "nvidia"] {
            if needed == "nvidia" && t.channel_selector() != "pytorch-cuda" {
                continue;
            }
            if !channels.iter().any(|c| c == needed) {
                diags.push(
                    err(
                        CHANNEL_REQUIRED,
                        "channels",
                        format!("source `pytorch-channel` needs the `{needed}` channel"),
                    )
                    .with_hint(format!(
                        "add \"{needed}\" to channels, e.g. channels = [\"pytorch\", \"nvidia\"{}]",
                        if channels.iter().any(|c| c == "defaults") {
                            ", \"defaults\""
                        } else {
                            ""
                        }
                    )),
                );
            }
        }
    }
    if spec.source == Source::CondaForge {
        let mixed: Vec<&String> = channels
            .iter()
            .filter(|c| *c == "defaults" || *c == "pytorch")
            .collect();
        if !mixed.is_empty() {
            diags.push(
                warn(
                    CHANNEL_MIX,
                    "channels",
                    format!(
                        "conda-forge's pytorch mixed with {} can pull incompatible builds",
                        mixed
                            .iter()
                            .map(|c| format!("`{c}`"))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                )
                .with_hint("use channels = [\"conda-forge\"] alone"),
            );
        }
        if !channels.iter().any(|c| c == "conda-forge") {
            diags.push(
                err(
                    CHANNEL_REQUIRED,
                    "channels",
                    "source `conda-forge` needs the `conda-forge` channel".into(),
                )
                .with_hint("add \"conda-forge\" to channels"),
            );
        }
    }

    // Companions.
    let mut packages: BTreeMap<String, String> = BTreeMap::new();
    let mut notes: Vec<String> = Vec::new();
    packages.insert("python".into(), spec.python.to_string());
    packages.insert("torch".into(), t.version.to_string());
    let conda_companion = |pip: &String, conda: &Option<String>| {
        if spec.source.is_conda() {
            conda.clone().unwrap_or_else(|| pip.clone())
        } else {
            pip.clone()
        }
    };
    if spec.torchvision {
        packages.insert(
            "torchvision".into(),
            conda_companion(&t.torchvision, &t.torchvision_conda),
        );
        if t.torchvision_confidence.is_unconfirmed() {
            diags.push(warn(
                UNCONFIRMED_FACT,
                "torchvision",
                format!(
                    "torchvision {} as the match for torch {} is not confirmed",
                    t.torchvision, t.version
                ),
            ));
        }
    }
    if spec.torchaudio {
        packages.insert(
            "torchaudio".into(),
            conda_companion(&t.torchaudio, &t.torchaudio_conda),
        );
        if t.torchaudio_frozen {
            diags.push(
                warn(TORCHAUDIO_FROZEN, "torchaudio", format!("torchaudio is no longer released per torch version; {} (built on the stable ABI) is used with torch {}", t.torchaudio, t.version))
                    .with_hint("set torchaudio = false if you do not need it; audio I/O moved to TorchCodec"),
            );
            notes.push(format!(
                "torchaudio {}: the last torchaudio release, which works with torch >= 2.11",
                t.torchaudio
            ));
        }
    }
    for c in &spec.conda {
        packages.insert(c.name.clone(), c.version.clone());
    }
    for p in &spec.pip {
        packages.insert(p.name.clone(), p.version.clone());
    }
    // NumPy 2 breaks torch <= 2.2.
    let mut added_numpy = None;
    if t.numpy1 {
        match packages
            .get("numpy")
            .and_then(|n| Version::parse(n.split(['.', '+']).next().unwrap_or(n)))
        {
            Some(major) if major.major() >= 2 => diags.push(
                err(
                    CONFLICTING_PIN,
                    if spec.pip.iter().any(|p| p.name == "numpy") {
                        "pip"
                    } else {
                        "conda"
                    },
                    format!(
                        "numpy {} does not work with torch {} (built against NumPy 1.x)",
                        packages["numpy"], t.version
                    ),
                )
                .with_hint(format!(
                    "pin numpy to {}",
                    table
                        .numpy1_for(&py_minor)
                        .map(|n| n.version.clone())
                        .unwrap_or_else(|| "a 1.x release".into())
                )),
            ),
            Some(_) => {}
            None => {
                if let Some(n) = table.numpy1_for(&py_minor) {
                    packages.insert("numpy".into(), n.version.clone());
                    added_numpy = Some(n.version.clone());
                    notes.push(format!(
                        "numpy {} added: torch {} fails with NumPy 2",
                        n.version, t.version
                    ));
                }
            }
        }
    }
    let add_mkl = spec.source == Source::PytorchChannel && !packages.contains_key("mkl");
    if add_mkl {
        packages.insert("mkl".into(), "2024.0.0".into());
        notes.push("mkl 2024.0.0 added: pytorch-channel builds fail with mkl >= 2024.1 (undefined symbol iJIT_NotifyEvent)".into());
    }

    if !python_ok || diags.iter().any(Diagnostic::is_error) {
        return Resolution {
            lock: None,
            diagnostics: diags,
        };
    }

    // Base image.
    let wants_conda = spec.source.is_conda() || !spec.conda.is_empty();
    let (base, base_kind) = match &spec.image.base {
        Some(b) => (b.clone(), if wants_conda { "conda" } else { "wheel" }),
        None => {
            let row = table.base_image.iter().find(|r| {
                if wants_conda {
                    r.kind == crate::core::compat::BaseKind::Conda
                } else {
                    r.kind == crate::core::compat::BaseKind::Wheel
                        && r.python.as_ref() == Some(&py_minor)
                }
            });
            match row {
                Some(r) if r.glibc >= build.glibc => {
                    (r.image.clone(), if wants_conda { "conda" } else { "wheel" })
                }
                _ => {
                    diags.push(err(NO_SUCH_VARIANT, "image.base", format!("the table has no base image for Python {py_minor} with glibc >= {}", build.glibc)).with_hint("set [image] base to a pinned image"));
                    return Resolution {
                        lock: None,
                        diagnostics: diags,
                    };
                }
            }
        }
    };

    // Install lines.
    let provided = |p: &str| spec.image.base_provides.iter().any(|b| b == p);
    let mut conda: Vec<String> = Vec::new();
    let mut pip: Vec<String> = Vec::new();
    let mut extra_index = Vec::new();
    let mut index_url = None;
    let mut override_cuda = None;
    if wants_conda || spec.source.is_conda() {
        conda.push(if spec.python.len() == 3 {
            format!("python=={}", spec.python)
        } else {
            format!("python={}", spec.python)
        });
    }
    let torch_pkgs: Vec<(&str, String)> = ["torch", "torchvision", "torchaudio"]
        .iter()
        .filter(|n| packages.contains_key(**n) && !provided(n))
        .map(|n| (*n, packages[*n].clone()))
        .collect();
    match spec.source {
        Source::PytorchChannel => {
            for (n, ver) in &torch_pkgs {
                let name = if *n == "torch" { "pytorch" } else { n };
                conda.push(format!("pytorch::{name}=={ver}"));
            }
            let sel = t.channel_selector();
            let sel_channel = if sel == "pytorch-cuda" {
                "pytorch"
            } else if selector == v("11.6") {
                "conda-forge"
            } else {
                "pytorch"
            };
            conda.push(format!("{sel_channel}::{sel}={selector}"));
        }
        Source::CondaForge => {
            for (n, ver) in &torch_pkgs {
                if *n == "torch" {
                    conda.push(format!("conda-forge::pytorch=={ver}=cuda*"));
                } else {
                    conda.push(format!("conda-forge::{n}=={ver}"));
                }
            }
            conda.push(format!("conda-forge::cuda-version=={}", build.cuda));
            override_cuda = Some(build.cuda.to_string());
        }
        Source::PytorchIndex | Source::Pypi => {
            let variant = build.variant.clone().unwrap_or_default();
            for (n, ver) in &torch_pkgs {
                // torch carries the variant's local version so it can only come from the index;
                // companions match their +cuXYZ builds there (PEP 440 prefers the local one).
                if spec.source == Source::PytorchIndex && *n == "torch" {
                    pip.push(format!("torch=={ver}+{variant}"));
                } else {
                    pip.push(format!("{n}=={ver}"));
                }
            }
            if spec.source == Source::PytorchIndex {
                let url = format!("{INDEX_BASE}/{variant}");
                extra_index.push(url.clone());
                index_url = Some(url);
            }
        }
    }
    if let Some(n) = &added_numpy {
        if spec.source.is_conda() {
            conda.push(format!("numpy=={n}"));
        } else {
            pip.push(format!("numpy=={n}"));
        }
    }
    if add_mkl {
        conda.push("mkl==2024.0.0".into());
    }
    conda.extend(spec.conda.iter().map(|c| c.match_spec()));
    pip.extend(spec.pip.iter().map(|p| p.requirement()));
    if wants_conda && !pip.is_empty() && !spec.conda.iter().any(|c| c.name == "pip") {
        conda.push("pip".into());
    }
    let mut auto_added = Vec::new();
    if added_numpy.is_some() {
        auto_added.push("numpy".to_string());
    }
    if add_mkl {
        auto_added.push("mkl".to_string());
    }

    let facts = driver_facts(table, &build, platform.os());
    let jupyterlab = spec
        .image
        .jupyterlab
        .clone()
        .or_else(|| packages.get("jupyterlab").cloned())
        .unwrap_or_else(|| default_jupyterlab(&spec.python).to_string());
    let lock = Lock {
        version: LOCK_VERSION,
        name: spec.name.clone(),
        spec_sha256: spec_sha256.to_string(),
        table_version: table.meta.version.clone(),
        source: spec.source,
        platform,
        channels,
        index_url,
        packages,
        cuda: build.cuda.to_string(),
        cuda_variant: build.variant.clone(),
        cudnn: build.cudnn.clone(),
        nccl: build.nccl.clone(),
        driver_min: facts
            .native
            .map(|n| n.version.to_string())
            .unwrap_or_else(|| "unknown".into()),
        driver_min_compat: facts.floor.map(|f| f.version.to_string()),
        driver_target: spec.target.driver.as_ref().map(|d| d.to_string()),
        driver_mode: mode.map(|m| {
            match m {
                DriverMode::Native => "native",
                DriverMode::MinorCompat => "minor-compat",
                DriverMode::ForwardCompat => "forward-compat",
                DriverMode::TooOld => "too-old",
            }
            .to_string()
        }),
        forward_compat: spec.target.forward_compat,
        arch_list: build.arch.iter().map(Cc::sm).collect(),
        ptx: build
            .ptx
            .iter()
            .map(|p| format!("compute_{}{}", p.major, p.minor))
            .collect(),
        glibc_min: build.glibc.to_string(),
        glibc_target: spec.target.glibc.as_ref().map(|g| g.to_string()),
        auto_added,
        install: Install {
            conda: if wants_conda { conda } else { Vec::new() },
            pip,
            pip_extra_index_urls: extra_index,
            conda_override_cuda: override_cuda,
        },
        image: LockedImage {
            base,
            base_override: spec.image.base.clone(),
            base_digest: None,
            base_kind: base_kind.to_string(),
            base_provides: spec.image.base_provides.clone(),
            variants: spec.image.variants.clone(),
            wheels: spec.image.wheels.clone(),
            ssh: spec.image.ssh,
            jupyterlab,
            jupyterlab_pinned: spec.image.jupyterlab.clone(),
            shm_size: spec.run.shm_size.clone(),
            port: spec.run.port,
            datasets: spec.run.datasets.clone(),
            checkpoints: spec.run.checkpoints.clone(),
        },
        gpus: locked_gpus,
        notes,
    };
    Resolution {
        lock: Some(lock),
        diagnostics: diags,
    }
}

/// sha256 of the spec's canonical JSON form.
pub fn spec_hash(spec: &Spec) -> String {
    crate::core::hash::sha256_hex(serde_json::to_string(spec).unwrap_or_default().as_bytes())
}

#[cfg(test)]
mod tests;
