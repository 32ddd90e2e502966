//! Install lines: the exact conda match specs and pip requirements of a lock, in install order,
//! and the indexes and find-links locations pip needs (PyTorch's, then the spec's own). This module performs no I/O.

use super::packages::{Packages, MKL};
use super::types::Build;
use super::v;
use crate::core::compat::{BaseKind, TorchRow};
use crate::core::lock::Install;
use crate::core::spec::{Source, Spec};
use crate::core::version::Version;

/// The PyTorch wheel index.
pub const INDEX_BASE: &str = "https://download.pytorch.org/whl";

/// The install section and what goes beside it in the lock.
pub(super) struct Lines {
    pub install: Install,
    /// The lock's `index_url`: the PyTorch index variant, for `pytorch-index`.
    pub index_url: Option<String>,
    /// The lock's `auto_added`: packages pinned without the spec naming them.
    pub auto_added: Vec<String>,
}

/// The install lines of a lock. `kind` is the base image's: a conda base installs everything
/// through an environment, a wheel base through pip alone.
pub(super) fn lines(
    spec: &Spec,
    t: &TorchRow,
    selector: &Version,
    build: &Build,
    pkgs: &Packages,
    kind: BaseKind,
) -> Lines {
    let wants_conda = kind == BaseKind::Conda;
    let mut install = Install {
        conda: Vec::new(),
        pip: Vec::new(),
        pip_index_url: spec.pip_sources.index_url.clone(),
        pip_extra_index_urls: Vec::new(),
        pip_find_links: spec.pip_sources.find_links.clone(),
        conda_override_cuda: None,
    };
    let mut index_url = None;
    if wants_conda || spec.source.is_conda() {
        install.conda.push(if spec.python.len() == 3 {
            format!("python=={}", spec.python)
        } else {
            format!("python={}", spec.python)
        });
    }
    let provided = |p: &str| spec.image.base_provides.iter().any(|b| b == p);
    let torch_pkgs: Vec<(&str, String)> = ["torch", "torchvision", "torchaudio"]
        .iter()
        .filter(|n| pkgs.map.contains_key(**n) && !provided(n))
        .map(|n| (*n, pkgs.map[*n].clone()))
        .collect();
    match spec.source {
        Source::PytorchChannel => {
            install
                .conda
                .extend(pytorch_channel(t, selector, &torch_pkgs));
        }
        Source::CondaForge => {
            install.conda.extend(conda_forge(build, &torch_pkgs));
            install.conda_override_cuda = Some(build.cuda.to_string());
        }
        Source::PytorchIndex | Source::Pypi => {
            let variant = build.variant.clone().unwrap_or_default();
            install
                .pip
                .extend(wheels(spec.source, &variant, &torch_pkgs));
            if spec.source == Source::PytorchIndex {
                let url = format!("{INDEX_BASE}/{variant}");
                install.pip_extra_index_urls.push(url.clone());
                index_url = Some(url);
            }
        }
    }
    let auto_added = added(spec, pkgs, &mut install);
    install
        .conda
        .extend(spec.conda.iter().map(|c| c.match_spec()));
    install.pip.extend(spec.pip.iter().map(|p| p.requirement()));
    install
        .pip_extra_index_urls
        .extend(spec.pip_sources.extra_index_urls.iter().cloned());
    if wants_conda && !install.pip.is_empty() && !spec.conda.iter().any(|c| c.name == "pip") {
        install.conda.push("pip".into());
    }
    if !wants_conda {
        install.conda = Vec::new();
    }
    Lines {
        install,
        index_url,
        auto_added,
    }
}

/// The pytorch channel's packages and its CUDA selector package (`pytorch-cuda`, or
/// `cudatoolkit` before 1.13, whose 11.6 build came from conda-forge).
fn pytorch_channel(t: &TorchRow, selector: &Version, torch_pkgs: &[(&str, String)]) -> Vec<String> {
    let mut conda: Vec<String> = torch_pkgs
        .iter()
        .map(|(n, ver)| {
            let name = if *n == "torch" { "pytorch" } else { n };
            format!("pytorch::{name}=={ver}")
        })
        .collect();
    let sel = t.channel_selector();
    let sel_channel = if sel == "pytorch-cuda" {
        "pytorch"
    } else if *selector == v("11.6") {
        "conda-forge"
    } else {
        "pytorch"
    };
    conda.push(format!("{sel_channel}::{sel}={selector}"));
    conda
}

/// conda-forge's packages, torch as a CUDA build, and the `cuda-version` that picks the CUDA.
fn conda_forge(build: &Build, torch_pkgs: &[(&str, String)]) -> Vec<String> {
    let mut conda: Vec<String> = torch_pkgs
        .iter()
        .map(|(n, ver)| {
            if *n == "torch" {
                format!("conda-forge::pytorch=={ver}=cuda*")
            } else {
                format!("conda-forge::{n}=={ver}")
            }
        })
        .collect();
    conda.push(format!("conda-forge::cuda-version=={}", build.cuda));
    conda
}

/// pip requirements of torch and its companions. torch carries the variant's local version so
/// it can only come from the index; companions match their +cuXYZ builds there (PEP 440
/// prefers the local one).
fn wheels(source: Source, variant: &str, torch_pkgs: &[(&str, String)]) -> Vec<String> {
    torch_pkgs
        .iter()
        .map(|(n, ver)| {
            if source == Source::PytorchIndex && *n == "torch" {
                format!("torch=={ver}+{variant}")
            } else {
                format!("{n}=={ver}")
            }
        })
        .collect()
}

/// Install lines of the packages envbuild added (numpy, mkl); the lock's `auto_added`.
fn added(spec: &Spec, pkgs: &Packages, install: &mut Install) -> Vec<String> {
    let mut auto_added = Vec::new();
    if let Some(n) = &pkgs.added_numpy {
        if spec.source.is_conda() {
            install.conda.push(format!("numpy=={n}"));
        } else {
            install.pip.push(format!("numpy=={n}"));
        }
        auto_added.push("numpy".to_string());
    }
    if pkgs.add_mkl {
        install.conda.push(format!("mkl=={MKL}"));
        auto_added.push("mkl".to_string());
    }
    auto_added
}
