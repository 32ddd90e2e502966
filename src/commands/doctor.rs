//! `envbuild doctor`: probe the host and judge it, alone or against a build's expectations.
//! Performs I/O (host probes, printing).

use crate::cli::DoctorArgs;
use crate::core::compat::Table;
use crate::core::diag::Failure;
use crate::core::doctor::{self, ContainerGpu, DoctorExpect};
use crate::infra::host::{self, ProbeConfig};
use std::io::Write;

pub fn run(table: &Table, args: &DoctorArgs) -> Result<i32, Failure> {
    let lock = args
        .lock
        .as_deref()
        .map(crate::app::read_lock)
        .transpose()?;
    let lock_tags = match &lock {
        Some(l) => lock_image_tags(l)?,
        None => Vec::new(),
    };
    let expect = match (&lock, &args.expect_file) {
        (Some(lock), _) => Some(DoctorExpect::from_lock(lock)),
        (None, Some(path)) => Some(DoctorExpect::from_expectations(
            &crate::app::read_expectations(path)?,
            table,
        )),
        (None, None) => None,
    };
    let facts = host::probe(&ProbeConfig::from_env(), table)?;
    let report = doctor::evaluate(
        &facts,
        expect.as_ref(),
        Some(container_gpu(args, &lock_tags)),
    );
    let text = if args.json {
        serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::bug(format!("cannot print the report: {e}")))?
            + "\n"
    } else {
        doctor::render(&report, super::stdout_color())
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(report.exit_code())
}

/// The tags `envbuild image` gives the lock's images (runtime first), as the run snippets name
/// them: the GPU probe starts the lock's own image when the engine has one.
fn lock_image_tags(lock: &crate::core::lock::Lock) -> Result<Vec<String>, Failure> {
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
fn container_gpu(args: &DoctorArgs, lock_tags: &[String]) -> ContainerGpu {
    let skipped = |detail: String| ContainerGpu {
        nvidia_runtime: None,
        cdi: None,
        verified: None,
        detail,
    };
    if std::env::var("ENVBUILD_DOCKER_CHECK").is_ok_and(|v| v == "0") {
        return skipped("skipped (ENVBUILD_DOCKER_CHECK=0)".into());
    }
    let rt = match crate::infra::docker::runtime() {
        Ok(rt) => rt,
        Err(f) => return skipped(format!("not checked: {f}")),
    };
    rt.block_on(async {
        match crate::infra::docker::connect().await {
            Ok(engine) => {
                crate::infra::docker::gpu_probe::container_gpu(
                    &engine,
                    args.image.as_deref(),
                    lock_tags,
                )
                .await
            }
            Err(f) => skipped(format!(
                "not checked: {}",
                f.diagnostics
                    .first()
                    .map(|d| d.message.clone())
                    .unwrap_or_default()
            )),
        }
    })
}
