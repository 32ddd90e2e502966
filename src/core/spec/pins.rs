//! Version pins: what counts as an exact version, what is a range, whether a version satisfies
//! a range (extras' hints use it), and the validation of `python`, `pytorch`, `pytorch-cuda`
//! and `cuda` into exact pins or requirements the resolver chooses within. This module
//! performs no I/O.

use super::codes::INVALID_SPEC;
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

/// A core key's version as written: exact, a requirement the resolver chooses within (its
/// text; parsed in the source's syntax once the source is known, see [`super::ranges`]), or
/// invalid (already reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    Exact(Version),
    Range(String),
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

/// Whether a value is a requirement rather than a version: a range, `latest`, `*`, or empty;
/// or a bare version not exact enough for its key (`pytorch = "2.5"`: the 2.5 series).
fn requirement(cx: &mut Ctx, key: &str, s: &str) -> Option<Pin> {
    unpinned(s)?;
    // A range passes the range characters only; anything else is refused as unsafe.
    Some(if range_like(s) || s.trim().is_empty() || cx.safe(key, s) {
        Pin::Range(s.to_string())
    } else {
        Pin::Invalid
    })
}

/// `python`: required, an exact `3.X` or `3.X.Y`, or a requirement (`>=3.9`) the resolver
/// chooses within.
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
    if let Some(pin) = requirement(cx, "python", p) {
        return pin;
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
                Some("use \"3.11\" or \"3.11.9\", or a range such as \">=3.10\"".into()),
            );
            Pin::Invalid
        }
    }
}

/// `pytorch`: required, an exact `X.Y.Z`, or a requirement (`>=2.3`, `2.5`, `latest`) the
/// resolver chooses within.
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
    if Version::parse(t.trim()).is_some() {
        // `2.5`: the series, chosen by the resolver.
        return Pin::Range(t.to_string());
    }
    requirement(cx, "pytorch", t).unwrap_or_else(|| {
        if cx.safe("pytorch", t) {
            cx.err(
                INVALID_SPEC,
                "pytorch",
                format!("pytorch `{t}` is not a version or a range"),
                Some("use an exact release (\"2.5.1\") or a range (\">=2.3\")".into()),
            );
        }
        Pin::Invalid
    })
}

/// A CUDA `major.minor` key (`pytorch-cuda`, `cuda`); `what` names it in hints. `None` when
/// absent; a range is a requirement the resolver chooses within.
pub(super) fn cuda_version(cx: &mut Ctx, key: &str, val: Option<&str>, what: &str) -> Option<Pin> {
    let s = val?;
    if let Some(pin) = requirement(cx, key, s) {
        return Some(pin);
    }
    if !cx.safe(key, s) {
        return Some(Pin::Invalid);
    }
    Some(match Version::parse(s) {
        Some(v) if v.len() == 2 => Pin::Exact(v),
        Some(v) if v.len() == 3 => {
            cx.err(
                INVALID_SPEC,
                key,
                format!("{key} `{s}` names a patch release"),
                Some(format!("use major.minor: \"{}\"", v.major_minor())),
            );
            Pin::Invalid
        }
        _ => {
            cx.err(
                INVALID_SPEC,
                key,
                format!("{key} `{s}` is not a CUDA version"),
                Some(format!(
                    "use major.minor, e.g. \"12.4\" ({what}), or a range (\">=12.1\")"
                )),
            );
            Pin::Invalid
        }
    })
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
