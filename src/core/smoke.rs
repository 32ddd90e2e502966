//! The embedded CUDA smoke test: the script, its expectations and its report.
//!
//! The script (`templates/smoke/envbuild_smoke.py`) runs with the standard library plus torch,
//! prints one JSON document on stdout and exits 0 only when every required check passes. This
//! file holds the contract between the Rust side and the script (`Expectations`, `SmokeReport`,
//! `Mode`), the one pass rule (`SmokeReport::passed`), the parser (`parse_output`) and the
//! smoke-specific renderers (`render_table`, `junit_suite`); the check table and the JUnit writer
//! they use are `core::report`'s. This module performs no I/O; `infra::python` runs the script
//! with an interpreter and `infra::docker::run` runs it in a container.

use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::report::{self, Check, Status, Suite, SuiteBody, Verdict};
use crate::core::version::Cc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The script, embedded so that `envbuild smoke`, `envbuild image` and rendered images all run
/// the same bytes.
pub const SCRIPT: &str = include_str!("../../templates/smoke/envbuild_smoke.py");

/// Where rendered images carry the script and the lock's expectations.
pub const IMAGE_SCRIPT_PATH: &str = "/opt/envbuild/envbuild_smoke.py";
pub const IMAGE_EXPECT_PATH: &str = "/opt/envbuild/expect.json";

/// What the lock expects of the environment. Every field is optional: without a lock the smoke
/// test only reports. Serialised as the `--expect FILE` JSON the script reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// `torch.__version__` without the local part (`2.5.1` matches `2.5.1+cu124`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// `torch.version.cuda` as major.minor (`12.4`); `None` when the lock expects a CPU build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// cuDNN as `9.1.0.70`; compared by major.minor.patch with `torch.backends.cudnn.version()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<String>,
    /// NCCL as `2.21.5`, compared with `torch.cuda.nccl.version()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<String>,
    /// The build's architectures as `sm_80` (cubins) and `compute_90` (PTX), as
    /// `torch.cuda.get_arch_list()` reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arch_list: Vec<String>,
    /// Python as `3.10` or `3.10.14`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The CPU architecture the lock's platform runs (`x86_64`, `aarch64`), compared with
    /// `platform.machine()` (`PLATFORM_MISMATCH` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Other packages whose installed version must match (`torchvision`, `numpy`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// The lock's closure (canonical name -> version): the image must hold exactly these
    /// distributions (`CLOSURE_DRIFT` otherwise).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub closure: BTreeMap<String, String>,
    /// The lock's conda closure (conda package name -> version and build): the environment's
    /// `conda-meta/*.json` records must be exactly these (`CLOSURE_DRIFT` otherwise), and the
    /// Python distributions those records installed are not pip extras.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conda_closure: BTreeMap<String, CondaRecord>,
    /// Distributions the image may hold beside the closure (the base image's, `base-provides`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closure_ignore: Vec<String>,
    /// Shared memory the DataLoader workers need, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_shm_bytes: Option<u64>,
    /// The lock's target GPUs as compute capabilities (`9.0`): an `arch_list` entry that none of
    /// them needs is only a warning when the build lacks it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_ccs: Vec<String>,
    /// Expectation keys whose facts the lock marks unconfirmed (`cudnn`, `nccl`, `ptx`,
    /// `arch_list`, `package:NAME`, ...): a failed comparison with one of them only warns.
    /// Read as a list, or as an object mapping keys to `true`/`false` (the script takes both).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "keys_or_flags"
    )]
    pub unconfirmed: Vec<String>,
    /// Seconds each GPU check (and each GPU's part of one) may take; the script's default is 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_timeout_s: Option<f64>,
    /// Seconds from the script's start by which every GPU check has ended (default 240): set
    /// below the caller's own time limit so the report always comes out before a kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
}

/// A conda package as its `conda-meta` record names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CondaRecord {
    pub version: String,
    /// The build string (`py312h33ff503_0`); empty when the lock has none (only the version is
    /// then compared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build: String,
}

/// `unconfirmed` as the script reads it: `["cudnn"]`, or `{"cudnn": true, "nccl": false}` (the
/// keys mapped to `true`, in the object's order).
fn keys_or_flags<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Keys(Vec<String>),
        Flags(BTreeMap<String, bool>),
    }
    Ok(
        match Form::deserialize(d).map_err(|_| {
            serde::de::Error::custom("`unconfirmed` must list keys or map them to true/false")
        })? {
            Form::Keys(k) => k,
            Form::Flags(m) => m.into_iter().filter(|(_, v)| *v).map(|(k, _)| k).collect(),
        },
    )
}

/// The JSON document the script prints (schema 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeReport {
    pub schema: u32,
    pub status: Verdict,
    /// `gpu` or `cpu`.
    pub mode: String,
    pub duration_s: f64,
    /// Facts about the environment: python, torch, cuda, cudnn, nccl, arch_list, devices, ...
    #[serde(default)]
    pub environment: serde_json::Map<String, serde_json::Value>,
    pub checks: Vec<Check>,
}

/// Error codes of the Rust side of the smoke test, declared in the one registry
/// ([`crate::core::codes`]) as `SMOKE_*`; the short names are this module's (the script's own
/// check codes are listed in `docs/smoke.md`).
pub mod codes {
    pub use crate::core::codes::smoke::*;
    pub use crate::core::codes::smoke::{
        SMOKE_BAD_OUTPUT as BAD_OUTPUT, SMOKE_FAILED as FAILED,
        SMOKE_PYTHON_NOT_FOUND as PYTHON_NOT_FOUND, SMOKE_TIMEOUT as TIMEOUT,
    };
}

/// Seconds between the end of the GPU-check budget (counted from the script's start) and the
/// caller's kill: time for the report to be written, for a container to start, for a loaded
/// machine.
const BUDGET_MARGIN_S: f64 = 30.0;

/// The GPU-check budget for a caller that kills the script after `timeout`: 30 s less, and for
/// limits under a minute half of it, so the budget always ends first.
pub fn budget_for(timeout: Duration) -> f64 {
    let t = timeout.as_secs_f64();
    if t > 2.0 * BUDGET_MARGIN_S {
        t - BUDGET_MARGIN_S
    } else {
        t / 2.0
    }
}

/// The report schema this build reads and the embedded script writes.
pub const SCHEMA: u32 = 1;

/// Whether a GPU must be usable (`gpu`) or the run is GPU-less CI (`cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Gpu,
    Cpu,
}

impl Mode {
    /// `gpu` when the run has (or, in a container, requests) GPUs, `cpu` otherwise.
    pub fn from_gpus(gpus: bool) -> Mode {
        if gpus {
            Mode::Gpu
        } else {
            Mode::Cpu
        }
    }

    /// The script's `--mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Gpu => "gpu",
            Mode::Cpu => "cpu",
        }
    }
}

impl Expectations {
    /// Parse an expectations document (the `--expect-file` JSON). Values the script would
    /// refuse (a usage error there) are refused here, with the file named.
    pub fn from_json(text: &str, origin: &str) -> Result<Expectations, Failure> {
        serde_json::from_str(text)
            .map_err(|e| e.to_string())
            .and_then(|e: Expectations| e.validate().map(|()| e))
            .map_err(|e| {
                Failure::one(
                    Diagnostic::error(
                        codes::INVALID_EXPECTATIONS,
                        format!("`{origin}` is not a valid expectations file: {e}"),
                    )
                    .with_hint(
                        "keys: torch, cuda, cudnn, nccl, arch_list, python, packages, \
                     min_shm_bytes, target_ccs, unconfirmed, check_timeout_s, budget_s (see \
                     docs/smoke.md)",
                    ),
                )
            })
    }

    /// What serde cannot say: the compute capabilities parse (`9.0`, `sm_90`) and the time
    /// limits are positive, finite seconds.
    fn validate(&self) -> Result<(), String> {
        for t in &self.target_ccs {
            let lower = t.trim().to_ascii_lowercase();
            if Cc::parse(t).is_none() || !(lower.contains('.') || lower.starts_with("sm_")) {
                return Err(format!(
                    "`target_ccs` entry `{t}` is not a compute capability such as \"9.0\""
                ));
            }
        }
        for (key, v) in [
            ("check_timeout_s", self.check_timeout_s),
            ("budget_s", self.budget_s),
        ] {
            if v.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
                return Err(format!("`{key}` must be a positive number of seconds"));
            }
        }
        Ok(())
    }

    /// These expectations with a GPU-check budget that ends before `timeout`, the time after
    /// which the caller kills the script: so a hung check is named in a report instead of the
    /// whole run ending as `SMOKE_TIMEOUT`. A smaller budget already set is kept.
    pub fn with_budget(mut self, timeout: Duration) -> Expectations {
        let budget = budget_for(timeout);
        self.budget_s = Some(self.budget_s.map_or(budget, |b| b.min(budget)));
        self
    }

    /// The JSON the script reads with `--expect` (written to `IMAGE_EXPECT_PATH` in images).
    pub fn to_json(&self) -> String {
        // A struct of strings, lists and maps always serialises.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_string())
    }
}

impl SmokeReport {
    /// The one pass rule, for every path that runs the script (`smoke`, `image`, `test`, the
    /// verdict cache): the script exited 0, its report says `pass`, and no required check
    /// failed. Any disagreement counts as a failure (`parse_output` refuses those already).
    pub fn passed(&self, exit_code: i64) -> bool {
        exit_code == 0 && self.status == Verdict::Pass && Verdict::of(&self.checks) == Verdict::Pass
    }

    /// The exit code the script gives for this report (0 pass, 1 fail): `envbuild smoke`'s too.
    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }

    /// The checks with this status, in report order.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }
}

/// Turn what the script printed into a report. Pure, so that the Docker side can parse a
/// container's output the same way: `stdout` must be one schema-1 JSON document; `code` is the
/// script's exit status (`None` for a signal); `stderr` is quoted when stdout is unusable.
///
/// The verdict is recomputed from the checks (a failed required check fails the run), so a
/// report whose `status` disagrees with its checks is refused rather than trusted.
pub fn parse_output(stdout: &str, stderr: &str, code: Option<i32>) -> Result<SmokeReport, Failure> {
    let tail = stderr_tail(stderr);
    let report: SmokeReport = match (serde_json::from_str(stdout.trim()), emulator_crash(stderr)) {
        (Ok(r), _) => r,
        (Err(_), Some(line)) => {
            return Err(Failure::one(
                Diagnostic::error(
                    codes::EMULATOR_CRASHED,
                    format!(
                        "the smoke test died inside the CPU emulator that runs this image on \
                         another CPU (`{line}`): nothing is known of the image itself"
                    ),
                )
                .with_hint(
                    "qemu-user older than 8.2 gives an aarch64 program this machine's own \
                     /proc/cpuinfo, and `import torch` crashes reading it: register qemu-user \
                     8.2 or newer with binfmt_misc (Debian 13, Ubuntu 24.04, the \
                     tonistiigi/binfmt image), or test the image on an arm64 machine \
                     (docs/image.md#under-emulation)",
                ),
            ));
        }
        (Err(e), None) => {
            let mut d = Diagnostic::error(
                codes::BAD_OUTPUT,
                format!(
                    "the smoke test printed no report (exit status {}; {e})",
                    code.map_or_else(|| "killed by a signal".to_string(), |c| c.to_string())
                ),
            );
            d.hint = Some(if tail.is_empty() {
                "run it by hand with `envbuild smoke --print-script > s.py && python3 s.py`"
                    .to_string()
            } else {
                format!("its stderr ends with: {tail}")
            });
            return Err(Failure::one(d));
        }
    };
    if report.schema != SCHEMA {
        return Err(Failure::one(
            Diagnostic::error(
                codes::BAD_OUTPUT,
                format!(
                    "the smoke report has schema {}, this envbuild reads schema {SCHEMA}",
                    report.schema
                ),
            )
            .with_hint(
                "run the script embedded in this envbuild (`envbuild smoke --print-script`)",
            ),
        ));
    }
    if Verdict::of(&report.checks) != report.status {
        return Err(Failure::bug(format!(
            "the smoke report says `{:?}` but its checks say otherwise",
            report.status
        )));
    }
    if code == Some(exit::USAGE) {
        let why = report
            .checks
            .iter()
            .find(|c| c.status == Status::Fail)
            .map_or("no detail", |c| c.detail.as_str());
        return Err(Failure::bug(format!(
            "the smoke test refused its arguments: {why}"
        )));
    }
    let expected_code = report.exit_code();
    if code != Some(expected_code) {
        return Err(Failure::bug(format!(
            "the smoke test exited with {code:?} but its report implies {expected_code}"
        )));
    }
    Ok(report)
}

/// The line in which qemu-user says it let the emulated program die (`qemu: uncaught target
/// signal 11 (Segmentation fault) - core dumped`, `qemu: unhandled CPU exception ...`).
fn emulator_crash(stderr: &str) -> Option<&str> {
    stderr.lines().map(str::trim).find(|l| {
        l.starts_with("qemu: uncaught target signal")
            || l.starts_with("qemu: unhandled CPU exception")
    })
}

/// The last three non-empty lines of a child's stderr, for messages.
pub fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(3);
    lines[start..].join(" | ")
}

// ------------------------------------------------------------------ hints

/// Where the smoke test ran, for the hints: what to do next differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    /// `envbuild smoke`: this Python interpreter on this machine; `locked` when the run checks
    /// against a lock or an expectations file (torch must then be that build, not any).
    Python { python: &'a str, locked: bool },
    /// `envbuild image` and `envbuild test`: a container from an image.
    Container,
}

/// What to do next for a failed or warning check of the script, by its code; `None` where the
/// detail already says it or there is nothing to do.
pub fn hint_for(code: &str, place: Place<'_>) -> Option<String> {
    let no_gpu = "on a machine without an NVIDIA GPU, `--gpus none` runs every check that needs \
                  none; `envbuild doctor` says what this host has";
    Some(match (code, place) {
        (
            "TORCH_MISSING",
            Place::Python {
                python,
                locked: false,
            },
        ) => format!(
            "install torch into this interpreter (`{python} -m pip install torch`: PyPI's wheel \
             also runs on a machine without a GPU, with `--gpus none`), or point `--python` at \
             the environment that has it"
        ),
        ("TORCH_MISSING", Place::Python { locked: true, .. }) => "install the lock's \
             environment into this interpreter (`envbuild render LOCK` writes its \
             requirements.txt, or environment.yml for conda), or point `--python` at the \
             environment that has it"
            .to_string(),
        ("TORCH_MISSING", Place::Container) => "the image's Python has no torch: build the \
             image from the lock with `envbuild image SPEC` (its install stage puts torch in it), \
             or test an image that has it"
            .to_string(),
        ("CUDA_UNAVAILABLE_NO_DRIVER" | "NO_GPU_VISIBLE", Place::Python { .. }) => {
            no_gpu.to_string()
        }
        ("CUDA_UNAVAILABLE_NO_DRIVER" | "NO_GPU_VISIBLE", Place::Container) => {
            format!("{no_gpu}, and whether the engine can give a container a GPU (NO_GPU_RUNTIME)")
        }
        ("TORCH_CPU_BUILD", Place::Python { .. }) => "install the lock's CUDA build (`envbuild \
             render` writes its requirements.txt with the wheel index), or use `--gpus none` \
             without a lock to check a CPU build"
            .to_string(),
        _ => return None,
    })
}

/// `report` with a hint on each failed or warning check that has one ([`hint_for`]); checks
/// that already carry a hint keep it.
pub fn with_hints(report: &SmokeReport, place: Place<'_>) -> SmokeReport {
    let mut out = report.clone();
    for c in &mut out.checks {
        if c.hint.is_none() && matches!(c.status, Status::Fail | Status::Warn) {
            c.hint = hint_for(&c.code, place);
        }
    }
    out
}

/// `PLATFORM_MISMATCH` when `report`'s `platform` check failed: the image named `image` runs on
/// another CPU architecture than its lock's platform (the check's detail names both).
pub fn platform_mismatch(report: &SmokeReport, image: &str) -> Option<Diagnostic> {
    let check = report
        .checks
        .iter()
        .find(|c| c.code == codes::PLATFORM_MISMATCH && c.status == Status::Fail)?;
    Some(
        Diagnostic::error(
            codes::PLATFORM_MISMATCH,
            format!("`{image}` is for another machine: {}", check.detail),
        )
        .with_hint(
            "build the image for the lock's platform (`envbuild image` asks the engine for it;              a base the engine has only for another architecture is the usual cause), or lock              for the machine it runs on (`[target] platform`)",
        ),
    )
}

// ------------------------------------------------------------------ rendering

fn env_str(report: &SmokeReport, key: &str) -> Option<String> {
    match report.environment.get(key)? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The human-readable report: a summary of the environment, the checks as a table and the
/// verdict. Pure; `color` adds ANSI colours.
pub fn render_table(report: &SmokeReport, color: bool) -> String {
    let mut out = String::new();
    // A fixed selection and order of facts: never the map's own order.
    let facts: Vec<String> = [
        ("python", "Python"),
        ("torch", "torch"),
        ("cuda", "CUDA"),
        ("cudnn", "cuDNN"),
        ("nccl", "NCCL"),
    ]
    .iter()
    .filter_map(|(k, label)| env_str(report, k).map(|v| format!("{label} {v}")))
    .collect();
    if !facts.is_empty() {
        out.push_str(&facts.join(" · "));
        out.push('\n');
    }
    if let Some(serde_json::Value::Array(devs)) = report.environment.get("devices") {
        for d in devs {
            let field = |k: &str| {
                d.get(k).map_or(String::new(), |v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            };
            out.push_str(&format!(
                "GPU {}: {} (compute capability {})\n",
                field("index"),
                field("name"),
                field("cc")
            ));
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&report::render_checks(&report.checks, color));
    let verdict = report::verdict_label(report.status, color);
    out.push_str(&format!(
        "\n{verdict}: {} passed, {} warnings, {} failed, {} skipped ({} mode, {:.1} s)\n",
        report.count(Status::Pass),
        report.count(Status::Warn),
        report.count(Status::Fail),
        report.count(Status::Skip),
        report.mode,
        report.duration_s
    ));
    out
}

/// The report as one JUnit suite named `name`, for `report::junit_xml`: the run's time, the mode
/// and the environment's facts (not the null ones) as properties, one test case per check.
pub fn junit_suite<'a>(report: &'a SmokeReport, name: &str) -> Suite<'a> {
    let mut properties = vec![("mode".to_string(), report.mode.clone())];
    // serde_json's Map is ordered by key, so the properties are too.
    for (k, v) in &report.environment {
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        properties.push((k.clone(), text));
    }
    Suite {
        name: name.to_string(),
        // A report is the script's word: an absurd duration is left out rather than trusted.
        time: Duration::try_from_secs_f64(report.duration_s).ok(),
        properties,
        body: SuiteBody::Checks(&report.checks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::report::tests::check;

    fn report(status: Verdict, checks: Vec<Check>) -> SmokeReport {
        let mut environment = serde_json::Map::new();
        environment.insert("torch".into(), "2.5.1+cu124".into());
        environment.insert("python".into(), "3.11.7".into());
        environment.insert("cuda".into(), serde_json::Value::Null);
        SmokeReport {
            schema: 1,
            status,
            mode: "gpu".into(),
            duration_s: 1.25,
            environment,
            checks,
        }
    }

    fn failing() -> SmokeReport {
        report(
            Verdict::Fail,
            vec![
                check("python", Status::Pass, "OK", true),
                check("cuda_available", Status::Fail, "NO_GPU_VISIBLE", true),
                check("shm", Status::Warn, "SHM_TOO_SMALL", false),
                check("matmul", Status::Skip, "NO_CUDA", true),
                check("tflops_bf16", Status::Fail, "CHECK_ERROR", false),
            ],
        )
    }

    #[test]
    fn failed_checks_get_the_hint_of_where_the_test_ran() {
        let r = report(
            Verdict::Fail,
            vec![
                check("python", Status::Pass, "OK", true),
                check("torch_import", Status::Fail, "TORCH_MISSING", true),
                check("shm", Status::Warn, "SHM_TOO_SMALL", false),
            ],
        );
        let free = Place::Python {
            python: "/opt/py/bin/python3",
            locked: false,
        };
        let hinted = with_hints(&r, free);
        let hint = hinted.checks[1].hint.as_deref().unwrap();
        assert!(
            hint.contains("/opt/py/bin/python3 -m pip install torch"),
            "{hint}"
        );
        // A pass, and a code with no hint, stay as they were; the report itself is unchanged.
        assert_eq!(
            (&hinted.checks[0].hint, &hinted.checks[2].hint),
            (&None, &None)
        );
        assert_eq!(r.checks[1].hint, None);
        // Against a lock, any torch is not the answer: the lock's environment is.
        let locked = Place::Python {
            python: "python3",
            locked: true,
        };
        let hint = hint_for("TORCH_MISSING", locked).unwrap();
        assert!(
            hint.contains("envbuild render") && !hint.contains("install torch`"),
            "{hint}"
        );
        let hint = hint_for("TORCH_MISSING", Place::Container).unwrap();
        assert!(hint.contains("envbuild image SPEC"), "{hint}");
        assert!(hint_for("CUDA_UNAVAILABLE_NO_DRIVER", Place::Container)
            .unwrap()
            .contains("--gpus none"));
        // The hint shows under the row in the table.
        let table = render_table(&hinted, false);
        assert!(table.contains("\n      hint: install torch"), "{table}");
    }

    #[test]
    fn parse_output_accepts_a_consistent_report() {
        let r = failing();
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(parse_output(&json, "", Some(1)).unwrap(), r);
    }

    #[test]
    fn parse_output_refuses_what_is_not_a_report() {
        let e = parse_output(
            "Traceback (most recent call last):",
            "boom\nlast line\n",
            Some(1),
        )
        .unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::BAD_OUTPUT);
        assert!(e.to_string().contains("last line"), "{e}");
        let e = parse_output("", "", None).unwrap_err();
        assert!(e.to_string().contains("killed by a signal"), "{e}");
    }

    #[test]
    fn a_crash_in_the_emulator_is_named_as_such() {
        let stderr = "/__w/pytorch/pytorch/third_party/ideep/mkl-dnn/third_party/xbyak_aarch64/\
                      src/util_impl_linux.h, 444: Can't open MIDR_EL1 sysfs entry\n\
                      qemu: uncaught target signal 11 (Segmentation fault) - core dumped\n";
        let e = parse_output("", stderr, Some(139)).unwrap_err();
        let d = &e.diagnostics[0];
        assert_eq!(d.code, codes::EMULATOR_CRASHED);
        assert!(
            d.message
                .contains("`qemu: uncaught target signal 11 (Segmentation fault) - core dumped`"),
            "{}",
            d.message
        );
        assert!(d.hint.as_deref().unwrap().contains("8.2"), "{d:?}");
        // The same crash natively is no emulator's: the plain refusal, quoting stderr.
        let e = parse_output("", "Segmentation fault (core dumped)\n", Some(139)).unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::BAD_OUTPUT);
    }

    #[test]
    fn parse_output_checks_schema_verdict_and_exit_code() {
        let mut r = failing();
        r.schema = 2;
        let e = parse_output(&serde_json::to_string(&r).unwrap(), "", Some(1)).unwrap_err();
        assert!(e.to_string().contains("schema 2"), "{e}");

        let mut r = failing();
        r.status = Verdict::Pass;
        let e = parse_output(&serde_json::to_string(&r).unwrap(), "", Some(0)).unwrap_err();
        assert_eq!(e.exit_code, exit::USAGE);

        let json = serde_json::to_string(&failing()).unwrap();
        let e = parse_output(&json, "", Some(0)).unwrap_err();
        assert!(e.to_string().contains("exited with"), "{e}");
        let e = parse_output(&json, "", Some(2)).unwrap_err();
        assert!(e.to_string().contains("refused its arguments"), "{e}");
    }

    #[test]
    fn table_lists_every_check_in_order_with_the_verdict() {
        let text = render_table(&failing(), false);
        assert!(!text.contains('\x1b'));
        assert!(
            text.starts_with("Python 3.11.7 · torch 2.5.1+cu124\n"),
            "{text}"
        );
        let order: Vec<usize> = ["python", "cuda_available", "shm", "matmul", "tflops_bf16"]
            .iter()
            .map(|n| text.find(&format!("  {n} ")).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(
            text.contains("FAIL  cuda_available  NO_GPU_VISIBLE"),
            "{text}"
        );
        assert!(text.contains("shm detail (optional)"), "{text}");
        assert!(text.contains("FAIL: 1 passed, 1 warnings, 2 failed, 1 skipped (gpu mode, 1.2 s)"));
        assert_eq!(text, render_table(&failing(), false));
    }

    #[test]
    fn table_colours_only_when_asked_and_keeps_columns() {
        let plain = render_table(&failing(), false);
        let color = render_table(&failing(), true);
        assert!(color.contains("\x1b[31;1mFAIL\x1b[0m"));
        let strip = |s: &str| {
            let mut out = String::new();
            let mut esc = false;
            for ch in s.chars() {
                match (esc, ch) {
                    (false, '\x1b') => esc = true,
                    (true, 'm') => esc = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert_eq!(strip(&color), plain);
    }

    #[test]
    fn junit_suite_carries_time_mode_and_facts() {
        let r = failing();
        let xml = report::junit_xml(&[junit_suite(&r, "envbuild.smoke")]).unwrap();
        assert!(
            xml.contains(r#"<testsuite name="envbuild.smoke" tests="5""#),
            "{xml}"
        );
        assert!(xml.contains(r#"time="1.250""#), "{xml}");
        assert!(
            xml.contains(r#"<property name="mode" value="gpu"/>"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<property name="torch" value="2.5.1+cu124"/>"#),
            "{xml}"
        );
        assert!(
            !xml.contains(r#"name="cuda""#),
            "null facts are left out: {xml}"
        );
        assert!(
            xml.contains(r#"<testcase name="cuda_available" classname="envbuild.smoke">"#),
            "{xml}"
        );
        let mut absurd = failing();
        absurd.duration_s = 1e300;
        assert!(junit_suite(&absurd, "x").time.is_none());
    }

    #[test]
    fn passing_needs_exit_zero_status_pass_and_no_required_failure() {
        let good = report(
            Verdict::Pass,
            vec![check("python", Status::Pass, "OK", true)],
        );
        assert!(good.passed(0));
        assert!(!good.passed(1));
        let lying = report(
            Verdict::Pass,
            vec![check("torch_import", Status::Fail, "TORCH_MISSING", true)],
        );
        assert!(!lying.passed(0));
        let optional = report(
            Verdict::Pass,
            vec![check("tflops_bf16", Status::Fail, "SLOW", false)],
        );
        assert!(optional.passed(0));
        assert!(!report(Verdict::Fail, vec![]).passed(0));
        assert_eq!(failing().exit_code(), exit::FAILURE);
        assert_eq!(good.exit_code(), exit::OK);
    }

    #[test]
    fn expectations_round_trip_and_refuse_unknown_keys() {
        let e = Expectations {
            torch: Some("2.5.1".into()),
            cuda: Some("12.4".into()),
            arch_list: vec!["sm_90".into()],
            min_shm_bytes: Some(1 << 30),
            ..Default::default()
        };
        assert_eq!(Expectations::from_json(&e.to_json(), "x").unwrap(), e);
        let err = Expectations::from_json(r#"{"torhc": "2.5.1"}"#, "e.json").unwrap_err();
        assert_eq!(err.diagnostics[0].code, codes::INVALID_EXPECTATIONS);
        assert_eq!(err.exit_code, exit::FAILURE);
        assert!(err.to_string().contains("torhc"), "{err}");
    }

    #[test]
    fn the_budget_ends_before_the_callers_time_limit() {
        for secs in [1u64, 10, 45, 60, 61, 300, 3600] {
            let t = Duration::from_secs(secs);
            let b = budget_for(t);
            assert!(b > 0.0 && b < secs as f64, "{secs}: {b}");
        }
        assert_eq!(budget_for(Duration::from_secs(300)), 270.0);
        assert_eq!(budget_for(Duration::from_secs(40)), 20.0);
        let e = Expectations::default().with_budget(Duration::from_secs(300));
        assert_eq!(e.budget_s, Some(270.0));
        // A smaller budget of the user's stays; a larger one is cut to the limit.
        let mine = Expectations {
            budget_s: Some(100.0),
            ..Default::default()
        };
        assert_eq!(
            mine.with_budget(Duration::from_secs(300)).budget_s,
            Some(100.0)
        );
        let big = Expectations {
            budget_s: Some(1000.0),
            ..Default::default()
        };
        assert_eq!(
            big.with_budget(Duration::from_secs(300)).budget_s,
            Some(270.0)
        );
    }

    #[test]
    fn new_keys_parse_in_the_script_forms_and_bad_values_are_refused() {
        let e = Expectations::from_json(
            r#"{"target_ccs": ["9.0", "sm_86"], "unconfirmed": {"cudnn": true, "nccl": false},
                "check_timeout_s": 30, "budget_s": 90.5}"#,
            "e.json",
        )
        .unwrap();
        assert_eq!(e.target_ccs, ["9.0", "sm_86"]);
        assert_eq!(e.unconfirmed, ["cudnn"]);
        assert_eq!((e.check_timeout_s, e.budget_s), (Some(30.0), Some(90.5)));
        let listed =
            Expectations::from_json(r#"{"unconfirmed": ["ptx", "package:numpy"]}"#, "e").unwrap();
        assert_eq!(listed.unconfirmed, ["ptx", "package:numpy"]);
        // Written as a list; absent keys are left out, so old scripts' files stay the same.
        assert!(
            e.to_json()
                .contains("\"unconfirmed\": [\n    \"cudnn\"\n  ]"),
            "{}",
            e.to_json()
        );
        assert_eq!(Expectations::default().to_json(), "{}");
        for bad in [
            r#"{"target_ccs": ["compute_90"]}"#,
            r#"{"target_ccs": ["H100"]}"#,
            r#"{"target_ccs": "9.0"}"#,
            r#"{"unconfirmed": "cudnn"}"#,
            r#"{"unconfirmed": {"cudnn": "yes"}}"#,
            r#"{"budget_s": 0}"#,
            r#"{"check_timeout_s": -5}"#,
            r#"{"budget_s": "60"}"#,
        ] {
            let err = Expectations::from_json(bad, "e.json").unwrap_err();
            assert_eq!(
                err.diagnostics[0].code,
                codes::INVALID_EXPECTATIONS,
                "{bad}"
            );
        }
    }
}
