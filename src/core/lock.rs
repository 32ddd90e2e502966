//! The lock: what a spec resolved to, versioned, sorted and byte-for-byte reproducible, plus the
//! comparison behind `--locked`. This module performs no I/O.

pub use crate::core::compat::BaseKind;
use crate::core::spec::{Platform, Source, Variant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped whenever the lock's meaning changes; older locks are refused with a hint to re-lock.
pub const LOCK_VERSION: u32 = 1;

pub const FILE_NAME: &str = "envbuild.lock";

/// A lock file that cannot be read.
pub use crate::core::codes::lock::INVALID_LOCK;

/// How the target driver runs the locked build; written as `native`, `minor-compat`,
/// `forward-compat` or `too-old`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverMode {
    /// The driver is at least the one the build's CUDA toolkit shipped with.
    Native,
    /// Older than that, but within the CUDA major's minor-version compatibility.
    MinorCompat,
    /// Too old, and the image carries cuda-compat (data-center GPUs and Jetson only).
    ForwardCompat,
    /// Too old (a lock records this only when the deciding fact is unconfirmed).
    TooOld,
}

impl DriverMode {
    /// The name the lock file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverMode::Native => "native",
            DriverMode::MinorCompat => "minor-compat",
            DriverMode::ForwardCompat => "forward-compat",
            DriverMode::TooOld => "too-old",
        }
    }
}

/// A GPU of the target and how the build reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedGpu {
    /// As written in the spec.
    pub input: String,
    /// The model name from the table, when the input named a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub cc: String,
    /// `sm_86` (a cubin) or `compute_120` (PTX, JIT-compiled by the driver).
    pub runs_via: String,
}

/// Settings of the image and run snippets, carried so `envbuild render LOCK` needs no spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedImage {
    pub base: String,
    /// The spec's `[image] base`, when it overrides the table's choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_override: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_digest: Option<String>,
    /// Why the lock holds no `base_digest` for this base although it wanted one (no registry
    /// answered when it was locked): the build then names the tag. `lock --upgrade` asks again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_digest_unavailable: Option<String>,
    /// `conda` (a conda-capable base) or `wheel` (a slim Python base).
    pub base_kind: BaseKind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base_provides: Vec<String>,
    pub variants: Vec<Variant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheels: Option<String>,
    pub ssh: bool,
    pub jupyterlab: String,
    /// The spec's `[image] jupyterlab`, when it pins one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jupyterlab_pinned: Option<String>,
    pub shm_size: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasets: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<String>,
    /// The spec's `[image] ca-bundle`: the network's CA bundle, used by the build only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// What to install, exactly: the environment.yml dependencies and pip requirements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Install {
    /// Conda match specs in install order (python first), e.g. `pytorch::pytorch==2.5.1`.
    pub conda: Vec<String>,
    /// pip requirements, e.g. `torch==2.5.1+cu124`.
    pub pip: Vec<String>,
    /// `--index-url` for pip: the spec's `pip-index-url`, replacing PyPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip_index_url: Option<String>,
    /// `--extra-index-url` values for pip: the PyTorch wheel index, then the spec's
    /// `pip-extra-index-urls`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip_extra_index_urls: Vec<String>,
    /// `--find-links` values for pip: URLs, and directories relative to the spec (copied into
    /// the build context under the same path, beside the requirements).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip_find_links: Vec<String>,
    /// `CONDA_OVERRIDE_CUDA` for solving a conda-forge CUDA build on a machine with no driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conda_override_cuda: Option<String>,
}

/// The lock. Field order is the file's order; every map is a BTreeMap and every list is built
/// in a fixed order, so the same spec and table give the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    pub name: String,
    pub spec_sha256: String,
    pub table_version: String,
    pub source: Source,
    pub platform: Platform,
    pub channels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// Canonical names whatever the source: python, torch, torchvision, torchaudio, extras.
    pub packages: BTreeMap<String, String>,
    /// The CUDA toolkit the build uses (`12.4.1`; `12.9` for conda-forge's cuda-version).
    pub cuda: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<String>,
    /// The driver that runs this build natively.
    pub driver_min: String,
    /// The lowest driver that runs it at all (CUDA minor-version compatibility); none before 11.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_min_compat: Option<String>,
    /// The spec's target driver and how it runs the build: native, minor-compat, forward-compat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_mode: Option<DriverMode>,
    /// The spec asked to run through forward compatibility (cuda-compat) if needed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forward_compat: bool,
    /// Cubins the build carries (`sm_80`) and its PTX (`compute_90`).
    pub arch_list: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ptx: Vec<String>,
    pub glibc_min: String,
    /// The spec's `[target] glibc`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc_target: Option<String>,
    /// The build's facts above that rest on unconfirmed table rows: `cuda`, `cudnn`, `nccl`,
    /// `arch_list` (the whole list), `arch_list:sm_XY` (one entry) and `ptx`. The smoke test
    /// only warns when an image differs from one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed: Vec<String>,
    /// Packages envbuild pinned without the spec naming them (e.g. `numpy`, `mkl`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_added: Vec<String>,
    pub install: Install,
    pub image: LockedImage,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<LockedGpu>,
    /// Why envbuild added or chose something the spec did not say (e.g. a NumPy 1.x pin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The spec's pip extras whose PEP 508 marker does not hold for the chosen Python and this
    /// platform: left out of `packages` and `install`, name to reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub excluded: BTreeMap<String, String>,
    /// Each version envbuild chose for a range of the spec (`pytorch = ">=2.3"`), what was
    /// asked and why that one (docs/choosing.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub choices: BTreeMap<String, crate::core::spec::Choice>,
    /// sha256 of exactly what the closure's resolution depended on (`core::closure::Inputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure_inputs: Option<String>,
    /// sha256 of the closure's canonical entries (`core::closure::verify`): a closure edited by
    /// hand no longer matches it (`LOCK_TAMPERED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure_sha256: Option<String>,
    /// The tool that resolved the pip part of the closure, with its version (`uv 0.13.9`). Not
    /// an input: another release reuses the closure while the inputs are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure_resolver: Option<String>,
    /// Every package the environment contains, sorted by kind, then name (`[lock] closure = true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closure: Vec<ClosurePkg>,
    /// A fleet of several platforms (`[target] platforms`, or GPUs that come in different
    /// machines): each other platform's whole resolution, in platform order, as a lock of its
    /// own (with its closure). Empty for one platform, so single-platform locks are unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<Lock>,
}

/// One package of the closure: exactly what gets installed, and its hash. The closure is sorted
/// by `kind` (`conda` before `pip`), then `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosurePkg {
    /// pip: the canonical (PEP 503) name; conda: the package name as the channel spells it.
    pub name: String,
    pub version: String,
    /// `pip` or `conda`.
    pub kind: String,
    /// The file resolved for the target (conda: `CHANNEL/SUBDIR/FILE`).
    pub url: String,
    /// pip: the index it came from; conda: the channel's URL.
    pub index: String,
    pub sha256: String,
    /// conda: the package file's md5 (explicit files carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// conda: the build string (`py311h...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// conda: the channel subdirectory the file is in (`linux-64`, `noarch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
    /// pip: the index had yanked this release (PEP 592) when it was locked, for this reason
    /// (empty: none given); `core::closure::yanked` judges it on every `lock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yanked: Option<String>,
}

impl Lock {
    /// The canonical file text: a header, then TOML.
    pub fn to_toml(&self) -> Result<String, String> {
        let body = toml::to_string(self).map_err(|e| e.to_string())?;
        Ok(format!(
            "# @generated by envbuild for `{}`. Do not edit: change the spec and run `envbuild lock`.\n{body}",
            self.name
        ))
    }

    pub fn from_toml(text: &str) -> Result<Lock, String> {
        #[derive(Deserialize)]
        struct Probe {
            version: Option<u32>,
        }
        if let Ok(Probe { version: Some(v) }) = toml::from_str::<Probe>(text) {
            if v != LOCK_VERSION {
                return Err(format!(
                    "lock format version {v} is not supported (this envbuild writes version {LOCK_VERSION})"
                ));
            }
        }
        toml::from_str(text).map_err(|e| e.message().trim().to_string())
    }

    /// The platforms the lock resolved for: its own, then each of its fleet's.
    pub fn platforms(&self) -> Vec<Platform> {
        std::iter::once(self.platform)
            .chain(self.fleet.iter().map(|l| l.platform))
            .collect()
    }

    /// sha256 of the canonical lock text: the image's content address.
    pub fn hash(&self) -> Result<String, String> {
        Ok(crate::core::hash::sha256_hex(self.to_toml()?.as_bytes()))
    }

    /// A compact one-line JSON summary for image labels.
    pub fn summary_json(&self) -> String {
        let mut m = BTreeMap::new();
        m.insert("name", self.name.clone());
        m.insert("source", self.source.as_str().to_string());
        m.insert("cuda", self.cuda.clone());
        m.insert("driver_min", self.driver_min.clone());
        for k in ["python", "torch", "torchvision", "torchaudio"] {
            if let Some(v) = self.packages.get(k) {
                m.insert(k, v.clone());
            }
        }
        if let Some(c) = &self.cudnn {
            m.insert("cudnn", c.clone());
        }
        m.insert("arch", self.arch_list.join(","));
        serde_json::to_string(&m).unwrap_or_default()
    }
}

/// What `--locked` reports: dotted keys whose values differ between two lock texts.
pub fn changed_keys(old: &str, new: &str) -> Vec<String> {
    let parse = |t: &str| t.parse::<toml::Table>().ok().map(toml::Value::Table);
    let mut out = Vec::new();
    match (parse(old), parse(new)) {
        (Some(a), Some(b)) => diff_values("", &a, &b, &mut out),
        _ => out.push("(the lock on disk is not valid TOML)".to_string()),
    }
    out
}

fn diff_values(path: &str, a: &toml::Value, b: &toml::Value, out: &mut Vec<String>) {
    match (a, b) {
        (toml::Value::Table(x), toml::Value::Table(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => diff_values(&p, va, vb, out),
                    (Some(va), None) => out.push(format!("{p}: {} -> (removed)", short(va))),
                    (None, Some(vb)) => out.push(format!("{p}: (added) -> {}", short(vb))),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!("{path}: {} -> {}", short(a), short(b))),
        _ => {}
    }
}

fn short(v: &toml::Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(77).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

/// What a rendered environment.yml cannot say in conda's own terms (the target machines, image
/// settings, packages envbuild added), carried in one `# envbuild: {json}` comment so that
/// `envbuild import` of the rendered file gives back the same spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    pub platform: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forward_compat: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_added: Vec<String>,
    pub image: MetaImage,
}

/// The spec's `[image]` and `[run]` settings as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaImage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base_provides: Vec<String>,
    pub variants: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheels: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ssh: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jupyterlab: Option<String>,
    pub shm_size: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasets: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<String>,
}

/// The comment line's prefix in a rendered environment.yml.
pub const ENV_METADATA_PREFIX: &str = "# envbuild: ";

impl Lock {
    /// The `# envbuild: {...}` line for a rendered environment.yml (one line, no newline).
    pub fn env_metadata_line(&self) -> String {
        let meta = EnvMetadata {
            driver: self.driver_target.clone(),
            gpus: self.gpus.iter().map(|g| g.input.clone()).collect(),
            platform: self.platform.as_str().to_string(),
            glibc: self.glibc_target.clone(),
            forward_compat: self.forward_compat,
            auto_added: self.auto_added.clone(),
            image: MetaImage {
                base: self.image.base_override.clone(),
                base_provides: self.image.base_provides.clone(),
                variants: self
                    .image
                    .variants
                    .iter()
                    .map(|v| v.as_str().to_string())
                    .collect(),
                wheels: self.image.wheels.clone(),
                ssh: self.image.ssh,
                jupyterlab: self.image.jupyterlab_pinned.clone(),
                shm_size: self.image.shm_size.clone(),
                port: self.image.port,
                datasets: self.image.datasets.clone(),
                checkpoints: self.image.checkpoints.clone(),
            },
        };
        format!(
            "{ENV_METADATA_PREFIX}{}",
            serde_json::to_string(&meta).unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `as_str` is the name serde writes into the lock file.
    #[test]
    fn enum_names_match_the_file() {
        for m in [
            DriverMode::Native,
            DriverMode::MinorCompat,
            DriverMode::ForwardCompat,
            DriverMode::TooOld,
        ] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        for k in [BaseKind::Conda, BaseKind::Wheel] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }

    /// Hand-edited locks with an unknown mode or kind are refused when read.
    #[test]
    fn unknown_enum_values_are_refused() {
        let text = include_str!("../../specs/torch29-cu128/envbuild.lock");
        let lock = Lock::from_toml(text).expect("committed lock");
        assert_eq!(lock.driver_mode, Some(DriverMode::Native));
        assert_eq!(lock.image.base_kind, BaseKind::Wheel);
        let bad = text.replace("driver_mode = \"native\"", "driver_mode = \"sometimes\"");
        assert!(Lock::from_toml(&bad).is_err());
        let bad = text.replace("base_kind = \"wheel\"", "base_kind = \"docker\"");
        assert!(Lock::from_toml(&bad).is_err());
    }
}
