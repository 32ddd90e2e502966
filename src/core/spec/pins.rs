//! Version pins: what counts as an exact version, what is a range, whether a version satisfies
//! a range (the resolver's hints for an unpinned `python` or `pytorch` use it), and the
//! validation of `python`, `pytorch`, `pytorch-cuda` and `cuda`. This module performs no I/O.

use super::codes::{INVALID_SPEC, UNPINNED_VERSION};
use super::context::Ctx;
use super::raw::RawSpec;
use crate::core::compat::Table;
use crate::core::version::Version;

/// A package version (`1!152.20180717` included): the one rule render checks locks with.
pub(super) use crate::core::rules::version as is_pkg_version;

/// A requirement written with range operators and nothing else: it is reported as unpinned
/// (and never reaches any output), not as unsafe.
pub(super) fn range_like(s: &str) -> bool {
    s.len() <= 100
        && s.bytes().any(|b| b"<>=!~^*,".contains(&b))
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .,<>=!~^*-_[]:".contains(&b))
}

/// Why a version string is not an exact pin, if it is not.
pub(super) fn unpinned(s: &str) -> Option<&'static str> {
    let t = s.trim();
    if t.is_empty() {
        return Some("is empty");
    }
    if t.eq_ignore_ascii_case("latest") || t == "*" || t.eq_ignore_ascii_case("any") {
        return Some("floats");
    }
    if t.starts_with(['>', '<', '~', '^', '!', '=']) || t.contains(['*', ',']) || t.contains(' ') {
        return Some("is a range, not an exact version");
    }
    None
}

/// Whether `v` (a final release) satisfies a requirement such as `>=2.4`, `~=2.5`, `2.5`,
/// `2.*`, `<2.5a0`.
pub fn satisfies(req: &str, v: &Version) -> bool {
    let req = req.trim();
    if req.is_empty()
        || req == "*"
        || req.eq_ignore_ascii_case("latest")
        || req.eq_ignore_ascii_case("any")
    {
        return true;
    }
    req.split(',')
        .all(|clause| satisfies_clause(clause.trim(), v))
}

/// A bound's release and whether it names a pre-release of it (`2.5a0`, `2.5.0rc1`,
/// `2.5.dev0`): a pre-release sorts after every earlier release and before the release itself.
fn bound(rest: &str) -> Option<(Version, bool)> {
    if let Some(b) = Version::parse(rest) {
        return Some((b, false));
    }
    let cut = rest.find(|c: char| c.is_ascii_alphabetic())?;
    let release = rest[..cut].trim_end_matches('.');
    let tag = &rest[cut..];
    let known = [
        "a", "b", "rc", "c", "dev", "alpha", "beta", "pre", "preview",
    ]
    .iter()
    .any(|t| {
        tag.strip_prefix(t)
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    });
    known.then(|| Version::parse(release).map(|b| (b, true)))?
}

/// One comma-separated clause of a requirement.
fn satisfies_clause(c: &str, v: &Version) -> bool {
    let (op, rest) = ["==", ">=", "<=", "~=", "!=", ">", "<", "^", "~", "="]
        .iter()
        .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim())))
        .unwrap_or(("prefix", c));
    let rest = rest
        .trim_end_matches(".*")
        .trim_end_matches('*')
        .trim_end_matches('.');
    let Some((b, pre)) = bound(rest) else {
        return rest.is_empty();
    };
    if pre {
        // For a final release v: v > b's pre-release exactly when v >= b.
        return match op {
            ">=" | ">" | "~=" | "~" | "^" => *v >= b,
            "<" | "<=" => *v < b,
            "!=" => true,
            _ => false,
        };
    }
    match op {
        ">=" => *v >= b,
        "<=" => *v <= b,
        ">" => *v > b,
        "<" => *v < b,
        "!=" => *v != b,
        "~=" | "~" | "^" => {
            // Compatible release: same leading components, not older.
            let keep = if op == "^" {
                1
            } else {
                b.len().saturating_sub(1).max(1)
            };
            let prefix = Version::parse(
                &b.parts()[..keep]
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("."),
            );
            *v >= b && prefix.is_some_and(|p| v.starts_with(&p))
        }
        _ => v.starts_with(&b),
    }
}

/// `python` or `pytorch` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    Exact(Version),
    /// A requirement, not a version: `diag` is the index of its UNPINNED_VERSION error, whose
    /// hint, the newest version in the range that locks with the rest of the spec, only the
    /// resolver can prove (see [`super::Unpinned`]).
    Range {
        req: String,
        diag: usize,
    },
    Invalid,
}

impl Pin {
    /// The version, when pinned exactly.
    pub fn exact(&self) -> Option<&Version> {
        match self {
            Pin::Exact(v) => Some(v),
            _ => None,
        }
    }
}

/// `python`: required, an exact `3.X` or `3.X.Y`. Checked before `pytorch`, whose hints it
/// sharpens. An unpinned python is hinted by the resolver, once the rest of the spec is known,
/// with a version proven to lock.
pub(super) fn python(cx: &mut Ctx, raw: &RawSpec) -> Pin {
    let p = match raw.python.as_deref() {
        None => {
            cx.err(
                INVALID_SPEC,
                "python",
                "missing required key `python`".into(),
                Some("add e.g. python = \"3.11\"".into()),
            );
            return Pin::Invalid;
        }
        Some(p) => p,
    };
    if let Some(why) = unpinned(p) {
        let diag = cx.count();
        cx.err(
            UNPINNED_VERSION,
            "python",
            format!("python `{p}` {why}"),
            None,
        );
        return Pin::Range {
            req: p.to_string(),
            diag,
        };
    }
    if !cx.safe("python", p) {
        return Pin::Invalid;
    }
    match Version::parse(p) {
        Some(v) if (2..=3).contains(&v.len()) && v.major() == 3 => Pin::Exact(v),
        _ => {
            cx.err(
                INVALID_SPEC,
                "python",
                format!("python `{p}` is not a Python version"),
                Some("use \"3.11\" or \"3.11.9\"".into()),
            );
            Pin::Invalid
        }
    }
}

/// `pytorch`: required, an exact `X.Y.Z`. "2.5" or "latest" pass the character rules and
/// ranges are reported as unpinned; their hint, the newest release that fits the whole spec,
/// is added by the resolver once the rest of the spec is validated.
pub(super) fn pytorch(cx: &mut Ctx, raw: &RawSpec, table: &Table) -> Pin {
    let Some(t) = raw.pytorch.as_deref() else {
        cx.err(
            INVALID_SPEC,
            "pytorch",
            "missing required key `pytorch`".into(),
            Some(format!(
                "add e.g. pytorch = \"{}\"",
                table
                    .newest_torch()
                    .map(|t| t.version.to_string())
                    .unwrap_or_default()
            )),
        );
        return Pin::Invalid;
    };
    if let Some(v) = Version::parse(t.trim()).filter(|v| v.len() == 3) {
        return Pin::Exact(v);
    }
    if !range_like(t) && !cx.safe("pytorch", t) {
        return Pin::Invalid;
    }
    let why = if Version::parse(t.trim()).is_some() {
        "is not an exact version"
    } else {
        unpinned(t).unwrap_or("is not an exact version")
    };
    let diag = cx.count();
    cx.err(
        UNPINNED_VERSION,
        "pytorch",
        format!("pytorch `{t}` {why}"),
        None,
    );
    Pin::Range {
        req: t.to_string(),
        diag,
    }
}

/// A CUDA `major.minor` key (`pytorch-cuda`, `cuda`); `what` names it in hints.
pub(super) fn cuda_version(
    cx: &mut Ctx,
    key: &str,
    val: Option<&str>,
    what: &str,
) -> Option<Version> {
    let s = val?;
    if let Some(why) = unpinned(s) {
        cx.err(
            UNPINNED_VERSION,
            key,
            format!("{key} `{s}` {why}"),
            Some(format!(
                "pin an exact {what}, e.g. \"12.4\"; `envbuild table torch` lists them"
            )),
        );
        return None;
    }
    if !cx.safe(key, s) {
        return None;
    }
    match Version::parse(s) {
        Some(v) if v.len() == 2 => Some(v),
        Some(v) if v.len() == 3 => {
            cx.err(
                INVALID_SPEC,
                key,
                format!("{key} `{s}` names a patch release"),
                Some(format!("use major.minor: \"{}\"", v.major_minor())),
            );
            None
        }
        _ => {
            cx.err(
                INVALID_SPEC,
                key,
                format!("{key} `{s}` is not a CUDA version"),
                Some(format!("use major.minor, e.g. \"12.4\" ({what})")),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn an_epoch_is_part_of_a_version_but_not_a_version_alone() {
        assert!(is_pkg_version("1!152.20180717"));
        assert!(is_pkg_version("152.20180717"));
        for bad in ["!152", "1!", "a!1.0", "1!!2", "1!2!3"] {
            assert!(!is_pkg_version(bad), "{bad}");
        }
    }

    #[test]
    fn requirement_ranges_select_the_right_versions() {
        assert!(satisfies(">=2.4", &v("2.5.1")));
        assert!(!satisfies("<2.4", &v("2.5.1")));
        assert!(satisfies("~=2.5.0", &v("2.5.1")));
        assert!(!satisfies("~=2.5.0", &v("2.6.0")));
        assert!(satisfies("2.5", &v("2.5.1")));
        assert!(satisfies("2.*", &v("2.9.0")));
        assert!(satisfies("^2.1", &v("2.9.0")));
        assert!(satisfies(">=2.1,<2.4", &v("2.3.1")));
        assert!(satisfies("latest", &v("1.0")));
    }

    #[test]
    fn pre_release_bounds_compare_with_final_releases() {
        // `<2.5a0` excludes 2.5.0 and every pre-release of it, keeps 2.4.x.
        assert!(satisfies(">=2.3,<2.5a0", &v("2.4.1")));
        assert!(!satisfies(">=2.3,<2.5a0", &v("2.5.0")));
        assert!(satisfies(">=2.5rc1", &v("2.5.0")));
        assert!(!satisfies(">=2.5.dev0", &v("2.4.1")));
        assert!(!satisfies("==2.5a0", &v("2.5.0")));
        assert!(!satisfies("<2.5xyz", &v("2.4.1")));
    }
}
