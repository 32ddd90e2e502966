//! The flags and help texts that every command shares: `--expect-file`, `--gpus all|none`,
//! `--shm-size`, the exit-code section of `--help`, and the hidden old spellings that still work
//! for one release. None of these needs a Docker engine: each run stops before connecting.

use crate::support::{envbuild, stdout_of, tempdir, write};
use predicates::prelude::*;

/// Every subcommand's name, for help checks.
const COMMANDS: &[&str] = &[
    "lock", "render", "image", "test", "smoke", "doctor", "table", "import",
];

fn help(args: &[&str]) -> String {
    let out = envbuild()
        .args(args)
        .arg("--help")
        .assert()
        .code(0)
        .get_output()
        .clone();
    stdout_of(&out)
}

/// The exit-code section of a help text: from `Exit codes:` up to the next blank line.
fn exit_section(text: &str) -> Option<Vec<String>> {
    let start = text.find("Exit codes:")?;
    Some(
        text[start..]
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn every_help_that_lists_exit_codes_uses_one_layout() {
    let mut sections = vec![("envbuild".to_string(), help(&[]))];
    for c in COMMANDS {
        sections.push((c.to_string(), help(&[c])));
    }
    sections.push(("templates dump".into(), help(&["templates", "dump"])));
    let mut listed = Vec::new();
    for (name, text) in &sections {
        let Some(lines) = exit_section(text) else {
            continue;
        };
        listed.push(name.as_str());
        assert_eq!(lines[0], "Exit codes:", "{name}");
        let codes: Vec<&str> = lines[1..]
            .iter()
            .filter(|l| !l.starts_with("     "))
            .map(|l| &l[..5])
            .collect();
        assert_eq!(
            codes,
            ["  0  ", "  1  ", "  2  "],
            "{name}:\n{}",
            lines.join("\n")
        );
        assert_eq!(
            lines.last().unwrap(),
            "  2  usage error, or an envbuild bug",
            "{name}"
        );
    }
    for must in ["envbuild", "image", "test", "smoke", "doctor"] {
        assert!(
            listed.contains(&must),
            "{must} lists its exit codes: {listed:?}"
        );
    }
}

#[test]
fn commands_that_take_an_expectations_file_call_it_expect_file() {
    for c in ["smoke", "doctor", "test"] {
        let text = help(&[c]);
        assert!(text.contains("--expect-file <FILE>"), "{c}:\n{text}");
        // The old spellings are hidden.
        assert!(!text.contains("--expect <"), "{c}:\n{text}");
    }
    let dir = tempdir();
    let bad = write(dir.path(), "e.json", r#"{"torhc": "2.5.1"}"#);
    // `test` reads the file before it connects to the engine, under both spellings.
    for flag in ["--expect-file", "--expect"] {
        envbuild()
            .args(["test", "some-image:1", flag])
            .arg(&bad)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("INVALID_EXPECTATIONS"))
            .stderr(predicate::str::contains("torhc"));
        envbuild()
            .args(["test", "some-image:1", "--lock", "a.lock", flag, "e.json"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("cannot be used with"));
    }
}

#[test]
fn the_mode_is_gpus_all_or_none_everywhere() {
    for c in ["image", "test", "smoke"] {
        let text = help(&[c]);
        assert!(text.contains("--gpus <GPUS>"), "{c}:\n{text}");
        assert!(text.contains("- none:"), "{c}:\n{text}");
    }
    for c in [vec!["test", "img:1"], vec!["smoke"]] {
        envbuild()
            .args(&c)
            .args(["--gpus", "cpu"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("[possible values: all, none]"));
    }
}

#[test]
fn shm_size_takes_docker_spellings() {
    let dir = tempdir();
    let bad = write(dir.path(), "e.json", r#"{"torhc": "2.5.1"}"#);
    // A size clap accepts gets as far as the expectations file (exit 1, not a usage error).
    for size in ["1073741824", "512m", "512mb", "512MiB", "2G", "64k"] {
        envbuild()
            .args(["test", "img:1", "--shm-size", size, "--expect-file"])
            .arg(&bad)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("INVALID_EXPECTATIONS"));
    }
    for (size, why) in [
        ("0", "not a usable size"),
        ("1t", "is not a size such as"),
        ("lots", "is not a size such as"),
    ] {
        envbuild()
            .args(["test", "img:1", "--shm-size", size])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
}

/// `--push` takes only a repository (envbuild picks the tag), `--pull` only its three words,
/// and `--show-verdict` only a pushed tag; credentials named by half are refused before any
/// engine or registry is asked, and the half that is set is never shown.
#[test]
fn registry_flags_are_checked_before_anything_runs() {
    for (args, why) in [
        (
            &["image", "s.toml", "--push", "reg.io/Team/x"][..],
            "is not a repository such as",
        ),
        (
            &["image", "s.toml", "--push", "reg.io/x:v1"],
            "names a tag or digest",
        ),
        (&["image", "s.toml", "--pull", "sometimes"], "sometimes"),
        (
            &["test", "reg.io/x:v1", "--show-verdict", "--lock", "l.lock"],
            "cannot be used with",
        ),
    ] {
        envbuild()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
    envbuild()
        .args(["test", "reg.io/x@sha256:00", "--show-verdict"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("REGISTRY/REPO:TAG"));
    envbuild()
        .args(["test", "127.0.0.1:9/x:v1", "--show-verdict"])
        .env("ENVBUILD_REGISTRY_USER", "ci-bot")
        .env_remove("ENVBUILD_REGISTRY_PASSWORD")
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("REGISTRY_AUTH"))
        .stderr(predicate::str::contains("ENVBUILD_REGISTRY_PASSWORD"))
        .stderr(predicate::str::contains("ci-bot").not());
}

/// The binary with a stdout of the test's choosing (assert_cmd always captures it).
fn spawn_with_stdout(args: &[&str], stdout: std::process::Stdio) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"))
        .args(args)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn envbuild")
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    let root = crate::support::root();
    let spec = root.join("specs/torch-gpu-env/envbuild.toml");
    let out = tempdir();
    for args in [
        vec!["table", "--json"],
        vec!["table"],
        vec![
            "lock",
            "--json",
            spec.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ],
    ] {
        let mut child = spawn_with_stdout(&args, std::process::Stdio::piped());
        // `| head -c0`: the reader goes away before the first byte.
        drop(child.stdout.take());
        let done = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(done.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

#[test]
fn a_full_disk_on_stdout_is_an_io_error_not_a_panic() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let child = spawn_with_stdout(&["table", "--json"], full.into());
    let done = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("IO_ERROR"), "{stderr}");
}

/// With `--json`, a run that fails before its command prints anything still prints exactly one
/// JSON document on stdout, naming the code; the message stays on stderr.
#[test]
fn json_runs_print_one_document_for_every_error() {
    let root = crate::support::root();
    let spec = root.join("specs/torch-gpu-env/envbuild.toml");
    let spec = spec.to_str().unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--table", "/dev/zero", "lock", "--json", spec],
            "status",
            "TABLE_INVALID",
        ),
        (
            &["lock", "--json", "/nonexistent/envbuild.toml"],
            "status",
            "IO_ERROR",
        ),
        (
            &["smoke", "--json", "--python", "/nonexistent/python3"],
            "verdict",
            "SMOKE_PYTHON_NOT_FOUND",
        ),
        (
            &["test", "some-image", "--json", "--lock", "/dev/null"],
            "verdict",
            "INVALID_LOCK",
        ),
        (
            &["doctor", "--json", "--lock", "/dev/null"],
            "verdict",
            "INVALID_LOCK",
        ),
        (
            &["--table", "/dev/zero", "table", "--json"],
            "verdict",
            "TABLE_INVALID",
        ),
    ];
    for (args, key, code) in cases {
        let out = envbuild().args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stdout = stdout_of(&out);
        // `from_str` refuses anything after the first document.
        let doc: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON document ({e}): {stdout}"));
        assert_eq!(doc[key], "error", "{args:?}: {doc}");
        assert!(doc.to_string().contains(code), "{args:?}: {doc}");
    }
}

/// `--junit FILE` is written for every failure, in every command that takes it: a bad spec,
/// lock, table or expectations file, an engine that does not answer, a Python that cannot start
/// or prints no report. The file holds one failing test case naming the code and the message,
/// and replaces an older file whole.
#[test]
fn junit_is_written_for_every_failure_of_every_command_that_takes_it() {
    let dir = tempdir();
    let d = dir.path();
    let bad_spec = write(
        d,
        "bad.toml",
        "name = \"x\"\npython = \"3.11\"\npytorch = \">=99\"\n",
    );
    let good_spec = write(
        d,
        "good.toml",
        &std::fs::read_to_string(crate::support::root().join("specs/torch29-cu128/envbuild.toml"))
            .unwrap(),
    );
    let bad_lock = write(d, "bad.lock", "version = 99\n");
    let bad_table = write(d, "table.toml", "[meta]\n");
    let bad_expect = write(d, "expect.json", "{");
    let mute = crate::support::script(d, "mute-python", "exit 0\n");
    let py = crate::support::script(d, "py", "echo not a report\n");
    let no_engine = "unix:///nonexistent/envbuild-junit.sock";
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["image".into(), s(&bad_spec)], "NO_MATCHING_BUILD"),
        (vec!["image".into(), s(&good_spec)], "LOCK_MISSING"),
        (
            vec![
                "--table".into(),
                s(&bad_table),
                "image".into(),
                s(&good_spec),
            ],
            "TABLE_INVALID",
        ),
        (
            vec!["image".into(), s(&good_spec), "--update-lock".into()],
            "ENGINE_UNREACHABLE",
        ),
        (vec!["test".into(), "x:1".into()], "ENGINE_UNREACHABLE"),
        (
            vec!["test".into(), "x:1".into(), "--lock".into(), s(&bad_lock)],
            "INVALID_LOCK",
        ),
        (
            vec![
                "test".into(),
                "x:1".into(),
                "--expect-file".into(),
                s(&bad_expect),
            ],
            "INVALID_EXPECTATIONS",
        ),
        (
            vec![
                "smoke".into(),
                "--python".into(),
                "/nonexistent/python3".into(),
            ],
            "SMOKE_PYTHON_NOT_FOUND",
        ),
        (
            vec!["smoke".into(), "--lock".into(), s(&bad_lock)],
            "INVALID_LOCK",
        ),
        (
            vec!["smoke".into(), "--expect-file".into(), s(&bad_expect)],
            "INVALID_EXPECTATIONS",
        ),
        (
            vec!["--table".into(), s(&bad_table), "smoke".into()],
            "TABLE_INVALID",
        ),
        (
            vec!["smoke".into(), "--python".into(), s(&py)],
            "SMOKE_BAD_OUTPUT",
        ),
        (
            vec!["smoke".into(), "--python".into(), s(&mute)],
            "SMOKE_BAD_OUTPUT",
        ),
    ];
    let junit = d.join("out.xml");
    for (args, code) in &cases {
        std::fs::write(&junit, "stale").unwrap();
        let out = envbuild()
            .args(args)
            .arg("--junit")
            .arg(&junit)
            .env("DOCKER_HOST", no_engine)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(code), "{args:?}: {err}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.starts_with("<?xml")
                && xml.contains(&format!("type=\"{code}\""))
                && xml.contains(&format!("error[{code}]"))
                && xml.contains("errors=\"1\""),
            "{args:?}: {xml}"
        );
    }
    // Every command whose help offers --junit is among those covered above.
    for cmd in COMMANDS {
        let help = stdout_of(&envbuild().args([cmd, "--help"]).output().unwrap());
        assert_eq!(
            help.contains("--junit"),
            ["image", "test", "smoke"].contains(cmd),
            "{cmd}"
        );
    }
}

/// `image --platform`: an unknown platform is a usage error naming the known ones (before
/// anything runs); one the lock does not hold is `PLATFORM_NOT_IN_LOCK` with the lock's
/// platforms and a hint; a fleet platform the lock holds gets as far as the engine.
#[test]
fn image_platform_selection_is_checked_against_the_lock() {
    envbuild()
        .args(["image", "s.toml", "--platform", "linux-arm64"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("known: linux-64, linux-aarch64"));
    let no_engine = "unix:///nonexistent/envbuild-platform.sock";
    let single = crate::support::root().join("specs/torch29-cu128/envbuild.toml");
    envbuild()
        .arg("image")
        .arg(&single)
        .args(["--platform", "linux-64,linux-aarch64"])
        .env("DOCKER_HOST", no_engine)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error[PLATFORM_NOT_IN_LOCK]"))
        .stderr(predicate::str::contains("it has: linux-64"))
        .stderr(predicate::str::contains("[target] platforms"));
    let fleet = crate::support::root().join("specs/fleet-h100-gh200/envbuild.toml");
    envbuild()
        .arg("image")
        .arg(&fleet)
        .args(["--platform", "linux-aarch64"])
        .env("DOCKER_HOST", no_engine)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("ENGINE_UNREACHABLE"));
}
