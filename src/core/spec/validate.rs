//! Validation of the as-written spec into [`Spec`]: pins, inference of the source, and the
//! character rules that keep spec values out of trouble in Dockerfiles, YAML and shells.
//! Every problem is reported, not only the first. This module performs no I/O.

use super::codes::{INVALID_SPEC, UNPINNED_VERSION, UNSAFE_VALUE};
use super::raw::RawSpec;
use super::{CondaPkg, Image, Locator, PipPkg, Platform, Run, Source, Spec, Target, Variant};
use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::version::Version;

/// No spec value needs more; longer ones are refused before they reach any output.
pub const MAX_VALUE_LEN: usize = 200;

pub const CHANNEL_NAME_HINT: &str =
    "a channel is a name such as `conda-forge` or an https:// URL without spaces or quotes";

/// Packages the spec manages through its own keys; naming them in `conda`/`pip` is a conflict.
const MANAGED: &[(&str, &str)] = &[
    ("python", "python"),
    ("pytorch", "pytorch"),
    ("torch", "pytorch"),
    ("torchvision", "torchvision"),
    ("torchaudio", "torchaudio"),
    ("pytorch-cuda", "pytorch-cuda"),
    ("cudatoolkit", "pytorch-cuda"),
    ("cuda-version", "cuda"),
    ("pytorch-gpu", "pytorch"),
];

struct Ctx<'a> {
    loc: &'a Locator<'a>,
    diags: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn err(&mut self, code: &'static str, key: &str, message: String, hint: Option<String>) {
        let mut d = Diagnostic::error(code, message).with_location(self.loc.find(key));
        d.hint = hint;
        self.diags.push(d);
    }

    /// Refuse characters that could end a Dockerfile line, a YAML scalar or a shell word.
    fn safe(&mut self, key: &str, value: &str) -> bool {
        if value.len() > MAX_VALUE_LEN {
            self.err(
                UNSAFE_VALUE,
                key,
                format!(
                    "`{key}` is {} characters long (at most {MAX_VALUE_LEN})",
                    value.len()
                ),
                Some("no spec value needs to be this long; check the file".into()),
            );
            return false;
        }
        if let Some(c) = value.chars().find(|c| is_dangerous(*c)) {
            self.err(
                UNSAFE_VALUE,
                key,
                format!("`{key}` contains {}, which envbuild never passes on to a Dockerfile, YAML file or shell", describe_char(c)),
                Some("remove it: versions, names and paths need only letters, digits and . _ - / : + = @".into()),
            );
            return false;
        }
        true
    }
}

fn is_dangerous(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '$' | '`'
                | ';'
                | '&'
                | '|'
                | '\''
                | '"'
                | '\\'
                | '<'
                | '>'
                | '('
                | ')'
                | '{'
                | '}'
                | '#'
                | '!'
                | '*'
                | '?'
                | '~'
                | '%'
                | '^'
        )
        || !c.is_ascii()
}

fn describe_char(c: char) -> String {
    match c {
        '\n' => "a newline".into(),
        '\r' => "a carriage return".into(),
        '\t' => "a tab".into(),
        c if c.is_control() => format!("a control character (U+{:04X})", c as u32),
        c if !c.is_ascii() => format!("a non-ASCII character `{c}`"),
        c => format!("`{c}`"),
    }
}

/// A path safe to COPY or mount: relative (inside the project) or absolute as asked, no `..`,
/// and no segment starting with `-` (it would read as an option).
pub fn is_safe_path(p: &str, absolute: bool) -> bool {
    !p.is_empty()
        && p.len() <= MAX_VALUE_LEN
        && p.starts_with('/') == absolute
        && p.split('/').all(|s| s != ".." && !s.starts_with('-'))
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

fn is_pkg_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
}

/// A requirement written with range operators and nothing else: it is reported as unpinned
/// (and never reaches any output), not as unsafe.
fn range_like(s: &str) -> bool {
    s.len() <= 100
        && s.bytes().any(|b| b"<>=!~^*,".contains(&b))
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .,<>=!~^*-_[]:".contains(&b))
}

/// Why a version string is not an exact pin, if it is not.
fn unpinned(s: &str) -> Option<&'static str> {
    let t = s.trim();
    if t.is_empty() {
        return Some("is empty");
    }
    if t.eq_ignore_ascii_case("latest") || t == "*" || t.eq_ignore_ascii_case("any") {
        return Some("floats");
    }
    if t.starts_with(['>', '<', '~', '^', '!', '=']) || t.contains(['*', ',']) || t.contains(' ') {
        return Some("is a range, not an exact version");
    }
    None
}

/// Versions in `candidates` that satisfy a requirement such as `>=2.4`, `~=2.5`, `2.5`, `2.*`.
fn satisfies(req: &str, v: &Version) -> bool {
    let req = req.trim();
    if req.is_empty()
        || req == "*"
        || req.eq_ignore_ascii_case("latest")
        || req.eq_ignore_ascii_case("any")
    {
        return true;
    }
    req.split(',').all(|clause| {
        let c = clause.trim();
        let (op, rest) = ["==", ">=", "<=", "~=", "!=", ">", "<", "^", "~", "="]
            .iter()
            .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim())))
            .unwrap_or(("prefix", c));
        let rest = rest
            .trim_end_matches(".*")
            .trim_end_matches('*')
            .trim_end_matches('.');
        let Some(b) = Version::parse(rest) else {
            return rest.is_empty();
        };
        match op {
            ">=" => *v >= b,
            "<=" => *v <= b,
            ">" => *v > b,
            "<" => *v < b,
            "!=" => *v != b,
            "~=" | "~" | "^" => {
                // Compatible release: same leading components, not older.
                let keep = if op == "^" {
                    1
                } else {
                    b.len().saturating_sub(1).max(1)
                };
                let prefix = Version::parse(
                    &b.parts()[..keep]
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join("."),
                );
                *v >= b && prefix.is_some_and(|p| v.starts_with(&p))
            }
            _ => v.starts_with(&b),
        }
    })
}

/// The newest torch in the table that satisfies `req` (and supports `python`, when known).
fn newest_torch_fitting(table: &Table, req: &str, python: Option<&Version>) -> Option<Version> {
    table
        .torch
        .iter()
        .rev()
        .filter(|t| satisfies(req, &t.version))
        .find(|t| python.is_none_or(|p| t.python.iter().any(|x| p.starts_with(x))))
        .map(|t| t.version.clone())
}

/// Parsed form of an extra package line.
pub enum PkgParse<T> {
    Ok(T),
    Unpinned { name: String, why: &'static str },
    Invalid(String),
}

/// `[channel::]name=version` (also `==`); a build string (`=py310_0`) is dropped, as
/// `conda env export` writes one.
pub fn parse_conda_pkg(s: &str) -> PkgParse<CondaPkg> {
    let s = s.trim();
    let (channel, rest) = match s.split_once("::") {
        Some((c, r)) => (Some(c.to_string()), r),
        None => (None, s),
    };
    if let Some(c) = &channel {
        if !is_channel(c) {
            return PkgParse::Invalid(format!("channel `{c}` is not a valid channel name"));
        }
    }
    let split_at = rest
        .find(['=', '<', '>', '!', '~', ' ', '*'])
        .unwrap_or(rest.len());
    let (name, spec) = rest.split_at(split_at);
    let name = name.trim().to_ascii_lowercase();
    if !is_name(&name) {
        return PkgParse::Invalid(format!("`{s}` is not `name=version`"));
    }
    let spec = spec.trim();
    let version = spec.strip_prefix("==").or_else(|| spec.strip_prefix('='));
    let version = match version {
        Some(v) if !v.starts_with(['=', '<', '>']) => v,
        _ => {
            return PkgParse::Unpinned {
                name,
                why: if spec.is_empty() {
                    "has no version"
                } else {
                    "is a range, not an exact version"
                },
            }
        }
    };
    // conda's `name=version=build`: keep the version, drop the build string.
    let version = version.split('=').next().unwrap_or("");
    if let Some(why) = unpinned(version) {
        return PkgParse::Unpinned { name, why };
    }
    if !is_pkg_version(version) {
        return PkgParse::Invalid(format!("`{version}` is not a valid version for `{name}`"));
    }
    PkgParse::Ok(CondaPkg {
        channel,
        name,
        version: version.to_string(),
    })
}

/// `name[extra,...]==version`.
pub fn parse_pip_pkg(s: &str) -> PkgParse<PipPkg> {
    let s = s.trim();
    let split_at = s
        .find(['=', '<', '>', '!', '~', ' ', '[', '@', ';'])
        .unwrap_or(s.len());
    let (name, rest) = s.split_at(split_at);
    let name = name.trim().to_ascii_lowercase().replace('_', "-");
    if !is_name(&name) {
        return PkgParse::Invalid(format!("`{s}` is not `name==version`"));
    }
    let (extras, rest) = match rest.strip_prefix('[') {
        Some(r) => match r.split_once(']') {
            Some((e, r)) => (
                e.split(',')
                    .map(|x| x.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>(),
                r,
            ),
            None => return PkgParse::Invalid(format!("`{s}`: unclosed `[`")),
        },
        None => (Vec::new(), rest),
    };
    if extras.iter().any(|e| !is_name(e)) {
        return PkgParse::Invalid(format!("`{s}`: bad extras"));
    }
    let rest = rest.trim();
    let Some(version) = rest.strip_prefix("==").filter(|v| !v.starts_with('=')) else {
        return PkgParse::Unpinned {
            name,
            why: if rest.is_empty() {
                "has no version"
            } else {
                "is not pinned with `==`"
            },
        };
    };
    if let Some(why) = unpinned(version) {
        return PkgParse::Unpinned { name, why };
    }
    if !is_pkg_version(version) {
        return PkgParse::Invalid(format!("`{version}` is not a valid version for `{name}`"));
    }
    PkgParse::Ok(PipPkg {
        name,
        extras,
        version: version.to_string(),
    })
}

fn is_channel(c: &str) -> bool {
    if let Some(rest) = c
        .strip_prefix("https://")
        .or_else(|| c.strip_prefix("http://"))
    {
        return !rest.is_empty()
            && c.len() <= MAX_VALUE_LEN
            && rest.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
            });
    }
    is_name(c)
}

/// A Docker image reference, pinned by a tag other than `latest` or by a digest.
fn check_image_ref(s: &str) -> Result<(), &'static str> {
    let ok_chars = s.bytes().all(|b| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || matches!(b, b'.' | b'_' | b'-' | b'/' | b':' | b'@')
    });
    let upper_ok = s
        .rsplit_once(':')
        .map(|(_, tag)| {
            tag.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
        .unwrap_or(false);
    if s.is_empty() || !(ok_chars || upper_ok) || s.starts_with(['-', '.', '/', ':', '@']) {
        return Err("is not an image reference such as `python:3.11-slim-bookworm`");
    }
    if let Some((_, digest)) = s.split_once("@sha256:") {
        if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(());
        }
        return Err("has a malformed digest (want @sha256:<64 hex>)");
    }
    let last = s.rsplit('/').next().unwrap_or(s);
    match last.split_once(':') {
        Some((_, "latest")) => Err("uses the floating tag `latest`"),
        Some((_, tag)) if !tag.is_empty() => Ok(()),
        _ => Err("has no tag, so it floats like `latest`"),
    }
}

pub(super) fn validate(
    raw: RawSpec,
    loc: &Locator<'_>,
    table: &Table,
) -> Result<Spec, super::SpecErrors> {
    let mut cx = Ctx {
        loc,
        diags: Vec::new(),
    };

    let name = match raw.name.as_deref() {
        None => {
            cx.err(
                INVALID_SPEC,
                "name",
                "missing required key `name`".into(),
                Some("add e.g. name = \"torch-gpu-env\"".into()),
            );
            None
        }
        Some(n) if !cx.safe("name", n) => None,
        Some(n) if !is_name(n) => {
            cx.err(
                INVALID_SPEC,
                "name",
                format!("name `{n}` is not a valid environment/image name"),
                Some(format!(
                    "use lowercase letters, digits, `.`, `_` and `-`, e.g. `{}`",
                    n.to_ascii_lowercase()
                        .replace(
                            |c: char| !c.is_ascii_alphanumeric()
                                && c != '-'
                                && c != '_'
                                && c != '.',
                            "-"
                        )
                        .trim_matches('-')
                )),
            );
            None
        }
        Some(n) => Some(n.to_string()),
    };

    // Python first: its value sharpens the hints for an unpinned pytorch.
    let python = match raw.python.as_deref() {
        None => {
            cx.err(
                INVALID_SPEC,
                "python",
                "missing required key `python`".into(),
                Some("add e.g. python = \"3.11\"".into()),
            );
            None
        }
        Some(p) if unpinned(p).is_some() => {
            let torch = raw
                .pytorch
                .as_deref()
                .and_then(Version::parse)
                .and_then(|v| table.torch_row(&v).cloned());
            let newest = torch
                .as_ref()
                .and_then(|t| t.python.iter().rfind(|x| satisfies(p, x)).cloned())
                .or_else(|| {
                    table
                        .python
                        .iter()
                        .map(|r| r.version.clone())
                        .rfind(|x| satisfies(p, x))
                });
            cx.err(
                UNPINNED_VERSION,
                "python",
                format!("python `{p}` {}", unpinned(p).unwrap_or("is not pinned")),
                Some(match newest {
                    Some(v) => format!("pin it: python = \"{v}\" is the newest that fits"),
                    None => "pin it to a version such as \"3.11\"".into(),
                }),
            );
            None
        }
        Some(p) if !cx.safe("python", p) => None,
        Some(p) => match Version::parse(p) {
            Some(v) if (2..=3).contains(&v.len()) && v.major() == 3 => Some(v),
            _ => {
                cx.err(
                    INVALID_SPEC,
                    "python",
                    format!("python `{p}` is not a Python version"),
                    Some("use \"3.11\" or \"3.11.9\"".into()),
                );
                None
            }
        },
    };

    let pytorch = match raw.pytorch.as_deref() {
        None => {
            cx.err(
                INVALID_SPEC,
                "pytorch",
                "missing required key `pytorch`".into(),
                Some(format!(
                    "add e.g. pytorch = \"{}\"",
                    table
                        .newest_torch()
                        .map(|t| t.version.to_string())
                        .unwrap_or_default()
                )),
            );
            None
        }
        Some(t) => {
            let exact = Version::parse(t.trim()).filter(|v| v.len() == 3);
            // "2.5" or "latest" pass the character rules; ranges are reported as unpinned.
            match exact {
                Some(v) => Some(v),
                None if !range_like(t) && !cx.safe("pytorch", t) => None,
                None => {
                    let why = unpinned(t).unwrap_or("is not an exact version");
                    let is_partial = Version::parse(t.trim()).is_some();
                    let newest = newest_torch_fitting(table, t, python.as_ref());
                    cx.err(
                        UNPINNED_VERSION,
                        "pytorch",
                        format!(
                            "pytorch `{t}` {}",
                            if is_partial {
                                "is not an exact version"
                            } else {
                                why
                            }
                        ),
                        Some(match newest {
                            Some(v) => format!(
                                "pin it: pytorch = \"{v}\" is the newest that fits{}",
                                python
                                    .as_ref()
                                    .map(|p| format!(" python {p}"))
                                    .unwrap_or_default()
                            ),
                            None => {
                                "pin an exact version; `envbuild table torch` lists them".into()
                            }
                        }),
                    );
                    None
                }
            }
        }
    };

    let version_key =
        |cx: &mut Ctx, key: &str, val: &Option<String>, what: &str| -> Option<Version> {
            let s = val.as_deref()?;
            if let Some(why) = unpinned(s) {
                cx.err(
                    UNPINNED_VERSION,
                    key,
                    format!("{key} `{s}` {why}"),
                    Some(format!(
                        "pin an exact {what}, e.g. \"12.4\"; `envbuild table torch` lists them"
                    )),
                );
                return None;
            }
            if !cx.safe(key, s) {
                return None;
            }
            match Version::parse(s) {
                Some(v) if v.len() == 2 => Some(v),
                Some(v) if v.len() == 3 => {
                    cx.err(
                        INVALID_SPEC,
                        key,
                        format!("{key} `{s}` names a patch release"),
                        Some(format!("use major.minor: \"{}\"", v.major_minor())),
                    );
                    None
                }
                _ => {
                    cx.err(
                        INVALID_SPEC,
                        key,
                        format!("{key} `{s}` is not a CUDA version"),
                        Some(format!("use major.minor, e.g. \"12.4\" ({what})")),
                    );
                    None
                }
            }
        };
    let pytorch_cuda = version_key(
        &mut cx,
        "pytorch-cuda",
        &raw.pytorch_cuda,
        "pytorch-cuda value",
    );
    let cuda = version_key(&mut cx, "cuda", &raw.cuda, "CUDA version");

    let channels = match &raw.channels {
        None => None,
        Some(list) => {
            let mut out = Vec::new();
            for c in list {
                if !cx.safe("channels", c) {
                    continue;
                }
                if !is_channel(c) {
                    cx.err(
                        INVALID_SPEC,
                        "channels",
                        format!("channel `{c}` is not a valid channel"),
                        Some(CHANNEL_NAME_HINT.into()),
                    );
                } else if out.contains(c) {
                    cx.err(
                        INVALID_SPEC,
                        "channels",
                        format!("channel `{c}` is listed twice"),
                        Some("list each channel once, in priority order".into()),
                    );
                } else {
                    out.push(c.clone());
                }
            }
            if list.is_empty() {
                cx.err(
                    INVALID_SPEC,
                    "channels",
                    "`channels` is empty".into(),
                    Some("remove the key to use the default channels, or list at least one".into()),
                );
            }
            Some(out)
        }
    };

    // Source: given, or inferred (pytorch-cuda → pytorch channel; conda-forge alone with cuda →
    // conda-forge; cuda → PyTorch wheel index; nothing → plain PyPI).
    let source = match raw.source.as_deref() {
        Some(s) => match Source::parse(s) {
            Some(src) => Some(src),
            None => {
                if cx.safe("source", s) {
                    cx.err(
                        INVALID_SPEC,
                        "source",
                        format!("unknown source `{s}`"),
                        Some("use one of pytorch-channel, conda-forge, pytorch-index, pypi".into()),
                    );
                }
                None
            }
        },
        None => Some(if raw.pytorch_cuda.is_some() {
            Source::PytorchChannel
        } else if raw.cuda.is_some()
            && channels.as_deref() == Some(&["conda-forge".to_string()][..])
        {
            Source::CondaForge
        } else if raw.cuda.is_some() {
            Source::PytorchIndex
        } else {
            Source::Pypi
        }),
    };
    if let Some(src) = source {
        match src {
            Source::PytorchChannel if raw.pytorch_cuda.is_none() => cx.err(
                INVALID_SPEC,
                "source",
                "source `pytorch-channel` needs `pytorch-cuda` (the channel's CUDA selector)".into(),
                Some("add e.g. pytorch-cuda = \"12.4\"".into()),
            ),
            Source::PytorchChannel if raw.cuda.is_some() => cx.err(
                INVALID_SPEC,
                "cuda",
                "`cuda` does not apply to source `pytorch-channel`".into(),
                Some("the pytorch channel selects CUDA with `pytorch-cuda`; remove `cuda`".into()),
            ),
            Source::CondaForge | Source::PytorchIndex if raw.cuda.is_none() => cx.err(
                INVALID_SPEC,
                "source",
                format!("source `{src}` needs `cuda`"),
                Some(if src == Source::CondaForge {
                    "add e.g. cuda = \"12.9\" (conda-forge's cuda-version)".into()
                } else {
                    "add e.g. cuda = \"12.4\" (the cu124 wheel index)".into()
                }),
            ),
            Source::Pypi if raw.cuda.is_some() => cx.err(
                INVALID_SPEC,
                "cuda",
                "`cuda` does not apply to source `pypi` (the PyPI wheel's CUDA is fixed per release)".into(),
                Some("use source = \"pytorch-index\" to pick the CUDA, or remove `cuda`".into()),
            ),
            s if s != Source::PytorchChannel && raw.pytorch_cuda.is_some() => cx.err(
                INVALID_SPEC,
                "pytorch-cuda",
                format!("`pytorch-cuda` only applies to source `pytorch-channel`, not `{s}`"),
                Some("use `cuda` for the other sources".into()),
            ),
            _ => {}
        }
    }

    let mut conda = Vec::new();
    for p in &raw.conda {
        if !range_like(p) && !cx.safe("conda", p) {
            continue;
        }
        match parse_conda_pkg(p) {
            PkgParse::Ok(pkg) => conda.push(pkg),
            PkgParse::Unpinned { name, why } => cx.err(
                UNPINNED_VERSION,
                "conda",
                format!("conda package `{p}` {why}"),
                Some(format!("pin an exact version, e.g. \"{name}=<version>\"; `conda search {name}` lists them")),
            ),
            PkgParse::Invalid(m) => cx.err(INVALID_SPEC, "conda", m, Some("write conda packages as \"name=version\" or \"channel::name=version\"".into())),
        }
    }
    let mut pip = Vec::new();
    for p in &raw.pip {
        if !range_like(p) && !cx.safe("pip", p) {
            continue;
        }
        match parse_pip_pkg(p) {
            PkgParse::Ok(pkg) => pip.push(pkg),
            PkgParse::Unpinned { name, why } => cx.err(
                UNPINNED_VERSION,
                "pip",
                format!("pip package `{p}` {why}"),
                Some(format!("pin an exact version, e.g. \"{name}==<version>\"; `pip index versions {name}` lists them")),
            ),
            PkgParse::Invalid(m) => cx.err(INVALID_SPEC, "pip", m, Some("write pip packages as \"name==version\"".into())),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (key, n) in conda
        .iter()
        .map(|c| ("conda", &c.name))
        .chain(pip.iter().map(|p| ("pip", &p.name)))
    {
        if let Some((_, k)) = MANAGED.iter().find(|(m, _)| m == n) {
            cx.err(
                INVALID_SPEC,
                key,
                format!("`{n}` is managed by the spec's `{k}` key"),
                Some(format!("remove it from `{key}` and set `{k}` instead")),
            );
        } else if !seen.insert(n.clone()) {
            cx.err(
                INVALID_SPEC,
                key,
                format!("package `{n}` is listed twice"),
                Some("keep one pin per package".into()),
            );
        }
    }
    conda.sort();
    pip.sort();

    let target = {
        let t = &raw.target;
        let driver = match t.driver.as_deref() {
            None => None,
            Some(d) if !cx.safe("target.driver", d) => None,
            Some(d) => match Version::parse(d) {
                Some(v) if v.len() >= 2 && v.major() >= 100 => Some(v),
                _ => {
                    cx.err(
                        INVALID_SPEC,
                        "target.driver",
                        format!("driver `{d}` is not an NVIDIA driver version"),
                        Some("use the version nvidia-smi prints, e.g. \"535.104.05\"".into()),
                    );
                    None
                }
            },
        };
        let mut gpus = Vec::new();
        for g in &t.gpus {
            if cx.safe("target.gpus", g) {
                let g = g.trim().to_string();
                if g.is_empty() {
                    cx.err(
                        INVALID_SPEC,
                        "target.gpus",
                        "an entry of `gpus` is empty".into(),
                        Some(
                            "name a GPU model (\"A100\") or a compute capability (\"8.0\")".into(),
                        ),
                    );
                } else if !gpus.contains(&g) {
                    gpus.push(g);
                }
            }
        }
        let platform = match t.platform.as_deref() {
            None => Some(Platform::Linux64),
            Some(p) => match Platform::parse(p) {
                Some(p) => Some(p),
                None => {
                    if cx.safe("target.platform", p) {
                        cx.err(
                            INVALID_SPEC,
                            "target.platform",
                            format!("unknown platform `{p}`"),
                            Some("use linux-64, linux-aarch64 or win-64".into()),
                        );
                    }
                    None
                }
            },
        };
        let glibc = match t.glibc.as_deref() {
            None => None,
            Some(g) if !cx.safe("target.glibc", g) => None,
            Some(g) => match Version::parse(g) {
                Some(v) if v.len() == 2 && v.major() == 2 => Some(v),
                _ => {
                    cx.err(
                        INVALID_SPEC,
                        "target.glibc",
                        format!("glibc `{g}` is not a glibc version"),
                        Some("use e.g. \"2.17\" (ldd --version prints it)".into()),
                    );
                    None
                }
            },
        };
        platform.map(|platform| Target {
            driver,
            gpus,
            platform,
            glibc,
            forward_compat: t.forward_compat.unwrap_or(false),
        })
    };

    let image = {
        let i = &raw.image;
        let base = match i.base.as_deref() {
            None => None,
            Some(b) if !cx.safe("image.base", b) => None,
            Some(b) => match check_image_ref(b) {
                Ok(()) => Some(b.to_string()),
                Err(why) => {
                    let code = if why.contains("float") || why.contains("latest") {
                        UNPINNED_VERSION
                    } else {
                        INVALID_SPEC
                    };
                    cx.err(code, "image.base", format!("base image `{b}` {why}"), Some("pin a tag or digest, e.g. \"python:3.11.9-slim-bookworm\" or \"name@sha256:...\"".into()));
                    None
                }
            },
        };
        let mut variants = Vec::new();
        for v in i
            .variants
            .clone()
            .unwrap_or_else(|| vec!["runtime".into(), "dev".into()])
        {
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
        if i.variants.as_ref().is_some_and(|v| v.is_empty()) {
            cx.err(
                INVALID_SPEC,
                "image.variants",
                "`variants` is empty".into(),
                Some("list \"runtime\", \"dev\" or both".into()),
            );
        }
        let mut base_provides = Vec::new();
        for p in &i.base_provides {
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
        if !base_provides.is_empty() && i.base.is_none() {
            cx.err(
                INVALID_SPEC,
                "image.base-provides",
                "`base-provides` needs `[image] base`".into(),
                Some("set base to the image that provides these packages".into()),
            );
        }
        let wheels = match i.wheels.as_deref() {
            None => None,
            Some(w) if !cx.safe("image.wheels", w) => None,
            Some(w) if is_safe_path(w.trim_end_matches('/'), false) => {
                Some(w.trim_end_matches('/').to_string())
            }
            Some(w) => {
                cx.err(
                    INVALID_SPEC,
                    "image.wheels",
                    format!("wheels directory `{w}` must be a relative path inside the project"),
                    Some("e.g. wheels = \"wheels\" (no `..`, no absolute path)".into()),
                );
                None
            }
        };
        let jupyterlab = match i.jupyterlab.as_deref() {
            None => None,
            Some(j) if unpinned(j).is_some() => {
                cx.err(
                    UNPINNED_VERSION,
                    "image.jupyterlab",
                    format!("jupyterlab `{j}` is not an exact version"),
                    Some("pin it, e.g. jupyterlab = \"4.4.10\"".into()),
                );
                None
            }
            Some(j) if !cx.safe("image.jupyterlab", j) => None,
            Some(j) if is_pkg_version(j) => Some(j.to_string()),
            Some(j) => {
                cx.err(
                    INVALID_SPEC,
                    "image.jupyterlab",
                    format!("jupyterlab `{j}` is not a version"),
                    Some("e.g. jupyterlab = \"4.4.10\"".into()),
                );
                None
            }
        };
        Image {
            base,
            variants,
            base_provides,
            wheels,
            ssh: i.ssh.unwrap_or(false),
            jupyterlab,
        }
    };

    let run = {
        let r = &raw.run;
        let shm_size = match r.shm_size.as_deref() {
            None => "16g".to_string(),
            Some(s) if !cx.safe("run.shm-size", s) => String::new(),
            Some(s) => {
                let digits = s.trim_end_matches(['k', 'm', 'g', 'K', 'M', 'G']);
                if !digits.is_empty()
                    && digits.len() <= 12
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && s.len() - digits.len() <= 1
                {
                    s.to_ascii_lowercase()
                } else {
                    cx.err(
                        INVALID_SPEC,
                        "run.shm-size",
                        format!("shm-size `{s}` is not a size"),
                        Some("use e.g. \"16g\" or \"512m\"".into()),
                    );
                    String::new()
                }
            }
        };
        let path = |cx: &mut Ctx, key: &str, v: &Option<String>| -> Option<String> {
            let p = v.as_deref()?;
            if !cx.safe(key, p) {
                return None;
            }
            if is_safe_path(p, true) {
                Some(p.to_string())
            } else {
                cx.err(
                    INVALID_SPEC,
                    key,
                    format!("`{key}` must be an absolute path, e.g. \"/data\""),
                    Some("letters, digits, `.`, `_`, `-` and `/` only".into()),
                );
                None
            }
        };
        let datasets = path(&mut cx, "run.datasets", &r.datasets);
        let checkpoints = path(&mut cx, "run.checkpoints", &r.checkpoints);
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
    };

    let spec = match (python, pytorch, source, target) {
        (Some(python), Some(pytorch), Some(source), Some(target)) => Some(Spec {
            // A bad name does not stop resolution: report its problems in the same run.
            name: name.unwrap_or_else(|| "invalid-name".to_string()),
            channels: channels.unwrap_or_else(|| {
                super::default_channels(source, &pytorch, pytorch_cuda.as_ref())
            }),
            python,
            pytorch,
            source,
            pytorch_cuda,
            cuda,
            torchvision: raw.torchvision.unwrap_or(true),
            torchaudio: raw.torchaudio.unwrap_or(true),
            conda,
            pip,
            target,
            image,
            run,
        }),
        _ => None,
    };
    match spec {
        Some(spec) if cx.diags.is_empty() => Ok(spec),
        partial => Err(super::SpecErrors {
            diagnostics: if cx.diags.is_empty() {
                vec![Diagnostic::error(INVALID_SPEC, "the spec is incomplete")]
            } else {
                cx.diags
            },
            partial: partial.map(Box::new),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn requirement_ranges_select_the_right_versions() {
        assert!(satisfies(">=2.4", &v("2.5.1")));
        assert!(!satisfies("<2.4", &v("2.5.1")));
        assert!(satisfies("~=2.5.0", &v("2.5.1")));
        assert!(!satisfies("~=2.5.0", &v("2.6.0")));
        assert!(satisfies("2.5", &v("2.5.1")));
        assert!(satisfies("2.*", &v("2.9.0")));
        assert!(satisfies("^2.1", &v("2.9.0")));
        assert!(satisfies(">=2.1,<2.4", &v("2.3.1")));
        assert!(satisfies("latest", &v("1.0")));
    }

    #[test]
    fn conda_and_pip_pins_parse_and_floats_are_refused() {
        assert!(
            matches!(parse_conda_pkg("numpy=1.26.4"), PkgParse::Ok(p) if p.version == "1.26.4")
        );
        assert!(
            matches!(parse_conda_pkg("conda-forge::pandas==2.1.1"), PkgParse::Ok(p) if p.channel.as_deref() == Some("conda-forge"))
        );
        assert!(
            matches!(parse_conda_pkg("numpy=1.26.4=py310h5f9d8c6_0"), PkgParse::Ok(p) if p.version == "1.26.4")
        );
        for f in [
            "numpy",
            "numpy>=1.2",
            "numpy=1.*",
            "numpy=*",
            "numpy=latest",
        ] {
            assert!(
                matches!(parse_conda_pkg(f), PkgParse::Unpinned { .. }),
                "{f}"
            );
        }
        assert!(
            matches!(parse_pip_pkg("Some_Pkg[extra]==1.0.0"), PkgParse::Ok(p) if p.name == "some-pkg" && p.extras == ["extra"])
        );
        for f in [
            "pkg",
            "pkg>=1",
            "pkg~=1.0",
            "pkg!=1",
            "pkg==1.*",
            "pkg==latest",
        ] {
            assert!(matches!(parse_pip_pkg(f), PkgParse::Unpinned { .. }), "{f}");
        }
        assert!(matches!(
            parse_pip_pkg("pkg @ https://x"),
            PkgParse::Unpinned { .. }
        ));
    }

    #[test]
    fn image_references_must_be_pinned() {
        assert!(check_image_ref("python:3.11-slim-bookworm").is_ok());
        assert!(check_image_ref("nvcr.io/nvidia/pytorch:24.05-py3").is_ok());
        assert!(check_image_ref(&format!("busybox@sha256:{}", "a".repeat(64))).is_ok());
        assert!(check_image_ref("localhost:5000/img:1.0").is_ok());
        assert!(check_image_ref("python").is_err());
        assert!(check_image_ref("python:latest").is_err());
        assert!(check_image_ref("localhost:5000/img").is_err());
        assert!(check_image_ref("img@sha256:zz").is_err());
    }

    #[test]
    fn paths_stay_inside() {
        assert!(is_safe_path("wheels/local", false));
        assert!(!is_safe_path("../etc", false));
        assert!(!is_safe_path("/abs", false));
        assert!(is_safe_path("/data", true));
        assert!(!is_safe_path("/data/../x", true));
        assert!(!is_safe_path("---", false));
        assert!(!is_safe_path("/data/-rf", true));
    }
}
