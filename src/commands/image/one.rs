//! `envbuild image SPEC`, one spec: the lock check, the in-memory render and `app::image`'s
//! build and smoke test, its progress to stderr (a live line on a terminal, one line per step
//! in CI or when stderr is not a terminal), its verdicts to stdout and the JUnit file, and the
//! exit code. Performs I/O: stdout/stderr and the JUnit file.

use super::progress::{Display, ProgressMode};
use super::{options, run_json};
use crate::app::image::{ImageRun, RenderedImage};
use crate::cli::ImageArgs;
use crate::commands::verdicts::report;
use crate::commands::{eprint_diagnostics, Output};
use crate::core::diag::Failure;
use std::path::Path;

/// Lock check (or `--update-lock`), render, build, smoke test, report, for the one `spec`;
/// `mirrors` are `--pip-mirror` and `--conda-mirror`, checked already.
pub(super) fn run(
    o: &Output,
    table: &crate::core::compat::Table,
    spec: &Path,
    args: &ImageArgs,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<i32, Failure> {
    let checked = crate::app::image::check_lock(table, spec, args.update_lock)?;
    // A stale or failing lock is the run's failure, so `--json` and `--junit` report it too.
    let Some(lock) = checked.lock else {
        return Err(Failure::new(checked.diagnostics));
    };
    eprint_diagnostics(&checked.diagnostics);
    let platforms = crate::app::image_fleet::selected(&lock, &args.platforms)?;
    if !lock.fleet.is_empty() {
        return super::fleet::run(o, table, (spec, &lock), args, mirrors, &platforms);
    }
    let opts = options(args);
    let progress = ProgressMode::detect(args.verbose);
    let mut rendered = crate::app::image::rendered_image(
        &lock,
        &opts.variants,
        args.templates.as_deref(),
        spec,
        mirrors,
    )?;
    let ca =
        crate::app::image::add_ca_bundle(&mut rendered, &lock, spec, |k| std::env::var(k).ok())?;
    super::note_build_inputs(ca.as_deref(), &opts);
    let mut display = Display::new(progress, "");
    match crate::app::image::run(&rendered, &opts, &mut |e| display.event(e))? {
        Ok(result) => report_run(
            o,
            &rendered,
            result,
            args.json,
            args.junit.as_deref(),
            (table, &lock),
        ),
        Err(f) => {
            let f = super::blame_the_mirror(f, mirrors);
            // CI still gets its report files when the build itself failed.
            let name = format!("{} ({})", rendered.image_name, opts.variants.join(", "));
            super::report_failure(o, &name, &f, args.json, args.junit.as_deref())?;
            Err(f)
        }
    }
}

/// Print the verdicts (with the builds in `--json`), write JUnit, and give the exit code; `row`
/// is the table and lock each image's torch is compared with (`TABLE_MISMATCH`).
fn report_run(
    o: &Output,
    rendered: &RenderedImage,
    result: ImageRun,
    json: bool,
    junit: Option<&Path>,
    row: (&crate::core::compat::Table, &crate::core::lock::Lock),
) -> Result<i32, Failure> {
    let extra = run_json(rendered, &result);
    report(o, "image", result.smokes, json, junit, extra, Some(row))
}
