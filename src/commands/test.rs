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

/// Read a lock file and map it to the smoke test's expectations.
pub fn expectations_from_lock_file(path: &Path) -> Result<Expectations, Failure> {
    let lock = super::read_lock(path)?;
    Ok(expectations_from_lock(&lock))
}

/// THE lock → expectations mapping (the same the image's `envbuild/expect.json` should hold).
pub fn expectations_from_lock(lock: &crate::lock::Lock) -> Expectations {
    let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    let mut packages = std::collections::BTreeMap::new();
    for name in ["torchvision", "torchaudio", "numpy"] {
        if let Some(v) = lock.packages.get(name) {
            packages.insert(name.to_string(), v.clone());
        }
    }
    let mut arch_list = lock.arch_list.clone();
    arch_list.extend(lock.ptx.iter().cloned());
    Expectations {
        torch: lock.packages.get("torch").cloned(),
        cuda: (!lock.cuda.is_empty()).then(|| major_minor(&lock.cuda)),
        cudnn: lock.cudnn.clone(),
        nccl: lock.nccl.clone(),
        arch_list,
        python: lock.packages.get("python").cloned(),
        packages,
        min_shm_bytes: crate::cli::parse_size(&lock.image.shm_size).ok(),
    }
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

pub fn run(table: &crate::compat::Table, args: TestArgs) -> Result<i32, Failure> {
    let _ = table;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_maps_to_expectations() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/specs/torch-gpu-env/envbuild.lock"
        ))
        .unwrap();
        let lock = crate::lock::Lock::from_toml(&text).unwrap();
        let e = expectations_from_lock(&lock);
        assert_eq!(e.torch.as_deref(), Some("2.5.1"));
        assert_eq!(e.cuda.as_deref(), Some("11.8"));
        assert_eq!(e.cudnn.as_deref(), Some("9.1.0.70"));
        assert_eq!(e.python.as_deref(), Some("3.10"));
        assert!(e.arch_list.contains(&"sm_80".to_string()));
        assert_eq!(e.packages["torchvision"], "0.20.1");
        assert_eq!(e.min_shm_bytes, Some(16 << 30));
    }
}
