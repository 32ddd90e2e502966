//! `envbuild test IMAGE`: run the embedded smoke test against an image the engine already has,
//! without building, optionally against a lock's (or an expectations file's) expectations.
//! Performs I/O: files, the engine, stdout/stderr.

use super::smoke_run::{report, smoke, SmokeResult, SmokeSettings};
use crate::cli::{GpusArg, TestArgs};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::smoke::Expectations;
use crate::infra::docker::{self, codes, images, labels, run};
use std::time::Duration;

/// `envbuild test IMAGE`. The table is not needed: a lock is only read, never resolved.
pub fn run(_table: &crate::core::compat::Table, args: TestArgs) -> Result<i32, Failure> {
    let expectations = match (&args.lock, &args.expect_file) {
        (Some(lock), _) => Some(crate::core::expect::expectations_from_lock(
            &crate::app::read_lock(lock)?,
        )),
        (None, Some(path)) => Some(crate::app::read_expectations(path)?),
        (None, None) => None,
    };
    let settings = SmokeSettings {
        gpus: args.gpus == GpusArg::All,
        timeout: Duration::from_secs(args.timeout),
        shm_bytes: args.shm_size,
        run_id: docker::new_run_id(),
    };
    let rt = docker::runtime()?;
    rt.block_on(async move {
        let interrupt = run::install_interrupt()?;
        // Every failure, before the smoke test or in it, goes through `report` so that
        // `--json` and `--junit` are written for it too.
        let outcome = async {
            let engine = tokio::select! {
                e = docker::connect() => e?,
                _ = interrupt.clone() => return Err(run::interrupted("connecting to the engine")),
            };
            let info = images::inspect(&engine, &args.image)
                .await?
                .ok_or_else(|| image_not_found(&args.image, &engine.host))?;
            // An envbuild image carries its lock's expectations; any other image is only
            // reported on unless expectations are given.
            let expectations = match expectations {
                Some(e) => Some(e),
                None if info.labels.contains_key(labels::LOCK_SHA256) => None,
                None => Some(Expectations::default()),
            };
            smoke(
                &engine,
                &args.image,
                expectations,
                &settings,
                interrupt.clone(),
            )
            .await
        }
        .await;
        report(
            vec![SmokeResult {
                name: args.image.clone(),
                outcome,
                reused: false,
            }],
            args.json,
            args.junit.as_deref(),
            serde_json::Map::new(),
        )
    })
}

fn image_not_found(image: &str, host: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            codes::IMAGE_NOT_FOUND,
            format!("image `{image}` is not present on the engine at `{host}`"),
        )
        .with_hint("build it with `envbuild image SPEC`, or load it (`docker load -i image.tar`)"),
    )
}
