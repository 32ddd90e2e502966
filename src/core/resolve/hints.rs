//! Hints: the releases known around an unknown one, and concrete alternatives (another build,
//! source, release or Python) for errors. A hint that names values is a claim, so it is proven
//! before it is offered: the spec changed exactly as the hint says (same target, GPUs and
//! driver) must lock without errors. Hints are given after every rule has run, to the errors
//! that ask for one ([`Ask`]); they use the rules (a candidate build is checked against the
//! target before its proof), never the reverse. Proofs resolve with hints off, so they never
//! recurse. This module performs no I/O.

use super::build::{build_for, selectors};
use super::choose::{rank_of, Rank};
use super::codes::*;
use super::types::{Ask, Ctx, Findings, Gpu};
use super::{check, err};
use crate::core::compat::{variant_of, Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::spec::{default_channels, Platform, Source, Spec};
use crate::core::version::Version;

/// What hints are made from: the spec, the table, the target's GPUs, and whether alternatives
/// are proposed at all (not when no changed spec can lock: an unknown GPU fails them all).
struct Hinter<'a> {
    spec: &'a Spec,
    table: &'a Table,
    gpus: &'a [Gpu],
    on: bool,
}

/// The diagnostics the rules found, each error that asks for a hint given one: a proven
/// alternative when `on` and one exists, else the fallback its rule calls for. `t` is the
/// spec's torch row.
pub(super) fn give(cx: &Ctx, t: &TorchRow, on: bool, found: Findings) -> Vec<Diagnostic> {
    let h = Hinter {
        spec: cx.spec,
        table: cx.table,
        gpus: cx.gpus,
        on,
    };
    let mut diags = found.diags;
    for (at, ask) in found.asks {
        let Some(ds) = diags.get_mut(at) else {
            continue;
        };
        match ask {
            Ask::OtherBuild => {
                let alt = h.suggest(None);
                let fallback = "`envbuild table torch` lists every release and its builds";
                ds.iter_mut().for_each(|d| hint_with(d, &alt, fallback));
            }
            Ask::FitsTarget { selector } => h.for_checks(ds, t, &selector),
            Ask::ChannelEnded { last } => {
                let hint = h.discontinued(&last);
                ds.iter_mut().for_each(|d| d.hint = Some(hint.clone()));
            }
            Ask::CudaWheel { selector } => {
                let hint = h.pypi_cpu_only(t, &selector);
                ds.iter_mut().for_each(|d| d.hint = Some(hint.clone()));
            }
            Ask::OtherPython { py_minor } => {
                if let Some(hint) = h.python_unsupported(t, &py_minor) {
                    ds.iter_mut().for_each(|d| d.hint = Some(hint.clone()));
                }
            }
        }
    }
    diags
}

/// The error for a PyTorch release the table does not know, with the releases it does.
pub(super) fn unknown_release(spec: &Spec, table: &Table) -> Diagnostic {
    let series = spec.pytorch.major_minor();
    let same_series: Vec<String> = table
        .torch
        .iter()
        .filter(|r| r.series() == series)
        .map(|r| r.version.to_string())
        .collect();
    let hint = if same_series.is_empty() {
        format!(
            "known releases run from {} to {}; `envbuild table torch` lists them",
            table
                .torch
                .first()
                .map(|r| r.version.to_string())
                .unwrap_or_default(),
            table
                .newest_torch()
                .map(|r| r.version.to_string())
                .unwrap_or_default()
        )
    } else {
        format!("the {series} releases are {}", same_series.join(", "))
    };
    err(
        NO_SUCH_PACKAGE_VERSION,
        "pytorch",
        format!("PyTorch {} is not a known release", spec.pytorch),
    )
    .with_hint(hint)
}

impl Hinter<'_> {
    /// Whether the changed spec locks without errors (never inside a proof).
    fn proves(&self, changed: &Spec) -> bool {
        self.on && super::locks(changed, self.table)
    }

    /// The diagnostics of checking the chosen build (`t` with `selector`), errors about the
    /// target given an alternative build (other than this one) that satisfies it.
    fn for_checks(&self, checks: &mut [Diagnostic], t: &TorchRow, selector: &Version) {
        let alt = if checks.iter().any(Diagnostic::is_error) {
            self.suggest(Some((&t.version, self.spec.source, selector)))
        } else {
            None
        };
        for d in checks {
            if !d.is_error() {
                continue;
            }
            let fallback = match d.code {
                GLIBC_TOO_OLD => {
                    "torch <= 2.5.1 wheels need only glibc 2.17; or raise the target's glibc"
                }
                DRIVER_TOO_OLD => "upgrade the driver on the target machines",
                ARCH_NOT_IN_WHEEL | VIRTUAL_PACKAGE_UNSATISFIED => {
                    "no release in the table satisfies the driver and every GPU; check `envbuild table`"
                }
                _ => continue,
            };
            hint_with(d, &alt, fallback);
        }
    }

    /// The hint for a release the `pytorch` channel never published: a proven alternative
    /// and, when it locks, the channel's last release.
    fn discontinued(&self, last: &Version) -> String {
        let alt = self.suggest(None);
        let mut on_channel = self.spec.clone();
        on_channel.pytorch = last.clone();
        match (alt, self.proves(&on_channel)) {
            (Some(a), true) => format!("use {a}, or pytorch = \"{last}\" on the channel"),
            (Some(a), false) => format!("use {a}"),
            (None, true) => format!("use pytorch = \"{last}\" on the channel"),
            (None, false) => format!("the channel's last release is {last}; `envbuild table torch` lists the other sources' builds"),
        }
    }

    /// The hint for PyPI's CPU-only wheel on a platform: the same CUDA from the PyTorch index,
    /// or another proven alternative.
    fn pypi_cpu_only(&self, t: &TorchRow, selector: &Version) -> String {
        let changed = with_build(self.spec, &t.version, Source::PytorchIndex, selector);
        if self.proves(&changed) {
            return format!("use {}", describe(self.spec, &changed));
        }
        match self.suggest(None) {
            Some(a) => format!("use {a}"),
            None => "CUDA wheels for this platform come from the PyTorch index; `envbuild table torch` lists their builds".into(),
        }
    }

    /// The hint for a Python the release has no wheels for: the newest of its Pythons that
    /// locks, and the newest release with wheels for this Python that locks (with the spec's
    /// build if it can, else with another).
    fn python_unsupported(&self, t: &TorchRow, py_minor: &Version) -> Option<String> {
        let python = t.python.iter().rev().find(|p| {
            let mut s = self.spec.clone();
            s.python = (*p).clone();
            self.proves(&s)
        });
        let torch = self
            .table
            .torch
            .iter()
            .rev()
            .filter(|r| r.version != t.version && r.python.contains(py_minor))
            .find(|r| {
                let mut s = self.spec.clone();
                s.pytorch = r.version.clone();
                self.proves(&s)
            })
            .map(|r| format!("pytorch = \"{}\" (the newest release with Python {py_minor} wheels that fits this spec)", r.version))
            .or_else(|| self.suggest(None));
        let alts: Vec<String> = python
            .map(|p| format!("python = \"{p}\""))
            .into_iter()
            .chain(torch)
            .collect();
        (!alts.is_empty()).then(|| format!("use {}", alts.join(", or ")))
    }

    /// A concrete, proven alternative for the hint, or `None`. `exclude` is the build already
    /// chosen (torch release, source, selector).
    fn suggest(&self, exclude: Option<(&Version, Source, &Version)>) -> Option<String> {
        if !self.on {
            return None;
        }
        let mut candidates = self.candidates(exclude);
        // Stable: equal ranks keep the order of discovery (see `candidates`).
        candidates.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        candidates.into_iter().find_map(|(_, _, t, source, sel)| {
            let changed = with_build(self.spec, &t.version, source, &sel);
            self.proves(&changed).then(|| describe(self.spec, &changed))
        })
    }

    /// Every build that passes the target checks, with its tier (how far it moves from the
    /// spec, and whether it is clean: see [`tier`]) and its [`Rank`], the chooser's order of
    /// preference, which orders the builds of one tier.
    fn candidates(
        &self,
        exclude: Option<(&Version, Source, &Version)>,
    ) -> Vec<(u8, Rank, &TorchRow, Source, Version)> {
        let spec = self.spec;
        let same: Vec<&TorchRow> = self.table.torch_row(&spec.pytorch).into_iter().collect();
        let others: Vec<&TorchRow> = self
            .table
            .torch
            .iter()
            .rev()
            .filter(|t| t.version != spec.pytorch)
            .collect();
        let mut sources = vec![spec.source];
        for s in [
            Source::PytorchIndex,
            Source::CondaForge,
            Source::PytorchChannel,
        ] {
            if !sources.contains(&s) {
                sources.push(s);
            }
        }
        let mut out = Vec::new();
        for (same_torch, rows) in [(true, &same), (false, &others)] {
            for t in rows.iter() {
                for &source in &sources {
                    let mut sels = selectors(t, source, spec.target.platform);
                    sels.reverse();
                    for sel in sels {
                        if exclude.is_some_and(|(et, es, esel)| {
                            *et == t.version && es == source && *esel == sel
                        }) {
                            continue;
                        }
                        if let Some((rank, clean)) = self.works(t, source, &sel) {
                            let tier = tier(same_torch, source == spec.source, clean);
                            out.push((tier, rank, *t, source, sel));
                        }
                    }
                }
            }
        }
        out
    }

    /// The build's [`Rank`] when it passes the target checks (Python, the build for the
    /// platform, glibc, the driver, every GPU) with the spec's Python, judged as the chooser
    /// judges a candidate, and whether it is clean: no warning at all (minor-version
    /// compatibility, PTX JIT, an unconfirmed fact, an experimental build). A cheap filter
    /// before the proof.
    fn works(&self, t: &TorchRow, source: Source, sel: &Version) -> Option<(Rank, bool)> {
        let spec = self.spec;
        if source == Source::PytorchChannel && spec.target.platform == Platform::Win64 {
            return None;
        }
        let changed = with_build(spec, &t.version, source, sel);
        let rank = rank_of(&changed, self.table, t, Some(sel), self.gpus)?;
        let b = build_for(self.table, t, source, spec.target.platform, sel).ok()?;
        let cx = Ctx {
            spec,
            table: self.table,
            gpus: self.gpus,
        };
        let (diags, _, _) = check::build(&cx, source, &b);
        Some((rank, diags.is_empty() && b.notes.is_empty()))
    }
}

/// How far a hint moves, lower first: the same release from the same source, then the same
/// release from another source, then other releases; a clean build (no warning) beats one with
/// warnings, except that staying on the same release and source matters most. Within a
/// tier, the chooser's [`Rank`] decides.
fn tier(same_torch: bool, same_source: bool, clean: bool) -> u8 {
    match (same_torch, same_source, clean) {
        (true, true, true) => 0,
        (true, false, true) => 1,
        (true, true, false) => 2,
        (false, true, true) => 3,
        (true, false, false) => 4,
        (false, false, true) => 5,
        (false, _, false) => 6,
    }
}

/// Give `d` the alternative as its hint, or `fallback` when there is none; a warning that
/// already has a hint keeps it.
fn hint_with(d: &mut Diagnostic, alt: &Option<String>, fallback: &str) {
    if d.hint.is_some() && !d.is_error() {
        return;
    }
    d.hint = Some(match alt {
        Some(a) => format!("use {a}: it satisfies the driver and every GPU"),
        None => fallback.to_string(),
    });
}

/// The spec with another torch build: the release, the source and its CUDA selector. Keys the
/// new source does not use are dropped; a conda source gets the channels it needs.
fn with_build(spec: &Spec, torch: &Version, source: Source, sel: &Version) -> Spec {
    let mut s = spec.clone();
    s.pytorch = torch.clone();
    s.source = source;
    // `cuda-version` is conda-forge's spelling; another source takes its own key.
    s.cuda_version_key = spec.cuda_version_key && source == Source::CondaForge;
    s.cuda = None;
    s.pytorch_cuda = None;
    match source {
        Source::Pypi => {}
        Source::PytorchIndex => s.cuda = Some(sel.clone()),
        Source::CondaForge => {
            s.cuda = Some(sel.clone());
            s.channels = vec!["conda-forge".into()];
        }
        Source::PytorchChannel => {
            s.pytorch_cuda = Some(sel.clone());
            if spec.source != Source::PytorchChannel {
                s.channels = default_channels(source, torch, Some(sel));
            }
        }
    }
    s
}

/// The spec change from `orig` to a build `with_build` made: the release when it changes, the
/// source and its CUDA key (the source named whenever it changes), the channels when they
/// change, and the keys to drop. Applying exactly this to the spec file gives `new`.
fn describe(orig: &Spec, new: &Spec) -> String {
    let torch = if new.pytorch == orig.pytorch {
        String::new()
    } else {
        format!("pytorch = \"{}\" with ", new.pytorch)
    };
    let moved = new.source != orig.source;
    let sel = new
        .cuda
        .as_ref()
        .or(new.pytorch_cuda.as_ref())
        .map(|v| v.to_string())
        .unwrap_or_default();
    let channels = format!(
        "channels = [{}]",
        new.channels
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut text = match new.source {
        Source::PytorchIndex => format!(
            "source = \"pytorch-index\", cuda = \"{sel}\" (the {} wheels)",
            new.cuda.as_ref().map(variant_of).unwrap_or_default()
        ),
        Source::Pypi => "source = \"pypi\"".to_string(),
        Source::PytorchChannel => {
            let mut t = format!("pytorch-cuda = \"{sel}\"");
            if moved {
                t = format!("source = \"pytorch-channel\", {t}");
            }
            if new.channels != orig.channels {
                t = format!("{t}, {channels}");
            }
            t
        }
        Source::CondaForge if moved => {
            format!("source = \"conda-forge\", {channels}, cuda = \"{sel}\"")
        }
        Source::CondaForge => format!("{channels}, {} = \"{sel}\"", new.selector_key()),
    };
    let dropped: Vec<&str> = [
        (
            "cuda",
            orig.cuda.is_some() && new.cuda.is_none() && !orig.cuda_version_key,
        ),
        (
            "cuda-version",
            orig.cuda_version_key && !new.cuda_version_key,
        ),
        (
            "pytorch-cuda",
            orig.pytorch_cuda.is_some() && new.pytorch_cuda.is_none(),
        ),
    ]
    .into_iter()
    .filter(|(_, gone)| *gone)
    .map(|(k, _)| k)
    .collect();
    if !dropped.is_empty() {
        text.push_str(&format!(" without {}", dropped.join(" or ")));
    }
    format!("{torch}{text}")
}
