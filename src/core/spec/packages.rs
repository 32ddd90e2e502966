//! Extra packages (`conda` and `pip`): parsing `[channel::]name=version` and
//! `name[extras]==version` pins, refusing floats, and refusing packages the spec manages
//! through its own keys or lists twice. This module performs no I/O.

use super::codes::{INVALID_SPEC, UNNAMED_REFERENCE, UNPINNED_VERSION};
use super::context::Ctx;
use super::pins::{is_pkg_version, range_like, unpinned};
use super::raw::RawSpec;
use super::safety::is_name;
use super::sources::is_channel;
use super::{CondaPkg, PipPkg};
use crate::core::rules::package_name;

/// Packages the spec manages through its own keys; naming them in `conda`/`pip` is a conflict.
const MANAGED: &[(&str, &str)] = &[
    ("python", "python"),
    ("pytorch", "pytorch"),
    ("torch", "pytorch"),
    ("torchvision", "torchvision"),
    ("torchaudio", "torchaudio"),
    ("pytorch-cuda", "pytorch-cuda"),
    ("cudatoolkit", "pytorch-cuda"),
    ("cuda-version", "cuda"),
    ("pytorch-gpu", "pytorch"),
];

/// A package or extra name the spec takes: lowercase, at most 64 characters, and a PEP 508
/// name (the one rule, [`package_name`]), so pip and conda never meet one at build time.
fn is_package_name(s: &str) -> bool {
    is_name(s) && package_name(s)
}

/// Why `name` (of the entry `s`) is not a package name, or `None`: a name that only breaks
/// PEP 508's edges (`foo_`, `foo.`) says so, not "not `name==version`".
fn bad_name(s: &str, name: &str, form: &str) -> Option<String> {
    if is_package_name(name) {
        return None;
    }
    Some(if is_name(name) || name.starts_with(['-', '_', '.']) {
        format!(
            "`{s}`: the name is not a valid package name (PEP 508: letters, digits, `.`, `_` \
             and `-`, starting and ending with a letter or digit)"
        )
    } else {
        format!("`{s}` is not `{form}`")
    })
}

/// Parsed form of an extra package line.
pub enum PkgParse<T> {
    Ok(T),
    Unpinned { name: String, why: &'static str },
    Invalid(String),
}

/// `[channel::]name=version` (also `==`); a build string (`=py310_0`) is dropped, as
/// `conda env export` writes one.
pub fn parse_conda_pkg(s: &str) -> PkgParse<CondaPkg> {
    let s = s.trim();
    let (channel, rest) = match s.split_once("::") {
        Some((c, r)) => (Some(c.to_string()), r),
        None => (None, s),
    };
    if let Some(c) = &channel {
        if !is_channel(c) {
            return PkgParse::Invalid(format!("channel `{c}` is not a valid channel name"));
        }
    }
    let split_at = rest
        .find(['=', '<', '>', '!', '~', ' ', '*'])
        .unwrap_or(rest.len());
    let (name, spec) = rest.split_at(split_at);
    let name = name.trim().to_ascii_lowercase();
    if let Some(why) = bad_name(s, &name, "name=version") {
        return PkgParse::Invalid(why);
    }
    let spec = spec.trim();
    let version = spec.strip_prefix("==").or_else(|| spec.strip_prefix('='));
    let version = match version {
        Some(v) if !v.starts_with(['=', '<', '>']) => v,
        _ => {
            return PkgParse::Unpinned {
                name,
                why: if spec.is_empty() {
                    "has no version"
                } else {
                    "is a range, not an exact version"
                },
            }
        }
    };
    // conda's `name=version=build`: keep the version, drop the build string.
    let has_build = version.contains('=');
    let version = version.split('=').next().unwrap_or("");
    // `numpy=1.22` is conda's "any 1.22.x"; a build string or `==` makes it exact.
    let fuzzy = !spec.starts_with("==") && !has_build && version.split('.').count() < 3;
    if let Some(why) = unpinned(version) {
        return PkgParse::Unpinned { name, why };
    }
    if !is_pkg_version(version) {
        return PkgParse::Invalid(format!("`{version}` is not a valid version for `{name}`"));
    }
    PkgParse::Ok(CondaPkg {
        channel,
        name,
        version: version.to_string(),
        fuzzy,
    })
}

/// `name[extra,...]==version`, or a direct reference pinned by content.
pub fn parse_pip_pkg(s: &str) -> PkgParse<PipPkg> {
    let s = s.trim();
    let split_at = s
        .find(['=', '<', '>', '!', '~', ' ', '[', '@', ';'])
        .unwrap_or(s.len());
    let (name, rest) = s.split_at(split_at);
    let name = name.trim().to_ascii_lowercase().replace('_', "-");
    if let Some(why) = bad_name(s, &name, "name==version") {
        return PkgParse::Invalid(why);
    }
    let (extras, rest) = match rest.strip_prefix('[') {
        Some(r) => match r.split_once(']') {
            Some((e, r)) => (
                e.split(',')
                    .map(|x| x.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>(),
                r,
            ),
            None => return PkgParse::Invalid(format!("`{s}`: unclosed `[`")),
        },
        None => (Vec::new(), rest),
    };
    if extras.iter().any(|e| !is_package_name(e)) {
        return PkgParse::Invalid(format!("`{s}`: bad extras"));
    }
    let rest = rest.trim();
    if let Some(url) = rest.strip_prefix('@') {
        return direct_reference(name, extras, url.trim());
    }
    let Some(version) = rest.strip_prefix("==").filter(|v| !v.starts_with('=')) else {
        return PkgParse::Unpinned {
            name,
            why: if rest.is_empty() {
                "has no version"
            } else {
                "is not pinned with `==`"
            },
        };
    };
    if let Some(why) = unpinned(version) {
        return PkgParse::Unpinned { name, why };
    }
    if !is_pkg_version(version) {
        return PkgParse::Invalid(format!("`{version}` is not a valid version for `{name}`"));
    }
    PkgParse::Ok(PipPkg {
        name,
        extras,
        version: version.to_string(),
        url: None,
        marker: None,
    })
}

/// Why a direct reference at a branch, a tag or no ref is not a pin.
pub const REFERENCE_UNPINNED: &str =
    "is a direct reference without a commit (`@<40-hex sha>`) or a `#sha256=` hash";
/// How to pin a direct reference, wherever it was written.
pub const PIN_REFERENCE_HINT: &str = "pin it: end a git URL with `@<40-hex commit>` (a branch or tag moves), or an archive URL with `#sha256=<64 hex>`";

/// The hint for `name @ URL` at a branch, a tag or no ref: the very line to write, and how to
/// find its commit (or an archive's sha256). envbuild follows no branch: the lock would move
/// with it, and the closure builds nothing, so it cannot read a moving reference's metadata.
pub fn pin_reference_hint(requirement: &str) -> String {
    let Some((name, url)) = requirement.split_once('@') else {
        return PIN_REFERENCE_HINT.to_string();
    };
    let (name, url) = (name.trim(), url.trim());
    if let Some(rest) = url.strip_prefix("git+") {
        let (base, git_ref) = match rest.rsplit_once('@') {
            Some((b, r)) if b.contains("://") && !r.contains('/') => (b, r),
            _ => (rest, "HEAD"),
        };
        let base = base.split('#').next().unwrap_or(base);
        return format!(
            "write \"{name} @ git+{base}@<40-hex commit>\"; `git ls-remote {base} {git_ref}` prints the commit {git_ref} is at now (a branch or tag moves, so the lock pins the commit)"
        );
    }
    let base = url.split('#').next().unwrap_or(url);
    format!(
        "write \"{name} @ {base}#sha256=<64 hex>\"; `curl -sL {base} | sha256sum` prints it (the archive behind a URL can change, so the lock pins its hash)"
    )
}

/// `name @ URL`: pinned when the URL names a git commit (`git+https://...@<40 hex>`) or an
/// archive's sha256 (`https://...#sha256=<64 hex>`); the commit or hash is its version.
fn direct_reference(name: String, extras: Vec<String>, url: &str) -> PkgParse<PipPkg> {
    let plain = |u: &str| {
        u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:+@%~=".contains(&b))
    };
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((why, _)) = crate::core::url::secret_refusal(url) {
        return PkgParse::Invalid(format!("`{name} @ ...`: {why}"));
    }
    if !(url.starts_with("https://") || url.starts_with("git+https://")) {
        return PkgParse::Invalid(format!(
            "`{name} @ {url}`: a direct reference must be an https:// or git+https:// URL"
        ));
    }
    let version = if let Some((base, sha)) = url.split_once("#sha256=") {
        (hex(sha, 64) && plain(base)).then(|| sha.to_ascii_lowercase())
    } else if url.starts_with("git+") && plain(url) {
        url.rsplit_once('@')
            .map(|(_, c)| c)
            .filter(|c| hex(c, 40))
            .map(str::to_ascii_lowercase)
    } else if plain(url) {
        None
    } else {
        return PkgParse::Invalid(format!(
            "`{name} @ {url}`: the URL has characters envbuild does not pass on"
        ));
    };
    match version {
        Some(version) => PkgParse::Ok(PipPkg {
            name,
            extras,
            version,
            url: Some(url.to_string()),
            marker: None,
        }),
        None => PkgParse::Unpinned {
            name,
            why: REFERENCE_UNPINNED,
        },
    }
}

/// A pip line that installs from a URL without naming the package: `git+https://...@ref`,
/// `git+https://...#egg=NAME`, or an editable `-e git+...`. pip learns the name only by
/// fetching the URL; a spec needs it up front (`NAME @ URL`), to pin and check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareReference {
    /// The URL without its `#egg=` fragment.
    pub url: String,
    /// The name from `#egg=NAME`, normalized, when given.
    pub egg: Option<String>,
    pub editable: bool,
}

/// The line as a [`BareReference`], if it is a URL (after `-e`/`--editable`).
pub fn bare_reference(line: &str) -> Option<BareReference> {
    let line = line.trim();
    let (editable, rest) = match line
        .strip_prefix("-e")
        .or_else(|| line.strip_prefix("--editable"))
    {
        Some(r) if r.starts_with([' ', '=']) => (true, r.trim_start_matches([' ', '='])),
        _ => (false, line),
    };
    let lower = rest.to_ascii_lowercase();
    let is_url = [
        "git+", "hg+", "svn+", "bzr+", "https://", "http://", "file:",
    ]
    .iter()
    .any(|p| lower.starts_with(p));
    if !is_url {
        return None;
    }
    let (url, egg) = match rest.split_once("#egg=") {
        Some((u, e)) => {
            let e = e.split('&').next().unwrap_or("");
            (u, Some(e.to_ascii_lowercase().replace('_', "-")))
        }
        None => (rest, None),
    };
    Some(BareReference {
        url: url.to_string(),
        egg: egg.filter(|e| is_package_name(e)),
        editable,
    })
}

impl BareReference {
    /// `NAME @ URL`, when `#egg=` names the package.
    pub fn named(&self) -> Option<String> {
        self.egg.as_ref().map(|n| format!("{n} @ {}", self.url))
    }

    /// The `UNNAMED_REFERENCE` hint: how to write the line, and its commit when it has none.
    pub fn hint(&self) -> String {
        let name = self.egg.as_deref().unwrap_or("NAME");
        let pinned = matches!(parse_pip_pkg(&format!("x @ {}", self.url)), PkgParse::Ok(_));
        let url = if pinned || !self.url.starts_with("git+") {
            self.url.clone()
        } else {
            let base = match self.url.rsplit_once('@') {
                Some((b, r)) if b.contains("://") && !r.contains('/') => b,
                _ => &self.url,
            };
            format!("{base}@<40-hex commit>")
        };
        let mut h = format!("name the package: \"{name} @ {url}\"");
        if !pinned {
            h.push_str(" (a branch, tag or no ref moves; pin the commit)");
        }
        if !(self.url.starts_with("git+https://") || self.url.starts_with("https://")) {
            h.push_str("; with an https:// (git+https://) URL, the only kind a spec takes");
        }
        if self.editable {
            h.push_str("; an image installs it as a regular package, there is no checkout to edit");
        }
        h
    }
}

/// The line with a direct reference's `#sha256=<hex>` taken off, for the character check (the
/// `#` is the fragment's, and is only accepted there).
fn without_hash_fragment(line: &str) -> &str {
    match line.rsplit_once("#sha256=") {
        Some((base, sha)) if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) => base,
        _ => line,
    }
}

/// The `conda` and `pip` lists, each sorted; conflicts with managed keys and duplicates are
/// reported after both lists were parsed. Ranges are taken: a closure lock pins them, a
/// table-level lock carries them as written (`RANGE_NOT_LOCKED`).
pub(super) fn packages(cx: &mut Ctx, raw: &RawSpec) -> (Vec<CondaPkg>, Vec<PipPkg>) {
    let mut conda = conda_list(cx, &raw.conda);
    let mut pip = pip_list(cx, &raw.pip);
    check_managed_and_duplicates(cx, &conda, &pip);
    conda.sort();
    pip.sort();
    (conda, pip)
}

fn conda_list(cx: &mut Ctx, lines: &[String]) -> Vec<CondaPkg> {
    let mut conda = Vec::new();
    for p in lines {
        if !range_like(p) && !cx.safe("conda", p) {
            continue;
        }
        match parse_conda_pkg(p) {
            PkgParse::Ok(pkg) => conda.push(pkg),
            PkgParse::Unpinned { .. } if conda_range(p).is_some() => {
                conda.extend(conda_range(p));
            }
            PkgParse::Unpinned { name, why } => cx.err(
                UNPINNED_VERSION,
                "conda",
                format!("conda package `{p}` {why}"),
                Some(format!("pin an exact version, e.g. \"{name}=<version>\"; `conda search {name}` lists them")),
            ),
            PkgParse::Invalid(m) => cx.err(INVALID_SPEC, "conda", m, Some("write conda packages as \"name=version\" or \"channel::name=version\"".into())),
        }
    }
    conda
}

fn pip_list(cx: &mut Ctx, lines: &[String]) -> Vec<PipPkg> {
    let mut pip = Vec::new();
    for p in lines {
        let (p, marker) = match split_marker(p) {
            Ok(x) => x,
            Err(m) => {
                cx.err(
                    INVALID_SPEC,
                    "pip",
                    m,
                    Some(crate::core::marker::HINT.into()),
                );
                continue;
            }
        };
        let before = pip.len();
        pip_entry(cx, p, &mut pip);
        for x in &mut pip[before..] {
            x.marker.clone_from(&marker);
        }
    }
    pip
}

/// `req; marker` as the requirement and the marker's canonical text, or why the marker is not
/// one envbuild reads. A bare reference's URL keeps its `;`-free text as it is.
pub fn split_marker(line: &str) -> Result<(&str, Option<String>), String> {
    let Some((req, marker)) = line.split_once(';') else {
        return Ok((line, None));
    };
    match crate::core::marker::parse(marker.trim()) {
        Ok(m) => Ok((req.trim_end(), Some(m.canonical()))),
        Err(why) => Err(format!("pip line `{line}`: {why}")),
    }
}

/// One pip line without its marker, pushed onto `pip` when it is an extra the spec takes.
fn pip_entry(cx: &mut Ctx, p: &str, pip: &mut Vec<PipPkg>) {
    if let Some(b) = bare_reference(p) {
        if cx.safe("pip", &b.url) {
            cx.err(
                UNNAMED_REFERENCE,
                "pip",
                format!("pip line `{p}` installs from a URL without naming the package"),
                Some(b.hint()),
            );
        }
        return;
    }
    if !range_like(p) && !cx.safe("pip", without_hash_fragment(p)) {
        return;
    }
    match parse_pip_pkg(p) {
        PkgParse::Ok(pkg) => pip.push(pkg),
        PkgParse::Unpinned { .. } if pip_range(p).is_some() => {
            pip.extend(pip_range(p));
        }
        PkgParse::Unpinned { name, why } => cx.err(
            UNPINNED_VERSION,
            "pip",
            format!("pip package `{p}` {why}"),
            Some(if why == REFERENCE_UNPINNED {
                pin_reference_hint(p)
            } else {
                format!("pin an exact version, e.g. \"{name}==<version>\"; `pip index versions {name}` lists them")
            }),
        ),
        PkgParse::Invalid(m) => cx.err(INVALID_SPEC, "pip", m, Some("write pip packages as \"name==version\"".into())),
    }
}

/// `name[extras]>=0.8,<1`: a PEP 440 range (operators, versions, commas; no spaces kept), for
/// a closure lock, which pins it. `None` when it is not one.
fn pip_range(s: &str) -> Option<PipPkg> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(at) = s.find(['<', '>', '=', '!', '~']) else {
        // A bare `name[extras]`: any version.
        return match parse_pip_pkg(&format!("{s}==0")) {
            PkgParse::Ok(mut pkg) if pkg.url.is_none() && !s.contains(['@', ';']) => {
                pkg.version = super::ANY_VERSION.to_string();
                Some(pkg)
            }
            _ => None,
        };
    };
    let (head, spec) = s.split_at(at);
    let clauses_ok = spec.split(',').all(|c| {
        let v = c.trim_start_matches(['<', '>', '=', '!', '~']);
        let op = &c[..c.len() - v.len()];
        ["<", ">", "<=", ">=", "==", "!=", "~="].contains(&op) && range_version(op, v)
    });
    if !clauses_ok {
        return None;
    }
    match parse_pip_pkg(&format!("{head}==0")) {
        PkgParse::Ok(mut pkg) => {
            pkg.version = spec.to_string();
            Some(pkg)
        }
        _ => None,
    }
}

/// The version of one range clause: it starts with a digit and holds letters, digits, `.` and
/// `+`, with a trailing `.*` only after `==` or `!=` (`==2.*`).
fn range_version(op: &str, v: &str) -> bool {
    let (base, wild) = match v.strip_suffix(".*") {
        Some(b) => (b, true),
        None => (v, false),
    };
    base.starts_with(|c: char| c.is_ascii_digit())
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".+".contains(&b))
        && (!wild || op == "==" || op == "!=")
}

/// `[channel::]name>=2,<3`: a conda version range (comparison clauses joined by `,`, no
/// spaces kept), for a closure lock, which pins it. `None` when it is not one.
fn conda_range(s: &str) -> Option<CondaPkg> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let (channel, rest) = match s.rsplit_once("::") {
        Some((c, r)) => (Some(c), r),
        None => (None, s.as_str()),
    };
    // A bare name, `name=*` or `name *`: any version.
    let bare = rest
        .strip_suffix("=*")
        .or_else(|| rest.strip_suffix('*'))
        .unwrap_or(rest);
    if !bare.contains(['<', '>', '=', '!', '*']) {
        let head = match channel {
            Some(c) => format!("{c}::{bare}=0"),
            None => format!("{bare}=0"),
        };
        return match parse_conda_pkg(&head) {
            PkgParse::Ok(mut pkg) => {
                pkg.version = super::ANY_VERSION.to_string();
                pkg.fuzzy = false;
                Some(pkg)
            }
            _ => None,
        };
    }
    let at = rest.find(['<', '>', '=', '!'])?;
    let (name, spec) = rest.split_at(at);
    let clauses_ok = spec.split(',').all(|c| {
        let v = c.trim_start_matches(['<', '>', '=', '!']);
        let op = &c[..c.len() - v.len()];
        // conda's `=1.12.*` is the series, as `==1.12.*`.
        let op = if op == "=" && v.ends_with(".*") {
            "=="
        } else {
            op
        };
        ["<", ">", "<=", ">=", "==", "!="].contains(&op) && range_version(op, v)
    });
    // One clause `==X` or `=X` is a pin, not a range: parse_conda_pkg took it already.
    if !clauses_ok || !spec.contains([',', '<', '>', '!', '*']) {
        return None;
    }
    let head = match channel {
        Some(c) => format!("{c}::{name}=0"),
        None => format!("{name}=0"),
    };
    match parse_conda_pkg(&head) {
        PkgParse::Ok(mut pkg) => {
            pkg.version = spec.to_string();
            pkg.fuzzy = false;
            Some(pkg)
        }
        _ => None,
    }
}

fn check_managed_and_duplicates(cx: &mut Ctx, conda: &[CondaPkg], pip: &[PipPkg]) {
    let mut seen = std::collections::BTreeSet::new();
    for (key, n) in conda
        .iter()
        .map(|c| ("conda", &c.name))
        .chain(pip.iter().map(|p| ("pip", &p.name)))
    {
        if let Some((_, k)) = MANAGED.iter().find(|(m, _)| m == n) {
            cx.err(
                INVALID_SPEC,
                key,
                format!("`{n}` is managed by the spec's `{k}` key"),
                Some(format!("remove it from `{key}` and set `{k}` instead")),
            );
        } else if !seen.insert(n.clone()) {
            cx.err(
                INVALID_SPEC,
                key,
                format!("package `{n}` is listed twice"),
                Some("keep one pin per package".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conda_and_pip_pins_parse_and_floats_are_refused() {
        assert!(
            matches!(parse_conda_pkg("numpy=1.26.4"), PkgParse::Ok(p) if p.version == "1.26.4")
        );
        assert!(
            matches!(parse_conda_pkg("conda-forge::pandas==2.1.1"), PkgParse::Ok(p) if p.channel.as_deref() == Some("conda-forge"))
        );
        assert!(
            matches!(parse_conda_pkg("numpy=1.26.4=py310h5f9d8c6_0"), PkgParse::Ok(p) if p.version == "1.26.4")
        );
        for f in [
            "numpy",
            "numpy>=1.2",
            "numpy=1.*",
            "numpy=*",
            "numpy=latest",
        ] {
            assert!(
                matches!(parse_conda_pkg(f), PkgParse::Unpinned { .. }),
                "{f}"
            );
        }
        assert!(
            matches!(parse_pip_pkg("Some_Pkg[extra]==1.0.0"), PkgParse::Ok(p) if p.name == "some-pkg" && p.extras == ["extra"])
        );
        for f in [
            "pkg",
            "pkg>=1",
            "pkg~=1.0",
            "pkg!=1",
            "pkg==1.*",
            "pkg==latest",
        ] {
            assert!(matches!(parse_pip_pkg(f), PkgParse::Unpinned { .. }), "{f}");
        }
        assert!(matches!(
            parse_pip_pkg("pkg @ https://x"),
            PkgParse::Unpinned { .. }
        ));
    }

    /// A range clause's version starts with a digit, and `.*` ends only an `==`/`!=` clause.
    #[test]
    fn range_versions_are_versions() {
        for ok in [
            "rich>=13",
            "rich==13.*",
            "rich>=1.0,!=1.2.*,<2",
            "rich~=13.7.1",
        ] {
            assert!(pip_range(ok).is_some(), "{ok}");
        }
        for bad in [
            "rich==*1",
            "rich>=.1",
            "rich>=1.*",
            "rich>=",
            "rich>=1,<",
            "rich>=1$",
        ] {
            assert!(pip_range(bad).is_none(), "{bad}");
        }
        assert!(conda_range("pandas>=2,<3").is_some());
        assert!(conda_range("pandas>=*,<3").is_none());
    }

    /// A conda range (closure locks only) keeps its clauses and channel; a pin or a hostile
    /// string is not one.
    #[test]
    fn conda_ranges_parse_for_a_closure() {
        let r = conda_range("conda-forge::pandas >= 2, <3").unwrap();
        assert_eq!(r.channel.as_deref(), Some("conda-forge"));
        assert_eq!((r.name.as_str(), r.version.as_str()), ("pandas", ">=2,<3"));
        assert!(r.is_range());
        assert_eq!(r.match_spec(), "conda-forge::pandas>=2,<3");
        assert_eq!(conda_range("tqdm>=4").unwrap().match_spec(), "tqdm>=4");
        for not in [
            "pandas=2.1",
            "pandas==2.1.1",
            "pandas>=2;rm -rf /",
            "pandas>=",
            ">=2",
        ] {
            assert!(conda_range(not).is_none(), "{not}");
        }
    }

    #[test]
    fn conda_equals_keeps_conda_meaning() {
        let fuzzy = |s| matches!(parse_conda_pkg(s), PkgParse::Ok(p) if p.fuzzy);
        assert!(fuzzy("numpy=1.22"));
        assert!(!fuzzy("numpy==1.22"));
        assert!(!fuzzy("numpy=1.22.4"));
        assert!(!fuzzy("numpy=1.22=py310h1234_0"));
        match parse_conda_pkg("numpy=1.22") {
            PkgParse::Ok(p) => assert_eq!(p.match_spec(), "numpy=1.22"),
            _ => panic!(),
        }
    }

    #[test]
    fn direct_references_pinned_by_content_are_pins() {
        let commit = "a".repeat(40);
        let git = format!("openfold @ git+https://github.com/aqlaboratory/openfold.git@{commit}");
        assert!(
            matches!(parse_pip_pkg(&git), PkgParse::Ok(p) if p.version == commit && p.requirement() == git)
        );
        let sha = "0123456789abcdef".repeat(4);
        let whl = format!(
            "flash-attn @ https://example.org/flash_attn-2.5.8-cp310-linux_x86_64.whl#sha256={sha}"
        );
        assert!(matches!(parse_pip_pkg(&whl), PkgParse::Ok(p) if p.version == sha));
        assert_eq!(without_hash_fragment(&whl), whl.split('#').next().unwrap());
        for floating in [
            "x @ git+https://github.com/o/x.git",
            "x @ git+https://github.com/o/x.git@main",
            "x @ https://example.org/x-1.0.whl",
        ] {
            assert!(
                matches!(parse_pip_pkg(floating), PkgParse::Unpinned { .. }),
                "{floating}"
            );
        }
        assert!(matches!(
            parse_pip_pkg("x @ file:///tmp/x.whl"),
            PkgParse::Invalid(_)
        ));
    }

    /// A reference at a branch, a tag or no ref: the hint is the line to write and how to find
    /// what it pins.
    #[test]
    fn an_unpinned_reference_is_hinted_with_the_line_to_write() {
        assert_eq!(
            pin_reference_hint("clip @ git+https://github.com/openai/CLIP.git@main"),
            "write \"clip @ git+https://github.com/openai/CLIP.git@<40-hex commit>\"; `git ls-remote https://github.com/openai/CLIP.git main` prints the commit main is at now (a branch or tag moves, so the lock pins the commit)"
        );
        let h = pin_reference_hint(
            "taming-transformers @ git+https://github.com/CompVis/taming-transformers.git",
        );
        assert!(
            h.starts_with("write \"taming-transformers @ git+https://github.com/CompVis/taming-transformers.git@<40-hex commit>\"")
                && h.contains("git ls-remote https://github.com/CompVis/taming-transformers.git HEAD"),
            "{h}"
        );
        let h = pin_reference_hint("x @ https://example.org/x-1.0.whl");
        assert!(
            h.starts_with("write \"x @ https://example.org/x-1.0.whl#sha256=<64 hex>\""),
            "{h}"
        );
    }

    #[test]
    fn a_url_without_a_name_is_a_bare_reference_whatever_its_spelling() {
        let b = bare_reference("-e git+https://github.com/o/My_Pkg.git@main#egg=My_Pkg").unwrap();
        assert!(b.editable);
        assert_eq!(b.egg.as_deref(), Some("my-pkg"));
        assert_eq!(
            b.named().unwrap(),
            "my-pkg @ git+https://github.com/o/My_Pkg.git@main"
        );
        assert!(b
            .hint()
            .contains("git+https://github.com/o/My_Pkg.git@<40-hex commit>"));
        // The user of an ssh URL is not a ref.
        let ssh = bare_reference("git+ssh://git@github.com/o/x.git").unwrap();
        assert_eq!(ssh.egg, None);
        assert!(
            ssh.hint()
                .contains("\"NAME @ git+ssh://git@github.com/o/x.git@<40-hex commit>\"")
                && ssh.hint().contains("with an https:// (git+https://) URL"),
            "{}",
            ssh.hint()
        );
        let commit = "a".repeat(40);
        let pinned = bare_reference(&format!("git+https://github.com/o/x.git@{commit}")).unwrap();
        assert!(
            !pinned.hint().contains("pin the commit"),
            "{}",
            pinned.hint()
        );
        for named in [
            "x @ git+https://github.com/o/x.git",
            "x==1.0",
            "-e .",
            "./local/pkg",
        ] {
            assert_eq!(bare_reference(named), None, "{named}");
        }
    }
}
