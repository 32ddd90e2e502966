//! The types the resolver's steps share: the context every rule reads (the spec, the table,
//! the target's GPUs), the build a spec selects, the looked-up GPUs, the driver's modes, and
//! what the rules find (diagnostics, and the hints their errors ask for, which `hints` proves
//! once every rule has run). A leaf: it uses no other step. This module performs no I/O.

use crate::core::compat::{Confidence, GpuKind, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::DriverMode;
use crate::core::spec::Spec;
use crate::core::version::{Cc, Version};
use std::ops::Range;

/// What every rule reads: the spec, the table and the target's GPUs (looked up once).
pub(super) struct Ctx<'a> {
    pub spec: &'a Spec,
    pub table: &'a Table,
    pub gpus: &'a [Gpu],
}

/// One concrete build of torch: a wheel variant, a pytorch-channel selector or a conda-forge
/// CUDA build.
#[derive(Debug, Clone)]
pub(super) struct Build {
    /// The spec value that selects it (`cuda` or `pytorch-cuda`), as major.minor.
    pub selector: Version,
    pub variant: Option<String>,
    pub cuda: Version,
    pub cudnn: Option<String>,
    pub cudnn_confidence: Confidence,
    pub nccl: Option<String>,
    pub arch: Vec<Cc>,
    pub ptx: Vec<Cc>,
    pub arch_confidence: Confidence,
    pub unconfirmed_arch: Vec<Cc>,
    pub ptx_confidence: Confidence,
    pub glibc: Version,
    pub glibc_confidence: Confidence,
    /// Whether the source really installs this build: PyPI's torch is one variant of the index's
    /// wheels, and which one is a fact with its own confidence. Every fact of the build (CUDA,
    /// cuDNN, NCCL, arch list) rests on it.
    pub variant_confidence: Confidence,
    /// Warnings that come with choosing this build at all.
    pub notes: Vec<Diagnostic>,
}

impl Build {
    /// The build's facts that rest on unconfirmed table rows, as the lock's `unconfirmed` keys:
    /// `cuda`, `cudnn`, `nccl`, `arch_list` (the whole list), `arch_list:sm_XY` (one entry of
    /// it) and `ptx`. An unsure variant (which build PyPI's torch is) makes every one unsure.
    pub fn unconfirmed_facts(&self) -> Vec<String> {
        let all = self.variant_confidence.is_unconfirmed();
        let whole_arch = all || self.arch_confidence.is_unconfirmed();
        let mut out: Vec<String> = Vec::new();
        let mut add = |key: &str, unsure: bool| {
            if unsure {
                out.push(key.to_string());
            }
        };
        add("cuda", all);
        add(
            "cudnn",
            self.cudnn.is_some() && (all || self.cudnn_confidence.is_unconfirmed()),
        );
        add("nccl", self.nccl.is_some() && all);
        add("arch_list", whole_arch);
        add("ptx", all || self.ptx_confidence.is_unconfirmed());
        if !whole_arch {
            for cc in self
                .arch
                .iter()
                .filter(|c| self.unconfirmed_arch.contains(c))
            {
                out.push(format!("arch_list:{}", cc.sm()));
            }
        }
        out.sort();
        out
    }
}

/// A target GPU after lookup.
#[derive(Debug, Clone)]
pub(super) struct Gpu {
    pub input: String,
    pub model: Option<String>,
    pub cc: Cc,
    pub kind: Option<GpuKind>,
    /// The lowest drivers that drive it, by its model's row then its architecture's, each
    /// with how sure the table is of it.
    pub min_drivers: Vec<(Version, Confidence)>,
    pub last_branch: Option<u64>,
    pub family: Option<String>,
}

impl Gpu {
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{m} ({})", self.cc.sm()),
            None => self.cc.sm(),
        }
    }
}

/// The driver's mode under the facts as stated, and under every reading of the unconfirmed
/// ones (the stated one first), which GPU coverage needs too: PTX JIT fails under minor-version
/// compatibility.
#[derive(Debug, Clone)]
pub(super) struct Modes {
    pub stated: DriverMode,
    pub readings: Vec<DriverMode>,
}

/// A hint an error asks for: a concrete spec change that gets out of it, which only resolving
/// the changed spec can prove. The rules say which; `hints` finds and proves one once every
/// rule has run (hints depend on the rules, never the reverse).
#[derive(Debug, Clone)]
pub(super) enum Ask {
    /// The source does not publish the build the spec names: another build that works.
    OtherBuild,
    /// The chosen build (its `selector`) fails the target (driver, GPUs, glibc): another build
    /// that satisfies it.
    FitsTarget { selector: Version },
    /// The `pytorch` channel ended before the spec's release: another build, or the channel's
    /// `last` release.
    ChannelEnded { last: Version },
    /// PyPI's torch wheel is CPU-only on the platform: the same CUDA (`selector`) from the
    /// PyTorch index, or another build.
    CudaWheel { selector: Version },
    /// The release has no wheels for the spec's Python (`py_minor`): another Python, or another
    /// release.
    OtherPython { py_minor: Version },
}

/// What the rules find: every diagnostic in order, and the hints some of them ask for.
#[derive(Debug, Default)]
pub(super) struct Findings {
    pub diags: Vec<Diagnostic>,
    /// The diagnostics (by index) each ask is for.
    pub asks: Vec<(Range<usize>, Ask)>,
}

impl Findings {
    /// Push `d`, whose hint `ask` names.
    pub fn ask(&mut self, d: Diagnostic, ask: Ask) {
        self.ask_all(vec![d], ask);
    }

    /// Push `ds`, whose errors share the hint `ask` names.
    pub fn ask_all(&mut self, ds: Vec<Diagnostic>, ask: Ask) {
        let start = self.diags.len();
        self.diags.extend(ds);
        self.asks.push((start..self.diags.len(), ask));
    }

    pub fn has_errors(&self) -> bool {
        self.diags.iter().any(Diagnostic::is_error)
    }
}
