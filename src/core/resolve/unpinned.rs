//! Hints for an unpinned `python` or `pytorch`: the newest version of the range that locks
//! with the rest of the spec. Spec validation reports the range and hands over the rest of the
//! spec ([`Unpinned`]); only resolving each candidate proves the claim, so the proof is here,
//! after the rules. This module performs no I/O.

use crate::core::compat::Table;
use crate::core::spec::{satisfies, Format, Pin, Spec, SpecErrors, Unpinned};
use crate::core::version::Version;

/// Parse and validate a spec ([`crate::core::spec::parse`]), then prove the hints of an
/// unpinned `python` or `pytorch` ([`prove_unpinned`]). `file` names it in locations.
pub fn parse_spec(
    text: &str,
    format: Format,
    file: &str,
    table: &Table,
) -> Result<Spec, SpecErrors> {
    crate::core::spec::parse(text, format, file, table).map_err(|mut e| {
        prove_unpinned(&mut e, table);
        e
    })
}

/// Give the UNPINNED_VERSION errors of a `python` or `pytorch` range their hints: the newest
/// version of each range that locks with the rest of the spec (a torch for the hinted Python
/// when both are ranges), or how to pin without one.
pub fn prove_unpinned(errors: &mut SpecErrors, table: &Table) {
    let Some(u) = errors.unpinned.take() else {
        return;
    };
    let Unpinned {
        python,
        pytorch,
        rest,
    } = *u;
    let locks = |py: &Version, torch: &Version| {
        rest.with(py, torch)
            .is_some_and(|s| super::locks(&s, table))
    };
    // The newest torch in a range that locks with this python.
    let torch_for =
        |req: &str, py: &Version| newest_torch_fitting(table, req, Some(py), |v| locks(py, v));
    let hinted_python = match &python {
        Pin::Range { req, diag } => {
            let found = newest_python_fitting(table, req, |py| match &pytorch {
                Pin::Exact(t) => locks(py, t),
                Pin::Range { req, .. } => torch_for(req, py).is_some(),
                Pin::Invalid => false,
            });
            set_hint(errors, *diag, unpinned_python_hint(found.as_ref()));
            found
        }
        _ => None,
    };
    if let Pin::Range { req, diag } = &pytorch {
        let py = python.exact().cloned().or(hinted_python);
        let found = py.as_ref().and_then(|py| torch_for(req, py));
        set_hint(
            errors,
            *diag,
            unpinned_torch_hint(found.as_ref(), py.as_ref()),
        );
    }
}

/// Give the problem at `index` its hint.
fn set_hint(errors: &mut SpecErrors, index: usize, hint: String) {
    if let Some(d) = errors.diagnostics.get_mut(index) {
        d.hint = Some(hint);
    }
}

/// The newest torch in the table that satisfies `req`, supports `python` (when known) and
/// passes `fits` (the proof that the rest of the spec locks with it).
fn newest_torch_fitting(
    table: &Table,
    req: &str,
    python: Option<&Version>,
    fits: impl Fn(&Version) -> bool,
) -> Option<Version> {
    table
        .torch
        .iter()
        .rev()
        .filter(|t| satisfies(req, &t.version))
        .filter(|t| python.is_none_or(|p| t.python.iter().any(|x| p.starts_with(x))))
        .map(|t| &t.version)
        .find(|v| fits(v))
        .cloned()
}

/// The hint of an unpinned `pytorch`: the release found by [`newest_torch_fitting`], or how to
/// pin without one.
fn unpinned_torch_hint(found: Option<&Version>, python: Option<&Version>) -> String {
    match found {
        Some(v) => format!(
            "pin it: pytorch = \"{v}\" is the newest that fits{}",
            python.map(|p| format!(" python {p}")).unwrap_or_default()
        ),
        None => "pin an exact version; `envbuild table torch` lists them".into(),
    }
}

/// The newest Python of the table that satisfies `req` and passes `fits` (the proof that the
/// rest of the spec locks with it).
fn newest_python_fitting(
    table: &Table,
    req: &str,
    fits: impl Fn(&Version) -> bool,
) -> Option<Version> {
    table
        .python
        .iter()
        .rev()
        .map(|r| &r.version)
        .filter(|v| satisfies(req, v))
        .find(|v| fits(v))
        .cloned()
}

/// The hint of an unpinned `python`: the version found by [`newest_python_fitting`], or how to
/// pin without one.
fn unpinned_python_hint(found: Option<&Version>) -> String {
    match found {
        Some(v) => format!("pin it: python = \"{v}\" is the newest that fits"),
        None => "pin an exact version; no Python in this range locks with the rest of the spec (`envbuild table torch` lists each release's Pythons)".into(),
    }
}
