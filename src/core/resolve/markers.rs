//! PEP 508 markers on the spec's pip extras, judged once the Python is chosen: for that Python
//! and the platform being resolved. A package whose marker holds keeps it (pip judges it the
//! same way in the image); one whose marker does not is left out of the lock's packages and
//! install lines, and the lock's `excluded` says why. This module performs no I/O.

use super::codes::MARKER_UNDECIDED;
use crate::core::diag::Diagnostic;
use crate::core::marker::{parse, Env};
use crate::core::spec::{Platform, Spec};
use std::collections::BTreeMap;

/// What the markers leave: the spec without the excluded extras (`None` when none is), and
/// the lock's `excluded`, package name to reason.
pub(super) struct Judged {
    pub spec: Option<Spec>,
    pub excluded: BTreeMap<String, String>,
}

/// Judge each marked extra of `spec` (its Python chosen, one platform).
pub(super) fn judge(spec: &Spec, diags: &mut Vec<Diagnostic>) -> Judged {
    let platform = spec.target.platform;
    let windows = platform == Platform::Win64;
    let machine = if windows {
        "AMD64"
    } else {
        crate::core::platform::machine(platform).unwrap_or("x86_64")
    };
    let env = Env {
        machine,
        windows,
        python: Some(&spec.python),
    };
    let shown = format!(
        "Python {} on {}",
        spec.python,
        if windows { "Windows" } else { machine }
    );
    let mut excluded = BTreeMap::new();
    for p in &spec.pip {
        let Some(text) = &p.marker else { continue };
        // The spec parsed it already; a marker that does not parse here is judged as holding
        // nothing new, never as a reason to install.
        let verdict = parse(text).and_then(|m| m.holds(&env));
        match verdict {
            Ok(true) => {}
            Ok(false) => {
                excluded.insert(
                    p.name.clone(),
                    format!(
                        "`{}`: the marker does not hold for {shown}",
                        p.requirement()
                    ),
                );
            }
            Err(why) => {
                let mut d = Diagnostic::error(
                    MARKER_UNDECIDED,
                    format!("`{}`: {why}", p.requirement()),
                )
                .with_hint("pin python to a patch release (`python = \"X.Y.Z\"`), or compare `python_version` in the marker");
                d.field = Some("pip".into());
                diags.push(d);
            }
        }
    }
    let spec = (!excluded.is_empty()).then(|| {
        let mut s = spec.clone();
        s.pip.retain(|p| !excluded.contains_key(&p.name));
        s
    });
    Judged { spec, excluded }
}
