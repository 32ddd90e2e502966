//! glibc: whether the target's C library is new enough for a build. This module performs no
//! I/O.

use super::build::Build;
use super::codes::*;
use super::{err, soften};
use crate::core::diag::Diagnostic;
use crate::core::spec::Spec;

/// The error (softened when the build's glibc floor is unconfirmed) for a target glibc older
/// than the build needs; nothing when the spec names no glibc.
pub(super) fn check(spec: &Spec, build: &Build) -> Option<Diagnostic> {
    let glibc = spec.target.glibc.as_ref()?;
    (*glibc < build.glibc).then(|| {
        soften(
            err(
                GLIBC_TOO_OLD,
                "target.glibc",
                format!(
                    "this build of torch {} needs glibc >= {}, the target has {glibc}",
                    spec.pytorch, build.glibc
                ),
            ),
            build.glibc_confidence,
        )
    })
}
