//! glibc: whether the target's C library is new enough for a build. This module performs no
//! I/O.

use super::codes::*;
use super::err;
use super::types::Build;
use super::unconfirmed::{self, Grade};
use crate::core::diag::Diagnostic;
use crate::core::spec::Spec;

/// The error for a target glibc older than the build needs; nothing when the spec names no
/// glibc. An unconfirmed floor is read as stated and as absent, so it only ever warns.
pub(super) fn check(spec: &Spec, build: &Build) -> Option<Diagnostic> {
    let glibc = spec.target.glibc.as_ref()?;
    let floors = if build.glibc_confidence.is_unconfirmed() {
        vec![Some(&build.glibc), None]
    } else {
        vec![Some(&build.glibc)]
    };
    let judged = unconfirmed::judge(floors.iter().map(|f| match f {
        Some(f) if glibc < *f => Grade::Failed,
        _ => Grade::Clean,
    }));
    (judged.stated == Grade::Failed).then(|| {
        unconfirmed::decide(
            err(
                GLIBC_TOO_OLD,
                "target.glibc",
                format!(
                    "this build of torch {} needs glibc >= {}, the target has {glibc}",
                    spec.pytorch, build.glibc
                ),
            ),
            &judged,
        )
    })
}
