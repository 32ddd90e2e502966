//! The README is the manual: its example spec locks, its commands exist, every diagnostic
//! code envbuild can emit is documented in it, and every test its Guarantees cite exists.

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

/// The test names the README's "Guarantees" section cites after "Held by", per bullet.
fn cited_tests(text: &str) -> Vec<String> {
    let start = text
        .find("\n## Guarantees\n")
        .expect("a Guarantees section");
    let section = &text[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    for heading in [
        "**Writes**",
        "**Reads**",
        "**Paths that leave the project**",
        "**Outputs and signals**",
        "**One validation**",
        "**Tests that tell the truth**",
    ] {
        assert!(section.contains(heading), "Guarantees lacks {heading}");
    }
    let mut names = Vec::new();
    for bullet in section.split("\n- ").skip(1) {
        let bullet = bullet.split("\n\n").next().unwrap();
        let Some((_, held)) = bullet.split_once("Held by") else {
            continue;
        };
        for (i, part) in held.split('`').enumerate() {
            if i % 2 == 1 {
                names.push(part.to_string());
            }
        }
    }
    names
}

/// Every `fn NAME(` in the .rs files under `dir`.
fn functions_in(dir: &std::path::Path, out: &mut std::collections::BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            functions_in(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            for piece in text.split("fn ").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if piece[name.len()..].starts_with('(') {
                    out.insert(name);
                }
            }
        }
    }
}

#[test]
fn every_test_the_guarantees_cite_exists() {
    let cited = cited_tests(&readme());
    // The parse found the citations (a broken parse must not pass with nothing to check).
    assert!(
        cited.len() >= 20,
        "only {} citations found: {cited:?}",
        cited.len()
    );
    let mut defined = std::collections::BTreeSet::new();
    functions_in(&root().join("tests"), &mut defined);
    functions_in(&root().join("src"), &mut defined);
    let missing: Vec<&String> = cited
        .iter()
        .filter(|n| {
            !n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                || !defined.contains(*n)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the README's Guarantees cite tests that do not exist: {missing:?}"
    );
}
