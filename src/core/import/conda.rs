//! Classifying the conda dependencies of an environment file: python, torch and its CUDA
//! selector, the companions, and the extra packages the spec keeps.
//! This module performs no I/O.

use super::Scan;
use crate::core::compat::variant_cuda;
use crate::core::spec::{parse_conda_pkg, CondaPkg, PkgParse};
use crate::core::version::Version;

/// One `- name=version[=build]` line.
pub(super) fn dep(scan: &mut Scan, s: &str) {
    let s = s.trim();
    if s == "pip" {
        return;
    }
    match parse_conda_pkg(s) {
        PkgParse::Ok(p) => pinned(scan, s, p),
        PkgParse::Unpinned { name, .. } => {
            if name == "pytorch-gpu" || name == "cpuonly" || scan.found.companion(&name) {
                return;
            }
            scan.unpinned(s, &name, "=");
        }
        PkgParse::Invalid(m) => scan.invalid(m),
    }
}

fn pinned(scan: &mut Scan, s: &str, p: CondaPkg) {
    let f = &mut scan.found;
    match p.name.as_str() {
        "python" => f.python = Some(p.version.clone()),
        "pytorch" => {
            f.pytorch = Some(p.version.clone());
            // conda-forge build strings name the CUDA: cuda129_mkl_...
            if let Some(v) = build_string(s).and_then(build_cuda) {
                f.conda_cuda.get_or_insert(v);
            }
        }
        "pytorch-cuda" | "cudatoolkit" => {
            f.pytorch_channel_selector = Some(
                Version::parse(&p.version)
                    .map(|v| v.major_minor())
                    .unwrap_or(p.version.clone()),
            )
        }
        "cuda-version" => f.conda_cuda = Some(p.version.clone()),
        "torchvision" => f.torchvision = true,
        "torchaudio" => f.torchaudio = true,
        "pytorch-gpu" | "pytorch-mutex" | "cpuonly" => {}
        n if scan.auto_added.iter().any(|a| a == n) => {}
        _ => f.conda.push(match &p.channel {
            Some(c) => format!("{c}::{}={}", p.name, p.version),
            None => format!("{}={}", p.name, p.version),
        }),
    }
}

/// The build string of `name=version=build` or `name==version=build`.
fn build_string(s: &str) -> Option<&str> {
    let build = s
        .rsplit_once('=')
        .map(|(_, b)| b)
        .filter(|_| s.matches('=').count() >= 2 && !s.contains("=="));
    build.or_else(|| {
        s.split("==")
            .nth(1)
            .and_then(|r| r.split_once('='))
            .map(|(_, b)| b)
    })
}

/// `cuda129_mkl_...` → `12.9`.
fn build_cuda(build: &str) -> Option<String> {
    let b = build.strip_prefix("cuda")?;
    let digits: String = b.chars().take_while(|c| c.is_ascii_digit()).collect();
    variant_cuda(&format!("cu{digits}")).map(|v| v.to_string())
}
