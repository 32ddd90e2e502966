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
    let started = std::time::Instant::now();
    let out = smoke_into(torch.path(), &junit);
    let err = stderr_of(&out);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "it waited: {err}"
    );
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
