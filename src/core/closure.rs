//! The closure lock (pip side): what a resolution for the target depends on (its inputs and
//! their hash), the target uv resolves for (Python version and `--python-platform`), the
//! wheel tags it accepts, and reading uv's `pylock.toml` into closure entries (wheels only).
//! This module performs no I/O.

pub mod conda;
pub mod verify;
pub mod yanked;

use crate::core::lock::{ClosurePkg, Lock};
use crate::core::spec::Platform;
use crate::core::version::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The index the closure comes from when the spec names none.
pub const PYPI_SIMPLE: &str = "https://pypi.org/simple";

/// The uv release the README and CI install, and the tests run; another release works when it
/// takes the same flags (the lock records the one that resolved it).
pub const UV_VERSION: &str = "0.13.9";

/// How the README and CI install the pinned uv.
pub const UV_INSTALL: &str = "python3 -m pip install --user uv==0.13.9";

/// Codes of the closure lock, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::closure::*;
}

/// The hint of `CLOSURE_NEEDS_WHEEL`.
pub const NEEDS_WHEEL_HINT: &str = "a closure lock installs wheels only, and envbuild never builds a package on the locking machine to read its metadata: pin a release that has a wheel for the target, reference a wheel (`name @ https://.../name-1.0-py3-none-any.whl#sha256=...`), or set `[lock] closure = false` (pip then builds it in the image, unlocked)";

/// Exactly what a closure resolution depends on. Its canonical JSON's sha256 is the lock's
/// `closure_inputs`: equal inputs mean the closure on disk can be reused without the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inputs {
    /// The lock's pip requirements (torch pins, companions, extras), in install order.
    pub requirements: Vec<String>,
    pub index_url: String,
    pub extra_index_urls: Vec<String>,
    /// `3.13` (or `3.13.1` when the spec pins a patch release).
    pub python: String,
    /// `cp313`.
    pub abi: String,
    /// uv's `--python-platform`: `x86_64-manylinux_2_36` (the target's machine, and the newest
    /// manylinux uv knows that the target's glibc runs). uv takes the environment markers and
    /// the wheel tags from it and from `python`.
    pub python_platform: String,
}

impl Inputs {
    /// The inputs of a lock resolved for a target whose C library is `glibc`. `Err` (the
    /// reason) when the platform has no wheel tags envbuild knows.
    pub fn of(lock: &Lock, index_url: &str, glibc: &Version) -> Result<Inputs, String> {
        let machine = match lock.platform {
            Platform::Linux64 => "x86_64",
            Platform::LinuxAarch64 => "aarch64",
            Platform::Win64 => {
                return Err("a closure lock is supported for Linux targets only".into());
            }
        };
        let python = lock
            .packages
            .get("python")
            .cloned()
            .ok_or("the lock has no python")?;
        let py =
            Version::parse(&python).ok_or_else(|| format!("python `{python}` is not a version"))?;
        let minor = py.major_minor();
        let abi = format!("cp{}", minor.replace('.', ""));
        Ok(Inputs {
            requirements: lock.install.pip.clone(),
            index_url: index_url.to_string(),
            extra_index_urls: lock.install.pip_extra_index_urls.clone(),
            python,
            abi,
            python_platform: python_platform(glibc, machine)?,
        })
    }

    /// The lock's `closure_inputs`: sha256 of the canonical JSON.
    pub fn hash(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        crate::core::hash::sha256_hex(json.as_bytes())
    }

    /// The target's machine (`x86_64`, `aarch64`) and manylinux glibc minor (`36`).
    fn machine_and_glibc(&self) -> (&str, u64) {
        let (machine, rest) = self
            .python_platform
            .split_once("-manylinux_2_")
            .unwrap_or(("x86_64", "17"));
        (machine, rest.parse().unwrap_or(17))
    }

    /// The wheel tag of a stand-in for an installed distribution: the target's most preferred
    /// (`cp313-cp313-manylinux_2_36_x86_64`).
    pub fn stand_in_tag(&self) -> String {
        let (machine, glibc) = self.machine_and_glibc();
        format!("{a}-{a}-manylinux_2_{glibc}_{machine}", a = self.abi)
    }

    /// The `name @ git+...` requirements (a git reference cannot be locked by hash).
    pub fn git_references(&self) -> Vec<&str> {
        self.requirements
            .iter()
            .filter(|r| {
                r.split_once('@')
                    .is_some_and(|(_, url)| url.trim_start().starts_with("git+"))
            })
            .map(String::as_str)
            .collect()
    }
}

/// The glibc minors uv 0.13 takes in `--python-platform MACHINE-manylinux_2_N`.
const UV_MANYLINUX: &[u64] = &[17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40];

/// uv's `--python-platform` for a glibc `glibc` on `machine`: the newest manylinux uv knows at
/// or below the target's glibc (2.29 and 2.30 take 2.28, newer than 2.40 takes 2.40: a wheel
/// for the exact glibc in between is then passed over for an older one, never one the target
/// cannot run). Older than 2.17 (manylinux2014) is refused.
pub fn python_platform(glibc: &Version, machine: &str) -> Result<String, String> {
    let minor =
        glibc_minor(glibc).ok_or_else(|| format!("glibc `{glibc}` is not a glibc 2.x version"))?;
    let n = UV_MANYLINUX
        .iter()
        .rev()
        .find(|n| **n <= minor)
        .ok_or_else(|| {
            format!("glibc {glibc} is older than manylinux2014 (2.17), the oldest target a closure is resolved for")
        })?;
    Ok(format!("{machine}-manylinux_2_{n}"))
}

/// The platform tags a Linux `machine` with glibc 2.`glibc` installs, most preferred first:
/// `manylinux_2_N` from the target's glibc down, the legacy aliases, `linux_MACHINE`.
fn platforms(glibc: u64, machine: &str) -> Vec<String> {
    // aarch64 wheels start at manylinux2014 (glibc 2.17); x86_64 ones at manylinux1 (2.5).
    let floor = if machine == "x86_64" { 5 } else { 17 };
    let mut plats = Vec::new();
    for n in (floor..=glibc.max(floor)).rev() {
        plats.push(format!("manylinux_2_{n}_{machine}"));
        let legacy = match n {
            17 => Some("manylinux2014"),
            12 => Some("manylinux2010"),
            5 => Some("manylinux1"),
            _ => None,
        };
        if let Some(l) = legacy {
            plats.push(format!("{l}_{machine}"));
        }
    }
    plats.push(format!("linux_{machine}"));
    plats
}

/// [`platforms`] for a glibc version (`2.28`); a version that is not `2.N` counts as 2.17.
pub fn platform_tags(glibc: &Version, machine: &str) -> Vec<String> {
    platforms(glibc_minor(glibc).unwrap_or(17), machine)
}

/// N of a glibc version `2.N`; `None` for anything else.
fn glibc_minor(glibc: &Version) -> Option<u64> {
    let parts: Vec<u64> = glibc
        .to_string()
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    match parts.as_slice() {
        [2, minor, ..] => Some(*minor),
        _ => None,
    }
}

/// The wheel tags a CPython `python` on glibc Linux `machine` accepts, most preferred first,
/// in the order of `packaging.tags.sys_tags` (what pip and uv use): `cpXY-cpXY`, `cpXY-abi3`,
/// `cpXY-none`, older `cp3W-abi3` for each platform; then `pyXY`/`py3` with `none` for each
/// platform; then `cpXY-none-any` and the `py*-none-any` tags. Platforms run from
/// `manylinux_2_{glibc}` down to the machine's oldest (the legacy aliases beside theirs), then
/// `linux_MACHINE`.
pub fn supported_tags(python: &str, machine: &str, glibc: u64) -> Vec<String> {
    let minor: u64 = python
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let plats = platforms(glibc, machine);
    let cp = format!("cp3{minor}");
    let mut tags = Vec::new();
    for abi in [cp.as_str(), "abi3", "none"] {
        tags.extend(plats.iter().map(|p| format!("{cp}-{abi}-{p}")));
    }
    for older in (2..minor).rev() {
        tags.extend(plats.iter().map(|p| format!("cp3{older}-abi3-{p}")));
    }
    let mut py = vec![format!("py3{minor}"), "py3".to_string()];
    py.extend((0..minor).rev().map(|m| format!("py3{m}")));
    for interp in &py {
        tags.extend(plats.iter().map(|p| format!("{interp}-none-{p}")));
    }
    tags.push(format!("{cp}-none-any"));
    tags.extend(py.iter().map(|i| format!("{i}-none-any")));
    tags
}

/// The rank of a wheel file for the target (lower is preferred): the best of the tags its file
/// name expands to (`py2.py3-none-any`, `manylinux_2_17_x86_64.manylinux2014_x86_64`), `None`
/// when the target takes none of them.
fn wheel_rank(file: &str, supported: &[String]) -> Option<usize> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.rsplitn(4, '-').collect();
    let [plat, abi, py, _] = parts.as_slice() else {
        return None;
    };
    let mut best: Option<usize> = None;
    for p in py.split('.') {
        for a in abi.split('.') {
            for pl in plat.split('.') {
                let tag = format!("{p}-{a}-{pl}");
                if let Some(i) = supported.iter().position(|s| *s == tag) {
                    best = Some(best.map_or(i, |b| b.min(i)));
                }
            }
        }
    }
    best
}

/// `--pip-mirror URL` (`ENVBUILD_PIP_MIRROR`): where pip installs the lock's pip part from
/// instead of its main index, a mirror that holds the same files (a closure's sha256s check
/// that it does). An `https://`, `http://` or `file:///` URL, without credentials (they would be
/// written into the rendered files and the image's layers) and without characters a rendered
/// line could not carry; the trailing `/` is dropped.
pub fn pip_mirror(url: &str) -> Result<String, String> {
    mirror_url(
        url,
        "pip",
        "a pip mirror is an https:// (or http://, file:///) URL of a simple index, e.g. https://mirror.example/pypi/simple",
        "give pip its credentials another way (a netrc, a keyring)",
    )
}

/// `--conda-mirror URL` (`ENVBUILD_CONDA_MIRROR`): where the image installs the lock's conda
/// packages from, a mirror of their channels in the layout of a channel alias (`URL/CHANNEL/
/// SUBDIR/FILE`, as conda's `channel_alias`); the lock's md5s check that it holds the same
/// files. Checked as [`pip_mirror`] is.
pub fn conda_mirror(url: &str) -> Result<String, String> {
    mirror_url(
        url,
        "conda",
        "a conda mirror is an https:// (or http://, file:///) URL under which the channels are, e.g. https://mirror.example/conda (for https://mirror.example/conda/conda-forge)",
        "give conda its credentials another way (a .netrc, conda's token settings)",
    )
}

/// A mirror's URL, checked: `https://`, `http://` or `file:///`, no credentials, only
/// characters a rendered line carries; the trailing `/` dropped.
fn mirror_url(url: &str, tool: &str, form: &str, credentials: &str) -> Result<String, String> {
    let u = url.trim().trim_end_matches('/');
    let rest = ["https://", "http://", "file:///"]
        .iter()
        .find_map(|p| u.strip_prefix(p));
    let Some(rest) = rest.filter(|r| !r.is_empty()) else {
        return Err(form.into());
    };
    if rest
        .split('/')
        .next()
        .is_some_and(|host| host.contains('@'))
    {
        return Err(format!("the {tool} mirror's URL carries credentials, which would be written into the rendered files and the image: {credentials}"));
    }
    if let Some(trick) = crate::core::url::path_trick(u) {
        return Err(format!(
            "the {tool} mirror `{}` has {trick}, which would make its files' URLs name another \
             folder than the mirror's: write the mirror's URL as its server names it",
            crate::core::diag::printable(u)
        ));
    }
    if !u
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-:/~%+=".contains(&b))
    {
        return Err(format!(
            "the {tool} mirror `{}` has characters a rendered line cannot carry",
            crate::core::diag::printable(u)
        ));
    }
    Ok(u.to_string())
}

/// The build-time mirrors of `image` and `render` (`--pip-mirror`, `--conda-mirror`), each
/// checked already. The lock is the same with or without them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors {
    pub pip: Option<String>,
    pub conda: Option<String>,
}

impl Mirrors {
    /// Neither mirror is set.
    pub fn is_none(&self) -> bool {
        self.pip.is_none() && self.conda.is_none()
    }
}

/// What pip said when `--require-hashes` refused a file (`THESE PACKAGES DO NOT MATCH THE
/// HASHES FROM THE REQUIREMENTS FILE`): each package it named, as `name==version from URL`.
/// Empty when the output holds no such refusal.
pub fn hash_refusals(output: &str) -> Vec<String> {
    let Some(at) = output.find("DO NOT MATCH THE HASHES") else {
        return Vec::new();
    };
    output[at..]
        .lines()
        .skip(1)
        .filter_map(|l| {
            // A build log prefixes each line (`#12 3.3 `): the words around ` from ` count.
            let (left, right) = l.trim().trim_end_matches(':').split_once(" from ")?;
            let req = left.split_whitespace().last()?;
            let url = right.split_whitespace().next()?.split('#').next()?;
            req.contains("==").then(|| format!("{req} from {url}"))
        })
        .collect()
}

/// The diagnosis of a build through `--pip-mirror` that pip's hash check stopped: the mirror,
/// not the lock, is what differs. `None` when `output` holds no hash refusal.
pub fn mirror_mismatch(output: &str, mirror: &str) -> Option<crate::core::diag::Diagnostic> {
    let refused = hash_refusals(output);
    (!refused.is_empty()).then(|| {
        crate::core::diag::Diagnostic::error(
            codes::MIRROR_HASH_MISMATCH,
            format!(
                "the pip mirror `{mirror}` served files whose sha256 is not the lock's: {}",
                refused.join("; ")
            ),
        )
        .with_hint(
            "the lock's hashes are the files' identity: the mirror holds other bytes under these \
             names (a rebuilt or tampered file). Fix the mirror, or build without --pip-mirror",
        )
    })
}

/// The diagnosis of a build through `--conda-mirror` that conda's checksum check stopped
/// (`ChecksumMismatchError: Conda detected a mismatch between the expected content and
/// downloaded content for url '...'`): each file it named. `None` when `output` holds no
/// such refusal.
pub fn conda_mirror_mismatch(output: &str, mirror: &str) -> Option<crate::core::diag::Diagnostic> {
    let marker = "mismatch between the expected content and downloaded content";
    if !output.contains(marker) {
        return None;
    }
    let mut urls: Vec<&str> = output
        .split("for url '")
        .skip(1)
        .filter_map(|rest| rest.split('\'').next())
        .filter(|u| !u.is_empty() && !u.contains(char::is_whitespace))
        .collect();
    urls.dedup();
    Some(
        crate::core::diag::Diagnostic::error(
            codes::MIRROR_HASH_MISMATCH,
            format!(
                "the conda mirror `{mirror}` served files whose md5 is not the lock's: {}",
                if urls.is_empty() {
                    "(conda named no URL)".to_string()
                } else {
                    urls.join("; ")
                }
            ),
        )
        .with_hint(
            "the lock's hashes are the files' identity: the mirror holds other bytes under these \
             names (a rebuilt or tampered package). Fix the mirror, or build without --conda-mirror",
        ),
    )
}

/// The values of an entry, for `core::rules::closure_entry`.
pub fn values(p: &ClosurePkg) -> crate::core::rules::ClosureValues<'_> {
    crate::core::rules::ClosureValues {
        name: &p.name,
        version: &p.version,
        kind: &p.kind,
        url: &p.url,
        index: &p.index,
        sha256: &p.sha256,
        build: p.build.as_deref(),
        subdir: p.subdir.as_deref(),
        md5: p.md5.as_deref(),
    }
}

/// PEP 503 name normalisation: lowercase, runs of `-_.` become one `-`.
pub fn canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// uv's `pylock.toml` (PEP 751), the parts envbuild reads.
#[derive(Deserialize)]
struct Pylock {
    #[serde(rename = "lock-version")]
    lock_version: String,
    #[serde(default)]
    packages: Vec<PylockPkg>,
}

#[derive(Deserialize)]
struct PylockPkg {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    wheels: Vec<PylockFile>,
    #[serde(default)]
    sdist: Option<PylockFile>,
    /// A direct reference to a file (a wheel or an sdist).
    #[serde(default)]
    archive: Option<PylockFile>,
    #[serde(default)]
    vcs: Option<toml::Value>,
    #[serde(default)]
    directory: Option<toml::Value>,
}

#[derive(Deserialize)]
struct PylockFile {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
}

impl PylockFile {
    /// The file's URL (`path` as a `file://` URL when absolute).
    fn location(&self) -> Option<String> {
        self.url.clone().or_else(|| {
            self.path
                .as_deref()
                .filter(|p| p.starts_with('/'))
                .map(|p| format!("file://{p}"))
        })
    }

    fn file_name(&self) -> Option<String> {
        let loc = self.location()?;
        let name = loc.split(['#', '?']).next()?.rsplit('/').next()?;
        Some(name.replace("%2B", "+").replace("%2b", "+"))
    }
}

/// Why a pylock could not become a closure: the package that has no wheel for the target, or
/// any other problem with uv's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PylockError {
    /// `CLOSURE_NEEDS_WHEEL`: the message names the package and what it has instead.
    NeedsWheel(String),
    /// `CLOSURE_RESOLVE_FAILED`.
    Unusable(String),
}

/// The closure from uv's `pylock.toml` for the target, sorted by name: for each package the
/// wheel the target prefers among those uv lists, with its URL and sha256 (`index` is the
/// configured index that served it: `verify::serving_index`). A package with only a source distribution, a direct reference to one, or a git or
/// directory source is `NeedsWheel`. `installed` (canonical names) are stand-ins for what is
/// installed already, left out.
pub fn from_pylock(
    text: &str,
    inputs: &Inputs,
    installed: &[String],
) -> Result<Vec<ClosurePkg>, PylockError> {
    let lock: Pylock = toml::from_str(text)
        .map_err(|e| PylockError::Unusable(format!("uv's pylock.toml does not parse: {e}")))?;
    if lock.lock_version.split('.').next() != Some("1") {
        return Err(PylockError::Unusable(format!(
            "uv's pylock.toml is lock-version {}, envbuild reads 1.x",
            lock.lock_version
        )));
    }
    let (machine, glibc) = inputs.machine_and_glibc();
    let supported = supported_tags(&inputs.python, machine, glibc);
    let mut out = Vec::new();
    for p in lock.packages {
        let name = canonical_name(&p.name);
        if installed.contains(&name) {
            continue;
        }
        out.push(one_package(p, name, inputs, &supported)?);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = out.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(PylockError::Unusable(format!(
            "uv's pylock.toml installs `{}` twice",
            w[0].name
        )));
    }
    Ok(out)
}

/// One pylock package as a closure entry: its best wheel for the target.
fn one_package(
    p: PylockPkg,
    name: String,
    inputs: &Inputs,
    supported: &[String],
) -> Result<ClosurePkg, PylockError> {
    let version = p.version.clone().unwrap_or_default();
    let shown = if version.is_empty() {
        format!("`{name}`")
    } else {
        format!("`{name}` {version}")
    };
    if p.vcs.is_some() || p.directory.is_some() {
        return Err(PylockError::NeedsWheel(format!(
            "{shown} comes from a git repository or a directory, which has no wheel to lock"
        )));
    }
    let mut files: Vec<&PylockFile> = p.wheels.iter().collect();
    files.extend(p.archive.iter());
    let best = files
        .into_iter()
        .filter_map(|f| Some((wheel_rank(&f.file_name()?, supported)?, f)))
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, f)| f);
    let Some(file) = best else {
        let what = match (&p.archive, &p.sdist) {
            (Some(a), _) => format!(
                "is a direct reference to a source distribution (`{}`)",
                a.location().unwrap_or_default()
            ),
            (None, Some(_)) => "has only a source distribution for the target".to_string(),
            (None, None) => "has no file for the target".to_string(),
        };
        return Err(PylockError::NeedsWheel(format!(
            "{shown} {what}: no wheel for Python {} on {}",
            inputs.python, inputs.python_platform
        )));
    };
    let url = file.location().unwrap_or_default();
    let sha256 = file
        .hashes
        .get("sha256")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            PylockError::Unusable(format!("{shown} has no sha256 in uv's pylock.toml ({url})"))
        })?
        .to_ascii_lowercase();
    let indexes: Vec<&str> = inputs
        .extra_index_urls
        .iter()
        .chain([&inputs.index_url])
        .map(String::as_str)
        .collect();
    // pylock.toml records the file's URL, not the index it came from: the index that could
    // serve it. None could: the main index, and the entry's check names where the file is.
    let index = verify::serving_index(&url, &indexes)
        .unwrap_or(&inputs.index_url)
        .to_string();
    let pkg = ClosurePkg {
        name,
        version,
        kind: "pip".to_string(),
        url,
        index,
        sha256,
        md5: None,
        build: None,
        subdir: None,
        yanked: None,
    };
    // Validated where it enters, with the rules `render` checks a lock with.
    if let Some((field, rule)) = crate::core::rules::closure_entry(values(&pkg)) {
        return Err(PylockError::Unusable(conda::entered_badly(
            &pkg,
            field,
            rule,
            "the resolver's pylock.toml",
        )));
    }
    Ok(pkg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn the_python_platform_is_the_newest_manylinux_the_glibc_runs() {
        let p = |g: &str, m: &str| python_platform(&v(g), m);
        assert_eq!(p("2.36", "x86_64").unwrap(), "x86_64-manylinux_2_36");
        assert_eq!(p("2.28", "aarch64").unwrap(), "aarch64-manylinux_2_28");
        // uv has no 2.29/2.30 target: the older one, never a newer one.
        assert_eq!(p("2.30", "x86_64").unwrap(), "x86_64-manylinux_2_28");
        assert_eq!(p("2.41", "x86_64").unwrap(), "x86_64-manylinux_2_40");
        assert_eq!(p("2.17", "x86_64").unwrap(), "x86_64-manylinux_2_17");
        assert!(p("2.12", "x86_64")
            .unwrap_err()
            .contains("older than manylinux2014"));
        assert!(p("3.1", "x86_64").is_err());
    }

    #[test]
    fn tags_follow_packagings_order() {
        let t = supported_tags("3.13", "x86_64", 28);
        assert_eq!(t[0], "cp313-cp313-manylinux_2_28_x86_64");
        let pos = |tag: &str| t.iter().position(|x| x == tag).unwrap();
        assert!(pos("cp313-cp313-linux_x86_64") < pos("cp313-abi3-manylinux_2_28_x86_64"));
        assert!(pos("cp313-abi3-manylinux_2_17_x86_64") < pos("cp312-abi3-manylinux_2_28_x86_64"));
        assert!(pos("cp38-abi3-manylinux1_x86_64") < pos("py313-none-manylinux_2_28_x86_64"));
        assert!(pos("py3-none-manylinux2014_x86_64") < pos("py3-none-any"));
        assert!(!t.iter().any(|x| x.contains("2_29")));
        assert_eq!(t.last().unwrap(), "py30-none-any");
        let a = supported_tags("3.11", "aarch64", 36);
        assert!(!a
            .iter()
            .any(|x| x.contains("2_16") || x.contains("manylinux1")));
    }

    #[test]
    fn the_preferred_wheel_wins() {
        let t = supported_tags("3.11", "x86_64", 36);
        let r = |f: &str| wheel_rank(f, &t);
        let newer = r("numpy-2.3.4-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl");
        let older = r("numpy-2.3.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
        assert!(newer.unwrap() < older.unwrap());
        assert!(r("six-1.17.0-py2.py3-none-any.whl").is_some());
        assert_eq!(r("numpy-2.3.4-cp311-cp311-manylinux_2_39_x86_64.whl"), None);
        assert_eq!(r("numpy-2.3.4-cp312-cp312-manylinux_2_17_x86_64.whl"), None);
        assert_eq!(r("numpy-2.3.4.tar.gz"), None);
        // A build tag does not shift the fields.
        assert!(r("x-1.0-1build-cp311-cp311-linux_x86_64.whl").is_some());
    }

    #[test]
    fn a_pip_mirror_is_a_plain_url_without_credentials() {
        assert_eq!(
            pip_mirror("https://mirror.example/pypi/simple/").unwrap(),
            "https://mirror.example/pypi/simple"
        );
        assert!(pip_mirror("http://127.0.0.1:8080/simple").is_ok());
        assert!(pip_mirror("file:///srv/mirror/simple").is_ok());
        for bad in [
            "ftp://x/simple",
            "mirror.example/simple",
            "https://",
            "https://a b/simple",
        ] {
            assert!(pip_mirror(bad).is_err(), "{bad}");
        }
        let e = pip_mirror("https://user:s3cret@mirror.example/simple").unwrap_err();
        assert!(e.contains("credentials") && !e.contains("s3cret"), "{e}");
        assert!(pip_mirror("https://m.example/simple\nRUN x").is_err());
    }

    #[test]
    fn a_conda_mirror_is_checked_as_a_pip_mirror_is() {
        assert_eq!(
            conda_mirror("https://mirror.example/conda/").unwrap(),
            "https://mirror.example/conda"
        );
        assert!(conda_mirror("file:///srv/conda").is_ok());
        for bad in ["conda.example", "https://", "https://m.example/c\nRUN x"] {
            assert!(conda_mirror(bad).is_err(), "{bad}");
        }
        let e = conda_mirror("https://u:s3cret@m.example/conda").unwrap_err();
        assert!(e.contains("conda mirror") && !e.contains("s3cret"), "{e}");
    }

    /// conda's ChecksumMismatchError, as conda prints it in a build log (one per file).
    #[test]
    fn condas_checksum_refusal_names_each_file_and_the_mirror() {
        let url =
            "http://127.0.0.1:9/conda/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.tar.bz2";
        let out = format!("#9 12.1 \n#9 12.1 ChecksumMismatchError: Conda detected a mismatch between the expected content and downloaded content\n#9 12.1 for url '{url}'.\n#9 12.1   download saved to: /root/.cache/conda-pkgs/numpy-1.26.4-py311h64a7726_0.tar.bz2\n#9 12.1   expected md5: {}\n#9 12.1   actual md5: {}\n", "a".repeat(32), "b".repeat(32));
        let d = conda_mirror_mismatch(&out, "http://127.0.0.1:9/conda").unwrap();
        assert_eq!(d.code, codes::MIRROR_HASH_MISMATCH);
        assert!(
            d.message
                .contains("conda mirror `http://127.0.0.1:9/conda`")
                && d.message.contains(url),
            "{}",
            d.message
        );
        assert!(d
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("--conda-mirror"));
        assert!(conda_mirror_mismatch("PackagesNotFoundError: x", "m").is_none());
    }

    #[test]
    fn pips_hash_refusal_names_each_package_and_the_mirror() {
        let out = "#12 3.2 Collecting numpy-like==1.2\n#12 3.3 ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.\n#12 3.3     numpy-like==1.2 from http://127.0.0.1:9/files/numpy_like-1.2-py3-none-any.whl#sha256=bbbb (from -r /tmp/envbuild/requirements.txt (line 3)):\n#12 3.3         Expected sha256 aaaa\n#12 3.3              Got        bbbb\n";
        assert_eq!(
            hash_refusals(out),
            ["numpy-like==1.2 from http://127.0.0.1:9/files/numpy_like-1.2-py3-none-any.whl"]
        );
        let d = mirror_mismatch(out, "http://127.0.0.1:9/simple").unwrap();
        assert_eq!(d.code, codes::MIRROR_HASH_MISMATCH);
        assert!(
            d.message.contains("mirror `http://127.0.0.1:9/simple`")
                && d.message.contains("numpy-like==1.2 from"),
            "{}",
            d.message
        );
        assert!(mirror_mismatch("ERROR: No matching distribution", "x").is_none());
    }

    #[test]
    fn names_are_canonical() {
        assert_eq!(canonical_name("Nvidia_CUBLAS.cu12"), "nvidia-cublas-cu12");
        assert_eq!(canonical_name("typing__extensions"), "typing-extensions");
    }

    fn inputs() -> Inputs {
        Inputs {
            requirements: vec!["torch==2.14.1".into()],
            index_url: "https://pypi.org/simple".into(),
            extra_index_urls: vec!["https://download.pytorch.org/whl/cu128".into()],
            python: "3.13".into(),
            abi: "cp313".into(),
            python_platform: "x86_64-manylinux_2_36".into(),
        }
    }

    fn h(c: char) -> String {
        c.to_string().repeat(64)
    }

    #[test]
    fn a_pylock_becomes_a_sorted_closure_of_the_preferred_wheels() {
        let text = format!(
            r#"lock-version = "1.0"
created-by = "uv"
[[packages]]
name = "Torch"
version = "2.9.1+cu128"
wheels = [{{ url = "https://download.pytorch.org/whl/cu128/torch-2.9.1%2Bcu128-cp313-cp313-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{a}" }} }}]
[[packages]]
name = "numpy"
version = "2.3.4"
sdist = {{ url = "https://files.pythonhosted.org/numpy-2.3.4.tar.gz", hashes = {{ sha256 = "{b}" }} }}
wheels = [
  {{ url = "https://files.pythonhosted.org/numpy-2.3.4-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", hashes = {{ sha256 = "{b}" }} }},
  {{ url = "https://files.pythonhosted.org/numpy-2.3.4-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{c}" }} }},
]
[[packages]]
name = "numpy-like"
version = "1.0.5"
archive = {{ path = "/tmp/x/installed/numpy_like-1.0.5-0envbuild-cp313-cp313-manylinux_2_36_x86_64.whl", hashes = {{ sha256 = "{a}" }} }}
"#,
            a = h('a'),
            b = h('b'),
            c = h('C')
        );
        let c = from_pylock(&text, &inputs(), &["numpy-like".into()]).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].name.as_str(), c[0].sha256.clone()), ("numpy", h('c')));
        assert!(c[0].url.contains("manylinux_2_28"));
        assert_eq!(c[0].index, "https://pypi.org/simple");
        assert_eq!(c[1].name, "torch");
        assert_eq!(c[1].index, "https://download.pytorch.org/whl/cu128");
    }

    #[test]
    fn what_has_no_wheel_is_refused_by_name() {
        let sdist_only = format!(
            "lock-version = \"1.0\"\n[[packages]]\nname = \"antlr4-python3-runtime\"\nversion = \"4.9.3\"\n\
             sdist = {{ url = \"https://files.pythonhosted.org/antlr4-python3-runtime-4.9.3.tar.gz\", hashes = {{ sha256 = \"{}\" }} }}\n",
            h('a')
        );
        let e = from_pylock(&sdist_only, &inputs(), &[]).unwrap_err();
        let PylockError::NeedsWheel(m) = e else {
            panic!("{e:?}")
        };
        assert!(
            m.contains("`antlr4-python3-runtime` 4.9.3 has only a source distribution"),
            "{m}"
        );
        let direct = format!(
            "lock-version = \"1.0\"\n[[packages]]\nname = \"stat\"\nversion = \"1.0\"\n\
             archive = {{ url = \"https://h.example/stat-1.0.tar.gz\", hashes = {{ sha256 = \"{}\" }} }}\n",
            h('a')
        );
        let PylockError::NeedsWheel(m) = from_pylock(&direct, &inputs(), &[]).unwrap_err() else {
            panic!()
        };
        assert!(
            m.contains(
                "direct reference to a source distribution (`https://h.example/stat-1.0.tar.gz`)"
            ),
            "{m}"
        );
        let git = "lock-version = \"1.0\"\n[[packages]]\nname = \"x\"\nvcs = { type = \"git\", url = \"https://g.example/x\", commit-id = \"abc\" }\n";
        assert!(matches!(
            from_pylock(git, &inputs(), &[]),
            Err(PylockError::NeedsWheel(_))
        ));
        let no_hash = "lock-version = \"1.0\"\n[[packages]]\nname = \"six\"\nversion = \"1.17.0\"\nwheels = [{ url = \"https://f.example/six-1.17.0-py2.py3-none-any.whl\" }]\n";
        assert!(
            matches!(from_pylock(no_hash, &inputs(), &[]), Err(PylockError::Unusable(m)) if m.contains("no sha256"))
        );
        assert!(matches!(
            from_pylock("lock-version = \"2.0\"", &inputs(), &[]),
            Err(PylockError::Unusable(_))
        ));
        assert!(from_pylock("{", &inputs(), &[]).is_err());
    }

    #[test]
    fn git_references_are_found_and_stand_ins_take_the_preferred_tag() {
        let mut i = inputs();
        i.requirements
            .push("x @ git+https://g.example/x.git@0123".into());
        i.requirements
            .push("y @ https://h.example/y-1.0-py3-none-any.whl#sha256=00".into());
        assert_eq!(i.git_references(), ["x @ git+https://g.example/x.git@0123"]);
        assert_eq!(i.stand_in_tag(), "cp313-cp313-manylinux_2_36_x86_64");
    }

    #[test]
    fn inputs_hash_changes_with_what_resolution_depends_on() {
        let a = inputs();
        let mut b = inputs();
        assert_eq!(a.hash(), b.hash());
        b.python_platform = "x86_64-manylinux_2_28".into();
        assert_ne!(a.hash(), b.hash());
        let mut c = inputs();
        c.requirements.push("einops>=0.8".into());
        assert_ne!(a.hash(), c.hash());
    }
}
