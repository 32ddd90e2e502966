//! The `[target]` section: the host's NVIDIA driver, its GPUs, the platform and glibc.
//! This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::context::Ctx;
use super::raw::RawTarget;
use super::{Platform, Target};
use crate::core::version::Version;

/// `[target]`; `None` only when the platform is unknown, since resolution needs it.
pub(super) fn target(cx: &mut Ctx, t: &RawTarget) -> Option<Target> {
    let driver = driver(cx, t.driver.as_deref());
    let gpus = gpus(cx, &t.gpus);
    let platform = platform(cx, t.platform.as_deref());
    let glibc = glibc(cx, t.glibc.as_deref());
    platform.map(|platform| Target {
        driver,
        gpus,
        platform,
        glibc,
        forward_compat: t.forward_compat.unwrap_or(false),
    })
}

fn driver(cx: &mut Ctx, d: Option<&str>) -> Option<Version> {
    let d = d?;
    if !cx.safe("target.driver", d) {
        return None;
    }
    // A branch (`550`, `R550`) stands for its oldest driver, the conservative reading: the
    // one-part version sorts before every release of the branch.
    let branch = d.strip_prefix(['R', 'r']).unwrap_or(d);
    match Version::parse(branch) {
        Some(v) if v.major() >= 100 && (v.len() == 1 || branch == d) => Some(v),
        _ => {
            cx.err(
                INVALID_SPEC,
                "target.driver",
                format!("driver `{d}` is not an NVIDIA driver version"),
                Some("use the version nvidia-smi prints, e.g. \"535.104.05\", or a branch (\"R535\")".into()),
            );
            None
        }
    }
}

/// GPU models or compute capabilities, trimmed and without repeats.
fn gpus(cx: &mut Ctx, list: &[String]) -> Vec<String> {
    let mut gpus = Vec::new();
    for g in list {
        if cx.safe("target.gpus", g) {
            let g = g.trim().to_string();
            if g.is_empty() {
                cx.err(
                    INVALID_SPEC,
                    "target.gpus",
                    "an entry of `gpus` is empty".into(),
                    Some("name a GPU model (\"A100\") or a compute capability (\"8.0\")".into()),
                );
            } else if !gpus.contains(&g) {
                gpus.push(g);
            }
        }
    }
    gpus
}

fn platform(cx: &mut Ctx, p: Option<&str>) -> Option<Platform> {
    let Some(p) = p else {
        return Some(Platform::Linux64);
    };
    let parsed = Platform::parse(p);
    if parsed.is_none() && cx.safe("target.platform", p) {
        cx.err(
            INVALID_SPEC,
            "target.platform",
            format!("unknown platform `{p}`"),
            Some("use linux-64, linux-aarch64 or win-64".into()),
        );
    }
    parsed
}

fn glibc(cx: &mut Ctx, g: Option<&str>) -> Option<Version> {
    let g = g?;
    if !cx.safe("target.glibc", g) {
        return None;
    }
    match Version::parse(g) {
        Some(v) if v.len() == 2 && v.major() == 2 => Some(v),
        _ => {
            cx.err(
                INVALID_SPEC,
                "target.glibc",
                format!("glibc `{g}` is not a glibc version"),
                Some("use e.g. \"2.17\" (ldd --version prints it)".into()),
            );
            None
        }
    }
}
