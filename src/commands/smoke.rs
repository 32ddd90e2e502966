//! `envbuild smoke`: run the embedded smoke test with the user's Python, print the report,
//! write JUnit XML. With `--lock`, what the installed torch reports is also compared with the
//! table row the lock came from (`TABLE_MISMATCH` warnings: stderr, and the `--json` document's
//! `diagnostics`). Performs I/O (runs a process, writes files, prints).

use crate::cli::{GpusArg, SmokeArgs};
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};
use crate::core::smoke::{self, Expectations, Mode};
use std::io::Write;
use std::time::Duration;

pub fn run(table: &Table, args: &SmokeArgs) -> Result<i32, Failure> {
    if args.print_script {
        print!("{}", smoke::SCRIPT);
        return Ok(exit::OK);
    }
    if args.timeout == 0 {
        return Err(Failure::usage(
            "--timeout must be at least 1 second",
            Some("the default is 300".into()),
        ));
    }
    let lock = args
        .lock
        .as_deref()
        .map(crate::app::read_lock)
        .transpose()?;
    let expectations = match (&lock, &args.expect_file) {
        (Some(lock), _) => crate::core::expect::expectations_from_lock(lock),
        (None, Some(path)) => crate::app::read_expectations(path)?,
        (None, None) => Expectations::default(),
    };
    // `--expect gpu|cpu` is the old spelling of `--gpus all|none` (clap keeps them apart).
    let gpus = args.expect.map_or(args.gpus, |e| e.gpus());
    let mode = Mode::from_gpus(gpus == GpusArg::All);
    let timeout = Duration::from_secs(args.timeout);
    // The script's GPU checks end before the kill, so a hung one is named in the report.
    let expectations = expectations.with_budget(timeout);
    let report = crate::infra::python::run_script(&args.python, &expectations, mode, timeout)?;
    if let Some(path) = &args.junit {
        let xml = crate::core::report::junit_xml(&[smoke::junit_suite(&report, "envbuild.smoke")])?;
        crate::infra::fs::write_atomic(path, xml.as_bytes())?;
    }
    let mismatches = lock.as_ref().map_or_else(Vec::new, |lock| {
        crate::core::learn::table_mismatches(&report, lock, table, &args.python)
    });
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
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic; the exit code still tells the verdict.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    // Warnings only: the verdict is the smoke test's.
    super::eprint_diagnostics(&mismatches);
    Ok(report.exit_code())
}
