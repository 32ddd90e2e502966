//! Choosing versions for ranges: the candidates of the table (torch release x CUDA build x
//! Python, for the spec's source) that satisfy the spec's ranges, each judged against every
//! constraint (Python support, the build the source publishes for the platform, the target
//! driver, each target GPU) by the same rules `resolve` runs, ordered by one [`Rank`], and the
//! first that locks is the choice. `envbuild explain` shows the same weighing; hints for a spec
//! nothing satisfies widen a range and weigh again. This module performs no I/O.

mod reasons;

use super::build::{build_for, selectors};
use super::codes::*;
use super::types::{Build, Ctx, Gpu};
use super::{check, gpu};
use crate::core::compat::{variant_cuda, variant_of, Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::lock::DriverMode;
use crate::core::spec::{Draft, Pin, Source, Spec, Unpinned};
use crate::core::version::Version;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Codes of choosing, declared in the registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::choose::*;
}

/// The previous lock's choices (`[choices]`: key -> chosen version), kept while they still
/// satisfy the spec; empty for `--upgrade` or without a lock.
pub type Held = BTreeMap<String, String>;

/// One constraint's verdict on one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Cell {
    Pass(String),
    /// Satisfied with a caveat the order weighs (minor-version compatibility, PTX JIT, an
    /// experimental build or Python, a Python past its end of life).
    Caveat(String),
    Fail(String),
    /// Not looked at: an earlier constraint failed, or a better candidate was chosen first.
    Unchecked,
}

impl Cell {
    pub fn is_fail(&self) -> bool {
        matches!(self, Cell::Fail(_))
    }
}

/// The order of preference, lower first; one ordering for choices, `explain` and hints
/// (docs/choosing.md says why): how the driver runs the build (natively, then through
/// minor-version compatibility, then forward compatibility), a cubin (native SASS) for every
/// target GPU before a build some GPU runs only through PTX JIT, the newest torch, a build and
/// Python without caveats (not experimental), the newest CUDA for that torch, a Python not past
/// its end of life, the newest Python.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    driver: u8,
    /// Some target GPU has no cubin in the build and runs it by JIT-compiling its PTX.
    ptx: bool,
    torch: Reverse<Version>,
    caveat: bool,
    cuda: Reverse<Version>,
    python_eol: bool,
    python: Reverse<Version>,
}

/// One combination the resolver weighed.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub pytorch: Version,
    /// The source's CUDA selector (`pytorch-cuda`, `cuda`); none for PyPI.
    pub selector: Option<Version>,
    /// The build: `cu124`, or the CUDA of a conda build.
    pub build_name: String,
    pub python: Version,
    pub python_cell: Cell,
    pub build: Cell,
    pub driver: Cell,
    pub gpus: Vec<Cell>,
    /// The proof: the spec with these versions locks (every other rule of `resolve`).
    pub locks: Cell,
    #[serde(skip)]
    rank: Option<Rank>,
}

impl Candidate {
    /// The first constraint it fails (its column index: python, build, driver, GPUs, lock), or
    /// `None` when it locks.
    fn failed_at(&self) -> Option<usize> {
        let cells = [&self.python_cell, &self.build, &self.driver]
            .into_iter()
            .chain(&self.gpus)
            .chain([&self.locks]);
        cells.enumerate().find(|(_, c)| c.is_fail()).map(|(i, _)| i)
    }
}

/// What the resolver weighed: the candidates, best first, and the one chosen.
#[derive(Debug, Clone, Serialize)]
pub struct Weighed {
    /// The spec's core keys in one phrase (`pytorch *, pytorch-cuda 11.8, python 3.10 on the
    /// pytorch channel`).
    pub asked: String,
    pub source: Source,
    /// The target GPUs, as the table names them (one column each).
    pub gpus: Vec<String>,
    pub candidates: Vec<Candidate>,
    /// Index into `candidates`; none when nothing locks.
    pub chosen: Option<usize>,
    /// Whether the choice is the previous lock's, kept.
    pub held: bool,
}

/// Weigh every candidate of a spec's ranges. `prove_all` proves every candidate that passes
/// the constraints (explain `--all`); otherwise proofs stop at the choice.
pub fn weigh(u: &Unpinned, table: &Table, held: &Held, prove_all: bool) -> Weighed {
    let source = u.rest.source().unwrap_or(Source::Pypi);
    let mut out = Weighed {
        asked: reasons::asked_text(u, source),
        source,
        gpus: Vec::new(),
        candidates: Vec::new(),
        chosen: None,
        held: false,
    };
    let Some(probe) = probe_spec(u, table) else {
        return out;
    };
    let mut lookup_diags = Vec::new();
    let gpus = gpu::lookup(&probe, table, &mut lookup_diags);
    out.gpus = gpus.iter().map(Gpu::label).collect();
    for t in rows(u, table, source) {
        for sel in candidate_selectors(u, t, source, probe.target.platform) {
            add_candidates(u, table, t, sel, &gpus, &mut out.candidates);
        }
    }
    // Stable: failing candidates keep the order of discovery (newest torch first).
    out.candidates.sort_by(|a, b| match (&a.rank, &b.rank) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    prove(u, table, held, prove_all, &mut out);
    out
}

/// A spec with the target of the draft, to look the GPUs up and run the target checks.
fn probe_spec(u: &Unpinned, table: &Table) -> Option<Spec> {
    let t = table.newest_torch()?;
    let py = t.python.last()?;
    u.rest.chosen(py, &t.version, u.rest.selector())
}

/// The torch rows the spec's `pytorch` and companions allow, newest first.
fn rows<'a>(u: &'a Unpinned, table: &'a Table, source: Source) -> Vec<&'a TorchRow> {
    let asked = u.rest.asked();
    table
        .torch
        .iter()
        .rev()
        .filter(|t| match (&asked.pytorch, &u.pytorch) {
            (Some(req), _) => req.matches(&t.version),
            (None, Pin::Exact(v)) => t.version == *v,
            _ => false,
        })
        .filter(|t| {
            let (vision, audio) = companions(t, source);
            asked
                .torchvision
                .as_ref()
                .is_none_or(|r| matches_pkg(r, &vision))
                && asked
                    .torchaudio
                    .as_ref()
                    .is_none_or(|r| matches_pkg(r, &audio))
        })
        .collect()
}

/// Whether a companion's version (`0.20.1`) satisfies its requirement.
fn matches_pkg(req: &crate::core::spec::Req, v: &str) -> bool {
    Version::parse(v).is_some_and(|v| req.matches(&v))
}

/// torchvision's and torchaudio's versions for a torch row from a source.
pub(super) fn companions(t: &TorchRow, source: Source) -> (String, String) {
    if source.is_conda() {
        (
            t.torchvision_conda.clone().unwrap_or(t.torchvision.clone()),
            t.torchaudio_conda.clone().unwrap_or(t.torchaudio.clone()),
        )
    } else {
        (t.torchvision.clone(), t.torchaudio.clone())
    }
}

/// The selectors to try for a row, newest CUDA first: those in the spec's range, the exact one
/// given, or PyPI's own (`None`). A `None` for a source that needs a selector means none of
/// its builds is in the range (the candidate fails on its build).
fn candidate_selectors(
    u: &Unpinned,
    t: &TorchRow,
    source: Source,
    platform: crate::core::spec::Platform,
) -> Vec<Option<Version>> {
    match (&u.rest.asked().selector, u.rest.selector()) {
        (Some(req), _) if source != Source::Pypi => {
            let mut s: Vec<Option<Version>> = selectors(t, source, platform)
                .into_iter()
                .filter(|v| req.matches(v))
                .map(Some)
                .collect();
            s.reverse();
            if s.is_empty() {
                s.push(None);
            }
            s
        }
        (_, Some(exact)) => vec![Some(exact.clone())],
        _ => vec![None],
    }
}

/// The candidates of one torch row and selector, one per Python the spec allows.
fn add_candidates(
    u: &Unpinned,
    table: &Table,
    t: &TorchRow,
    sel: Option<Version>,
    gpus: &[Gpu],
    out: &mut Vec<Candidate>,
) {
    let pythons: Vec<Version> = match (&u.rest.asked().python, &u.python) {
        (Some(req), _) => table
            .python
            .iter()
            .rev()
            .map(|r| r.version.clone())
            .filter(|v| req.matches(v))
            .collect(),
        (None, Pin::Exact(p)) => vec![p.clone()],
        _ => Vec::new(),
    };
    let Some(first) = pythons.first() else {
        return;
    };
    let Some(spec) = u.rest.chosen(first, &t.version, sel.as_ref()) else {
        return;
    };
    let target = judge_build(&spec, table, t, sel.as_ref(), gpus);
    for py in pythons {
        let python_cell = python_cell(table, t, &py);
        let mut c = Candidate {
            pytorch: t.version.clone(),
            selector: sel.clone(),
            build_name: target.name.clone(),
            python: py.clone(),
            python_cell,
            build: target.build.clone(),
            driver: target.driver.clone(),
            gpus: target.gpus.clone(),
            locks: Cell::Unchecked,
            rank: None,
        };
        c.rank = ranked(&target, t, &c.python_cell, &py);
        out.push(c);
    }
}

/// The rank of a build with a Python, `None` when it fails a constraint (Python, the build,
/// the driver, a GPU).
fn ranked(j: &Judged, t: &TorchRow, python_cell: &Cell, py: &Version) -> Option<Rank> {
    let cells = [python_cell, &j.build, &j.driver]
        .into_iter()
        .chain(&j.gpus);
    if cells.into_iter().any(Cell::is_fail) {
        return None;
    }
    let eol = matches!(python_cell, Cell::Caveat(w) if w == "end of life");
    let experimental = matches!(python_cell, Cell::Caveat(w) if w == "experimental");
    Some(Rank {
        driver: j.driver_tier,
        ptx: j.gpus.iter().any(|g| matches!(g, Cell::Caveat(_))),
        torch: Reverse(t.version.clone()),
        caveat: j.caveat || experimental,
        cuda: Reverse(j.cuda.clone()),
        python_eol: eol,
        python: Reverse(py.clone()),
    })
}

/// The [`Rank`] of an exact spec's build (its torch row `t`, from its source, with its CUDA
/// selector `sel`; PyPI's is the release's), or `None` when the build fails a constraint: what
/// hints order their alternatives by, so a hint prefers what a choice would.
pub(super) fn rank_of(
    spec: &Spec,
    table: &Table,
    t: &TorchRow,
    sel: Option<&Version>,
    gpus: &[Gpu],
) -> Option<Rank> {
    let j = judge_build(spec, table, t, sel, gpus);
    ranked(&j, t, &python_cell(table, t, &spec.python), &spec.python)
}

/// One build's verdicts against the target, shared by the candidates of every Python.
struct Judged {
    name: String,
    build: Cell,
    driver: Cell,
    gpus: Vec<Cell>,
    driver_tier: u8,
    caveat: bool,
    cuda: Version,
}

/// Judge the build a source gives for `t` and `sel`: published (for the platform, glibc), the
/// driver's mode, and each GPU.
fn judge_build(
    spec: &Spec,
    table: &Table,
    t: &TorchRow,
    sel: Option<&Version>,
    gpus: &[Gpu],
) -> Judged {
    let source = spec.source;
    let platform = spec.target.platform;
    let unchecked = Judged {
        name: "-".into(),
        build: Cell::Unchecked,
        driver: Cell::Unchecked,
        gpus: vec![Cell::Unchecked; gpus.len()],
        driver_tier: 9,
        caveat: false,
        cuda: Version::zero(),
    };
    let selector = match (source, sel) {
        (Source::Pypi, _) => variant_cuda(&t.pypi_default),
        (_, s) => s.cloned(),
    };
    let Some(selector) = selector else {
        let key = spec.selector_key();
        let why = if source == Source::Pypi {
            format!("PyPI's torch {} is not a CUDA build", t.version)
        } else if selectors(t, source, platform).is_empty() {
            format!("{} has no torch {} build", source_name(source), t.version)
        } else {
            format!("no build in the {key} range")
        };
        return Judged {
            build: Cell::Fail(why),
            ..unchecked
        };
    };
    let b = match build_for(table, t, source, platform, &selector) {
        Ok(b) => b,
        Err(d) => {
            return Judged {
                name: name_of(source, &selector),
                build: Cell::Fail(d.message),
                ..unchecked
            }
        }
    };
    let cx = Ctx {
        spec,
        table,
        gpus: &[],
    };
    let (diags, mode, _) = check::build(&cx, source, &b);
    let glibc = diags
        .iter()
        .find(|d| d.is_error() && d.code == GLIBC_TOO_OLD);
    let experimental = b.notes.iter().any(|d| d.code == EXPERIMENTAL_VARIANT);
    let build = match glibc {
        Some(d) => Cell::Fail(d.message.clone()),
        None if experimental => Cell::Caveat("experimental build".into()),
        None => Cell::Pass(name_of(source, &selector)),
    };
    let driver_err = diags
        .iter()
        .find(|d| d.is_error() && d.code != GLIBC_TOO_OLD);
    let (driver, driver_tier) = match (driver_err, mode) {
        (Some(d), _) => (Cell::Fail(d.code.to_string()), 9),
        (None, None) => (Cell::Pass("no driver given".into()), 0),
        (None, Some(DriverMode::Native)) => (Cell::Pass("native".into()), 0),
        (None, Some(DriverMode::MinorCompat)) => (Cell::Caveat("minor-compat".into()), 1),
        (None, Some(DriverMode::ForwardCompat)) => (Cell::Caveat("forward-compat".into()), 2),
        (None, Some(DriverMode::TooOld)) => (Cell::Caveat("too old (unconfirmed)".into()), 3),
    };
    Judged {
        name: name_of(source, &selector),
        build,
        driver,
        gpus: gpus
            .iter()
            .map(|g| gpu_cell(spec, table, source, &b, g))
            .collect(),
        driver_tier,
        caveat: experimental,
        cuda: b.cuda.clone(),
    }
}

/// How one GPU runs the build: a cubin, PTX JIT (a caveat), or not at all.
fn gpu_cell(spec: &Spec, table: &Table, source: Source, b: &Build, g: &Gpu) -> Cell {
    let cx = Ctx {
        spec,
        table,
        gpus: std::slice::from_ref(g),
    };
    let (diags, _, locked) = check::build(&cx, source, b);
    if let Some(d) = diags
        .iter()
        .find(|d| d.is_error() && d.field.as_deref() == Some("target.gpus"))
    {
        return Cell::Fail(d.code.to_string());
    }
    match locked.first() {
        Some(l) if l.runs_via.starts_with("compute_") => {
            Cell::Caveat(format!("PTX {}", l.runs_via))
        }
        Some(l) => Cell::Pass(l.runs_via.clone()),
        None => Cell::Fail(ARCH_NOT_IN_WHEEL.to_string()),
    }
}

/// Python support of a torch row: supported, experimental, past its end of life, or none.
fn python_cell(table: &Table, t: &TorchRow, py: &Version) -> Cell {
    let minor = Version::parse(&py.major_minor()).unwrap_or_else(Version::zero);
    if !t.python.contains(&minor) {
        return Cell::Fail(format!(
            "torch {} supports {}–{}",
            t.version,
            t.python.first().map(|p| p.to_string()).unwrap_or_default(),
            t.python.last().map(|p| p.to_string()).unwrap_or_default()
        ));
    }
    if t.python_experimental.contains(&minor) {
        return Cell::Caveat("experimental".into());
    }
    let eol = table
        .python_row(&minor)
        .is_some_and(|r| r.eol.as_str() <= table.meta.as_of.as_str());
    if eol {
        Cell::Caveat("end of life".into())
    } else {
        Cell::Pass("supported".into())
    }
}

/// `cu124` for a wheel source, `CUDA 12.4` for a conda one.
fn name_of(source: Source, selector: &Version) -> String {
    if source.is_conda() {
        format!("CUDA {selector}")
    } else {
        variant_of(selector)
    }
}

/// The source as a sentence names it.
pub fn source_name(source: Source) -> &'static str {
    match source {
        Source::PytorchChannel => "the pytorch channel",
        Source::CondaForge => "conda-forge",
        Source::PytorchIndex => "the PyTorch wheel index",
        Source::Pypi => "PyPI",
    }
}

/// Prove candidates in rank order until one locks (every one with `all`); the previous lock's
/// choice first, when it still passes.
fn prove(u: &Unpinned, table: &Table, held: &Held, all: bool, w: &mut Weighed) {
    let held_at = (!held.is_empty())
        .then(|| {
            w.candidates
                .iter()
                .position(|c| c.rank.is_some() && is_held(c, held, u.rest.selector_key()))
        })
        .flatten();
    let order: Vec<usize> = held_at
        .into_iter()
        .chain((0..w.candidates.len()).filter(|i| Some(*i) != held_at))
        .collect();
    for i in order {
        if w.candidates[i].rank.is_none() || (w.chosen.is_some() && !all) {
            continue;
        }
        let c = &w.candidates[i];
        let locks = u
            .rest
            .chosen(&c.python, &c.pytorch, c.selector.as_ref())
            .map(|s| proof(&s, table));
        let cell = match locks {
            Some(None) => Cell::Pass("locks".into()),
            Some(Some(code)) => Cell::Fail(code),
            None => Cell::Fail("INVALID_SPEC".into()),
        };
        let ok = !cell.is_fail();
        w.candidates[i].locks = cell;
        if ok && w.chosen.is_none() {
            w.chosen = Some(i);
            // Kept only when it differs from the fresh choice: a better-ranked candidate passes.
            w.held = Some(i) == held_at && (0..i).any(|j| w.candidates[j].rank.is_some());
        }
    }
}

/// `None` when the spec locks, else the code of its first error.
fn proof(spec: &Spec, table: &Table) -> Option<String> {
    let r = super::run(spec, table, "", false);
    match r.diagnostics.iter().find(|d| d.is_error()) {
        Some(d) => Some(d.code.to_string()),
        None if r.lock.is_some() => None,
        None => Some("NO_LOCK".into()),
    }
}

/// Whether a candidate is the previous lock's choice (every key it recorded); `sel_key` is the
/// spec's CUDA selector key.
fn is_held(c: &Candidate, held: &Held, sel_key: &str) -> bool {
    held.iter().all(|(k, v)| match k.as_str() {
        "python" => c.python.to_string() == *v,
        "pytorch" => c.pytorch.to_string() == *v,
        k if k == sel_key => c.selector.as_ref().map(|s| s.to_string()) == Some(v.clone()),
        _ => true,
    })
}

/// Choose the versions of a spec's ranges: the spec with them, its `choices` filled, or
/// `NO_MATCHING_BUILD` naming the constraint that binds, with a proven hint.
pub fn choose(u: &Unpinned, table: &Table, held: &Held) -> Result<Spec, Vec<Diagnostic>> {
    let w = weigh(u, table, held, false);
    let Some(i) = w.chosen else {
        return Err(vec![no_match(u, table, &w)]);
    };
    let c = &w.candidates[i];
    let mut spec = u
        .rest
        .chosen(&c.python, &c.pytorch, c.selector.as_ref())
        .ok_or_else(|| {
            vec![Diagnostic::error(
                codes::NO_MATCHING_BUILD,
                "the spec is incomplete",
            )]
        })?;
    spec.choices = reasons::choices(u, table, &w, c);
    Ok(spec)
}

/// The error when nothing satisfies: the constraint the closest candidate fails, and a hint
/// that widens one range, proven by weighing again (the candidate it names locks).
fn no_match(u: &Unpinned, table: &Table, w: &Weighed) -> Diagnostic {
    let asked = &w.asked;
    // The candidate that gets furthest; among those, the first (the best ranked, or the newest).
    let closest = w
        .candidates
        .iter()
        .fold(None::<&Candidate>, |best, c| match best {
            Some(b) if b.failed_at() >= c.failed_at() => Some(b),
            _ => Some(c),
        });
    let (field, _) = closest.map_or(("pytorch".into(), String::new()), |c| column(c, w));
    let field = match field.as_str() {
        "Python" => "python",
        "the build" => u.rest.selector_key(),
        "the driver" => "target.driver",
        f if f.starts_with("GPU ") => "target.gpus",
        _ => "pytorch",
    };
    // A closest candidate that fails only the lock itself has the resolver's own refusal: its
    // reason says why (a platform the source does not build for, ...), and its hint was proven
    // for that candidate, which these ranges contain.
    let own = closest
        .filter(|c| c.failed_at() == Some(3 + w.gpus.len()))
        .and_then(|c| u.rest.chosen(&c.python, &c.pytorch, c.selector.as_ref()))
        .and_then(|spec| {
            // With its proven hints: only this refusal asks, and proofs compute none.
            let r = super::run(&spec, table, "", true);
            r.diagnostics.into_iter().find(|d| d.is_error())
        });
    let message = match closest {
        None => format!(
            "no build satisfies {asked}: the table has no release in these ranges from {}",
            source_name(w.source)
        ),
        Some(c) => {
            let (what, detail) = column(c, w);
            let why = own
                .as_ref()
                .map_or(detail, |d| format!("{}: {}", d.code, d.message));
            format!(
                "no build satisfies {asked}: {what} binds; the closest, torch {} {} with Python {}, fails it ({why})",
                c.pytorch, c.build_name, c.python
            )
        }
    };
    let mut d = super::err(codes::NO_MATCHING_BUILD, field, message);
    d.hint = Some(
        reasons::widen_hint(u, table)
            .or_else(|| own.and_then(|d| d.hint))
            .unwrap_or_else(|| {
                "widen a range; `envbuild explain SPEC --all` shows every candidate and the constraint it fails".into()
            }),
    );
    d
}

/// The name and verdict of the first constraint a candidate fails.
fn column(c: &Candidate, w: &Weighed) -> (String, String) {
    let at = c.failed_at().unwrap_or(0);
    let text = |cell: &Cell| match cell {
        Cell::Fail(s) | Cell::Pass(s) | Cell::Caveat(s) => s.clone(),
        Cell::Unchecked => String::new(),
    };
    let n = w.gpus.len();
    match at {
        0 => ("Python".into(), text(&c.python_cell)),
        1 => ("the build".into(), text(&c.build)),
        2 => ("the driver".into(), text(&c.driver)),
        i if i < 3 + n => (format!("GPU {}", w.gpus[i - 3]), text(&c.gpus[i - 3])),
        _ => ("the rest of the spec".into(), text(&c.locks)),
    }
}

/// Weigh a draft widened at `key` and return its choice, proven (it locks).
pub(super) fn widened_choice(
    u: &Unpinned,
    table: &Table,
    keys: &[&str],
) -> Option<(Candidate, Source)> {
    let mut rest: Draft = u.rest.clone();
    for k in keys {
        rest = rest.widened(k);
    }
    let wide = Unpinned {
        python: u.python.clone(),
        pytorch: u.pytorch.clone(),
        rest,
    };
    let w = weigh(&wide, table, &Held::new(), false);
    w.chosen.map(|i| (w.candidates[i].clone(), w.source))
}

#[cfg(test)]
mod tests;
