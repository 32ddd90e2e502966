//! `explain`: weigh the candidates of a spec's core keys as `lock` does (the same order, the
//! choices the lock beside the spec holds) and return them for display. Reads the spec and
//! that lock. Prints nothing.

use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::resolve::choose::{weigh, Weighed};
use crate::core::spec::{parse_ranged, Format, Parsed};
use crate::infra::fs::{read_text, Input};
use std::path::Path;

/// The candidates weighed for the spec at `path`, each proven (so every row says whether it
/// locks); the spec's own problems when it does not validate.
pub fn explain(table: &Table, path: &Path) -> Result<Weighed, Vec<Diagnostic>> {
    let display = crate::core::diag::shown(path);
    let text = read_text(path, Input::Spec).map_err(|f| f.diagnostics)?;
    let u = match parse_ranged(&text, Format::from_path(path), &display, table) {
        Ok(Parsed::Exact(_, u)) | Ok(Parsed::Ranged(u)) => u,
        Err(e) => return Err(e.diagnostics),
    };
    let held = super::held_choices(&super::lock_path(path, None));
    Ok(weigh(&u, table, &held, true))
}
