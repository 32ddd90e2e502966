//! `doctor`: probe the host (driver, CUDA, GPUs) and the engine (can a container get a GPU?)
//! and judge them, alone or against a lock's or an expectations file's build. Reads files,
//! probes the host, talks to the engine; prints nothing.

use crate::core::compat::Table;
use crate::core::diag::Failure;
use crate::core::doctor::{self, ContainerGpu, DoctorExpect, DoctorReport};
use crate::core::lock::Lock;
use crate::infra::docker::{self, run};
use crate::infra::host::{self, ProbeConfig};
use std::path::Path;

/// What `doctor` was asked for.
#[derive(Debug, Clone, Default)]
pub struct DoctorRequest<'a> {
    /// Judge against this lock's build (wins over `expect_file`).
    pub lock: Option<&'a Path>,
    pub expect_file: Option<&'a Path>,
    /// Start this image for the container GPU probe.
    pub image: Option<&'a str>,
}

/// Probe and judge.
pub fn doctor(table: &Table, req: &DoctorRequest<'_>) -> Result<DoctorReport, Failure> {
    let lock = req.lock.map(super::read_lock).transpose()?;
    let lock_tags = match &lock {
        Some(l) => lock_image_tags(l)?,
        None => Vec::new(),
    };
    let expect = match (&lock, req.expect_file) {
        (Some(lock), _) => Some(DoctorExpect::from_lock(lock)),
        (None, Some(path)) => Some(DoctorExpect::from_expectations(
            &super::read_expectations(path)?,
            table,
        )),
        (None, None) => None,
    };
    let facts = host::probe(&ProbeConfig::from_env(), table)?;
    Ok(doctor::evaluate(
        &facts,
        expect.as_ref(),
        Some(container_gpu(req.image, &lock_tags)?),
    ))
}

/// The tags `envbuild image` gives the lock's images (runtime first), as the run snippets name
/// them: the GPU probe starts the lock's own image when the engine has one.
fn lock_image_tags(lock: &Lock) -> Result<Vec<String>, Failure> {
    let hash = lock
        .hash()
        .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
    Ok(lock
        .image
        .variants
        .iter()
        .map(|v| crate::core::render::image_tag(lock, &hash, v.as_str()))
        .collect())
}

/// The engine's side: can containers get a GPU? `ENVBUILD_DOCKER_CHECK=0` skips it (hosts that
/// never run containers, and tests that must not depend on the engine's state).
fn container_gpu(image: Option<&str>, lock_tags: &[String]) -> Result<ContainerGpu, Failure> {
    let skipped = |detail: String| ContainerGpu {
        nvidia_runtime: None,
        cdi: None,
        verified: None,
        cause: None,
        detail,
    };
    if std::env::var("ENVBUILD_DOCKER_CHECK").is_ok_and(|v| v == "0") {
        return Ok(skipped("skipped (ENVBUILD_DOCKER_CHECK=0)".into()));
    }
    let rt = match docker::runtime() {
        Ok(rt) => rt,
        Err(f) => return Ok(skipped(format!("not checked: {f}"))),
    };
    rt.block_on(async {
        // The probe starts a container: a signal must remove it like a smoke container.
        let interrupt = run::install_interrupt()?;
        let engine = tokio::select! {
            e = docker::connect() => e,
            _ = interrupt.clone() => return Err(run::interrupted("connecting to the engine")),
        };
        let engine = match engine {
            Ok(engine) => engine,
            Err(f) => {
                return Ok(skipped(format!(
                    "not checked: {}",
                    f.diagnostics
                        .first()
                        .map(|d| d.message.clone())
                        .unwrap_or_default()
                )))
            }
        };
        let run_id = docker::new_run_id();
        tokio::select! {
            probed = docker::gpu_probe::container_gpu(&engine, image, lock_tags, &run_id) => Ok(probed),
            _ = interrupt => {
                let cleanup = run::cleanup_run(&engine, &run_id, true).await;
                let mut f = run::interrupted("the GPU probe");
                if let Err(c) = cleanup {
                    f.diagnostics[0].hint = None;
                    f.diagnostics.extend(c.diagnostics);
                }
                Err(f)
            }
        }
    })
}
