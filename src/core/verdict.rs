//! The smoke verdict that travels beside a pushed image (`VARIANT-<hash12>.verdict`, a one-file
//! image whose label holds the verdict document), whether such a verdict lets a run skip, and
//! the RFC 3339 time it records. Pushing and reading it back is `app::publish`'s. This module
//! performs no I/O.

use crate::core::smoke::{Mode, SmokeReport};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The suffix of the tag the verdict of `REPO:TAG` is pushed as (`REPO:TAG.verdict`).
pub const VERDICT_SUFFIX: &str = ".verdict";
/// The label of a verdict image holding the verdict document (base64 of its JSON).
pub const LABEL_VERDICT: &str = "dev.envbuild.verdict";
/// The label of a verdict image naming the image digest it holds for.
pub const LABEL_VERDICT_FOR: &str = "dev.envbuild.verdict-for";

/// The engine a verdict was reached on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictEngine {
    /// `docker info`'s ID.
    pub id: String,
    /// The engine's version (`docker version`'s server version).
    pub version: String,
    /// Where envbuild reached it (`unix:///var/run/docker.sock`, `tcp://...`).
    pub host: String,
}

/// A passing smoke verdict as it travels beside its image in a registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TravellingVerdict {
    /// 1.
    pub schema: u32,
    /// The image reference pushed (`REGISTRY/REPO:VARIANT-<hash12>`).
    pub image: String,
    /// The manifest digest the registry gave the image (`sha256:...`): the verdict holds for
    /// this digest only.
    pub image_digest: String,
    /// The engine's image id (the config digest).
    pub image_id: String,
    pub lock_sha256: String,
    pub variant: String,
    /// `gpu` or `cpu`: what the smoke test checked.
    pub mode: String,
    pub passed: bool,
    pub exit_code: i64,
    /// The driver and GPUs the container got (`driver=...;gpus=GPU-...`), or `no GPU requested`.
    pub gpus: String,
    pub engine: VerdictEngine,
    /// When the smoke test ended, UTC (`2026-12-01T05:00:00Z`).
    pub tested_at: String,
    pub envbuild_version: String,
    /// sha256 of the smoke script that ran.
    pub smoke_script_sha256: String,
    /// The smoke report itself: every check, and the environment it saw.
    pub report: SmokeReport,
}

/// Why a verdict from the registry does not let a run skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictMismatch {
    NotPassed,
    /// It holds for another image (the tag was pushed again since).
    OtherDigest {
        verdict: String,
        image: String,
    },
    /// It was reached without a GPU and the run asks for one.
    CpuOnly,
    OtherLock,
}

impl std::fmt::Display for VerdictMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerdictMismatch::NotPassed => f.write_str("the stored verdict is not a pass"),
            VerdictMismatch::OtherDigest { verdict, image } => write!(
                f,
                "the verdict holds for image {verdict}, the tag now names {image}"
            ),
            VerdictMismatch::CpuOnly => f.write_str(
                "the verdict was reached in cpu mode (no GPU) and this run asks for gpu",
            ),
            VerdictMismatch::OtherLock => {
                f.write_str("the verdict is for another lock (same 12-hex tag prefix)")
            }
        }
    }
}

impl TravellingVerdict {
    /// Whether this verdict lets a run in `mode` skip for the image whose registry digest is
    /// `digest`, built from the lock `lock_sha256`. A `gpu` verdict covers a `cpu` run (every
    /// cpu check is among the gpu ones); a `cpu` verdict never covers a `gpu` run.
    pub fn holds_for(
        &self,
        mode: Mode,
        digest: &str,
        lock_sha256: &str,
    ) -> Result<(), VerdictMismatch> {
        if !self.passed || !self.report.passed(self.exit_code) {
            return Err(VerdictMismatch::NotPassed);
        }
        if self.image_digest != digest {
            return Err(VerdictMismatch::OtherDigest {
                verdict: self.image_digest.clone(),
                image: digest.to_string(),
            });
        }
        if self.lock_sha256 != lock_sha256 {
            return Err(VerdictMismatch::OtherLock);
        }
        if mode == Mode::Gpu && self.mode != Mode::Gpu.as_str() {
            return Err(VerdictMismatch::CpuOnly);
        }
        Ok(())
    }

    /// The label value that carries it (base64 of its JSON: no quoting issue in a `LABEL`).
    pub fn to_label(&self) -> String {
        BASE64.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Read it back from [`LABEL_VERDICT`]'s value.
    pub fn from_label(value: &str) -> Result<TravellingVerdict, String> {
        let bytes = BASE64
            .decode(value.trim())
            .map_err(|_| "the verdict label is not base64")?;
        let v: TravellingVerdict = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the verdict label is not a verdict document: {e}"))?;
        if v.schema != 1 {
            return Err(format!("verdict schema {} is not supported", v.schema));
        }
        Ok(v)
    }
}

/// `seconds` since the Unix epoch as RFC 3339 UTC (`2026-12-01T05:00:00Z`). A time past
/// chrono's range (the year 262143) reads as its last second.
pub fn rfc3339(seconds: u64) -> String {
    let time = i64::try_from(seconds)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(mode: &str, status: &str) -> TravellingVerdict {
        let report: SmokeReport = serde_json::from_value(serde_json::json!({
            "schema": 1, "status": status, "mode": mode, "duration_s": 0.1,
            "environment": {}, "checks": []
        }))
        .unwrap();
        TravellingVerdict {
            schema: 1,
            image: "127.0.0.1:5000/e:runtime-0123456789ab".into(),
            image_digest: "sha256:aa".into(),
            image_id: "sha256:bb".into(),
            lock_sha256: "cc".into(),
            variant: "runtime".into(),
            mode: mode.into(),
            passed: status == "pass",
            exit_code: if status == "pass" { 0 } else { 1 },
            gpus: "no GPU requested".into(),
            engine: VerdictEngine {
                id: "E".into(),
                version: "20.10".into(),
                host: "unix:///var/run/docker.sock".into(),
            },
            tested_at: rfc3339(0),
            envbuild_version: "0.1.0".into(),
            smoke_script_sha256: "dd".into(),
            report,
        }
    }

    #[test]
    fn a_verdict_holds_for_its_digest_lock_and_a_mode_it_covers() {
        let gpu = verdict("gpu", "pass");
        assert_eq!(gpu.holds_for(Mode::Gpu, "sha256:aa", "cc"), Ok(()));
        assert_eq!(gpu.holds_for(Mode::Cpu, "sha256:aa", "cc"), Ok(()));
        assert!(matches!(
            gpu.holds_for(Mode::Gpu, "sha256:ab", "cc"),
            Err(VerdictMismatch::OtherDigest { .. })
        ));
        assert_eq!(
            gpu.holds_for(Mode::Gpu, "sha256:aa", "cd"),
            Err(VerdictMismatch::OtherLock)
        );
        let cpu = verdict("cpu", "pass");
        assert_eq!(cpu.holds_for(Mode::Cpu, "sha256:aa", "cc"), Ok(()));
        assert_eq!(
            cpu.holds_for(Mode::Gpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::CpuOnly)
        );
        let failed = verdict("cpu", "fail");
        assert_eq!(
            failed.holds_for(Mode::Cpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::NotPassed)
        );
        // A document claiming a pass whose report failed does not hold either.
        let lying = TravellingVerdict {
            passed: true,
            exit_code: 0,
            ..failed
        };
        assert_eq!(
            lying.holds_for(Mode::Cpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::NotPassed)
        );
    }

    #[test]
    fn verdict_labels_round_trip_and_garbage_is_refused() {
        let v = verdict("gpu", "pass");
        let label = v.to_label();
        assert!(label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)));
        assert_eq!(TravellingVerdict::from_label(&label), Ok(v.clone()));
        assert!(TravellingVerdict::from_label("!!").is_err());
        assert_eq!(
            BASE64.encode(b"user:pass"),
            "dXNlcjpwYXNz",
            "standard base64, padded"
        );
        assert!(TravellingVerdict::from_label(&BASE64.encode(b"{}")).is_err());
        let v2 = TravellingVerdict { schema: 2, ..v };
        assert!(TravellingVerdict::from_label(&v2.to_label())
            .unwrap_err()
            .contains("schema 2"));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_101_200), "2026-12-01T05:00:00Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        // Out of range: a time, not a panic.
        assert!(rfc3339(u64::MAX).ends_with('Z'));
    }
}
