//! `image SPEC...`: build and smoke-test several specs on one engine connection, at most N at
//! once, each to its end whatever the others do (unless fail-fast); a signal stops them all and
//! each run removes its own smoke container (`app::image`'s cleanup, one run id per spec).
//! A fleet spec builds and tests each selected platform's image (`--platform`, else every one
//! its lock holds) through `app::image_fleet`, as one spec's run does; a spec whose lock holds
//! none of the selected platforms is skipped, not failed.
//! Performs I/O (files, the engine, the verdict cache); prints nothing: each spec's progress
//! goes to a sink the caller makes for it, results come back as values.

use super::image::{build_and_test, check_lock, rendered_image, ImageEvent, ImageOptions};
use super::image::{ImageRun, RenderedImage};
use super::image_fleet::{FleetRun, PlatformImage};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::Lock;
use crate::core::spec::Platform;
use crate::infra::docker::{self, run as drun};
use futures_util::{FutureExt, StreamExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One spec of the list: its label, path, and its lock and rendered files (or why not).
pub struct Job {
    pub label: String,
    pub spec: PathBuf,
    pub prepared: Result<Prepared, Failure>,
}

/// A spec whose lock is current (or was rewritten) and whose image files are rendered.
pub struct Prepared {
    pub lock: Lock,
    pub images: Images,
    /// The lock check's warnings.
    pub warnings: Vec<Diagnostic>,
}

/// What a prepared spec builds.
pub enum Images {
    /// A single-platform lock: its one image.
    One(RenderedImage),
    /// A fleet lock: every platform's image, in the lock's order, and the `selected` ones to
    /// build (the others' tags are what `--push`'s index names, from the registry).
    Fleet {
        images: Vec<PlatformImage>,
        selected: Vec<Platform>,
    },
    /// `--platform` selects none of the platforms the lock holds: nothing to build.
    Skipped,
}

impl Prepared {
    /// Each image to build with its platform, in build order (none when skipped).
    pub fn platform_images(&self) -> Vec<(Platform, &RenderedImage)> {
        match &self.images {
            Images::One(r) => vec![(self.lock.platform, r)],
            Images::Fleet { images, selected } => images
                .iter()
                .filter(|pi| selected.contains(&pi.platform))
                .map(|pi| (pi.platform, &pi.rendered))
                .collect(),
            Images::Skipped => Vec::new(),
        }
    }

    /// The same images, to add the network's CA bundle to.
    pub fn rendered_mut(&mut self) -> Vec<&mut RenderedImage> {
        match &mut self.images {
            Images::One(r) => vec![r],
            Images::Fleet { images, .. } => images.iter_mut().map(|pi| &mut pi.rendered).collect(),
            Images::Skipped => Vec::new(),
        }
    }
}

/// The platforms of `lock` that `wanted` (`--platform`) selects, in the lock's order: every one
/// when `wanted` is empty, else those of `wanted` it holds (the others are not this spec's to
/// build: unlike one spec's run, a list of specs is not refused for one that lacks them).
pub fn selected(lock: &Lock, wanted: &[Platform]) -> Vec<Platform> {
    lock.platforms()
        .into_iter()
        .filter(|p| wanted.is_empty() || wanted.contains(p))
        .collect()
}

/// Check `spec`'s lock (or rewrite it, with `update_lock`) and render its images for `variants`
/// (pip and conda pointed at `mirrors` when given): a fleet's, each platform `wanted`
/// (`--platform`) selects ([`selected`]).
pub fn prepare(
    table: &crate::core::compat::Table,
    spec: &Path,
    update_lock: bool,
    (variants, wanted): (&[String], &[Platform]),
    templates: Option<&Path>,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<Prepared, Failure> {
    let checked = check_lock(table, spec, update_lock)?;
    let Some(lock) = checked.lock else {
        return Err(Failure::new(checked.diagnostics));
    };
    let platforms = selected(&lock, wanted);
    let images = if platforms.is_empty() {
        Images::Skipped
    } else if lock.fleet.is_empty() {
        Images::One(rendered_image(&lock, variants, templates, spec, mirrors)?)
    } else {
        let images = super::image_fleet::platform_images(
            &lock,
            variants,
            templates,
            spec,
            mirrors,
            &lock.platforms(),
        )?;
        Images::Fleet {
            images,
            selected: platforms,
        }
    };
    Ok(Prepared {
        lock,
        images,
        warnings: checked.diagnostics,
    })
}

/// How one spec's run ended.
pub enum JobOutcome {
    /// Built and tested (some smoke tests may have failed: see `ImageRun::smokes`).
    Ran(ImageRun),
    /// A fleet spec: each selected platform built and tested (`image_fleet::build_and_test`).
    Fleet(FleetRun),
    /// `--platform` selects none of the lock's platforms: nothing built, not a failure.
    Skipped,
    /// The lock, the render, a build or the run failed, or a signal stopped it.
    Failed(Failure),
    /// Not started, or stopped, because another spec failed under fail-fast.
    Cancelled,
}

impl JobOutcome {
    /// Every smoke test passed (a skipped spec has none that failed).
    pub fn passed(&self) -> bool {
        match self {
            JobOutcome::Skipped => true,
            _ => {
                let runs = self.runs();
                !runs.is_empty()
                    && runs
                        .iter()
                        .all(|(_, r)| r.smokes.iter().all(super::test::SmokeResult::passed))
            }
        }
    }

    /// Each image run with its platform (`None`: a single-platform lock's one run); empty when
    /// nothing ran.
    pub fn runs(&self) -> Vec<(Option<Platform>, &ImageRun)> {
        match self {
            JobOutcome::Ran(r) => vec![(None, r)],
            JobOutcome::Fleet(f) => f.platforms.iter().map(|(p, r)| (Some(*p), r)).collect(),
            _ => Vec::new(),
        }
    }
}

/// Build and test a prepared spec's images: a fleet's through `image_fleet` (each selected
/// platform, pushed only when all passed), else its one image.
async fn run_prepared(
    engine: &docker::Engine,
    p: &Prepared,
    opts: &ImageOptions,
    interrupt: drun::Interrupt,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<JobOutcome, Failure> {
    match &p.images {
        Images::One(rendered) => build_and_test(engine, rendered, opts, interrupt, on_event)
            .await
            .map(JobOutcome::Ran),
        Images::Fleet { images, selected } => super::image_fleet::build_and_test(
            engine,
            (images.as_slice(), selected.as_slice()),
            opts,
            interrupt,
            on_event,
        )
        .await
        .map(JobOutcome::Fleet),
        Images::Skipped => Ok(JobOutcome::Skipped),
    }
}

/// One spec's result, in the order of the job list.
pub struct JobResult {
    pub outcome: JobOutcome,
    pub elapsed: Duration,
}

/// Every spec's result, and whether a signal stopped the runs.
pub struct ManyRun {
    pub results: Vec<JobResult>,
    pub interrupted: bool,
}

/// How many specs run at once, and whether the first failure stops the rest (not the engine
/// calls' time limits, which are `infra::docker::limits::Limits`).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub jobs: usize,
    pub fail_fast: bool,
}

/// A sink for the progress of job `i`.
pub type Sink<'s> = Box<dyn FnMut(ImageEvent<'_>) + Send + 's>;

/// Where progress goes: `start(i)` when job `i` starts gives the sink of its events;
/// `done(i, result)` when it ends (cancelled jobs included).
pub struct Progress<'p, 's> {
    pub start: &'p (dyn Fn(usize) -> Sink<'s> + Sync),
    pub done: &'p (dyn Fn(usize, &JobResult) + Sync),
}

/// Run every job (at most `schedule.jobs` at once, in list order as slots free up) and return
/// their results. `Err`: nothing ran (no async runtime, no signal handlers, no engine).
pub fn run_many<'s>(
    jobs: &[Job],
    opts: &ImageOptions,
    schedule: Schedule,
    progress: Progress<'_, 's>,
) -> Result<ManyRun, Failure> {
    let skipped = |j: &Job| matches!(&j.prepared, Ok(p) if matches!(p.images, Images::Skipped));
    if jobs.iter().all(|j| j.prepared.is_err() || skipped(j)) {
        // Nothing to build: no engine is needed to report every spec's problem.
        let first_failure = jobs.iter().position(|j| j.prepared.is_err());
        let results: Vec<JobResult> = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| JobResult {
                outcome: match &j.prepared {
                    // Under fail-fast the first failure cancels the rest, as with an engine.
                    Err(f) if !schedule.fail_fast || Some(i) == first_failure => {
                        JobOutcome::Failed(f.clone())
                    }
                    Ok(_) if !schedule.fail_fast || first_failure.is_none_or(|f| i < f) => {
                        JobOutcome::Skipped
                    }
                    _ => JobOutcome::Cancelled,
                },
                elapsed: Duration::ZERO,
            })
            .collect();
        for (i, r) in results.iter().enumerate() {
            (progress.done)(i, r);
        }
        return Ok(ManyRun {
            results,
            interrupted: false,
        });
    }
    let rt = docker::runtime()?;
    rt.block_on(async move {
        let signal = drun::install_interrupt()?;
        let engine = tokio::select! {
            e = docker::connect() => e?,
            _ = signal.clone() => return Err(drun::interrupted("connecting to the engine")),
        };
        // Fail-fast stops the runs under way through the same path as a signal.
        let (stop_fut, stop) =
            futures_util::future::abortable(futures_util::future::pending::<()>());
        let sig = signal.clone();
        let interrupt: drun::Interrupt = async move {
            futures_util::future::select(sig, stop_fut).await;
        }
        .boxed()
        .shared();
        let stopping = AtomicBool::new(false);
        let run_one = |i: usize| {
            let (engine, interrupt, stopping, stop) =
                (&engine, interrupt.clone(), &stopping, &stop);
            async move {
                let started = Instant::now();
                let outcome = match &jobs[i].prepared {
                    // Fail-fast, or a signal: what has not started does not start.
                    _ if stopping.load(Ordering::Relaxed)
                        || interrupt.clone().now_or_never().is_some() =>
                    {
                        JobOutcome::Cancelled
                    }
                    Err(f) => JobOutcome::Failed(f.clone()),
                    Ok(p) if matches!(p.images, Images::Skipped) => JobOutcome::Skipped,
                    Ok(p) => {
                        let mut job_opts = opts.clone();
                        // Each spec's smoke container has its own name and cleanup label.
                        job_opts.smoke.run_id = format!("{}-{i}", opts.smoke.run_id);
                        let mut on_event = (progress.start)(i);
                        match run_prepared(engine, p, &job_opts, interrupt, &mut on_event).await {
                            Ok(outcome) => outcome,
                            // Stopped by fail-fast (not a failure of its own).
                            Err(f)
                                if stopping.load(Ordering::Relaxed)
                                    && f.diagnostics.iter().any(|d| {
                                        d.code == crate::infra::docker::codes::INTERRUPTED
                                    }) =>
                            {
                                JobOutcome::Cancelled
                            }
                            Err(f) => JobOutcome::Failed(f),
                        }
                    }
                };
                if schedule.fail_fast
                    && !matches!(outcome, JobOutcome::Cancelled)
                    && !outcome.passed()
                {
                    stopping.store(true, Ordering::Relaxed);
                    stop.abort();
                }
                let result = JobResult {
                    outcome,
                    elapsed: started.elapsed(),
                };
                (progress.done)(i, &result);
                (i, result)
            }
        };
        let mut results: Vec<(usize, JobResult)> = futures_util::stream::iter(0..jobs.len())
            .map(run_one)
            .buffer_unordered(schedule.jobs.max(1))
            .collect()
            .await;
        results.sort_by_key(|(i, _)| *i);
        let interrupted = signal.clone().now_or_never().is_some();
        Ok(ManyRun {
            results: results.into_iter().map(|(_, r)| r).collect(),
            interrupted,
        })
    })
}
