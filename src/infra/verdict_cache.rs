//! The cache of passing smoke verdicts: a verdict is remembered for one image id on one engine,
//! with the same script, mode, expectations and shared-memory size, so that `envbuild image`
//! on an unchanged lock need not run the smoke test again. Performs file I/O (and reads the
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
    /// Where the engine was found (`Engine::host`).
    pub engine_host: &'a str,
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
            self.engine_host,
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
    let text = std::fs::read_to_string(path(dir, key)).ok()?;
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

    fn key(image_id: &str, mode: &str) -> String {
        VerdictKey {
            engine_host: "unix:///var/run/docker.sock",
            image_id,
            mode,
            expectations: None,
            shm_bytes: 1 << 30,
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
