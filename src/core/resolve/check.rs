//! Checking one build against the whole target: its driver, GPU architectures and glibc. Used
//! for the spec's own build and for every candidate a hint might suggest. This module performs
//! no I/O.

use super::types::{Build, Ctx, Modes};
use super::{driver, glibc, gpu};
use crate::core::diag::Diagnostic;
use crate::core::lock::{DriverMode, LockedGpu};
use crate::core::spec::Source;

/// Check a build from `source` against the target: driver, GPU architectures, glibc, conda's
/// `__cuda`. Returns the diagnostics, the modes the target driver runs it in (when a driver is
/// given) and how each GPU runs it.
pub(super) fn build(
    cx: &Ctx,
    source: Source,
    build: &Build,
) -> (Vec<Diagnostic>, Option<DriverMode>, Vec<LockedGpu>) {
    let mut out = Vec::new();
    let facts = driver::facts(cx.table, build, cx.spec.target.platform.os());
    let modes: Option<Modes> = driver::check(cx, source, build, &facts, &mut out);
    let locked = gpu::coverage(
        cx.gpus,
        build,
        modes.as_ref(),
        facts.native.as_ref(),
        &mut out,
    );
    out.extend(glibc::check(cx.spec, build));
    (out, modes.map(|m| m.stated), locked)
}
