//! The codes the use cases own, and the registry of every diagnostic code envbuild can emit
//! (each module owns its codes; this list gathers them for docs/diagnostics.md's check). No I/O.

use crate::core::diag::Code;

/// An output file exists and `--force` was not given.
pub const OUTPUT_EXISTS: Code = "OUTPUT_EXISTS";
/// `--locked`: the lock on disk differs from what the spec resolves to.
pub const LOCK_STALE: Code = "LOCK_STALE";
/// `--locked`: there is no lock on disk.
pub const LOCK_MISSING: Code = "LOCK_MISSING";
/// `image SPEC... --fail-fast`: a spec not run (or stopped) because another one failed.
pub const CANCELLED: Code = "CANCELLED";

/// Every diagnostic code envbuild can emit, sorted, for the docs check (docs/diagnostics.md).
pub fn all() -> Vec<&'static str> {
    let mut v = vec![OUTPUT_EXISTS, LOCK_STALE, LOCK_MISSING, CANCELLED];
    v.push(crate::core::lock::INVALID_LOCK);
    v.extend_from_slice(crate::core::closure::codes::ALL);
    v.extend_from_slice(crate::core::diag::codes::ALL);
    v.extend_from_slice(crate::core::spec::codes::ALL);
    v.extend_from_slice(crate::core::import::codes::ALL);
    v.push(crate::core::compat::TABLE_INVALID);
    v.extend_from_slice(crate::core::learn::codes::ALL);
    v.extend_from_slice(crate::core::resolve::codes::ALL);
    v.extend_from_slice(crate::core::resolve::choose::codes::ALL);
    v.push(crate::core::render::codes::TEMPLATE_ERROR);
    v.push(crate::core::render::TEMPLATE_BUDGET);
    v.extend_from_slice(crate::core::closure::verify::codes::ALL);
    v.push(crate::infra::fs::OUTPUT_SYMLINK);
    v.extend_from_slice(crate::core::smoke::codes::ALL);
    v.extend_from_slice(crate::infra::docker::codes::ALL);
    v.push(crate::infra::registry_auth::codes::REGISTRY_AUTH);
    v.sort_unstable();
    v.dedup();
    v
}
