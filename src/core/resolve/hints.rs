//! Hints: the releases known around an unknown one, and a concrete, working alternative (another
//! build, source or release that satisfies the driver and every GPU) for errors about the chosen
//! build. This module performs no I/O.

use super::build::{build_for, selectors, Build};
use super::codes::*;
use super::gpu::Gpu;
use super::{check, err};
use crate::core::compat::{variant_of, Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::spec::{Platform, Source, Spec};
use crate::core::version::Version;

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

/// The error for a build the source does not publish, with an alternative that works.
pub(super) fn no_build(d: Diagnostic, spec: &Spec, table: &Table, gpus: &[Gpu]) -> Diagnostic {
    let alt = suggest(spec, table, gpus, None);
    hint_with(
        d,
        &alt,
        "`envbuild table torch` lists every release and its builds",
    )
}

/// The diagnostics of checking the chosen build, errors about the target given an alternative
/// build (other than this one) that satisfies it.
pub(super) fn for_checks(
    checks: Vec<Diagnostic>,
    spec: &Spec,
    table: &Table,
    gpus: &[Gpu],
    t: &TorchRow,
    build: &Build,
) -> Vec<Diagnostic> {
    let alt = if checks.iter().any(Diagnostic::is_error) {
        suggest(
            spec,
            table,
            gpus,
            Some((&t.version, spec.source, &build.selector)),
        )
    } else {
        None
    };
    checks
        .into_iter()
        .map(|d| match d.code {
            DRIVER_TOO_OLD | ARCH_NOT_IN_WHEEL | GLIBC_TOO_OLD | VIRTUAL_PACKAGE_UNSATISFIED
                if d.is_error() =>
            {
                let fallback = match d.code {
                    GLIBC_TOO_OLD => "torch <= 2.5.1 wheels need only glibc 2.17; or raise the target's glibc",
                    DRIVER_TOO_OLD => "upgrade the driver on the target machines",
                    _ => "no release in the table satisfies the driver and every GPU; check `envbuild table`",
                };
                hint_with(d, &alt, fallback)
            }
            _ => d,
        })
        .collect()
}

/// Give `d` the alternative as its hint, or `fallback` when there is none; a warning that
/// already has a hint keeps it.
fn hint_with(d: Diagnostic, alt: &Option<String>, fallback: &str) -> Diagnostic {
    if d.hint.is_some() && !d.is_error() {
        return d;
    }
    let hint = match alt {
        Some(a) => format!("use {a}: it satisfies the driver and every GPU"),
        None => fallback.to_string(),
    };
    d.with_hint(hint)
}

/// A concrete, working alternative for the hint, or `None`. `exclude` is the build already
/// chosen (torch release, source, selector).
pub(super) fn suggest(
    spec: &Spec,
    table: &Table,
    gpus: &[Gpu],
    exclude: Option<(&Version, Source, &Version)>,
) -> Option<String> {
    // The same torch first, from the same kind of source, then from the other sources; then
    // other torch releases, newest first. Prefer builds the target driver runs natively.
    let same: Vec<&TorchRow> = table.torch_row(&spec.pytorch).into_iter().collect();
    let others: Vec<&TorchRow> = table
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
    // Rank: the same release from the same source, then the same release from another source,
    // then newer-first other releases; a clean build (no warnings) beats one with warnings,
    // except that staying on the same release and source matters most.
    let mut best: Option<(u8, String)> = None;
    for (same_torch, rows) in [(true, &same), (false, &others)] {
        for t in rows.iter() {
            for &source in &sources {
                let mut sels = selectors(t, source, spec.target.platform);
                sels.reverse();
                for sel in &sels {
                    let Some(warnings) = works(spec, table, gpus, exclude, t, source, sel) else {
                        continue;
                    };
                    let tier = tier(same_torch, source == spec.source, warnings == 0);
                    if best.as_ref().is_none_or(|(b, _)| tier < *b) {
                        best = Some((tier, describe(spec, t, source, sel)));
                    }
                }
            }
        }
    }
    best.map(|(_, d)| d)
}

/// Rank of a working candidate, lower is better (see `suggest`).
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

/// Some(number of warnings) when the build works for the target; fewer is better.
fn works(
    spec: &Spec,
    table: &Table,
    gpus: &[Gpu],
    exclude: Option<(&Version, Source, &Version)>,
    t: &TorchRow,
    source: Source,
    sel: &Version,
) -> Option<usize> {
    if exclude.is_some_and(|(et, es, esel)| *et == t.version && es == source && esel == sel) {
        return None;
    }
    if !t.python.iter().any(|p| spec.python.starts_with(p)) {
        return None;
    }
    if source == Source::PytorchChannel && spec.target.platform == Platform::Win64 {
        return None;
    }
    let b = build_for(table, t, source, spec.target.platform, sel).ok()?;
    let (diags, _, _) = check::build(spec, table, source, gpus, &b);
    if diags.iter().any(Diagnostic::is_error) {
        return None;
    }
    Some(diags.len() + b.notes.len())
}

/// The spec change that selects a candidate, for the hint.
fn describe(spec: &Spec, t: &TorchRow, source: Source, sel: &Version) -> String {
    let torch = if t.version == spec.pytorch {
        String::new()
    } else {
        format!("pytorch = \"{}\" with ", t.version)
    };
    match source {
        Source::PytorchIndex => format!(
            "{torch}source = \"pytorch-index\", cuda = \"{sel}\" (the {} wheels)",
            variant_of(sel)
        ),
        Source::Pypi => format!("{torch}source = \"pypi\""),
        Source::PytorchChannel => format!("{torch}pytorch-cuda = \"{sel}\""),
        Source::CondaForge => format!("{torch}channels = [\"conda-forge\"], cuda = \"{sel}\""),
    }
}
