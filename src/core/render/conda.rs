//! The conda side of a closure lock, as render needs it: the explicit file's lines (`URL#MD5`,
//! in link order), the exact `channel::name=version=build` pins of environment.yml, and the pip
//! constraints that conda-installed packages give the dev image. This module performs no I/O.

use crate::core::lock::{ClosurePkg, Lock};

/// `kind` of a conda closure entry (pip entries are `pip`).
pub const CONDA: &str = "conda";
/// `kind` of a pip closure entry.
pub const PIP: &str = "pip";

/// The closure's conda entries, in the closure's order (kind, then name).
pub fn conda_pkgs(lock: &Lock) -> impl Iterator<Item = &ClosurePkg> {
    lock.closure.iter().filter(|p| p.kind == CONDA)
}

/// The closure's pip entries, in the closure's order.
pub fn pip_pkgs(lock: &Lock) -> impl Iterator<Item = &ClosurePkg> {
    lock.closure.iter().filter(|p| p.kind == PIP)
}

/// The explicit file's name for the lock's platform: `conda-linux-64.txt`.
pub fn explicit_file_name(lock: &Lock) -> String {
    format!("conda-{}.txt", lock.platform.as_str())
}

/// The order of an explicit file's lines. conda sorts an explicit install by dependency itself
/// (conda/conda#4535), as do micromamba and rattler; the order is for an installer that links
/// in file order, where a noarch Python package linked before `python` fails. The lock carries
/// no dependency edges, so a true topological order cannot be computed here: the conda-forge
/// graph's roots (`_libgcc_mutex`, `_openmp_mutex`: names that
/// start with `_`) come first, then the platform's packages (libraries, python), then `noarch`
/// ones (pure Python, which need python present), each group by name.
pub fn link_order(lock: &Lock) -> Vec<&ClosurePkg> {
    let mut pkgs: Vec<&ClosurePkg> = conda_pkgs(lock).collect();
    let rank = |p: &ClosurePkg| match (p.name.starts_with('_'), p.subdir.as_deref()) {
        (true, _) => 0,
        (false, Some("noarch")) => 2,
        _ => 1,
    };
    // Stable: within a group the closure's (name) order stays.
    pkgs.sort_by_key(|p| rank(p));
    pkgs
}

/// One explicit-file line: `URL#MD5`. Every conda, mamba and micromamba reads an md5 there; a
/// sha256 (64 hex digits) only conda >= 24.9, mamba >= 2.1 and rattler do, so the sha256 is used
/// only for an entry that has no md5.
pub fn explicit_line(p: &ClosurePkg) -> String {
    format!("{}#{}", p.url, p.md5.as_deref().unwrap_or(&p.sha256))
}

/// A conda entry's URL under `--conda-mirror`: the channel's path on its host (`conda-forge`
/// for `https://conda.anaconda.org/conda-forge`, `pkgs/main`; a token alias's `t/TOKEN/` left
/// out) under the mirror, then the same subdir and file, as conda's `channel_alias` maps names:
/// `MIRROR/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda`.
pub fn mirrored_url(p: &ClosurePkg, mirror: &str) -> String {
    let index = p.index.trim_end_matches('/');
    // A verified lock's URL is CHANNEL/SUBDIR/FILE under its index; else its last two parts.
    let tail = match p.url.strip_prefix(index).filter(|t| t.starts_with('/')) {
        Some(t) => t.to_string(),
        None => {
            let mut parts = p.url.rsplitn(3, '/');
            let file = parts.next().unwrap_or_default();
            let subdir = parts.next().unwrap_or_default();
            format!("/{subdir}/{file}")
        }
    };
    let rest = index.split_once("://").map_or(index, |(_, r)| r);
    let path = rest.split_once('/').map_or("", |(_, p)| p);
    let path = match path.strip_prefix("t/") {
        Some(token_and_path) => token_and_path.split_once('/').map_or("", |(_, p)| p),
        None => path,
    };
    format!("{mirror}/{path}{tail}")
}

/// The explicit-file line of `p` fetched from `mirror`: the same md5 (or sha256), so conda
/// checks that the mirror serves the lock's bytes.
pub fn mirrored_line(p: &ClosurePkg, mirror: &str) -> String {
    format!(
        "{}#{}",
        mirrored_url(p, mirror),
        p.md5.as_deref().unwrap_or(&p.sha256)
    )
}

/// The channel a conda entry names in a match spec: `conda-forge` for
/// `https://conda.anaconda.org/conda-forge`, else the channel's URL (conda reads both before
/// `::`).
pub fn channel_of(p: &ClosurePkg) -> &str {
    let index = p.index.trim_end_matches('/');
    index
        .strip_prefix("https://conda.anaconda.org/")
        .filter(|c| !c.is_empty())
        .unwrap_or(index)
}

/// An exact environment.yml pin: `conda-forge::numpy=1.26.4=py311h64a7726_0`. Always
/// channel-qualified, so that a mix of channels (pytorch, nvidia, conda-forge) cannot swap one
/// package's source for another's; without a build string, `==version`.
pub fn exact_spec(p: &ClosurePkg) -> String {
    match p.build.as_deref() {
        Some(b) => format!("{}::{}={}={b}", channel_of(p), p.name, p.version),
        None => format!("{}::{}=={}", channel_of(p), p.name, p.version),
    }
}

/// A conda entry as a pip constraint (`numpy==1.26.4`) when pip could read it: a name pip
/// accepts and a plain release version. Names conda and PyPI share (numpy) then pin the dev
/// image's JupyterLab install; conda-only names (`libgcc`) constrain nothing pip installs.
pub fn pip_constraint(p: &ClosurePkg) -> Option<String> {
    let name_ok = p.name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && p.name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && p.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let version_ok = !p.version.is_empty()
        && p.version
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    (name_ok && version_ok && p.name != "python").then(|| format!("{}=={}", p.name, p.version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, subdir: &str, index: &str) -> ClosurePkg {
        ClosurePkg {
            name: name.into(),
            version: "1.2.3".into(),
            kind: CONDA.into(),
            url: format!("{index}/{subdir}/{name}-1.2.3-h0_0.conda"),
            index: index.into(),
            sha256: "a".repeat(64),
            md5: Some("b".repeat(32)),
            build: Some("h0_0".into()),
            subdir: Some(subdir.into()),
            yanked: None,
        }
    }

    #[test]
    fn lines_pins_and_channels() {
        let cf = "https://conda.anaconda.org/conda-forge";
        let p = pkg("numpy", "linux-64", cf);
        assert_eq!(
            explicit_line(&p),
            format!("{cf}/linux-64/numpy-1.2.3-h0_0.conda#{}", "b".repeat(32))
        );
        assert_eq!(exact_spec(&p), "conda-forge::numpy=1.2.3=h0_0");
        let mirror = pkg("numpy", "linux-64", "https://mirror.example/conda/");
        assert_eq!(
            exact_spec(&mirror),
            "https://mirror.example/conda::numpy=1.2.3=h0_0"
        );
        let mut no_md5 = p.clone();
        no_md5.md5 = None;
        no_md5.build = None;
        assert!(explicit_line(&no_md5).ends_with(&format!("#{}", "a".repeat(64))));
        assert_eq!(exact_spec(&no_md5), "conda-forge::numpy==1.2.3");
        assert_eq!(pip_constraint(&p).as_deref(), Some("numpy==1.2.3"));
        for (name, version) in [
            ("_openmp_mutex", "4.5"),
            ("openssl", "1.1.1w"),
            ("python", "3.12.7"),
        ] {
            let mut q = p.clone();
            q.name = name.into();
            q.version = version.into();
            assert_eq!(pip_constraint(&q), None, "{name} {version}");
        }
    }

    /// A mirror takes the channel's path on its host, the subdir and the file, and the line
    /// keeps the lock's md5: conda-forge and the defaults' `pkgs/main` as conda's channel_alias
    /// maps them, a token alias without its token.
    #[test]
    fn a_mirror_serves_each_channel_under_its_path() {
        let m = "http://127.0.0.1:9/conda";
        let cf = pkg(
            "numpy",
            "linux-64",
            "https://conda.anaconda.org/conda-forge",
        );
        assert_eq!(
            mirrored_url(&cf, m),
            "http://127.0.0.1:9/conda/conda-forge/linux-64/numpy-1.2.3-h0_0.conda"
        );
        assert_eq!(
            mirrored_line(&cf, m),
            format!("{}#{}", mirrored_url(&cf, m), "b".repeat(32))
        );
        let main = pkg("tqdm", "noarch", "https://repo.anaconda.com/pkgs/main");
        assert_eq!(
            mirrored_url(&main, m),
            "http://127.0.0.1:9/conda/pkgs/main/noarch/tqdm-1.2.3-h0_0.conda"
        );
        let token = pkg(
            "python",
            "linux-64",
            "https://host.example/t/envbuild-conda-token/pytorch",
        );
        assert_eq!(
            mirrored_url(&token, m),
            "http://127.0.0.1:9/conda/pytorch/linux-64/python-1.2.3-h0_0.conda"
        );
        let mut no_md5 = cf.clone();
        no_md5.md5 = None;
        assert!(mirrored_line(&no_md5, m).ends_with(&format!("#{}", "a".repeat(64))));
    }
}
