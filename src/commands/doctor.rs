//! `envbuild doctor`: the CLI adapter over `app::doctor`: prints the report (a table, or JSON)
//! and maps its verdict to the exit code.

use crate::app::doctor::{doctor, DoctorRequest};
use crate::cli::DoctorArgs;
use crate::core::compat::Table;
use crate::core::diag::Failure;

pub fn run(o: &super::Output, table: &Table, args: &DoctorArgs) -> Result<i32, Failure> {
    let req = DoctorRequest {
        lock: args.lock.as_deref(),
        expect_file: args.expect_file.as_deref(),
        image: args.image.as_deref(),
    };
    let report = doctor(table, &req)?;
    let text = if args.json {
        super::json_text(&report)?
    } else {
        crate::core::doctor::render(&report, super::stdout_color())
    };
    o.out(&text)?;
    Ok(report.exit_code())
}
