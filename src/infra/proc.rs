//! Run a child process with a time limit and capture its output. This module performs process
//! I/O; every child envbuild runs (uv, Python, `nvidia-smi`, credential helpers) is made by
//! [`command`] and run here, from an empty working folder of its own.
//!
//! The child runs in its own process group, so that at the limit the whole group is killed: a
//! grandchild that holds the output pipes would otherwise keep the readers (and envbuild)
//! waiting. Being in another group, the child no longer gets the terminal's Ctrl-C: while it
//! runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT kill its group first and are then raised again
//! with the disposition envbuild had before (by default, ending envbuild as they always did).

use crate::infra::signals as forward;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
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
    /// Waiting on it failed, or envbuild was interrupted by a signal it handles itself.
    Wait(std::io::Error),
}

/// Output beyond this is dropped: a report is a few KiB and nothing legitimate prints more.
const MAX_CAPTURE: u64 = 16 * 1024 * 1024;
/// How long the readers may take to see the pipes close once the group was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);

/// One pipe drained on a thread into a shared buffer, so that what was read can be taken even
/// if something outside the group still holds the pipe open.
struct Reader {
    buf: Arc<Mutex<Vec<u8>>>,
    thread: thread::JoinHandle<()>,
}

impl Reader {
    fn new<R: Read + Send + 'static>(r: Option<R>) -> Reader {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let shared = buf.clone();
        let thread = thread::spawn(move || {
            let Some(r) = r else { return };
            let mut r = r.take(MAX_CAPTURE);
            let mut chunk = [0u8; 8192];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let Ok(mut b) = shared.lock() {
                    b.extend_from_slice(&chunk[..n]);
                }
            }
        });
        Reader { buf, thread }
    }

    fn done(&self) -> bool {
        self.thread.is_finished()
    }

    /// What was read, once the pipe closed or `grace` passed (the thread is then left behind).
    fn finish(self, grace: Duration) -> String {
        let until = Instant::now() + grace;
        while !self.done() && Instant::now() < until {
            thread::sleep(POLL);
        }
        let bytes = match self.buf.lock() {
            Ok(b) => b.clone(),
            Err(p) => p.into_inner().clone(),
        };
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// SIGKILL every process in the group `pgid`.
fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Kill the group, reap the child, and raise `signal` again now that envbuild's own
/// disposition for it is back.
fn stop_for_signal(
    child: &mut std::process::Child,
    pgid: i32,
    guard: forward::Guard,
    signal: i32,
) -> RunError {
    kill_group(pgid);
    let _ = child.wait();
    // The group is dead: nothing writes into the run's temporary folders any more. Removed
    // before the signal is raised again, which may end envbuild without unwinding.
    crate::infra::scratch::remove_all();
    drop(guard);
    forward::raise(signal);
    RunError::Wait(std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        format!("interrupted by signal {signal}"),
    ))
}

/// Run `cmd` with stdin closed, stdout and stderr captured, killing its process group after
/// `limit`. The limit also covers anything the child started that keeps its pipes open after
/// the child itself exited: at the limit the group is killed and the child's result returned.
pub fn run_with_timeout(cmd: Command, limit: Duration) -> Result<Output, RunError> {
    run_fed(cmd, None, limit)
}

/// Like [`run_with_timeout`], with `input` written to the child's stdin (then closed).
pub fn run_with_input(cmd: Command, input: &[u8], limit: Duration) -> Result<Output, RunError> {
    run_fed(cmd, Some(input), limit)
}

/// `name` as a program to run: a path (it holds a `/`) made absolute against envbuild's
/// folder, a plain name looked up in the absolute folders of `PATH` only. A relative `PATH`
/// entry (`.`, an empty one, `bin`) is skipped, as Go's `exec.LookPath` does: it would find a
/// program planted in the checkout envbuild runs in. `None` when there is none.
pub fn find_program(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::path::Path::new(name);
    if name.as_encoded_bytes().contains(&b'/') {
        return Some(if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().ok()?.join(path)
        });
    }
    if name.is_empty() {
        return None;
    }
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&dirs)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A `Command` for `name`, found by [`find_program`]; one that is not found fails to spawn with
/// `NotFound`, like a missing program, instead of being searched for where a checkout could
/// plant it. Every child process envbuild runs is made here.
pub fn command(name: impl AsRef<std::ffi::OsStr>) -> Command {
    match find_program(name.as_ref()) {
        Some(p) => Command::new(p),
        // A path that cannot exist: the spawn fails as "not found", naming nothing planted.
        None => Command::new("/nonexistent/envbuild-program-not-found"),
    }
}

fn run_fed(mut cmd: Command, input: Option<&[u8]>, limit: Duration) -> Result<Output, RunError> {
    // One folder of the child's own, removed even when a signal ends the run: its temporaries
    // (uv's, Python's) go there, and unless its caller chose one it is its working folder too,
    // so a program that reads its working folder (Python puts it first on `sys.path` for `-c`,
    // tools read their config from it) never sees the checkout envbuild was started in.
    let tmp = crate::infra::scratch::tempdir().map_err(RunError::Spawn)?;
    cmd.env("TMPDIR", tmp.path());
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(tmp.path());
    }
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    let guard = forward::Guard::install();
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    // The child leads its own group: the group id is its pid.
    let pgid = child.id() as i32;
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let out = Reader::new(child.stdout.take());
    let err = Reader::new(child.stderr.take());
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A child that exits without reading is not an error here: its exit status tells.
        let _ = std::io::Write::write_all(&mut stdin, input);
    }
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(signal) = forward::take() {
            return Err(stop_for_signal(&mut child, pgid, guard, signal));
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                // Killed before it is reaped: the group id cannot have been reused.
                kill_group(pgid);
                let _ = child.wait();
                break None;
            }
            Ok(None) => thread::sleep(POLL),
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(RunError::Wait(e));
            }
        }
    };
    // The child is gone; what it started may still hold the pipes open until the deadline.
    while status.is_some() && !(out.done() && err.done()) {
        if let Some(signal) = forward::take() {
            return Err(stop_for_signal(&mut child, pgid, guard, signal));
        }
        if Instant::now() >= deadline {
            kill_group(pgid);
            break;
        }
        thread::sleep(POLL);
    }
    drop(guard);
    // A signal caught after the last look is not lost: it meets envbuild's own disposition.
    if let Some(signal) = forward::take() {
        forward::raise(signal);
    }
    let stdout = out.finish(DRAIN_GRACE);
    let stderr = err.finish(DRAIN_GRACE);
    match status {
        Some(status) => Ok(Output {
            code: status.code(),
            stdout,
            stderr,
        }),
        None => Err(RunError::TimedOut { stdout, stderr }),
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
