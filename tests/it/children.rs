//! Child processes: at the time limit, or when envbuild is interrupted, the child's whole process
//! group is killed, so a grandchild that holds the output pipes can neither keep envbuild
//! waiting nor outlive it.

use envbuild::infra::proc::{run_with_timeout, Output, RunError};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A marker no other process on the machine has in its command line.
fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    // `sleep` takes fractional seconds: the fraction is the marker.
    format!("1000.{}{nanos:09}", std::process::id())
}

/// Pids of live (not zombie) processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A killed process not yet reaped has an empty command line.
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// Wait up to 5 s for every process with `marker` to be gone; kill them and fail if not.
fn assert_none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for pid in &left {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!("processes left running: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `run_with_timeout` on a thread, failing (not hanging) when it takes longer than `within`.
fn run_bounded(script: &str, limit: Duration, within: Duration) -> Result<Output, RunError> {
    let (tx, rx) = mpsc::channel();
    let script = script.to_string();
    std::thread::spawn(move || {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        let _ = tx.send(run_with_timeout(cmd, limit));
    });
    rx.recv_timeout(within)
        .unwrap_or_else(|_| panic!("run_with_timeout did not return within {within:?}"))
}

#[test]
fn a_grandchild_holding_the_pipes_is_killed_at_the_limit() {
    let m = marker();
    let started = Instant::now();
    let r = run_bounded(
        &format!("echo started; sleep {m} & sleep {m}"),
        Duration::from_millis(500),
        Duration::from_secs(15),
    );
    match r {
        Err(RunError::TimedOut { stdout, .. }) => assert_eq!(stdout, "started\n"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_none_left(&m);
}

#[test]
fn a_background_grandchild_of_a_finished_child_is_bounded_by_the_limit() {
    let m = marker();
    let started = Instant::now();
    let out = run_bounded(
        &format!("sleep {m} & echo done; exit 3"),
        Duration::from_secs(1),
        Duration::from_secs(15),
    )
    .expect("the child itself finished");
    assert_eq!(out.code, Some(3));
    assert_eq!(out.stdout, "done\n");
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_none_left(&m);
}

/// The signals this test sends, back to their default disposition in the child before it runs
/// envbuild: a test started under `nohup` (or by a CI runner that ignores SIGHUP, or from a
/// shell that ignores SIGINT in background jobs) hands its children those signals ignored, and
/// envbuild rightly keeps an ignored signal ignored.
fn with_default_signals(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, the only kind of call allowed between fork and
    // exec; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}

#[test]
fn interrupting_envbuild_smoke_kills_the_interpreter_and_its_children() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python3");
    std::fs::write(
        &python,
        format!("#!/bin/sh\necho running >&2\nsleep {m} &\nexec sleep {m}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for signal in ["INT", "TERM", "HUP"] {
        let mut child =
            with_default_signals(&mut Command::new(assert_cmd::cargo::cargo_bin("envbuild")))
                .arg("smoke")
                .arg("--python")
                .arg(&python)
                .args(["--gpus", "none", "--timeout", "600"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while processes_with(&m).len() < 2 {
            assert!(
                Instant::now() < deadline,
                "the stand-in interpreter did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("envbuild smoke did not end after SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // It ends as the signal ends a program, as before the child had its own group.
        use std::os::unix::process::ExitStatusExt;
        assert!(status.signal().is_some(), "SIG{signal}: {status:?}");
        assert_none_left(&m);
    }
}
