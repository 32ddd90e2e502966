//! `envbuild schema`: the spec's JSON Schema, checked with a real validator, check-jsonschema
//! (PyPI; `.ci/run` installs it, pinned): every example spec (`specs/*/envbuild.toml`, turned
//! into JSON), the YAML spec of docs/spec.md and every spec in the docs' examples validate, and
//! an unknown key and a wrong type are refused. Where the validator is missing the test says
//! why and passes, except under `CI=true`, where it fails (CI must not skip it).

use crate::support::{envbuild, fixture, root, stderr_of, stdout_of, tempdir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this run is CI's (`CI` set to anything but empty, `false` or `0`).
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `python3 -m check_jsonschema`, when this machine has it.
fn validator() -> Option<Command> {
    let found = Command::new("python3")
        .args(["-m", "check_jsonschema", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    found.then(|| {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "check_jsonschema"]);
        cmd
    })
}

/// The validator, or `None` after saying why the test does not run (a failure in CI).
fn validator_or_skip(test: &str) -> Option<Command> {
    let v = validator();
    if v.is_none() {
        let why = "check-jsonschema is not installed: python3 -m pip install \
                   check-jsonschema==0.39.0 (.ci/run does)";
        assert!(!in_ci(), "{test}: {why} (CI=true: this test must not skip)");
        eprintln!("skipped: {why}");
    }
    v
}

/// `envbuild schema`, written to `dir/envbuild.schema.json`.
fn schema_file(dir: &Path) -> PathBuf {
    let out = envbuild().arg("schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let path = dir.join("envbuild.schema.json");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// A TOML spec as the JSON document the schema describes (the same data model).
fn toml_as_json(text: &str, origin: &str) -> String {
    let value: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{origin}: {e}"));
    serde_json::to_string_pretty(&value).unwrap()
}

/// The fenced blocks of `lang` in a markdown text.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&fence) {
        let body = &rest[at + fence.len()..];
        let end = body.find("\n```").map_or(body.len(), |e| e + 1);
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

/// The docs' spec examples: every TOML block of the README and docs/, and the YAML blocks
/// that are specs (docs/ci.md's are CI workflows).
fn doc_examples() -> Vec<(String, String, bool)> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        for (i, b) in blocks(&text, "toml").into_iter().enumerate() {
            out.push((format!("{name} toml block {i}"), b.to_string(), false));
        }
        for (i, b) in blocks(&text, "yaml").into_iter().enumerate() {
            if b.lines().any(|l| l.starts_with("pytorch:")) {
                out.push((format!("{name} yaml block {i}"), b.to_string(), true));
            }
        }
    }
    out
}

/// Run the validator on `files` against `schema`: (passed, what it said).
fn validate(mut v: Command, schema: &Path, files: &[PathBuf]) -> (bool, String) {
    let out = v
        .arg("--schemafile")
        .arg(schema)
        .args(files)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!("{}{}", stdout_of(&out), stderr_of(&out)),
    )
}

#[test]
fn every_example_spec_and_every_docs_spec_validates() {
    let Some(v) = validator_or_skip("every_example_spec_and_every_docs_spec_validates") else {
        return;
    };
    let tmp = tempdir();
    let schema = schema_file(tmp.path());
    let mut files = Vec::new();
    let mut specs = 0;
    for spec in crate::support::example_specs() {
        let text = std::fs::read_to_string(&spec).unwrap();
        let name = spec
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        let json = tmp.path().join(format!("spec-{name}.json"));
        std::fs::write(&json, toml_as_json(&text, &spec.display().to_string())).unwrap();
        files.push(json);
        specs += 1;
    }
    let (mut toml_docs, mut yaml_docs) = (0, 0);
    for (i, (origin, text, yaml)) in doc_examples().into_iter().enumerate() {
        let path = if yaml {
            yaml_docs += 1;
            let p = tmp.path().join(format!("doc-{i}.yaml"));
            std::fs::write(&p, &text).unwrap();
            p
        } else {
            toml_docs += 1;
            let p = tmp.path().join(format!("doc-{i}.json"));
            std::fs::write(&p, toml_as_json(&text, &origin)).unwrap();
            p
        };
        files.push(path);
    }
    assert!(
        specs >= 7 && toml_docs >= 2 && yaml_docs >= 1,
        "{specs} specs, {toml_docs} TOML and {yaml_docs} YAML doc examples"
    );
    let (ok, said) = validate(v, &schema, &files);
    assert!(ok, "the schema refuses a spec envbuild accepts:\n{said}");
}

/// The YAML example of docs/spec.md is the same spec as specs/torch29-cu128: the same lock.
#[test]
fn the_yaml_example_of_the_spec_page_locks_like_its_toml() {
    let text = std::fs::read_to_string(root().join("docs/spec.md")).unwrap();
    let yaml = blocks(&text, "yaml")
        .into_iter()
        .find(|b| b.contains("name: torch29-cu128"))
        .expect("a YAML spec in docs/spec.md");
    let tmp = tempdir();
    std::fs::write(tmp.path().join("envbuild.yaml"), yaml).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(tmp.path().join("envbuild.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("envbuild.lock")).unwrap(),
        std::fs::read_to_string(root().join("specs/torch29-cu128/envbuild.lock")).unwrap()
    );
}

/// What the parser refuses, the schema refuses: an unknown key (top level, in a section, in
/// YAML) and a wrong type (a version as a number); each file alone, so each must fail.
#[test]
fn the_validator_refuses_an_unknown_key_and_a_wrong_type() {
    let Some(_) = validator_or_skip("the_validator_refuses_an_unknown_key_and_a_wrong_type") else {
        return;
    };
    let tmp = tempdir();
    let schema = schema_file(tmp.path());
    let cases = [
        ("unknown-key.toml", "unknown key"),
        ("unknown-target-key.toml", "unknown key in [target]"),
        ("wrong-type.toml", "python = 3.10"),
    ];
    for (file, what) in cases {
        let text = std::fs::read_to_string(fixture(&format!("errors/{file}"))).unwrap();
        let json = tmp.path().join(format!("{file}.json"));
        std::fs::write(&json, toml_as_json(&text, file)).unwrap();
        let (ok, said) = validate(validator().unwrap(), &schema, &[json]);
        assert!(
            !ok,
            "{what}: the schema accepts what envbuild refuses:\n{said}"
        );
    }
    let yaml = fixture("errors/yaml-unknown-key.yml");
    let (ok, said) = validate(validator().unwrap(), &schema, &[yaml]);
    assert!(!ok, "an unknown YAML key is accepted:\n{said}");
    // And the parser refuses each of them too (the same defects).
    for file in [
        "unknown-key.toml",
        "unknown-target-key.toml",
        "wrong-type.toml",
    ] {
        let out = envbuild()
            .arg("lock")
            .arg(fixture(&format!("errors/{file}")))
            .arg("--out")
            .arg(tmp.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{file}");
    }
}

#[test]
fn the_schema_is_draft_2020_12_and_deterministic() {
    let a = envbuild().arg("schema").output().unwrap();
    let b = envbuild().arg("schema").output().unwrap();
    assert_eq!(a.stdout, b.stdout);
    let doc: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(
        doc["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(doc["additionalProperties"], false);
    // Ranges for the core keys are strings; the companions take a flag or a version.
    assert_eq!(doc["properties"]["pytorch"]["type"], "string");
    assert_eq!(
        doc["properties"]["torchvision"]["type"],
        serde_json::json!(["boolean", "string"])
    );
}
