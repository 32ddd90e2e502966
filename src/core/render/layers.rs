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
    /// The layer's files for the engine to download itself (`ADD URL`, see [`engine_wheel`]),
    /// in the pins' order; empty when one of them cannot be (a local file, an odd URL).
    pub wheels: Vec<EngineWheel>,
}

/// One locked wheel the engine can download itself: its URL and the file name it is saved as
/// (the URL's last segment, percent-decoded: `torch-2.6.0+cu126-...whl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineWheel {
    pub url: String,
    pub file: String,
}

/// `p` as a file the engine can fetch with `ADD ["URL", "/wheels/FILE"]`: an http(s) wheel
/// whose URL holds no character a Dockerfile would expand or a JSON string would escape (`$`,
/// quotes, `\\`, spaces) and whose file name is a wheel's. `None` otherwise: that layer is
/// always downloaded by pip. pip checks each file against the lock's sha256 at install, so
/// the engine's download is trusted no more than an index's.
pub fn engine_wheel(p: &ClosurePkg) -> Option<EngineWheel> {
    let rest = p
        .url
        .strip_prefix("https://")
        .or_else(|| p.url.strip_prefix("http://"))?;
    let url_ok = rest
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~:/?#[]@!&()*+,;=%".contains(c));
    let last = rest.split(['?', '#']).next()?.rsplit('/').next()?;
    let file = percent_decode(last)?;
    let file_ok = file.ends_with(".whl")
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-!".contains(c))
        && !file.starts_with('.');
    (url_ok && file_ok && p.kind == "pip" && !p.sha256.is_empty()).then(|| EngineWheel {
        url: p.url.clone(),
        file,
    })
}

/// `torch-2.6.0%2Bcu126` -> `torch-2.6.0+cu126`; `None` on a malformed escape.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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
            wheels: Vec::new(),
        })
        .collect();
    let mut fetchable = [true; ORDER.len()];
    for p in pkgs {
        let at = layer_of(&p.name, extras);
        if let Some(i) = layers.iter().position(|l| l.name == at) {
            let l = &mut layers[i];
            l.pins.push(format!(
                "{}=={} --hash=sha256:{}",
                p.name, p.version, p.sha256
            ));
            match engine_wheel(p) {
                Some(w) => l.wheels.push(w),
                None => fetchable[i] = false,
            }
        }
    }
    for (l, ok) in layers.iter_mut().zip(fetchable) {
        if !ok {
            l.wheels.clear();
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
            yanked: None,
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
        assert_eq!(layers[1].wheels.len(), 2);
        assert_eq!(layers[1].wheels[0].file, "numpy-1.0-py3-none-any.whl");
    }

    #[test]
    fn the_engine_fetches_only_plain_wheel_urls_and_a_layer_all_or_nothing() {
        let mut torch = pkg("torch");
        torch.url = "https://download.pytorch.org/whl/cu126/torch-2.6.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl".into();
        let w = engine_wheel(&torch).expect("a PyTorch index URL");
        assert_eq!(
            w.file,
            "torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"
        );
        assert_eq!(w.url, torch.url);
        for bad in [
            "file:///wheels/x-1.0-py3-none-any.whl",
            "https://h/x-1.0.tar.gz",
            "https://h/$HOME/x-1.0-py3-none-any.whl",
            "https://h/x\"]-1.0-py3-none-any.whl",
            "https://h/x%2F..%2Fy-1.0-py3-none-any.whl",
            "https://h/x-1.0-py3-none-any.whl\nRUN id",
            "https://h/%zz-1.0-py3-none-any.whl",
        ] {
            let mut p = pkg("x");
            p.url = bad.into();
            assert_eq!(engine_wheel(&p), None, "{bad}");
        }
        // One local file in a layer: pip downloads that whole layer.
        let mut local = pkg("nvidia-nccl-cu12");
        local.url = "wheels/nvidia_nccl_cu12-1.0-py3-none-any.whl".into();
        let layers = split([torch, local, pkg("numpy")].iter(), &[]);
        assert_eq!(layers[0].name, "torch");
        assert!(layers[0].wheels.is_empty());
        assert_eq!(layers[1].wheels.len(), 1);
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
