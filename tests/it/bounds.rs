//! Bounds and signals (issue 38, classes 5, 11 and 13): a malformed proxy stops the run before
//! anything connects; a signal during a lock leaves no temporary folder behind; an output that
//! is a FIFO nobody reads is refused instead of hanging.

use crate::support::closure::*;
use crate::support::*;
use std::fs;

/// A proxy variable that names no proxy (a typo, a stray space, an unknown scheme, a path) is
/// refused with `PROXY_INVALID` before uv or envbuild connects, in upper and lower case, and no
/// lock is written: it is never dropped silently in favour of a direct connection.
#[test]
fn a_malformed_proxy_is_refused_before_anything_connects() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("p1", "3.13", "2.28", idx.path(), ""),
    );
    let cases = [
        ("HTTPS_PROXY", "http://proxy.example:99999"),
        ("https_proxy", "http://proxy.example:3128 "),
        ("HTTP_PROXY", "ftp://proxy.example:21"),
        ("ALL_PROXY", "http://proxy.example:port"),
        ("all_proxy", "http://"),
    ];
    for (var, value) in cases {
        let out = envbuild()
            .current_dir(work.path())
            .env(var, value)
            .args(["lock", "envbuild.toml"])
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{var}={value}: {err}");
        assert!(err.contains("PROXY_INVALID"), "{var}={value}: {err}");
        assert!(err.contains(var) && err.contains("hint:"), "{err}");
        assert!(!work.path().join("envbuild.lock").exists(), "{var}={value}");
    }
    // A well-formed proxy that the local index does not need changes nothing.
    let out = envbuild()
        .current_dir(work.path())
        .env("HTTPS_PROXY", "http://proxy.example:3128")
        .env("NO_PROXY", "*")
        .args(["lock", "envbuild.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let _ = fs::remove_file(work.path().join("envbuild.lock"));
}

/// `envbuild smoke` with the stand-in torch, its JUnit file at `junit`, stopped after 60 s.
fn smoke_into(torch: &std::path::Path, junit: &std::path::Path) -> std::process::Output {
    envbuild()
        .args(["smoke", "--python", "python3", "--junit"])
        .arg(junit)
        .env("PYTHONPATH", torch)
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// A `--junit` FIFO that nothing reads is refused at once with a clear error, never waited on
/// (the job summary's FIFO: `infra::fs`'s `a_fifo_nobody_reads_is_refused_and_one_read_is_written`);
/// one that is read gets the whole file.
#[test]
fn an_output_fifo_nobody_reads_is_refused_at_once() {
    let torch = fake_torch("cuda-no-driver");
    let dir = tempdir();
    let junit = dir.path().join("junit.xml");
    mkfifo(&junit);
    let out = smoke_into(torch.path(), &junit);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("IO_ERROR") && err.contains("nothing reads"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");

    // With a reader, it is written through whole.
    let path = junit.clone();
    let xml = std::thread::spawn(move || fs::read_to_string(path).unwrap());
    let out = smoke_into(torch.path(), &junit);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let xml = xml.join().unwrap();
    assert!(xml.contains("<testcase name=\"cuda_available\""), "{xml}");
    assert!(xml.trim_end().ends_with("</testsuites>"), "{xml}");
}

/// A local index that accepts connections and never answers: a resolution against it waits.
fn stalling_index() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    port
}

/// Every entry under `dir`, as paths relative to it.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        found.push(e.file_name().to_string_lossy().into_owned());
    }
    found.sort();
    found
}

/// SIGINT, SIGTERM or SIGHUP while uv resolves a closure ends `lock` by that signal (its child
/// group killed) and leaves no temporary folder behind, neither envbuild's nor uv's, in the
/// `TMPDIR` it was given; no lock is written.
#[test]
fn a_signal_during_a_lock_leaves_no_temporary_folder() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::time::{Duration, Instant};
    let port = stalling_index();
    for (name, signal) in [
        ("TERM", libc::SIGTERM),
        ("INT", libc::SIGINT),
        ("HUP", libc::SIGHUP),
    ] {
        let work = tempdir();
        let tmp = tempdir();
        let spec = closure_spec("s1", "3.13", "2.28", std::path::Path::new("/x"), "").replace(
            "file:///x/simple",
            &format!("http://127.0.0.1:{port}/simple"),
        );
        write(work.path(), "envbuild.toml", &spec);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"));
        cmd.current_dir(work.path())
            .args(["lock", "envbuild.toml"])
            .env("TMPDIR", tmp.path())
            .env_remove("ENVBUILD_PYTHON")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: signal(2) only, between fork and exec: a test harness that ignores these
        // signals would hand them on ignored, and envbuild keeps an ignored signal ignored.
        unsafe {
            cmd.pre_exec(|| {
                for s in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                    libc::signal(s, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        // uv is waiting on the index once its own temporary folder is there too.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !fs::read_dir(tmp.path()).unwrap().flatten().any(|e| {
            fs::read_dir(e.path()).is_ok_and(|mut d| d.any(|f| f.is_ok_and(|f| f.path().is_dir())))
        }) {
            assert!(
                Instant::now() < deadline,
                "uv never started: {:?}",
                entries(tmp.path())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) on the child this test started and has not reaped.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("lock did not end after SIG{name}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.signal(), Some(signal), "SIG{name}: {status:?}");
        assert_eq!(
            entries(tmp.path()),
            Vec::<String>::new(),
            "SIG{name} left these"
        );
        assert!(!work.path().join("envbuild.lock").exists());
    }
}

/// A file an environment variable names (`ENVBUILD_PROC_DRIVER_VERSION` here; `DOCKER_CONFIG`,
/// the CA bundle and the verdict cache go through the same reader) that is a FIFO nobody
/// writes or a device without end is refused without blocking or reading on: `doctor` ends
/// promptly and says why the file was not read.
#[test]
fn a_file_named_by_the_environment_is_read_bounded_never_blocking() {
    let dir = tempdir();
    let fifo = dir.path().join("version");
    mkfifo(&fifo);
    for named in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
        let out = envbuild()
            .arg("doctor")
            .env("ENVBUILD_DOCKER_CHECK", "0")
            .env("ENVBUILD_NO_NVML", "1")
            .env("ENVBUILD_NVIDIA_SMI", "none")
            .env("ENVBUILD_PROC_DRIVER_VERSION", named)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr_of(&out)
        );
        assert!(out.status.code().is_some(), "{}: {all}", named.display());
        assert!(
            all.contains("not a regular file"),
            "{}: {all}",
            named.display()
        );
    }
}

/// Template expressions that build far more than they are charged for (a list of one long
/// string repeated, joined, stringified, sorted, compared; a huge repetition or range) stop
/// with a clear error in bounded time and memory, under a 4 GiB address-space limit where
/// they used to abort the process.
#[test]
fn a_template_that_allocates_without_end_is_stopped_within_its_budget() {
    use std::os::unix::process::CommandExt;
    let lock = root().join("specs/torch-gpu-env/envbuild.lock");
    let budget = [
        "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | join | length }}",
        "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | join(s) | length }}",
        "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | string | length }}",
        "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | sort | list | length }}",
        "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | min | length }}",
        "{% set s = 'x' * 100000 %}{{ ([s] * 100000) | map('upper') | join | length }}",
        "{{ 'x' * 1000000000 }}",
        "{{ range(10 ** 9) | list | length }}",
        "{% set ns = namespace(s='x' * 10000000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    ];
    for body in budget {
        let tmp = tempdir();
        let templates = tmp.path().join("t");
        fs::create_dir(&templates).unwrap();
        write(&templates, "Dockerfile.j2", body);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"));
        cmd.arg("render")
            .arg(&lock)
            .arg("--templates")
            .arg(&templates)
            .arg("--out")
            .arg(tmp.path().join("r"));
        // SAFETY: setrlimit(2) only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 4 << 30,
                    rlim_max: 4 << 30,
                };
                libc::setrlimit(libc::RLIMIT_AS, &limit);
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{body}: {err}");
        assert!(
            err.contains("TEMPLATE_BUDGET") && err.contains("hint:"),
            "{body}: {err}"
        );
        assert!(!tmp.path().join("r").exists(), "{body}");
    }
}
