//! Shared by `envbuild image` and `envbuild test`: report the smoke verdicts (the runs are
//! `app::test`'s): table or JSON on stdout, JUnit file, exit code; and, given the lock, the
//! `TABLE_MISMATCH` warnings where an image's torch disagrees with the table row the lock came
//! from (stderr, and the `--json` document's `diagnostics`; they never change the verdict).
//! Performs I/O: stdout/stderr and the JUnit file.
//!
//! The pass rule is `SmokeReport::passed`; the table and the JUnit writer are `core::report`'s.

use crate::app::test::SmokeResult;
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::Lock;
use crate::core::report::{Suite, SuiteBody};
use crate::core::smoke::{junit_suite, render_table, with_hints, Place};
use crate::infra::docker::run::SmokeOutcome;
use std::path::Path;

/// The JUnit suite of a run that ended with `f` instead of a report: one `<error>` case.
pub fn error_suite<'a>(name: &str, f: &'a Failure) -> Suite<'a> {
    Suite {
        name: name.to_string(),
        time: None,
        properties: Vec::new(),
        body: SuiteBody::Error {
            code: f
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .or(f.diagnostics.first())
                .map_or("INTERNAL", |d| d.code),
            message: f.to_string(),
        },
    }
}

/// `TABLE_MISMATCH` for every image whose smoke test gave a report, against the lock's row
/// (a fleet's image: its platform's).
pub fn mismatches(results: &[SmokeResult], table: &Table, lock: &Lock) -> Vec<Diagnostic> {
    results
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok().map(|o| (r, o)))
        .flat_map(|(r, o)| {
            let of = platform_lock(lock, &r.name);
            crate::core::learn::table_mismatches(&o.report, of, table, &r.name)
        })
        .collect()
}

/// The lock `image` was built from: a fleet's platform entry when the image's tag carries
/// that platform's suffix (`-arm64`), else `lock` itself.
pub fn platform_lock<'a>(lock: &'a Lock, image: &str) -> &'a Lock {
    if lock.fleet.is_empty() {
        return lock;
    }
    crate::core::platform::of_fleet_tag(image, &lock.platforms())
        .and_then(|p| crate::app::image_fleet::platform_lock(lock, p))
        .unwrap_or(lock)
}

/// How a verdict names its image: with its platform when the lock is a fleet's.
pub fn shown_name(lock: Option<&Lock>, image: &str) -> String {
    match lock.filter(|l| !l.fleet.is_empty()) {
        Some(l) => format!("{image} ({})", platform_lock(l, image).platform.as_str()),
        None => image.to_string(),
    }
}

/// The environment variable GitHub Actions sets to the file of the step's job summary.
pub const STEP_SUMMARY_VAR: &str = "GITHUB_STEP_SUMMARY";

/// With `GITHUB_STEP_SUMMARY` set, append `command`'s verdicts to that file as a Markdown table
/// (platform x variant x check, `core::step_summary`); a file that cannot be written is a
/// warning (`STEP_SUMMARY_UNWRITABLE`), never the run's failure. `lock` names the platform.
pub fn append_step_summary<'r>(
    command: &str,
    results: impl IntoIterator<Item = &'r SmokeResult>,
    lock: Option<&Lock>,
) {
    let Some(path) = std::env::var_os(STEP_SUMMARY_VAR).filter(|p| !p.is_empty()) else {
        return;
    };
    let columns: Vec<crate::core::step_summary::Column<'_>> = results
        .into_iter()
        .map(|r| {
            let machine = r.outcome.as_ref().ok().and_then(|o| {
                o.report
                    .environment
                    .get("machine")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            });
            let platform = lock
                .map(|l| platform_lock(l, &r.name).platform.as_str().to_string())
                .or(machine)
                .unwrap_or_else(|| "?".into());
            crate::core::step_summary::Column {
                platform,
                variant: crate::core::step_summary::variant_of(&r.name),
                image: r.name.clone(),
                outcome: match &r.outcome {
                    Ok(o) => Ok(&o.report),
                    Err(f) => Err(f
                        .diagnostics
                        .iter()
                        .find(|d| d.is_error())
                        .map_or("INTERNAL", |d| d.code)
                        .to_string()),
                },
                passed: r.passed(),
            }
        })
        .collect();
    let text = crate::core::step_summary::markdown(command, &columns);
    let path = std::path::PathBuf::from(path);
    if let Err(f) = crate::infra::fs::append(&path, text.as_bytes()) {
        let why = f
            .diagnostics
            .first()
            .map_or(String::new(), |d| d.message.clone());
        let w = Diagnostic::warning(
            crate::core::codes::smoke::STEP_SUMMARY_UNWRITABLE,
            format!("the verdicts table was not added to the job summary: {why}"),
        )
        .with_hint(format!(
            "check {STEP_SUMMARY_VAR}: GitHub Actions sets it to a writable file for each step"
        ));
        crate::core::diag::eprint_all(&[w], &mut std::io::stderr());
    }
}

/// Print the verdicts, write JUnit, and turn them into the exit code (or the first failure).
/// `extra` is merged into the `--json` document (build results of `envbuild image`); `row` is
/// the table and lock to compare each image's torch with (`TABLE_MISMATCH`), when there is a
/// lock.
pub fn report(
    output: &super::Output,
    command: &str,
    results: Vec<SmokeResult>,
    json: bool,
    junit: Option<&Path>,
    extra: serde_json::Map<String, serde_json::Value>,
    row: Option<(&Table, &Lock)>,
) -> Result<i32, Failure> {
    let warnings = row.map_or_else(Vec::new, |(table, lock)| mismatches(&results, table, lock));
    let lock = row.map(|(_, lock)| lock);
    let name = |r: &SmokeResult| shown_name(lock, &r.name);
    append_step_summary(command, &results, row.map(|(_, lock)| lock));
    if let Some(path) = junit {
        let suites: Vec<Suite<'_>> = results
            .iter()
            .map(|r| match &r.outcome {
                Ok(o) => junit_suite(&o.report, &name(r)),
                Err(f) => error_suite(&name(r), f),
            })
            .collect();
        output.write_junit(path, &suites)?;
    }
    let all_passed = results.iter().all(SmokeResult::passed);
    if json {
        let mut doc = extra;
        doc.insert(
            "verdict".into(),
            (if all_passed { "pass" } else { "fail" }).into(),
        );
        let smoke: Vec<serde_json::Value> =
            results.iter().map(|r| smoke_json_in(lock, r)).collect();
        doc.insert("smoke".into(), smoke.into());
        doc.insert("diagnostics".into(), serde_json::json!(warnings));
        output.print_json(&doc)?;
    } else {
        let color = super::stdout_color();
        for r in &results {
            if let Ok(o) = &r.outcome {
                let mut title = format!("smoke test of {}", name(r));
                if r.reused {
                    title.push_str(" (verdict reused; --retest runs it again)");
                }
                let shown = with_hints(&o.report, Place::Container);
                output.out(&format!("{title}\n{}", render_table(&shown, color)))?;
                if !o.report.passed(o.exit_code) && !o.stderr_tail.is_empty() {
                    eprintln!("smoke test stderr (last lines):\n{}", o.stderr_tail);
                }
            }
        }
    }
    // The table's warnings, then one coded line per failing image on stderr, whatever the
    // output format.
    crate::core::diag::eprint_all(&warnings, &mut std::io::stderr());
    let failed: Vec<crate::core::diag::Diagnostic> = results
        .iter()
        .filter_map(|r| match &r.outcome {
            Ok(o) if !o.report.passed(o.exit_code) => Some(
                crate::core::smoke::platform_mismatch(&o.report, &r.name)
                    .into_iter()
                    .chain([failed_diagnostic(&name(r), o)]),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    crate::core::diag::eprint_all(&failed, &mut std::io::stderr());
    let mut first_failure = None;
    for r in results {
        if let Err(f) = r.outcome {
            first_failure.get_or_insert(f);
        }
    }
    match first_failure {
        Some(f) => Err(f),
        None if all_passed => Ok(crate::core::diag::exit::OK),
        None => Ok(crate::core::diag::exit::FAILURE),
    }
}

/// [`smoke_json`] of an image of `lock`: a fleet's names its platform.
pub fn smoke_json_in(lock: Option<&Lock>, r: &SmokeResult) -> serde_json::Value {
    let mut v = smoke_json(r);
    if let (Some(l), Some(m)) = (lock.filter(|l| !l.fleet.is_empty()), v.as_object_mut()) {
        let p = platform_lock(l, &r.name).platform.as_str();
        m.insert("platform".into(), p.into());
    }
    v
}

/// One image's entry in a `--json` document's `smoke` list.
pub fn smoke_json(r: &SmokeResult) -> serde_json::Value {
    match &r.outcome {
        Ok(o) => serde_json::json!({
            "image": r.name,
            "passed": o.report.passed(o.exit_code),
            "reused": r.reused,
            "exit_code": o.exit_code,
            "report": o.report,
        }),
        Err(f) => serde_json::json!({
            "image": r.name,
            "passed": false,
            "error": f.diagnostics,
        }),
    }
}

/// `SMOKE_FAILED`, naming the required checks that failed.
pub fn failed_diagnostic(image: &str, o: &SmokeOutcome) -> crate::core::diag::Diagnostic {
    let failing: Vec<String> = o
        .report
        .checks
        .iter()
        .filter(|c| c.fails_the_run())
        .map(|c| format!("{} ({})", c.code, c.name))
        .collect();
    let what = if failing.is_empty() {
        format!(
            "the script exited {} with status {:?}",
            o.exit_code, o.report.status
        )
    } else {
        failing.join(", ")
    };
    crate::core::diag::Diagnostic::error(
        crate::core::smoke::codes::FAILED,
        format!("`{image}` failed its smoke test: {what}"),
    )
    .with_hint(
        "each failing check's detail (in the table, or the --json report) says what to change",
    )
}
