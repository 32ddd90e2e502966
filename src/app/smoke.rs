//! `smoke`: run the embedded smoke test with a Python interpreter against a lock's (or an
//! expectations file's) build, and compare what the installed torch reports with the table row
//! the lock came from. Reads files, runs a process; prints nothing.

use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::smoke::{Expectations, Mode, SmokeReport};
use std::path::Path;
use std::time::Duration;

/// What `smoke` was asked for: the script run by a Python interpreter on this machine (the
/// container run of `image` and `test` is `infra::docker::run::ContainerSmokeRequest`).
#[derive(Debug, Clone)]
pub struct PythonSmokeRequest<'a> {
    pub python: &'a str,
    /// Check against this lock (wins over `expect_file`).
    pub lock: Option<&'a Path>,
    pub expect_file: Option<&'a Path>,
    pub mode: Mode,
    pub timeout: Duration,
}

/// The report, and the `TABLE_MISMATCH` warnings (only with a lock).
#[derive(Debug, Clone)]
pub struct SmokeRun {
    pub report: SmokeReport,
    pub mismatches: Vec<Diagnostic>,
}

/// Run the smoke test.
pub fn smoke(table: &Table, req: &PythonSmokeRequest<'_>) -> Result<SmokeRun, Failure> {
    let lock = req.lock.map(super::read_lock).transpose()?;
    let expectations = match (&lock, req.expect_file) {
        (Some(lock), _) => crate::core::expectations::expectations_from_lock(lock),
        (None, Some(path)) => super::read_expectations(path)?,
        (None, None) => Expectations::default(),
    };
    // The script's GPU checks end before the kill, so a hung one is named in the report.
    let expectations = expectations.with_budget(req.timeout);
    let report =
        crate::infra::python::run_script(req.python, &expectations, req.mode, req.timeout)?;
    let mismatches = lock.as_ref().map_or_else(Vec::new, |lock| {
        crate::core::learn::table_mismatches(&report, lock, table, req.python)
    });
    Ok(SmokeRun { report, mismatches })
}
