//! Classifying the conda dependencies of an environment file: python, torch and its CUDA
//! selector, the companions, and the extra packages the spec keeps; then the source torch
//! comes from. This module performs no I/O.

use super::codes::IMPORT_CHANGED;
use super::found::Extra;
use super::scan::Scan;
use crate::core::compat::variant_cuda;
use crate::core::diag::Diagnostic;
use crate::core::resolve::codes::NO_SUCH_PACKAGE_VERSION;
use crate::core::spec::codes::INVALID_SPEC;
use crate::core::spec::{parse_conda_pkg, CondaPkg, PkgParse, Req, Source, Syntax, ANY_VERSION};
use crate::core::version::Version;

/// One `- name=version[=build]` line.
pub(super) fn dep(scan: &mut Scan, s: &str) {
    scan.at(s);
    let s = s.trim();
    if s == "pip" {
        return;
    }
    let name = package_name(s);
    if scan.machine_only(s, &name, super::platform::Installer::Conda) {
        return;
    }
    if name == "pytorch" && s.contains('+') {
        return local_version(scan, s);
    }
    match parse_conda_pkg(s) {
        PkgParse::Ok(p) => pinned(scan, s, p),
        PkgParse::Unpinned { name, .. } => ranged(scan, s, &name),
        PkgParse::Invalid(m) => scan.invalid(m),
    }
}

/// A line with a range or no version at all: kept as written (a bare name is any version,
/// `*`), for the resolver (core keys) or the closure (extras) to choose within.
fn ranged(scan: &mut Scan, s: &str, name: &str) {
    let req = requirement(s);
    let line = scan.line;
    let f = &mut scan.found;
    match name {
        // conda-forge's metapackage for its CUDA build: bare (any release) or a range.
        "pytorch-gpu" => f.pytorch_gpu = Some((req != ANY_VERSION).then_some(req)),
        "cpuonly" => f.cpuonly = line,
        "python" => {
            f.python = Some(req);
            f.python_line = line;
        }
        "pytorch" => {
            f.pytorch = Some((req, line));
            f.pytorch_channel = s.split_once("::").map(|(c, _)| c.trim().to_string());
        }
        "pytorch-cuda" => f.pytorch_channel_selector = Some(req),
        "cudatoolkit" => {
            f.pytorch_channel_selector = Some(req.clone());
            scan.note(IMPORT_CHANGED, format!("`{s}` is the pytorch channel's CUDA selector before torch 1.13; the spec writes it as `pytorch-cuda = \"{req}\"` and the lock installs the selector that torch release uses"));
        }
        "cuda-version" => {
            f.conda_cuda = Some(req);
            f.cuda_version_named = true;
        }
        _ => {
            if let Some(c) = f.companion(name) {
                c.listed = true;
                if req != ANY_VERSION {
                    c.range = Some((req, line));
                }
                return;
            }
            let entry: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let entry = entry
                .strip_suffix("=*")
                .or_else(|| entry.strip_suffix('*').filter(|e| !e.ends_with('.')))
                .unwrap_or(&entry)
                .to_string();
            f.conda.push(Extra {
                name: name.to_string(),
                entry,
                line,
            });
        }
    }
}

/// The version requirement of a conda line as written, without its name: `>=3.9`, `1.12.*`
/// (conda's `=1.12.*`), or `*` for a bare name.
fn requirement(s: &str) -> String {
    let rest = s.split_once("::").map_or(s, |(_, r)| r).trim();
    let end = rest
        .find(['=', '<', '>', '!', '~', ' ', '*'])
        .unwrap_or(rest.len());
    let req = rest[end..].trim();
    let req = match req.strip_prefix('=') {
        Some(r) if !r.starts_with('=') => r.trim(),
        _ => req,
    };
    if req.is_empty() {
        ANY_VERSION.to_string()
    } else {
        req.to_string()
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
            f.pytorch_channel = p.channel.clone();
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
        "cuda-version" => {
            f.conda_cuda = Some(major_minor(&p.version));
            f.cuda_version_named = true;
        }
        "pytorch-gpu" => f.pytorch_gpu = Some(Some(p.version.clone())),
        "torchvision" | "torchaudio" => {
            if let Some(c) = f.companion(&p.name) {
                c.listed = true;
                c.pin = Some((p.version.clone(), line));
            }
        }
        "cpuonly" => f.cpuonly = line,
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

/// A torch that no release the table knows satisfies (older than its oldest, or a range
/// none of its releases falls in) cannot be locked: refused here, at its line, rather than one
/// step later by `envbuild lock`.
fn unknown_torch(scan: &mut Scan) -> bool {
    let f = &scan.found;
    let (req, syntax) = match (&f.pytorch, &f.torch_pip) {
        (Some(p), _) => (p.clone(), Syntax::Conda),
        (None, Some(p)) => (p.clone(), Syntax::Pep440),
        (None, None) => return false,
    };
    let (v, line) = req;
    let Some(oldest) = scan.table.torch.first() else {
        return false;
    };
    let known = match Version::parse(&v) {
        Some(version) => version >= oldest.version,
        None => match Req::parse(&v, syntax) {
            Ok(r) => scan.table.torch.iter().any(|t| r.matches(&t.version)),
            // Not a requirement at all: the spec's own check says why, at this line.
            Err(_) => return false,
        },
    };
    if known {
        return false;
    }
    let newest = scan.table.newest_torch().map(|r| r.version.to_string());
    let what = if Version::parse(&v).is_some() {
        format!("pins PyTorch {v}, older than every release envbuild knows")
    } else {
        format!("asks for PyTorch `{v}`, which no release envbuild knows satisfies")
    };
    let d = Diagnostic::error(
        NO_SUCH_PACKAGE_VERSION,
        format!("{} {what}", scan.shown_file()),
    )
    .with_hint(format!(
        "the oldest supported release is {}{}; pin a known release (`envbuild table torch` lists them)",
        oldest.version,
        newest.map(|n| format!(", the newest {n}")).unwrap_or_default()
    ));
    scan.error_at(line, d);
    true
}

/// The source and torch version, from what the file pins: a conda pytorch comes from the
/// channel its CUDA selector belongs to (pytorch-cuda/cudatoolkit: the pytorch channel;
/// cuda-version or pytorch-gpu: conda-forge), or, with no selector, from the channel the file
/// takes it from, with any CUDA (`*`: the resolver chooses the build for the target); a pip
/// torch comes from the wheel index when a variant was named, else PyPI.
pub(super) fn torch(scan: &mut Scan, channels: &[String]) -> Option<(Source, String)> {
    let f = &mut scan.found;
    if f.pytorch.is_none() {
        if let Some(v) = &f.pytorch_gpu {
            let v = v.clone().unwrap_or_else(|| ANY_VERSION.into());
            f.pytorch = Some((v, None));
        }
    }
    if let (Some(_), Some((v, line))) = (&f.pytorch, f.torch_pip.clone()) {
        scan.line = line;
        scan.drop_item(
            &format!("torch {v}"),
            "conda's pytorch is the torch of this environment; the spec has one torch",
        );
    }
    if unknown_torch(scan) {
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
        (Some((v, line)), _) => no_selector(scan, v, *line, channels),
        (None, Some((v, _))) if f.pip_variant.is_some() => Some((Source::PytorchIndex, v.clone())),
        (None, Some((v, _))) => Some((Source::Pypi, v.clone())),
        (None, None) => {
            if scan.diags.is_empty() {
                let d = Diagnostic::error(INVALID_SPEC, format!("{} does not install PyTorch", scan.shown_file()))
                    .with_hint("add `pytorch` (with `pytorch-cuda=<X.Y>` on the pytorch channel), or `torch` under `pip:`");
                scan.error_at(None, d);
            }
            None
        }
    }
}

/// A conda pytorch with no CUDA selector: conda takes the build the machine's driver allows
/// from the channel the file takes pytorch from; the spec says the same with any CUDA (`*`),
/// which the resolver chooses for the target. `cpuonly`, or a channel that is no source
/// envbuild knows, is refused at the line.
fn no_selector(
    scan: &mut Scan,
    v: &str,
    line: Option<usize>,
    channels: &[String],
) -> Option<(Source, String)> {
    // The line is refused already (`pytorch=2.1.2+cu121`): nothing to add to it.
    if scan
        .diags
        .iter()
        .any(|d| d.location.as_ref().map(|l| l.line) == line)
    {
        return None;
    }
    if let Some(at) = scan.found.cpuonly {
        let d = Diagnostic::error(INVALID_SPEC, format!("{} asks for pytorch's CPU build (`cpuonly`)", scan.shown_file()))
            .with_hint("envbuild builds GPU environments: replace `cpuonly` with `pytorch-cuda=X.Y` (pytorch channel) or `cuda-version=X.Y` (conda-forge)");
        scan.error_at(Some(at), d);
        return None;
    }
    let from = scan.found.pytorch_channel.clone();
    let has =
        |c: &str| from.as_deref() == Some(c) || (from.is_none() && channels.iter().any(|x| x == c));
    let (source, key) = if has("pytorch") {
        (Source::PytorchChannel, "pytorch-cuda")
    } else if has("conda-forge") {
        (Source::CondaForge, "cuda")
    } else {
        let d = Diagnostic::error(INVALID_SPEC, format!("{} takes pytorch {v} from {}, which is not a source envbuild knows, and names no CUDA selector", scan.shown_file(), from.map_or("the default channels".to_string(), |c| format!("the `{c}` channel"))))
            .with_hint("add `pytorch-cuda=X.Y` with the `pytorch` channel, or `cuda-version=X.Y` with `conda-forge`");
        scan.error_at(line, d);
        return None;
    };
    if source == Source::PytorchChannel {
        scan.found.pytorch_channel_selector = Some(ANY_VERSION.into());
    } else {
        scan.found.conda_cuda = Some(ANY_VERSION.into());
    }
    scan.line = line;
    scan.note(IMPORT_CHANGED, format!("pytorch has no CUDA selector in the file (conda takes the build the machine's driver allows); the spec writes `source = \"{source}\"` with `{key} = \"*\"`, and the lock chooses the build for the target's driver"));
    Some((source, v.to_string()))
}

/// conda-forge's `pytorch-gpu` without `cuda-version`: conda takes the CUDA build the
/// machine's driver allows; the spec says any CUDA (`*`), which the resolver chooses for the
/// target.
fn pytorch_gpu_cuda(scan: &mut Scan, v: &str) -> Option<(Source, String)> {
    scan.found.conda_cuda = Some(ANY_VERSION.into());
    scan.line = scan.found.pytorch.as_ref().and_then(|p| p.1);
    scan.note(IMPORT_CHANGED, format!("`pytorch-gpu` selects conda-forge's CUDA build of pytorch {v} without saying which CUDA; the spec writes cuda = \"*\", and the lock chooses the build for the target's driver (add `cuda-version=X.Y` to choose)"));
    Some((Source::CondaForge, v.to_string()))
}
