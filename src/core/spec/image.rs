//! The `[image]` section: the base image and what it provides, the variants, local wheels,
//! SSH and JupyterLab. This module performs no I/O.

use super::codes::{INVALID_SPEC, UNPINNED_VERSION};
use super::context::Ctx;
use super::pins::{is_pkg_version, unpinned};
use super::raw::RawImage;
use super::{Image, Variant};
use crate::core::image_ref::ImageRef;
use crate::core::rules::project_subdir;

/// `[image]`, checked key by key in the order the keys are documented.
pub(super) fn image(cx: &mut Ctx, i: &RawImage) -> Image {
    let base = base(cx, i.base.as_deref());
    let variants = variants(cx, i.variants.as_deref());
    let base_provides = base_provides(cx, &i.base_provides, i.base.is_some());
    let wheels = wheels(cx, i.wheels.as_deref());
    let jupyterlab = jupyterlab(cx, i.jupyterlab.as_deref());
    let ca_bundle = ca_bundle(cx, i.ca_bundle.as_deref());
    Image {
        base,
        variants,
        base_provides,
        wheels,
        ssh: i.ssh.unwrap_or(false),
        jupyterlab,
        ca_bundle,
    }
}

/// A pinned image reference; a floating one is reported as unpinned.
fn base(cx: &mut Ctx, b: Option<&str>) -> Option<String> {
    let b = b?;
    if !cx.safe("image.base", b) {
        return None;
    }
    match ImageRef::pinned(b) {
        Ok(_) => Some(b.to_string()),
        Err(why) => {
            let code = if why.contains("float") || why.contains("latest") {
                UNPINNED_VERSION
            } else {
                INVALID_SPEC
            };
            cx.err(
                code,
                "image.base",
                format!("base image `{b}` {why}"),
                Some(
                    "pin a tag or digest, e.g. \"python:3.11.9-slim-bookworm\" or \"name@sha256:...\""
                        .into(),
                ),
            );
            None
        }
    }
}

/// Sorted and without repeats; both when the key is absent.
fn variants(cx: &mut Ctx, given: Option<&[String]>) -> Vec<Variant> {
    let defaults = ["runtime".to_string(), "dev".to_string()];
    let mut variants = Vec::new();
    for v in given.unwrap_or(&defaults[..]) {
        match v.as_str() {
            "runtime" => variants.push(Variant::Runtime),
            "dev" => variants.push(Variant::Dev),
            other => {
                if cx.safe("image.variants", other) {
                    cx.err(
                        INVALID_SPEC,
                        "image.variants",
                        format!("unknown image variant `{other}`"),
                        Some("use \"runtime\" and/or \"dev\"".into()),
                    );
                }
            }
        }
    }
    variants.sort();
    variants.dedup();
    if given.is_some_and(|v| v.is_empty()) {
        cx.err(
            INVALID_SPEC,
            "image.variants",
            "`variants` is empty".into(),
            Some("list \"runtime\", \"dev\" or both".into()),
        );
    }
    variants
}

/// Which of torch, torchvision and torchaudio the base already has; needs a base.
fn base_provides(cx: &mut Ctx, list: &[String], has_base: bool) -> Vec<String> {
    let mut base_provides = Vec::new();
    for p in list {
        if !cx.safe("image.base-provides", p) {
            continue;
        }
        match p.as_str() {
            "torch" | "torchvision" | "torchaudio" => {
                if !base_provides.contains(p) {
                    base_provides.push(p.clone())
                }
            }
            other => cx.err(
                INVALID_SPEC,
                "image.base-provides",
                format!("`{other}` cannot be declared as provided by the base"),
                Some("list any of \"torch\", \"torchvision\", \"torchaudio\"".into()),
            ),
        }
    }
    base_provides.sort();
    if !base_provides.is_empty() && !has_base {
        cx.err(
            INVALID_SPEC,
            "image.base-provides",
            "`base-provides` needs `[image] base`".into(),
            Some("set base to the image that provides these packages".into()),
        );
    }
    base_provides
}

/// A relative directory inside the project, without a trailing `/`.
fn wheels(cx: &mut Ctx, w: Option<&str>) -> Option<String> {
    let w = w?;
    if !cx.safe("image.wheels", w) {
        return None;
    }
    if project_subdir(w.trim_end_matches('/')) {
        return Some(w.trim_end_matches('/').to_string());
    }
    cx.err(
        INVALID_SPEC,
        "image.wheels",
        format!("wheels directory `{w}` must be a folder inside the project, named relative to it"),
        Some(
            "e.g. wheels = \"wheels\" (not the project itself, no `.` or `..`, no absolute path)"
                .into(),
        ),
    );
    None
}

/// A file inside the project, named relative to it. Never an absolute path: the spec is the
/// checkout's, and a path on the build machine (a proxy's private key beside its certificate)
/// would be sent to the engine; the machine's bundle is named by its environment variables.
fn ca_bundle(cx: &mut Ctx, p: Option<&str>) -> Option<String> {
    let p = p?;
    if !cx.safe("image.ca-bundle", p) {
        return None;
    }
    if project_subdir(p) {
        return Some(p.to_string());
    }
    cx.err(
        INVALID_SPEC,
        "image.ca-bundle",
        format!("CA bundle `{p}` must be a file inside the project, named relative to it"),
        Some(
            "e.g. ca-bundle = \"certs/corp-ca.pem\" (letters, digits and . _ - /, no `..`); \
             name a bundle elsewhere on the machine with PIP_CERT or SSL_CERT_FILE"
                .into(),
        ),
    );
    None
}

/// An exact JupyterLab version (ranges are reported before the character rules apply).
fn jupyterlab(cx: &mut Ctx, j: Option<&str>) -> Option<String> {
    let j = j?;
    if unpinned(j).is_some() {
        cx.err(
            UNPINNED_VERSION,
            "image.jupyterlab",
            format!("jupyterlab `{j}` is not an exact version"),
            Some("pin it, e.g. jupyterlab = \"4.4.10\"".into()),
        );
        return None;
    }
    if !cx.safe("image.jupyterlab", j) {
        return None;
    }
    if is_pkg_version(j) {
        return Some(j.to_string());
    }
    cx.err(
        INVALID_SPEC,
        "image.jupyterlab",
        format!("jupyterlab `{j}` is not a version"),
        Some("e.g. jupyterlab = \"4.4.10\"".into()),
    );
    None
}
