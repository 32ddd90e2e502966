//! `envbuild doctor` through the real binary, with every probe overridden or served from
//! recorded NVIDIA text (this machine has no GPU).

use crate::support::{envbuild, fixture, root, script, stderr_of, stdout_of, write};
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The binary with NVML, nvidia-smi and /proc pointed at nothing.
fn doctor() -> assert_cmd::Command {
    let mut cmd = envbuild();
    cmd.arg("doctor")
        // The engine's state is the Docker tests' business (tests/docker/docker.rs).
        .env("ENVBUILD_DOCKER_CHECK", "0")
        // The snapshots name the host's CPU: the same on every machine that runs them.
        .env("ENVBUILD_HOST_ARCH", "x86_64")
        .env("ENVBUILD_NO_NVML", "1")
        .env(
            "ENVBUILD_NVIDIA_SMI",
            "/nonexistent/envbuild-test/nvidia-smi",
        )
        .env(
            "ENVBUILD_PROC_DRIVER_VERSION",
            "/nonexistent/envbuild-test/version",
        );
    cmd
}

fn json_of(cmd: &mut assert_cmd::Command, code: i32) -> Value {
    let out = cmd
        .arg("--json")
        .assert()
        .code(code)
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

fn expect_file(dir: &Path, cuda: &str, arch: &[&str]) -> PathBuf {
    write(
        dir,
        "expect.json",
        &json!({"cuda": cuda, "arch_list": arch}).to_string(),
    )
}

/// A stand-in `nvidia-smi` that prints the recorded banner, or the recorded CSV for queries.
fn fake_smi(dir: &Path, csv: &str, banner: &str, reject_compute_cap: bool) -> PathBuf {
    let reject = if reject_compute_cap {
        "case \"$1\" in *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2;; esac\n"
    } else {
        ""
    };
    script(
        dir,
        "nvidia-smi",
        &format!(
            "{reject}case \"$1\" in --query-gpu=*) cat '{}';; *) cat '{}';; esac\n",
            fixture(&format!("host/{csv}")).display(),
            fixture(&format!("host/{banner}")).display()
        ),
    )
}

#[test]
fn without_a_driver_doctor_says_so_and_exits_1() {
    doctor()
        .assert()
        .code(1)
        .stdout(predicate::str::contains("no NVIDIA driver found"))
        .stdout(predicate::str::contains("NO_DRIVER"))
        .stdout(predicate::str::contains("libnvidia-ml").not())
        .stdout(predicate::str::contains("nvidia-smi"));
}

#[test]
fn without_any_override_on_this_gpu_less_machine() {
    if Path::new("/proc/driver/nvidia/version").exists() {
        eprintln!("skipped: this machine has an NVIDIA driver, the test needs one without");
        return;
    }
    let report = json_of(
        envbuild().arg("doctor").env("ENVBUILD_DOCKER_CHECK", "0"),
        1,
    );
    let c = check(&report, "driver");
    assert_eq!(c["code"], "NO_DRIVER");
    assert!(c["detail"]
        .as_str()
        .unwrap()
        .starts_with("no NVIDIA driver found"));
    assert_eq!(report["status"], "fail");
    assert_eq!(report["container_gpu"]["verified"], Value::Null);
    let c = check(&report, "container_gpu");
    assert_eq!(c["code"], "NOT_CHECKED");
    assert!(c["detail"]
        .as_str()
        .unwrap()
        .contains("ENVBUILD_DOCKER_CHECK=0"));
}

#[test]
fn overrides_drive_a_native_pass() {
    let dir = tempfile::tempdir().unwrap();
    let e = expect_file(dir.path(), "12.4", &["sm_80", "sm_90"]);
    let report = json_of(
        doctor()
            .arg("--expect-file")
            .arg(&e)
            .env("ENVBUILD_DRIVER_VERSION", "550.54.15")
            .env("ENVBUILD_GPUS", "H100,A100"),
        0,
    );
    assert_eq!(report["host"]["driver"], "550.54.15");
    assert_eq!(report["host"]["cuda"], "12.4");
    assert_eq!(report["host"]["gpus"][0]["cc"], "9.0");
    assert_eq!(check(&report, "driver_compat")["code"], "DRIVER_NATIVE");
    assert_eq!(check(&report, "arch_coverage")["code"], "OK");
    assert_eq!(report["status"], "pass");
}

#[test]
fn minor_version_compatibility_warns_and_too_old_fails() {
    let dir = tempfile::tempdir().unwrap();
    let e = expect_file(dir.path(), "12.4", &["sm_90"]);
    let report = json_of(
        doctor()
            .arg("--expect-file")
            .arg(&e)
            .env("ENVBUILD_DRIVER_VERSION", "535.104.05")
            .env("ENVBUILD_GPUS", "9.0"),
        0,
    );
    let c = check(&report, "driver_compat");
    assert_eq!(
        (c["status"].as_str(), c["code"].as_str()),
        (Some("warn"), Some("DRIVER_MINOR_COMPAT"))
    );

    doctor()
        .arg("--expect-file")
        .arg(&e)
        .env("ENVBUILD_DRIVER_VERSION", "470.82.01")
        .env("ENVBUILD_GPUS", "9.0")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("HOST_DRIVER_TOO_OLD"))
        .stdout(predicate::str::contains("525.60.13"));
}

#[test]
fn a_gpu_the_build_does_not_carry_fails() {
    let dir = tempfile::tempdir().unwrap();
    let e = expect_file(dir.path(), "12.4", &["sm_80", "sm_90"]);
    doctor()
        .arg("--expect-file")
        .arg(&e)
        .env("ENVBUILD_DRIVER_VERSION", "575.57.08")
        .env("ENVBUILD_GPUS", "RTX 5090")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("ARCH_MISSING"))
        .stdout(predicate::str::contains("sm_120"));
}

#[test]
fn nvidia_smi_text_is_parsed_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(
        dir.path(),
        "nvidia-smi-query.csv",
        "nvidia-smi-banner.txt",
        false,
    );
    let report = json_of(doctor().env("ENVBUILD_NVIDIA_SMI", &smi), 0);
    let host = &report["host"];
    assert_eq!(host["driver"], "550.54.15");
    assert_eq!(host["driver_source"], "nvidia-smi");
    assert_eq!(host["cuda"], "12.4");
    assert_eq!(host["cuda_source"], "nvidia-smi");
    assert_eq!(host["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(host["gpus"][1]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(host["gpus"][1]["cc"], "9.0");
    assert_eq!(host["gpus"][1]["memory_bytes"], 81559u64 * 1024 * 1024);
}

#[test]
fn an_old_nvidia_smi_without_compute_cap_falls_back_to_the_name_table() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(
        dir.path(),
        "nvidia-smi-query-old.csv",
        "nvidia-smi-banner-old.txt",
        true,
    );
    let e = expect_file(dir.path(), "12.1", &["sm_75", "sm_80"]);
    let report = json_of(
        doctor()
            .env("ENVBUILD_NVIDIA_SMI", &smi)
            .arg("--expect-file")
            .arg(&e),
        1,
    );
    assert_eq!(report["host"]["driver"], "470.82.01");
    assert_eq!(report["host"]["cuda"], "11.4");
    assert_eq!(report["host"]["gpus"][0]["cc"], "7.5");
    assert_eq!(
        check(&report, "driver_compat")["code"],
        "HOST_DRIVER_TOO_OLD"
    );
    assert_eq!(check(&report, "arch_coverage")["code"], "OK");
}

#[test]
fn proc_driver_version_is_the_last_resort() {
    let report = json_of(
        doctor().env("ENVBUILD_NVIDIA_SMI", "none").env(
            "ENVBUILD_PROC_DRIVER_VERSION",
            fixture("host/proc-driver-version.txt"),
        ),
        1,
    );
    assert_eq!(report["host"]["driver"], "535.104.05");
    assert_eq!(report["host"]["cuda"], "12.2");
    assert_eq!(report["host"]["cuda_source"], "driver branch R535 table");
    // A driver with no GPU listed is a failure of its own.
    assert_eq!(check(&report, "gpus")["code"], "NO_GPU");
}

#[test]
fn bad_overrides_and_lock_are_usage_errors() {
    doctor()
        .env("ENVBUILD_DRIVER_VERSION", "latest")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("ENVBUILD_DRIVER_VERSION"));
    doctor()
        .env("ENVBUILD_GPUS", "Voodoo5")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Voodoo5"))
        .stderr(predicate::str::contains("hint"));
    doctor()
        .args(["--lock", "/nonexistent/envbuild.lock"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("IO_ERROR"));
}

/// `--lock` and `--expect-file` are the same flags as on `smoke` and `test`, and exclusive; a bad
/// expectations file is the same error.
#[test]
fn expectation_flags_match_the_other_commands() {
    let dir = tempfile::tempdir().unwrap();
    let e = expect_file(dir.path(), "12.4", &["sm_90"]);
    doctor()
        .args(["--lock", "a.lock", "--expect-file"])
        .arg(&e)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    let bad = write(dir.path(), "bad.json", r#"{"torhc": "2.5.1"}"#);
    doctor()
        .arg("--expect-file")
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("INVALID_EXPECTATIONS"));
}

/// Every doctor code is documented in docs/smoke.md.
#[test]
fn every_doctor_code_is_documented() {
    let docs = std::fs::read_to_string(root().join("docs/smoke.md")).unwrap();
    let outcomes = envbuild::core::doctor::Outcome::ALL;
    assert!(outcomes.len() >= 10, "{outcomes:?}");
    let missing: Vec<&str> = outcomes
        .iter()
        .map(|o| o.as_str())
        .filter(|c| !docs.contains(&format!("`{c}`")))
        .collect();
    assert!(missing.is_empty(), "undocumented codes: {missing:?}");
}

/// Build the stand-in NVML (tests/fixtures/host/fake_nvml.c) into `dir` as libnvidia-ml.so.1;
/// `None` when this machine has no C compiler.
fn fake_nvml(dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("libnvidia-ml.so.1");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(fixture("host/fake_nvml.c"))
        .status()
        .ok()?;
    status.success().then_some(lib)
}

#[test]
fn nvml_is_loaded_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    if fake_nvml(dir.path()).is_none() {
        eprintln!("skipped: no C compiler (`cc`) to build the stand-in libnvidia-ml.so.1");
        return;
    }
    let mut cmd = doctor();
    cmd.env_remove("ENVBUILD_NO_NVML")
        .env("LD_LIBRARY_PATH", dir.path());
    let report = json_of(&mut cmd, 0);
    let host = &report["host"];
    assert_eq!(host["driver"], "550.54.15");
    assert_eq!(host["driver_source"], "NVML");
    assert_eq!(host["cuda"], "12.4");
    assert_eq!(host["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(host["gpus"][1]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(host["gpus"][1]["cc"], "9.0");
    assert_eq!(host["gpus"][1]["memory_bytes"], 85520809984u64);

    // A driver that is not loaded: NVML's code is named, and the fallbacks are tried.
    let mut cmd = doctor();
    cmd.env_remove("ENVBUILD_NO_NVML")
        .env("LD_LIBRARY_PATH", dir.path())
        .env("FAKE_NVML_INIT_RC", "9");
    cmd.assert()
        .code(1)
        .stdout(predicate::str::contains("kernel driver is not loaded"))
        .stdout(predicate::str::contains("nvidia-smi"));
}

/// `--lock`: the lock's native driver, minor-version floor and architectures decide.
#[test]
fn a_lock_is_checked_against_the_host() {
    let lock = root().join("specs/torch29-cu128/envbuild.lock");
    let native = json_of(
        doctor()
            .arg("--lock")
            .arg(&lock)
            .env("ENVBUILD_DRIVER_VERSION", "570.133.20")
            .env("ENVBUILD_GPUS", "H100,RTX 5090"),
        0,
    );
    assert_eq!(check(&native, "driver_compat")["code"], "DRIVER_NATIVE");
    assert_eq!(check(&native, "arch_coverage")["code"], "OK");
    // An R570 driver older than 12.8.1's toolkit driver (570.124.06) still reports CUDA 12.8,
    // and a 12.8.1 runtime runs natively on it: native is decided per minor version.
    let early = json_of(
        doctor()
            .arg("--lock")
            .arg(&lock)
            .env("ENVBUILD_DRIVER_VERSION", "570.86.10")
            .env("ENVBUILD_GPUS", "H100"),
        0,
    );
    assert_eq!(early["host"]["cuda"], "12.8");
    assert_eq!(check(&early, "driver_compat")["code"], "DRIVER_NATIVE");
    let minor = json_of(
        doctor()
            .arg("--lock")
            .arg(&lock)
            .env("ENVBUILD_DRIVER_VERSION", "535.104.05")
            .env("ENVBUILD_GPUS", "H100"),
        0,
    );
    assert_eq!(
        check(&minor, "driver_compat")["code"],
        "DRIVER_MINOR_COMPAT"
    );
    let old = json_of(
        doctor()
            .arg("--lock")
            .arg(&lock)
            .env("ENVBUILD_DRIVER_VERSION", "470.82.01")
            .env("ENVBUILD_GPUS", "V100"),
        1,
    );
    assert_eq!(check(&old, "driver_compat")["code"], "HOST_DRIVER_TOO_OLD");
    // The 2.9 cu128 wheels carry sm_70, so a V100 is covered; a K80 is not.
    assert_eq!(check(&old, "arch_coverage")["code"], "OK");
    let k80 = json_of(
        doctor()
            .arg("--lock")
            .arg(&lock)
            .env("ENVBUILD_DRIVER_VERSION", "570.133.20")
            .env("ENVBUILD_GPUS", "K80"),
        1,
    );
    assert_eq!(check(&k80, "arch_coverage")["code"], "ARCH_MISSING");
}

/// The whole output, human and `--json`, for each kind of host against the committed
/// `torch29-cu128` lock (and without a lock): the snapshots are the assertion, so a change to
/// any line, code or field shows in review.
#[test]
fn doctor_output_snapshots() {
    let lock = "specs/torch29-cu128/envbuild.lock";
    let cases: [(&str, Option<&str>, &str, &str, i32); 6] = [
        ("no-lock", None, "550.54.15", "A100", 0),
        ("native", Some(lock), "570.133.20", "H100,RTX 5090", 0),
        (
            "minor-compat-arch-missing",
            Some(lock),
            "535.104.05",
            "H100,K80",
            1,
        ),
        ("driver-too-old", Some(lock), "470.82.01", "V100", 1),
        (
            "usage-unknown-gpu",
            Some(lock),
            "570.133.20",
            "H100,Mystery GPU",
            2,
        ),
        ("no-driver", Some(lock), "", "", 1),
    ];
    for (name, lock, driver, gpus, code) in cases {
        for json in [false, true] {
            let mut cmd = doctor();
            cmd.current_dir(root());
            if let Some(lock) = lock {
                cmd.args(["--lock", lock]);
            }
            if !driver.is_empty() {
                cmd.env("ENVBUILD_DRIVER_VERSION", driver);
            }
            if !gpus.is_empty() {
                cmd.env("ENVBUILD_GPUS", gpus);
            }
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            assert_eq!(out.status.code(), Some(code), "{name}: {}", stderr_of(&out));
            let text = format!(
                "exit: {code}\n--- stdout\n{}--- stderr\n{}",
                stdout_of(&out),
                stderr_of(&out)
            );
            let suffix = if json { ".json" } else { "" };
            insta::assert_snapshot!(format!("doctor-{name}{suffix}"), text);
        }
    }
}

/// A GH200 spec locks for linux-aarch64; doctor fails that lock on an x86_64 host
/// (`HOST_PLATFORM_MISMATCH`) and passes it on an aarch64 one.
#[test]
fn a_lock_for_another_cpu_fails_on_this_host() {
    let tmp = crate::support::tempdir();
    let spec = tmp.path().join("envbuild.toml");
    std::fs::write(
        &spec,
        "name = \"grace\"\npython = \"3.12\"\npytorch = \"2.14.1\"\nsource = \"pypi\"\n\n[target]\ndriver = \"580.126.20\"\ngpus = [\"GH200\"]\n",
    )
    .unwrap();
    let out = envbuild()
        .args(["lock", "--no-closure"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock = tmp.path().join("envbuild.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(text.contains("platform = \"linux-aarch64\""), "{text}");
    let run = |arch: &str| {
        doctor()
            .env("ENVBUILD_HOST_ARCH", arch)
            .env("ENVBUILD_DRIVER_VERSION", "580.126.20")
            .env("ENVBUILD_GPUS", "GH200")
            .arg("--lock")
            .arg(&lock)
            .arg("--json")
            .output()
            .unwrap()
    };
    let out = run("x86_64");
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cpu_arch")
        .unwrap()
        .clone();
    assert_eq!(
        (c["status"].as_str(), c["code"].as_str()),
        (Some("fail"), Some("HOST_PLATFORM_MISMATCH")),
        "{c}"
    );
    let out = run("aarch64");
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
}
