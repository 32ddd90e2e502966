//! Shared helpers for the integration tests.

use std::path::{Path, PathBuf};

/// The binary under test.
pub fn envbuild() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("envbuild").expect("binary built");
    // Never let the caller's environment change what a test sees.
    c.env_remove("ENVBUILD_TABLE")
        .env_remove("ENVBUILD_TEMPLATES");
    c
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every example spec: `specs/<name>/envbuild.toml`, sorted.
pub fn example_specs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo().join("specs"))
        .expect("specs/")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("envbuild.toml"))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    assert!(out.len() >= 4, "specs/ should hold the example specs");
    out
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Files under `dir` (names only), sorted.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
