//! Validation of the as-written spec into [`Spec`]: a pipeline over the concerns (pins,
//! sources, packages, target, image, run), each in its own module, that reports every problem
//! in the order the keys are checked, not only the first. This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::pins::{PythonPin, TorchPin};
use super::raw::RawSpec;
use super::safety::{is_name, refusal};
use super::{image, packages, pins, run, sources, target};
use super::{Locator, Spec, SpecErrors};
use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::version::Version;

/// The problems found so far, located in the spec text.
pub(super) struct Ctx<'a> {
    loc: &'a Locator<'a>,
    diags: Vec<Diagnostic>,
}

impl Ctx<'_> {
    pub(super) fn err(
        &mut self,
        code: &'static str,
        key: &str,
        message: String,
        hint: Option<String>,
    ) {
        let mut d = Diagnostic::error(code, message).with_location(self.loc.find(key));
        d.hint = hint;
        self.diags.push(d);
    }

    /// How many problems were found so far (the index the next one gets).
    pub(super) fn count(&self) -> usize {
        self.diags.len()
    }

    /// Give the problem at `index` its hint.
    fn set_hint(&mut self, index: usize, hint: String) {
        if let Some(d) = self.diags.get_mut(index) {
            d.hint = Some(hint);
        }
    }

    /// Refuse characters that could end a Dockerfile line, a YAML scalar or a shell word (see
    /// [`refusal`]); true when `value` is safe.
    pub(super) fn safe(&mut self, key: &str, value: &str) -> bool {
        match refusal(key, value) {
            Some((message, hint)) => {
                self.err(super::codes::UNSAFE_VALUE, key, message, Some(hint.into()));
                false
            }
            None => true,
        }
    }
}

pub(super) fn validate(raw: RawSpec, loc: &Locator<'_>, table: &Table) -> Result<Spec, SpecErrors> {
    let mut cx = Ctx {
        loc,
        diags: Vec::new(),
    };
    let cx = &mut cx;
    let name = name(cx, raw.name.as_deref());
    // Python first: its value sharpens the hints for an unpinned pytorch.
    let python_pin = pins::python(cx, &raw);
    let python = python_pin.exact();
    let pytorch = pins::pytorch(cx, &raw, table);
    let pytorch_cuda = pins::cuda_version(
        cx,
        "pytorch-cuda",
        raw.pytorch_cuda.as_deref(),
        "pytorch-cuda value",
    );
    let cuda = pins::cuda_version(cx, "cuda", raw.cuda.as_deref(), "CUDA version");
    let channels = sources::channels(cx, &raw);
    let source = sources::source(cx, &raw, channels.as_deref());
    let (conda, pip) = packages::packages(cx, &raw);
    let pip_sources = sources::pip_sources(cx, &raw);
    let target = target::target(cx, &raw.target);
    let image = image::image(cx, &raw.image);
    let run = run::run(cx, &raw.run);
    let lock = lock_opts(cx, &raw);

    // The spec with a given python and torch, when the keys resolution needs are valid.
    let with = |python: Version, pytorch: Version| -> Option<Spec> {
        let (source, target) = (source?, target.clone()?);
        Some(Spec {
            // A bad name does not stop resolution: report its problems in the same run.
            name: name.clone().unwrap_or_else(|| "invalid-name".to_string()),
            channels: channels.clone().unwrap_or_else(|| {
                super::default_channels(source, &pytorch, pytorch_cuda.as_ref())
            }),
            python,
            pytorch,
            source,
            pytorch_cuda: pytorch_cuda.clone(),
            cuda: cuda.clone(),
            torchvision: raw.torchvision.unwrap_or(true),
            torchaudio: raw.torchaudio.unwrap_or(true),
            conda: conda.clone(),
            pip: pip.clone(),
            pip_sources: pip_sources.clone(),
            target,
            image: image.clone(),
            run: run.clone(),
            lock: lock.clone(),
        })
    };
    let locks = |s: Option<Spec>| s.is_some_and(|s| crate::core::resolve::locks(&s, table));
    // The newest torch in a range that locks with this python.
    let torch_for = |req: &str, py: &Version| {
        pins::newest_torch_fitting(table, req, Some(py), |v| locks(with(py.clone(), v.clone())))
    };
    // Every hint is a claim: the version it names must lock with the rest of the spec.
    let hinted_python = match &python_pin {
        PythonPin::Range { req, diag } => {
            let found = pins::newest_python_fitting(table, req, |py| match &pytorch {
                TorchPin::Exact(t) => locks(with(py.clone(), t.clone())),
                TorchPin::Range { req, .. } => torch_for(req, py).is_some(),
                TorchPin::Invalid => false,
            });
            cx.set_hint(*diag, pins::unpinned_python_hint(found.as_ref()));
            found
        }
        _ => None,
    };
    let spec = match pytorch {
        TorchPin::Exact(v) => python.clone().and_then(|p| with(p, v)),
        TorchPin::Range { req, diag } => {
            let py = python.clone().or(hinted_python);
            let found = match &py {
                Some(py) => torch_for(&req, py),
                None => None,
            };
            cx.set_hint(diag, pins::unpinned_torch_hint(found.as_ref(), py.as_ref()));
            None
        }
        TorchPin::Invalid => None,
    };
    finish(std::mem::take(&mut cx.diags), spec)
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

/// `[lock]`: `closure` (wheel and conda environments) and the `index-url` the closure's pip
/// part comes from.
fn lock_opts(cx: &mut Ctx, spec: &RawSpec) -> super::LockOpts {
    let raw = &spec.lock;
    let closure = raw.closure.unwrap_or(false);
    // Packages the lock does not resolve would sit beside the closure, unlocked and unchecked.
    let beside = [
        (
            "[image] base-provides",
            !spec.image.base_provides.is_empty(),
        ),
        ("[image] wheels", spec.image.wheels.is_some()),
        ("pip-find-links", !spec.pip_find_links.is_empty()),
    ];
    for (key, _) in beside.iter().filter(|(_, set)| closure && *set) {
        cx.err(
            super::codes::CLOSURE_UNSUPPORTED,
            "lock.closure",
            format!("a closure lock cannot include what {key} installs outside it in this version"),
            Some(format!("remove {key}, or remove `closure = true`")),
        );
    }
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
            && !u.contains(char::is_whitespace);
        if !ok {
            cx.err(
                INVALID_SPEC,
                "lock.index-url",
                format!("`{u}` is not an index URL envbuild accepts"),
                Some("use an https:// URL (http:// only for 127.0.0.1 or localhost), or file:///path".into()),
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
    }
}
