//! `envbuild test IMAGE`: the arguments to `app::test` (the embedded smoke test in a container
//! from an image the engine already has, without building), its verdict to stdout and the JUnit
//! file, and the exit code. Performs I/O: stdout/stderr and the JUnit file.

use super::verdicts::report;
use crate::app::test::{SmokeSettings, TestRequest};
use crate::cli::{GpusArg, TestArgs};
use crate::core::diag::Failure;
use std::time::Duration;

/// `envbuild test IMAGE`. A lock is only read, never resolved; the table is what the image's
/// torch is compared with (`TABLE_MISMATCH`).
pub fn run(
    o: &super::Output,
    table: &crate::core::compat::Table,
    args: TestArgs,
) -> Result<i32, Failure> {
    if args.show_verdict {
        return show_verdict(o, &args.image, args.json);
    }
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
        o,
        "test",
        vec![result],
        args.json,
        args.junit.as_deref(),
        serde_json::Map::new(),
        lock.as_ref().map(|l| (table, l)),
    )
}

/// `test IMAGE --show-verdict`: the verdict stored beside IMAGE in its registry, as text or
/// JSON; exit 1 (`VERDICT_MISSING`) when it is for another digest than the tag names now.
fn show_verdict(o: &super::Output, image: &str, json: bool) -> Result<i32, Failure> {
    let shown = crate::app::publish::show_verdict(image)?;
    let v = &shown.verdict;
    if json {
        o.print_json(&serde_json::json!({
            "image": image,
            "digest": shown.current_digest,
            "holds": shown.current(),
            "verdict": v,
        }))?;
    } else {
        let checks = v.report.checks.len();
        let text = format!(
            "{image}\n  digest:   {}\n  verdict:  {} in {} mode ({checks} checks), exit {}\n  \
             tested:   {} with envbuild {}\n  engine:   {} (docker {}, {})\n  GPUs:     {}\n",
            v.image_digest,
            if v.passed { "PASS" } else { "FAIL" },
            v.mode,
            v.exit_code,
            v.tested_at,
            v.envbuild_version,
            v.engine.id,
            v.engine.version,
            v.engine.host,
            v.gpus
        );
        o.out(&text)?;
    }
    if shown.current() {
        eprintln!(
            "the verdict holds for {} (the digest {image} names now), in {} mode{}",
            shown.current_digest,
            v.mode,
            if v.mode == "gpu" {
                "; a cpu (--gpus none) run may rely on it too"
            } else {
                ""
            }
        );
        Ok(0)
    } else {
        Err(Failure::one(
            crate::core::diag::Diagnostic::error(
                crate::infra::docker::codes::VERDICT_MISSING,
                format!(
                    "the verdict beside `{image}` is for {}, but the tag now names {}",
                    v.image_digest, shown.current_digest
                ),
            )
            .with_hint("the tag was pushed again without a verdict: test it (`envbuild image SPEC --push REPO --retest`)"),
        ))
    }
}
