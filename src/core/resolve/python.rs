//! Python: whether torch has wheels for the spec's Python, and whether that Python is
//! experimental or past its end of life (as of the table's date). This module performs no I/O.

use super::codes::*;
use super::types::{Ask, Findings};
use super::{err, warn};
use crate::core::compat::{Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::version::Version;

/// Check the spec's Python, given as major.minor; false when torch does not support
/// it (the error is pushed, asking for a proven way out).
pub(super) fn check(table: &Table, t: &TorchRow, py_minor: &Version, found: &mut Findings) -> bool {
    let supported = t.python.contains(py_minor);
    if !supported {
        let py_minor = py_minor.clone();
        found.ask(unsupported(t, &py_minor), Ask::OtherPython { py_minor });
    } else if t.python_experimental.contains(py_minor) {
        found.diags.push(warn(
            PYTHON_EXPERIMENTAL,
            "python",
            format!(
                "Python {py_minor} support in torch {} is experimental",
                t.version
            ),
        ));
    }
    found.diags.extend(end_of_life(table, t, py_minor));
    supported
}

/// The error for a Python torch has no wheels for, hinted with the Pythons it has (`hints`
/// replaces that with a proven way out when there is one).
fn unsupported(t: &TorchRow, py_minor: &Version) -> Diagnostic {
    let range = format!(
        "{}–{}",
        t.python.first().map(|p| p.to_string()).unwrap_or_default(),
        t.python.last().map(|p| p.to_string()).unwrap_or_default()
    );
    let hint = format!("use a Python in {range}");
    err(
        PYTHON_UNSUPPORTED,
        "python",
        format!(
            "torch {} has no wheels for Python {py_minor} (it supports {range})",
            t.version
        ),
    )
    .with_hint(hint)
}

/// The warning for a Python past its end of life on the table's `as_of` date.
fn end_of_life(table: &Table, t: &TorchRow, py_minor: &Version) -> Option<Diagnostic> {
    let row = table.python_row(py_minor)?;
    (row.eol.as_str() <= table.meta.as_of.as_str()).then(|| {
        warn(
            PYTHON_EOL,
            "python",
            format!(
                "Python {py_minor} reached end of life on {} (no more security fixes)",
                row.eol
            ),
        )
        .with_hint(format!(
            "move to a supported Python; torch {} supports up to {}",
            t.version,
            t.python.last().map(|p| p.to_string()).unwrap_or_default()
        ))
    })
}

/// The Pythons of a series' Linux aarch64 wheels, where the table lists them: the error when
/// the build has no aarch64 wheel for the spec's Python.
pub(super) fn on_aarch64(
    table: &Table,
    t: &TorchRow,
    variant: Option<&str>,
    py_minor: &Version,
) -> Option<Diagnostic> {
    let series = Version::parse(&t.series())?;
    let row = table.wheel_aarch64_row(&series, variant?)?;
    if row.python.is_empty() || row.python.contains(py_minor) {
        return None;
    }
    let list: Vec<String> = row.python.iter().map(|p| p.to_string()).collect();
    Some(err(
        PYTHON_UNSUPPORTED,
        "python",
        format!(
            "torch {} has no Linux aarch64 wheel for Python {py_minor}; its aarch64 wheels are for {}",
            t.version,
            list.join(", ")
        ),
    ))
}
