//! `envbuild smoke`: the CLI adapter over `app::smoke`: prints the report (table or JSON, with
//! the `TABLE_MISMATCH` warnings in the `--json` document's `diagnostics` and on stderr), writes
//! JUnit XML, and maps the verdict to the exit code.

use crate::app::smoke::{smoke, PythonSmokeRequest, SmokeRun};
use crate::cli::{GpusArg, SmokeArgs};
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};
use crate::core::smoke::{self, Mode};
use std::time::Duration;

pub fn run(o: &super::Output, table: &Table, args: &SmokeArgs) -> Result<i32, Failure> {
    if args.print_script {
        o.out(smoke::SCRIPT)?;
        return Ok(exit::OK);
    }
    if args.timeout == 0 {
        return Err(Failure::usage(
            "--timeout must be at least 1 second",
            Some("the default is 300".into()),
        ));
    }
    // `--expect gpu|cpu` is the old spelling of `--gpus all|none` (clap keeps them apart).
    let gpus = args.expect.map_or(args.gpus, |e| e.gpus());
    let req = PythonSmokeRequest {
        python: &args.python,
        lock: args.lock.as_deref(),
        expect_file: args.expect_file.as_deref(),
        mode: Mode::from_gpus(gpus == GpusArg::All),
        timeout: Duration::from_secs(args.timeout),
    };
    let SmokeRun { report, mismatches } = smoke(table, &req)?;
    // What to do next, under each failed check (and in the `--json` checks).
    let place = smoke::Place::Python {
        python: &args.python,
        locked: args.lock.is_some() || args.expect_file.is_some(),
    };
    let report = smoke::with_hints(&report, place);
    if let Some(path) = &args.junit {
        o.write_junit(path, &[smoke::junit_suite(&report, "envbuild.smoke")])?;
    }
    let text = if args.json {
        // The report with the run's diagnostics beside its checks; `table learn` reads it back.
        let mut doc = serde_json::to_value(&report)
            .map_err(|e| Failure::bug(format!("cannot print the report: {e}")))?;
        if let Some(map) = doc.as_object_mut() {
            map.insert("diagnostics".into(), serde_json::json!(mismatches));
        }
        serde_json::to_string_pretty(&doc)
            .map_err(|e| Failure::bug(format!("cannot print the report: {e}")))?
            + "\n"
    } else {
        smoke::render_table(&report, super::stdout_color())
    };
    o.out(&text)?;
    // Warnings only: the verdict is the smoke test's.
    super::eprint_diagnostics(&mismatches);
    Ok(report.exit_code())
}
