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
    let platforms = platforms(cx, t.platform.is_some(), t.platforms.as_deref());
    // One platform in `platforms` is `platform`, so both spellings give the same spec.
    let (platform, platforms, platform_given) = match platforms.as_slice() {
        [] => (platform, platforms, t.platform.is_some()),
        [one] => (Some(*one), Vec::new(), true),
        [first, ..] => (Some(*first), platforms, true),
    };
    let glibc = glibc(cx, t.glibc.as_deref());
    platform.map(|platform| Target {
        driver,
        gpus,
        platform,
        platforms,
        platform_given,
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

/// `[target] platforms`: a fleet, sorted and without repeats. Not with `platform` beside it.
fn platforms(cx: &mut Ctx, has_platform: bool, list: Option<&[String]>) -> Vec<Platform> {
    let Some(list) = list else {
        return Vec::new();
    };
    if has_platform {
        cx.err(
            INVALID_SPEC,
            "target.platforms",
            "`platform` and `platforms` are both given".into(),
            Some("keep `platforms` for a fleet of several platforms, `platform` for one".into()),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for p in list {
        match Platform::parse(p) {
            Some(p) => out.push(p),
            None if cx.safe("target.platforms", p) => cx.err(
                INVALID_SPEC,
                "target.platforms",
                format!("unknown platform `{p}`"),
                Some("use linux-64, linux-aarch64 or win-64".into()),
            ),
            None => {}
        }
    }
    out.sort();
    out.dedup();
    if list.is_empty() {
        cx.err(
            INVALID_SPEC,
            "target.platforms",
            "`platforms` is empty".into(),
            Some("name the platforms of the fleet, e.g. [\"linux-64\", \"linux-aarch64\"], or leave the key out".into()),
        );
    }
    out
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
