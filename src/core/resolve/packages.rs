//! Packages: python and torch, their companions (torchvision, torchaudio), the spec's extras,
//! and what envbuild adds because a build needs it (a NumPy 1.x pin, mkl 2024.0). This module
//! performs no I/O.

use super::codes::*;
use super::{err, warn};
use crate::core::compat::{Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::spec::{Source, Spec};
use crate::core::version::Version;
use std::collections::BTreeMap;

/// The mkl that pytorch-channel builds need (>= 2024.1 lacks `iJIT_NotifyEvent`).
pub(super) const MKL: &str = "2024.0.0";

/// The locked packages and what envbuild added on its own.
pub(super) struct Packages {
    /// Canonical names, as in the lock's `packages`.
    pub map: BTreeMap<String, String>,
    /// The lock's `notes`: why something was added or chosen.
    pub notes: Vec<String>,
    /// The NumPy 1.x version added for a torch that fails with NumPy 2.
    pub added_numpy: Option<String>,
    /// Whether mkl was pinned for a pytorch-channel build.
    pub add_mkl: bool,
}

/// Collect the packages of a lock, pushing the diagnostics companions and pins call for.
pub(super) fn collect(
    spec: &Spec,
    table: &Table,
    t: &TorchRow,
    py_minor: &Version,
    diags: &mut Vec<Diagnostic>,
) -> Packages {
    let mut p = Packages {
        map: BTreeMap::new(),
        notes: Vec::new(),
        added_numpy: None,
        add_mkl: false,
    };
    p.map.insert("python".into(), spec.python.to_string());
    p.map.insert("torch".into(), t.version.to_string());
    companions(spec, t, &mut p, diags);
    for c in &spec.conda {
        p.map.insert(c.name.clone(), c.version.clone());
    }
    for x in &spec.pip {
        p.map.insert(x.name.clone(), x.version.clone());
    }
    if t.numpy1 {
        numpy1(spec, table, t, py_minor, &mut p, diags);
    }
    p.add_mkl = spec.source == Source::PytorchChannel && !p.map.contains_key("mkl");
    if p.add_mkl {
        p.map.insert("mkl".into(), MKL.into());
        p.notes.push(format!("mkl {MKL} added: pytorch-channel builds fail with mkl >= 2024.1 (undefined symbol iJIT_NotifyEvent)"));
    }
    p
}

/// torchvision and torchaudio as the spec asks for them, in the source's naming.
fn companions(spec: &Spec, t: &TorchRow, p: &mut Packages, diags: &mut Vec<Diagnostic>) {
    let conda_companion = |pip: &String, conda: &Option<String>| {
        if spec.source.is_conda() {
            conda.clone().unwrap_or_else(|| pip.clone())
        } else {
            pip.clone()
        }
    };
    if spec.torchvision {
        p.map.insert(
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
        p.map.insert(
            "torchaudio".into(),
            conda_companion(&t.torchaudio, &t.torchaudio_conda),
        );
        if t.torchaudio_frozen {
            diags.push(
                warn(TORCHAUDIO_FROZEN, "torchaudio", format!("torchaudio is no longer released per torch version; {} (built on the stable ABI) is used with torch {}", t.torchaudio, t.version))
                    .with_hint("set torchaudio = false if you do not need it; audio I/O moved to TorchCodec"),
            );
            p.notes.push(format!(
                "torchaudio {}: the last torchaudio release, which works with torch >= 2.11",
                t.torchaudio
            ));
        }
    }
}

/// NumPy 2 breaks torch <= 2.2: a NumPy 2 pin is an error, and no pin gets the last 1.x.
fn numpy1(
    spec: &Spec,
    table: &Table,
    t: &TorchRow,
    py_minor: &Version,
    p: &mut Packages,
    diags: &mut Vec<Diagnostic>,
) {
    let pinned_major = p
        .map
        .get("numpy")
        .and_then(|n| Version::parse(n.split(['.', '+']).next().unwrap_or(n)));
    match pinned_major {
        Some(major) if major.major() >= 2 => diags.push(
            err(
                CONFLICTING_PIN,
                if spec.pip.iter().any(|x| x.name == "numpy") {
                    "pip"
                } else {
                    "conda"
                },
                format!(
                    "numpy {} does not work with torch {} (built against NumPy 1.x)",
                    p.map["numpy"], t.version
                ),
            )
            .with_hint(format!(
                "pin numpy to {}",
                table
                    .numpy1_for(py_minor)
                    .map(|n| n.version.clone())
                    .unwrap_or_else(|| "a 1.x release".into())
            )),
        ),
        Some(_) => {}
        None => {
            if let Some(n) = table.numpy1_for(py_minor) {
                p.map.insert("numpy".into(), n.version.clone());
                p.added_numpy = Some(n.version.clone());
                p.notes.push(format!(
                    "numpy {} added: torch {} fails with NumPy 2",
                    n.version, t.version
                ));
            }
        }
    }
}
