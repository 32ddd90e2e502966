//! `envbuild table learn`: read the table in force (its text, so that comments survive) and the
//! report files, and learn from them (`core::learn`). Reads files; writes nothing.

use crate::core::compat::EMBEDDED;
use crate::core::diag::Failure;
use crate::core::learn::{parse_reports, LearnOptions, Learned};
use crate::infra::fs::{read_text, Input};
use std::path::{Path, PathBuf};

/// Learn from `reports` on top of `--table FILE` (or the embedded table). Every unreadable or
/// unusable report is reported at once.
pub fn learn(
    table: Option<&Path>,
    reports: &[PathBuf],
    opts: &LearnOptions,
) -> Result<Learned, Failure> {
    let (base, origin) = match table {
        None => (EMBEDDED.to_string(), "<embedded table>".to_string()),
        Some(p) => (read_text(p, Input::Table)?, crate::core::diag::shown(p)),
    };
    let mut inputs = Vec::new();
    let mut problems = Vec::new();
    for path in reports {
        let parsed = read_text(path, Input::Report)
            .and_then(|text| parse_reports(&text, &crate::core::diag::shown(path)));
        match parsed {
            Ok(found) => inputs.extend(found),
            Err(f) => problems.extend(f.diagnostics),
        }
    }
    if !problems.is_empty() {
        return Err(Failure::new(problems));
    }
    crate::core::learn::learn(&base, &origin, &inputs, opts)
}
