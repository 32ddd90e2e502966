//! The README is the manual: its example spec locks, its commands exist, and every diagnostic
//! code envbuild can emit is documented in it.

use crate::support::*;
use std::fs;

fn readme() -> String {
    fs::read_to_string(root().join("README.md")).unwrap()
}

#[test]
fn the_readme_spec_example_locks() {
    let text = readme();
    let start = text
        .find("```toml\nname = ")
        .expect("a spec example in the README")
        + "```toml\n".len();
    let end = start + text[start..].find("```").unwrap();
    let tmp = tempdir();
    fs::write(tmp.path().join("envbuild.toml"), &text[start..end]).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(tmp.path().join("envbuild.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn every_diagnostic_code_is_documented() {
    let text = readme();
    let mut missing = Vec::new();
    for code in envbuild::app::codes::all() {
        if !text.contains(&format!("`{code}`")) {
            missing.push(code);
        }
    }
    assert!(
        missing.is_empty(),
        "codes missing from the README: {missing:?}"
    );
}

#[test]
fn the_quick_start_commands_are_the_ones_ci_runs() {
    let text = readme();
    assert!(text.contains("cargo test --locked"));
    let ci = fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.contains("cargo test --locked"));
    assert!(text.contains("envbuild lock specs/torch-gpu-env/envbuild.toml"));
    assert!(root().join("specs/torch-gpu-env/envbuild.toml").is_file());
}
