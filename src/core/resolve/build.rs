//! Build selection: the selector a spec gives (a wheel variant's CUDA, `pytorch-cuda` or a
//! conda-forge CUDA) and the concrete torch build a source publishes for it, with its CUDA
//! libraries, GPU architectures and glibc floor. This module performs no I/O.

use super::codes::*;
use super::types::{Ask, Build, Findings};
use super::{err, v, warn};
use crate::core::compat::{variant_cuda, variant_of, Confidence, Table, TorchRow, WheelRow};
use crate::core::diag::Diagnostic;
use crate::core::spec::{Platform, Source, Spec};
use crate::core::version::{Cc, Version};

/// The selectors a source offers for a torch row, as major.minor CUDA versions.
pub(super) fn selectors(t: &TorchRow, source: Source, platform: Platform) -> Vec<Version> {
    match source {
        Source::PytorchIndex => t
            .variants
            .iter()
            .chain(&t.experimental_variants)
            .filter_map(|var| variant_cuda(var))
            .collect(),
        // PyPI carries one CUDA build per release.
        Source::Pypi => variant_cuda(&t.pypi_default).into_iter().collect(),
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

/// The selector the spec gives for its source; `None` after pushing the error when there is
/// none, or when PyPI has no CUDA wheel for the platform.
pub(super) fn selector(spec: &Spec, t: &TorchRow, found: &mut Findings) -> Option<Version> {
    let selector = match spec.source {
        Source::PytorchChannel => spec.pytorch_cuda.clone(),
        Source::CondaForge | Source::PytorchIndex => spec.cuda.clone(),
        Source::Pypi => variant_cuda(&t.pypi_default),
    };
    let Some(selector) = selector else {
        found
            .diags
            .push(err(NO_SUCH_VARIANT, "cuda", "no CUDA selector".into()));
        return None;
    };
    if spec.source == Source::Pypi && !pypi_has_cuda(spec, t, &selector, found) {
        return None;
    }
    Some(selector)
}

/// PyPI's torch wheel is a CUDA build only on some platforms; false after pushing the error,
/// whose hint names the same CUDA from the PyTorch index.
fn pypi_has_cuda(spec: &Spec, t: &TorchRow, selector: &Version, found: &mut Findings) -> bool {
    let no_cuda = match spec.target.platform {
        Platform::Win64 => Some("PyPI's Windows torch wheel is CPU-only: CUDA wheels for Windows come only from the PyTorch index"),
        Platform::LinuxAarch64 if t.version < v("2.11") => Some("PyPI's Linux aarch64 torch wheel is CPU-only before 2.11"),
        _ => None,
    };
    if let Some(why) = no_cuda {
        let selector = selector.clone();
        found.ask(
            err(NO_SUCH_VARIANT, "source", why.to_string()),
            Ask::CudaWheel { selector },
        );
        return false;
    }
    if t.pypi_default_confidence.is_unconfirmed() {
        found.diags.push(warn(
            UNCONFIRMED_FACT,
            "pytorch",
            format!(
                "that PyPI's torch {} is the {} build is not confirmed",
                t.version, t.pypi_default
            ),
        ));
    }
    true
}

/// The build a source gives for a torch row and selector, or why there is none.
pub(super) fn build_for(
    table: &Table,
    t: &TorchRow,
    source: Source,
    platform: Platform,
    selector: &Version,
) -> Result<Build, Diagnostic> {
    match source {
        Source::PytorchIndex | Source::Pypi => wheel_build(table, t, source, platform, selector),
        Source::PytorchChannel => channel_build(table, t, platform, selector),
        Source::CondaForge => conda_forge_build(table, t, platform, selector),
    }
}

/// A wheel of the PyTorch index (or PyPI's, which is one of them).
fn wheel_build(
    table: &Table,
    t: &TorchRow,
    source: Source,
    platform: Platform,
    selector: &Version,
) -> Result<Build, Diagnostic> {
    let series = v(&t.series());
    let mut notes = Vec::new();
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
    let facts = wheel_arch(table, t, w, platform, &variant, key, &mut notes)?;
    let (arch, ptx, arch_confidence) = (facts.arch, facts.ptx, facts.confidence);
    Ok(Build {
        selector: selector.clone(),
        variant: Some(variant),
        cuda: facts.cuda,
        cudnn: Some(w.cudnn.clone()),
        cudnn_confidence: w.cudnn_confidence,
        nccl: w.nccl.clone(),
        arch,
        ptx,
        arch_confidence,
        unconfirmed_arch: if platform == Platform::Linux64 {
            w.unconfirmed_arch.clone()
        } else {
            Vec::new()
        },
        ptx_confidence: facts.ptx_confidence,
        glibc: facts.glibc,
        glibc_confidence: facts.glibc_confidence,
        variant_confidence: match source {
            Source::Pypi => t.pypi_default_confidence,
            _ => Confidence::Primary,
        },
        notes,
    })
}

/// What a wheel carries on one platform: its CUDA, GPU architectures and glibc floor.
struct WheelFacts {
    cuda: Version,
    arch: Vec<Cc>,
    ptx: Vec<Cc>,
    confidence: Confidence,
    ptx_confidence: Confidence,
    glibc: Version,
    glibc_confidence: Confidence,
}

/// A wheel's facts on the platform: aarch64 wheels have their own row (the series' own, read
/// off its wheel, else the variant's from build scripts), and the Windows list is assumed to be
/// Linux's. The glibc floor is the variant's where its row gives one, else the release's.
fn wheel_arch(
    table: &Table,
    t: &TorchRow,
    w: &WheelRow,
    platform: Platform,
    variant: &str,
    key: &str,
    notes: &mut Vec<Diagnostic>,
) -> Result<WheelFacts, Diagnostic> {
    let mut f = WheelFacts {
        cuda: w.cuda.clone(),
        arch: w.arch.clone(),
        ptx: w.ptx.clone(),
        confidence: w.confidence,
        ptx_confidence: w.ptx_confidence,
        glibc: w.glibc.clone().unwrap_or_else(|| t.glibc.clone()),
        glibc_confidence: match w.glibc {
            Some(_) => Confidence::Primary,
            None => t.glibc_confidence,
        },
    };
    match platform {
        Platform::LinuxAarch64 => {
            let a = table
                .wheel_aarch64_row(&v(&t.series()), variant)
                .ok_or_else(|| {
                    err(
                        NO_SUCH_VARIANT,
                        key,
                        format!("no Linux aarch64 CUDA wheels are known for {variant}"),
                    )
                })?;
            if a.torch.is_none() {
                notes.push(warn(
                    UNCONFIRMED_FACT,
                    "target.platform",
                    format!("which torch releases publish Linux aarch64 {variant} wheels is not confirmed; torch {} is assumed to", t.version),
                ));
            }
            f.arch = a.arch.clone();
            f.ptx = a.ptx.clone();
            f.confidence = a.confidence;
            f.ptx_confidence = a.confidence;
            f.cuda = a.cuda.clone().unwrap_or(f.cuda);
            // aarch64 wheels are manylinux2014 (2.17) before 2.6 and manylinux_2_28 from it.
            f.glibc = a
                .glibc
                .clone()
                .unwrap_or_else(|| match t.version < v("2.6") {
                    true => v("2.17"),
                    false => v("2.28"),
                });
            f.glibc_confidence = Confidence::Primary;
        }
        Platform::Win64 => {
            notes.push(warn(
                UNCONFIRMED_FACT,
                "target.platform",
                "Windows wheels may carry a different GPU architecture list than Linux; the Linux list is assumed".into(),
            ));
            f.confidence = Confidence::Unconfirmed;
        }
        Platform::Linux64 => {}
    }
    Ok(f)
}

/// A build of the (discontinued) `pytorch` conda channel.
fn channel_build(
    table: &Table,
    t: &TorchRow,
    platform: Platform,
    selector: &Version,
) -> Result<Build, Diagnostic> {
    let series = v(&t.series());
    if !t.pytorch_channel.contains(selector) {
        return Err(err(
            NO_SUCH_VARIANT,
            "pytorch-cuda",
            format!(
                "{}={selector} is not published for torch {} on the pytorch channel; it has {}",
                t.channel_selector(),
                t.version,
                list_selectors(t, Source::PytorchChannel, platform)
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
        cudnn_confidence: w.cudnn_confidence,
        nccl: w.nccl.clone(),
        arch: w.arch.clone(),
        ptx: w.ptx.clone(),
        arch_confidence: w.confidence,
        unconfirmed_arch: w.unconfirmed_arch.clone(),
        ptx_confidence: w.ptx_confidence,
        glibc: v("2.17"),
        glibc_confidence: Confidence::Primary,
        variant_confidence: Confidence::Primary,
        notes: Vec::new(),
    })
}

/// A conda-forge CUDA build.
fn conda_forge_build(
    table: &Table,
    t: &TorchRow,
    platform: Platform,
    selector: &Version,
) -> Result<Build, Diagnostic> {
    let mut notes = Vec::new();
    conda_forge_published(t, platform, selector)?;
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
        cudnn_confidence: Confidence::Primary,
        nccl: None,
        arch: b.arch.clone(),
        ptx: b.ptx.clone(),
        arch_confidence: b.confidence,
        unconfirmed_arch: Vec::new(),
        ptx_confidence: b.confidence,
        glibc: b.glibc.clone(),
        glibc_confidence: b.confidence,
        variant_confidence: Confidence::Primary,
        notes,
    })
}

/// Whether conda-forge publishes a CUDA build of this pytorch for the selector and platform.
fn conda_forge_published(
    t: &TorchRow,
    platform: Platform,
    selector: &Version,
) -> Result<(), Diagnostic> {
    let source = Source::CondaForge;
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
    Ok(())
}
