//! `envbuild doctor`: probe the host and judge it, alone or against a build's expectations.
//! Performs I/O (host probes, printing).

use crate::cli::DoctorArgs;
use crate::compat::Table;
use crate::diag::Failure;
use crate::doctor::{self, DoctorExpect};
use crate::host::{self, ProbeConfig};
use std::io::Write;

pub fn run(table: &Table, args: &DoctorArgs) -> Result<i32, Failure> {
    let expect = match (&args.lock, &args.expect_file) {
        (Some(lock), _) => Some(DoctorExpect::from_lock(&super::read_lock(lock)?)),
        (None, Some(path)) => Some(DoctorExpect::from_expectations(
            &super::read_expectations(path)?,
            table,
        )),
        (None, None) => None,
    };
    let facts = host::probe(&ProbeConfig::from_env(), table)?;
    // The container section is the Docker layer's to fill; not checked in this build.
    let report = doctor::evaluate(&facts, expect.as_ref(), None);
    let text = if args.json {
        serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::bug(format!("cannot print the report: {e}")))?
            + "\n"
    } else {
        doctor::render(&report, super::stdout_color())
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(report.exit_code())
}
