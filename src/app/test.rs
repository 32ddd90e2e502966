//! `test`: run the embedded smoke test in a container from an image the engine has, against a
//! lock's (or an expectations file's) expectations, or else the image's own
//! (`/opt/envbuild/expect.json`, read before the run so that its shared-memory need is met);
//! also the smoke run that `image` shares (settings, one image's result). Performs I/O (files,
//! the engine); prints nothing.

use crate::core::diag::Failure;
use crate::core::smoke::{Expectations, Mode, IMAGE_EXPECT_PATH};
use crate::infra::docker::errors::image_not_found;
use crate::infra::docker::run::{run_smoke, ContainerSmokeRequest, Interrupt, SmokeOutcome};
use crate::infra::docker::{self, images, run, Engine};
use std::path::Path;
use std::time::Duration;

/// How the smoke container runs.
#[derive(Debug, Clone)]
pub struct SmokeSettings {
    pub gpus: bool,
    pub timeout: Duration,
    pub shm_bytes: u64,
    pub run_id: String,
}

impl SmokeSettings {
    pub fn mode(&self) -> Mode {
        Mode::from_gpus(self.gpus)
    }
}

/// One image's smoke result, kept for the summary.
pub struct SmokeResult {
    /// The suite name: the image's tag.
    pub name: String,
    pub outcome: Result<SmokeOutcome, Failure>,
    /// The verdict was reused from an earlier run on the same image and engine.
    pub reused: bool,
}

impl SmokeResult {
    /// `SmokeReport::passed` for a run that may have ended without a report (which fails).
    pub fn passed(&self) -> bool {
        matches!(&self.outcome, Ok(o) if o.report.passed(o.exit_code))
    }
}

/// The expectations as the container gets them: with a GPU-check budget that ends before the
/// run's time limit (`Expectations::with_budget`), so a hung check is named in the report.
pub fn sent_expectations(
    expectations: Option<Expectations>,
    settings: &SmokeSettings,
) -> Option<Expectations> {
    expectations.map(|e| e.with_budget(settings.timeout))
}

/// Run the embedded script against `image`. `expectations: None` uses the image's own file.
pub async fn smoke(
    engine: &Engine,
    image: &str,
    expectations: Option<Expectations>,
    settings: &SmokeSettings,
    interrupt: Interrupt,
) -> Result<SmokeOutcome, Failure> {
    let expectations = sent_expectations(expectations, settings);
    let need = expectations
        .as_ref()
        .and_then(|e| e.min_shm_bytes)
        .unwrap_or(0);
    let shm = settings.shm_bytes.max(need).min(i64::MAX as u64) as i64;
    let req = ContainerSmokeRequest {
        image: image.to_string(),
        expectations,
        script: Some(crate::core::smoke::SCRIPT.as_bytes().to_vec()),
        mode: settings.mode(),
        gpus: settings.gpus,
        shm_bytes: shm,
        timeout: settings.timeout,
        run_id: settings.run_id.clone(),
    };
    run_smoke(engine, &req, interrupt).await
}

/// What `test` was asked for.
#[derive(Debug, Clone)]
pub struct TestRequest<'a> {
    pub image: &'a str,
    /// Take the expectations from this lock (wins over `expect`).
    pub lock: Option<&'a Path>,
    /// Take the expectations from this `expect.json`.
    pub expect: Option<&'a Path>,
    pub settings: SmokeSettings,
}

/// Read a lock file and map it to the smoke test's expectations.
fn expectations_from_lock_file(path: &Path) -> Result<Expectations, Failure> {
    let lock = super::read_lock(path)?;
    Ok(crate::core::expectations::expectations_from_lock(&lock))
}

/// What an image's own `/opt/envbuild/expect.json` asks for.
struct ImageExpectations {
    /// What to copy in: the image's expectations (the budget is added on the way), `{}` for an
    /// image without the file, or `None` to leave the image's file as it is (one this envbuild
    /// cannot read, e.g. written by a newer one; the script ignores keys it does not know).
    expectations: Option<Expectations>,
    /// Its `min_shm_bytes`, 0 without one: the container's `/dev/shm` is at least this.
    shm_bytes: u64,
}

/// Read the image's own expectations (envbuild images carry their lock's at
/// `IMAGE_EXPECT_PATH`), from a container that is created and never started.
async fn image_expectations(
    engine: &Engine,
    image: &str,
    run_id: &str,
) -> Result<ImageExpectations, Failure> {
    let Some(bytes) = run::read_image_file(engine, image, IMAGE_EXPECT_PATH, run_id).await? else {
        return Ok(ImageExpectations {
            expectations: Some(Expectations::default()),
            shm_bytes: 0,
        });
    };
    let text = String::from_utf8_lossy(&bytes);
    if let Ok(e) = Expectations::from_json(&text, IMAGE_EXPECT_PATH) {
        return Ok(ImageExpectations {
            shm_bytes: e.min_shm_bytes.unwrap_or(0),
            expectations: Some(e),
        });
    }
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    Ok(ImageExpectations {
        expectations: None,
        shm_bytes: raw["min_shm_bytes"].as_u64().unwrap_or(0),
    })
}

/// Smoke-test one image. `Err`: the run could not begin (an expectations file, the async
/// runtime, the signal handlers); anything after that, from reaching the engine to the verdict,
/// is the result's `outcome`, so that it is reported like a verdict.
pub fn test(req: &TestRequest<'_>) -> Result<SmokeResult, Failure> {
    let expectations = match (req.lock, req.expect) {
        (Some(lock), _) => Some(expectations_from_lock_file(lock)?),
        (None, Some(path)) => Some(super::read_expectations(path)?),
        (None, None) => None,
    };
    let rt = docker::runtime()?;
    rt.block_on(async move {
        let interrupt = run::install_interrupt()?;
        let outcome = async {
            let engine = tokio::select! {
                e = docker::connect() => e?,
                _ = interrupt.clone() => return Err(run::interrupted("connecting to the engine")),
            };
            let mut settings = req.settings.clone();
            let prepare = async {
                images::inspect(&engine, req.image)
                    .await?
                    .ok_or_else(|| image_not_found(req.image, &engine.host))?;
                match expectations {
                    Some(e) => Ok((Some(e), 0)),
                    None => image_expectations(&engine, req.image, &settings.run_id)
                        .await
                        .map(|own| (own.expectations, own.shm_bytes)),
                }
            };
            let (expectations, own_shm) = tokio::select! {
                r = prepare => r?,
                _ = interrupt.clone() => {
                    // Reading the expectations creates a container: it must not outlive us.
                    let cleanup = run::cleanup_run(&engine, &settings.run_id, true).await;
                    let mut f = run::interrupted("inspecting the image");
                    if let Err(c) = cleanup {
                        f.diagnostics[0].hint = None;
                        f.diagnostics.extend(c.diagnostics);
                    }
                    return Err(f);
                }
            };
            settings.shm_bytes = settings.shm_bytes.max(own_shm);
            smoke(
                &engine,
                req.image,
                expectations,
                &settings,
                interrupt.clone(),
            )
            .await
        }
        .await;
        Ok(SmokeResult {
            name: req.image.to_string(),
            outcome,
            reused: false,
        })
    })
}
