//! Test support shared by the `it` and `docker` test targets: the envbuild binary with a clean
//! environment, the repository's paths and example specs, temp files and scripts, stand-in
//! torch packages; and the fixtures both targets build on ([`closure`]: the made-up wheel index,
//! [`learn`]: tables that disagree with a real build, [`conda_channel`]: conda channels served
//! on 127.0.0.1, [`hint_apply`]: a hint applied to a spec). Performs I/O (files, processes).

pub mod closure;
pub mod conda_channel;
pub mod hint_apply;
pub mod learn;

use std::path::{Path, PathBuf};

/// The repository root (this crate sits at `tests/support`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support sits two levels below the root")
        .to_path_buf()
}

pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}
/// The envbuild binary with none of the caller's envbuild, Python-path or NVIDIA variables
/// (`ENVBUILD_UV` aside: it names the closure resolver, uv, where it is not on `PATH`).
pub fn envbuild() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("envbuild").expect("binary built");
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().to_string();
        if (k.starts_with("ENVBUILD_") && k != "ENVBUILD_UV")
            || k.starts_with("PYTHON")
            || k == "NVIDIA_VISIBLE_DEVICES"
            || k == "CUDA_VISIBLE_DEVICES"
        {
            cmd.env_remove(&k);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Every example spec: `specs/<name>/envbuild.toml`, sorted.
pub fn example_specs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("specs"))
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

/// A directory holding the stand-in torch of `variant` (see tests/fixtures/fake_torch.py).
pub fn fake_torch(variant: &str) -> tempfile::TempDir {
    let dir = tempdir();
    let status = std::process::Command::new("python3")
        .arg(fixture("fake_torch.py"))
        .arg("make")
        .arg(dir.path())
        .arg("--variant")
        .arg(variant)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "fake_torch.py make {variant} failed");
    dir
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write temp file");
    p
}

/// Write an executable shell script.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = write(dir, name, &format!("#!/bin/sh\n{body}"));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}
