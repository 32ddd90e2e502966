//! How `envbuild image` shows its progress on stderr: a live line on a terminal, one line per
//! step in CI or when stderr is not a terminal, every build line with `-v`, and with several
//! specs every line prefixed `[SPEC/VARIANT]`. Performs I/O: stderr only.

use crate::app::image::ImageEvent;
use crate::infra::docker::build::{BuildEvent, BuildOutcome};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// How progress is shown on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live line on a terminal: current step, elapsed time, cached steps.
    Tty,
    /// One line per step (CI, or stderr is not a terminal).
    Plain,
    /// Plain, plus every line of the build log (`-v`).
    Verbose,
}

impl ProgressMode {
    /// `-v` wins; otherwise a live display only on a terminal outside CI.
    pub fn detect(verbose: bool) -> Self {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
        if verbose {
            ProgressMode::Verbose
        } else if std::io::stderr().is_terminal() && !ci {
            ProgressMode::Tty
        } else {
            ProgressMode::Plain
        }
    }
}

/// Shows the use case's progress on stderr: one [`Progress`] per build, a line per smoke test.
/// With several specs, every line names the spec: `[SPEC/VARIANT]`.
pub(super) struct Display {
    mode: ProgressMode,
    build: Option<Progress>,
    /// `""` for one spec, `LABEL/` for several; then the platform's for a fleet
    /// (`linux-aarch64/`).
    prefix: String,
    /// The spec's part of `prefix`.
    base: String,
}

impl Display {
    pub(super) fn new(mode: ProgressMode, prefix: &str) -> Self {
        Display {
            mode,
            build: None,
            prefix: prefix.to_string(),
            base: prefix.to_string(),
        }
    }

    pub(super) fn event(&mut self, event: ImageEvent<'_>) {
        match event {
            ImageEvent::Platform { platform } => {
                // A fleet: every line of this platform's builds and tests names it.
                self.prefix = format!("{}{}/", self.base, platform.as_str());
                eprintln!(
                    "[{}{}] the image for {}",
                    self.base,
                    platform.as_str(),
                    crate::core::platform::docker_platform(platform).unwrap_or("?")
                );
            }
            ImageEvent::FleetNotPushed { failed } => {
                let names: Vec<&str> = failed.iter().map(|p| p.as_str()).collect();
                eprintln!(
                    "[{}fleet] not pushed: {} failed (a fleet is pushed only when every \
                     platform passed)",
                    self.base,
                    names.join(", ")
                );
            }
            ImageEvent::IndexPushed { index } => {
                let archs: Vec<&str> = index
                    .manifests
                    .iter()
                    .map(|m| m.architecture.as_str())
                    .collect();
                eprintln!(
                    "[{}{}] pushed the image index {} ({}) of {}",
                    self.base,
                    index.variant,
                    index.image,
                    index.digest,
                    archs.join(", ")
                );
            }
            ImageEvent::IndexWaits { variant, reason } => {
                eprintln!("[{}{variant}] no image index yet: {reason}", self.base)
            }
            other if self.prefix.is_empty() => self.shown(other),
            other => self.prefixed(other),
        }
    }

    /// The same lines with `[LABEL/VARIANT]`: the variant names carry the prefix.
    fn prefixed(&mut self, event: ImageEvent<'_>) {
        let p = self.prefix.clone();
        let with = |v: &str| format!("{p}{v}");
        match event {
            ImageEvent::BuildStarted { variant } => self.shown(ImageEvent::BuildStarted {
                variant: &with(variant),
            }),
            ImageEvent::Build { variant, event } => self.shown(ImageEvent::Build {
                variant: &with(variant),
                event,
            }),
            ImageEvent::BuildFinished { variant, outcome } => {
                self.shown(ImageEvent::BuildFinished {
                    variant: &with(variant),
                    outcome,
                })
            }
            ImageEvent::SmokeReused { variant, tag } => self.shown(ImageEvent::SmokeReused {
                variant: &with(variant),
                tag,
            }),
            ImageEvent::SmokeStarted { variant, tag, mode } => {
                self.shown(ImageEvent::SmokeStarted {
                    variant: &with(variant),
                    tag,
                    mode,
                })
            }
            ImageEvent::RegistryBuilds { variant, reason } => {
                self.shown(ImageEvent::RegistryBuilds {
                    variant: &with(variant),
                    reason,
                })
            }
            ImageEvent::Push { variant, progress } => self.shown(ImageEvent::Push {
                variant: &with(variant),
                progress,
            }),
            ImageEvent::NotPushed { variant } => self.shown(ImageEvent::NotPushed {
                variant: &with(variant),
            }),
            ImageEvent::RegistryHolds {
                published: pb,
                tested_at,
            } => eprintln!(
                "[{p}{}] {} ({}) passed its smoke test ({} mode, {tested_at}) per its verdict \
                 in the registry: build and test skipped",
                pb.variant, pb.image, pb.digest, pb.verdict_mode
            ),
            ImageEvent::Pushed { published: pb } => eprintln!(
                "[{p}{}] pushed {} ({}) and its verdict {}",
                pb.variant, pb.image, pb.digest, pb.verdict
            ),
            ImageEvent::InstallCache { reference, result } => {
                eprintln!(
                    "{}",
                    install_cache_line(&with("install"), reference, result)
                )
            }
            // Said by `event` itself.
            ImageEvent::Platform { .. }
            | ImageEvent::FleetNotPushed { .. }
            | ImageEvent::IndexPushed { .. }
            | ImageEvent::IndexWaits { .. } => {}
        }
    }

    fn shown(&mut self, event: ImageEvent<'_>) {
        match event {
            ImageEvent::BuildStarted { variant } => {
                self.build = Some(Progress::new(self.mode, variant));
            }
            ImageEvent::Build { event, .. } => {
                if let Some(p) = &mut self.build {
                    p.event(event);
                }
            }
            ImageEvent::BuildFinished { outcome, .. } => {
                if let Some(p) = self.build.take() {
                    p.finish(outcome);
                }
            }
            ImageEvent::SmokeReused { variant, .. } => eprintln!(
                "[{variant}] smoke test passed before on this engine: verdict reused (--retest \
                 runs it again)"
            ),
            ImageEvent::SmokeStarted { variant, tag, mode } => eprintln!(
                "[{variant}] smoke test ({}) in a container from {tag}",
                mode.as_str()
            ),
            ImageEvent::RegistryHolds {
                published: p,
                tested_at,
            } => eprintln!(
                "[{}] {} ({}) passed its smoke test ({} mode, {tested_at}) per its verdict in \
                 the registry: build and test skipped (--rebuild or --retest run them)",
                p.variant, p.image, p.digest, p.verdict_mode
            ),
            ImageEvent::RegistryBuilds { variant, reason } => {
                eprintln!("[{variant}] registry: {reason}: building")
            }
            ImageEvent::Push { variant, progress } => {
                // Layer chatter only with -v; the digest line always.
                if self.mode == ProgressMode::Verbose || progress.status.contains("digest:") {
                    eprintln!("[{variant}] push: {}", progress.status);
                }
            }
            ImageEvent::Pushed { published: p } => eprintln!(
                "[{}] pushed {} ({}) and its verdict {}",
                p.variant, p.image, p.digest, p.verdict
            ),
            ImageEvent::NotPushed { variant } => {
                eprintln!("[{variant}] smoke test failed: not pushed")
            }
            ImageEvent::InstallCache { reference, result } => {
                eprintln!("{}", install_cache_line("install", reference, result))
            }
            ImageEvent::Platform { .. }
            | ImageEvent::FleetNotPushed { .. }
            | ImageEvent::IndexPushed { .. }
            | ImageEvent::IndexWaits { .. } => {}
        }
    }
}

/// Short enough for one terminal line.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Turns build events into the chosen display on stderr.
struct Progress {
    out: Box<dyn std::io::Write + Send>,
    mode: ProgressMode,
    variant: String,
    bar: Option<indicatif::ProgressBar>,
    cached: usize,
    step: String,
}

impl Progress {
    fn new(mode: ProgressMode, variant: &str) -> Self {
        Self::with_writer(mode, variant, Box::new(std::io::stderr()))
    }

    fn with_writer(mode: ProgressMode, variant: &str, out: Box<dyn std::io::Write + Send>) -> Self {
        let bar = (mode == ProgressMode::Tty).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar.set_message(format!("{variant}: preparing"));
            bar
        });
        Progress {
            out,
            mode,
            variant: variant.to_string(),
            bar,
            cached: 0,
            step: String::new(),
        }
    }

    fn event(&mut self, e: BuildEvent) {
        let v = &self.variant;
        match e {
            BuildEvent::Skipped { tag, image_id } => {
                let id = clip(&image_id, 19);
                self.line(&format!(
                    "[{v}] {tag} ({id}) was built from this lock: build skipped (--rebuild forces it)"
                ));
            }
            BuildEvent::NotBuiltHere { tag, image_id } => {
                let id = clip(&image_id, 19);
                self.line(&format!(
                    "[{v}] {tag} ({id}) was not built by envbuild here: building (an image is \
                     reused only by the id envbuild recorded building it, never by its labels)"
                ));
            }
            BuildEvent::Builder(which) => self.line(&format!("[{v}] builder: {which}")),
            BuildEvent::CacheFrom { used, missing } => {
                let mut said = if used.is_empty() {
                    "none".to_string()
                } else {
                    used.join(", ")
                };
                if !missing.is_empty() {
                    said.push_str(&format!(" (skipped: {})", missing.join("; ")));
                }
                self.line(&format!("[{v}] cache from: {said}"));
            }
            BuildEvent::Context { bytes, files } => {
                self.line(&format!(
                    "[{v}] build context: {files} files, {:.1} KiB",
                    bytes as f64 / 1024.0
                ));
            }
            BuildEvent::Step {
                index,
                total,
                instruction,
            } => {
                self.step = format!("step {index}/{total}");
                let text = format!("[{v}] {}: {}", self.step, clip(&instruction, 100));
                match &self.bar {
                    Some(bar) => bar.set_message(format!(
                        "{v}: {} {} ({} cached)",
                        self.step,
                        clip(&instruction, 60),
                        self.cached
                    )),
                    None => self.line(&text),
                }
            }
            BuildEvent::Cached => {
                self.cached += 1;
                if self.bar.is_none() {
                    self.line(&format!("[{v}] {}: cached", self.step));
                }
            }
            BuildEvent::Pull { image, progress } => {
                let layer = progress.layer.as_deref().unwrap_or("");
                let moving = progress.bytes.is_some();
                match &self.bar {
                    Some(bar) => bar.set_message(format!(
                        "{v}: pulling {} {layer} {}",
                        clip(&image, 40),
                        progress.status
                    )),
                    // One line per layer state, not per chunk, outside a terminal.
                    None if !moving || self.mode == ProgressMode::Verbose => {
                        let text = format!("[{v}] pull {image}: {layer} {}", progress.status);
                        self.line(&text);
                    }
                    None => {}
                }
            }
            BuildEvent::Output(line) => {
                if self.mode == ProgressMode::Verbose {
                    let text = format!("[{v}]   {line}");
                    self.line(&text);
                }
            }
        }
    }

    fn line(&mut self, text: &str) {
        // A build's output may quote a URL with its credentials (an index pip names).
        let text = crate::core::url::redact_text(text);
        let text = text.as_str();
        match &self.bar {
            Some(bar) => bar.println(text),
            // A closed stderr must not stop the build.
            None => {
                let _ = writeln!(self.out, "{text}");
            }
        }
    }

    fn finish(mut self, outcome: Option<&BuildOutcome>) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if let Some(b) = outcome.filter(|b| !b.skipped) {
            let text = format!(
                "[{}] built {} in {:.1}s: {} steps, {} cached",
                self.variant,
                b.tags.join(", "),
                b.elapsed.as_secs_f64(),
                b.steps,
                b.cached_steps
            );
            self.line(&text);
        }
    }
}

/// What became of the `install` stage's registry cache, as one progress line.
fn install_cache_line(label: &str, reference: &str, result: Result<&str, &str>) -> String {
    match result {
        Ok(digest) => format!(
            "[{label}] pushed the install stage as the registry build cache {reference} ({digest})"
        ),
        Err(why) => format!(
            "[{label}] warning: the install stage was not pushed as {reference}: {why} (a later \
             build on another machine installs the environment again)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn feed(mode: ProgressMode) -> String {
        let sink = Sink::default();
        let mut p = Progress::with_writer(mode, "runtime", Box::new(sink.clone()));
        p.event(BuildEvent::Context {
            bytes: 2048,
            files: 3,
        });
        p.event(BuildEvent::Step {
            index: 1,
            total: 3,
            instruction: "FROM base".into(),
        });
        p.event(BuildEvent::Step {
            index: 2,
            total: 3,
            instruction: "RUN echo a".into(),
        });
        p.event(BuildEvent::Cached);
        p.event(BuildEvent::Step {
            index: 3,
            total: 3,
            instruction: "RUN make".into(),
        });
        p.event(BuildEvent::Output("compiling".into()));
        p.finish(Some(&BuildOutcome {
            image_id: "sha256:1".into(),
            tags: vec!["env:runtime-0123456789ab".into()],
            skipped: false,
            not_built_here: None,
            steps: 3,
            cached_steps: 1,
            context_bytes: 2048,
            context_sha256: String::new(),
            elapsed: Duration::from_millis(1500),
        }));
        let bytes = sink.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn plain_progress_is_one_line_per_step_with_cached_steps_counted() {
        let text = feed(ProgressMode::Plain);
        assert_eq!(
            text,
            "[runtime] build context: 3 files, 2.0 KiB\n\
             [runtime] step 1/3: FROM base\n\
             [runtime] step 2/3: RUN echo a\n\
             [runtime] step 2/3: cached\n\
             [runtime] step 3/3: RUN make\n\
             [runtime] built env:runtime-0123456789ab in 1.5s: 3 steps, 1 cached\n"
        );
    }

    #[test]
    fn verbose_progress_adds_the_build_log() {
        assert!(feed(ProgressMode::Verbose).contains("[runtime]   compiling\n"));
        assert!(!feed(ProgressMode::Plain).contains("compiling"));
    }
}
