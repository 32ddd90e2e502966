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
