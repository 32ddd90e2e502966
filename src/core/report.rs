//! The presentation shared by `smoke` and `doctor` (and `image`/`test`, which run the smoke test
//! in containers): a check, its status, the verdict, the check table and the one JUnit writer.
//! This module performs no I/O; callers print or write what it returns.

use crate::core::diag::{exit, Failure};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How one check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Skip,
    Fail,
}

/// One check of a report (the smoke script's or doctor's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable check name, e.g. `torch_import`, `cuda_available`, `matmul`.
    pub name: String,
    pub status: Status,
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
    /// What to do next, where the check failed or warned and there is something to do:
    /// printed under the check's row. The script never sets it; envbuild adds it by code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

fn yes() -> bool {
    true
}

impl Check {
    /// A failed required check: the one kind of check that fails a run.
    pub fn fails_the_run(&self) -> bool {
        self.required && self.status == Status::Fail
    }
}

/// The outcome of a whole report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

impl Verdict {
    /// The verdict the checks imply: a failed required check fails, nothing else does.
    pub fn of(checks: &[Check]) -> Verdict {
        if checks.iter().any(Check::fails_the_run) {
            Verdict::Fail
        } else {
            Verdict::Pass
        }
    }

    /// The process exit code for this verdict: 0 pass, 1 fail.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Pass => exit::OK,
            Verdict::Fail => exit::FAILURE,
        }
    }
}

// ------------------------------------------------------------------ the check table

const RESET: &str = "\x1b[0m";

fn status_label(status: Status) -> (&'static str, &'static str) {
    match status {
        Status::Pass => ("PASS", "\x1b[32m"),
        Status::Warn => ("WARN", "\x1b[33m"),
        Status::Skip => ("SKIP", "\x1b[2m"),
        Status::Fail => ("FAIL", "\x1b[31;1m"),
    }
}

/// `PASS`/`FAIL` for a verdict line, bold green or red when `color`.
pub fn verdict_label(verdict: Verdict, color: bool) -> String {
    let (label, ansi) = match verdict {
        Verdict::Pass => ("PASS", "\x1b[32;1m"),
        Verdict::Fail => ("FAIL", "\x1b[31;1m"),
    };
    if color {
        format!("{ansi}{label}{RESET}")
    } else {
        label.to_string()
    }
}

/// One line per check: status, name, code, detail, and under a check with a hint, its hint
/// (indented to the name's column). `color` adds ANSI colours to the status.
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
        let optional = if c.required || c.status == Status::Pass {
            ""
        } else {
            " (optional)"
        };
        out.push_str(&format!(
            "{label}  {:<name_w$}  {:<code_w$}  {}{optional}\n",
            c.name, c.code, c.detail
        ));
        if let Some(hint) = &c.hint {
            out.push_str(&format!("{:<6}hint: {hint}\n", ""));
        }
    }
    out
}

// ------------------------------------------------------------------ JUnit

/// What one JUnit test suite holds: a report's checks, or the error that kept a run from
/// producing one.
#[derive(Debug, Clone)]
pub enum SuiteBody<'a> {
    Checks(&'a [Check]),
    Error { code: &'a str, message: String },
}

/// One JUnit test suite: a smoke run of one environment or image.
#[derive(Debug, Clone)]
pub struct Suite<'a> {
    /// The suite's name, also every test case's class name.
    pub name: String,
    /// How long the run took, where known.
    pub time: Option<Duration>,
    /// Facts about the environment, in this order.
    pub properties: Vec<(String, String)>,
    pub body: SuiteBody<'a>,
}

/// The suites as JUnit XML, one test case per check in report order. A failed required check is
/// a `<failure>`; a warning or a failed optional check passes with its detail in `<system-out>`
/// (prefixed `warning: `); a skipped check is `<skipped>`; a run without a report is one
/// `<error>` case named `smoke`. No timestamps, so the output is stable. The document is valid
/// under the Jenkins xunit plugin's junit-10.xsd (no `skipped` count on `<testsuites>`; line
/// breaks in attributes written as `&#10;`), and every URL's secrets are redacted.
pub fn junit_xml(suites: &[Suite<'_>]) -> Result<String, Failure> {
    let cases: Vec<Vec<Case>> = suites.iter().map(cases_of).collect();
    let count = |c: &[Case], k: CaseKind| c.iter().filter(|c| c.kind == k).count();
    let all: Vec<&Case> = cases.iter().flatten().collect();
    let total = |k: CaseKind| all.iter().filter(|c| c.kind == k).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"envbuild\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
        all.len(),
        total(CaseKind::Failure),
        total(CaseKind::Error)
    ));
    for (suite, cases) in suites.iter().zip(&cases) {
        out.push_str(&format!(
            "    <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
            attr(&suite.name),
            cases.len(),
            count(cases, CaseKind::Failure),
            count(cases, CaseKind::Error),
            count(cases, CaseKind::Skipped)
        ));
        if let Some(t) = suite.time {
            out.push_str(&format!(" time=\"{:.3}\"", t.as_secs_f64()));
        }
        out.push_str(">\n");
        if !suite.properties.is_empty() {
            out.push_str("        <properties>\n");
            for (k, v) in &suite.properties {
                out.push_str(&format!(
                    "            <property name=\"{}\" value=\"{}\"/>\n",
                    attr(k),
                    attr(v)
                ));
            }
            out.push_str("        </properties>\n");
        }
        for c in cases {
            c.write(&suite.name, &mut out);
        }
        out.push_str("    </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    Ok(out)
}

/// What one JUnit test case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseKind {
    Passed,
    Failure,
    Error,
    Skipped,
}

/// One test case: its name, kind, the message of a failure, error or skip (with its type),
/// and the `<system-out>` of a passed one.
struct Case {
    name: String,
    kind: CaseKind,
    message: String,
    kind_type: String,
    out: Option<String>,
}

impl Case {
    fn write(&self, class: &str, out: &mut String) {
        out.push_str(&format!(
            "        <testcase name=\"{}\" classname=\"{}\">\n",
            attr(&self.name),
            attr(class)
        ));
        let element = match self.kind {
            CaseKind::Failure => Some("failure"),
            CaseKind::Error => Some("error"),
            CaseKind::Skipped => Some("skipped"),
            CaseKind::Passed => None,
        };
        if let Some(e) = element {
            out.push_str(&format!(
                "            <{e} message=\"{}\" type=\"{}\"/>\n",
                attr(&self.message),
                attr(&self.kind_type)
            ));
        }
        if let Some(text) = &self.out {
            out.push_str(&format!(
                "            <system-out>{}</system-out>\n",
                text_node(text)
            ));
        }
        out.push_str("        </testcase>\n");
    }
}

/// The test cases of one suite.
fn cases_of(suite: &Suite<'_>) -> Vec<Case> {
    match &suite.body {
        SuiteBody::Checks(checks) => checks
            .iter()
            .map(|c| {
                let message = format!("{}: {}", c.code, c.detail);
                let (kind, out) = match c.status {
                    Status::Fail if c.required => (CaseKind::Failure, None),
                    Status::Skip => (CaseKind::Skipped, None),
                    Status::Pass => (CaseKind::Passed, Some(message.clone())),
                    Status::Warn | Status::Fail => {
                        (CaseKind::Passed, Some(format!("warning: {message}")))
                    }
                };
                Case {
                    name: c.name.clone(),
                    kind,
                    message,
                    kind_type: c.code.clone(),
                    out,
                }
            })
            .collect(),
        SuiteBody::Error { code, message } => vec![Case {
            name: "smoke".into(),
            kind: CaseKind::Error,
            message: message.clone(),
            kind_type: code.to_string(),
            out: None,
        }],
    }
}

/// Characters XML 1.0 cannot carry at all (most C0 controls): written as `\u{..}` text.
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

/// Escape for a text node, redacted; characters XML cannot hold are shown escaped.
fn text_node(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::core::url::redact_text(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if !xml_char(c) => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// Escape for an attribute value, redacted: quotes, and line breaks and tabs as character
/// references (an XML parser turns a raw one into a space).
fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in text_node(s).chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A check with a generated detail, for tests here and in `smoke`.
    pub(crate) fn check(name: &str, status: Status, code: &str, required: bool) -> Check {
        Check {
            name: name.into(),
            status,
            code: code.into(),
            detail: format!("{name} detail"),
            required,
            value: None,
            unit: None,
            hint: None,
        }
    }

    fn checks() -> Vec<Check> {
        vec![
            check("python", Status::Pass, "OK", true),
            check("cuda_available", Status::Fail, "NO_GPU_VISIBLE", true),
            check("shm", Status::Warn, "SHM_TOO_SMALL", false),
            check("matmul", Status::Skip, "NO_CUDA", true),
            check("tflops_bf16", Status::Fail, "CHECK_ERROR", false),
        ]
    }

    fn suite<'a>(name: &str, checks: &'a [Check]) -> Suite<'a> {
        Suite {
            name: name.into(),
            time: Some(Duration::from_millis(1250)),
            properties: vec![("mode".into(), "gpu".into())],
            body: SuiteBody::Checks(checks),
        }
    }

    fn strip_ansi(s: &str) -> String {
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
    }

    #[test]
    fn only_a_failed_required_check_fails_the_verdict() {
        let all = checks();
        assert_eq!(Verdict::of(&all), Verdict::Fail);
        assert_eq!(
            Verdict::of(&all[2..]),
            Verdict::Pass,
            "optional failures warn"
        );
        assert_eq!(Verdict::of(&[]), Verdict::Pass);
        assert_eq!(Verdict::Fail.exit_code(), exit::FAILURE);
        assert_eq!(Verdict::Pass.exit_code(), exit::OK);
    }

    #[test]
    fn the_table_marks_optional_checks_and_keeps_columns_in_colour() {
        let plain = render_checks(&checks(), false);
        assert!(!plain.contains('\x1b'));
        assert!(
            plain.contains("FAIL  cuda_available  NO_GPU_VISIBLE"),
            "{plain}"
        );
        assert!(plain.contains("shm detail (optional)"), "{plain}");
        assert!(!plain.contains("python detail (optional)"), "{plain}");
        let color = render_checks(&checks(), true);
        assert!(color.contains("\x1b[31;1mFAIL\x1b[0m"));
        assert_eq!(strip_ansi(&color), plain);
        assert_eq!(verdict_label(Verdict::Pass, false), "PASS");
        assert_eq!(strip_ansi(&verdict_label(Verdict::Fail, true)), "FAIL");
    }

    #[test]
    fn junit_maps_statuses() {
        let checks = checks();
        let xml = junit_xml(&[suite("envbuild.smoke", &checks)]).unwrap();
        assert!(xml.contains(r#"tests="5""#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains(r#"skipped="1""#), "{xml}");
        assert!(xml.contains(r#"<failure message="NO_GPU_VISIBLE: cuda_available detail" type="NO_GPU_VISIBLE"/>"#), "{xml}");
        assert!(xml.contains("warning: SHM_TOO_SMALL: shm detail"), "{xml}");
        assert!(
            xml.contains("warning: CHECK_ERROR: tflops_bf16 detail"),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<property name="mode" value="gpu"/>"#),
            "{xml}"
        );
        assert!(!xml.contains("timestamp"), "{xml}");
        assert_eq!(xml, junit_xml(&[suite("envbuild.smoke", &checks)]).unwrap());
    }

    #[test]
    fn junit_holds_several_suites_and_runs_without_a_report() {
        let checks = checks();
        let xml = junit_xml(&[
            suite("img", &checks),
            suite("img-dev", &checks),
            Suite {
                name: "img-other".into(),
                time: None,
                properties: vec![],
                body: SuiteBody::Error {
                    code: "NO_GPU_RUNTIME",
                    message: "no gpu".into(),
                },
            },
        ])
        .unwrap();
        assert_eq!(xml.matches("<testsuite ").count(), 3, "{xml}");
        assert!(xml.contains(r#"classname="img-dev""#), "{xml}");
        assert!(
            xml.contains(r#"<error message="no gpu" type="NO_GPU_RUNTIME"/>"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<testcase name="smoke" classname="img-other">"#),
            "{xml}"
        );
    }
}
