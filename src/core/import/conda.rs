//! Classifying the conda dependencies of an environment file: python, torch and its CUDA
//! selector, the companions, and the extra packages the spec keeps; then the source torch
//! comes from. This module performs no I/O.

use super::codes::IMPORT_CHANGED;
use super::found::Extra;
use super::scan::Scan;
use crate::core::compat::variant_cuda;
use crate::core::diag::Diagnostic;
use crate::core::resolve::codes::NO_SUCH_PACKAGE_VERSION;
use crate::core::spec::codes::{INVALID_SPEC, UNPINNED_VERSION};
use crate::core::spec::{parse_conda_pkg, CondaPkg, PkgParse, Source};
use crate::core::version::Version;

/// One `- name=version[=build]` line.
pub(super) fn dep(scan: &mut Scan, s: &str) {
    scan.at(s);
    let s = s.trim();
    if s == "pip" {
        return;
    }
    let name = package_name(s);
    if scan.machine_only(s, &name) {
        return;
    }
    if name == "pytorch" && s.contains('+') {
        return local_version(scan, s);
    }
    match parse_conda_pkg(s) {
        PkgParse::Ok(p) => pinned(scan, s, p),
        PkgParse::Unpinned { name, .. } => {
            if name == "pytorch-gpu" {
                scan.found.pytorch_gpu.get_or_insert(None);
                return;
            }
            if name == "cpuonly" {
                return;
            }
            // Its hint names the CUDA versions of the torch pinned, known at the end.
            if matches!(
                name.as_str(),
                "cudatoolkit" | "pytorch-cuda" | "cuda-version"
            ) {
                let line = scan.line;
                let f = &mut scan.found;
                f.unpinned_selector
                    .get_or_insert((s.to_string(), name, line));
                return;
            }
            if let Some(c) = scan.found.companion(&name) {
                c.listed = true;
                return;
            }
            scan.unpinned(s, &name, "=");
        }
        PkgParse::Invalid(m) => scan.invalid(m),
    }
}

/// The lowercase package name of a conda line (`conda-forge::numpy=1.26` → `numpy`).
fn package_name(s: &str) -> String {
    let rest = s.split_once("::").map_or(s, |(_, r)| r);
    let end = rest
        .find(['=', '<', '>', '!', '~', ' ', '*'])
        .unwrap_or(rest.len());
    rest[..end].trim().to_ascii_lowercase()
}

/// `pytorch=2.1.2+cu121`: `+cu121` is pip's local version of a PyTorch wheel; conda's
/// pytorch has no such versions.
fn local_version(scan: &mut Scan, s: &str) {
    let (head, local) = s.split_once('+').unwrap_or((s, ""));
    let version = head.rsplit(['=']).next().unwrap_or("");
    let cuda = variant_cuda(local.split('=').next().unwrap_or(""));
    let hint = match cuda {
        Some(c) => format!("in conda write `pytorch={version}` with `pytorch-cuda={}` (pytorch channel), or move it under `pip:` as `torch=={version}+{local}`", c.major_minor()),
        None => format!("in conda write `pytorch={version}`, or move it under `pip:` as `torch=={version}+{local}`"),
    };
    scan.found.pytorch = Some((version.to_string(), scan.line));
    scan.error(
        Diagnostic::error(
            INVALID_SPEC,
            format!("`{s}` in {}: `+{local}` is pip's local version of a PyTorch wheel; conda's pytorch packages have no `+` versions", scan.shown_file()),
        )
        .with_hint(hint),
    );
}

fn pinned(scan: &mut Scan, s: &str, p: CondaPkg) {
    let line = scan.line;
    let f = &mut scan.found;
    match p.name.as_str() {
        "python" => {
            f.python = Some(p.version.clone());
            f.python_line = line;
        }
        "pytorch" => {
            f.pytorch = Some((p.version.clone(), line));
            // conda-forge build strings name the CUDA (cuda129_mkl_...), and so do the
            // pytorch channel's (py3.7_cuda9.0.176_cudnn7.1.2_2).
            let build = build_string(s);
            if let Some(v) = build.and_then(build_cuda) {
                f.conda_cuda.get_or_insert(v);
            }
            f.build_cuda = build.and_then(channel_build_cuda);
        }
        "pytorch-cuda" => f.pytorch_channel_selector = Some(major_minor(&p.version)),
        "cudatoolkit" => {
            f.pytorch_channel_selector = Some(major_minor(&p.version));
            scan.note(IMPORT_CHANGED, format!("`{s}` is the pytorch channel's CUDA selector before torch 1.13; the spec writes it as `pytorch-cuda = \"{}\"` and the lock installs the selector that torch release uses", major_minor(&p.version)));
        }
        "cuda-version" => f.conda_cuda = Some(major_minor(&p.version)),
        "pytorch-gpu" => f.pytorch_gpu = Some(Some(p.version.clone())),
        "torchvision" | "torchaudio" => {
            if let Some(c) = f.companion(&p.name) {
                c.listed = true;
                c.pin = Some((p.version.clone(), line));
            }
        }
        "cpuonly" => {}
        n if scan.auto_added.iter().any(|a| a == n) => {}
        _ => f.conda.push(Extra {
            name: p.name.clone(),
            entry: entry(s, &p),
            line,
        }),
    }
}

/// The spec entry: as written in conda's own syntax, without the build string.
fn entry(s: &str, p: &CondaPkg) -> String {
    let op = if p.fuzzy || !s.contains("==") {
        "="
    } else {
        "=="
    };
    match &p.channel {
        Some(c) => format!("{c}::{}{op}{}", p.name, p.version),
        None => format!("{}{op}{}", p.name, p.version),
    }
}

fn major_minor(v: &str) -> String {
    Version::parse(v)
        .map(|v| v.major_minor())
        .unwrap_or(v.to_string())
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

/// `py3.7_cuda9.0.176_cudnn7.1.2_2` → `9.0`: the pytorch channel's builds before
/// `pytorch-cuda` named the CUDA they were built with.
fn channel_build_cuda(build: &str) -> Option<String> {
    build
        .split('_')
        .filter_map(|part| part.strip_prefix("cuda"))
        .find(|v| v.contains('.'))
        .and_then(Version::parse)
        .map(|v| v.major_minor())
}

/// A CUDA selector listed without a version: the error names the CUDA versions the pinned
/// pytorch is built for.
fn unpinned_selector(scan: &mut Scan, item: &str, name: &str, line: Option<usize>) {
    let row = scan
        .found
        .pytorch
        .as_ref()
        .and_then(|(v, _)| Version::parse(v))
        .and_then(|v| scan.table.torch_row(&v));
    let (cudas, channel) = match (row, name) {
        (Some(r), "cuda-version") => (&r.conda_forge, "conda-forge"),
        (Some(r), _) => (&r.pytorch_channel, "the pytorch channel"),
        (None, _) => (&Vec::new(), ""),
    };
    let hint = match (row, cudas.last()) {
        (Some(r), Some(newest)) => {
            let list: Vec<String> = cudas.iter().map(|c| c.major_minor()).collect();
            format!(
                "pin it, e.g. `{name}={}`: pytorch {} is built for CUDA {} on {channel}",
                newest.major_minor(),
                r.version,
                list.join(", ")
            )
        }
        _ => format!("pin it, e.g. `{name}=<X.Y>`; `envbuild table` lists the CUDA versions of each PyTorch release"),
    };
    let d = Diagnostic::error(
        UNPINNED_VERSION,
        format!(
            "`{item}` in {} is the CUDA selector of pytorch, but not pinned",
            scan.shown_file()
        ),
    )
    .with_hint(hint);
    scan.error_at(line, d);
}

/// A torch older than the table's oldest release cannot be locked: refused here, at its line,
/// rather than one step later by `envbuild lock`.
fn older_than_table(scan: &mut Scan) -> bool {
    let f = &scan.found;
    let Some((v, line)) = f.pytorch.clone().or_else(|| f.torch_pip.clone()) else {
        return false;
    };
    let (Some(version), Some(oldest)) = (Version::parse(&v), scan.table.torch.first()) else {
        return false;
    };
    if version >= oldest.version {
        return false;
    }
    let newest = scan.table.newest_torch().map(|r| r.version.to_string());
    let d = Diagnostic::error(
        NO_SUCH_PACKAGE_VERSION,
        format!(
            "{} pins PyTorch {v}, older than every release envbuild knows",
            scan.shown_file()
        ),
    )
    .with_hint(format!(
        "the oldest supported release is {}{}; pin a known release (`envbuild table torch` lists them)",
        oldest.version,
        newest.map(|n| format!(", the newest {n}")).unwrap_or_default()
    ));
    scan.error_at(line, d);
    true
}

/// The source and torch version, from what the file pins: a conda pytorch needs a CUDA
/// selector (pytorch-cuda/cudatoolkit, or conda-forge's cuda-version or pytorch-gpu); a pip
/// torch comes from the wheel index when a variant was named, else PyPI.
pub(super) fn torch(scan: &mut Scan) -> Option<(Source, String)> {
    let f = &mut scan.found;
    if f.pytorch.is_none() {
        if let Some(Some(v)) = &f.pytorch_gpu {
            f.pytorch = Some((v.clone(), None));
        }
    }
    if let (Some(_), Some((v, line))) = (&f.pytorch, f.torch_pip.clone()) {
        scan.line = line;
        scan.drop_item(
            &format!("torch=={v}"),
            "conda's pytorch is the torch of this environment; the spec has one torch",
        );
    }
    let f = &mut scan.found;
    let selector_unpinned = f.unpinned_selector.take();
    if let Some((item, name, line)) = &selector_unpinned {
        unpinned_selector(scan, item, name, *line);
    }
    if older_than_table(scan) {
        return None;
    }
    let f = &mut scan.found;
    if let (None, None, Some(cuda)) = (&f.pytorch_channel_selector, &f.conda_cuda, &f.build_cuda) {
        let cuda = cuda.clone();
        f.pytorch_channel_selector = Some(cuda.clone());
        let line = f.pytorch.as_ref().and_then(|p| p.1);
        scan.line = line;
        scan.note(IMPORT_CHANGED, format!("the pytorch build string names CUDA {cuda} (the pytorch channel's builds did before `pytorch-cuda`); the spec writes it as `pytorch-cuda = \"{cuda}\"`"));
    }
    let f = &scan.found;
    let pytorch = f.pytorch.clone();
    match (&pytorch, &f.torch_pip) {
        (Some((v, _)), _) if f.pytorch_channel_selector.is_some() => {
            Some((Source::PytorchChannel, v.clone()))
        }
        (Some((v, _)), _) if f.conda_cuda.is_some() => Some((Source::CondaForge, v.clone())),
        (Some((v, _)), _) if f.pytorch_gpu.is_some() => pytorch_gpu_cuda(scan, v),
        (Some(_), _) if selector_unpinned.is_some() => None,
        (Some((v, line)), _) => {
            if scan
                .diags
                .iter()
                .all(|d| d.location.as_ref().map(|l| l.line) != *line)
            {
                let d = Diagnostic::error(INVALID_SPEC, format!("{} pins pytorch {v} but no CUDA selector (pytorch-cuda, cudatoolkit, cuda-version or pytorch-gpu)", scan.shown_file()))
                    .with_hint("add `pytorch-cuda=X.Y` (pytorch channel) or `cuda-version=X.Y` (conda-forge); envbuild builds GPU environments");
                scan.error_at(*line, d);
            }
            None
        }
        (None, Some((v, _))) if f.pip_variant.is_some() => Some((Source::PytorchIndex, v.clone())),
        (None, Some((v, _))) => Some((Source::Pypi, v.clone())),
        (None, None) => {
            if scan.diags.is_empty() {
                let d = Diagnostic::error(INVALID_SPEC, format!("{} does not install PyTorch", scan.shown_file()))
                    .with_hint("add `pytorch=<version>` with `pytorch-cuda=<X.Y>`, or `torch==<version>` under `pip:`");
                scan.error_at(None, d);
            }
            None
        }
    }
}

/// conda-forge's `pytorch-gpu` without `cuda-version`: conda takes the newest CUDA build the
/// machine's driver allows; the spec needs one, so it takes the newest the table has for this
/// pytorch on conda-forge, and says so.
fn pytorch_gpu_cuda(scan: &mut Scan, v: &str) -> Option<(Source, String)> {
    let newest = Version::parse(v)
        .and_then(|ver| scan.table.torch_row(&ver))
        .and_then(|row| row.conda_forge.iter().max().cloned());
    match newest {
        Some(cuda) => {
            scan.found.conda_cuda = Some(cuda.major_minor());
            scan.line = scan.found.pytorch.as_ref().and_then(|p| p.1);
            scan.note(IMPORT_CHANGED, format!("`pytorch-gpu` selects conda-forge's CUDA build of pytorch {v} without saying which CUDA; the spec pins cuda = \"{}\", the newest such build in the table (add `cuda-version=X.Y` to choose)", cuda.major_minor()));
            Some((Source::CondaForge, v.to_string()))
        }
        None => {
            let d = Diagnostic::error(INVALID_SPEC, format!("{} asks for conda-forge's `pytorch-gpu` {v}, which the table has no conda-forge CUDA build of", scan.shown_file()))
                .with_hint("add `cuda-version=X.Y`, or pin a pytorch release the table lists (`envbuild table`)");
            let line = scan.found.pytorch.as_ref().and_then(|p| p.1);
            scan.error_at(line, d);
            None
        }
    }
}
