//! The embedded CUDA smoke test: the script, its expectations and its report.
//!
//! The script (`templates/smoke/envbuild_smoke.py`) runs with the standard library plus torch,
//! prints one JSON document on stdout and exits 0 only when every required check passes. This
//! file holds the contract between the Rust side and the script (`Expectations`, `SmokeReport`),
//! the pure renderers (`render_table`, `junit_xml`, `parse_output`). This module performs no I/O;
//! `infra::python` runs the script with an interpreter.

use crate::core::diag::{exit, Diagnostic, Failure};
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Other packages whose installed version must match (`torchvision`, `numpy`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// Shared memory the DataLoader workers need, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_shm_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Pass,
    Warn,
    Skip,
    Fail,
}

/// One check of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable check name, e.g. `torch_import`, `cuda_available`, `matmul`.
    pub name: String,
    pub status: CheckStatus,
    /// Stable code, e.g. `OK`, `TORCH_MISSING`, `TORCH_CPU_BUILD`, `ARCH_MISSING`.
    pub code: String,
    /// One line a person can act on.
    pub detail: String,
    /// A failed required check fails the run; a failed optional one only warns.
    #[serde(default = "yes")]
    pub required: bool,
    /// A measured figure, where the check has one (TFLOP/s, GB/s, bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
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

/// Error codes of the Rust side of the smoke test (the script's own check codes are listed in
/// `docs/smoke.md`).
pub mod codes {
    use crate::core::diag::Code;
    /// The Python interpreter could not be started.
    pub const PYTHON_NOT_FOUND: Code = "SMOKE_PYTHON_NOT_FOUND";
    /// The smoke test ran past its time limit and was killed.
    pub const TIMEOUT: Code = "SMOKE_TIMEOUT";
    /// The script's output is not a schema-1 report.
    pub const BAD_OUTPUT: Code = "SMOKE_BAD_OUTPUT";
    /// An `--expect-file` that is not a valid expectations document.
    pub const INVALID_EXPECTATIONS: Code = "INVALID_EXPECTATIONS";
    /// The smoke test ran and a required check failed.
    pub const FAILED: Code = "SMOKE_FAILED";
    /// Every code above.
    pub const ALL: &[Code] = &[
        PYTHON_NOT_FOUND,
        TIMEOUT,
        BAD_OUTPUT,
        INVALID_EXPECTATIONS,
        FAILED,
    ];
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
    /// The script's `--mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Gpu => "gpu",
            Mode::Cpu => "cpu",
        }
    }
}

impl Expectations {
    /// Parse an expectations document (the `--expect-file` JSON).
    pub fn from_json(text: &str, origin: &str) -> Result<Expectations, Failure> {
        serde_json::from_str(text).map_err(|e| {
            Failure::one(
                Diagnostic::error(
                    codes::INVALID_EXPECTATIONS,
                    format!("`{origin}` is not a valid expectations file: {e}"),
                )
                .with_hint(
                    "keys: torch, cuda, cudnn, nccl, arch_list, python, packages, \
                     min_shm_bytes (see docs/smoke.md)",
                ),
            )
        })
    }

    /// The JSON the script reads with `--expect` (written to `IMAGE_EXPECT_PATH` in images).
    pub fn to_json(&self) -> String {
        // A struct of strings, lists and maps always serialises.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_string())
    }
}

impl SmokeReport {
    /// True when no required check failed; the script's `status` says the same.
    pub fn passed(&self) -> bool {
        self.status == Verdict::Pass
    }

    /// The process exit code for this report: 0 pass, 1 fail.
    pub fn exit_code(&self) -> i32 {
        if self.passed() {
            exit::OK
        } else {
            exit::FAILURE
        }
    }

    /// The checks with this status, in report order.
    pub fn count(&self, status: CheckStatus) -> usize {
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
    let report: SmokeReport = match serde_json::from_str(stdout.trim()) {
        Ok(r) => r,
        Err(e) => {
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
    let failed = report
        .checks
        .iter()
        .any(|c| c.required && c.status == CheckStatus::Fail);
    if failed == report.passed() {
        return Err(Failure::bug(format!(
            "the smoke report says `{:?}` but its checks say otherwise",
            report.status
        )));
    }
    if code == Some(exit::USAGE) {
        let why = report
            .checks
            .iter()
            .find(|c| c.status == CheckStatus::Fail)
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

/// The last three non-empty lines of a child's stderr, for messages.
pub fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(3);
    lines[start..].join(" | ")
}

// ------------------------------------------------------------------ rendering

const RESET: &str = "\x1b[0m";

fn status_label(status: CheckStatus) -> (&'static str, &'static str) {
    match status {
        CheckStatus::Pass => ("PASS", "\x1b[32m"),
        CheckStatus::Warn => ("WARN", "\x1b[33m"),
        CheckStatus::Skip => ("SKIP", "\x1b[2m"),
        CheckStatus::Fail => ("FAIL", "\x1b[31;1m"),
    }
}

/// One line per check: status, name, code, detail. Shared by `smoke` and `doctor`.
pub fn render_checks(checks: &[Check], color: bool) -> String {
    let name_w = checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let code_w = checks
        .iter()
        .map(|c| c.code.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<6}{:<name_w$}  {:<code_w$}  DETAIL\n",
        "", "CHECK", "CODE"
    );
    for c in checks {
        let (label, ansi) = status_label(c.status);
        // Pad before colouring so escape codes never disturb the column widths.
        let label = format!("{label:<4}");
        let label = if color {
            format!("{ansi}{label}{RESET}")
        } else {
            label
        };
        let optional = if c.required || c.status == CheckStatus::Pass {
            ""
        } else {
            " (optional)"
        };
        out.push_str(&format!(
            "{label}  {:<name_w$}  {:<code_w$}  {}{optional}\n",
            c.name, c.code, c.detail
        ));
    }
    out
}

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
    out.push_str(&render_checks(&report.checks, color));
    let (label, ansi) = if report.passed() {
        ("PASS", "\x1b[32;1m")
    } else {
        ("FAIL", "\x1b[31;1m")
    };
    let verdict = if color {
        format!("{ansi}{label}{RESET}")
    } else {
        label.to_string()
    };
    out.push_str(&format!(
        "\n{verdict}: {} passed, {} warnings, {} failed, {} skipped ({} mode, {:.1} s)\n",
        report.count(CheckStatus::Pass),
        report.count(CheckStatus::Warn),
        report.count(CheckStatus::Fail),
        report.count(CheckStatus::Skip),
        report.mode,
        report.duration_s
    ));
    out
}

/// The report as JUnit XML, one test case per check in report order. A failed required check
/// is a `<failure>`; a warning or a failed optional check passes with its detail in
/// `<system-out>`; a skipped check is `<skipped>`. No timestamps, so the output is stable.
pub fn junit_xml(report: &SmokeReport, suite: &str) -> Result<String, Failure> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut ts = TestSuite::new(suite);
    ts.set_time(Duration::from_secs_f64(report.duration_s.max(0.0)));
    ts.add_property(("mode", report.mode.as_str()));
    // serde_json's Map is ordered by key, so the properties are too.
    for (k, v) in &report.environment {
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        ts.add_property((k.as_str(), text.as_str()));
    }
    for c in &report.checks {
        let message = format!("{}: {}", c.code, c.detail);
        let status = match c.status {
            CheckStatus::Fail if c.required => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(message.as_str()).set_type(c.code.as_str());
                s
            }
            CheckStatus::Skip => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(message.as_str()).set_type(c.code.as_str());
                s
            }
            _ => TestCaseStatus::success(),
        };
        let mut tc = TestCase::new(c.name.as_str(), status);
        tc.set_classname(suite);
        if matches!(
            c.status,
            CheckStatus::Pass | CheckStatus::Warn | CheckStatus::Fail
        ) && !(c.status == CheckStatus::Fail && c.required)
        {
            let prefix = match c.status {
                CheckStatus::Pass => "",
                _ => "warning: ",
            };
            tc.set_system_out(format!("{prefix}{message}"));
        }
        ts.add_test_case(tc);
    }
    let mut r = Report::new("envbuild");
    r.add_test_suite(ts);
    r.to_string()
        .map_err(|e| Failure::bug(format!("cannot write JUnit XML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, status: CheckStatus, code: &str, required: bool) -> Check {
        Check {
            name: name.into(),
            status,
            code: code.into(),
            detail: format!("{name} detail"),
            required,
            value: None,
            unit: None,
        }
    }

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
                check("python", CheckStatus::Pass, "OK", true),
                check("cuda_available", CheckStatus::Fail, "NO_GPU_VISIBLE", true),
                check("shm", CheckStatus::Warn, "SHM_TOO_SMALL", false),
                check("matmul", CheckStatus::Skip, "NO_CUDA", true),
                check("tflops_bf16", CheckStatus::Fail, "CHECK_ERROR", false),
            ],
        )
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
    fn junit_maps_statuses() {
        let xml = junit_xml(&failing(), "envbuild.smoke").unwrap();
        assert!(xml.contains(r#"tests="5""#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains(r#"skipped="1""#), "{xml}");
        assert!(xml.contains(r#"<failure message="NO_GPU_VISIBLE: cuda_available detail" type="NO_GPU_VISIBLE"/>"#), "{xml}");
        assert!(xml.contains("warning: SHM_TOO_SMALL: shm detail"), "{xml}");
        assert!(
            xml.contains("warning: CHECK_ERROR: tflops_bf16 detail"),
            "{xml}"
        );
        assert!(!xml.contains("timestamp"), "{xml}");
        assert!(
            !xml.contains(r#"name="cuda""#),
            "null facts are left out: {xml}"
        );
        assert_eq!(xml, junit_xml(&failing(), "envbuild.smoke").unwrap());
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
}
