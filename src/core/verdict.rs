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
    /// What the image was built from (the rendered files, templates included, and the lock):
    /// the run that skips must build exactly this. Empty in a verdict from before it was kept.
    #[serde(default)]
    pub content_sha256: String,
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

/// What a run that would skip on a verdict is: what the verdict must have been reached with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWants<'a> {
    pub mode: Mode,
    /// The registry's digest of the image the tag names now.
    pub digest: &'a str,
    pub lock_sha256: &'a str,
    /// What this run would build (`TravellingVerdict::content_sha256`).
    pub content_sha256: &'a str,
    /// sha256 of the smoke script this envbuild runs.
    pub smoke_script_sha256: &'a str,
    pub envbuild_version: &'a str,
    /// In `gpu` mode, whose GPUs the verdict must have been reached on.
    pub gpus: GpusWanted<'a>,
}

/// Whose GPUs a `gpu` verdict must have been reached on to hold for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpusWanted<'a> {
    /// The driver and GPUs this run's containers get (`GpuIdentity::key`).
    These(&'a str),
    /// They cannot be probed (an engine on another machine): no gpu verdict holds.
    Unprobed,
    /// Any machine's: a fleet's other platform, built and tested on a machine of its own (an
    /// Arm runner), whose image this run only names in the fleet's index.
    AnyMachine,
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
    /// Another build of the lock (other templates, other rendered files).
    OtherContent,
    /// Another smoke script, or another envbuild, reached it.
    OtherTest {
        what: &'static str,
    },
    /// Reached on other GPUs or another driver (or this run's cannot be probed).
    OtherGpus {
        verdict: String,
        run: String,
    },
    /// The document contradicts itself: its mode, its report's mode and its checks disagree.
    SelfContradicting(String),
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
            VerdictMismatch::OtherContent => f.write_str(
                "the verdict is for another build of this lock (other templates or rendered files)",
            ),
            VerdictMismatch::OtherTest { what } => {
                write!(f, "the verdict was reached by {what} than this run's")
            }
            VerdictMismatch::OtherGpus { verdict, run } => write!(
                f,
                "the verdict was reached on `{verdict}`, this run's containers get `{run}`"
            ),
            VerdictMismatch::SelfContradicting(why) => {
                write!(
                    f,
                    "the verdict contradicts itself ({why}): it is not trusted"
                )
            }
        }
    }
}

impl TravellingVerdict {
    /// Whether this verdict lets `run` skip: a pass, consistent with itself, for the very
    /// image digest, lock and build, reached by the same smoke script and envbuild, in a mode
    /// that covers the run's (a `gpu` verdict covers a `cpu` run, every cpu check being among
    /// the gpu ones; never the reverse) and, for a `gpu` run, on the same driver and GPUs.
    pub fn holds_for(&self, run: &RunWants<'_>) -> Result<(), VerdictMismatch> {
        if !self.passed || !self.report.passed(self.exit_code) {
            return Err(VerdictMismatch::NotPassed);
        }
        self.consistent()?;
        if self.image_digest != run.digest {
            return Err(VerdictMismatch::OtherDigest {
                verdict: self.image_digest.clone(),
                image: run.digest.to_string(),
            });
        }
        if self.lock_sha256 != run.lock_sha256 {
            return Err(VerdictMismatch::OtherLock);
        }
        if self.content_sha256 != run.content_sha256 {
            return Err(VerdictMismatch::OtherContent);
        }
        if self.smoke_script_sha256 != run.smoke_script_sha256 {
            return Err(VerdictMismatch::OtherTest {
                what: "another smoke script",
            });
        }
        if self.envbuild_version != run.envbuild_version {
            return Err(VerdictMismatch::OtherTest {
                what: "another envbuild version",
            });
        }
        if run.mode == Mode::Gpu {
            if self.mode != Mode::Gpu.as_str() {
                return Err(VerdictMismatch::CpuOnly);
            }
            let mismatch = match run.gpus {
                GpusWanted::These(key) => (key != self.gpus).then_some(key),
                GpusWanted::Unprobed => Some("GPUs that cannot be probed from here"),
                GpusWanted::AnyMachine => None,
            };
            if let Some(run) = mismatch {
                return Err(VerdictMismatch::OtherGpus {
                    verdict: self.gpus.clone(),
                    run: run.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The document agrees with itself: its mode is its report's, and the report's checks are
    /// those of that mode (a `gpu` report used a GPU: `cuda_available` passed and no check was
    /// skipped for cpu mode; a `cpu` report did not).
    fn consistent(&self) -> Result<(), VerdictMismatch> {
        let bad = |why: &str| Err(VerdictMismatch::SelfContradicting(why.to_string()));
        if self.mode != self.report.mode {
            return bad(&format!(
                "it says `{}` mode, its report `{}`",
                self.mode, self.report.mode
            ));
        }
        let gpu_used =
            self.report.checks.iter().any(|c| {
                c.name == "cuda_available" && c.status == crate::core::report::Status::Pass
            });
        let cpu_skips = self.report.checks.iter().any(|c| c.code == "CPU_MODE");
        match self.mode.as_str() {
            "gpu" if !gpu_used || cpu_skips => {
                bad("a gpu-mode report whose checks did not use a GPU")
            }
            "cpu" if gpu_used => bad("a cpu-mode report whose checks used a GPU"),
            "gpu" | "cpu" => Ok(()),
            other => bad(&format!("an unknown mode `{other}`")),
        }
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
        let cuda = if mode == "gpu" {
            serde_json::json!({"name": "cuda_available", "status": "pass", "code": "OK",
                               "detail": "CUDA is available", "required": true})
        } else {
            serde_json::json!({"name": "cuda_available", "status": "skip", "code": "CPU_MODE",
                               "detail": "cpu mode", "required": true})
        };
        let report: SmokeReport = serde_json::from_value(serde_json::json!({
            "schema": 1, "status": status, "mode": mode, "duration_s": 0.1,
            "environment": {}, "checks": [cuda]
        }))
        .unwrap();
        TravellingVerdict {
            schema: 1,
            image: "127.0.0.1:5000/e:runtime-0123456789ab".into(),
            image_digest: "sha256:aa".into(),
            image_id: "sha256:bb".into(),
            lock_sha256: "cc".into(),
            content_sha256: "ee".into(),
            variant: "runtime".into(),
            mode: mode.into(),
            passed: status == "pass",
            exit_code: if status == "pass" { 0 } else { 1 },
            gpus: if mode == "gpu" {
                GPUS.into()
            } else {
                "no GPU requested".into()
            },
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

    const GPUS: &str = "driver=550.54.15;gpus=GPU-a";

    fn run(mode: Mode) -> RunWants<'static> {
        RunWants {
            mode,
            digest: "sha256:aa",
            lock_sha256: "cc",
            content_sha256: "ee",
            smoke_script_sha256: "dd",
            envbuild_version: "0.1.0",
            gpus: GpusWanted::These(GPUS),
        }
    }

    #[test]
    fn a_verdict_holds_for_its_digest_lock_and_a_mode_it_covers() {
        let gpu = verdict("gpu", "pass");
        assert_eq!(gpu.holds_for(&run(Mode::Gpu)), Ok(()));
        assert_eq!(gpu.holds_for(&run(Mode::Cpu)), Ok(()));
        let other_digest = RunWants {
            digest: "sha256:ab",
            ..run(Mode::Gpu)
        };
        assert!(matches!(
            gpu.holds_for(&other_digest),
            Err(VerdictMismatch::OtherDigest { .. })
        ));
        let other_lock = RunWants {
            lock_sha256: "cd",
            ..run(Mode::Gpu)
        };
        assert_eq!(gpu.holds_for(&other_lock), Err(VerdictMismatch::OtherLock));
        let cpu = verdict("cpu", "pass");
        assert_eq!(cpu.holds_for(&run(Mode::Cpu)), Ok(()));
        assert_eq!(
            cpu.holds_for(&run(Mode::Gpu)),
            Err(VerdictMismatch::CpuOnly)
        );
        let failed = verdict("cpu", "fail");
        assert_eq!(
            failed.holds_for(&run(Mode::Cpu)),
            Err(VerdictMismatch::NotPassed)
        );
        // A document claiming a pass whose report failed does not hold either.
        let lying = TravellingVerdict {
            passed: true,
            exit_code: 0,
            ..failed
        };
        assert_eq!(
            lying.holds_for(&run(Mode::Cpu)),
            Err(VerdictMismatch::NotPassed)
        );
    }

    /// A verdict is bound to the build, the smoke script, envbuild's version and the GPUs it was
    /// reached with; one that contradicts itself (a cpu report relabelled gpu) holds for nothing.
    #[test]
    fn a_verdict_is_bound_to_what_produced_it_and_must_agree_with_itself() {
        let gpu = verdict("gpu", "pass");
        let cases: [(RunWants<'static>, &str); 5] = [
            (
                RunWants {
                    content_sha256: "ef",
                    ..run(Mode::Cpu)
                },
                "other build",
            ),
            (
                RunWants {
                    smoke_script_sha256: "de",
                    ..run(Mode::Cpu)
                },
                "other script",
            ),
            (
                RunWants {
                    envbuild_version: "0.2.0",
                    ..run(Mode::Cpu)
                },
                "other envbuild",
            ),
            (
                RunWants {
                    gpus: GpusWanted::These("driver=560.1;gpus=GPU-b"),
                    ..run(Mode::Gpu)
                },
                "other GPUs",
            ),
            (
                RunWants {
                    gpus: GpusWanted::Unprobed,
                    ..run(Mode::Gpu)
                },
                "GPUs not probed",
            ),
        ];
        for (wants, what) in cases {
            assert!(gpu.holds_for(&wants).is_err(), "{what}");
        }
        // A fleet's other platform: a gpu verdict from its own machine names it in the index,
        // a cpu verdict still does not cover a gpu run.
        let elsewhere = RunWants {
            gpus: GpusWanted::AnyMachine,
            ..run(Mode::Gpu)
        };
        let mut other_machine = verdict("gpu", "pass");
        other_machine.gpus = "driver=570.1;gpus=GPU-arm".into();
        assert_eq!(other_machine.holds_for(&elsewhere), Ok(()));
        assert_eq!(
            verdict("cpu", "pass").holds_for(&elsewhere),
            Err(VerdictMismatch::CpuOnly)
        );
        let mut relabelled = verdict("cpu", "pass");
        relabelled.mode = "gpu".into();
        relabelled.gpus = GPUS.into();
        assert!(matches!(
            relabelled.holds_for(&run(Mode::Gpu)),
            Err(VerdictMismatch::SelfContradicting(_))
        ));
        let mut both = verdict("cpu", "pass");
        both.mode = "gpu".into();
        both.report.mode = "gpu".into();
        both.gpus = GPUS.into();
        assert!(matches!(
            both.holds_for(&run(Mode::Gpu)),
            Err(VerdictMismatch::SelfContradicting(_))
        ));
        let mut odd = verdict("gpu", "pass");
        odd.mode = "cpu".into();
        odd.report.mode = "cpu".into();
        assert!(matches!(
            odd.holds_for(&run(Mode::Cpu)),
            Err(VerdictMismatch::SelfContradicting(_))
        ));
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
