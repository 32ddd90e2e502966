//! Resolution: a validated spec plus the compatibility table give a lock, or diagnostics with
//! codes and hints. Every problem is reported at once. This module performs no I/O; "today" is
//! the table's `as_of` date, so the same inputs give the same answer on every machine.
//!
//! [`resolve`] is a pipeline over one module per concern: the torch build a spec selects
//! (`build`); the target driver (`driver`), GPU lookup and architecture coverage (`gpu`) and
//! glibc (`glibc`), all three checked against one build by `check`; Python (`python`); conda
//! channels (`channels`); companions and added packages (`packages`); install lines
//! (`install`); the base image and image settings (`image`); the lock itself (`assemble`); and
//! how rules are judged when the table marks a fact unconfirmed (`unconfirmed`). The rules
//! share their types through `types`. After every rule has run, the errors that ask for a hint
//! get one (`hints`): an alternative proven by resolving the changed spec, and a hint's text
//! reads back as the change it proposes ([`Proposal`]). Before all that, a spec whose core keys
//! are ranges gets its versions chosen (`unpinned`, `choose`): the candidates that
//! satisfy the ranges and the target, in one order of preference, the first that locks.

mod assemble;
mod build;
mod channels;
mod check;
pub mod choose;
mod driver;
mod fleet;
mod glibc;
mod gpu;
mod hints;
mod image;
mod install;
mod markers;
mod packages;
mod proposal;
mod python;
mod types;
mod unconfirmed;
mod unpinned;

use crate::core::compat::{Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::lock::Lock;
use crate::core::spec::Spec;
use crate::core::version::Version;
use types::{Ask, Ctx, Findings};

pub use channels::insecure_source;
pub use image::default_jupyterlab;
pub use install::INDEX_BASE;
pub use proposal::Proposal;
pub use unpinned::{parse_spec, parse_spec_holding};

/// Diagnostic codes of resolution, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::resolve::*;
}

/// The outcome: a lock when no error was found, and every diagnostic either way.
#[derive(Debug, Clone)]
pub struct Resolution {
    pub lock: Option<Lock>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Resolution {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// No lock: resolution stopped at (or after) an error.
    fn failed(diagnostics: Vec<Diagnostic>) -> Resolution {
        Resolution {
            lock: None,
            diagnostics,
        }
    }
}

/// Resolve a spec. `spec_sha256` is the hash of its canonical form (see `spec_hash`).
///
/// Steps that make the rest meaningless (an unknown release, a discontinued channel, no build)
/// stop at once; the others all run so that every problem is reported together.
pub fn resolve(spec: &Spec, table: &Table, spec_sha256: &str) -> Resolution {
    run(spec, table, spec_sha256, true)
}

/// Whether a spec locks without an error: the proof behind every hint that names values.
/// It computes no hints itself, so a proof never starts another.
pub fn locks(spec: &Spec, table: &Table) -> bool {
    let r = run(spec, table, "", false);
    r.lock.is_some() && !r.has_errors()
}

/// [`resolve`], with hints computed (and proven) or not, for every platform of the spec's fleet
/// (`fleet`): one platform gives today's lock, several give the first platform's lock with each
/// other platform's lock in its `fleet`, and each diagnostic names its platform.
fn run(spec: &Spec, table: &Table, spec_sha256: &str, with_hints: bool) -> Resolution {
    let members = match fleet::plan(spec, table) {
        Ok(m) => m,
        Err(diagnostics) => return Resolution::failed(diagnostics),
    };
    if let [one] = members.as_slice() {
        return run_one(&one.spec(spec), table, spec_sha256, with_hints);
    }
    // A diagnostic every platform gives alike is said once, naming each platform it concerns.
    let mut said: Vec<(Vec<&str>, Diagnostic)> = Vec::new();
    let mut locks = Vec::new();
    for m in &members {
        let r = run_one(&m.spec(spec), table, spec_sha256, with_hints);
        // A platform none of the spec's GPUs is checked on is not a spec without GPUs.
        let gpus_given = !spec.target.gpus.is_empty();
        let own = r
            .diagnostics
            .into_iter()
            .filter(|d| !(gpus_given && d.code == codes::NO_TARGET_GPUS));
        for d in own {
            match said.iter_mut().find(|(_, e)| *e == d) {
                Some((platforms, _)) => platforms.push(m.platform.as_str()),
                None => said.push((vec![m.platform.as_str()], d)),
            }
        }
        locks.push(r.lock);
    }
    let diagnostics: Vec<Diagnostic> = said
        .into_iter()
        .map(|(platforms, mut d)| {
            d.message = format!("{}: {}", platforms.join(", "), d.message);
            d
        })
        .collect();
    let lock = if diagnostics.iter().any(Diagnostic::is_error) {
        None
    } else {
        let mut all = locks.into_iter().flatten();
        all.next().map(|mut first| {
            first.fleet = all.collect();
            first
        })
    };
    Resolution { lock, diagnostics }
}

/// One platform's resolution.
fn run_one(spec: &Spec, table: &Table, spec_sha256: &str, with_hints: bool) -> Resolution {
    let Some(t) = table.torch_row(&spec.pytorch) else {
        return Resolution::failed(vec![hints::unknown_release(spec, table)]);
    };
    let mut found = Findings::default();
    let gpus = gpu::lookup(spec, table, &mut found.diags);
    // An unknown GPU fails every changed spec too (hints keep the target): no proof can
    // succeed, so none is tried.
    let prove = with_hints && !found.has_errors();
    let cx = Ctx {
        spec,
        table,
        gpus: &gpus,
    };
    let lock = rules(&cx, t, spec_sha256, &mut found);
    let diagnostics = if with_hints {
        hints::give(&cx, t, prove, found)
    } else {
        found.diags
    };
    Resolution { lock, diagnostics }
}

/// Every rule, in order, for the spec's torch row `t`: the lock when no error was found.
/// Steps that make the rest meaningless stop at once.
fn rules(cx: &Ctx, t: &TorchRow, spec_sha256: &str, found: &mut Findings) -> Option<Lock> {
    let (spec, table) = (cx.spec, cx.table);
    driver::note_missing(spec, &mut found.diags);
    let py_minor = v(&spec.python.major_minor());
    let python_ok = python::check(table, t, &py_minor, found);
    if let Some((d, ask)) = channels::discontinued(spec, table) {
        found.ask(d, ask);
        return None;
    }
    let selector = build::selector(spec, t, found)?;
    let build = match build::build_for(table, t, spec.source, spec.target.platform, &selector) {
        Ok(b) => b,
        Err(d) => {
            found.ask(d, Ask::OtherBuild);
            return None;
        }
    };
    found.diags.extend(build.notes.iter().cloned());
    if python_ok
        && spec.target.platform == crate::core::spec::Platform::LinuxAarch64
        && !spec.source.is_conda()
    {
        let variant = build.variant.as_deref();
        found
            .diags
            .extend(python::on_aarch64(table, t, variant, &py_minor));
    }
    let (checks, mode, locked_gpus) = check::build(cx, spec.source, &build);
    let chosen = build.selector.clone();
    found.ask_all(checks, Ask::FitsTarget { selector: chosen });
    channels::check(spec, t, &mut found.diags);
    channels::insecure(spec, &mut found.diags);
    // The markers judged for the chosen Python and this platform: what they exclude is not
    // installed, and the lock says why.
    let judged = markers::judge(spec, &mut found.diags);
    let spec = judged.spec.as_ref().unwrap_or(spec);
    let pkgs = packages::collect(spec, table, t, &py_minor, &mut found.diags);
    if !python_ok || found.has_errors() {
        return None;
    }
    let base = image::base(spec, table, &py_minor, &build, &mut found.diags)?;
    let lines = install::lines(spec, t, &selector, &build, &pkgs, base.kind);
    Some(assemble::lock(assemble::Parts {
        excluded: judged.excluded,
        spec,
        table,
        spec_sha256,
        build: &build,
        mode,
        gpus: locked_gpus,
        packages: pkgs,
        lines,
        base,
    }))
}

/// sha256 of the spec's canonical JSON form.
pub fn spec_hash(spec: &Spec) -> String {
    crate::core::hash::sha256_hex(serde_json::to_string(spec).unwrap_or_default().as_bytes())
}

fn v(s: &str) -> Version {
    // Only used on literals and on major.minor strings of parsed versions.
    Version::parse(s).unwrap_or_else(|| Version::parse("0").expect("0 parses"))
}

fn err(code: &'static str, key: &str, message: String) -> Diagnostic {
    let mut d = Diagnostic::error(code, message);
    d.field = Some(key.to_string());
    d
}

fn warn(code: &'static str, key: &str, message: String) -> Diagnostic {
    let mut d = Diagnostic::warning(code, message);
    d.field = Some(key.to_string());
    d
}

#[cfg(test)]
mod tests;
