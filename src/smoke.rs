//! The embedded CUDA smoke test: the script, its expectations and its report.
//!
//! The script (`templates/smoke/envbuild_smoke.py`) runs with the standard library plus torch,
//! prints one JSON document on stdout and exits 0 only when every required check passes. This
//! file holds the contract between the Rust side and the script; it performs no I/O.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The script, embedded so that `envbuild smoke`, `envbuild image` and rendered images all run
/// the same bytes.
pub const SCRIPT: &str = include_str!("../templates/smoke/envbuild_smoke.py");

/// Where rendered images carry the script and the lock's expectations.
pub const IMAGE_SCRIPT_PATH: &str = "/opt/envbuild/envbuild_smoke.py";
pub const IMAGE_EXPECT_PATH: &str = "/opt/envbuild/expect.json";

/// What the lock expects of the environment. Every field is optional: without a lock the smoke
/// test only reports. Serialised as the `--expect FILE` JSON the script reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// `torch.__version__` without the local part (`2.5.1` matches `2.5.1+cu124`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// `torch.version.cuda` as major.minor (`12.4`); `None` when the lock expects a CPU build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// cuDNN as `9.1.0.70`; compared by major.minor.patch with `torch.backends.cudnn.version()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<String>,
    /// NCCL as `2.21.5`, compared with `torch.cuda.nccl.version()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<String>,
    /// The build's architectures as `sm_80` (cubins) and `compute_90` (PTX), as
    /// `torch.cuda.get_arch_list()` reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arch_list: Vec<String>,
    /// Python as `3.10` or `3.10.14`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// Other packages whose installed version must match (`torchvision`, `numpy`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// Shared memory the DataLoader workers need, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_shm_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Pass,
    Warn,
    Skip,
    Fail,
}

/// One check of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable check name, e.g. `torch_import`, `cuda_available`, `matmul`.
    pub name: String,
    pub status: CheckStatus,
    /// Stable code, e.g. `OK`, `TORCH_MISSING`, `TORCH_CPU_BUILD`, `ARCH_MISSING`.
    pub code: String,
    /// One line a person can act on.
    pub detail: String,
    /// A failed required check fails the run; a failed optional one only warns.
    #[serde(default = "yes")]
    pub required: bool,
    /// A measured figure, where the check has one (TFLOP/s, GB/s, bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// The JSON document the script prints (schema 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeReport {
    pub schema: u32,
    pub status: Verdict,
    /// `gpu` or `cpu`.
    pub mode: String,
    pub duration_s: f64,
    /// Facts about the environment: python, torch, cuda, cudnn, nccl, arch_list, devices, ...
    #[serde(default)]
    pub environment: serde_json::Map<String, serde_json::Value>,
    pub checks: Vec<Check>,
}
