//! The `[run]` section: how the rendered run snippets (`run/docker-run.sh`, `compose.yaml`,
//! `pod.yaml`) start a container (shared memory, the JupyterLab port, dataset and checkpoint
//! mounts). This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::context::Ctx;
use super::raw::RawRun;
use super::Run;
use crate::core::rules::is_safe_path;

/// `[run]`, with its defaults (16g of shared memory, port 8888).
pub(super) fn run(cx: &mut Ctx, r: &RawRun) -> Run {
    let shm_size = shm_size(cx, r.shm_size.as_deref());
    let datasets = mount(cx, "run.datasets", r.datasets.as_deref());
    let checkpoints = mount(cx, "run.checkpoints", r.checkpoints.as_deref());
    if r.port == Some(0) {
        cx.err(
            INVALID_SPEC,
            "run.port",
            "port 0 is not a port".into(),
            Some("use e.g. 8888".into()),
        );
    }
    Run {
        shm_size,
        port: r.port.unwrap_or(8888),
        datasets,
        checkpoints,
    }
}

/// Digits with an optional k/m/g suffix (`core::rules::shm_size`), lowercased; empty when
/// refused.
fn shm_size(cx: &mut Ctx, s: Option<&str>) -> String {
    let Some(s) = s else {
        return "16g".to_string();
    };
    if !cx.safe("run.shm-size", s) {
        return String::new();
    }
    match crate::core::rules::shm_size(s) {
        Ok(size) => size,
        Err(why) => {
            cx.err(
                INVALID_SPEC,
                "run.shm-size",
                format!("shm-size `{s}` {why}"),
                Some("use e.g. \"16g\" or \"512m\"".into()),
            );
            String::new()
        }
    }
}

/// A mount point inside the container: an absolute path of plain characters.
fn mount(cx: &mut Ctx, key: &str, p: Option<&str>) -> Option<String> {
    let p = p?;
    if !cx.safe(key, p) {
        return None;
    }
    if is_safe_path(p, true) {
        return Some(p.to_string());
    }
    cx.err(
        INVALID_SPEC,
        key,
        format!("`{key}` must be an absolute path, e.g. \"/data\""),
        Some("letters, digits, `.`, `_`, `-` and `/` only".into()),
    );
    None
}
