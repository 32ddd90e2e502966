//! Run a child process with a time limit and capture its output. This module performs process
//! I/O; it is used by `smoke` (the Python interpreter) and `host` (`nvidia-smi`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What a finished child left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug)]
pub enum RunError {
    /// The program could not be started (not found, not executable, ...).
    Spawn(std::io::Error),
    /// It ran past the limit and was killed; whatever it printed so far.
    TimedOut { stdout: String, stderr: String },
    /// Waiting on it failed.
    Wait(std::io::Error),
}

/// Output beyond this is dropped: a report is a few KiB and nothing legitimate prints more.
const MAX_CAPTURE: u64 = 16 * 1024 * 1024;

fn reader<R: Read + Send + 'static>(r: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(r) = r {
            let _ = r.take(MAX_CAPTURE).read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Run `cmd` with stdin closed, stdout and stderr captured, killing it after `limit`.
pub fn run_with_timeout(cmd: Command, limit: Duration) -> Result<Output, RunError> {
    run_fed(cmd, None, limit)
}

/// Like [`run_with_timeout`], with `input` written to the child's stdin (then closed).
pub fn run_with_input(cmd: Command, input: &[u8], limit: Duration) -> Result<Output, RunError> {
    run_fed(cmd, Some(input), limit)
}

fn run_fed(mut cmd: Command, input: Option<&[u8]>, limit: Duration) -> Result<Output, RunError> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A child that exits without reading is not an error here: its exit status tells.
        let _ = std::io::Write::write_all(&mut stdin, input);
    }
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(());
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Wait(e));
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Ok(status) => Ok(Output {
            code: status.code(),
            stdout,
            stderr,
        }),
        Err(()) => Err(RunError::TimedOut { stdout, stderr }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_exit_code() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run_with_timeout(cmd, Duration::from_secs(10)).unwrap();
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
    }

    #[test]
    fn kills_a_child_that_runs_too_long() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let t0 = Instant::now();
        match run_with_timeout(cmd, Duration::from_millis(300)) {
            Err(RunError::TimedOut { stdout, .. }) => assert_eq!(stdout, "started\n"),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let cmd = Command::new("/nonexistent/envbuild-test-program");
        assert!(matches!(
            run_with_timeout(cmd, Duration::from_secs(1)),
            Err(RunError::Spawn(_))
        ));
    }
}
