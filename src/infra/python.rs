//! Runs the embedded smoke script with a Python interpreter: writes the script and its
//! expectations to a temporary directory, runs it under a time limit, parses its report.
//! Performs file and process I/O.

use crate::core::diag::{Diagnostic, Failure};
use crate::core::smoke::{
    codes, parse_output, stderr_tail, Expectations, Mode, SmokeReport, SCRIPT,
};
use crate::infra::proc::{self, RunError};
use std::path::Path;
use std::time::Duration;

/// Run the embedded script with `python` against `expectations`, killing it after `timeout`.
/// Writes the script and the expectations to a temporary directory (removed afterwards).
pub fn run_script(
    python: &str,
    expectations: &Expectations,
    mode: Mode,
    timeout: Duration,
) -> Result<SmokeReport, Failure> {
    let dir =
        crate::infra::scratch::tempdir().map_err(|e| Failure::io(Path::new("<temp dir>"), &e))?;
    let script = dir.path().join("envbuild_smoke.py");
    let expect = dir.path().join("expect.json");
    std::fs::write(&script, SCRIPT).map_err(|e| Failure::io(&script, &e))?;
    std::fs::write(&expect, expectations.to_json()).map_err(|e| Failure::io(&expect, &e))?;
    // From the script's own folder (not the checkout envbuild runs in), so nothing there is
    // imported; the environment is the user's: the interpreter is the one under test, with its
    // PYTHONPATH and user site-packages as the user configured them.
    let mut cmd = proc::command(python);
    cmd.current_dir(dir.path())
        .arg(&script)
        .arg("--expect")
        .arg(&expect)
        .arg("--mode")
        .arg(mode.as_str())
        // Never write __pycache__ into the user's environment.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    match proc::run_with_timeout(cmd, timeout) {
        Ok(out) => parse_output(&out.stdout, &out.stderr, out.code),
        Err(RunError::Spawn(e)) => Err(Failure::one(
            Diagnostic::error(
                codes::PYTHON_NOT_FOUND,
                format!("cannot run the Python interpreter `{python}`: {e}"),
            )
            .with_hint("pass the environment's interpreter, e.g. `--python .venv/bin/python`"),
        )),
        Err(RunError::TimedOut { stderr, .. }) => {
            let tail = stderr_tail(&stderr);
            let mut d = Diagnostic::error(
                codes::TIMEOUT,
                format!(
                    "the smoke test did not finish within {} s and was stopped",
                    timeout.as_secs_f64()
                ),
            );
            d.hint = Some(if tail.is_empty() {
                "a hung driver or a first-time CUDA JIT compile can do this; raise --timeout"
                    .to_string()
            } else {
                format!("raise --timeout if this is expected; its stderr ends with: {tail}")
            });
            Err(Failure::one(d))
        }
        Err(RunError::Wait(e)) => Err(Failure::bug(format!(
            "waiting for the smoke test failed: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_script_reports_a_missing_interpreter() {
        let e = run_script(
            "/nonexistent/envbuild-test/python3",
            &Expectations::default(),
            Mode::Cpu,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::PYTHON_NOT_FOUND);
        assert!(e.diagnostics[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("--python"));
    }

    #[test]
    fn run_script_kills_a_hung_interpreter() {
        // A stand-in "python" that never finishes.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("python");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'loading torch' >&2\nexec sleep 30\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let t0 = std::time::Instant::now();
        let e = run_script(
            fake.to_str().unwrap(),
            &Expectations::default(),
            Mode::Gpu,
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::TIMEOUT);
        assert!(e.to_string().contains("loading torch"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}
