//! `envbuild image SPEC... | DIR`: several specs through `app::image_many`, their progress on
//! stderr as one line per step prefixed `[SPEC/VARIANT]` (never a live line: runs overlap), then
//! one summary table (stdout; stderr under `--json`), one JSON document holding every run, one
//! JUnit file with a suite per spec and variant, and the exit code (1 if any spec failed).
//! Performs I/O: stdout/stderr and the JUnit file.

use super::progress::{Display, ProgressMode};
use super::{options, run_json};
use crate::app::image_many::{self, Job, JobOutcome, JobResult, Prepared, Schedule};
use crate::cli::ImageArgs;
use crate::commands::verdicts::{
    append_step_summary, error_suite, failed_diagnostic, mismatches, smoke_json,
};
use crate::commands::{eprint_diagnostics, Output};
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::report::Suite;
use std::time::Duration;

/// One line of the summary: one variant of one spec.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub spec: String,
    pub variant: String,
    pub image: String,
    /// `built`, `exists` (this lock's image was on the engine), `registry`, `failed`,
    /// `cancelled`, or the code that stopped the spec before a build (`LOCK_STALE`, ...).
    pub build: String,
    /// `pass`, `pass (reused)`, `fail`, the code of a smoke test that could not run, or `-`.
    pub smoke: String,
    #[serde(rename = "time_s")]
    pub seconds: f64,
}

/// The CA-bundle notes of a run of `jobs` specs, from each spec's (label, origin): one line per
/// bundle, naming the specs only when not every spec trusts it (the machine's `PIP_CERT` is
/// every spec's, and said once, not once per spec).
fn ca_notes(trusted: &[(String, String)], jobs: usize) -> Vec<String> {
    let mut by_origin: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (label, origin) in trusted {
        by_origin.entry(origin).or_default().push(label);
    }
    by_origin
        .into_iter()
        .map(|(origin, labels)| {
            if labels.len() == jobs {
                format!("note: the builds trust the CA bundle of {origin}; no image keeps it")
            } else {
                format!(
                    "note: [{}] the builds trust the CA bundle of {origin}; no image keeps it",
                    labels.join(", ")
                )
            }
        })
        .collect()
}

/// What the builds will trust and use from this machine, and each prepared spec's warnings
/// (stderr), before any build starts.
fn print_notes(trusted: &[(String, String)], jobs: &[Job], opts: &crate::app::image::ImageOptions) {
    for note in ca_notes(trusted, jobs.len()) {
        eprintln!("{note}");
    }
    if !opts.build_args.is_empty() {
        let names: Vec<&str> = opts.build_args.keys().map(String::as_str).collect();
        eprintln!(
            "note: the builds use this machine's {} (not stored in the images)",
            names.join(", ")
        );
    }
    for job in jobs {
        if let Ok(p) = &job.prepared {
            eprint_diagnostics(&p.warnings);
        }
    }
}

/// Several specs (or a folder's): each prepared, then run at most `--jobs` at once; `mirrors`
/// are `--pip-mirror` and `--conda-mirror`, checked already.
pub(super) fn run(
    o: &Output,
    table: &Table,
    args: ImageArgs,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<i32, Failure> {
    if !args.tags.is_empty() {
        return Err(Failure::usage(
            "--tag names one image: it cannot be given with several specs",
            Some("tag each spec's image in its own `envbuild image SPEC --tag` run".into()),
        ));
    }
    let specs = crate::app::matrix::specs(&args.specs)?;
    let opts = options(&args);
    // Which spec trusts which CA bundle: said once per bundle after the specs are prepared.
    let mut trusted: Vec<(String, String)> = Vec::new();
    let jobs: Vec<Job> = specs
        .into_iter()
        .map(|(label, spec)| {
            let prepared = image_many::prepare(
                table,
                &spec,
                args.update_lock,
                &opts.variants,
                args.templates.as_deref(),
                mirrors,
            )
            .and_then(|mut p| {
                // The network's CA bundle, as for one spec (only the install stage sees it).
                let ca = crate::app::image::add_ca_bundle(&mut p.rendered, &p.lock, &spec, |k| {
                    std::env::var(k).ok()
                })?;
                if let Some(origin) = ca {
                    trusted.push((label.clone(), origin));
                }
                Ok(p)
            });
            Job {
                label,
                spec,
                prepared,
            }
        })
        .collect();
    print_notes(&trusted, &jobs, &opts);
    // Overlapping runs cannot share one live line: step lines, as in CI.
    let mode = match ProgressMode::detect(args.verbose) {
        ProgressMode::Tty => ProgressMode::Plain,
        m => m,
    };
    let labels: Vec<String> = jobs.iter().map(|j| j.label.clone()).collect();
    let sink = |i: usize| -> image_many::Sink<'_> {
        eprintln!(
            "[{}] started ({})",
            labels[i],
            crate::core::diag::shown(&jobs[i].spec)
        );
        let mut display = Display::new(mode, &format!("{}/", labels[i]));
        Box::new(move |e| display.event(e))
    };
    let schedule = Schedule {
        jobs: usize::from(args.jobs),
        fail_fast: args.fail_fast,
    };
    let done = |i: usize, r: &JobResult| {
        let verdict = match &r.outcome {
            JobOutcome::Ran(_) if r.outcome.passed() => "pass".to_string(),
            JobOutcome::Ran(_) => "fail".to_string(),
            JobOutcome::Failed(f) => code_of(f),
            JobOutcome::Cancelled => "cancelled".to_string(),
        };
        eprintln!(
            "[{}] done: {verdict} in {:.1}s",
            labels[i],
            r.elapsed.as_secs_f64()
        );
    };
    let progress = image_many::Progress {
        start: &sink,
        done: &done,
    };
    let mut run = image_many::run_many(&jobs, &opts, schedule, progress)?;
    for r in &mut run.results {
        if let JobOutcome::Failed(f) = &mut r.outcome {
            *f = super::blame_the_mirror(f.clone(), mirrors);
        }
    }
    let rows = summary_rows(&jobs, &run.results, &opts.variants);
    let table_text = summary_table(&rows);
    if let Some(path) = &args.junit {
        let cancelled = cancelled_failure();
        o.write_junit(
            path,
            &suites(&jobs, &run.results, &opts.variants, &cancelled),
        )?;
    }
    let all_passed = run.results.iter().all(|r| r.outcome.passed());
    if args.json {
        eprint!("{table_text}");
        o.print_json(&document(table, &jobs, &run.results, &rows, all_passed))?;
    } else {
        o.out(&table_text)?;
    }
    report_failures(table, &jobs, &run.results);
    if run.interrupted {
        return Err(crate::infra::docker::run::interrupted(
            "the runs of several specs",
        ));
    }
    Ok(if all_passed { exit::OK } else { exit::FAILURE })
}

/// The variants a job reports: its build order when it ran, else the requested ones.
fn job_variants<'a>(r: &'a JobResult, requested: &'a [String]) -> Vec<&'a str> {
    match &r.outcome {
        JobOutcome::Ran(run) if run.from_registry => {
            run.published.iter().map(|p| p.variant.as_str()).collect()
        }
        JobOutcome::Ran(run) => run.builds.iter().map(|(v, _)| v.as_str()).collect(),
        _ => requested.iter().map(String::as_str).collect(),
    }
}

/// The content-addressed tag of `variant` of a prepared spec (`-` when it could not be read).
fn planned_tag(job: &Job, variant: &str) -> String {
    match &job.prepared {
        Ok(p) => format!(
            "{}:{}",
            p.rendered.image_name,
            crate::app::publish::variant_tag(variant, p.rendered.identity())
        ),
        Err(_) => "-".into(),
    }
}

/// The code that stopped a run, for the summary.
fn code_of(f: &Failure) -> String {
    f.diagnostics
        .iter()
        .find(|d| d.is_error())
        .or(f.diagnostics.first())
        .map_or("INTERNAL", |d| d.code)
        .to_string()
}

pub fn summary_rows(jobs: &[Job], results: &[JobResult], requested: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (job, r) in jobs.iter().zip(results) {
        let row = |variant: &str, image: String, build: &str, smoke: &str, d: Duration| Row {
            spec: job.label.clone(),
            variant: variant.to_string(),
            image,
            build: build.to_string(),
            smoke: smoke.to_string(),
            seconds: (d.as_secs_f64() * 10.0).round() / 10.0,
        };
        match &r.outcome {
            JobOutcome::Ran(run) if run.from_registry => {
                for p in &run.published {
                    rows.push(row(
                        &p.variant,
                        p.image.clone(),
                        "registry",
                        "pass (registry)",
                        Duration::ZERO,
                    ));
                }
            }
            JobOutcome::Ran(run) => {
                for ((variant, b), s) in run.builds.iter().zip(&run.smokes) {
                    let build = if b.skipped { "exists" } else { "built" };
                    let (smoke, smoke_time) = match &s.outcome {
                        Ok(o) if !o.report.passed(o.exit_code) => ("fail".to_string(), o.elapsed),
                        Ok(o) if s.reused => ("pass (reused)".to_string(), o.elapsed),
                        Ok(o) => ("pass".to_string(), o.elapsed),
                        Err(f) => (code_of(f), Duration::ZERO),
                    };
                    let tag = b.tags.first().cloned().unwrap_or_default();
                    rows.push(row(variant, tag, build, &smoke, b.elapsed + smoke_time));
                }
            }
            JobOutcome::Failed(f) => {
                let code = code_of(f);
                for v in job_variants(r, requested) {
                    rows.push(row(v, planned_tag(job, v), &code, "-", r.elapsed));
                }
            }
            JobOutcome::Cancelled => {
                for v in job_variants(r, requested) {
                    rows.push(row(v, planned_tag(job, v), "cancelled", "-", r.elapsed));
                }
            }
        }
    }
    rows
}

/// The summary as an aligned text table with a header and a closing count line.
pub fn summary_table(rows: &[Row]) -> String {
    let header = ["SPEC", "VARIANT", "IMAGE", "BUILD", "SMOKE", "TIME"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.spec.clone(),
                r.variant.clone(),
                r.image.clone(),
                r.build.clone(),
                r.smoke.clone(),
                format!("{:.1}s", r.seconds),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for c in &cells {
        for (w, s) in widths.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut l = String::new();
        for (i, (s, w)) in c.iter().zip(widths).enumerate() {
            if i + 1 == c.len() {
                l.push_str(s);
            } else {
                l.push_str(&format!("{s:<w$}  "));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    for c in &cells {
        out.push_str(&line(c));
    }
    let passed = rows.iter().filter(|r| r.smoke.starts_with("pass")).count();
    out.push_str(&format!("{passed} of {} passed\n", rows.len()));
    out
}

/// The failure a cancelled spec is reported with (`CANCELLED`).
fn cancelled_failure() -> Failure {
    Failure::one(
        Diagnostic::error(
            crate::app::codes::CANCELLED,
            "not run: another spec failed under --fail-fast",
        )
        .with_hint("run without --fail-fast to build and test every spec"),
    )
}

/// One JUnit suite per spec and variant, named `SPEC/VARIANT`.
fn suites<'a>(
    jobs: &[Job],
    results: &'a [JobResult],
    requested: &[String],
    cancelled: &'a Failure,
) -> Vec<Suite<'a>> {
    let mut out = Vec::new();
    for (job, r) in jobs.iter().zip(results) {
        let name = |v: &str| format!("{}/{v}", job.label);
        match &r.outcome {
            JobOutcome::Ran(run) => {
                for (v, s) in job_variants(r, requested).into_iter().zip(&run.smokes) {
                    out.push(match &s.outcome {
                        Ok(o) => crate::core::smoke::junit_suite(&o.report, &name(v)),
                        Err(f) => error_suite(&name(v), f),
                    });
                }
            }
            JobOutcome::Failed(f) => {
                for v in job_variants(r, requested) {
                    out.push(error_suite(&name(v), f));
                }
            }
            JobOutcome::Cancelled => {
                for v in job_variants(r, requested) {
                    out.push(error_suite(&name(v), cancelled));
                }
            }
        }
    }
    out
}

/// The one `--json` document: the overall verdict, every spec's run (as one spec's `image
/// --json` has it, plus `spec`, `name` and its own `verdict`) and the summary rows.
fn document(
    table: &Table,
    jobs: &[Job],
    results: &[JobResult],
    rows: &[Row],
    all_passed: bool,
) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = jobs
        .iter()
        .zip(results)
        .map(|(job, r)| {
            let mut doc = serde_json::Map::new();
            doc.insert("name".into(), job.label.clone().into());
            doc.insert("spec".into(), crate::core::diag::shown(&job.spec).into());
            let mut diagnostics = match &job.prepared {
                Ok(p) => p.warnings.clone(),
                Err(_) => Vec::new(),
            };
            let verdict = match (&r.outcome, &job.prepared) {
                (JobOutcome::Ran(run), Ok(Prepared { rendered, lock, .. })) => {
                    doc.extend(run_json(rendered, run));
                    doc.insert(
                        "smoke".into(),
                        run.smokes.iter().map(smoke_json).collect::<Vec<_>>().into(),
                    );
                    diagnostics.extend(mismatches(&run.smokes, table, lock));
                    if r.outcome.passed() {
                        "pass"
                    } else {
                        "fail"
                    }
                }
                (JobOutcome::Failed(f), _) => {
                    doc.insert("error".into(), serde_json::json!(f.diagnostics));
                    "error"
                }
                _ => "cancelled",
            };
            doc.insert("verdict".into(), verdict.into());
            doc.insert("diagnostics".into(), serde_json::json!(diagnostics));
            doc.insert("time_s".into(), r.elapsed.as_secs_f64().into());
            serde_json::Value::Object(doc)
        })
        .collect();
    serde_json::json!({
        "verdict": if all_passed { "pass" } else { "fail" },
        "runs": runs,
        "summary": rows,
    })
}

/// Every failed spec's diagnostics on stderr, naming the spec; the table's warnings too.
fn report_failures(table: &Table, jobs: &[Job], results: &[JobResult]) {
    for (job, r) in jobs.iter().zip(results) {
        let diags: Vec<Diagnostic> = match (&r.outcome, &job.prepared) {
            (JobOutcome::Failed(f), _) => f.diagnostics.clone(),
            (JobOutcome::Ran(run), Ok(p)) => {
                let mut d = mismatches(&run.smokes, table, &p.lock);
                d.extend(run.smokes.iter().filter_map(|s| match &s.outcome {
                    Ok(o) if !o.report.passed(o.exit_code) => Some(failed_diagnostic(&s.name, o)),
                    Err(f) => f.diagnostics.first().cloned(),
                    _ => None,
                }));
                d.extend(run.smokes.iter().filter_map(|s| match &s.outcome {
                    Ok(o) => crate::core::smoke::platform_mismatch(&o.report, &s.name),
                    Err(_) => None,
                }));
                append_step_summary(&format!("image {}", job.label), &run.smokes, Some(&p.lock));
                d
            }
            _ => Vec::new(),
        };
        if !diags.is_empty() {
            eprintln!("[{}] {}:", job.label, crate::core::diag::shown(&job.spec));
            eprint_diagnostics(&diags);
        }
    }
}
