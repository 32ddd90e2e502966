//! `envbuild smoke` and the embedded script, against no torch and every stand-in torch variant.

use crate::support::{envbuild, fake_torch, root, script, write};
use envbuild::core::report::{Check, Status, Verdict};
use envbuild::core::smoke::{SmokeReport, SCRIPT};
use predicates::prelude::*;
use serde_json::json;
use std::path::Path;

/// The lock's expectations that the stand-in's defaults satisfy.
fn full_expect() -> serde_json::Value {
    json!({
        "torch": "2.5.1",
        "cuda": "12.4",
        "cudnn": "9.1.0.70",
        "nccl": "2.21.5",
        "arch_list": ["sm_80", "sm_90"],
        "packages": {"torch": "2.5.1"}
    })
}

struct Run {
    report: SmokeReport,
    code: i32,
}

impl Run {
    fn check(&self, name: &str) -> &Check {
        crate::support::check_named(&self.report, name)
    }

    fn assert(&self, name: &str, status: Status, code: &str) -> &Check {
        crate::support::assert_check(&self.report, name, status, code)
    }
}

/// The schema every report must follow, whatever happened.
fn assert_schema(r: &SmokeReport, code: i32) {
    assert_eq!(r.schema, 1);
    assert!(!r.checks.is_empty());
    for c in &r.checks {
        assert!(!c.name.is_empty());
        assert!(
            !c.code.is_empty()
                && c.code
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "code {:?}",
            c.code
        );
        assert!(!c.detail.is_empty() && !c.detail.contains('\n'), "{c:?}");
    }
    let mut names: Vec<&str> = r.checks.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "check names are unique");
    let failed = r
        .checks
        .iter()
        .any(|c| c.required && c.status == Status::Fail);
    assert_eq!(r.status, if failed { Verdict::Fail } else { Verdict::Pass });
    assert_eq!(code, if failed { 1 } else { 0 });
}

/// The `--gpus` value of a script mode.
fn gpus_of(mode: &str) -> &str {
    match mode {
        "gpu" => "all",
        "cpu" => "none",
        other => panic!("mode {other}"),
    }
}

/// `envbuild smoke --json` with the stand-in torch `variant` (None: no torch at all), in script
/// mode `mode` (`gpu`/`cpu`).
fn smoke(
    variant: Option<&str>,
    mode: &str,
    expect: Option<serde_json::Value>,
    env: &[(&str, &str)],
) -> Run {
    let dir = match variant {
        Some(v) => fake_torch(v),
        None => tempfile::tempdir().unwrap(),
    };
    let mut cmd = envbuild();
    cmd.args([
        "smoke",
        "--python",
        "python3",
        "--json",
        "--gpus",
        gpus_of(mode),
    ])
    .env("PYTHONPATH", dir.path())
    // Deterministic probes: this machine has no libcuda and no /dev/nvidia*.
    .env("ENVBUILD_SMOKE_LIBCUDA", "0")
    .env("ENVBUILD_SMOKE_DEV_NODES", "0")
    .env("ENVBUILD_SMOKE_IN_CONTAINER", "0");
    if let Some(e) = expect {
        let f = write(dir.path(), "expect.json", &e.to_string());
        cmd.arg("--expect-file").arg(f);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: SmokeReport = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a report ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_schema(&report, code);
    Run { report, code }
}

const GPU_CHECKS: [&str; 11] = [
    "devices",
    "arch_coverage",
    "matmul",
    "autocast",
    "cudnn_conv",
    "nccl_allreduce",
    "pinned_copy",
    "tflops_bf16",
    "tflops_tf32",
    "h2d_pinned",
    "h2d_pageable",
];

#[test]
fn no_torch_is_torch_missing_in_both_modes() {
    for mode in ["gpu", "cpu"] {
        let r = smoke(None, mode, None, &[]);
        assert_eq!(r.code, 1);
        let c = r.assert("torch_import", Status::Fail, "TORCH_MISSING");
        assert!(c.detail.contains("not installed"), "{}", c.detail);
        r.assert("cuda_build", Status::Skip, "NO_TORCH");
        for name in GPU_CHECKS {
            assert_eq!(r.check(name).status, Status::Skip, "{name}");
        }
        assert_eq!(r.report.mode, mode);
    }
}

#[test]
fn a_torch_that_fails_to_import_is_reported_with_its_error() {
    let r = smoke(Some("import-error"), "gpu", None, &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("torch_import", Status::Fail, "TORCH_IMPORT_ERROR");
    assert!(c.detail.contains("libcudart.so.12"), "{}", c.detail);
}

#[test]
fn a_cpu_build_fails_when_the_lock_expects_cuda() {
    let r = smoke(Some("cpu"), "cpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("cuda_build", Status::Fail, "TORCH_CPU_BUILD");
    assert!(
        c.detail.contains("2.5.1+cpu") && c.detail.contains("12.4"),
        "{}",
        c.detail
    );
    r.assert("arch_list", Status::Skip, "NOT_CUDA_BUILD");
}

#[test]
fn a_cpu_build_fails_in_gpu_mode_and_only_warns_in_cpu_mode_without_a_lock() {
    let r = smoke(Some("cpu"), "gpu", None, &[]);
    assert_eq!(r.code, 1);
    r.assert("cuda_build", Status::Fail, "TORCH_CPU_BUILD");
    r.assert("matmul", Status::Skip, "NO_CUDA");
    let r = smoke(Some("cpu"), "cpu", None, &[]);
    assert_eq!(r.code, 0);
    r.assert("cuda_build", Status::Warn, "TORCH_CPU_BUILD");
}

#[test]
fn cpu_mode_checks_the_build_without_a_device() {
    let r = smoke(Some("cuda-no-driver"), "cpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 0, "{:#?}", r.report.checks);
    for name in [
        "python",
        "torch_import",
        "torch_version",
        "cuda_build",
        "cuda_version",
        "arch_list",
        "cudnn_version",
        "nccl_version",
        "package:torch",
    ] {
        r.assert(name, Status::Pass, "OK");
    }
    r.assert("cuda_available", Status::Skip, "CPU_MODE");
    for name in GPU_CHECKS {
        r.assert(name, Status::Skip, "CPU_MODE");
    }
    // Real torch returns [] from get_arch_list() without a usable device.
    let env = &r.report.environment;
    assert_eq!(env["arch_list_source"], "torch._C._cuda_getArchFlags()");
    assert_eq!(env["cudnn"], "9.1.0");
    assert_eq!(env["nccl"], "2.21.5");
    assert_eq!(env["torch"], "2.5.1+cu124");
}

#[test]
fn cuda_without_a_driver_is_classified() {
    let r = smoke(Some("cuda-no-driver"), "gpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("cuda_available", Status::Fail, "CUDA_UNAVAILABLE_NO_DRIVER");
    assert!(c.detail.contains("Found no NVIDIA driver"), "{}", c.detail);
    for name in GPU_CHECKS {
        r.assert(name, Status::Skip, "NO_CUDA");
    }
}

#[test]
fn device_nodes_without_libcuda_mean_the_driver_library_is_missing() {
    let r = smoke(
        Some("cuda-no-driver"),
        "gpu",
        None,
        &[("ENVBUILD_SMOKE_DEV_NODES", "1")],
    );
    let c = r.assert("cuda_available", Status::Fail, "CUDA_UNAVAILABLE_NO_DRIVER");
    assert!(c.detail.contains("device nodes exist"), "{}", c.detail);
}

#[test]
fn a_container_without_a_gpu_request_is_no_gpu_visible() {
    let r = smoke(
        Some("cuda-no-driver"),
        "gpu",
        None,
        &[("ENVBUILD_SMOKE_IN_CONTAINER", "1")],
    );
    let c = r.assert("cuda_available", Status::Fail, "NO_GPU_VISIBLE");
    assert!(c.detail.contains("--gpus all"), "{}", c.detail);
}

#[test]
fn hidden_devices_are_no_gpu_visible() {
    for (var, value) in [
        ("NVIDIA_VISIBLE_DEVICES", "void"),
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("CUDA_VISIBLE_DEVICES", "-1"),
    ] {
        let r = smoke(Some("cuda-no-driver"), "gpu", None, &[(var, value)]);
        let c = r.assert("cuda_available", Status::Fail, "NO_GPU_VISIBLE");
        assert!(c.detail.contains(var), "{}", c.detail);
    }
}

#[test]
fn a_driver_too_old_is_classified() {
    let r = smoke(Some("driver-too-old"), "gpu", Some(full_expect()), &[]);
    let c = r.assert("cuda_available", Status::Fail, "CUDA_DRIVER_TOO_OLD");
    assert!(c.detail.contains("found version 11040"), "{}", c.detail);
}

#[test]
fn an_unclassified_failure_keeps_the_error_text() {
    let r = smoke(
        Some("init-failed"),
        "gpu",
        None,
        &[
            ("ENVBUILD_SMOKE_LIBCUDA", "1"),
            ("ENVBUILD_SMOKE_DEV_NODES", "1"),
        ],
    );
    let c = r.assert("cuda_available", Status::Fail, "CUDA_UNAVAILABLE");
    assert!(
        c.detail.contains("CUDA driver initialization failed"),
        "{}",
        c.detail
    );
}

#[test]
fn a_replaced_torch_is_version_drift() {
    let r = smoke(Some("drift"), "cpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("torch_version", Status::Fail, "VERSION_DRIFT");
    assert!(
        c.detail.contains("2.6.0+cu124") && c.detail.contains("2.5.1"),
        "{}",
        c.detail
    );
    let c = r.assert("cudnn_version", Status::Fail, "VERSION_DRIFT");
    assert!(c.detail.contains("9.5.1"), "{}", c.detail);
    r.assert("package:torch", Status::Fail, "VERSION_DRIFT");
    // What did not drift still passes.
    r.assert("cuda_version", Status::Pass, "OK");
    r.assert("nccl_version", Status::Pass, "OK");
}

#[test]
fn a_missing_architecture_fails_in_cpu_mode() {
    let r = smoke(Some("missing-arch"), "cpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("arch_list", Status::Fail, "ARCH_MISSING");
    assert!(c.detail.contains("sm_90"), "{}", c.detail);
}

#[test]
fn other_expectations_drift_too() {
    let expect = json!({
        "cuda": "12.1",
        "nccl": "2.20.5",
        "python": "2.7",
        "packages": {"envbuild-no-such-package": "1.0"}
    });
    let r = smoke(Some("cuda-no-driver"), "cpu", Some(expect), &[]);
    assert_eq!(r.code, 1);
    r.assert("cuda_version", Status::Fail, "VERSION_DRIFT");
    r.assert("nccl_version", Status::Fail, "VERSION_DRIFT");
    r.assert("python", Status::Fail, "VERSION_DRIFT");
    r.assert(
        "package:envbuild-no-such-package",
        Status::Fail,
        "PACKAGE_MISSING",
    );
}

#[test]
fn too_little_shared_memory_fails_when_the_lock_asks_for_more() {
    let r = smoke(
        Some("cuda-no-driver"),
        "cpu",
        Some(json!({"min_shm_bytes": 1u64 << 55})),
        &[],
    );
    assert_eq!(r.code, 1);
    let c = r.assert("shm", Status::Fail, "SHM_TOO_SMALL");
    assert!(c.detail.contains("--shm-size"), "{}", c.detail);
    assert!(c.value.is_some_and(|v| v > 0.0));
}

#[test]
fn a_working_gpu_passes_every_check() {
    let r = smoke(Some("gpu"), "gpu", Some(full_expect()), &[]);
    assert_eq!(r.code, 0, "{:#?}", r.report.checks);
    for name in GPU_CHECKS.iter().filter(|n| **n != "nccl_allreduce") {
        r.assert(name, Status::Pass, "OK");
    }
    r.assert("nccl_allreduce", Status::Skip, "ONE_GPU");
    r.assert("cuda_available", Status::Pass, "OK");
    let t = r.check("tflops_bf16");
    assert_eq!(t.unit.as_deref(), Some("TFLOP/s"));
    assert!(t.value.is_some_and(|v| v > 0.0));
    assert!(t.detail.contains("nominal dense peak 989"), "{}", t.detail);
    assert_eq!(r.report.environment["devices"][0]["cc"], "9.0");
    assert_eq!(
        r.report.environment["arch_list_source"],
        "torch.cuda.get_arch_list()"
    );
}

#[test]
fn two_gpus_run_the_nccl_all_reduce() {
    let r = smoke(Some("gpu-2"), "gpu", None, &[]);
    assert_eq!(r.code, 0);
    r.assert("nccl_allreduce", Status::Pass, "OK");
}

#[test]
fn a_wrong_matmul_fails() {
    let r = smoke(Some("matmul-wrong"), "gpu", None, &[]);
    assert_eq!(r.code, 1);
    r.assert("matmul", Status::Fail, "MATMUL_WRONG");
}

#[test]
fn a_device_the_build_does_not_cover_fails() {
    let r = smoke(Some("gpu-uncovered"), "gpu", None, &[]);
    assert_eq!(r.code, 1);
    let c = r.assert("arch_coverage", Status::Fail, "ARCH_MISSING");
    assert!(c.detail.contains("sm_120"), "{}", c.detail);
}

#[test]
fn the_table_and_junit_outputs() {
    let dir = fake_torch("cuda-no-driver");
    let junit = dir.path().join("out/smoke.xml");
    envbuild()
        .args(["smoke", "--python", "python3", "--junit"])
        .arg(&junit)
        .env("PYTHONPATH", dir.path())
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAIL  cuda_available"))
        .stdout(predicate::str::contains("CUDA_UNAVAILABLE_NO_DRIVER"))
        .stdout(predicate::str::contains("torch 2.5.1+cu124"))
        .stdout(predicate::str::contains("\nFAIL: "))
        .stdout(predicate::str::contains("\x1b").not());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<testcase name="cuda_available" classname="envbuild.smoke">"#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"type="CUDA_UNAVAILABLE_NO_DRIVER""#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase name="matmul""#), "{xml}");
}

#[test]
fn cli_errors_have_codes_and_exit_codes() {
    envbuild()
        .args(["smoke", "--lock", "/nonexistent/envbuild.lock"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("IO_ERROR"));
    envbuild()
        .args(["smoke", "--lock", "a.lock", "--expect-file", "b.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    envbuild()
        .args(["smoke", "--python", "/nonexistent/envbuild-test/python3"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("SMOKE_PYTHON_NOT_FOUND"));
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "e.json", r#"{"torch": 2.5}"#);
    envbuild()
        .args(["smoke", "--expect-file"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("INVALID_EXPECTATIONS"));
    envbuild()
        .args([
            "smoke",
            "--expect-file",
            "/nonexistent/envbuild-test/e.json",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("IO_ERROR"));
    envbuild()
        .args(["smoke", "--expect", "tpu"])
        .assert()
        .code(2);
}

/// `--gpus all|none` picks the script's mode; the old `--expect gpu|cpu` still does, hidden.
#[test]
fn gpus_picks_the_mode_and_the_old_expect_spelling_still_works() {
    let no_torch = tempfile::tempdir().unwrap();
    let mode_of = |args: &[&str]| {
        let out = envbuild()
            .args(["smoke", "--python", "python3", "--json"])
            .args(args)
            .env("PYTHONPATH", no_torch.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let r: SmokeReport = serde_json::from_slice(&out.stdout).unwrap();
        r.mode
    };
    assert_eq!(mode_of(&[]), "gpu");
    assert_eq!(mode_of(&["--gpus", "all"]), "gpu");
    assert_eq!(mode_of(&["--gpus", "none"]), "cpu");
    assert_eq!(mode_of(&["--expect", "gpu"]), "gpu");
    assert_eq!(mode_of(&["--expect", "cpu"]), "cpu");
    envbuild()
        .args(["smoke", "--expect", "cpu", "--gpus", "none"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    envbuild().args(["smoke", "--gpus", "gpu"]).assert().code(2);
}

#[test]
fn a_python_that_prints_no_report_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let py = script(
        dir.path(),
        "python",
        "echo 'Segmentation fault' >&2\nexit 139\n",
    );
    envbuild()
        .args(["smoke", "--python"])
        .arg(&py)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("SMOKE_BAD_OUTPUT"))
        .stderr(predicate::str::contains("Segmentation fault"));
}

#[test]
fn print_script_prints_the_embedded_script() {
    let out = envbuild()
        .args(["smoke", "--print-script"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(out).unwrap(), SCRIPT);
}

/// Run the script file directly, as images do.
fn run_script_directly(args: &[&str], pythonpath: &Path) -> (i32, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "envbuild_smoke.py", SCRIPT);
    let out = std::process::Command::new("python3")
        .arg(&s)
        .args(args)
        .env("PYTHONPATH", pythonpath)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (out.status.code().unwrap(), doc)
}

#[test]
fn the_script_reports_usage_errors_as_json_with_exit_2() {
    let empty = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let not_json = write(dir.path(), "a.json", "{torch: 2.5.1}");
    let wrong_type = write(dir.path(), "b.json", r#"{"arch_list": "sm_90"}"#);
    let not_object = write(dir.path(), "c.json", "[1, 2]");
    let cases: Vec<Vec<String>> = vec![
        vec!["--mode".into(), "tpu".into()],
        vec!["--bogus".into()],
        vec!["--expect".into()],
        vec![
            "--expect".into(),
            "/nonexistent/envbuild-test/e.json".into(),
        ],
        vec!["--expect".into(), not_json.display().to_string()],
        vec!["--expect".into(), wrong_type.display().to_string()],
        vec!["--expect".into(), not_object.display().to_string()],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, doc) = run_script_directly(&args, empty.path());
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(doc["status"], "fail");
        assert_eq!(doc["checks"][0]["code"], "USAGE", "{args:?}");
        let _: SmokeReport = serde_json::from_value(doc).unwrap();
    }
}

#[test]
fn the_script_runs_directly_with_an_expect_file_and_no_throughput() {
    let torch = fake_torch("gpu");
    let dir = tempfile::tempdir().unwrap();
    let e = write(dir.path(), "expect.json", &full_expect().to_string());
    let (code, doc) = run_script_directly(
        &[
            "--expect",
            e.to_str().unwrap(),
            "--mode=gpu",
            "--no-throughput",
        ],
        torch.path(),
    );
    assert_eq!(code, 0, "{doc:#}");
    let report: SmokeReport = serde_json::from_value(doc).unwrap();
    let t = report
        .checks
        .iter()
        .find(|c| c.name == "tflops_bf16")
        .unwrap();
    assert_eq!((t.status, t.code.as_str()), (Status::Skip, "NOT_REQUESTED"));
}

/// Every code the script can emit is documented in docs/smoke.md.
#[test]
fn every_script_code_is_documented() {
    let docs = std::fs::read_to_string(root().join("docs/smoke.md")).unwrap();
    let mut codes = Vec::new();
    for piece in SCRIPT.split('"').skip(1).step_by(2) {
        let is_code = piece.len() >= 2
            && piece.as_bytes()[0].is_ascii_uppercase()
            && piece
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            && (piece.contains('_') || piece == "OK" || piece == "USAGE");
        let is_env = piece.starts_with("ENVBUILD_") || piece.ends_with("_VISIBLE_DEVICES");
        if is_code && !is_env {
            codes.push(piece);
        }
    }
    assert!(codes.contains(&"TORCH_MISSING") && codes.contains(&"SHM_TOO_SMALL"));
    let missing: Vec<&&str> = codes
        .iter()
        .filter(|c| !docs.contains(&format!("`{c}`")))
        .collect();
    assert!(missing.is_empty(), "undocumented codes: {missing:?}");
}

/// With a real torch (a CUDA wheel; no GPU needed), point ENVBUILD_TEST_PYTHON_WITH_TORCH at
/// its interpreter. Checked with torch 2.5.1+cu124 from PyPI on a GPU-less machine.
#[test]
fn real_torch_when_one_is_available() {
    let Ok(python) = std::env::var("ENVBUILD_TEST_PYTHON_WITH_TORCH") else {
        eprintln!("skipped: set ENVBUILD_TEST_PYTHON_WITH_TORCH to a python with a CUDA torch");
        return;
    };
    let out = envbuild()
        .args(["smoke", "--json", "--gpus", "none", "--python", &python])
        .output()
        .unwrap();
    let report: SmokeReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&report, out.status.code().unwrap());
    let arch = report
        .checks
        .iter()
        .find(|c| c.name == "arch_list")
        .unwrap();
    assert_eq!(arch.status, Status::Pass, "{}", arch.detail);
    assert!(report.environment["arch_list"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
    assert!(report.environment["cudnn"].is_string());

    // In gpu mode on a machine without a GPU, the reason is classified, never "unknown".
    if !Path::new("/dev/nvidia0").exists() {
        let out = envbuild()
            .args(["smoke", "--json", "--python", &python])
            .output()
            .unwrap();
        let report: SmokeReport = serde_json::from_slice(&out.stdout).unwrap();
        let c = report
            .checks
            .iter()
            .find(|c| c.name == "cuda_available")
            .unwrap();
        assert!(
            ["CUDA_UNAVAILABLE_NO_DRIVER", "NO_GPU_VISIBLE"].contains(&c.code.as_str()),
            "{c:?}"
        );
        assert!(c.detail.contains("Found no NVIDIA driver"), "{}", c.detail);
        assert_eq!(out.status.code(), Some(1));
    }
}

/// `--lock` checks against the lock's own expectations: the CPU-only stand-in fails a lock that
/// expects CUDA 11.8, and a stand-in built for the lock's torch/CUDA passes the cpu-mode checks.
#[test]
fn lock_expectations_drive_the_checks() {
    let lock = root().join("specs/torch-gpu-env/envbuild.lock");
    let run = |variant: &str| {
        let dir = fake_torch(variant);
        let out = envbuild()
            .args([
                "smoke", "--python", "python3", "--json", "--gpus", "none", "--lock",
            ])
            .arg(&lock)
            .env("PYTHONPATH", dir.path())
            .env("ENVBUILD_SMOKE_LIBCUDA", "0")
            .env("ENVBUILD_SMOKE_DEV_NODES", "0")
            .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
            .output()
            .unwrap();
        let report: SmokeReport = serde_json::from_slice(&out.stdout).unwrap();
        assert_schema(&report, out.status.code().unwrap());
        Run {
            report,
            code: out.status.code().unwrap(),
        }
    };
    let cpu = run("cpu");
    assert_eq!(cpu.code, 1);
    cpu.assert("cuda_build", Status::Fail, "TORCH_CPU_BUILD");
    // The default stand-in is torch 2.5.1 for CUDA 12.4: the 11.8 lock catches the drift.
    let cuda = run("cuda-no-driver");
    assert_eq!(cuda.code, 1);
    assert!(
        cuda.report
            .checks
            .iter()
            .any(|c| c.code == "VERSION_DRIFT" && c.detail.contains("11.8")),
        "{:#?}",
        cuda.report.checks
    );
}

/// `envbuild smoke --lock` against the stand-in H100 (torch 2.5.1+cu124, cuDNN 9.1.0, NCCL
/// 2.21.5, sm_50..sm_90, no PTX), with a lock derived from a committed one whose cuDNN, NCCL and
/// PTX differ from the build. Returns the report and the exit code.
fn smoke_with_lock(edit: impl FnOnce(&mut envbuild::core::lock::Lock)) -> Run {
    let text = std::fs::read_to_string(root().join("specs/torch-gpu-env/envbuild.lock")).unwrap();
    let mut lock = envbuild::core::lock::Lock::from_toml(&text).unwrap();
    lock.cuda = "12.4.1".into();
    lock.cudnn = Some("9.2.0.82".into());
    lock.nccl = Some("2.22.3".into());
    lock.arch_list = vec!["sm_80".into(), "sm_90".into()];
    lock.ptx = vec!["compute_90".into()];
    lock.packages = [("torch".to_string(), "2.5.1".to_string())].into();
    lock.install.pip.clear();
    lock.image.shm_size = "1m".into();
    lock.gpus.clear();
    edit(&mut lock);
    let dir = fake_torch("gpu");
    let path = write(dir.path(), "envbuild.lock", &lock.to_toml().unwrap());
    let out = envbuild()
        .args([
            "smoke", "--python", "python3", "--json", "--gpus", "all", "--lock",
        ])
        .arg(&path)
        .env("PYTHONPATH", dir.path())
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    let report: SmokeReport = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_schema(&report, code);
    Run { report, code }
}

/// The lock's confidence reaches the script: a cuDNN or NCCL the table is unsure of, and a PTX
/// that no target GPU uses, only warn; the same differences from confirmed facts fail.
#[test]
fn unconfirmed_lock_facts_and_unused_ptx_only_warn() {
    let confirmed = smoke_with_lock(|_| {});
    assert_eq!(confirmed.code, 1);
    confirmed.assert("cudnn_version", Status::Fail, "VERSION_DRIFT");
    confirmed.assert("nccl_version", Status::Fail, "VERSION_DRIFT");
    confirmed.assert("arch_list", Status::Fail, "ARCH_MISSING");

    let unsure = smoke_with_lock(|l| {
        l.unconfirmed = vec!["cudnn".into(), "nccl".into()];
        l.gpus = vec![envbuild::core::lock::LockedGpu {
            input: "H100".into(),
            model: Some("H100".into()),
            cc: "9.0".into(),
            runs_via: "sm_90".into(),
        }];
    });
    assert_eq!(unsure.code, 0, "{:#?}", unsure.report.checks);
    let c = unsure.assert("cudnn_version", Status::Warn, "VERSION_DRIFT");
    assert!(
        !c.required && c.detail.contains("unconfirmed"),
        "{}",
        c.detail
    );
    unsure.assert("nccl_version", Status::Warn, "VERSION_DRIFT");
    // compute_90 is missing, but the H100 target runs the sm_90 cubin.
    let c = unsure.assert("arch_list", Status::Warn, "ARCH_MISSING_UNUSED");
    assert!(c.detail.contains("compute_90"), "{}", c.detail);
    unsure.assert("matmul", Status::Pass, "OK");
}

/// What this machine's python3 has installed (canonical name -> version), as the script sees it.
fn host_distributions() -> std::collections::BTreeMap<String, String> {
    let code = "import json, re\nfrom importlib import metadata\nd = {}\n\
                for x in metadata.distributions():\n    \
                n = x.metadata['Name'] if x.metadata else None\n    \
                if n: d.setdefault(re.sub(r'[-_.]+', '-', n).lower(), x.version)\n\
                print(json.dumps(d))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .output()
        .expect("python3");
    serde_json::from_slice(&out.stdout).expect("distributions as JSON")
}

#[test]
fn the_closure_check_names_missing_extra_and_other_version_packages() {
    let mut closure = host_distributions();
    for tool in ["pip", "setuptools", "wheel"] {
        closure.remove(tool);
    }
    assert!(
        closure.len() >= 2,
        "the host Python needs two packages besides pip: {closure:?}"
    );
    // The stand-in torch is a distribution too: declared as the base image's (`closure_ignore`),
    // it is not extra; undeclared, it is.
    let expect = |c: &std::collections::BTreeMap<String, String>, ignore: &[&str]| {
        Some(serde_json::json!({"closure": c, "closure_ignore": ignore}))
    };
    let r = smoke(
        Some("cuda-no-driver"),
        "cpu",
        expect(&closure, &["torch"]),
        &[],
    );
    r.assert("closure", Status::Pass, "OK");
    let r = smoke(Some("cuda-no-driver"), "cpu", expect(&closure, &[]), &[]);
    let c = r.assert("closure", Status::Fail, "CLOSURE_DRIFT");
    assert!(
        c.detail.contains("torch 2.5.1+cu124 is not in the lock"),
        "{}",
        c.detail
    );
    // The dev image allows additions (JupyterLab), not changes to the closure.
    let allow = [("ENVBUILD_CLOSURE_EXTRAS", "allow")];
    let r = smoke(Some("cuda-no-driver"), "cpu", expect(&closure, &[]), &allow);
    let c = r.assert("closure", Status::Pass, "OK");
    assert!(
        c.detail.contains("plus 1 allowed additions"),
        "{}",
        c.detail
    );
    let mut missing = closure.clone();
    missing.insert("envbuild-no-such-package".into(), "1.0".into());
    let r = smoke(Some("cuda-no-driver"), "cpu", expect(&missing, &[]), &allow);
    r.assert("closure", Status::Fail, "CLOSURE_DRIFT");

    // One package at another version, one not in the lock, one locked but not installed.
    let mut names = closure.keys().cloned();
    let (changed, extra) = (names.next().unwrap(), names.next().unwrap());
    let mut drifted = closure.clone();
    drifted.insert(changed.clone(), "0.0.0+envbuild".into());
    drifted.remove(&extra);
    drifted.insert("envbuild-no-such-package".into(), "1.0".into());
    let r = smoke(
        Some("cuda-no-driver"),
        "cpu",
        expect(&drifted, &["torch"]),
        &[],
    );
    assert_eq!(r.code, 1);
    let c = r.assert("closure", Status::Fail, "CLOSURE_DRIFT");
    for part in [
        "envbuild-no-such-package 1.0 missing".to_string(),
        format!(
            "{changed} is {}, the lock has 0.0.0+envbuild",
            closure[&changed]
        ),
        format!("{extra} {} is not in the lock", closure[&extra]),
    ] {
        assert!(c.detail.contains(&part), "{part} not in: {}", c.detail);
    }
}

/// A conda environment as the smoke test sees it: a venv (the prefix `sys.prefix` names) with a
/// `conda-meta/` directory of records and the dist-info directories those records installed.
struct CondaPrefix {
    _dir: tempfile::TempDir,
    prefix: std::path::PathBuf,
    site: std::path::PathBuf,
}

impl CondaPrefix {
    fn new() -> CondaPrefix {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("env");
        let out = std::process::Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&prefix)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let out = std::process::Command::new(prefix.join("bin/python"))
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        let site = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        std::fs::create_dir_all(prefix.join("conda-meta")).unwrap();
        CondaPrefix {
            _dir: dir,
            prefix,
            site,
        }
    }

    /// A Python distribution in site-packages; its path relative to the prefix.
    fn dist(&self, name: &str, version: &str, installer: &str) -> String {
        let d = self.site.join(format!("{name}-{version}.dist-info"));
        std::fs::create_dir_all(&d).unwrap();
        let meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
        std::fs::write(d.join("METADATA"), meta).unwrap();
        std::fs::write(d.join("INSTALLER"), format!("{installer}\n")).unwrap();
        d.join("METADATA")
            .strip_prefix(&self.prefix)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// A conda-meta record, as conda writes it (name, version, build, files, among others).
    fn record(&self, name: &str, version: &str, build: &str, files: &[String]) {
        let rec = json!({
            "name": name, "version": version, "build": build, "build_number": 0,
            "channel": "https://conda.anaconda.org/conda-forge", "subdir": "linux-64",
            "files": files,
        });
        let path = self
            .prefix
            .join("conda-meta")
            .join(format!("{name}-{version}-{build}.json"));
        std::fs::write(path, rec.to_string()).unwrap();
    }

    fn clear_records(&self) {
        let meta = self.prefix.join("conda-meta");
        std::fs::remove_dir_all(&meta).unwrap();
        std::fs::create_dir(&meta).unwrap();
    }

    /// `envbuild smoke --json` with this prefix's interpreter and `expect`; the closure check.
    fn closure_check(&self, expect: &serde_json::Value) -> (Check, i32) {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "expect.json", &expect.to_string());
        let out = envbuild()
            .args(["smoke", "--json", "--gpus", "none", "--python"])
            .arg(self.prefix.join("bin/python"))
            .arg("--expect-file")
            .arg(f)
            .env_remove("PYTHONPATH")
            .env("ENVBUILD_SMOKE_LIBCUDA", "0")
            .env("ENVBUILD_SMOKE_DEV_NODES", "0")
            .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let report: SmokeReport = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "not a report ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let code = out.status.code().unwrap();
        assert_schema(&report, code);
        (
            crate::support::check_named(&report, "closure").clone(),
            code,
        )
    }
}

#[test]
fn the_conda_closure_check_names_missing_extra_and_other_build_records() {
    let env = CondaPrefix::new();
    // conda's Python distributions (numpy; pytorch installs `torch`), a pip part (einops).
    let numpy = env.dist("numpy", "2.3.4", "conda");
    // Installed by conda though its INSTALLER says pip (as older conda-forge builds do): the
    // record's file list decides, not that file.
    let torch = env.dist("torch", "2.10.0", "pip");
    env.dist("einops", "0.8.1", "pip");
    let lock_records = [
        ("_openmp_mutex", "4.5", "2_gnu", vec![]),
        ("libgcc", "15.2.0", "h767d61c_7", vec![]),
        ("numpy", "2.3.4", "py311h33ff503_0", vec![numpy.clone()]),
        ("python", "3.11.7", "hab00c5b_0_cpython", vec![]),
        (
            "pytorch",
            "2.10.0",
            "cuda129_py311_h3b5d2a4_200",
            vec![torch.clone()],
        ),
    ];
    let conda: serde_json::Map<String, serde_json::Value> = lock_records
        .iter()
        .map(|(n, v, b, _)| (n.to_string(), json!({"version": v, "build": b})))
        .collect();
    let expect = json!({"closure": {"einops": "0.8.1"}, "conda_closure": conda});

    // Exactly the lock: conda's numpy and torch are not pip extras.
    for (n, v, b, files) in &lock_records {
        env.record(n, v, b, files);
    }
    // (No torch in this prefix: the run fails on that; the closure check is what is asserted.)
    let (c, _) = env.closure_check(&expect);
    assert_eq!((c.status, c.code.as_str()), (Status::Pass, "OK"), "{c:?}");
    assert!(
        c.detail.contains("the 6 installed packages"),
        "{}",
        c.detail
    );

    // One record missing, one at another build, one at another version, one not in the lock,
    // and a pip distribution no conda record installed.
    env.clear_records();
    env.record("libgcc", "15.2.0", "h767d61c_8", &[]);
    env.record("numpy", "2.3.4", "py311h33ff503_0", &[numpy]);
    env.record("python", "3.11.7", "hab00c5b_0_cpython", &[]);
    env.record("pytorch", "2.11.0", "cuda129_py311_h3b5d2a4_200", &[torch]);
    env.record("zlib", "1.3.1", "hb9d3cd8_2", &[]);
    env.dist("requests", "2.32.3", "pip");
    let (c, code) = env.closure_check(&expect);
    assert_eq!(
        (c.status, c.code.as_str(), code),
        (Status::Fail, "CLOSURE_DRIFT", 1)
    );
    assert!(c.required);
    for part in [
        "conda package _openmp_mutex 4.5=2_gnu missing",
        "conda package libgcc is 15.2.0=h767d61c_8, the lock has 15.2.0=h767d61c_7",
        "conda package pytorch is 2.11.0=cuda129_py311_h3b5d2a4_200, the lock has \
         2.10.0=cuda129_py311_h3b5d2a4_200",
        "conda package zlib 1.3.1=hb9d3cd8_2 is not in the lock",
        "requests 2.32.3 is not in the lock",
    ] {
        assert!(c.detail.contains(part), "{part} not in: {}", c.detail);
    }
    for quiet in ["numpy", "torch", "einops", "python"] {
        assert!(
            !c.detail.contains(&format!(" {quiet} ")) && !c.detail.starts_with(quiet),
            "{quiet} reported: {}",
            c.detail
        );
    }

    // A prefix with no conda-meta at all: the conda part is missing as a whole.
    std::fs::remove_dir_all(env.prefix.join("conda-meta")).unwrap();
    let (c, _) = env.closure_check(&expect);
    assert_eq!(c.code, "CLOSURE_DRIFT");
    assert!(
        c.detail
            .contains("has no conda-meta directory: the lock's 5 conda packages are missing"),
        "{}",
        c.detail
    );
}
