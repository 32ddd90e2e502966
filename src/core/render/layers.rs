//! The image's install layers: a closure lock's pip packages split by how often they change,
//! heavy and stable first, so that a change to one of the project's extras rebuilds (and a push
//! uploads) only the last layer. This module performs no I/O.
//!
//! - `torch`: torch, triton (`pytorch-triton*` too) and the CUDA wheels (`nvidia-*`,
//!   `cuda-*`): gigabytes that change only with a torch or CUDA upgrade;
//! - `closure`: the rest of the closure (torchvision, numpy, ...), what torch and the extras need;
//! - `extras`: the spec's own pip packages, torch, torchvision and torchaudio aside.
//!
//! Each layer is its own requirements file, installed with `--no-deps --require-hashes`: a layer
//! holds only pinned, hashed files, and the order (each layer after those it may depend on) is
//! what makes `--no-deps` safe, as pip checks no dependency at install time.

use crate::core::lock::{ClosurePkg, Lock};
use serde::Serialize;

/// One install layer: its name, the requirements file that installs it, and its lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub name: &'static str,
    /// `requirements-torch.txt`: a path in the build context.
    pub file: String,
    /// `name==version --hash=sha256:...`, in the closure's (name) order.
    pub pins: Vec<String>,
}

/// The layer names, in install order.
pub const ORDER: [&str; 3] = ["torch", "closure", "extras"];

/// The packages the spec names that are torch's own (the pytorch key, not the pip list's extras).
const TORCH_FAMILY: [&str; 3] = ["torch", "torchvision", "torchaudio"];

/// The layer a pip package of the closure belongs to; `extras` is the canonical names of the
/// spec's own pip packages, torch's family aside.
pub fn layer_of(name: &str, extras: &[String]) -> &'static str {
    let torch = name == "torch"
        || name == "triton"
        || name.starts_with("pytorch-triton")
        || name.starts_with("nvidia-")
        || name.starts_with("cuda-");
    if torch {
        "torch"
    } else if extras.iter().any(|e| e == name) {
        "extras"
    } else {
        "closure"
    }
}

/// The canonical (PEP 503) names of the lock's own pip packages (`install.pip`: what the spec
/// asked for, `einops>=0.8` included), torch, torchvision and torchaudio aside.
pub fn extras(lock: &Lock) -> Vec<String> {
    lock.install
        .pip
        .iter()
        .map(|s| {
            let end = s
                .find(['=', '<', '>', '!', '~', ' ', '[', '@', ';'])
                .unwrap_or(s.len());
            canonical(&s[..end])
        })
        .filter(|n| !n.is_empty() && !TORCH_FAMILY.contains(&n.as_str()))
        .collect()
}

/// `Typing_Extensions` -> `typing-extensions` (PEP 503: runs of `-_.` are one `-`).
fn canonical(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The non-empty layers of `pkgs` (a closure's pip entries), in install order.
pub fn split<'a>(pkgs: impl Iterator<Item = &'a ClosurePkg>, extras: &[String]) -> Vec<Layer> {
    let mut layers: Vec<Layer> = ORDER
        .iter()
        .map(|name| Layer {
            name,
            file: format!("requirements-{name}.txt"),
            pins: Vec::new(),
        })
        .collect();
    for p in pkgs {
        let at = layer_of(&p.name, extras);
        if let Some(l) = layers.iter_mut().find(|l| l.name == at) {
            l.pins.push(format!(
                "{}=={} --hash=sha256:{}",
                p.name, p.version, p.sha256
            ));
        }
    }
    layers.retain(|l| !l.pins.is_empty());
    layers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str) -> ClosurePkg {
        ClosurePkg {
            name: name.into(),
            version: "1.0".into(),
            kind: "pip".into(),
            url: format!("https://files.example/{name}-1.0-py3-none-any.whl"),
            index: "https://pypi.org/simple".into(),
            sha256: "a".repeat(64),
            md5: None,
            build: None,
            subdir: None,
        }
    }

    #[test]
    fn heavy_and_stable_first_the_projects_extras_last() {
        let extras = vec!["einops".to_string(), "nvidia-dali-cuda120".to_string()];
        for (name, layer) in [
            ("torch", "torch"),
            ("triton", "torch"),
            ("pytorch-triton-rocm", "torch"),
            ("nvidia-cudnn-cu13", "torch"),
            ("cuda-bindings", "torch"),
            // Named by the spec, but a CUDA wheel: it changes with CUDA, so it goes with torch.
            ("nvidia-dali-cuda120", "torch"),
            ("torchvision", "closure"),
            ("numpy", "closure"),
            ("tritonclient", "closure"),
            ("einops", "extras"),
        ] {
            assert_eq!(layer_of(name, &extras), layer, "{name}");
        }
        let pkgs: Vec<ClosurePkg> = ["einops", "numpy", "torch", "torchvision"].map(pkg).into();
        let layers = split(pkgs.iter(), &extras);
        let names: Vec<_> = layers.iter().map(|l| l.name).collect();
        assert_eq!(names, ["torch", "closure", "extras"]);
        assert_eq!(layers[1].file, "requirements-closure.txt");
        assert_eq!(layers[1].pins.len(), 2);
        assert!(layers[0].pins[0].starts_with("torch==1.0 --hash=sha256:aaaa"));
        // No extras: no empty layer.
        assert_eq!(split(pkgs[1..].iter(), &[]).len(), 2);
    }

    #[test]
    fn extras_are_the_specs_own_names_canonical_torch_aside() {
        let text = include_str!("../../../specs/pypi-torch214-closure/envbuild.lock");
        let lock = Lock::from_toml(text).expect("lock");
        assert_eq!(extras(&lock), ["einops"]);
        assert_eq!(canonical("Typing__Extensions"), "typing-extensions");
        assert_eq!(canonical("ruamel.yaml"), "ruamel-yaml");
    }
}
