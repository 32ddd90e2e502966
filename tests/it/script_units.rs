//! The script's pure helpers, called from Python with inputs chosen here; the architecture
//! rule is checked against `version::coverage` so the script and `doctor` never disagree.

use envbuild::core::smoke::SCRIPT;
use envbuild::core::version::{coverage, Cc, Coverage};
use serde_json::{json, Value};

/// Import the embedded script as a module and evaluate `calls` (a JSON list of
/// [function, args]) with it; returns the results as JSON.
fn call(calls: &Value) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("envbuild_smoke.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let driver = "\
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location('smoke', sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
calls = json.loads(sys.argv[2])
print(json.dumps([getattr(m, f)(*args) for f, args in calls]))
";
    let out = std::process::Command::new("python3")
        .args(["-c", driver])
        .arg(&script)
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn version_helpers() {
    let cases = json!([
        ["cudnn_text", [8902]],
        ["cudnn_text", [90100]],
        ["cudnn_text", [90501]],
        ["nccl_text", [[2, 21, 5]]],
        ["nccl_text", [2708]],
        ["nccl_text", [21903]],
        ["version_matches", ["2.5.1+cu124", "2.5.1"]],
        ["version_matches", ["2.5.1+cu124", "2.5.1+cu121"]],
        ["version_matches", ["3.11.7", "3.11"]],
        ["version_matches", ["3.1.0", "3.11"]],
        ["version_matches", ["2.6.0a0+git1234", "2.6"]],
        ["version_matches", ["2.5.10", "2.5.1"]],
        ["cudnn_matches", ["9.1.0", "9.1.0.70"]],
        ["cudnn_matches", ["9.1.1", "9.1.0.70"]],
    ]);
    let want = json!([
        "8.9.2", "9.1.0", "9.5.1", "2.21.5", "2.7.8", "2.19.3", true, false, true, false, true,
        false, true, false
    ]);
    assert_eq!(Value::Array(call(&cases)), want);
}

#[test]
fn nominal_peaks_match_device_names() {
    let names = [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A10G",
        "NVIDIA L40S",
        "NVIDIA L4",
        "Tesla T4",
        "NVIDIA GeForce RTX 4090",
    ];
    let calls: Vec<Value> = names.iter().map(|n| json!(["nominal_peak", [n]])).collect();
    let got: Vec<Value> = call(&Value::Array(calls))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        got,
        vec![
            json!("H100"),
            json!("H100 PCIE"),
            json!("A100"),
            json!("A10G"),
            json!("L40S"),
            json!("L4"),
            json!("T4"),
            Value::Null
        ]
    );
}

#[test]
fn the_script_and_rust_agree_on_architecture_coverage() {
    let arch_lists: [&[&str]; 4] = [
        &["sm_80", "sm_86", "sm_90"],
        &["sm_90", "sm_100", "sm_120", "compute_120"],
        &["sm_50", "sm_60", "sm_70", "sm_75", "compute_75"],
        &["sm_90a", "compute_90"],
    ];
    let devices = [
        (7, 0),
        (7, 5),
        (8, 0),
        (8, 6),
        (8, 9),
        (9, 0),
        (10, 0),
        (10, 3),
        (11, 0),
        (12, 0),
        (12, 1),
        (13, 0),
    ];
    let mut calls = Vec::new();
    let mut want = Vec::new();
    for list in arch_lists {
        let (mut cubins, mut ptx) = (Vec::new(), Vec::new());
        for a in list {
            let cc = Cc::parse(a).unwrap();
            if a.starts_with("compute_") {
                ptx.push(cc);
            } else {
                cubins.push(cc);
            }
        }
        for (maj, min) in devices {
            calls.push(json!(["coverage", [list, [maj, min]]]));
            want.push(match coverage(&cubins, &ptx, Cc::new(maj, min)) {
                Coverage::Cubin(c) => json!(["cubin", [c.major, c.minor]]),
                Coverage::Ptx(p) => json!(["ptx", [p.major, p.minor]]),
                Coverage::None => json!([null, null]),
            });
        }
    }
    assert_eq!(call(&Value::Array(calls)), want);
}

#[test]
fn unavailable_cuda_classification() {
    let cases = json!([
        ["classify_cuda_unavailable", ["The NVIDIA driver on your system is too old (found version 11040).", {}, true, ["nvidia0"], false]],
        ["classify_cuda_unavailable", ["Found no NVIDIA driver on your system.", {"NVIDIA_VISIBLE_DEVICES": "void"}, false, [], true]],
        ["classify_cuda_unavailable", ["Found no NVIDIA driver on your system.", {"NVIDIA_VISIBLE_DEVICES": "all"}, false, [], true]],
        ["classify_cuda_unavailable", ["Found no NVIDIA driver on your system.", {}, false, [], false]],
        ["classify_cuda_unavailable", ["Found no NVIDIA driver on your system.", {}, false, ["nvidia0", "nvidiactl"], true]],
        ["classify_cuda_unavailable", ["CUDA error: no CUDA-capable device is detected", {}, true, ["nvidiactl"], false]],
        ["classify_cuda_unavailable", ["CUDA driver initialization failed, you might not have a CUDA gpu.", {}, true, ["nvidia0"], false]],
        ["classify_cuda_unavailable", [null, {}, true, ["nvidia0"], false]],
    ]);
    let codes: Vec<Value> = call(&cases).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        codes,
        vec![
            json!("CUDA_DRIVER_TOO_OLD"),
            json!("NO_GPU_VISIBLE"),
            json!("NO_GPU_VISIBLE"),
            json!("CUDA_UNAVAILABLE_NO_DRIVER"),
            json!("CUDA_UNAVAILABLE_NO_DRIVER"),
            json!("NO_GPU_VISIBLE"),
            json!("CUDA_UNAVAILABLE"),
            json!("CUDA_UNAVAILABLE"),
        ]
    );
}

#[test]
fn compute_capabilities_and_mig_shares() {
    let a100 = json!({"bf16": 312.0, "sms": 108});
    let cases = json!([
        ["parse_cc", ["9.0"]],
        ["parse_cc", ["12.1"]],
        ["parse_cc", ["sm_90a"]],
        ["parse_cc", ["compute_90"]],
        ["parse_cc", ["9"]],
        ["device_share", [{"name": "NVIDIA A100-SXM4-80GB", "sm_count": 108, "mig": false}, a100]],
        ["device_share", [{"name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "sm_count": 42, "mig": true}, a100]],
        ["device_share", [{"name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "sm_count": null, "mig": true}, a100]],
        ["device_share", [{"name": "NVIDIA A100-SXM4-80GB MIG", "sm_count": null, "mig": true}, a100]],
        ["device_share", [{"name": "NVIDIA GeForce RTX 4090", "sm_count": 128, "mig": false}, {}]],
    ]);
    let want = json!([
        [9, 0],
        [12, 1],
        [9, 0],
        null,
        null,
        [1.0, null],
        [42.0 / 108.0, "42 of 108 SMs"],
        [3.0 / 7.0, "3 of 7 compute slices"],
        [null, "a MIG slice of unknown size"],
        [1.0, null],
    ]);
    assert_eq!(Value::Array(call(&cases)), want);
}

#[test]
fn missing_arch_entries_are_needed_only_where_coverage_gets_worse() {
    let build = ["sm_80", "sm_90"];
    let lock = ["sm_80", "sm_86", "sm_90", "compute_90"];
    let missing = ["sm_86", "compute_90"];
    let cases = json!([
        // 8.6 still has a cubin (sm_80), 9.0 its own: nothing is needed.
        ["needed_entries", [build, lock, missing, [[8, 6], [9, 0]]]],
        // 10.0 had the PTX and now has nothing.
        ["needed_entries", [build, lock, missing, [[10, 0], [8, 9]]]],
        [
            "worse_coverage",
            [["sm_80", "compute_80"], ["sm_90"], [9, 0]]
        ],
        [
            "worse_coverage",
            [["sm_90"], ["sm_90", "compute_90"], [9, 0]]
        ],
        ["serves", ["sm_80", [8, 9]]],
        ["serves", ["sm_86", [8, 0]]],
        ["serves", ["sm_90", [10, 0]]],
        ["serves", ["compute_90", [12, 0]]],
        ["serves", ["compute_90", [8, 9]]],
    ]);
    let want = json!([
        [[], []],
        [["compute_90"], [[10, 0]]],
        true,
        false,
        true,
        false,
        false,
        true,
        false,
    ]);
    assert_eq!(Value::Array(call(&cases)), want);
}

/// The script runs in old images: its syntax must parse as Python 3.7.
#[test]
fn the_script_is_python_3_7_syntax() {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import ast, sys; ast.parse(sys.stdin.read(), feature_version=(3, 7))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(SCRIPT.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
