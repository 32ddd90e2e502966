//! Validation of the as-written spec into [`Spec`]: a pipeline over the concerns (pins,
//! sources, packages, target, image, run), each in its own module, that reports every problem
//! in the order the keys are checked, not only the first. A `python` or `pytorch` range leaves
//! its hint to the resolver ([`Unpinned`]). This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::context::Ctx;
use super::pins::Pin;
use super::ranges::{Asked, Req, Syntax};
use super::raw::{RawCompanion, RawSpec};
use super::safety::is_name;
use super::{image, packages, pins, run, sources, target};
use super::{CondaPkg, Image, LockOpts, Parsed, PipPkg, PipSources, Run, Source, Spec, SpecErrors};
use super::{Locator, Target};
use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::version::Version;

pub(super) fn validate(
    raw: RawSpec,
    loc: &Locator<'_>,
    table: &Table,
) -> Result<Parsed, SpecErrors> {
    let cx = &mut Ctx::new(loc);
    let (raw, cuda_version_key) = cuda_spelling(cx, raw);
    let cuda_key = if cuda_version_key {
        "cuda-version"
    } else {
        "cuda"
    };
    let name = name(cx, raw.name.as_deref());
    // Python first: its problems come first.
    let python = pins::python(cx, &raw);
    let pytorch = pins::pytorch(cx, &raw, table);
    let pytorch_cuda = pins::cuda_version(
        cx,
        "pytorch-cuda",
        raw.pytorch_cuda.as_deref(),
        "pytorch-cuda value",
    );
    let cuda = pins::cuda_version(cx, cuda_key, raw.cuda.as_deref(), "CUDA version");
    let channels = sources::channels(cx, &raw);
    let source = sources::source(cx, &raw, channels.as_deref());
    let (conda, pip) = packages::packages(cx, &raw);
    let pip_sources = sources::pip_sources(cx, &raw);
    let target = target::target(cx, &raw.target);
    let image = image::image(cx, &raw.image);
    let run = run::run(cx, &raw.run);
    let lock = lock_opts(cx, &raw);
    let syntax = match source {
        Some(s) if s.is_conda() => Syntax::Conda,
        _ => Syntax::Pep440,
    };
    let selector = match source {
        Some(Source::PytorchChannel) => &pytorch_cuda,
        _ => &cuda,
    };
    let asked = Asked {
        python: ranged(cx, "python", &python, syntax),
        pytorch: ranged(cx, "pytorch", &pytorch, syntax),
        selector: match (source, selector) {
            // PyPI's CUDA is fixed per release: no selector to choose.
            (None | Some(Source::Pypi), _) => None,
            // None given: the build for the target's driver.
            (_, None) => Some(Req::any(syntax)),
            (Some(s), Some(p)) => ranged(
                cx,
                super::spelled_selector_key(s, cuda_version_key),
                p,
                syntax,
            ),
        },
        torchvision: companion(cx, "torchvision", raw.torchvision.as_ref(), syntax),
        torchaudio: companion(cx, "torchaudio", raw.torchaudio.as_ref(), syntax),
    };
    let exact = |p: &Option<Pin>| p.as_ref().and_then(|p| p.exact().cloned());
    let rest = Draft {
        name,
        channels,
        channels_given: raw.channels.is_some(),
        source,
        pytorch_cuda: exact(&pytorch_cuda),
        cuda: exact(&cuda),
        torchvision: !matches!(raw.torchvision, Some(RawCompanion::On(false))),
        torchaudio: !matches!(raw.torchaudio, Some(RawCompanion::On(false))),
        conda,
        pip,
        pip_sources,
        target,
        image,
        run,
        lock,
        asked,
        cuda_version_key,
    };
    let diags = cx.take();
    if !rest.asked.is_empty() {
        let unpinned = Box::new(Unpinned {
            python,
            pytorch,
            rest,
        });
        if diags.is_empty() {
            return Ok(Parsed::Ranged(unpinned));
        }
        return Err(SpecErrors {
            diagnostics: diags,
            partial: None,
            unpinned: Some(unpinned),
        });
    }
    let spec = match (python.exact(), pytorch.exact()) {
        (Some(py), Some(torch)) => rest.with(py, torch),
        _ => None,
    };
    let draft = Box::new(Unpinned {
        python,
        pytorch,
        rest,
    });
    finish(diags, spec).map(|s| Parsed::Exact(Box::new(s), draft))
}

/// `cuda-version`, conda-forge's name for its CUDA selector, read as `cuda` with the source
/// conda-forge (inferred when absent); whether the spec spelled it so. Given beside `cuda`, or
/// for another source, it is `INVALID_SPEC`.
fn cuda_spelling(cx: &mut Ctx, mut raw: RawSpec) -> (RawSpec, bool) {
    let Some(v) = raw.cuda_version.take() else {
        return (raw, false);
    };
    if raw.cuda.is_some() {
        cx.err(
            INVALID_SPEC,
            "cuda-version",
            "`cuda` and `cuda-version` are the same key: give one".into(),
            Some("keep `cuda-version` for conda-forge, or `cuda` for any source".into()),
        );
        return (raw, false);
    }
    match raw.source.as_deref().map(Source::parse) {
        None => raw.source = Some(Source::CondaForge.to_string()),
        Some(Some(Source::CondaForge)) | Some(None) => {}
        Some(Some(s)) => {
            let other = match s {
                Source::PytorchChannel => "`pytorch-cuda`",
                Source::Pypi => "no CUDA selector (the PyPI wheel's CUDA is fixed per release)",
                _ => "`cuda`",
            };
            cx.err(
                INVALID_SPEC,
                "cuda-version",
                format!(
                    "`cuda-version` is conda-forge's CUDA selector; source `{s}` takes {other}"
                ),
                Some("use source = \"conda-forge\", or the source's own key".into()),
            );
            return (raw, false);
        }
    }
    raw.cuda = Some(v);
    (raw, true)
}

/// The key that selects CUDA for a source.
pub fn selector_key(source: Source) -> &'static str {
    match source {
        Source::PytorchChannel => "pytorch-cuda",
        _ => "cuda",
    }
}

/// The requirement of a core key given as a range, parsed in the source's syntax.
fn ranged(cx: &mut Ctx, key: &str, pin: &Pin, syntax: Syntax) -> Option<Req> {
    let Pin::Range(text) = pin else {
        return None;
    };
    match Req::parse(text, syntax) {
        Ok(r) => Some(r),
        Err(why) => {
            cx.err(
                INVALID_SPEC,
                key,
                format!("{key} `{text}` {why}"),
                Some(match syntax {
                    Syntax::Pep440 => "a pip source takes PEP 440 ranges, e.g. \">=2.3,<2.6\" or \"==2.5.*\"".into(),
                    Syntax::Conda => "a conda source takes conda match-spec ranges, e.g. \">=2.3,<2.5a0\" or \"2.4.*\"".into(),
                }),
            );
            None
        }
    }
}

/// `torchvision` / `torchaudio` given as a version requirement.
fn companion(cx: &mut Ctx, key: &str, raw: Option<&RawCompanion>, syntax: Syntax) -> Option<Req> {
    let Some(RawCompanion::Version(text)) = raw else {
        return None;
    };
    // A range passes the range characters only (`>=0.15`), as the other core keys' do.
    if !pins::is_pkg_version(text.trim()) && !pins::range_like(text) && !cx.safe(key, text) {
        return None;
    }
    // An exact companion version is a requirement too: it selects the torch release it goes with.
    let text = if pins::is_pkg_version(text.trim()) {
        format!("=={}", text.trim())
    } else {
        text.clone()
    };
    ranged(cx, key, &Pin::Range(text), syntax)
}

/// Every key of a spec but `python` and `pytorch`, as validated (`None` where invalid): what a
/// spec is made of once those two (and any range) are chosen.
#[derive(Debug, Clone)]
pub struct Draft {
    name: Option<String>,
    channels: Option<Vec<String>>,
    channels_given: bool,
    source: Option<Source>,
    pytorch_cuda: Option<Version>,
    cuda: Option<Version>,
    torchvision: bool,
    torchaudio: bool,
    conda: Vec<CondaPkg>,
    pip: Vec<PipPkg>,
    pip_sources: PipSources,
    target: Option<Target>,
    image: Image,
    run: Run,
    lock: LockOpts,
    asked: Asked,
    /// conda-forge's selector written as `cuda-version` (see [`Spec::cuda_version_key`]).
    cuda_version_key: bool,
}

impl Draft {
    /// The spec with this `python` and `pytorch`, when the keys resolution needs are valid.
    pub fn with(&self, python: &Version, pytorch: &Version) -> Option<Spec> {
        let (source, target) = (self.source?, self.target.clone()?);
        Some(Spec {
            // A bad name does not stop resolution: report its problems in the same run.
            name: self
                .name
                .clone()
                .unwrap_or_else(|| "invalid-name".to_string()),
            channels: self.channels.clone().unwrap_or_else(|| {
                super::default_channels(source, pytorch, self.pytorch_cuda.as_ref())
            }),
            python: python.clone(),
            pytorch: pytorch.clone(),
            source,
            pytorch_cuda: self.pytorch_cuda.clone(),
            cuda: self.cuda.clone(),
            torchvision: self.torchvision,
            torchaudio: self.torchaudio,
            conda: self.conda.clone(),
            pip: self.pip.clone(),
            pip_sources: self.pip_sources.clone(),
            target,
            image: self.image.clone(),
            run: self.run.clone(),
            lock: self.lock.clone(),
            asked: self.asked.clone(),
            choices: Default::default(),
            cuda_version_key: self.cuda_version_key,
        })
    }

    /// The spec with a chosen `python`, `pytorch` and CUDA selector (for the source's key;
    /// `None` for PyPI, whose CUDA is the release's).
    pub fn chosen(
        &self,
        python: &Version,
        pytorch: &Version,
        selector: Option<&Version>,
    ) -> Option<Spec> {
        let mut d = self.clone();
        match d.source? {
            Source::PytorchChannel => d.pytorch_cuda = selector.cloned(),
            Source::Pypi => {}
            _ => d.cuda = selector.cloned(),
        }
        d.with(python, pytorch)
    }

    /// The ranges the spec asked for.
    pub fn asked(&self) -> &Asked {
        &self.asked
    }

    /// The key that selects CUDA for the source, as the spec spells it (`cuda` when the source
    /// is invalid).
    pub fn selector_key(&self) -> &'static str {
        self.source.map_or("cuda", |s| {
            super::spelled_selector_key(s, self.cuda_version_key)
        })
    }

    /// The source, when valid.
    pub fn source(&self) -> Option<Source> {
        self.source
    }

    /// The exact CUDA selector given for the source, if any.
    pub fn selector(&self) -> Option<&Version> {
        match self.source? {
            Source::PytorchChannel => self.pytorch_cuda.as_ref(),
            Source::Pypi => None,
            _ => self.cuda.as_ref(),
        }
    }

    /// Whether the spec names its channels (else the source's defaults apply).
    pub fn channels_given(&self) -> bool {
        self.channels_given
    }

    /// The draft with `key` (`python`, `pytorch`, `selector`, `torchvision`, `torchaudio`)
    /// widened to any version: what a hint tries when nothing satisfies the spec.
    pub fn widened(&self, key: &str) -> Draft {
        let mut d = self.clone();
        let syntax = match d.source {
            Some(s) if s.is_conda() => Syntax::Conda,
            _ => Syntax::Pep440,
        };
        let any = Some(Req::any(syntax));
        match key {
            "python" => d.asked.python = any,
            "pytorch" => d.asked.pytorch = any,
            "selector" if d.source != Some(Source::Pypi) => {
                d.asked.selector = any;
                d.cuda = None;
                d.pytorch_cuda = None;
            }
            "torchvision" => d.asked.torchvision = None,
            "torchaudio" => d.asked.torchaudio = None,
            _ => {}
        }
        d
    }
}

/// A spec that asks for a range on a core key (`python`, `pytorch`, the CUDA selector, a
/// companion), or gives no CUDA selector for a source that has several: the resolver chooses
/// the versions (`core::resolve::parse_spec`), then the spec is exact.
#[derive(Debug, Clone)]
pub struct Unpinned {
    pub python: Pin,
    pub pytorch: Pin,
    /// The rest of the spec, to try each candidate with; its [`Draft::asked`] holds every range.
    pub rest: Draft,
}

/// The spec when nothing was wrong; else every problem and, when resolution can still run,
/// the partial spec.
fn finish(diags: Vec<Diagnostic>, spec: Option<Spec>) -> Result<Spec, SpecErrors> {
    match spec {
        Some(spec) if diags.is_empty() => Ok(spec),
        partial => Err(SpecErrors {
            diagnostics: if diags.is_empty() {
                vec![Diagnostic::error(INVALID_SPEC, "the spec is incomplete")]
            } else {
                diags
            },
            partial: partial.map(Box::new),
            unpinned: None,
        }),
    }
}

/// `name`: required, and usable as an environment and image name.
fn name(cx: &mut Ctx, n: Option<&str>) -> Option<String> {
    let Some(n) = n else {
        cx.err(
            INVALID_SPEC,
            "name",
            "missing required key `name`".into(),
            Some("add e.g. name = \"torch-gpu-env\"".into()),
        );
        return None;
    };
    if !cx.safe("name", n) {
        return None;
    }
    // conda environment names keep their capitals (`SE3nv`); image names and tags are made
    // from a lowercase DNS label of the name when rendering.
    if is_name(&n.to_ascii_lowercase()) {
        return Some(n.to_string());
    }
    let suggestion = n
        .to_ascii_lowercase()
        .replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_' && c != '.',
            "-",
        )
        .trim_matches('-')
        .to_string();
    cx.err(
        INVALID_SPEC,
        "name",
        format!("name `{n}` is not a valid environment/image name"),
        Some(format!(
            "use letters, digits, `.`, `_` and `-`, e.g. `{suggestion}`"
        )),
    );
    None
}

/// Why a spec's closure cannot be locked in this version (packages the lock does not resolve
/// would sit beside the closure, unlocked and unchecked; a Windows target), `None` when it can.
fn closure_blocker(spec: &RawSpec) -> Option<&'static str> {
    if !spec.image.base_provides.is_empty() {
        Some("[image] base-provides")
    } else if spec.image.wheels.is_some() {
        Some("[image] wheels")
    } else if !spec.pip_find_links.is_empty() {
        Some("pip-find-links")
    } else if spec.target.platform.as_deref() == Some("win-64") {
        Some("a win-64 target")
    } else {
        None
    }
}

/// Whether the spec's lock holds the closure: as `[lock] closure` says, else (the default)
/// whenever it can.
fn wants_closure(spec: &RawSpec) -> bool {
    spec.lock
        .closure
        .unwrap_or_else(|| closure_blocker(spec).is_none())
}

/// `[lock]`: `closure` (wheel and conda environments; on by default) and the `index-url` the
/// closure's pip part comes from.
fn lock_opts(cx: &mut Ctx, spec: &RawSpec) -> super::LockOpts {
    let raw = &spec.lock;
    let closure = wants_closure(spec);
    let blocker = closure_blocker(spec);
    match (raw.closure, blocker) {
        (Some(true), Some(key)) if key != "a win-64 target" => cx.err(
            super::codes::CLOSURE_UNSUPPORTED,
            "lock.closure",
            format!("a closure lock cannot include what {key} installs outside it in this version"),
            Some(format!("remove {key}, or set `closure = false`")),
        ),
        _ => {}
    }
    // The default gives way to what blocks it: the lock says why it holds no closure.
    let closure_off = match (raw.closure, blocker) {
        (None, Some(key)) => Some(format!(
            "the lock pins the table level only (no closure): a closure cannot include what \
             {key} installs outside it in this version; set `[lock] closure = false` to say so"
        )),
        _ => None,
    };
    let index_url = raw.index_url.as_deref().and_then(|u| {
        if !cx.safe("lock.index-url", u) {
            return None;
        }
        if let Some((why, hint)) = crate::core::url::secret_refusal(u) {
            cx.err(INVALID_SPEC, "lock.index-url", why, Some(hint.into()));
            return None;
        }
        let local_http = ["http://127.0.0.1", "http://localhost"]
            .iter()
            .any(|p| u.strip_prefix(p).is_some_and(|r| r.is_empty() || r.starts_with([':', '/'])));
        let ok = (u.starts_with("https://") || u.starts_with("file:///") || local_http)
            && !u.contains(char::is_whitespace)
            && crate::core::url::path_trick(u).is_none();
        if !ok {
            cx.err(
                INVALID_SPEC,
                "lock.index-url",
                format!("`{u}` is not an index URL envbuild accepts"),
                Some("use an https:// URL (http:// only for 127.0.0.1 or localhost), or file:///path, without `.` or `..` segments".into()),
            );
            return None;
        }
        Some(u.trim_end_matches('/').to_string())
    });
    // One main index: the closure comes from where the image installs from. `[lock] index-url`
    // may only repeat the spec's `pip-index-url` (or stand alone: a mirror, a test index).
    let pip_index = spec
        .pip_index_url
        .as_deref()
        .map(|u| u.trim_end_matches('/'));
    let index_url = match (index_url, pip_index) {
        (Some(l), Some(p)) if l != p => {
            cx.err(
                INVALID_SPEC,
                "lock.index-url",
                format!(
                    "`[lock] index-url` (`{l}`) and `pip-index-url` (`{p}`) name two main indexes"
                ),
                Some(
                    "keep one: the closure is resolved from, and installed from, the same index"
                        .into(),
                ),
            );
            None
        }
        (Some(l), _) => Some(l),
        (None, p) if closure => p.map(str::to_string),
        (None, _) => None,
    };
    super::LockOpts {
        closure,
        index_url,
        base_digest: raw.base_digest,
        closure_off,
    }
}
