//! `envbuild test IMAGE`: the arguments to `app::test` (the embedded smoke test in a container
//! from an image the engine already has, without building), its verdict to stdout and the JUnit
//! file, and the exit code. Performs I/O: stdout/stderr and the JUnit file.

use super::smoke_run::report;
use crate::app::test::{SmokeSettings, TestRequest};
use crate::cli::{GpusArg, TestArgs};
use crate::core::diag::Failure;
use std::time::Duration;

/// `envbuild test IMAGE`. A lock is only read, never resolved; the table is what the image's
/// torch is compared with (`TABLE_MISMATCH`).
pub fn run(table: &crate::core::compat::Table, args: TestArgs) -> Result<i32, Failure> {
    let req = TestRequest {
        image: &args.image,
        lock: args.lock.as_deref(),
        expect: args.expect_file.as_deref(),
        settings: SmokeSettings {
            gpus: args.gpus == GpusArg::All,
            timeout: Duration::from_secs(args.timeout),
            shm_bytes: args.shm_size,
            run_id: crate::infra::docker::new_run_id(),
        },
    };
    // Every failure from reaching the engine on is in the result, so that `--json` and
    // `--junit` are written for it too.
    let result = crate::app::test::test(&req)?;
    // The test has read this lock already; were it gone since, only the table check is lost.
    let lock = args
        .lock
        .as_deref()
        .and_then(|p| crate::app::read_lock(p).ok());
    report(
        vec![result],
        args.json,
        args.junit.as_deref(),
        serde_json::Map::new(),
        lock.as_ref().map(|l| (table, l)),
    )
}
