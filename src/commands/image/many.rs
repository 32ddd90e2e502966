//! `envbuild image SPEC... | DIR`: several specs through `app::image_many`, their progress on
//! stderr as one line per step prefixed `[SPEC/VARIANT]` (never a live line: runs overlap), then
//! one summary table (stdout; stderr under `--json`), one JSON document holding every run, one
//! JUnit file with a suite per spec and variant, and the exit code (1 if any spec failed).
//! Performs I/O: stdout/stderr and the JUnit file.
//!
//! A fleet spec is reported as one spec's fleet run is (`fleet`): its progress lines name the
//! platform (`[SPEC/linux-aarch64/runtime]`), the summary has a row per platform and variant
//! (the `PLATFORM` column), its JSON run carries the fleet's `platforms`, `index` and
//! `not_pushed`, its JUnit suites are `SPEC/VARIANT (PLATFORM)`. With `--platform`, a spec whose
//! lock holds none of the selected platforms is skipped (said, and a `skipped` row), never a
//! failure; only when every spec is skipped does the run fail (`PLATFORM_NOT_IN_LOCK`).

use super::progress::{Display, ProgressMode};
use super::{options, run_json};
use crate::app::image::ImageRun;
use crate::app::image_many::{self, Images, Job, JobOutcome, JobResult, Prepared, Schedule};
use crate::cli::ImageArgs;
use crate::commands::verdicts::{
    append_step_summary, error_suite, failed_diagnostic, mismatches, shown_name, smoke_json,
    smoke_json_in,
};
use crate::commands::{eprint_diagnostics, Output};
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::report::Suite;
use crate::core::spec::Platform;
use std::time::Duration;

/// One line of the summary: one variant of one spec on one platform.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub spec: String,
    /// The lock's platform the image is for (`linux-64`, `linux-aarch64`); a skipped spec's
    /// platforms, comma-separated; `-` when the spec could not be read.
    pub platform: String,
    pub variant: String,
    pub image: String,
    /// `built`, `exists` (this lock's image was on the engine), `registry`, `failed`,
    /// `cancelled`, `skipped` (`--platform` selects none of its lock's platforms), or the code
    /// that stopped the spec before a build (`LOCK_STALE`, ...).
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
                (&opts.variants, &args.platforms),
                args.templates.as_deref(),
                mirrors,
            )
            .and_then(|mut p| {
                // The network's CA bundle, as for one spec (only the install stage sees it).
                let lock = p.lock.clone();
                let mut ca = None;
                for rendered in p.rendered_mut() {
                    let origin = crate::app::image::add_ca_bundle(rendered, &lock, &spec, |k| {
                        std::env::var(k).ok()
                    })?;
                    ca = ca.or(origin);
                }
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
    platform_notes(&jobs, &args)?;
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
            JobOutcome::Skipped => "skipped".to_string(),
            JobOutcome::Ran(_) | JobOutcome::Fleet(_) if r.outcome.passed() => "pass".to_string(),
            JobOutcome::Ran(_) | JobOutcome::Fleet(_) => "fail".to_string(),
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

/// What `--platform` leaves out, before any build (stderr): each spec it skips, what its lock
/// holds. `Err` when it skips every spec: the run would build nothing.
fn platform_notes(jobs: &[Job], args: &ImageArgs) -> Result<(), Failure> {
    let wanted: Vec<&str> = args.platforms.iter().map(|p| p.as_str()).collect();
    let mut skipped = Vec::new();
    for job in jobs {
        let Ok(p) = &job.prepared else { continue };
        if let Images::Skipped = &p.images {
            eprintln!(
                "note: [{}] skipped: its lock holds no {} (it has: {})",
                job.label,
                wanted.join(", "),
                held(p)
            );
            skipped.push(format!("{} ({})", job.label, held(p)));
        }
    }
    if !skipped.is_empty() && skipped.len() == jobs.len() {
        return Err(Failure::one(
            Diagnostic::error(
                crate::app::codes::PLATFORM_NOT_IN_LOCK,
                format!(
                    "--platform {}: no spec's lock holds it: {}",
                    wanted.join(","),
                    skipped.join(", ")
                ),
            )
            .with_hint(
                "drop --platform, or add the platform to a spec's `[target] platforms` and run \
                 `envbuild lock`",
            ),
        ));
    }
    Ok(())
}

/// The platforms a prepared spec's lock holds, for messages (`linux-64,linux-aarch64`).
fn held(p: &Prepared) -> String {
    let names: Vec<&str> = p.lock.platforms().iter().map(|p| p.as_str()).collect();
    names.join(",")
}

/// The variants of one image run, in its order: its builds, or what the registry held.
fn run_variants(run: &ImageRun) -> Vec<&str> {
    if run.from_registry {
        run.published.iter().map(|p| p.variant.as_str()).collect()
    } else {
        run.builds.iter().map(|(v, _)| v.as_str()).collect()
    }
}

/// The content-addressed tag of `variant` of each image of a prepared spec, with its platform
/// (one `-` when the spec could not be read): what `--push` pushes it under, as `NAME:TAG`.
fn planned_tags(job: &Job, variant: &str) -> Vec<(String, String)> {
    match &job.prepared {
        Ok(p) => p
            .platform_images()
            .into_iter()
            .map(|(platform, r)| {
                let tag = format!("{}:{}", r.image_name, r.build_id().tag(variant));
                (platform.as_str().to_string(), tag)
            })
            .collect(),
        Err(_) => vec![("-".into(), "-".into())],
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

/// The platform of one image run of `job`: a fleet's run names its own, a single-platform
/// lock's is the lock's.
fn platform_name(job: &Job, platform: Option<Platform>) -> String {
    match (platform, &job.prepared) {
        (Some(p), _) => p.as_str().to_string(),
        (None, Ok(p)) => p.lock.platform.as_str().to_string(),
        (None, Err(_)) => "-".into(),
    }
}

/// The rows of one image run (one platform's, or a single-platform lock's).
fn run_rows(run: &ImageRun, row: &dyn Fn(&str, String, &str, &str, Duration) -> Row) -> Vec<Row> {
    if run.from_registry {
        return run
            .published
            .iter()
            .map(|p| {
                let registry = "pass (registry)";
                row(
                    &p.variant,
                    p.image.clone(),
                    "registry",
                    registry,
                    Duration::ZERO,
                )
            })
            .collect();
    }
    let mut rows = Vec::new();
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
    rows
}

pub fn summary_rows(jobs: &[Job], results: &[JobResult], requested: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (job, r) in jobs.iter().zip(results) {
        let row = |platform: &str,
                   variant: &str,
                   image: String,
                   build: &str,
                   smoke: &str,
                   d: Duration| Row {
            spec: job.label.clone(),
            platform: platform.to_string(),
            variant: variant.to_string(),
            image,
            build: build.to_string(),
            smoke: smoke.to_string(),
            seconds: (d.as_secs_f64() * 10.0).round() / 10.0,
        };
        let not_run = |build: &str| -> Vec<Row> {
            let mut out = Vec::new();
            for v in requested {
                for (platform, tag) in planned_tags(job, v) {
                    out.push(row(&platform, v, tag, build, "-", r.elapsed));
                }
            }
            out
        };
        match &r.outcome {
            JobOutcome::Ran(_) | JobOutcome::Fleet(_) => {
                for (platform, run) in r.outcome.runs() {
                    let platform = platform_name(job, platform);
                    let of_platform =
                        |v: &str, image: String, build: &str, smoke: &str, d: Duration| {
                            row(&platform, v, image, build, smoke, d)
                        };
                    rows.extend(run_rows(run, &of_platform));
                }
            }
            JobOutcome::Skipped => {
                let platforms = match &job.prepared {
                    Ok(p) => held(p),
                    Err(_) => "-".into(),
                };
                rows.push(row(&platforms, "-", "-".into(), "skipped", "-", r.elapsed));
            }
            JobOutcome::Failed(f) => rows.extend(not_run(&code_of(f))),
            JobOutcome::Cancelled => rows.extend(not_run("cancelled")),
        }
    }
    rows
}

/// The summary as an aligned text table with a header and a closing count line.
pub fn summary_table(rows: &[Row]) -> String {
    let header = [
        "SPEC", "PLATFORM", "VARIANT", "IMAGE", "BUILD", "SMOKE", "TIME",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.spec.clone(),
                r.platform.clone(),
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
    let skipped = rows.iter().filter(|r| r.build == "skipped").count();
    let count = rows.len() - skipped;
    if skipped == 0 {
        out.push_str(&format!("{passed} of {count} passed\n"));
    } else {
        out.push_str(&format!(
            "{passed} of {count} passed, {skipped} spec(s) skipped (--platform)\n"
        ));
    }
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

/// One JUnit suite per spec and variant, named `SPEC/VARIANT`; a fleet spec's per platform,
/// `SPEC/VARIANT (PLATFORM)` (as one spec's fleet names its verdicts). A skipped spec has none.
fn suites<'a>(
    jobs: &[Job],
    results: &'a [JobResult],
    requested: &[String],
    cancelled: &'a Failure,
) -> Vec<Suite<'a>> {
    let mut out = Vec::new();
    for (job, r) in jobs.iter().zip(results) {
        let name = |v: &str, platform: Option<&str>| match platform {
            Some(p) => format!("{}/{v} ({p})", job.label),
            None => format!("{}/{v}", job.label),
        };
        // The platforms a run that did not finish was for: a fleet's, by name.
        let planned: Vec<Option<String>> = match &job.prepared {
            Ok(p) if matches!(p.images, Images::Fleet { .. }) => p
                .platform_images()
                .iter()
                .map(|(pl, _)| Some(pl.as_str().to_string()))
                .collect(),
            _ => vec![None],
        };
        let not_run = |f: &'a Failure, out: &mut Vec<Suite<'a>>| {
            for v in requested {
                for p in &planned {
                    out.push(error_suite(&name(v, p.as_deref()), f));
                }
            }
        };
        match &r.outcome {
            JobOutcome::Ran(_) | JobOutcome::Fleet(_) => {
                for (platform, run) in r.outcome.runs() {
                    let p = platform.map(|p| p.as_str());
                    for (v, s) in run_variants(run).into_iter().zip(&run.smokes) {
                        out.push(match &s.outcome {
                            Ok(o) => crate::core::smoke::junit_suite(&o.report, &name(v, p)),
                            Err(f) => error_suite(&name(v, p), f),
                        });
                    }
                }
            }
            JobOutcome::Skipped => {}
            JobOutcome::Failed(f) => not_run(f, &mut out),
            JobOutcome::Cancelled => not_run(cancelled, &mut out),
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
                (JobOutcome::Ran(run), Ok(p)) => {
                    let lock = &p.lock;
                    if let Images::One(rendered) = &p.images {
                        doc.extend(run_json(rendered, run));
                    }
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
                (JobOutcome::Fleet(fleet), Ok(p)) => {
                    let lock = &p.lock;
                    if let Images::Fleet { images, .. } = &p.images {
                        doc.extend(super::fleet::fleet_json(lock, images, fleet));
                    }
                    let mut smoke = Vec::new();
                    for (_, run) in &fleet.platforms {
                        smoke.extend(run.smokes.iter().map(|s| smoke_json_in(Some(lock), s)));
                        diagnostics.extend(mismatches(&run.smokes, table, lock));
                    }
                    doc.insert("smoke".into(), smoke.into());
                    if r.outcome.passed() {
                        "pass"
                    } else {
                        "fail"
                    }
                }
                (JobOutcome::Skipped, Ok(p)) => {
                    let held: Vec<&str> = p.lock.platforms().iter().map(|p| p.as_str()).collect();
                    doc.insert("lock_platforms".into(), held.into());
                    "skipped"
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
            (JobOutcome::Ran(_) | JobOutcome::Fleet(_), Ok(p)) => {
                let runs = r.outcome.runs();
                let smokes = || runs.iter().flat_map(|(_, run)| &run.smokes);
                let mut d = Vec::new();
                for (_, run) in &runs {
                    d.extend(mismatches(&run.smokes, table, &p.lock));
                }
                d.extend(smokes().filter_map(|s| match &s.outcome {
                    Ok(o) if !o.report.passed(o.exit_code) => {
                        Some(failed_diagnostic(&shown_name(Some(&p.lock), &s.name), o))
                    }
                    Err(f) => f.diagnostics.first().cloned(),
                    _ => None,
                }));
                d.extend(smokes().filter_map(|s| match &s.outcome {
                    Ok(o) => crate::core::smoke::platform_mismatch(&o.report, &s.name),
                    Err(_) => None,
                }));
                append_step_summary(&format!("image {}", job.label), smokes(), Some(&p.lock));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lock::Lock;
    use std::path::{Path, PathBuf};

    /// The example fleet (linux-64 and linux-aarch64) and single-platform specs, prepared as
    /// `image_many::prepare` would (without the lock check): `platforms` selected.
    fn job(dir: &str, label: &str, platforms: &[Platform]) -> Job {
        let spec = PathBuf::from(dir).join("envbuild.toml");
        let text = std::fs::read_to_string(Path::new(dir).join("envbuild.lock")).unwrap();
        let lock = Lock::from_toml(&text).unwrap();
        let selected = image_many::selected(&lock, platforms);
        let variants = ["runtime".to_string()];
        let none = crate::core::closure::Mirrors::default();
        let images = if selected.is_empty() {
            Images::Skipped
        } else if lock.fleet.is_empty() {
            let r = crate::app::image::rendered_image(&lock, &variants, None, &spec, &none);
            Images::One(r.unwrap())
        } else {
            let images = crate::app::image_fleet::platform_images(
                &lock,
                &variants,
                None,
                &spec,
                &none,
                &lock.platforms(),
            )
            .unwrap();
            Images::Fleet { images, selected }
        };
        Job {
            label: label.into(),
            spec,
            prepared: Ok(Prepared {
                lock,
                images,
                warnings: Vec::new(),
            }),
        }
    }

    fn result(outcome: JobOutcome) -> JobResult {
        JobResult {
            outcome,
            elapsed: Duration::ZERO,
        }
    }

    /// A fleet spec that did not run has a row per platform, tagged as `--push` would push it
    /// (`-amd64`, `-arm64`); a single-platform spec one, without a suffix; `--platform` keeps
    /// the fleet's selected platform only and skips the spec that lacks it.
    #[test]
    fn a_fleet_spec_has_a_row_per_platform() {
        let jobs = [
            job("specs/fleet-h100-gh200", "fleet", &[]),
            job("specs/torch29-cu128", "one", &[]),
        ];
        let results = [result(JobOutcome::Cancelled), result(JobOutcome::Cancelled)];
        let rows = summary_rows(&jobs, &results, &["runtime".into()]);
        let cells: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.spec.as_str(), r.platform.as_str()))
            .collect();
        assert_eq!(
            cells,
            [
                ("fleet", "linux-64"),
                ("fleet", "linux-aarch64"),
                ("one", "linux-64")
            ]
        );
        assert!(rows[0].image.ends_with("-amd64"), "{rows:?}");
        assert!(rows[1].image.ends_with("-arm64"), "{rows:?}");
        assert!(!rows[2].image.ends_with("-amd64"), "{rows:?}");
        let Ok(p) = &jobs[0].prepared else { panic!() };
        let Images::Fleet { images, selected } = &p.images else {
            panic!("a fleet")
        };
        assert_eq!(selected, &p.lock.platforms());
        assert_eq!(
            rows[1].image,
            format!(
                "{}:{}",
                images[1].rendered.image_name,
                images[1].rendered.build_id().tag("runtime")
            )
        );
        let cancelled = cancelled_failure();
        let names: Vec<String> = suites(&jobs, &results, &["runtime".into()], &cancelled)
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(
            names,
            [
                "fleet/runtime (linux-64)",
                "fleet/runtime (linux-aarch64)",
                "one/runtime"
            ]
        );

        let arm = [Platform::LinuxAarch64];
        let jobs = [
            job("specs/fleet-h100-gh200", "fleet", &arm),
            job("specs/torch29-cu128", "one", &arm),
        ];
        let Ok(p) = &jobs[0].prepared else { panic!() };
        assert!(matches!(&p.images, Images::Fleet { selected, .. } if selected == &arm));
        assert_eq!(p.platform_images().len(), 1);
        let results = [result(JobOutcome::Cancelled), result(JobOutcome::Skipped)];
        let rows = summary_rows(&jobs, &results, &["runtime".into()]);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].platform, "linux-aarch64");
        assert_eq!(
            (rows[1].platform.as_str(), rows[1].build.as_str()),
            ("linux-64", "skipped")
        );
        let table = summary_table(&rows);
        assert!(
            table.ends_with("0 of 1 passed, 1 spec(s) skipped (--platform)\n"),
            "{table}"
        );
        assert!(results[1].outcome.passed(), "a skip is no failure");
    }
}
