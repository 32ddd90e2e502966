//! Presenting smoke verdicts: pass/fail, a readable table, JUnit XML, and the JSON document of
//! `envbuild image`/`envbuild test`. Pure functions; the callers write the results.
//!
//! The table is `smoke::render_table`'s; JUnit for one report is `smoke::junit_xml`'s, and the
//! writer here covers what that one does not: several images in one file, and runs that ended
//! with an error instead of a report.

use crate::core::smoke::{CheckStatus, SmokeReport};

pub use crate::app::test::passed;

/// The report as a table (`smoke::render_table`) under a title naming the image.
pub fn render_table(title: &str, report: &SmokeReport, color: bool) -> String {
    format!(
        "{title}\n{}",
        crate::core::smoke::render_table(report, color)
    )
}

/// One JUnit test suite per smoke run; a run that produced no report is one failing case.
pub enum SuiteResult<'a> {
    Report(&'a SmokeReport),
    Error { code: &'a str, message: String },
}

/// JUnit XML with one suite per (name, result): `smoke::junit_xml` for a single report.
pub fn junit_xml(suites: &[(String, SuiteResult<'_>)]) -> String {
    if let [(name, SuiteResult::Report(r))] = suites {
        if let Ok(xml) = crate::core::smoke::junit_xml(r, name) {
            return xml;
        }
    }
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("envbuild");
    for (name, result) in suites {
        let mut suite = TestSuite::new(name.as_str());
        match result {
            SuiteResult::Report(r) => {
                for c in &r.checks {
                    let status = match c.status {
                        CheckStatus::Pass | CheckStatus::Warn => TestCaseStatus::success(),
                        CheckStatus::Skip => {
                            let mut s = TestCaseStatus::skipped();
                            s.set_message(c.detail.as_str());
                            s
                        }
                        CheckStatus::Fail if !c.required => TestCaseStatus::success(),
                        CheckStatus::Fail => {
                            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                            s.set_message(format!("{}: {}", c.code, c.detail));
                            s.set_type(c.code.as_str());
                            s
                        }
                    };
                    let mut case = TestCase::new(c.name.as_str(), status);
                    case.set_classname(name.as_str());
                    if c.status == CheckStatus::Warn || c.status == CheckStatus::Fail {
                        case.set_system_out(format!("{}: {}", c.code, c.detail));
                    }
                    suite.add_test_case(case);
                }
            }
            SuiteResult::Error { code, message } => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                s.set_message(message.as_str());
                s.set_type(*code);
                let mut case = TestCase::new("smoke", s);
                case.set_classname(name.as_str());
                suite.add_test_case(case);
            }
        }
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot write JUnit XML: {e} -->\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::smoke::{Check, Verdict};

    fn report(status: Verdict, checks: Vec<(&str, CheckStatus, bool)>) -> SmokeReport {
        SmokeReport {
            schema: 1,
            status,
            mode: "cpu".into(),
            duration_s: 0.5,
            environment: Default::default(),
            checks: checks
                .into_iter()
                .map(|(code, status, required)| Check {
                    name: code.to_lowercase(),
                    status,
                    code: code.into(),
                    detail: format!("{code} detail"),
                    required,
                    value: None,
                    unit: None,
                })
                .collect(),
        }
    }

    #[test]
    fn verdict_needs_exit_zero_status_pass_and_no_required_failure() {
        let good = report(Verdict::Pass, vec![("OK", CheckStatus::Pass, true)]);
        assert!(passed(&good, 0));
        assert!(!passed(&good, 1));
        let lying = report(
            Verdict::Pass,
            vec![("TORCH_MISSING", CheckStatus::Fail, true)],
        );
        assert!(!passed(&lying, 0));
        let optional = report(Verdict::Pass, vec![("SLOW", CheckStatus::Fail, false)]);
        assert!(passed(&optional, 0));
        assert!(!passed(&report(Verdict::Fail, vec![]), 0));
    }

    #[test]
    fn table_and_junit_name_the_codes() {
        let r = report(
            Verdict::Fail,
            vec![
                ("OK", CheckStatus::Pass, true),
                ("TORCH_CPU_BUILD", CheckStatus::Fail, true),
            ],
        );
        let t = render_table("smoke test of img", &r, false);
        assert!(t.starts_with("smoke test of img\n"), "{t}");
        assert!(t.contains("TORCH_CPU_BUILD"), "{t}");
        let x = junit_xml(&[
            ("img".into(), SuiteResult::Report(&r)),
            ("img-dev".into(), SuiteResult::Report(&r)),
        ]);
        assert!(x.contains("<failure"), "{x}");
        assert!(x.contains("TORCH_CPU_BUILD"));
        let e = junit_xml(&[(
            "img".into(),
            SuiteResult::Error {
                code: "NO_GPU_RUNTIME",
                message: "no gpu".into(),
            },
        )]);
        assert!(e.contains("<error") && e.contains("NO_GPU_RUNTIME"), "{e}");
    }
}
