//! What a host's NVIDIA stack is, as facts (`HostFacts`, `Gpu`), and the pure parsers of what
//! the probes read: `nvidia-smi` CSV and banner, `/proc/driver/nvidia/version`, NVML's CUDA
//! integer and the `ENVBUILD_GPUS` override. Unit-tested on real text. This module performs no
//! I/O; the probes that feed it live in `infra::host`.

use crate::core::compat::Table;
use crate::core::version::{Cc, Version};
use serde::Serialize;

/// One GPU as the host reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    /// `None` when neither the driver nor the name table knows it.
    pub cc: Option<Cc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The driver's stable id of the board (`GPU-5e7c...`), when the probe reads one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// What the probes found, with where each fact came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    pub driver: Option<Version>,
    pub driver_source: String,
    /// The highest CUDA the driver supports (what `nvidia-smi` prints as "CUDA Version").
    pub cuda: Option<Version>,
    pub cuda_source: String,
    pub gpus: Vec<Gpu>,
    pub gpus_source: String,
    /// The host's CPU architecture as `uname -m` names it (`x86_64`, `aarch64`).
    pub cpu_arch: Option<String>,
    pub cpu_arch_source: String,
    /// Why probes that found nothing found nothing, for the report.
    pub notes: Vec<String>,
}

pub fn is_none_word(s: &str) -> bool {
    matches!(s.trim().to_ascii_lowercase().as_str(), "" | "none" | "0")
}

// ------------------------------------------------------------------ pure parsers and tables

/// One row of `nvidia-smi --query-gpu=name,driver_version,memory.total[,compute_cap]
/// --format=csv,noheader`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiRow {
    pub name: String,
    pub driver: Version,
    pub memory_bytes: Option<u64>,
    pub cc: Option<Cc>,
}

fn is_na(s: &str) -> bool {
    let s = s.trim();
    s.eq_ignore_ascii_case("[N/A]") || s.eq_ignore_ascii_case("N/A") || s.is_empty()
}

/// `81559 MiB` or `81559` (with `nounits`) → bytes.
fn parse_mib(s: &str) -> Option<u64> {
    let n = s.trim().trim_end_matches("MiB").trim();
    n.parse::<u64>().ok().map(|m| m * 1024 * 1024)
}

/// Parse the CSV of `nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap
/// --format=csv,noheader` (the `compute_cap` column is optional: older drivers lack it).
/// Fields are taken from the right so that a name containing a comma still parses.
pub fn parse_nvidia_smi_csv(text: &str) -> Result<Vec<SmiRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let last = fields.last().copied().unwrap_or("");
        let with_cc = fields.len() >= 4 && (Cc::parse(last).is_some() || is_na(last));
        let n = fields.len();
        let (name, driver, mem, cc) = if with_cc {
            (
                fields[..n - 3].join(","),
                fields[n - 3],
                fields[n - 2],
                Some(last),
            )
        } else if n >= 3 {
            (
                fields[..n - 2].join(","),
                fields[n - 2],
                fields[n - 1],
                None,
            )
        } else {
            return Err(format!(
                "line {}: expected `name, driver_version, memory.total[, compute_cap]`, got `{line}`",
                i + 1
            ));
        };
        let driver = Version::parse(driver)
            .ok_or_else(|| format!("line {}: `{driver}` is not a driver version", i + 1))?;
        rows.push(SmiRow {
            name: name.trim().to_string(),
            driver,
            memory_bytes: parse_mib(mem),
            cc: cc.and_then(Cc::parse),
        });
    }
    Ok(rows)
}

/// The driver version and the highest supported CUDA from `nvidia-smi`'s banner:
/// `| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |`.
/// Either is `None` when absent or `N/A`.
pub fn parse_nvidia_smi_banner(text: &str) -> (Option<Version>, Option<Version>) {
    let after = |key: &str| -> Option<Version> {
        let rest = &text[text.find(key)? + key.len()..];
        Version::parse(rest.split_whitespace().next()?)
    };
    (after("Driver Version:"), after("CUDA Version:"))
}

/// The kernel module's version from `/proc/driver/nvidia/version`, e.g.
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023`
/// or the open module's `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15
/// Release Build ...`: the first token of the NVRM line that is a dotted version.
pub fn parse_proc_driver_version(text: &str) -> Option<Version> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("NVRM version:"))?;
    line.split_whitespace()
        .filter(|t| t.contains('.'))
        .find_map(Version::parse)
        .filter(|v| v.len() >= 2)
}

/// NVML's `nvmlSystemGetCudaDriverVersion_v2` integer: 12040 → `12.4`.
pub fn cuda_from_int(v: i32) -> Option<Version> {
    if v <= 0 {
        return None;
    }
    Version::parse(&format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// What a GPU verdict on a host rests on besides the image: the driver and the GPUs, by UUID
/// where the driver gives one (a swapped board or a new driver then counts as another host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuIdentity {
    pub driver: Option<String>,
    /// One entry per GPU: its UUID, else `INDEX:NAME`; or the `ENVBUILD_GPUS` text.
    pub gpus: Vec<String>,
}

impl GpuIdentity {
    /// One line for a cache key: `driver=550.54.15;gpus=GPU-a,GPU-b`, or `no-gpu` when neither
    /// a driver nor a GPU was found.
    pub fn key(&self) -> String {
        if self.driver.is_none() && self.gpus.is_empty() {
            return "no-gpu".to_string();
        }
        format!(
            "driver={};gpus={}",
            self.driver.as_deref().unwrap_or("unknown"),
            self.gpus.join(",")
        )
    }
}

/// Parse `nvidia-smi --query-gpu=uuid,driver_version --format=csv,noheader`: the driver of the
/// first row and every row's UUID, in order. `None` when no row has both fields.
pub fn parse_nvidia_smi_uuids(text: &str) -> Option<GpuIdentity> {
    let mut id = GpuIdentity::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (uuid, driver) = line.split_once(',')?;
        let (uuid, driver) = (uuid.trim(), Version::parse(driver.trim())?);
        if uuid.is_empty() || is_na(uuid) {
            return None;
        }
        id.driver.get_or_insert_with(|| driver.to_string());
        id.gpus.push(uuid.to_string());
    }
    id.driver.is_some().then_some(id)
}

/// Parse `ENVBUILD_GPUS`: comma-separated entries, each a GPU name from the table (`A100`,
/// `NVIDIA H100 80GB HBM3`) or a compute capability (`8.9`, `sm_90`); `none` or empty for no GPU.
pub fn parse_gpus_override(s: &str, table: &Table) -> Result<Vec<Gpu>, String> {
    if is_none_word(s) {
        return Ok(Vec::new());
    }
    let mut gpus = Vec::new();
    for (i, entry) in s.split(',').map(str::trim).enumerate() {
        if entry.is_empty() {
            return Err("an empty entry".to_string());
        }
        let cc = Cc::parse(entry)
            .or_else(|| table.find_gpu(entry).map(|m| m.cc))
            .ok_or_else(|| {
                format!("`{entry}` is neither a known GPU model nor a compute capability")
            })?;
        let name = if Cc::parse(entry).is_some() {
            format!("GPU with compute capability {cc}")
        } else {
            entry.to_string()
        };
        gpus.push(Gpu {
            index: i as u32,
            name,
            cc: Some(cc),
            memory_bytes: None,
            uuid: None,
        });
    }
    Ok(gpus)
}
