//! The cache of passing smoke verdicts: a verdict is remembered for one image id on one engine
//! (by the engine's own id), on one driver with the same GPUs (by UUID, in `gpu` mode), with
//! the same script, mode, expectations and shared-memory size, so that `envbuild image` on an
//! unchanged lock need not run the smoke test again, and a new driver, another board or
//! another engine behind the same socket does run it. Performs file I/O (and reads the
//! environment for the default directory).
//!
//! Only the caller decides what is worth storing (passing verdicts); a cache that cannot be
//! read is simply empty.

use crate::core::diag::Failure;
use crate::core::smoke::{Expectations, SmokeReport};
use std::path::{Path, PathBuf};

/// `ENVBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/envbuild`, else `~/.cache/envbuild`.
pub fn default_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    env("ENVBUILD_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("envbuild")))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache").join("envbuild")))
}

/// What a verdict depends on. Image ids are content hashes, so the same id is the same image.
#[derive(Debug, Clone, Copy)]
pub struct VerdictKey<'a> {
    /// The engine's own id (`docker info`'s `ID`), not the socket it was reached through.
    pub engine_id: &'a str,
    /// The driver and GPUs the container gets (`GpuIdentity::key`: `driver=...;gpus=GPU-...`,
    /// or `no-gpu`); in `cpu` mode, where no GPU is requested, a fixed word.
    pub gpus: &'a str,
    pub image_id: &'a str,
    /// `gpu` or `cpu`.
    pub mode: &'a str,
    pub expectations: Option<&'a Expectations>,
    pub shm_bytes: u64,
}

impl VerdictKey<'_> {
    /// The key as 64 hex digits (the embedded smoke script is part of it).
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.engine_id,
            self.gpus,
            self.image_id,
            self.mode,
            crate::core::smoke::SCRIPT,
            &serde_json::to_string(&self.expectations).unwrap_or_default(),
            &self.shm_bytes.to_string(),
        ] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        crate::core::hash::hex(&h.finalize())
    }
}

/// A remembered verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredVerdict {
    pub exit_code: i64,
    pub report: SmokeReport,
}

fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join("smoke-verdicts").join(format!("{key}.json"))
}

/// The verdict stored under `key` (a [`VerdictKey::digest`]), if one can be read.
pub fn load(dir: &Path, key: &str) -> Option<StoredVerdict> {
    // The cache folder is named by the environment: a FIFO or device there is not waited on.
    let text = crate::infra::fs::read_bounded_text(&path(dir, key), 1 << 20).ok()?;
    serde_json::from_str(&text).ok()
}

/// Store a verdict under `key`, atomically.
pub fn store(dir: &Path, key: &str, verdict: &StoredVerdict) -> Result<(), Failure> {
    let path = path(dir, key);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Failure::io(parent, &e))?;
    }
    let json = serde_json::to_vec(verdict)
        .map_err(|e| Failure::bug(format!("cannot store the verdict: {e}")))?;
    crate::infra::fs::write_atomic(&path, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENGINE: &str = "QEVX:2T32:4M2R:VHI2:PZYP:A2IQ:LSK5:PCTV:K7GM:BD7I:NKRQ:IKLE";
    const GPUS: &str = "driver=550.54.15;gpus=GPU-5e7c1a2b-0000-1111-2222-333344445555";

    fn base() -> VerdictKey<'static> {
        VerdictKey {
            engine_id: ENGINE,
            gpus: GPUS,
            image_id: "sha256:a",
            mode: "gpu",
            expectations: None,
            shm_bytes: 1 << 30,
        }
    }

    fn key(image_id: &str, mode: &str) -> String {
        VerdictKey {
            image_id,
            mode,
            ..base()
        }
        .digest()
    }

    #[test]
    fn keys_differ_by_image_and_mode() {
        assert_eq!(key("sha256:a", "cpu"), key("sha256:a", "cpu"));
        assert_ne!(key("sha256:a", "cpu"), key("sha256:b", "cpu"));
        assert_ne!(key("sha256:a", "cpu"), key("sha256:a", "gpu"));
        assert_eq!(key("sha256:a", "cpu").len(), 64);
    }

    /// A verdict holds for one engine, driver and set of GPUs: change any one and it is not
    /// reused; only a key equal in every part is.
    #[test]
    fn keys_differ_by_engine_driver_gpus_and_expectations() {
        let same = base().digest();
        assert_eq!(base().digest(), same);
        let other_engine = VerdictKey {
            engine_id: "7B2F:0000:4M2R:VHI2:PZYP:A2IQ:LSK5:PCTV:K7GM:BD7I:NKRQ:IKLE",
            ..base()
        };
        let new_driver = VerdictKey {
            gpus: "driver=570.133.20;gpus=GPU-5e7c1a2b-0000-1111-2222-333344445555",
            ..base()
        };
        let other_board = VerdictKey {
            gpus: "driver=550.54.15;gpus=GPU-9f00aa11-0000-1111-2222-333344445555",
            ..base()
        };
        let no_gpu = VerdictKey {
            gpus: "no-gpu",
            ..base()
        };
        let exp = Expectations {
            cudnn: Some("9.1.0.70".into()),
            ..Default::default()
        };
        let expecting = VerdictKey {
            expectations: Some(&exp),
            ..base()
        };
        let shm = VerdictKey {
            shm_bytes: 2 << 30,
            ..base()
        };
        let keys: Vec<String> = [
            other_engine,
            new_driver,
            other_board,
            no_gpu,
            expecting,
            shm,
        ]
        .iter()
        .map(VerdictKey::digest)
        .collect();
        for (i, k) in keys.iter().enumerate() {
            assert_ne!(k, &same, "variant {i}");
            assert!(keys[i + 1..].iter().all(|o| o != k), "variant {i} collides");
        }
        // Parts are separated: moving text between two parts is another key.
        let shifted = VerdictKey {
            engine_id:
                "QEVX:2T32:4M2R:VHI2:PZYP:A2IQ:LSK5:PCTV:K7GM:BD7I:NKRQ:IKLEdriver=550.54.15;",
            gpus: "gpus=GPU-5e7c1a2b-0000-1111-2222-333344445555",
            ..base()
        };
        assert_ne!(shifted.digest(), same);
    }

    #[test]
    fn stored_verdicts_load_back_and_unreadable_ones_are_absent() {
        let dir = tempfile::tempdir().unwrap();
        let k = key("sha256:a", "cpu");
        assert_eq!(load(dir.path(), &k), None);
        let report: SmokeReport = serde_json::from_value(serde_json::json!({
            "schema": 1, "status": "pass", "mode": "cpu", "duration_s": 0.1,
            "environment": {}, "checks": []
        }))
        .unwrap();
        let v = StoredVerdict {
            exit_code: 0,
            report,
        };
        store(dir.path(), &k, &v).unwrap();
        assert_eq!(load(dir.path(), &k), Some(v));
        std::fs::write(path(dir.path(), &k), "not json").unwrap();
        assert_eq!(load(dir.path(), &k), None);
    }
}
