//! The spec as written: serde structs that mirror the file (TOML, or YAML with the same keys).
//! Unknown keys are refused; values are plain strings here and validated in `spec::validate`.
//! This module performs no I/O.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawSpec {
    pub name: Option<String>,
    pub python: Option<String>,
    pub pytorch: Option<String>,
    pub source: Option<String>,
    pub pytorch_cuda: Option<String>,
    pub cuda: Option<String>,
    /// conda-forge's name for its CUDA selector: `cuda` by another spelling.
    pub cuda_version: Option<String>,
    pub channels: Option<Vec<String>>,
    pub torchvision: Option<RawCompanion>,
    pub torchaudio: Option<RawCompanion>,
    #[serde(default)]
    pub conda: Vec<String>,
    #[serde(default)]
    pub pip: Vec<String>,
    pub pip_index_url: Option<String>,
    #[serde(default)]
    pub pip_extra_index_urls: Vec<String>,
    #[serde(default)]
    pub pip_find_links: Vec<String>,
    #[serde(default)]
    pub target: RawTarget,
    #[serde(default)]
    pub image: RawImage,
    #[serde(default)]
    pub run: RawRun,
    #[serde(default)]
    pub lock: RawLock,
}

/// `torchvision` / `torchaudio`: installed or not, or a version requirement (installed, and
/// the torch release is chosen so that its companion satisfies it).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawCompanion {
    On(bool),
    Version(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawLock {
    pub closure: Option<bool>,
    pub index_url: Option<String>,
    pub base_digest: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawTarget {
    pub driver: Option<String>,
    #[serde(default)]
    pub gpus: Vec<String>,
    pub platform: Option<String>,
    pub platforms: Option<Vec<String>>,
    pub glibc: Option<String>,
    pub forward_compat: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawImage {
    pub base: Option<String>,
    pub variants: Option<Vec<String>>,
    #[serde(default)]
    pub base_provides: Vec<String>,
    pub wheels: Option<String>,
    pub ssh: Option<bool>,
    pub jupyterlab: Option<String>,
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawRun {
    pub shm_size: Option<String>,
    pub port: Option<u16>,
    pub datasets: Option<String>,
    pub checkpoints: Option<String>,
}

/// Every key the spec accepts, by table, for "did you mean".
pub const TOP_KEYS: &[&str] = &[
    "name",
    "python",
    "pytorch",
    "source",
    "pytorch-cuda",
    "cuda",
    "cuda-version",
    "channels",
    "torchvision",
    "torchaudio",
    "conda",
    "pip",
    "pip-index-url",
    "pip-extra-index-urls",
    "pip-find-links",
    "target",
    "image",
    "run",
    "lock",
];
pub const TARGET_KEYS: &[&str] = &[
    "driver",
    "gpus",
    "platform",
    "platforms",
    "glibc",
    "forward-compat",
];
pub const IMAGE_KEYS: &[&str] = &[
    "base",
    "variants",
    "base-provides",
    "wheels",
    "ssh",
    "jupyterlab",
    "ca-bundle",
];
pub const RUN_KEYS: &[&str] = &["shm-size", "port", "datasets", "checkpoints"];
pub const LOCK_KEYS: &[&str] = &["closure", "index-url", "base-digest"];
