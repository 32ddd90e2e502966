//! `envbuild test IMAGE`: run the embedded smoke test against an image the engine already has,
//! without building, optionally against a lock's (or an expectations file's) expectations.
//! Performs I/O: files, the engine, stdout/stderr.

use super::smoke_run::{report, smoke, SmokeResult, SmokeSettings};
use crate::cli::{GpusArg, TestArgs};
use crate::diag::{Diagnostic, Failure};
use crate::docker::{self, codes, images, labels, run};
use crate::smoke::Expectations;
use std::path::Path;
use std::time::Duration;

/// Diagnostic code for an unreadable `--expect` file.
pub const INVALID_EXPECT: crate::diag::Code = "INVALID_EXPECT";

/// THE seam for the lock: map a lock file to the smoke test's expectations.
/// Until the lock module lands this refuses with a usage error; the core wires
/// `crate::lock` → [`Expectations`] here (the same mapping the renderer uses for
/// `envbuild/expect.json`).
pub fn expectations_from_lock_file(path: &Path) -> Result<Expectations, Failure> {
    Err(Failure::usage(
        format!(
            "`--lock {}` is not supported by this build yet",
            path.display()
        ),
        Some("pass the expectations as JSON with `--expect FILE`".into()),
    ))
}

/// Read an `--expect FILE` (the `expect.json` format the smoke script reads).
pub fn read_expect_file(path: &Path) -> Result<Expectations, Failure> {
    let text = crate::fsutil::read_text(path)?;
    serde_json::from_str(&text).map_err(|e| {
        Failure::one(
            Diagnostic::error(
                INVALID_EXPECT,
                format!("`{}` is not a valid expectations file: {e}", path.display()),
            )
            .with_hint(
                "it is the JSON of envbuild/expect.json: torch, cuda, cudnn, nccl, arch_list, \
                 python, packages, min_shm_bytes (all optional)",
            ),
        )
    })
}

pub fn run(args: TestArgs) -> Result<i32, Failure> {
    let expectations = match (&args.lock, &args.expect) {
        (Some(lock), _) => Some(expectations_from_lock_file(lock)?),
        (None, Some(path)) => Some(read_expect_file(path)?),
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
        let engine = tokio::select! {
            e = docker::connect() => e?,
            _ = interrupt.clone() => return Err(run::interrupted("connecting to the engine")),
        };
        let info = images::inspect(&engine, &args.image)
            .await?
            .ok_or_else(|| {
                Failure::one(
                Diagnostic::error(
                    codes::IMAGE_NOT_FOUND,
                    format!(
                        "image `{}` is not present on the engine at `{}`",
                        args.image, engine.host
                    ),
                )
                .with_hint(
                    "build it with `envbuild image SPEC`, or load it (`docker load -i image.tar`)",
                ),
            )
            })?;
        // An envbuild image carries its lock's expectations; any other image is only reported
        // on unless expectations are given.
        let expectations = match expectations {
            Some(e) => Some(e),
            None if info.labels.contains_key(labels::LOCK_SHA256) => None,
            None => Some(Expectations::default()),
        };
        let outcome = smoke(&engine, &args.image, expectations, &settings, interrupt).await;
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
