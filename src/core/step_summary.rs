//! The Markdown table `envbuild image` and `envbuild test` append to a GitHub Actions job
//! summary (`GITHUB_STEP_SUMMARY`): one column per image (platform x variant), one row per
//! check, each cell the check's status and, where it did not pass, its code. The job page then
//! shows every platform's verdict side by side. This module performs no I/O.

use crate::core::report::Status;
use crate::core::smoke::SmokeReport;

/// One image's column.
#[derive(Debug, Clone)]
pub struct Column<'a> {
    /// The lock's platform (`linux-aarch64`), else the machine the report names, else `?`.
    pub platform: String,
    /// The variant (`runtime`, `dev`), else the image's name.
    pub variant: String,
    /// The image's tag, listed under the table.
    pub image: String,
    /// The report, or the coded error that kept the smoke test from giving one.
    pub outcome: Result<&'a SmokeReport, String>,
    pub passed: bool,
}

/// The variant an image tag names: `NAME:VARIANT-<hash12>` gives `VARIANT`; any other name is
/// kept whole.
pub fn variant_of(tag: &str) -> String {
    let Some((_, t)) = tag.rsplit_once(':') else {
        return tag.to_string();
    };
    match t.rsplit_once('-') {
        Some((v, h)) if h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()) => v.into(),
        _ => tag.to_string(),
    }
}

/// A table cell's text, with the characters that would end a cell or a line made harmless.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "**fail**",
        Status::Warn => "warn",
        Status::Skip => "skip",
    }
}

/// The summary of `command`'s smoke verdicts: a heading, the verdict row, one row per check (in
/// the order the first report that has it gives), then the images' tags.
pub fn markdown(command: &str, columns: &[Column<'_>]) -> String {
    let mut out = format!("### envbuild {}: smoke verdicts\n\n", cell(command));
    if columns.is_empty() {
        out.push_str("No image was tested.\n\n");
        return out;
    }
    let mut checks: Vec<&str> = Vec::new();
    for c in columns {
        if let Ok(r) = c.outcome {
            for check in &r.checks {
                if !checks.contains(&check.name.as_str()) {
                    checks.push(&check.name);
                }
            }
        }
    }
    out.push_str("| check |");
    for c in columns {
        out.push_str(&format!(" {} · {} |", cell(&c.platform), cell(&c.variant)));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(columns.len()));
    out.push_str("\n| **verdict** |");
    for c in columns {
        let v = match (&c.outcome, c.passed) {
            (Err(code), _) => format!("**error** `{}`", cell(code)),
            (Ok(_), true) => "**pass**".to_string(),
            (Ok(_), false) => "**fail**".to_string(),
        };
        out.push_str(&format!(" {v} |"));
    }
    out.push('\n');
    for name in &checks {
        out.push_str(&format!("| {} |", cell(name)));
        for c in columns {
            let found = c
                .outcome
                .as_ref()
                .ok()
                .and_then(|r| r.checks.iter().find(|k| k.name == *name));
            let text = match found {
                None => String::new(),
                Some(k) if k.code == "OK" => status_word(k.status).to_string(),
                Some(k) => format!("{} `{}`", status_word(k.status), cell(&k.code)),
            };
            out.push_str(&format!(" {text} |"));
        }
        out.push('\n');
    }
    out.push('\n');
    for c in columns {
        out.push_str(&format!(
            "- {} · {}: `{}`\n",
            cell(&c.platform),
            cell(&c.variant),
            cell(&c.image)
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::report::{Check, Verdict};

    fn check(name: &str, status: Status, code: &str) -> Check {
        Check {
            name: name.into(),
            status,
            code: code.into(),
            detail: "d".into(),
            required: true,
            value: None,
            unit: None,
            hint: None,
        }
    }

    fn report(checks: Vec<Check>) -> SmokeReport {
        SmokeReport {
            schema: 1,
            status: Verdict::Pass,
            mode: "cpu".into(),
            duration_s: 1.0,
            environment: Default::default(),
            checks,
        }
    }

    #[test]
    fn one_column_per_platform_and_variant_one_row_per_check() {
        let x86 = report(vec![
            check("python", Status::Pass, "OK"),
            check("platform", Status::Pass, "OK"),
        ]);
        let arm = report(vec![
            check("python", Status::Pass, "OK"),
            check("platform", Status::Fail, "PLATFORM_MISMATCH"),
            check("closure", Status::Warn, "CLOSURE_DRIFT"),
        ]);
        let cols = [
            Column {
                platform: "linux-64".into(),
                variant: "runtime".into(),
                image: "envbuild/a:runtime-0123456789ab".into(),
                outcome: Ok(&x86),
                passed: true,
            },
            Column {
                platform: "linux-aarch64".into(),
                variant: "runtime".into(),
                image: "envbuild/a:runtime-ba9876543210".into(),
                outcome: Ok(&arm),
                passed: false,
            },
            Column {
                platform: "linux-aarch64".into(),
                variant: "dev".into(),
                image: "x|y".into(),
                outcome: Err("ENGINE_ERROR".into()),
                passed: false,
            },
        ];
        let md = markdown("image", &cols);
        let want = "### envbuild image: smoke verdicts\n\n\
| check | linux-64 · runtime | linux-aarch64 · runtime | linux-aarch64 · dev |\n\
|---|---|---|---|\n\
| **verdict** | **pass** | **fail** | **error** `ENGINE_ERROR` |\n\
| python | pass | pass |  |\n\
| platform | pass | **fail** `PLATFORM_MISMATCH` |  |\n\
| closure |  | warn `CLOSURE_DRIFT` |  |\n\
\n\
- linux-64 · runtime: `envbuild/a:runtime-0123456789ab`\n\
- linux-aarch64 · runtime: `envbuild/a:runtime-ba9876543210`\n\
- linux-aarch64 · dev: `x\\|y`\n\n";
        assert_eq!(md, want);
    }

    #[test]
    fn variants_come_from_envbuild_tags_and_nothing_else() {
        assert_eq!(variant_of("envbuild/a:runtime-0123456789ab"), "runtime");
        assert_eq!(variant_of("reg:5000/a:dev-0123456789ab"), "dev");
        assert_eq!(variant_of("python:3.11"), "python:3.11");
        assert_eq!(variant_of("plain"), "plain");
        assert_eq!(
            markdown("test", &[]),
            "### envbuild test: smoke verdicts\n\nNo image was tested.\n\n"
        );
    }
}
