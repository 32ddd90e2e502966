//! The lock assembled from what the other steps resolved. This module performs no I/O.

use super::driver;
use super::gpu::compute;
use super::image::{self, Base};
use super::install::Lines;
use super::packages::Packages;
use super::types::Build;
use crate::core::compat::Table;
use crate::core::lock::{DriverMode, Lock, LockedGpu, LOCK_VERSION};
use crate::core::spec::Spec;
use crate::core::version::Cc;

/// Everything a lock is made of.
pub(super) struct Parts<'a> {
    /// The pip extras the markers leave out, with why (`core::resolve::markers`).
    pub excluded: std::collections::BTreeMap<String, String>,
    pub spec: &'a Spec,
    pub table: &'a Table,
    pub spec_sha256: &'a str,
    pub build: &'a Build,
    pub mode: Option<DriverMode>,
    pub gpus: Vec<LockedGpu>,
    pub packages: Packages,
    pub lines: Lines,
    pub base: Base,
}

/// The lock, in the file's field order.
pub(super) fn lock(p: Parts<'_>) -> Lock {
    let (spec, build) = (p.spec, p.build);
    let platform = spec.target.platform;
    let facts = driver::facts(p.table, build, platform.os());
    Lock {
        version: LOCK_VERSION,
        name: spec.name.clone(),
        spec_sha256: p.spec_sha256.to_string(),
        table_version: p.table.meta.version.clone(),
        source: spec.source,
        platform,
        channels: spec.channels.clone(),
        index_url: p.lines.index_url,
        cuda: build.cuda.to_string(),
        cuda_variant: build.variant.clone(),
        cudnn: build.cudnn.clone(),
        nccl: build.nccl.clone(),
        driver_min: facts
            .native
            .map(|n| n.version.to_string())
            .unwrap_or_else(|| "unknown".into()),
        driver_min_compat: facts.floor.map(|f| f.version.to_string()),
        driver_target: spec.target.driver.as_ref().map(|d| d.to_string()),
        driver_mode: p.mode,
        forward_compat: spec.target.forward_compat,
        arch_list: build.arch.iter().map(Cc::sm).collect(),
        ptx: build.ptx.iter().map(compute).collect(),
        glibc_min: build.glibc.to_string(),
        glibc_target: spec.target.glibc.as_ref().map(|g| g.to_string()),
        unconfirmed: build.unconfirmed_facts(),
        auto_added: p.lines.auto_added,
        install: p.lines.install,
        image: image::locked(spec, p.base, &p.packages.map),
        packages: p.packages.map,
        gpus: p.gpus,
        notes: p.packages.notes,
        excluded: p.excluded,
        choices: spec.choices.clone(),
        closure_inputs: None,
        closure_sha256: None,
        closure_resolver: None,
        fleet: Vec::new(),
        closure: Vec::new(),
    }
}
