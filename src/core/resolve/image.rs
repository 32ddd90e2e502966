//! The image: its base (the spec's, or the table's for the Python and the build's glibc), its
//! kind (conda or wheel), JupyterLab for the dev image, and the image and run settings the lock
//! carries. This module performs no I/O.

use super::codes::*;
use super::err;
use super::types::Build;
use crate::core::compat::{BaseKind, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::LockedImage;
use crate::core::spec::Spec;
use crate::core::version::Version;
use std::collections::BTreeMap;

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

/// Image repositories known to ship no Python (a fact about their official images, whatever
/// the tag): CUDA bases, plain distributions, busybox. `Some(what it is)` for those.
pub(crate) fn base_without_python(image: &str) -> Option<&'static str> {
    let name = image.split('@').next().unwrap_or(image);
    // The repository: drop the tag (after the last `:` that follows the last `/`).
    let slash = name.rfind('/').map_or(0, |i| i + 1);
    let repo = match name[slash..].rfind(':') {
        Some(i) => &name[..slash + i],
        None => name,
    };
    let repo = repo.strip_prefix("docker.io/").unwrap_or(repo);
    let repo = repo.strip_prefix("library/").unwrap_or(repo);
    match repo {
        "nvidia/cuda" | "nvcr.io/nvidia/cuda" => Some("an NVIDIA CUDA base (CUDA libraries only)"),
        // Their official images have no python3 (RHEL-family images do: dnf needs it).
        "debian" | "ubuntu" | "alpine" | "busybox" => Some("a plain distribution image"),
        _ => None,
    }
}

/// The base image and its kind.
pub(super) struct Base {
    pub image: String,
    pub kind: BaseKind,
}

/// The base image: the spec's, or the table's for the Python (wheel) or any conda one, which
/// must have the glibc the build needs. `None` after pushing the error when the table has none.
pub(super) fn base(
    spec: &Spec,
    table: &Table,
    py_minor: &Version,
    build: &Build,
    diags: &mut Vec<Diagnostic>,
) -> Option<Base> {
    let wants_conda = spec.source.is_conda() || !spec.conda.is_empty();
    let kind = if wants_conda {
        BaseKind::Conda
    } else {
        BaseKind::Wheel
    };
    if let Some(b) = &spec.image.base {
        if let Some(what) = base_without_python(b) {
            diags.push(
                err(
                    BASE_HAS_NO_PYTHON,
                    "image.base",
                    format!("base image `{b}` is {what}, with no Python to install into"),
                )
                .with_hint(
                    "leave [image] base out (the table's Python base; PyTorch's wheels bring \
                     their own CUDA libraries), or name an image built FROM it that installs \
                     python3 with python3-venv or python3-pip",
                ),
            );
            return None;
        }
        return Some(Base {
            image: b.clone(),
            kind,
        });
    }
    let row = table
        .base_image
        .iter()
        .find(|r| r.kind == kind && (wants_conda || r.python.as_ref() == Some(py_minor)));
    match row {
        Some(r) if r.glibc >= build.glibc => Some(Base {
            image: r.image.clone(),
            kind,
        }),
        _ => {
            diags.push(
                err(
                    NO_SUCH_VARIANT,
                    "image.base",
                    format!(
                        "the table has no base image for Python {py_minor} with glibc >= {}",
                        build.glibc
                    ),
                )
                .with_hint("set [image] base to a pinned image"),
            );
            None
        }
    }
}

/// The lock's `[image]`: the base and the spec's image and run settings.
pub(super) fn locked(spec: &Spec, base: Base, packages: &BTreeMap<String, String>) -> LockedImage {
    let jupyterlab = spec
        .image
        .jupyterlab
        .clone()
        .or_else(|| packages.get("jupyterlab").cloned())
        .unwrap_or_else(|| default_jupyterlab(&spec.python).to_string());
    LockedImage {
        base: base.image,
        base_override: spec.image.base.clone(),
        base_digest: None,
        base_digest_unavailable: None,
        base_kind: base.kind,
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
        ca_bundle: spec.image.ca_bundle.clone(),
    }
}
