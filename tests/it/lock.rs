//! `envbuild lock`: example specs, error snapshots (one defect per fixture), `--locked`,
//! `--json`, format independence and bad input.

use crate::support::*;
use std::fs;

#[test]
fn every_example_spec_matches_its_committed_lock() {
    for spec in example_specs() {
        let out = envbuild()
            .arg("lock")
            .arg(&spec)
            .arg("--locked")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{} is stale or fails:\n{}",
            spec.display(),
            stderr_of(&out)
        );
    }
}

#[test]
fn error_fixtures_give_coded_messages_and_write_nothing() {
    let dir = root().join("tests/fixtures/errors");
    let mut names: Vec<String> = files_in(&dir);
    names.retain(|n| n.ends_with(".toml") || n.ends_with(".yml"));
    assert!(names.len() >= 25);
    for name in names {
        let tmp = tempdir();
        fs::copy(dir.join(&name), tmp.path().join(&name)).unwrap();
        let out = envbuild()
            .current_dir(tmp.path())
            .args(["lock", &name])
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("error["), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(
            files_in(tmp.path()),
            std::slice::from_ref(&name),
            "{name} left a file behind"
        );
        insta::assert_snapshot!(format!("error-{name}"), stderr);
        // The same problems as the one JSON document on stdout, nothing on stderr.
        let out = envbuild()
            .current_dir(tmp.path())
            .args(["lock", &name, "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name} --json");
        assert_eq!(stderr_of(&out), "", "{name} --json");
        insta::assert_snapshot!(format!("error-{name}.json"), stdout_of(&out));
    }
}

#[test]
fn json_output_reports_errors_with_a_null_lock() {
    let dir = root().join("tests/fixtures/errors");
    let out = envbuild()
        .arg("lock")
        .arg(dir.join("many-problems.toml"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert!(v["lock"].is_null());
    let diags = v["diagnostics"].as_array().unwrap();
    assert!(diags
        .iter()
        .all(|d| d["code"].is_string() && d["severity"].is_string() && d["message"].is_string()));
}

#[test]
fn json_output_carries_canonical_package_names_and_the_build() {
    let spec = root().join("specs/torch-gpu-env/envbuild.toml");
    let tmp = tempdir();
    let out = envbuild()
        .arg("lock")
        .arg(&spec)
        .arg("--json")
        .arg("--out")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "warning", "Python 3.10 is past end of life");
    let lock = &v["lock"];
    assert_eq!(lock["packages"]["torch"], "2.5.1");
    assert_eq!(lock["packages"]["torchvision"], "0.20.1");
    assert_eq!(lock["packages"]["torchaudio"], "2.5.1");
    assert_eq!(lock["packages"]["python"], "3.10");
    assert_eq!(lock["cuda"], "11.8.0");
    assert_eq!(lock["cudnn"], "9.1.0.70");
    assert_eq!(lock["nccl"], "2.21.5");
    assert_eq!(v["diagnostics"][0]["code"], "PYTHON_EOL");
    let idx = root().join("specs/torch26-cu118-py39/envbuild.toml");
    let out = envbuild()
        .arg("lock")
        .arg(&idx)
        .arg("--json")
        .arg("--out")
        .arg(tmp.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["lock"]["index_url"],
        "https://download.pytorch.org/whl/cu118"
    );
    assert_eq!(
        v["lock"]["cudnn"], "9.1.0.70",
        "the cuDNN the 2.6 cu118 wheel bundles"
    );
}

#[test]
fn locked_names_what_would_change_and_leaves_the_lock_alone() {
    let tmp = tempdir();
    let spec = tmp.path().join("envbuild.toml");
    let text = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.toml")).unwrap();
    fs::write(&spec, &text).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(&spec)
        .arg("--locked")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("LOCK_MISSING"));
    envbuild().arg("lock").arg(&spec).assert().success();
    let lock_before = fs::read(tmp.path().join("envbuild.lock")).unwrap();
    envbuild()
        .arg("lock")
        .arg(&spec)
        .arg("--locked")
        .assert()
        .success();
    fs::write(&spec, text.replace("570.133.20", "575.57.08")).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(&spec)
        .arg("--locked")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("LOCK_STALE"), "{err}");
    assert!(
        err.contains("driver_target: \"570.133.20\" -> \"575.57.08\""),
        "{err}"
    );
    assert_eq!(
        fs::read(tmp.path().join("envbuild.lock")).unwrap(),
        lock_before
    );
}

#[test]
fn toml_and_yaml_specs_give_the_same_lock_bytes() {
    let tmp = tempdir();
    fs::create_dir_all(tmp.path().join("t")).unwrap();
    fs::create_dir_all(tmp.path().join("y")).unwrap();
    fs::copy(
        root().join("specs/torch29-cu128/envbuild.toml"),
        tmp.path().join("t/envbuild.toml"),
    )
    .unwrap();
    let yaml = "\
name: torch29-cu128
python: 3.12
pytorch: 2.9.1
cuda: 12.8
pip: [numpy==2.3.4, transformers==4.57.1]
target:
  driver: 570.133.20
  gpus: [H100, L4, NVIDIA GeForce RTX 5090]
  glibc: 2.35
image:
  variants: [runtime, dev]
  ssh: true
run:
  shm-size: 32g
  datasets: /data
  checkpoints: /checkpoints
lock:
  closure: false
";
    fs::write(tmp.path().join("y/envbuild.yaml"), yaml).unwrap();
    envbuild()
        .arg("lock")
        .arg(tmp.path().join("t/envbuild.toml"))
        .assert()
        .success();
    envbuild()
        .arg("lock")
        .arg(tmp.path().join("y/envbuild.yaml"))
        .assert()
        .success();
    let a = fs::read(tmp.path().join("t/envbuild.lock")).unwrap();
    let b = fs::read(tmp.path().join("y/envbuild.lock")).unwrap();
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert_eq!(
        a,
        fs::read(root().join("specs/torch29-cu128/envbuild.lock")).unwrap()
    );
}

#[test]
fn binary_huge_and_directory_inputs_are_refused_cleanly() {
    let tmp = tempdir();
    let bin = tmp.path().join("garbage.toml");
    fs::write(&bin, [0u8, 159, 146, 150, 255, 0, 1, 2]).unwrap();
    let huge = tmp.path().join("huge.toml");
    fs::write(&huge, "# padding\n".repeat(200_000)).unwrap();
    for (path, want) in [
        (&bin, "not UTF-8"),
        (&huge, "at most"),
        (&tmp.path().to_path_buf(), "directory"),
    ] {
        let out = envbuild().arg("lock").arg(path).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = stderr_of(&out);
        assert!(err.contains("INVALID_SPEC") && err.contains(want), "{err}");
    }
    assert!(!tmp.path().join("envbuild.lock").exists());
}

#[test]
fn an_unwritable_output_is_an_error_and_leaves_nothing() {
    let tmp = tempdir();
    let blocker = tmp.path().join("not-a-dir");
    fs::write(&blocker, "x").unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(root().join("specs/torch29-cu128/envbuild.toml"))
        .arg("--out")
        .arg(&blocker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("IO_ERROR"));
    assert_eq!(fs::read_to_string(&blocker).unwrap(), "x");
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    envbuild().args(["lock"]).assert().code(2);
    envbuild()
        .args(["lock", "x.toml", "--no-such-flag"])
        .assert()
        .code(2);
    envbuild().args(["frobnicate"]).assert().code(2);
    let out = envbuild().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout_of(&out).contains("Exit codes"));
}

#[test]
fn missing_spec_file_is_an_io_error() {
    let out = envbuild()
        .args(["lock", "/nonexistent/envbuild.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("IO_ERROR"));
}

/// A folder name with a line break and an escape sequence is shown escaped in every message
/// (`wrote ...`, `... is up to date`, `... does not exist`), never printed raw.
#[test]
fn paths_with_control_characters_are_shown_escaped() {
    let tmp = tempdir();
    let dir = tmp.path().join("a\nerror[FAKE]: b\u{1b}[31m");
    fs::create_dir(&dir).unwrap();
    let spec = dir.join("envbuild.toml");
    fs::copy(root().join("specs/torch29-cu128/envbuild.toml"), &spec).unwrap();
    for args in [vec!["--locked"], vec![], vec![]] {
        let out = envbuild()
            .arg("lock")
            .arg(&spec)
            .args(&args)
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert!(
            !err.contains("a\nerror[FAKE]") && !err.contains('\u{1b}'),
            "raw control characters in: {err:?}"
        );
        assert!(err.contains("a\\nerror[FAKE]: b\\u{1b}[31m"), "{err:?}");
    }
}

/// A pip extra's PEP 508 marker: judged for the chosen Python and each platform of a fleet;
/// where it holds it reaches the requirements files (pip judges it there) and never a `RUN`
/// line, where it does not the package is in no file and `[excluded]` says why.
#[test]
fn a_marker_is_judged_per_platform_and_reaches_only_the_requirements() {
    let tmp = tempdir();
    let spec = tmp.path().join("envbuild.toml");
    fs::write(
        &spec,
        "name = \"marked\"\npython = \"3.12\"\npytorch = \"2.14.1\"\n\
         pip = [\n  'urllib3>=2.5.0 ; python_version>\"3.8\"',\n  \"tomli>=2.0; python_version < '3.11'\",\n  'nvidia-ml-py==12.560.30; platform_machine == \"aarch64\"',\n]\n\
         [target]\nplatforms = [\"linux-64\", \"linux-aarch64\"]\n",
    )
    .unwrap();
    let out = envbuild()
        .args(["lock", "--no-closure"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = fs::read_to_string(tmp.path().join("envbuild.lock")).unwrap();
    let lock = envbuild::core::lock::Lock::from_toml(&text).unwrap();
    let arm = &lock.fleet[0];
    // The marker in its canonical text; tomli left out on both, the aarch64-only package on x86_64.
    let urllib3 = "urllib3>=2.5.0; python_version > \"3.8\"".to_string();
    assert!(lock.install.pip.contains(&urllib3), "{text}");
    assert!(arm.install.pip.contains(&urllib3), "{text}");
    for l in [&lock, arm] {
        assert!(l.excluded.contains_key("tomli"), "{text}");
        assert!(!l.packages.contains_key("tomli"), "{text}");
    }
    assert!(lock.excluded["nvidia-ml-py"].contains("does not hold for Python 3.12 on x86_64"));
    assert!(!lock.install.pip.iter().any(|p| p.contains("nvidia-ml-py")));
    assert!(arm
        .install
        .pip
        .contains(&"nvidia-ml-py==12.560.30; platform_machine == \"aarch64\"".to_string()));
    // Rendered: the requirements carry the marker line; the Dockerfile only reads the file.
    let out_dir = tmp.path().join("render");
    let out = envbuild()
        .arg("render")
        .arg(tmp.path().join("envbuild.lock"))
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mut seen_requirements = false;
    for entry in walk(&out_dir) {
        let body = fs::read_to_string(&entry).unwrap_or_default();
        let name = entry.file_name().unwrap().to_string_lossy().to_string();
        assert!(!body.contains("tomli"), "{name}: {body}");
        if name.starts_with("requirements") && body.contains("urllib3") {
            seen_requirements = true;
            assert!(body.lines().any(|l| l == urllib3), "{name}: {body}");
        } else if name.ends_with(".yml") && body.contains("urllib3") {
            // environment.yml's `pip:` list: one YAML string, the requirement as pip reads it.
            let v = crate::render::yaml(&body);
            let pip = v["dependencies"]
                .as_array()
                .and_then(|d| d.iter().find_map(|x| x.get("pip")))
                .and_then(|p| p.as_array())
                .unwrap_or_else(|| panic!("{name}: {body}"));
            assert!(
                pip.iter().any(|x| x.as_str() == Some(urllib3.as_str())),
                "{name}: {body}"
            );
        } else {
            assert!(!body.contains("python_version"), "{name}: {body}");
        }
    }
    assert!(seen_requirements);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
