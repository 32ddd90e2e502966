//! Ranges on the core keys: the founding example locks (pytorch channel 2.5.1, pytorch-cuda
//! 11.8, Python 3.10) with `[choices]`, `--locked` holds the choice, `--upgrade` chooses again,
//! and `explain` shows the weighing.

use crate::support::*;
use std::fs;

#[test]
fn the_founding_example_locks_to_the_channels_last_release_and_records_why() {
    let dir = tempdir();
    let spec = fixture("choose/founding/envbuild.toml");
    let out = envbuild()
        .args(["lock", "--no-closure", "--out"])
        .arg(dir.path())
        .arg(&spec)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("note[CHOSEN]: pytorch = \"2.5.1\""), "{err}");
    let lock = fs::read_to_string(dir.path().join("envbuild.lock")).unwrap();
    for want in [
        "torch = \"2.5.1\"",
        "python = \"3.10\"",
        "pytorch::pytorch-cuda=11.8",
        "[choices.pytorch]",
        "chosen = \"2.5.1\"",
    ] {
        assert!(lock.contains(want), "{want} in\n{lock}");
    }
    // --locked holds the choice; --upgrade chooses again (the same, here) and writes nothing new.
    for extra in ["--locked", "--upgrade"] {
        let out = envbuild()
            .args(["lock", "--no-closure", extra, "--out"])
            .arg(dir.path())
            .arg(&spec)
            .output()
            .unwrap();
        assert!(out.status.success(), "{extra}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains("is up to date"), "{extra}");
    }
}

#[test]
fn a_range_nothing_satisfies_is_refused_with_a_hint_that_locks() {
    let out = envbuild()
        .args(["lock", "--no-closure"])
        .arg(fixture("errors/no-matching-build.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("error[NO_MATCHING_BUILD]"), "{err}");
    assert!(
        err.contains("hint: use pytorch = \"2.7.1\", cuda = \"11.8\""),
        "{err}"
    );
}

#[test]
fn explain_marks_the_chosen_candidate() {
    let out = envbuild()
        .args(["explain", "--top", "3"])
        .arg(fixture("choose/founding/envbuild.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    insta::assert_snapshot!("explain-founding", stdout_of(&out));
    let out = envbuild()
        .args(["explain", "--all", "--format", "json"])
        .arg(fixture("choose/founding/envbuild.toml"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    let chosen = v["chosen"].as_u64().unwrap() as usize;
    assert_eq!(v["candidates"][chosen]["pytorch"], "2.5.1");
    // The channel ends at 2.5.1: 2.6.0 is weighed and fails on its build.
    let c = v["candidates"].as_array().unwrap();
    assert!(c
        .iter()
        .any(|c| c["pytorch"] == "2.6.0" && c["build"]["verdict"] == "fail"));
}

/// The fenced blocks of a markdown text: (info string, text), in order.
fn fenced(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end().strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some("")) => out.extend(current.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

#[test]
fn the_spec_pages_range_examples_choose_what_they_show() {
    let page = fs::read_to_string(root().join("docs/spec.md")).unwrap();
    let start = page
        .find("\n## Ranges\n")
        .expect("docs/spec.md has a Ranges section");
    let rest = &page[start + 1..];
    let section = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3)];
    let blocks = fenced(section);
    let mut checked = 0;
    for pair in blocks.windows(2) {
        let [(lang, spec), (next, shown)] = pair else {
            continue;
        };
        if lang != "toml" || next != "text" {
            continue;
        }
        let dir = tempdir();
        let path = dir.path().join("envbuild.toml");
        fs::write(&path, spec).unwrap();
        let out = envbuild()
            .args(["lock", "--no-closure"])
            .arg(&path)
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert!(out.status.success(), "{spec}\n{err}");
        let notes: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("note[CHOSEN]"))
            .collect();
        let want: Vec<&str> = shown.lines().collect();
        assert_eq!(notes, want, "docs/spec.md shows other choices for\n{spec}");
        checked += 1;
    }
    assert!(checked >= 5, "{checked} examples");
}

#[test]
fn cuda_version_is_in_the_schema_and_its_errors_point_at_it() {
    let out = envbuild().arg("schema").output().unwrap();
    let schema: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(
        schema["properties"]["cuda-version"]["type"], "string",
        "{schema}"
    );
    // conda-forge's 2.5.1 has no CUDA 12.8 build: the error sits at `cuda-version`, and the
    // hint that moves to the PyTorch index says to drop it.
    let dir = tempdir();
    let spec = dir.path().join("envbuild.toml");
    fs::write(
        &spec,
        "name = \"cv\"\npython = \"3.12\"\npytorch = \"2.5.1\"\ncuda-version = \"12.8\"\n\n[target]\ndriver = \"570.133.20\"\ngpus = [\"L4\"]\n",
    )
    .unwrap();
    let out = envbuild()
        .args(["lock", "--no-closure"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("error[NO_SUCH_VARIANT]"), "{err}");
    assert!(err.contains("envbuild.toml:4:1"), "{err}");
    assert!(err.contains("without cuda-version"), "{err}");
}
