//! The compatibility table: typed rows, loading (embedded or `--table FILE`), invariants and
//! queries. The table itself is data (`table.toml`), with a source and a confidence per row.
//! This module performs no I/O: callers pass the table text.

use crate::core::diag::{Diagnostic, Failure};
use crate::core::version::{Cc, Version};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The table shipped inside the binary.
pub const EMBEDDED: &str = include_str!("table.toml");

/// How sure the table is of a fact, best first: the order is what `max` of two confidences
/// means (the weaker one wins).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Read off a real build (`envbuild table learn`): beats any document.
    Observed,
    #[default]
    Primary,
    Secondary,
    Unconfirmed,
}

impl Confidence {
    pub fn is_unconfirmed(self) -> bool {
        self == Confidence::Unconfirmed
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub version: String,
    pub as_of: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaRow {
    pub version: Version,
    #[serde(default)]
    pub linux: Option<Version>,
    #[serde(default)]
    pub windows: Option<Version>,
    /// Borrow the drivers of another row (NVIDIA published none for this one).
    #[serde(default)]
    pub like: Option<Version>,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyRow {
    pub major: u64,
    pub linux: Version,
    pub windows: Version,
    #[serde(default)]
    pub windows_confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchRow {
    pub branch: u64,
    pub max_cuda: Version,
    #[serde(default)]
    pub confidence: Confidence,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchRow {
    pub cc: Cc,
    pub family: String,
    #[serde(default)]
    pub first_cuda: Option<Version>,
    #[serde(default)]
    pub last_cuda: Option<Version>,
    /// The newest driver branch that still drives such GPUs.
    #[serde(default)]
    pub last_branch: Option<u64>,
    #[serde(default)]
    pub min_driver: Option<Version>,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuKind {
    Datacenter,
    Consumer,
    Workstation,
    Embedded,
}

impl GpuKind {
    /// Forward compatibility (cuda-compat) works on data-center GPUs and Jetson boards only.
    pub fn forward_compatible(self) -> bool {
        matches!(self, GpuKind::Datacenter | GpuKind::Embedded)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRow {
    pub name: String,
    pub cc: Cc,
    pub kind: GpuKind,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub min_driver: Option<Version>,
    /// The CPU architectures of the machines the GPU comes in, the usual one first
    /// (`["aarch64"]` for GH200: Grace); empty: not recorded, any platform.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_arch: Vec<CpuArch>,
    /// Runs NVIDIA JetPack (L4T) builds of torch, not PyPI's or the PyTorch index's server wheels.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub jetpack: bool,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

/// A CPU architecture, as `uname -m` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CpuArch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl CpuArch {
    /// `x86_64` or `aarch64`.
    pub fn as_str(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86_64",
            CpuArch::Aarch64 => "aarch64",
        }
    }

    /// The architecture as `uname -m` prints it (`arm64` is Docker's and macOS's word).
    pub fn parse(s: &str) -> Option<CpuArch> {
        match s.trim() {
            "x86_64" | "amd64" => Some(CpuArch::X86_64),
            "aarch64" | "arm64" => Some(CpuArch::Aarch64),
            _ => None,
        }
    }
}

/// A GPU's nominal dense peaks (datasheet figures): what the smoke script's throughput and
/// host-link checks compare with, to warn when a figure is far below. Never a resolution rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPeakRow {
    /// Matched as consecutive words of the device name; the first row that matches wins.
    pub name: String,
    /// bf16 TFLOP/s (fp16 where the GPU has no native bf16).
    pub bf16: f64,
    /// tf32 TFLOP/s (fp32 where it has no tf32).
    pub tf32: f64,
    /// The host link's nominal GB/s (PCIe x16).
    pub h2d: f64,
    /// The whole GPU's SM count: fewer on the device means a MIG slice.
    pub sms: u32,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonRow {
    pub version: Version,
    pub eol: String,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Numpy1Row {
    pub python: Version,
    pub version: String,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelRow {
    pub name: String,
    #[serde(default)]
    pub last_torch: Option<Version>,
    #[serde(default)]
    pub ended: Option<String>,
    pub note: String,
    pub source: String,
}

/// The kind of a base image: a slim Python image that gets wheels, or a conda-capable one. The
/// lock's `image.base_kind` uses the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseKind {
    Wheel,
    Conda,
}

impl BaseKind {
    /// The name the table and the lock use.
    pub fn as_str(self) -> &'static str {
        match self {
            BaseKind::Wheel => "wheel",
            BaseKind::Conda => "conda",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImageRow {
    pub kind: BaseKind,
    #[serde(default)]
    pub python: Option<Version>,
    pub image: String,
    pub glibc: Version,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchRow {
    pub version: Version,
    pub python: Vec<Version>,
    #[serde(default)]
    pub python_experimental: Vec<Version>,
    pub variants: Vec<String>,
    #[serde(default)]
    pub experimental_variants: Vec<String>,
    pub pypi_default: String,
    #[serde(default)]
    pub pypi_default_confidence: Confidence,
    pub torchvision: String,
    #[serde(default)]
    pub torchvision_confidence: Confidence,
    #[serde(default)]
    pub torchvision_conda: Option<String>,
    pub torchaudio: String,
    /// torchaudio is no longer released per torch version; `torchaudio` names the release that
    /// works with this torch (built against the stable ABI).
    #[serde(default)]
    pub torchaudio_frozen: bool,
    #[serde(default)]
    pub torchaudio_conda: Option<String>,
    #[serde(default)]
    pub pytorch_channel: Vec<Version>,
    #[serde(default)]
    pub conda_forge: Vec<Version>,
    #[serde(default)]
    pub conda_forge_confidence: Confidence,
    #[serde(default)]
    pub conda_forge_win: Vec<Version>,
    pub glibc: Version,
    #[serde(default)]
    pub glibc_confidence: Confidence,
    /// torch <= 2.2 fails with NumPy 2: pin the last NumPy 1.x.
    pub numpy1: bool,
    pub source: String,
}

impl TorchRow {
    /// `major.minor`, the key of its wheel rows.
    pub fn series(&self) -> String {
        self.version.major_minor()
    }

    /// The conda selector package of the pytorch channel: `cudatoolkit` before 1.13.
    pub fn channel_selector(&self) -> &'static str {
        if self.version < Version::parse("1.13").expect("literal") {
            "cudatoolkit"
        } else {
            "pytorch-cuda"
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelRow {
    /// Torch minor series (`2.5` covers 2.5.0 and 2.5.1).
    pub torch: Version,
    pub variant: String,
    pub cuda: Version,
    pub cudnn: String,
    #[serde(default)]
    pub cudnn_confidence: Confidence,
    #[serde(default)]
    pub nccl: Option<String>,
    pub arch: Vec<Cc>,
    pub ptx: Vec<Cc>,
    /// Entries of `arch` whose presence the sources leave in doubt.
    #[serde(default)]
    pub unconfirmed_arch: Vec<Cc>,
    #[serde(default)]
    pub ptx_confidence: Confidence,
    /// Confidence in the whole arch list.
    #[serde(default)]
    pub confidence: Confidence,
    /// The glibc floor of this variant's wheels, where it differs from the release's
    /// (`[[torch]] glibc`): torch 2.6.0's cu126 wheels need 2.28, its cu118/cu124 ones 2.17.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc: Option<Version>,
    pub source: String,
}

/// A Linux aarch64 CUDA wheel: with `torch`, one release series' wheel read off the real file
/// (it overrides the x86_64 `[[wheel]]` row's arch list, PTX, glibc and CUDA); without, a
/// variant's list from build scripts, for any release (unconfirmed which releases have it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchListRow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<Version>,
    pub variant: String,
    /// The wheel's `cuda-toolkit` pin, where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Version>,
    pub arch: Vec<Cc>,
    pub ptx: Vec<Cc>,
    /// The glibc floor of the wheel's manylinux tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc: Option<Version>,
    /// CPython versions with an aarch64 wheel of the series; empty: not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<Version>,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CondaForgeBuildRow {
    pub cuda: Version,
    pub arch: Vec<Cc>,
    pub ptx: Vec<Cc>,
    pub glibc: Version,
    #[serde(default)]
    pub confidence: Confidence,
    pub source: String,
}

/// The whole table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub meta: Meta,
    pub sources: BTreeMap<String, String>,
    pub cuda: Vec<CudaRow>,
    pub cuda_family: Vec<FamilyRow>,
    pub driver_branch: Vec<BranchRow>,
    pub arch: Vec<ArchRow>,
    pub gpu: Vec<GpuRow>,
    /// Optional: a `--table` file without peaks is still a table (the smoke script carries its
    /// own copy, generated from the embedded rows).
    #[serde(default)]
    pub gpu_peak: Vec<GpuPeakRow>,
    pub python: Vec<PythonRow>,
    pub numpy1: Vec<Numpy1Row>,
    pub channel: Vec<ChannelRow>,
    pub base_image: Vec<BaseImageRow>,
    pub torch: Vec<TorchRow>,
    pub wheel: Vec<WheelRow>,
    pub wheel_aarch64: Vec<ArchListRow>,
    pub conda_forge_build: Vec<CondaForgeBuildRow>,
}

/// A `--table` file that does not parse or breaks an invariant.
pub use crate::core::codes::table::TABLE_INVALID;

/// Which driver column applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Windows,
}

/// A driver requirement and how sure the table is of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverReq {
    pub version: Version,
    pub confidence: Confidence,
}

impl Table {
    /// The embedded table. Its invariants are checked by the unit tests, not on every run (that
    /// would cost more than a resolution); failing to parse it is an envbuild bug.
    pub fn embedded() -> Result<Table, Failure> {
        Table::parse_unchecked(EMBEDDED, "<embedded table>").map_err(|f| {
            Failure::bug(format!(
                "the embedded compatibility table is invalid: {}",
                f.diagnostics
                    .first()
                    .map(|d| d.message.clone())
                    .unwrap_or_default()
            ))
        })
    }

    /// Parse and check a table; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Table, Failure> {
        let table = Table::parse_unchecked(text, origin)?;
        let problems = table.check();
        if problems.is_empty() {
            Ok(table)
        } else {
            Err(Failure::new(
                problems
                    .into_iter()
                    .map(|p| {
                        Diagnostic::error(TABLE_INVALID, format!("{origin}: {p}"))
                            .with_hint("fix the row or start again from `envbuild table --toml`")
                    })
                    .collect(),
            ))
        }
    }

    fn parse_unchecked(text: &str, origin: &str) -> Result<Table, Failure> {
        toml::from_str(text).map_err(|e| {
            Failure::one(
                Diagnostic::error(
                    TABLE_INVALID,
                    format!("{origin}: not a valid compatibility table: {}", e.message()),
                )
                .with_hint("start from `envbuild table --toml` (the embedded table) and edit it"),
            )
        })
    }

    /// Invariants every table must satisfy; the list of violations (empty when sound).
    pub fn check(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.check_order(&mut out);
        self.check_repeats(&mut out);
        self.check_dates(&mut out);
        self.check_gpus(&mut out);
        self.check_cuda(&mut out);
        self.check_torch(&mut out);
        self.check_wheels(&mut out);
        self.check_sources(&mut out);
        self.check_values(&mut out);
        out
    }

    /// Values that reach a lock and so a rendered file pass the rule render checks them with
    /// (`core::rules`): a table cannot carry `torchvision = "*"` into `torchvision==*`, or an
    /// untagged base image into `FROM`.
    fn check_values(&self, out: &mut Vec<String>) {
        use crate::core::rules::{image_ref, version};
        let mut need_version = |row: String, key: &str, v: Option<&str>| {
            if let Some(v) = v.filter(|v| !version(v)) {
                out.push(format!(
                    "{row}: {key} `{}` is not an exact version",
                    crate::core::diag::printable(v)
                ));
            }
        };
        need_version("[meta]".into(), "version", Some(&self.meta.version));
        for t in &self.torch {
            let row = format!("[[torch]] {}", t.version);
            need_version(row.clone(), "torchvision", Some(&t.torchvision));
            need_version(row.clone(), "torchaudio", Some(&t.torchaudio));
            need_version(
                row.clone(),
                "torchvision_conda",
                t.torchvision_conda.as_deref(),
            );
            need_version(row, "torchaudio_conda", t.torchaudio_conda.as_deref());
        }
        for w in &self.wheel {
            let row = format!("[[wheel]] {} {}", w.torch, w.variant);
            need_version(row.clone(), "cudnn", Some(&w.cudnn));
            need_version(row, "nccl", w.nccl.as_deref());
        }
        for n in &self.numpy1 {
            need_version(
                format!("[[numpy1]] python {}", n.python),
                "version",
                Some(&n.version),
            );
        }
        for b in &self.base_image {
            if let Err(why) = image_ref(&b.image) {
                out.push(format!(
                    "[[base_image]] {} python {}: image `{}` {why}",
                    b.kind.as_str(),
                    b.python
                        .as_ref()
                        .map_or("any".to_string(), |p| p.to_string()),
                    crate::core::diag::printable(&b.image)
                ));
            }
        }
        for g in &self.gpu {
            for n in std::iter::once(&g.name).chain(&g.aliases) {
                let plain = n.len() <= 64
                    && n.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b' ' | b'-' | b'.' | b'_')
                    });
                if !plain {
                    out.push(format!(
                        "[[gpu]] {}: name `{}` is not letters, digits, spaces and . _ -",
                        crate::core::diag::printable(&g.name),
                        crate::core::diag::printable(n)
                    ));
                }
            }
        }
    }

    /// Whether every key of `source` (space-separated) is in `[sources]`.
    fn known_source(&self, source: &str) -> bool {
        source
            .split_whitespace()
            .all(|k| self.sources.contains_key(k))
    }

    /// Rows that are looked up by key are sorted by it, without repeats.
    fn check_order(&self, out: &mut Vec<String>) {
        let mut check_sorted = |what: &str, keys: Vec<String>, ord: &dyn Fn(usize) -> bool| {
            for (i, key) in keys.iter().enumerate().skip(1) {
                if !ord(i) {
                    out.push(format!(
                        "[[{what}]] rows are not sorted or repeat a key at `{key}`"
                    ));
                }
            }
        };
        check_sorted(
            "cuda",
            self.cuda.iter().map(|r| r.version.to_string()).collect(),
            &|i| self.cuda[i - 1].version < self.cuda[i].version,
        );
        check_sorted(
            "torch",
            self.torch.iter().map(|r| r.version.to_string()).collect(),
            &|i| self.torch[i - 1].version < self.torch[i].version,
        );
        check_sorted(
            "driver_branch",
            self.driver_branch
                .iter()
                .map(|r| r.branch.to_string())
                .collect(),
            &|i| self.driver_branch[i - 1].branch < self.driver_branch[i].branch,
        );
        check_sorted(
            "arch",
            self.arch.iter().map(|r| r.cc.to_string()).collect(),
            &|i| self.arch[i - 1].cc < self.arch[i].cc,
        );
        check_sorted(
            "python",
            self.python.iter().map(|r| r.version.to_string()).collect(),
            &|i| self.python[i - 1].version < self.python[i].version,
        );
        check_sorted(
            "wheel",
            self.wheel
                .iter()
                .map(|r| format!("{} {}", r.torch, r.variant))
                .collect(),
            &|i| {
                let (a, b) = (&self.wheel[i - 1], &self.wheel[i]);
                (&a.torch, variant_cuda_key(&a.variant)) < (&b.torch, variant_cuda_key(&b.variant))
            },
        );
    }

    /// The row kinds that are not kept sorted state each key once: a lookup takes the first
    /// row with its key, so a second row would be a contradiction that row order settles.
    /// (The sorted kinds refuse a repeat in `check_order`, GPU names in `check_gpus`.)
    fn check_repeats(&self, out: &mut Vec<String>) {
        let opt = |v: &Option<Version>| v.as_ref().map_or("any".into(), |v| v.to_string());
        let kinds: [(&str, Vec<String>); 7] = [
            (
                "cuda_family",
                self.cuda_family
                    .iter()
                    .map(|r| r.major.to_string())
                    .collect(),
            ),
            (
                "gpu_peak",
                self.gpu_peak
                    .iter()
                    .map(|r| normalize_gpu_name(&r.name))
                    .collect(),
            ),
            (
                "numpy1",
                self.numpy1.iter().map(|r| r.python.to_string()).collect(),
            ),
            (
                "channel",
                self.channel.iter().map(|r| r.name.clone()).collect(),
            ),
            (
                "base_image",
                self.base_image
                    .iter()
                    .map(|r| format!("{} python {}", r.kind.as_str(), opt(&r.python)))
                    .collect(),
            ),
            (
                "wheel_aarch64",
                self.wheel_aarch64
                    .iter()
                    .map(|r| format!("torch {} {}", opt(&r.torch), r.variant))
                    .collect(),
            ),
            (
                "conda_forge_build",
                self.conda_forge_build
                    .iter()
                    .map(|r| r.cuda.to_string())
                    .collect(),
            ),
        ];
        for (what, keys) in kinds {
            let mut seen = std::collections::BTreeSet::new();
            for key in keys {
                if !seen.insert(key.clone()) {
                    out.push(format!(
                        "[[{what}]] repeats the key `{}`: two rows state the same fact; keep one",
                        crate::core::diag::printable(&key)
                    ));
                }
            }
        }
        // A base image names one glibc: the lock looks an image's glibc up by its name.
        let mut images = std::collections::BTreeSet::new();
        for b in &self.base_image {
            if !images.insert(&b.image) {
                out.push(format!(
                    "[[base_image]] repeats the image `{}`: two rows state its glibc; keep one",
                    crate::core::diag::printable(&b.image)
                ));
            }
        }
    }

    /// The table's dates are real calendar days: `as_of` and each Python's end of life are
    /// compared as text, so `2026-02-30` would sort between real days and decide a warning.
    fn check_dates(&self, out: &mut Vec<String>) {
        let dates = std::iter::once(("[meta] as_of".to_string(), &self.meta.as_of)).chain(
            self.python
                .iter()
                .map(|p| (format!("[[python]] {} eol", p.version), &p.eol)),
        );
        for (what, d) in dates {
            if !crate::core::rules::date(d) {
                out.push(format!(
                    "{what} `{}` is not a real YYYY-MM-DD date",
                    crate::core::diag::printable(d)
                ));
            }
        }
    }

    /// GPU names are unique (aliases included) and every GPU's architecture has a row.
    fn check_gpus(&self, out: &mut Vec<String>) {
        let mut names = std::collections::BTreeSet::new();
        for g in &self.gpu {
            for n in std::iter::once(&g.name).chain(&g.aliases) {
                if !names.insert(normalize_gpu_name(n)) {
                    out.push(format!("GPU name `{n}` appears twice"));
                }
            }
            if self.arch_row(g.cc).is_none() {
                out.push(format!(
                    "GPU `{}` has compute capability {} with no [[arch]] row",
                    g.name, g.cc
                ));
            }
        }
    }

    /// Every CUDA row has a driver, its own or (through `like`) another row's.
    fn check_cuda(&self, out: &mut Vec<String>) {
        for r in &self.cuda {
            if r.linux.is_none() && r.like.is_none() {
                out.push(format!(
                    "CUDA {} has neither a driver nor `like`",
                    r.version
                ));
            }
            if let Some(l) = &r.like {
                if self.cuda_row(l).is_none_or(|x| x.linux.is_none()) {
                    out.push(format!(
                        "CUDA {} is `like` {l}, which has no driver",
                        r.version
                    ));
                }
            }
        }
    }

    /// Every torch release's builds have their facts, and its Python list is usable.
    fn check_torch(&self, out: &mut Vec<String>) {
        for t in &self.torch {
            let series = Version::parse(&t.series()).expect("major.minor of a version");
            for v in t.variants.iter().chain(&t.experimental_variants) {
                if self.wheel_row(&series, v).is_none() {
                    out.push(format!(
                        "torch {} lists variant {v} with no [[wheel]] row",
                        t.version
                    ));
                }
            }
            if !t.variants.contains(&t.pypi_default) {
                out.push(format!(
                    "torch {}: pypi_default {} is not one of its variants",
                    t.version, t.pypi_default
                ));
            }
            for c in &t.conda_forge {
                if !self.conda_forge_build.iter().any(|b| b.cuda == *c) {
                    out.push(format!(
                        "torch {}: conda-forge CUDA {c} has no [[conda_forge_build]] row",
                        t.version
                    ));
                }
            }
            if t.python.is_empty() || t.python.windows(2).any(|w| w[0] >= w[1]) {
                out.push(format!(
                    "torch {}: python list must be non-empty and ascending",
                    t.version
                ));
            }
            if !self.known_source(&t.source) {
                out.push(format!(
                    "torch {}: unknown source key in `{}`",
                    t.version, t.source
                ));
            }
        }
    }

    /// Every wheel's CUDA has a driver and matches the variant's name.
    fn check_wheels(&self, out: &mut Vec<String>) {
        for w in &self.wheel {
            if self.toolkit_driver(&w.cuda, Os::Linux).is_none() {
                out.push(format!(
                    "wheel {} {}: CUDA {} has no [[cuda]] row",
                    w.torch, w.variant, w.cuda
                ));
            }
            if variant_of(&w.cuda) != w.variant {
                out.push(format!(
                    "wheel {} {}: CUDA {} does not match the variant name",
                    w.torch, w.variant, w.cuda
                ));
            }
            if !self.known_source(&w.source) {
                out.push(format!(
                    "wheel {} {}: unknown source key",
                    w.torch, w.variant
                ));
            }
        }
    }

    /// The other rows cite known sources.
    fn check_sources(&self, out: &mut Vec<String>) {
        for (what, src) in self
            .cuda
            .iter()
            .map(|r| (format!("cuda {}", r.version), &r.source))
            .chain(
                self.gpu
                    .iter()
                    .map(|r| (format!("gpu {}", r.name), &r.source)),
            )
            .chain(
                self.arch
                    .iter()
                    .map(|r| (format!("arch {}", r.cc), &r.source)),
            )
            .chain(
                self.channel
                    .iter()
                    .map(|r| (format!("channel {}", r.name), &r.source)),
            )
            .chain(
                self.base_image
                    .iter()
                    .map(|r| (format!("base image {}", r.image), &r.source)),
            )
            .chain(
                self.gpu_peak
                    .iter()
                    .map(|r| (format!("gpu_peak {}", r.name), &r.source)),
            )
        {
            if !self.known_source(src) {
                out.push(format!("{what}: unknown source key `{src}`"));
            }
        }
    }

    pub fn cuda_row(&self, v: &Version) -> Option<&CudaRow> {
        self.cuda.iter().find(|r| r.version == *v)
    }

    /// The driver a toolkit ships with (native support). A `major.minor` version takes the
    /// newest patch's driver, the conservative choice when the exact patch is unknown.
    pub fn toolkit_driver(&self, cuda: &Version, os: Os) -> Option<DriverReq> {
        let rows: Vec<&CudaRow> = if cuda.len() <= 2 {
            self.cuda
                .iter()
                .filter(|r| r.version.starts_with(cuda))
                .collect()
        } else {
            self.cuda_row(cuda).into_iter().collect()
        };
        let mut best: Option<DriverReq> = None;
        for r in rows {
            let (src, conf) = match &r.like {
                Some(l) => (self.cuda_row(l)?, Confidence::Unconfirmed.max(r.confidence)),
                None => (r, r.confidence),
            };
            let v = match os {
                Os::Linux => src.linux.clone(),
                Os::Windows => src.windows.clone(),
            }?;
            if best.as_ref().is_none_or(|b| v > b.version) {
                best = Some(DriverReq {
                    version: v,
                    confidence: conf,
                });
            }
        }
        best
    }

    /// The lowest driver that runs every X.Y.z runtime of `cuda`'s minor natively: the driver of
    /// the minor's first toolkit (X.Y.0's, or the lowest X.Y row known). A driver reporting CUDA
    /// X.Y runs all X.Y updates; a later update's bundled driver is not a higher floor for
    /// running applications (checked against real images, the table's `nv-toolkit-driver`
    /// release notes list each update's bundled driver).
    pub fn native_driver(&self, cuda: &Version, os: Os) -> Option<DriverReq> {
        let minor = Version::parse(&cuda.major_minor())?;
        let first = self
            .cuda
            .iter()
            .filter(|r| r.version.starts_with(&minor))
            .min_by(|a, b| a.version.cmp(&b.version))?;
        self.toolkit_driver(&first.version, os)
    }

    /// The lowest driver that runs builds of this CUDA major through minor-version
    /// compatibility; `None` before CUDA 11 (no minor-version compatibility).
    pub fn family_floor(&self, major: u64, os: Os) -> Option<DriverReq> {
        let r = self.cuda_family.iter().find(|r| r.major == major)?;
        Some(match os {
            Os::Linux => DriverReq {
                version: r.linux.clone(),
                confidence: Confidence::Primary,
            },
            Os::Windows => DriverReq {
                version: r.windows.clone(),
                confidence: r.windows_confidence,
            },
        })
    }

    /// The first driver of the lowest branch that reports CUDA `major`.0 or newer, when a
    /// confirmed row says so: no driver below it runs CUDA `major` builds, since
    /// minor-version compatibility starts at the family's first release.
    pub fn first_driver_reporting(&self, major: u64) -> Option<Version> {
        self.driver_branch
            .iter()
            .find(|r| r.max_cuda.major() >= major)
            .filter(|r| !r.confidence.is_unconfirmed())
            .and_then(|r| Version::parse(&r.branch.to_string()))
    }

    /// The highest CUDA a driver supports (`nvidia-smi`'s "CUDA Version", conda's `__cuda`).
    pub fn driver_max_cuda(&self, driver: &Version) -> Option<&BranchRow> {
        self.driver_branch
            .iter()
            .rev()
            .find(|r| driver.major() >= r.branch)
    }

    pub fn arch_row(&self, cc: Cc) -> Option<&ArchRow> {
        self.arch.iter().find(|r| r.cc == cc)
    }

    pub fn torch_row(&self, v: &Version) -> Option<&TorchRow> {
        self.torch.iter().find(|r| r.version == *v)
    }

    /// The Linux aarch64 wheel of a series and variant: the series' own row, read off its wheel,
    /// else the variant's row from build scripts (`torch` unset).
    pub fn wheel_aarch64_row(&self, series: &Version, variant: &str) -> Option<&ArchListRow> {
        let of_variant = self.wheel_aarch64.iter().filter(|r| r.variant == variant);
        of_variant
            .clone()
            .find(|r| r.torch.as_ref() == Some(series))
            .or_else(|| of_variant.clone().find(|r| r.torch.is_none()))
    }

    pub fn wheel_row(&self, series: &Version, variant: &str) -> Option<&WheelRow> {
        self.wheel
            .iter()
            .find(|r| r.torch == *series && r.variant == variant)
    }

    pub fn python_row(&self, minor: &Version) -> Option<&PythonRow> {
        self.python.iter().find(|r| r.version == *minor)
    }

    pub fn channel_row(&self, name: &str) -> Option<&ChannelRow> {
        self.channel.iter().find(|r| r.name == name)
    }

    pub fn conda_forge_build(&self, cuda: &Version) -> Option<&CondaForgeBuildRow> {
        self.conda_forge_build.iter().find(|r| r.cuda == *cuda)
    }

    pub fn numpy1_for(&self, python_minor: &Version) -> Option<&Numpy1Row> {
        self.numpy1.iter().find(|r| r.python == *python_minor)
    }

    pub fn newest_torch(&self) -> Option<&TorchRow> {
        self.torch.last()
    }

    /// Look a GPU up by model name (with or without NVIDIA/Tesla/GeForce/Quadro, any case,
    /// nvidia-smi suffixes like `-SXM4-80GB` ignored) or by compute capability.
    pub fn find_gpu(&self, input: &str) -> Option<GpuMatch<'_>> {
        if let Some(cc) = Cc::parse(input.trim()) {
            return Some(GpuMatch { cc, row: None });
        }
        let wanted = normalize_gpu_name(input);
        let (g, len) = self.gpu_prefix(&wanted)?;
        // What follows the model may qualify it (`80GB HBM3`, `SXM4`, `PCIE`), never name a
        // second GPU: "H100 P100" is two entries, not an H100.
        let rest: Vec<&str> = wanted[len..].split_whitespace().collect();
        if (0..rest.len()).any(|i| self.names_gpu_at(&rest[i..].join(" "))) {
            return None;
        }
        Some(GpuMatch {
            cc: g.cc,
            row: Some(g),
        })
    }

    /// The GPU whose name or alias is the longest whole-word prefix of `wanted` (normalized),
    /// with that prefix's length: "RTX 6000 Ada" is not taken for "RTX 6000", and
    /// "A100-SXM4-80GB" finds "A100".
    fn gpu_prefix(&self, wanted: &str) -> Option<(&GpuRow, usize)> {
        let mut best: Option<(&GpuRow, usize)> = None;
        for g in &self.gpu {
            for n in std::iter::once(&g.name).chain(&g.aliases) {
                let key = normalize_gpu_name(n);
                let whole_word = wanted == key
                    || (wanted.starts_with(&key) && wanted.as_bytes()[key.len()] == b' ');
                if whole_word && best.is_none_or(|(_, l)| key.len() > l) {
                    best = Some((g, key.len()));
                }
            }
        }
        best
    }

    /// Whether `words` (normalized) start with a GPU name or are a compute capability.
    fn names_gpu_at(&self, words: &str) -> bool {
        let w: Vec<&str> = words.split(' ').collect();
        cc_words(&w).is_some() || self.gpu_prefix(words).is_some()
    }

    /// The GPUs an entry names one after the other ("H100 P100" -> H100, P100), as the table
    /// names them (or as written, for a compute capability); for the "one GPU per entry" hint.
    pub fn gpus_named_in(&self, input: &str) -> Vec<String> {
        let wanted = normalize_gpu_name(input);
        let words: Vec<&str> = wanted.split(' ').collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let rest = words[i..].join(" ");
            if let Some((g, len)) = self.gpu_prefix(&rest) {
                out.push(g.name.clone());
                i += rest[..len].split(' ').count();
            } else if let Some((cc, n)) = cc_words(&words[i..]) {
                out.push(cc);
                i += n;
            } else {
                i += 1;
            }
        }
        out
    }

    /// Known GPU names closest to `input`, for "did you mean".
    pub fn gpu_suggestions(&self, input: &str) -> Vec<String> {
        let wanted = normalize_gpu_name(input);
        let mut scored: Vec<(f64, &str)> = self
            .gpu
            .iter()
            .map(|g| {
                (
                    strsim::jaro_winkler(&wanted, &normalize_gpu_name(&g.name)),
                    g.name.as_str(),
                )
            })
            .filter(|(s, _)| *s > 0.75)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored
            .into_iter()
            .take(3)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

/// A GPU the spec names: its compute capability and, for a model name, its row.
#[derive(Debug, Clone, Copy)]
pub struct GpuMatch<'a> {
    pub cc: Cc,
    pub row: Option<&'a GpuRow>,
}

/// `NVIDIA GeForce RTX 4090` → `RTX 4090`; `Tesla V100-SXM2-16GB` → `V100 SXM2 16GB`.
pub fn normalize_gpu_name(s: &str) -> String {
    let upper = s.to_ascii_uppercase().replace(['-', '_'], " ");
    let mut words: Vec<&str> = upper.split_whitespace().collect();
    while let Some(first) = words.first() {
        if matches!(*first, "NVIDIA" | "TESLA" | "GEFORCE") {
            words.remove(0);
        } else {
            break;
        }
    }
    words.join(" ")
}

/// A compute capability at the start of normalized words (`8.9`, `SM89`, or `SM 89`, which is
/// how `sm_89` normalizes), as written in lower case, and how many words it took.
fn cc_words(words: &[&str]) -> Option<(String, usize)> {
    let first = *words.first()?;
    if Cc::parse(first).is_some() {
        return Some((first.to_ascii_lowercase(), 1));
    }
    let two = format!("{}_{}", first, words.get(1)?).to_ascii_lowercase();
    Cc::parse(&two).map(|_| (two, 2))
}

/// `cu` + major + minor digits: 12.4.1 → `cu124`, 10.2.89 → `cu102`.
pub fn variant_of(cuda: &Version) -> String {
    format!("cu{}{}", cuda.major(), cuda.minor())
}

/// The CUDA (major, minor) a variant name stands for: `cu124` → (12, 4), `cu102` → (10, 2).
pub fn variant_cuda(variant: &str) -> Option<Version> {
    let d = variant.strip_prefix("cu")?;
    if d.len() < 3 || d.len() > 4 || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (maj, min) = d.split_at(d.len() - 1);
    Version::parse(&format!("{maj}.{min}"))
}

fn variant_cuda_key(variant: &str) -> Option<Version> {
    variant_cuda(variant)
}

#[cfg(test)]
mod tests;
