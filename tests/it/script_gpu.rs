//! The script's GPU verdicts, run directly (as images do) against stand-in torches that
//! simulate several GPUs, a wrong GPU, hangs, MIG slices, a V100 and CUDA-event timing; the
//! expectations carry keys only the script reads (`target_ccs`, `unconfirmed`, time limits).

use crate::support::{fixture, tempdir, write};
use envbuild::core::report::{Check, Status as CheckStatus};
use envbuild::core::smoke::{parse_output, SmokeReport, SCRIPT};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One run of the script: the parsed report (checked by the Rust parser, so the schema and
/// the exit code agree), its raw JSON and how long it took.
struct Run {
    report: SmokeReport,
    doc: Value,
    code: i32,
    took: Duration,
}

impl Run {
    fn check(&self, name: &str) -> &Check {
        crate::support::check_named(&self.report, name)
    }

    /// Asserts status and code; returns the detail.
    fn assert(&self, name: &str, status: CheckStatus, code: &str) -> &str {
        &crate::support::assert_check(&self.report, name, status, code).detail
    }
}

/// Run the embedded script with the stand-in torch `variant` (its settings merged with
/// `config`), in `mode`, against the expectations `expect`.
fn run(variant: &str, config: Value, mode: &str, expect: Value) -> Run {
    let dir = tempdir();
    let torch = dir.path().join("site");
    let made = std::process::Command::new("python3")
        .arg(fixture("fake_torch.py"))
        .arg("make")
        .arg(&torch)
        .args(["--variant", variant, "--config", &config.to_string()])
        .status()
        .expect("python3 runs");
    assert!(made.success(), "fake_torch.py make {variant} failed");
    let script = write(dir.path(), "envbuild_smoke.py", SCRIPT);
    let e = write(dir.path(), "expect.json", &expect.to_string());
    let start = Instant::now();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg("--expect")
        .arg(&e)
        .arg(format!("--mode={mode}"))
        .env("PYTHONPATH", &torch)
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .output()
        .unwrap();
    let took = start.elapsed();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().expect("the script exits, not killed");
    let report = parse_output(&stdout, &stderr, Some(code))
        .unwrap_or_else(|e| panic!("{e}\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    let doc = serde_json::from_str(&stdout).unwrap();
    Run {
        report,
        doc,
        code,
        took,
    }
}

fn gpu(variant: &str, expect: Value) -> Run {
    run(variant, json!({}), "gpu", expect)
}

/// A short per-check limit, so that hang tests take about a second.
fn fast() -> Value {
    json!({"check_timeout_s": 1})
}

#[test]
fn every_gpu_gets_a_checked_matmul_and_the_wrong_one_is_named() {
    let r = gpu("gpu-4-one-wrong", fast());
    assert_eq!(r.code, 1);
    let d = r.assert("matmul", CheckStatus::Fail, "MATMUL_WRONG");
    assert!(
        d.contains("GPU 2 (NVIDIA H100 80GB HBM3) differs from the CPU"),
        "{d}"
    );
    assert!(d.ends_with("fine on GPU 0, 1, 3"), "{d}");
    let d = r.assert("pinned_copy", CheckStatus::Pass, "OK");
    for i in 0..4 {
        assert!(d.contains(&format!("GPU {i} intact")), "{d}");
    }
    for name in ["cudnn_conv", "arch_coverage"] {
        let d = r.assert(name, CheckStatus::Pass, "OK");
        assert!(d.contains("GPU 3"), "{d}");
    }
    r.assert("nccl_allreduce", CheckStatus::Pass, "OK");
}

#[test]
fn arch_coverage_names_the_one_gpu_the_build_does_not_cover() {
    let r = gpu("gpu-mixed", fast());
    assert_eq!(r.code, 1);
    let d = r.assert("arch_coverage", CheckStatus::Fail, "ARCH_MISSING");
    assert!(
        d.starts_with("GPU 1 NVIDIA GeForce RTX 5090 (sm_120) has no kernel image"),
        "{d}"
    );
    assert!(!d.contains("GPU 0"), "{d}");
}

#[test]
fn the_nccl_all_reduce_is_required_on_two_gpus() {
    let r = gpu("gpu-2", fast());
    assert_eq!(r.code, 0);
    r.assert("nccl_allreduce", CheckStatus::Pass, "OK");
    assert!(r.check("nccl_allreduce").required);

    let r = run("gpu-2", json!({"nccl_wrong": true}), "gpu", fast());
    assert_eq!(r.code, 1, "a wrong all-reduce fails the run");
    let d = r.assert("nccl_allreduce", CheckStatus::Fail, "NCCL_FAILED");
    assert!(d.ends_with("on GPU 1"), "{d}");
    assert!(r.check("nccl_allreduce").required);

    let r = gpu("gpu", fast());
    let c = r.check("nccl_allreduce");
    assert_eq!(
        (c.status, c.code.as_str(), c.required),
        (CheckStatus::Skip, "ONE_GPU", false)
    );
}

#[test]
fn a_hung_all_reduce_is_named_while_every_other_check_reports() {
    // The stand-in's all-reduce sleeps 30 s: the script must neither wait for it nor for the
    // stuck thread at exit.
    let r = gpu("nccl-hang", fast());
    assert!(r.took < Duration::from_secs(15), "took {:?}", r.took);
    assert_eq!(r.code, 1);
    let d = r.assert("nccl_allreduce", CheckStatus::Fail, "CHECK_TIMEOUT");
    assert!(
        d.starts_with("the NCCL all-reduce over 2 GPUs did not answer within 1 s"),
        "{d}"
    );
    for name in [
        "devices",
        "arch_coverage",
        "matmul",
        "autocast",
        "cudnn_conv",
        "pinned_copy",
        "tflops_bf16",
        "tflops_tf32",
        "h2d_pinned",
        "h2d_pageable",
    ] {
        r.assert(name, CheckStatus::Pass, "OK");
    }
}

#[test]
fn a_gpu_that_hangs_is_named_and_not_tried_again() {
    // GPU 1's matmuls sleep 30 s: one time limit is spent, not one per check.
    let r = gpu("gpu-hang", fast());
    assert!(r.took < Duration::from_secs(15), "took {:?}", r.took);
    assert_eq!(r.code, 1);
    let d = r.assert("matmul", CheckStatus::Fail, "CHECK_TIMEOUT");
    assert!(
        d.starts_with("GPU 1 (NVIDIA H100 80GB HBM3) did not answer within 1 s"),
        "{d}"
    );
    assert!(d.ends_with("fine before it: GPU 0"), "{d}");
    for name in ["autocast", "cudnn_conv", "pinned_copy"] {
        let d = r.assert(name, CheckStatus::Fail, "GPU_HUNG");
        assert!(d.contains("GPU 1 (NVIDIA H100 80GB HBM3) not tried: it hung in matmul"));
        assert!(d.ends_with("fine on GPU 0"), "{d}");
    }
    let d = r.assert("nccl_allreduce", CheckStatus::Fail, "GPU_HUNG");
    assert_eq!(d, "not tried: GPU 1 hung in matmul");
    // The throughput probes run on GPU 0, which is fine.
    r.assert("tflops_bf16", CheckStatus::Pass, "OK");
}

#[test]
fn a_hang_in_an_optional_check_still_fails_the_run() {
    // GPU 0 is the throughput GPU: its hang shows first in matmul, then nothing touches it.
    let r = run(
        "gpu",
        json!({"devices": [{"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "hang_s": 30}]}),
        "gpu",
        fast(),
    );
    assert_eq!(r.code, 1);
    r.assert("matmul", CheckStatus::Fail, "CHECK_TIMEOUT");
    let c = r.check("tflops_bf16");
    assert_eq!((c.status, c.code.as_str()), (CheckStatus::Skip, "GPU_HUNG"));
    assert_eq!(c.detail, "not run: GPU 0 hung in matmul");
}

#[test]
fn the_budget_bounds_every_gpu_check() {
    // A per-check limit longer than the whole budget: the budget ends the hung matmul, and the
    // checks after it are not run (required ones fail, optional ones are skipped).
    let r = gpu("gpu-hang", json!({"check_timeout_s": 60, "budget_s": 4}));
    assert!(r.took < Duration::from_secs(15), "took {:?}", r.took);
    assert_eq!(r.code, 1);
    let d = r.assert("matmul", CheckStatus::Fail, "CHECK_TIMEOUT");
    assert!(
        d.contains("the GPU checks' time budget (4 s) ran out"),
        "{d}"
    );
    for name in ["autocast", "cudnn_conv", "pinned_copy", "nccl_allreduce"] {
        let d = r.assert(name, CheckStatus::Fail, "BUDGET_SPENT");
        assert_eq!(d, "not run: the GPU checks' time budget (4 s) was spent");
    }
    for name in ["tflops_bf16", "h2d_pageable"] {
        r.assert(name, CheckStatus::Skip, "BUDGET_SPENT");
    }
}

#[test]
fn throughput_is_timed_with_cuda_events_over_enough_work() {
    // The stand-in's GPU clock advances by exactly what its rates need, and the host clock
    // plays no part: the figures come out exactly only when CUDA events time them.
    let r = gpu("gpu", fast());
    assert_eq!(r.code, 0);
    for (name, want) in [
        ("tflops_bf16", 700.0),
        ("tflops_tf32", 350.0),
        ("h2d_pinned", 50.0),
        ("h2d_pageable", 25.0),
    ] {
        let d = r.assert(name, CheckStatus::Pass, "OK");
        let v = r.check(name).value.unwrap();
        assert!((v - want).abs() < 1e-6 * want, "{name}: {v}");
        assert!(d.contains("timed with CUDA events"), "{d}");
        let p = &r.doc["environment"]["probes"][name];
        assert!(p["timed_s"].as_f64().unwrap() >= 0.2, "{name}: {p}");
        // The old probe stopped at 50 calls: about 9 ms of work on an H100.
        assert!(p["calls"].as_u64().unwrap() > 50, "{name}: {p}");
        assert_eq!(p["gpu"], 0);
    }
}

#[test]
fn emulated_bf16_is_not_measured_against_the_tensor_cores() {
    // The stand-in V100 says bf16 is supported (as real torch does) but runs it 8x slower.
    let r = gpu("v100", fast());
    assert_eq!(r.code, 0);
    let d = r.assert("autocast", CheckStatus::Pass, "OK");
    assert!(d.ends_with("GPU 0 fp16 within 0"), "{d}");
    let d = r.assert("tflops_bf16", CheckStatus::Pass, "OK");
    assert!(
        d.starts_with("fp16 100.0 TFLOP/s = 80% of the nominal dense peak 125 TFLOP/s"),
        "{d}"
    );
    assert_eq!(
        r.doc["environment"]["probes"]["tflops_bf16"]["dtype"],
        "fp16"
    );
    // An Ampere GPU keeps bf16.
    let d = gpu("gpu", fast()).check("autocast").detail.clone();
    assert!(d.ends_with("GPU 0 bf16 within 0"), "{d}");
}

#[test]
fn a_mig_slice_is_compared_with_its_share_of_the_peak() {
    // 32 TFLOP/s is 10% of a full A100's 312 (a THROUGHPUT_LOW warning), but 79% of a 1g
    // slice's 14 of 108 SMs.
    let r = gpu("mig", fast());
    assert_eq!(r.code, 0);
    let d = r.assert("tflops_bf16", CheckStatus::Pass, "OK");
    assert!(
        d.starts_with("bf16 32.0 TFLOP/s = 79% of this MIG slice's share (14 of 108 SMs) of the nominal dense peak 312 TFLOP/s"),
        "{d}"
    );
    assert_eq!(r.doc["environment"]["devices"][0]["mig"], true);
    assert_eq!(r.doc["environment"]["devices"][0]["sm_count"], 14);
    let share = r.doc["environment"]["nominal_peaks"]["share"]
        .as_f64()
        .unwrap();
    assert!((share - 14.0 / 108.0).abs() < 1e-9, "{share}");
    // The host link is not split: compared with the full GPU's PCIe figure.
    let d = r.assert("h2d_pinned", CheckStatus::Pass, "OK");
    assert!(
        d.contains("62% of the nominal PCIe x16 peak 32 GB/s"),
        "{d}"
    );

    // Without an SM count, the profile name gives the share.
    let slice =
        |name: &str| json!({"devices": [{"name": name, "cc": [8, 0], "bf16": 32.0, "tf32": 16.0}]});
    let r = run(
        "mig",
        slice("NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
        "gpu",
        fast(),
    );
    let d = r.assert("tflops_bf16", CheckStatus::Pass, "OK");
    assert!(d.contains("share (1 of 7 compute slices)"), "{d}");
    let r = run("mig", slice("NVIDIA A100-SXM4-80GB MIG"), "gpu", fast());
    let d = r.assert("tflops_bf16", CheckStatus::Pass, "OK");
    assert!(
        d.starts_with("bf16 32.0 TFLOP/s (a MIG slice of unknown size;"),
        "{d}"
    );
    // A full A100 this slow is a warning.
    let r = run(
        "mig",
        json!({"devices": [{"name": "NVIDIA A100-SXM4-80GB", "cc": [8, 0], "sms": 108,
                            "bf16": 32.0}]}),
        "gpu",
        fast(),
    );
    r.assert("tflops_bf16", CheckStatus::Warn, "THROUGHPUT_LOW");
}

/// Expectations over the default stand-in build (sm_50 ... sm_90, no PTX), in cpu mode.
fn arch_run(arch_list: &[&str], extra: Value) -> Run {
    let mut expect = json!({"arch_list": arch_list});
    expect
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    run("cuda-no-driver", json!({}), "cpu", expect)
}

#[test]
fn a_missing_arch_entry_fails_only_when_a_target_gpu_needs_it() {
    let lock = ["sm_80", "sm_90", "compute_90"];
    // Without target_ccs: as before, every missing entry fails.
    let r = arch_run(&lock, json!({}));
    assert_eq!(r.code, 1);
    let d = r.assert("arch_list", CheckStatus::Fail, "ARCH_MISSING");
    assert!(
        d.starts_with("the build lacks compute_90 of the lock's architectures (has:"),
        "{d}"
    );
    // No target GPU runs on that PTX: a warning.
    let r = arch_run(&lock, json!({"target_ccs": ["9.0", "8.0"]}));
    assert_eq!(r.code, 0);
    let d = r.assert("arch_list", CheckStatus::Warn, "ARCH_MISSING_UNUSED");
    assert!(
        d.starts_with("the build lacks compute_90 of the lock's architectures, which no target GPU (9.0, 8.0) needs"),
        "{d}"
    );
    // A 10.0 target has only that PTX.
    let r = arch_run(&lock, json!({"target_ccs": ["sm_100", "9.0"]}));
    assert_eq!(r.code, 1);
    let d = r.assert("arch_list", CheckStatus::Fail, "ARCH_MISSING");
    assert!(
        d.contains(
            "lacks compute_90 of the lock's architectures, needed by target GPU(s) 10.0 (has:"
        ),
        "{d}"
    );
    // ... unless the lock marks its PTX unconfirmed.
    let r = arch_run(
        &lock,
        json!({"target_ccs": ["10.0"], "unconfirmed": ["ptx"]}),
    );
    assert_eq!(r.code, 0);
    let d = r.assert("arch_list", CheckStatus::Warn, "ARCH_MISSING");
    assert!(
        d.contains("compute_90, which the lock marks unconfirmed"),
        "{d}"
    );
    // A cubin still serves an 8.6 target through sm_80: the missing sm_86 is not needed.
    let r = run(
        "cuda-no-driver",
        json!({"arch": "sm_80 sm_90"}),
        "cpu",
        json!({"arch_list": ["sm_80", "sm_86"], "target_ccs": ["8.6"]}),
    );
    r.assert("arch_list", CheckStatus::Warn, "ARCH_MISSING_UNUSED");
    // Both kinds at once: the needed cubin fails and the detail names the unneeded PTX.
    let r = run(
        "cuda-no-driver",
        json!({"arch": "sm_90"}),
        "cpu",
        json!({"arch_list": ["sm_75", "sm_90", "compute_90"], "target_ccs": ["7.5", "9.0"]}),
    );
    let d = r.assert("arch_list", CheckStatus::Fail, "ARCH_MISSING");
    assert_eq!(
        d,
        "the build lacks sm_75 of the lock's architectures, needed by target GPU(s) 7.5 \
         (has: sm_90); it also lacks compute_90, which no target GPU (7.5, 9.0) needs"
    );
}

#[test]
fn a_visible_gpu_that_loses_its_cubin_fails_arch_coverage() {
    // The build has sm_80 + PTX compute_80; the lock promised sm_90. The only target is 8.0,
    // so arch_list only warns, but the H100 in the machine now runs on JIT-compiled PTX.
    let r = run(
        "gpu",
        json!({"arch": "sm_80 compute_80"}),
        "gpu",
        json!({"arch_list": ["sm_80", "sm_90"], "target_ccs": ["8.0"], "check_timeout_s": 1}),
    );
    assert_eq!(r.code, 1);
    r.assert("arch_list", CheckStatus::Warn, "ARCH_MISSING_UNUSED");
    let d = r.assert("arch_coverage", CheckStatus::Fail, "ARCH_MISSING");
    assert!(
        d.starts_with("GPU 0 NVIDIA H100 80GB HBM3 (sm_90) runs on ptx 8.0, but the lock's cubin 9.0 is missing"),
        "{d}"
    );
    // Without the lock's list, PTX-only is the usual warning.
    let r = run("gpu", json!({"arch": "sm_80 compute_80"}), "gpu", fast());
    r.assert("arch_coverage", CheckStatus::Warn, "ARCH_PTX_ONLY");
}

#[test]
fn an_unconfirmed_fact_that_differs_only_warns() {
    let expect = |unconfirmed: Value| {
        json!({"cudnn": "9.5.0", "nccl": "2.20.5", "torch": "2.6.0",
               "packages": {"torch": "2.6.0"}, "unconfirmed": unconfirmed})
    };
    let r = run(
        "cuda-no-driver",
        json!({}),
        "cpu",
        expect(json!(["cudnn", "package:torch"])),
    );
    assert_eq!(r.code, 1);
    let d = r.assert("cudnn_version", CheckStatus::Warn, "VERSION_DRIFT");
    assert!(
        d.ends_with("(the lock marks this fact unconfirmed, so only a warning)"),
        "{d}"
    );
    assert!(!r.check("cudnn_version").required);
    r.assert("package:torch", CheckStatus::Warn, "VERSION_DRIFT");
    r.assert("nccl_version", CheckStatus::Fail, "VERSION_DRIFT");
    r.assert("torch_version", CheckStatus::Fail, "VERSION_DRIFT");
    // The map form: true marks a fact unconfirmed, false does not.
    let r = run(
        "cuda-no-driver",
        json!({}),
        "cpu",
        expect(json!({"nccl": true, "torch": true, "packages": true, "cudnn": false})),
    );
    assert_eq!(r.code, 1);
    r.assert("nccl_version", CheckStatus::Warn, "VERSION_DRIFT");
    r.assert("torch_version", CheckStatus::Warn, "VERSION_DRIFT");
    r.assert("package:torch", CheckStatus::Warn, "VERSION_DRIFT");
    r.assert("cudnn_version", CheckStatus::Fail, "VERSION_DRIFT");
    // A CPU build where CUDA is expected still fails, unconfirmed or not.
    let r = run(
        "cpu",
        json!({}),
        "cpu",
        json!({"cuda": "12.4", "unconfirmed": ["cuda"]}),
    );
    r.assert("cuda_build", CheckStatus::Fail, "TORCH_CPU_BUILD");
}

#[test]
fn malformed_new_expectation_keys_are_usage_errors() {
    let dir = tempdir();
    let script = write(dir.path(), "envbuild_smoke.py", SCRIPT);
    for bad in [
        json!({"target_ccs": "9.0"}),
        json!({"target_ccs": ["nine"]}),
        json!({"target_ccs": [9.0]}),
        json!({"unconfirmed": "cudnn"}),
        json!({"unconfirmed": {"cudnn": "yes"}}),
        json!({"check_timeout_s": 0}),
        json!({"check_timeout_s": "60"}),
        json!({"budget_s": true}),
        json!({"budget_s": -1}),
    ] {
        let e = write(dir.path(), "e.json", &bad.to_string());
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg("--expect")
            .arg(&e)
            .env("PYTHONPATH", dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["checks"][0]["code"], "USAGE", "{bad}");
    }
}
