//! `envbuild image SPEC`: check the lock, render in memory, build the variant(s) through the
//! engine from a deterministic context, smoke-test each image in a container and report.
//! Performs I/O: the engine, the smoke-verdict cache, stdout/stderr and the JUnit file.
//!
//! The engine half starts at [`run_rendered`] / [`build_and_test`], which take already-rendered
//! files; [`run`] is the CLI entry that gets them from the spec, lock and renderer.

use super::smoke_run::{report, smoke, SmokeResult, SmokeSettings};
use crate::cli::{GpusArg, ImageArgs, VariantArg};
use crate::core::diag::Failure;
use crate::core::smoke::{Expectations, SmokeReport};
use crate::infra::docker::build::{build, BuildEvent, BuildOutcome, BuildRequest};
use crate::infra::docker::run::{self as drun, Interrupt, SmokeOutcome};
use crate::infra::docker::{self, Engine};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the rendered expectations sit among the rendered files.
pub const RENDERED_EXPECT: &str = "envbuild/expect.json";

/// What the core hands to the engine half: the rendered files and the lock's identity.
#[derive(Debug, Clone)]
pub struct RenderedImage {
    /// Rendered files by relative path: `Dockerfile` (stages `runtime` and `dev`),
    /// `environment.yml`/`requirements.txt`, `envbuild/envbuild_smoke.py`,
    /// `envbuild/expect.json`, ... Only what the Dockerfile copies is sent to the engine.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Which file is the Dockerfile (normally `Dockerfile`).
    pub dockerfile: String,
    /// Image repository name (`[image] name`).
    pub image_name: String,
    /// The lock's sha256 (64 hex).
    pub lock_hash: String,
    /// Compact JSON summary of the lock, for the `dev.envbuild.lock-summary` label.
    pub lock_summary: String,
}

/// How progress is shown on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live line on a terminal: current step, elapsed time, cached steps.
    Tty,
    /// One line per step (CI, or stderr is not a terminal).
    Plain,
    /// Plain, plus every line of the build log (`-v`).
    Verbose,
    /// Nothing (library callers, tests).
    Quiet,
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

/// Everything `envbuild image` was asked for, past the spec.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// Dockerfile targets to build, in order (`runtime`, `dev`).
    pub variants: Vec<String>,
    pub tags: Vec<String>,
    pub rebuild: bool,
    pub retest: bool,
    pub smoke: SmokeSettings,
    pub json: bool,
    pub junit: Option<PathBuf>,
    pub progress: ProgressMode,
    /// Where passing verdicts are remembered (`None`: never reuse one).
    pub cache_dir: Option<PathBuf>,
}

impl ImageOptions {
    /// The options the CLI flags ask for.
    pub fn from_args(args: &ImageArgs) -> Self {
        ImageOptions {
            variants: variants(args.variant),
            tags: args.tags.clone(),
            rebuild: args.rebuild,
            retest: args.retest,
            smoke: SmokeSettings {
                gpus: args.gpus == GpusArg::All,
                timeout: Duration::from_secs(args.timeout),
                shm_bytes: args.shm_size,
                run_id: docker::new_run_id(),
            },
            json: args.json,
            junit: args.junit.clone(),
            progress: ProgressMode::detect(args.verbose),
            cache_dir: default_cache_dir(),
        }
    }
}

pub fn variants(v: VariantArg) -> Vec<String> {
    match v {
        VariantArg::Runtime => vec!["runtime".into()],
        VariantArg::Dev => vec!["dev".into()],
        VariantArg::All => vec!["runtime".into(), "dev".into()],
    }
}

/// `ENVBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/envbuild`, else `~/.cache/envbuild`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    env("ENVBUILD_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("envbuild")))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache").join("envbuild")))
}

/// The CLI entry: spec → lock check (or `--update-lock`) → render → [`run_rendered`].
pub fn run(table: &crate::core::compat::Table, args: ImageArgs) -> Result<i32, Failure> {
    let Some(lock) = current_lock(table, &args)? else {
        return Ok(crate::core::diag::exit::FAILURE);
    };
    let lock_hash = lock
        .hash()
        .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
    let opts = ImageOptions::from_args(&args);
    for v in &opts.variants {
        if !lock.image.variants.iter().any(|lv| lv.as_str() == v) {
            return Err(Failure::usage(
                format!(
                    "the lock has no `{v}` variant (it has: {})",
                    lock.image
                        .variants
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some("add it to the spec's `[image] variants`, or pick another --variant".into()),
            ));
        }
    }
    let spec_dir = args
        .spec
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let files = render_files(&lock, args.templates.as_deref(), spec_dir)?;
    let rendered = RenderedImage {
        files,
        dockerfile: "Dockerfile".into(),
        image_name: image_name(&lock.name),
        lock_hash,
        lock_summary: lock.summary_json(),
    };
    run_rendered(rendered, opts)
}

/// The image repository: `envbuild/<name as a DNS label>`, the name the rendered run snippets
/// use (`render::image_tag`).
pub fn image_name(name: &str) -> String {
    format!("envbuild/{}", crate::core::render::dns_label(name))
}

/// The files of the image, rendered in memory from the lock, plus the lock's `[image] wheels`
/// directory (read from beside the spec). Run snippets are left out: the build needs none.
fn render_files(
    lock: &crate::core::lock::Lock,
    templates: Option<&Path>,
    spec_dir: &Path,
) -> Result<BTreeMap<String, Vec<u8>>, Failure> {
    let overrides = match templates {
        Some(dir) => Some(crate::infra::fs::read_template_dir(dir)?),
        None => None,
    };
    let rendered =
        crate::core::render::render(lock, &crate::core::render::RenderOptions { overrides })?;
    let mut files: BTreeMap<String, Vec<u8>> = rendered
        .context_files()
        .map(|(p, b)| (p.to_string(), b.to_vec()))
        .collect();
    for dir in crate::core::render::extra_context_dirs(lock) {
        add_dir(&spec_dir.join(&dir), &dir, &mut files)?;
    }
    Ok(files)
}

/// Add the regular files under `root` as `prefix/...` (links are not followed).
fn add_dir(
    root: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), Failure> {
    let entries = std::fs::read_dir(root).map_err(|e| Failure::io(root, &e))?;
    let entries: Vec<std::fs::DirEntry> = entries
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::io(root, &e))?;
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{}/{name}", prefix.trim_end_matches('/'));
        let kind = entry.file_type().map_err(|e| Failure::io(&path, &e))?;
        if kind.is_dir() {
            add_dir(&path, &rel, files)?;
        } else if kind.is_file() {
            let bytes = std::fs::read(&path).map_err(|e| Failure::io(&path, &e))?;
            files.insert(rel, bytes);
        }
    }
    Ok(())
}

/// The lock, checked like `envbuild lock --locked` (or rewritten with `--update-lock`).
/// `Ok(None)`: the spec or lock has problems, already printed.
fn current_lock(
    table: &crate::core::compat::Table,
    args: &ImageArgs,
) -> Result<Option<crate::core::lock::Lock>, Failure> {
    use crate::core::diag::Diagnostic;
    let loaded = match crate::app::load_spec(&args.spec, table) {
        Ok(l) => l,
        Err(diags) => {
            super::eprint_diagnostics(&diags);
            return Ok(None);
        }
    };
    let res = crate::app::resolve_loaded(&loaded, table);
    let mut diags = res.diagnostics;
    let Some(lock) = res.lock.filter(|_| !diags.iter().any(Diagnostic::is_error)) else {
        super::eprint_diagnostics(&diags);
        return Ok(None);
    };
    let text = lock
        .to_toml()
        .map_err(|e| Failure::bug(format!("cannot serialise the lock: {e}")))?;
    let path = crate::app::lock_path(&args.spec, None);
    if args.update_lock {
        crate::infra::fs::write_atomic(&path, text.as_bytes())?;
        super::eprint_diagnostics(&diags);
        return Ok(Some(lock));
    }
    let problem = crate::app::lock::stale_lock(
        &path,
        &text,
        "run `envbuild lock SPEC` and commit the lock, or pass --update-lock",
    )?;
    match problem {
        Some(d) => {
            diags.push(d);
            super::eprint_diagnostics(&diags);
            Ok(None)
        }
        None => {
            super::eprint_diagnostics(&diags);
            Ok(Some(lock))
        }
    }
}

/// Build and smoke-test already-rendered files, print the verdicts and return the exit code.
pub fn run_rendered(rendered: RenderedImage, opts: ImageOptions) -> Result<i32, Failure> {
    let rt = docker::runtime()?;
    rt.block_on(async move {
        let interrupt = drun::install_interrupt()?;
        let engine = tokio::select! {
            e = docker::connect() => e?,
            _ = interrupt.clone() => return Err(drun::interrupted("connecting to the engine")),
        };
        let result = match build_and_test(&engine, &rendered, &opts, interrupt).await {
            Ok(r) => r,
            Err(f) => {
                // CI still gets its report files when the build itself failed.
                let name = format!("{} ({})", rendered.image_name, opts.variants.join(", "));
                report_failure(&name, &f, opts.json, opts.junit.as_deref())?;
                return Err(f);
            }
        };
        let mut extra = serde_json::Map::new();
        extra.insert(
            "builds".into(),
            result
                .builds
                .iter()
                .map(|(variant, b)| {
                    serde_json::json!({
                        "variant": variant,
                        "image_id": b.image_id,
                        "tags": b.tags,
                        "skipped": b.skipped,
                        "steps": b.steps,
                        "cached_steps": b.cached_steps,
                        "context_bytes": b.context_bytes,
                        "context_sha256": b.context_sha256,
                        "build_s": b.elapsed.as_secs_f64(),
                    })
                })
                .collect::<Vec<_>>()
                .into(),
        );
        extra.insert("lock_sha256".into(), rendered.lock_hash.clone().into());
        report(result.smokes, opts.json, opts.junit.as_deref(), extra)
    })
}

/// `--json`/`--junit` output for a run that ended before any verdict (e.g. a failed build).
fn report_failure(
    name: &str,
    f: &Failure,
    json: bool,
    junit: Option<&Path>,
) -> Result<(), Failure> {
    if let Some(path) = junit {
        let xml = crate::core::report::junit_xml(&[super::smoke_run::error_suite(name, f)])?;
        crate::infra::fs::write_atomic(path, xml.as_bytes())?;
    }
    if json {
        super::print_json(&serde_json::json!({
            "verdict": "error",
            "error": f.diagnostics,
        }))?;
    }
    Ok(())
}

/// What [`build_and_test`] did.
pub struct ImageRun {
    /// (variant, build outcome) in build order.
    pub builds: Vec<(String, BuildOutcome)>,
    pub smokes: Vec<SmokeResult>,
}

fn build_request(rendered: &RenderedImage, opts: &ImageOptions, variant: &str) -> BuildRequest {
    // The rendered Dockerfile sets the OCI labels itself; envbuild's own are added by `build`
    // only where a Dockerfile lacks them.
    let extra_labels = BTreeMap::new();
    // One `--tag` cannot name two images: the dev variant gets it with a `-dev` suffix.
    let extra_tags = opts
        .tags
        .iter()
        .map(|t| {
            if opts.variants.len() > 1 && variant != opts.variants[0] {
                format!("{t}-{variant}")
            } else {
                t.clone()
            }
        })
        .collect();
    BuildRequest {
        files: rendered.files.clone(),
        dockerfile: rendered.dockerfile.clone(),
        target: variant.to_string(),
        image_name: rendered.image_name.clone(),
        variant: variant.to_string(),
        lock_hash: rendered.lock_hash.clone(),
        summary: rendered.lock_summary.clone(),
        extra_tags,
        extra_labels,
        rebuild: opts.rebuild,
    }
}

/// Build every requested variant, then smoke-test each image (reusing a passing verdict for an
/// unchanged image on the same engine unless `retest`). Build errors stop at once.
pub async fn build_and_test(
    engine: &Engine,
    rendered: &RenderedImage,
    opts: &ImageOptions,
    interrupt: Interrupt,
) -> Result<ImageRun, Failure> {
    let expectations: Option<Expectations> = match rendered.files.get(RENDERED_EXPECT) {
        Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|e| {
            Failure::bug(format!(
                "the rendered `{RENDERED_EXPECT}` is not valid: {e}"
            ))
        })?),
        None => None,
    };
    let mut builds = Vec::new();
    for variant in &opts.variants {
        let req = build_request(rendered, opts, variant);
        let mut progress = Progress::new(opts.progress, variant);
        let outcome = {
            let mut on_event = |e: BuildEvent| progress.event(e);
            tokio::select! {
                r = build(engine, &req, &mut on_event) => r,
                // Dropping the build closes the connection; the engine then stops the build and
                // (forcerm) removes its intermediate containers.
                _ = interrupt.clone() => Err(drun::interrupted(&format!("the `{variant}` build"))),
            }
        };
        progress.finish(outcome.as_ref().ok());
        builds.push((variant.clone(), outcome?));
    }

    let mut smokes = Vec::new();
    for (variant, b) in &builds {
        let tag = b.tags[0].clone();
        let key = verdict_key(engine, &b.image_id, &opts.smoke, expectations.as_ref());
        if b.skipped && !opts.retest {
            if let Some((report, exit_code)) = opts
                .cache_dir
                .as_deref()
                .and_then(|d| load_verdict(d, &key))
            {
                progress_note(opts.progress, variant, "smoke test passed before on this engine: verdict reused (--retest runs it again)");
                smokes.push(SmokeResult {
                    name: tag,
                    outcome: Ok(SmokeOutcome {
                        report,
                        exit_code,
                        stderr_tail: String::new(),
                        elapsed: Duration::ZERO,
                    }),
                    reused: true,
                });
                continue;
            }
        }
        progress_note(
            opts.progress,
            variant,
            &format!(
                "smoke test ({}) in a container from {tag}",
                opts.smoke.mode().as_str()
            ),
        );
        let outcome = smoke(
            engine,
            &b.image_id,
            expectations.clone(),
            &opts.smoke,
            interrupt.clone(),
        )
        .await;
        if let (Ok(o), Some(dir)) = (&outcome, opts.cache_dir.as_deref()) {
            if o.report.passed(o.exit_code) {
                // A cache that cannot be written only costs a rerun next time.
                let _ = store_verdict(dir, &key, &o.report, o.exit_code);
            }
        }
        // An interruption ends the whole command at once.
        if let Err(f) = &outcome {
            if f.diagnostics
                .iter()
                .any(|d| d.code == docker::codes::INTERRUPTED)
            {
                return Err(f.clone());
            }
        }
        smokes.push(SmokeResult {
            name: tag,
            outcome,
            reused: false,
        });
    }
    Ok(ImageRun { builds, smokes })
}

/// A passing verdict is valid for one image (ids are content hashes) on one engine, with the
/// same script, mode and expectations.
fn verdict_key(
    engine: &Engine,
    image_id: &str,
    settings: &SmokeSettings,
    expectations: Option<&Expectations>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        engine.host.as_str(),
        image_id,
        settings.mode().as_str(),
        crate::core::smoke::SCRIPT,
        &serde_json::to_string(&expectations).unwrap_or_default(),
        &settings.shm_bytes.to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    docker::hex(&h.finalize())
}

fn verdict_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("smoke-verdicts").join(format!("{key}.json"))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredVerdict {
    exit_code: i64,
    report: SmokeReport,
}

fn load_verdict(dir: &Path, key: &str) -> Option<(SmokeReport, i64)> {
    let text = std::fs::read_to_string(verdict_path(dir, key)).ok()?;
    let v: StoredVerdict = serde_json::from_str(&text).ok()?;
    v.report
        .passed(v.exit_code)
        .then_some((v.report, v.exit_code))
}

fn store_verdict(
    dir: &Path,
    key: &str,
    report: &SmokeReport,
    exit_code: i64,
) -> Result<(), Failure> {
    let path = verdict_path(dir, key);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Failure::io(parent, &e))?;
    }
    let json = serde_json::to_vec(&StoredVerdict {
        exit_code,
        report: report.clone(),
    })
    .map_err(|e| Failure::bug(format!("cannot store the verdict: {e}")))?;
    crate::infra::fs::write_atomic(&path, &json)
}

fn progress_note(mode: ProgressMode, variant: &str, msg: &str) {
    if mode != ProgressMode::Quiet {
        eprintln!("[{variant}] {msg}");
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
            BuildEvent::Output(line) => {
                if self.mode == ProgressMode::Verbose {
                    let text = format!("[{v}]   {line}");
                    self.line(&text);
                }
            }
        }
    }

    fn line(&mut self, text: &str) {
        match (&self.bar, self.mode) {
            (_, ProgressMode::Quiet) => {}
            (Some(bar), _) => bar.println(text),
            // A closed stderr must not stop the build.
            (None, _) => {
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
    fn image_names_match_the_run_snippets() {
        assert_eq!(image_name("Torch GPU env"), "envbuild/torch-gpu-env");
        assert!(crate::infra::docker::build::valid_tag(&format!(
            "{}:runtime-0123456789ab",
            image_name("!!!")
        )));
    }

    #[test]
    fn verbose_progress_adds_the_build_log() {
        assert!(feed(ProgressMode::Verbose).contains("[runtime]   compiling\n"));
        assert_eq!(feed(ProgressMode::Quiet), "");
    }
}
