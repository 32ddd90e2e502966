//! A closure lock verifies itself before anything trusts it: its integrity hash
//! (`closure_sha256`, over the canonical closure entries) and every entry against its own index
//! or channel: the file's URL under it (no other host, no `file://` escape, no `..`), the file
//! name matching the entry's name, version, build and (for a wheel) the target's tags, and the
//! hash formats (sha256 64 hex; conda's md5 32 hex). `lock --locked`, `render` and `image`
//! check a lock with [`verify`]; `lock` checks what a resolver gave the same way before it
//! writes. This module performs no I/O.

use super::{canonical_name, platform_tags};
use crate::core::diag::Diagnostic;
use crate::core::lock::{ClosurePkg, Lock};
use crate::core::url;
use crate::core::version::Version;

/// The codes of a lock's self-check, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::lock::{CLOSURE_ENTRY_INVALID, LOCK_TAMPERED};
}

/// The hint of a lock that fails its own checks.
const RELOCK: &str = "a lock is written by `envbuild lock`, never by hand: re-create it with \
                      `envbuild lock SPEC` (from a trusted index and channels) and review the diff";

/// The integrity hash of a closure: sha256 of its entries' canonical JSON, in the lock's order.
pub fn closure_sha256(closure: &[ClosurePkg]) -> String {
    let json = serde_json::to_string(closure).unwrap_or_default();
    crate::core::hash::sha256_hex(json.as_bytes())
}

/// Give `lock` the integrity hash of its closure (none without a closure).
pub fn seal(lock: &mut Lock) {
    lock.closure_sha256 = (!lock.closure.is_empty()).then(|| closure_sha256(&lock.closure));
}

/// The hint of a closure entry a resolver just gave that fails the checks: no one edited
/// anything, the index or channel served it so.
const SERVED: &str = "the lock was not written: the index or channel served this file so \
                      (envbuild checks what a resolver gives as it checks a lock). Use an index \
                      that serves its files from its own host, or a channel that keeps them in \
                      its own folders";

/// Every problem of `lock`'s closure: the integrity hash first, then each entry's own checks,
/// each naming its entry. Empty for a lock without a closure and for a sound one.
pub fn verify(lock: &Lock) -> Vec<Diagnostic> {
    verify_as(lock, false)
}

/// [`verify`] of a lock just resolved, before it is written: the same checks, worded by what
/// was found (what the index or channel served), not as a lock edited by hand.
pub fn verify_resolved(lock: &Lock) -> Vec<Diagnostic> {
    verify_as(lock, true)
}

fn verify_as(lock: &Lock, resolved: bool) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    match (&lock.closure_sha256, lock.closure.is_empty()) {
        (None, true) => {}
        (Some(_), true) => out.push(tampered("names a `closure_sha256` but has no closure")),
        (None, false) => out.push(tampered(
            "has a closure but no `closure_sha256`, the seal that vouches for its hashes: it was \
             removed, and any entry may have been edited with it",
        )),
        (Some(h), false) if *h != closure_sha256(&lock.closure) => out.push(tampered(
            "has a closure that does not match its `closure_sha256`: an entry was changed, \
             added or removed by hand",
        )),
        (Some(_), false) => {}
    }
    for p in &lock.closure {
        if let Some(why) = entry_problem(lock, p) {
            let whose = if resolved { "the resolver gave " } else { "" };
            out.push(
                Diagnostic::error(
                    codes::CLOSURE_ENTRY_INVALID,
                    format!(
                        "{whose}closure entry `{}` ({} {}): {why}",
                        crate::core::diag::printable(&p.name),
                        crate::core::diag::printable(&p.kind),
                        crate::core::diag::printable(&p.version)
                    ),
                )
                .with_hint(if resolved { SERVED } else { RELOCK }),
            );
        }
    }
    // A fleet's other platforms verify themselves the same way, each naming its platform.
    for f in &lock.fleet {
        out.extend(verify_as(f, resolved).into_iter().map(|mut d| {
            d.message = format!("{}: {}", f.platform.as_str(), d.message);
            d
        }));
    }
    out
}

fn tampered(what: &str) -> Diagnostic {
    Diagnostic::error(codes::LOCK_TAMPERED, format!("the lock {what}")).with_hint(RELOCK)
}

/// Why entry `p` of `lock` cannot be trusted, if it cannot.
fn entry_problem(lock: &Lock, p: &ClosurePkg) -> Option<String> {
    if let Some((field, rule)) = crate::core::rules::closure_entry(super::values(p)) {
        return Some(format!("its `{field}` is not {rule}"));
    }
    // An index's yank reason, as `core::closure::yanked` records it: a pip entry's, one
    // printable line, bounded.
    if let Some(y) = &p.yanked {
        if p.kind != "pip" || y.len() > 200 || *y != crate::core::diag::printable(y) {
            return Some(
                "its `yanked` is not an index's reason (pip only, one printable line of \
                         at most 200 bytes)"
                    .into(),
            );
        }
    }
    for (field, u) in [("url", &p.url), ("index", &p.index)] {
        if url::has_userinfo(u) || url::conda_token(u).is_some() {
            return Some(format!("its `{field}` carries credentials"));
        }
        if !url::no_dot_segments(u) {
            return Some(format!("its `{field}` `{u}` has a `..` or `.` segment"));
        }
    }
    match p.kind.as_str() {
        "conda" => conda_problem(lock, p),
        _ => pip_problem(lock, p),
    }
}

/// A conda entry: its channel is one of the lock's, its URL is exactly
/// `CHANNEL/SUBDIR/NAME-VERSION-BUILD(.conda|.tar.bz2)`, its subdir the target's or `noarch`,
/// and it has an md5 (the explicit file's hash).
fn conda_problem(lock: &Lock, p: &ClosurePkg) -> Option<String> {
    let index = p.index.trim_end_matches('/');
    let named = lock
        .install
        .conda
        .iter()
        .filter_map(|s| super::conda::split_channel(s).0);
    let ours = lock
        .channels
        .iter()
        .map(String::as_str)
        .chain(named)
        .any(|c| {
            if c.contains("://") {
                c.trim_end_matches('/') == index
            } else {
                index.ends_with(&format!("/{c}")) && index.len() > c.len() + 1
            }
        });
    if !ours {
        return Some(format!(
            "its channel `{index}` is none of the lock's channels"
        ));
    }
    let sub = p.subdir.as_deref().unwrap_or_default();
    let target = super::conda::subdir(lock.platform).unwrap_or_default();
    if sub != target && sub != "noarch" {
        return Some(format!(
            "its subdir `{sub}` is neither `{target}` nor `noarch`"
        ));
    }
    if p.md5.is_none() {
        return Some("it has no md5".into());
    }
    let build = p.build.as_deref().unwrap_or_default();
    let stem = format!("{index}/{sub}/{}-{}-{build}", p.name, p.version);
    if [".conda", ".tar.bz2"]
        .iter()
        .any(|ext| p.url == format!("{stem}{ext}"))
    {
        None
    } else {
        Some(format!(
            "its file `{}` is not `{stem}.conda` (or `.tar.bz2`): it leaves its channel or is \
             another package",
            p.url
        ))
    }
}

/// A pip entry: a wheel, on its index's host (PyPI's files on files.pythonhosted.org; a
/// `file://` index's under the index's folder) or the lock's own direct reference, whose file
/// name gives the entry's name and version and tags the target takes.
fn pip_problem(lock: &Lock, p: &ClosurePkg) -> Option<String> {
    let file_url = p.url.split('#').next().unwrap_or_default();
    let direct = lock.install.pip.iter().any(|r| {
        r.split_once(" @ ").is_some_and(|(n, u)| {
            canonical_name(n.trim()) == p.name && u.split('#').next() == Some(file_url)
        })
    });
    if !direct && !under_index(file_url, &p.index) {
        let place = if p.index.starts_with("file://") {
            "outside the folder of"
        } else {
            "on another host than"
        };
        return Some(format!(
            "its file `{file_url}` is {place} its index `{}`",
            p.index
        ));
    }
    let name = file_url.rsplit('/').next().unwrap_or_default();
    let Some(stem) = name.strip_suffix(".whl") else {
        return Some(format!("its file `{name}` is not a wheel"));
    };
    let decoded = stem.replace("%2B", "+").replace("%2b", "+");
    let parts: Vec<&str> = decoded.split('-').collect();
    if !(5..=6).contains(&parts.len()) {
        return Some(format!("its file `{name}` is not a wheel file name"));
    }
    let (dist, version) = (parts[0], parts[1]);
    let (py, abi, plat) = (
        parts[parts.len() - 3],
        parts[parts.len() - 2],
        parts[parts.len() - 1],
    );
    if canonical_name(dist) != p.name {
        return Some(format!(
            "its file `{name}` is a wheel of `{dist}`, not `{}`",
            p.name
        ));
    }
    if !same_version(version, &p.version) {
        return Some(format!(
            "its file `{name}` is version {version}, not {}",
            p.version
        ));
    }
    tags_problem(lock, name, py, abi, plat)
}

/// The index of `indexes` that served the file at `file_url`: of those it could come from
/// ([`under_index`]: the same host, or under a `file://` index's parent folder), the one whose
/// URL shares the longest path with the file's (two GitLab projects on one host), the first
/// on a tie. An index serves its files where it likes on its own host (GitLab under
/// `.../pypi/files/`, devpi under `/root/pypi/+f/`, Artifactory under `/artifactory/`), so
/// the file's path is no test of which index it is.
pub fn serving_index<'a>(file_url: &str, indexes: &[&'a str]) -> Option<&'a str> {
    let shared = |i: &str| {
        file_url
            .bytes()
            .zip(i.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let mut best: Option<(&str, usize)> = None;
    for i in indexes.iter().filter(|i| under_index(file_url, i)) {
        let n = shared(i);
        if best.is_none_or(|(_, b)| n > b) {
            best = Some((i, n));
        }
    }
    best.map(|(i, _)| i)
}

/// The file at `file_url` is served by `index`: the same scheme and host (PyPI's files come
/// from files.pythonhosted.org); for a `file://` index, a file under the index's parent folder
/// (`.../simple` lists `../files/...`).
fn under_index(file_url: &str, index: &str) -> bool {
    let index = index.trim_end_matches('/');
    if let Some(path) = index.strip_prefix("file://") {
        let root = path.rsplit_once('/').map_or(path, |(r, _)| r);
        return !root.is_empty()
            && file_url
                .strip_prefix("file://")
                .is_some_and(|f| f.starts_with(&format!("{root}/")));
    }
    let (Some(file), Some(idx)) = (url::origin(file_url), url::origin(index)) else {
        return false;
    };
    file == idx || (idx == "https://pypi.org" && file == "https://files.pythonhosted.org")
}

/// A wheel file name's version and the entry's: the same, spelled either way (`_` for `-`,
/// any case).
fn same_version(file: &str, entry: &str) -> bool {
    let norm = |v: &str| v.to_ascii_lowercase().replace('_', "-");
    norm(file) == norm(entry)
}

/// The wheel's Python, ABI and platform tags against the target: a Python 3 tag no newer than
/// the lock's Python, an ABI of it (`cpXY`, `abi3`, `none`), and a platform of the target's
/// machine (and, when the lock names the target's glibc, one that glibc takes) or `any`.
fn tags_problem(lock: &Lock, name: &str, py: &str, abi: &str, plat: &str) -> Option<String> {
    let python = lock
        .packages
        .get("python")
        .and_then(|v| Version::parse(v))
        .map(|v| (v.major(), v.minor()));
    let py_ok = |t: &str| match (t, python) {
        ("py3", _) => true,
        (_, None) => t.starts_with("py3") || t.starts_with("cp3"),
        (_, Some((3, minor))) => t
            .strip_prefix("py3")
            .or_else(|| t.strip_prefix("cp3"))
            .and_then(|m| m.parse::<u64>().ok())
            .is_some_and(|m| m <= minor),
        _ => false,
    };
    let own_abi = python.map(|(a, b)| format!("cp{a}{b}"));
    let abi_ok = |t: &str| t == "none" || t == "abi3" || own_abi.as_deref() == Some(t);
    let machine = match lock.platform {
        crate::core::spec::Platform::LinuxAarch64 => "aarch64",
        _ => "x86_64",
    };
    let accepted = lock
        .glibc_target
        .as_deref()
        .and_then(Version::parse)
        .map(|g| platform_tags(&g, machine));
    let plat_ok = |t: &str| {
        t == "any"
            || match &accepted {
                Some(tags) => tags.iter().any(|a| a == t),
                None => t.ends_with(&format!("_{machine}")),
            }
    };
    if !py.split('.').any(py_ok) || !abi.split('.').any(abi_ok) {
        return Some(format!(
            "its file `{name}` is for another Python ({py}-{abi}) than the lock's"
        ));
    }
    if !plat.split('.').any(plat_ok) {
        return Some(format!(
            "its file `{name}` is for another platform ({plat}) than the target's"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closure_lock() -> Lock {
        Lock::from_toml(include_str!(
            "../../../specs/pypi-torch214-closure/envbuild.lock"
        ))
        .expect("the committed closure lock")
    }

    fn conda_lock() -> Lock {
        Lock::from_toml(include_str!(
            "../../../tests/fixtures/conda-closure/envbuild.lock"
        ))
        .expect("the conda closure fixture")
    }

    #[test]
    fn the_index_that_served_a_file_is_found_on_its_host_not_under_its_path() {
        let gl1 = "https://gitlab.example/api/v4/projects/1/packages/pypi/simple";
        let gl2 = "https://gitlab.example/api/v4/projects/2/packages/pypi/simple";
        let devpi = "http://devpi.example:3141/root/pypi/+simple";
        let pypi = "https://pypi.org/simple";
        let art = "https://art.example/artifactory/api/pypi/pypi-remote/simple";
        let all = [gl1, gl2, devpi, art, pypi];
        let file = |base: &str, rest: &str| format!("{base}{rest}");
        let cases = [
            (
                file(
                    "https://gitlab.example",
                    "/api/v4/projects/2/packages/pypi/files/ab/x-1-py3-none-any.whl",
                ),
                Some(gl2),
            ),
            (
                file(
                    "http://devpi.example:3141",
                    "/root/pypi/+f/abc/def/x-1-py3-none-any.whl",
                ),
                Some(devpi),
            ),
            (
                file(
                    "https://files.pythonhosted.org",
                    "/packages/ab/x-1-py3-none-any.whl",
                ),
                Some(pypi),
            ),
            (
                file(
                    "https://art.example",
                    "/artifactory/api/pypi/pypi-remote/packages/packages/ab/x-1-py3-none-any.whl",
                ),
                Some(art),
            ),
            (file("https://evil.example", "/x-1-py3-none-any.whl"), None),
            // Another port is another origin.
            (
                file(
                    "http://devpi.example:80",
                    "/root/pypi/+f/x-1-py3-none-any.whl",
                ),
                None,
            ),
        ];
        for (url, want) in cases {
            assert_eq!(serving_index(&url, &all), want, "{url}");
        }
    }

    #[test]
    fn the_committed_closure_locks_verify() {
        for lock in [closure_lock(), conda_lock()] {
            assert_eq!(verify(&lock), Vec::new(), "{}", lock.name);
        }
    }

    #[test]
    fn an_edit_breaks_the_seal_and_a_bad_entry_is_named() {
        let mut lock = closure_lock();
        lock.closure[0].sha256 = "0".repeat(64);
        let d = verify(&lock);
        assert_eq!(d[0].code, codes::LOCK_TAMPERED, "{d:?}");
        seal(&mut lock);
        assert!(verify(&lock).is_empty());
        let i = lock.closure.iter().position(|p| p.name == "torch").unwrap();
        for bad in [
            "https://evil.example/packages/torch-2.14.1-cp313-cp313-manylinux_2_28_x86_64.whl",
            "file:///tmp/torch-2.14.1-cp313-cp313-manylinux_2_28_x86_64.whl",
            "https://files.pythonhosted.org/packages/../torch-2.14.1-cp313-cp313-manylinux_2_28_x86_64.whl",
            "https://files.pythonhosted.org/p/torch-2.14.2-cp313-cp313-manylinux_2_28_x86_64.whl",
            "https://files.pythonhosted.org/p/torch-2.14.1-cp313-cp313-win_amd64.whl",
            "https://files.pythonhosted.org/p/torch-2.14.1.tar.gz",
        ] {
            let mut l = lock.clone();
            l.closure[i].url = bad.into();
            l.closure[i].index = "https://pypi.org/simple".into();
            seal(&mut l);
            let d = verify(&l);
            assert_eq!(d.len(), 1, "{bad}: {d:?}");
            assert_eq!(d[0].code, codes::CLOSURE_ENTRY_INVALID, "{bad}");
            assert!(d[0].message.contains("`torch`"), "{}", d[0].message);
        }
        let mut l = lock.clone();
        l.closure[i].yanked = Some("a reason".into());
        seal(&mut l);
        assert!(verify(&l).is_empty());
        for bad in ["two\nlines".to_string(), "x".repeat(201)] {
            l.closure[i].yanked = Some(bad.clone());
            seal(&mut l);
            assert_eq!(verify(&l).len(), 1, "{bad}");
        }
    }

    #[test]
    fn conda_entries_stay_in_their_channel() {
        let lock = conda_lock();
        let i = lock.closure.iter().position(|p| p.kind == "conda").unwrap();
        let p = &lock.closure[i];
        let file = p.url.rsplit('/').next().unwrap().to_string();
        for bad in [
            format!("https://evil.example/conda-forge/noarch/{file}"),
            format!("file:///tmp/{file}"),
            format!("{}/noarch/../../x/noarch/{file}", p.index),
            format!("{}/linux-64/other-1-0.conda", p.index),
        ] {
            let mut l = lock.clone();
            l.closure[i].url = bad.clone();
            seal(&mut l);
            let d = verify(&l);
            assert!(
                d.iter().any(|d| d.code == codes::CLOSURE_ENTRY_INVALID),
                "{bad}: {d:?}"
            );
        }
        let mut l = lock.clone();
        l.closure[i].index = "https://evil.example/conda-forge-mirror".into();
        seal(&mut l);
        assert!(!verify(&l).is_empty());
        let mut l = lock;
        l.closure[i].md5 = Some("x".repeat(32));
        seal(&mut l);
        assert!(verify(&l)[0].message.contains("md5"));
    }
}
