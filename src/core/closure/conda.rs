//! The closure lock (conda side): what a conda solve for the target depends on (match specs,
//! channel URLs in priority order, subdirs, the target's virtual packages), the records a solve
//! gives turned into closure entries, and which of them pip must take as installed. This module
//! performs no I/O: the solver and the channel fetch live in `infra::conda_solve`.

use crate::core::compat::Table;
use crate::core::lock::{ClosurePkg, Lock};
use crate::core::spec::Platform;
use crate::core::version::Version;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where a channel name points when `ENVBUILD_CONDA_CHANNEL_ALIAS` is not set (conda's own
/// default `channel_alias`).
pub const DEFAULT_CHANNEL_ALIAS: &str = "https://conda.anaconda.org";

/// The kernel the target is taken to run (`__linux`). The container shares the host's kernel,
/// which the lock does not know: 4.18 (RHEL 8, pixi's default system requirement) is old enough
/// for every machine that runs a current NVIDIA driver, so a package that needs a newer kernel
/// is never chosen for a host that may lack it.
pub const LINUX_VIRTUAL: &str = "4.18";

/// A virtual package the target provides (`__glibc 2.28 0`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VirtualPkg {
    pub name: String,
    pub version: String,
    pub build: String,
}

/// Exactly what a conda solve depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CondaInputs {
    /// The lock's conda match specs (`pytorch::pytorch==2.5.1`), in install order.
    pub specs: Vec<String>,
    /// Channel URLs in priority order (strict priority): the lock's channels, then any channel
    /// that only a `channel::name` spec names.
    pub channels: Vec<String>,
    /// The target's subdir, then `noarch`.
    pub subdirs: Vec<String>,
    pub virtual_packages: Vec<VirtualPkg>,
}

/// Everything a conda closure depends on: the conda solve, and the pip extras resolved for the
/// conda environment's Python (`None` without pip extras). The lock's `closure_inputs` is the
/// sha256 of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvInputs {
    pub conda: CondaInputs,
    pub pip: Option<super::Inputs>,
}

impl EnvInputs {
    pub fn hash(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        crate::core::hash::sha256_hex(json.as_bytes())
    }
}

/// A channel's URL: a URL as written (without a trailing `/`), a name under `alias`.
pub fn channel_url(channel: &str, alias: &str) -> String {
    if channel.contains("://") {
        channel.trim_end_matches('/').to_string()
    } else {
        format!("{}/{channel}", alias.trim_end_matches('/'))
    }
}

/// `pytorch::pytorch==2.5.1` -> (`Some("pytorch")`, `pytorch==2.5.1`). A URL channel keeps its
/// `https://`: the separator is the last `::`.
pub fn split_channel(spec: &str) -> (Option<&str>, &str) {
    match spec.rsplit_once("::") {
        Some((c, rest)) if !c.is_empty() => (Some(c), rest),
        _ => (None, spec),
    }
}

/// The conda subdir of a platform; `None` for a platform without a conda closure.
pub fn subdir(platform: Platform) -> Option<&'static str> {
    match platform {
        Platform::Linux64 => Some("linux-64"),
        Platform::LinuxAarch64 => Some("linux-aarch64"),
        Platform::Win64 => None,
    }
}

/// The highest CUDA the target offers conda (`__cuda`), `None` for a CPU lock. The lock's
/// `CONDA_OVERRIDE_CUDA` first (a conda-forge build: the image is built with it, and the lock
/// already checked that the target driver runs it, through minor-version compatibility), else
/// the highest CUDA the target driver supports (the table's driver branches), else the build's
/// own CUDA (a driver that runs it natively reports at least that).
pub fn target_cuda(lock: &Lock, table: &Table) -> Option<String> {
    if lock.cuda.is_empty() || lock.cuda_variant.as_deref() == Some("cpu") {
        return None;
    }
    if let Some(o) = &lock.install.conda_override_cuda {
        return Some(o.clone());
    }
    let from_driver = lock
        .driver_target
        .as_deref()
        .and_then(Version::parse)
        .and_then(|d| table.driver_max_cuda(&d))
        .map(|r| r.max_cuda.major_minor());
    from_driver.or_else(|| Version::parse(&lock.cuda).map(|v| v.major_minor()))
}

/// The target's virtual packages: `__unix`, `__linux`, `__glibc`, `__archspec` (the
/// architecture's baseline, no micro-architecture beyond it) and, for a CUDA target, `__cuda`.
pub fn virtual_packages(
    platform: Platform,
    glibc: &Version,
    cuda: Option<&str>,
) -> Vec<VirtualPkg> {
    let v = |name: &str, version: &str, build: &str| VirtualPkg {
        name: name.into(),
        version: version.into(),
        build: build.into(),
    };
    let arch = match platform {
        Platform::LinuxAarch64 => "aarch64",
        _ => "x86_64",
    };
    let mut out = vec![
        v("__archspec", "1", arch),
        v("__glibc", &glibc.to_string(), "0"),
        v("__linux", LINUX_VIRTUAL, "0"),
        v("__unix", "0", "0"),
    ];
    if let Some(c) = cuda {
        out.insert(1, v("__cuda", c, "0"));
    }
    out
}

impl CondaInputs {
    /// The conda inputs of a lock resolved for a target whose C library is `glibc` and whose
    /// driver offers `cuda`; channel names map under `alias`.
    pub fn of(
        lock: &Lock,
        glibc: &Version,
        cuda: Option<&str>,
        alias: &str,
    ) -> Result<CondaInputs, String> {
        let sub = subdir(lock.platform)
            .ok_or("a conda closure lock is supported for Linux targets only")?;
        let mut channels: Vec<String> = Vec::new();
        let named = lock.install.conda.iter().filter_map(|s| split_channel(s).0);
        for c in lock.channels.iter().map(String::as_str).chain(named) {
            let url = channel_url(c, alias);
            if !channels.contains(&url) {
                channels.push(url);
            }
        }
        if channels.is_empty() {
            return Err("the lock names no conda channel".into());
        }
        Ok(CondaInputs {
            specs: lock.install.conda.clone(),
            channels,
            subdirs: vec![sub.to_string(), "noarch".to_string()],
            virtual_packages: virtual_packages(lock.platform, glibc, cuda),
        })
    }
}

/// One record a conda solve chose, as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solved {
    pub name: String,
    pub version: String,
    pub build: String,
    pub subdir: String,
    pub url: String,
    /// The channel URL the record came from (one of the inputs' channels).
    pub channel: String,
    pub sha256: Option<String>,
    pub md5: Option<String>,
    /// Its `depends` match specs (`python >=3.11,<3.12.0a0`).
    pub depends: Vec<String>,
    /// `noarch: python`.
    pub noarch_python: bool,
}

fn hex(h: Option<&str>, len: usize) -> Option<String> {
    h.filter(|h| h.len() == len && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase)
}

/// The closure entries of a solve, sorted by name. Every record needs both hashes (the explicit
/// file carries the md5, the lock's checks the sha256): one without is refused, by name.
pub fn to_closure(solved: &[Solved]) -> Result<Vec<ClosurePkg>, String> {
    let mut out = Vec::with_capacity(solved.len());
    for s in solved {
        let (Some(sha256), Some(md5)) = (hex(s.sha256.as_deref(), 64), hex(s.md5.as_deref(), 32))
        else {
            return Err(format!(
                "`{}` {} ({}) lacks a sha256 or an md5 in its channel's repodata.json: it cannot be locked by hash",
                s.name, s.version, s.url
            ));
        };
        // A token in the channel's URL is the environment's, never the lock's.
        let pkg = ClosurePkg {
            name: s.name.clone(),
            version: s.version.clone(),
            kind: "conda".into(),
            url: crate::core::url::lock_form(&s.url),
            index: crate::core::url::lock_form(&s.channel),
            sha256,
            md5: Some(md5),
            build: Some(s.build.clone()),
            subdir: Some(s.subdir.clone()),
            yanked: None,
        };
        if let Some((field, rule)) = crate::core::rules::closure_entry(super::values(&pkg)) {
            return Err(entered_badly(
                &pkg,
                field,
                rule,
                "its channel's repodata.json",
            ));
        }
        out.push(pkg);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = out.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format!("the solve installs `{}` twice", w[0].name));
    }
    Ok(out)
}

/// The refusal of an entry whose `field` breaks `rule` as `origin` gave it: the value shown
/// escaped, so a line break in it cannot forge a message line.
pub fn entered_badly(p: &ClosurePkg, field: &str, rule: &str, origin: &str) -> String {
    let value = match field {
        "name" => &p.name,
        "version" => &p.version,
        "kind" => &p.kind,
        "url" => &p.url,
        "index" => &p.index,
        "sha256" => &p.sha256,
        "build" => p.build.as_deref().unwrap_or_default(),
        "subdir" => p.subdir.as_deref().unwrap_or_default(),
        _ => p.md5.as_deref().unwrap_or_default(),
    };
    format!(
        "`{}` {}: its {field} `{}` (from {origin}) is not {rule}; a lock never records what \
         render would refuse",
        crate::core::diag::printable(&p.name),
        crate::core::diag::printable(&p.version),
        value.chars().take(80).collect::<String>().escape_debug()
    )
}

/// conda package names whose PyPI distribution is called otherwise. Everything else is taken
/// to be the same name, PEP 503-normalised (true for most of conda-forge's Python packages).
pub const PYPI_NAMES: &[(&str, &str)] = &[
    ("matplotlib-base", "matplotlib"),
    ("msgpack-python", "msgpack"),
    ("py-opencv", "opencv-python"),
    ("pytables", "tables"),
    ("pytorch", "torch"),
];

/// The PyPI name of a conda package.
pub fn pypi_name(conda_name: &str) -> String {
    PYPI_NAMES
        .iter()
        .find(|(c, _)| *c == conda_name)
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| super::canonical_name(conda_name))
}

/// A version pip reads the same way conda wrote it (digits, dots, letters: `2.5.1`, `1.0rc1`).
fn pep440_plain(v: &str) -> bool {
    !v.is_empty()
        && v.starts_with(|c: char| c.is_ascii_digit())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.')
}

/// The Python distributions the conda solve installs, PyPI name -> conda's version: every
/// record that depends on `python` or is `noarch: python`, except Python itself. pip takes
/// them as installed (it is held to these versions, and does not install them again).
pub fn python_provided(solved: &[Solved]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in solved {
        let needs_python = s.noarch_python
            || s.depends
                .iter()
                .any(|d| d.split([' ', '=', '<', '>', '!']).next() == Some("python"));
        if s.name != "python" && needs_python {
            out.entry(pypi_name(&s.name))
                .or_insert_with(|| s.version.clone());
        }
    }
    out
}

/// The conda-provided distributions pip is told are installed, (PyPI name, version): those
/// whose version pip reads the way conda wrote it (`1.0_post` is not held: pip could not be).
pub fn pip_installed(provided: &BTreeMap<String, String>) -> Vec<(String, String)> {
    provided
        .iter()
        .filter(|(_, v)| pep440_plain(v))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// The whole closure: conda's entries, then pip's without what conda already provides (so the
/// pip install never replaces a conda package), sorted by kind, then name.
pub fn merge(
    conda: Vec<ClosurePkg>,
    pip: Vec<ClosurePkg>,
    provided: &BTreeMap<String, String>,
) -> Vec<ClosurePkg> {
    let mut out = conda;
    out.extend(pip.into_iter().filter(|p| !provided.contains_key(&p.name)));
    out.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solved(name: &str, version: &str, depends: &[&str]) -> Solved {
        Solved {
            name: name.into(),
            version: version.into(),
            build: "h0_0".into(),
            subdir: "linux-64".into(),
            url: format!("https://c.example/ch/linux-64/{name}-{version}-h0_0.tar.bz2"),
            channel: "https://c.example/ch".into(),
            sha256: Some("A".repeat(64)),
            md5: Some("b".repeat(32)),
            depends: depends.iter().map(|s| s.to_string()).collect(),
            noarch_python: false,
        }
    }

    #[test]
    fn channels_map_under_the_alias_and_specs_split() {
        assert_eq!(
            channel_url("conda-forge", DEFAULT_CHANNEL_ALIAS),
            "https://conda.anaconda.org/conda-forge"
        );
        assert_eq!(
            channel_url("pytorch", "http://127.0.0.1:9/"),
            "http://127.0.0.1:9/pytorch"
        );
        assert_eq!(
            channel_url("https://mirror.example/c/", "x"),
            "https://mirror.example/c"
        );
        assert_eq!(
            split_channel("pytorch::pytorch==2.5.1"),
            (Some("pytorch"), "pytorch==2.5.1")
        );
        assert_eq!(split_channel("numpy==1.26.4"), (None, "numpy==1.26.4"));
        assert_eq!(
            split_channel("https://m.example/c::x==1"),
            (Some("https://m.example/c"), "x==1")
        );
    }

    #[test]
    fn virtual_packages_are_the_targets() {
        let g = Version::parse("2.28").unwrap();
        let v = virtual_packages(Platform::Linux64, &g, Some("12.4"));
        let names: Vec<(&str, &str, &str)> = v
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str(), p.build.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("__archspec", "1", "x86_64"),
                ("__cuda", "12.4", "0"),
                ("__glibc", "2.28", "0"),
                ("__linux", LINUX_VIRTUAL, "0"),
                ("__unix", "0", "0"),
            ]
        );
        let cpu = virtual_packages(Platform::LinuxAarch64, &g, None);
        assert!(!cpu.iter().any(|p| p.name == "__cuda"));
        assert_eq!(cpu[0].build, "aarch64");
    }

    fn example(name: &str) -> Lock {
        let text = match name {
            "cf" => include_str!("../../../specs/conda-forge-torch210/envbuild.lock"),
            _ => include_str!("../../../specs/py311-torch21-cu118/envbuild.lock"),
        };
        Lock::from_toml(text).unwrap()
    }

    /// `__cuda`: conda-forge's CONDA_OVERRIDE_CUDA, else what the target driver supports (470
    /// reports 11.4), else the build's CUDA; a CPU lock has none.
    #[test]
    fn cuda_is_what_the_target_offers() {
        let t = Table::embedded().unwrap();
        assert_eq!(target_cuda(&example("cf"), &t).as_deref(), Some("12.9"));
        let mut l = example("pt");
        assert_eq!(l.driver_target.as_deref(), Some("470.82.01"));
        assert_eq!(target_cuda(&l, &t).as_deref(), Some("11.4"));
        l.driver_target = None;
        assert_eq!(target_cuda(&l, &t).as_deref(), Some("11.8"));
        l.cuda_variant = Some("cpu".into());
        assert_eq!(target_cuda(&l, &t), None);
    }

    /// Channels in the lock's order under the alias, then one only a spec names; the subdirs.
    #[test]
    fn inputs_follow_the_lock() {
        let mut l = example("pt");
        l.install.conda.push("bioconda::samtools==1.21".into());
        let g = Version::parse("2.17").unwrap();
        let i = CondaInputs::of(&l, &g, Some("11.4"), "http://127.0.0.1:1").unwrap();
        assert_eq!(
            i.channels,
            [
                "http://127.0.0.1:1/pytorch",
                "http://127.0.0.1:1/nvidia",
                "http://127.0.0.1:1/conda-forge",
                "http://127.0.0.1:1/bioconda"
            ]
        );
        assert_eq!(i.subdirs, ["linux-64", "noarch"]);
        assert_eq!(i.specs, l.install.conda);
        let other = CondaInputs::of(&l, &g, Some("11.4"), DEFAULT_CHANNEL_ALIAS).unwrap();
        let hash = |c: CondaInputs| {
            EnvInputs {
                conda: c,
                pip: None,
            }
            .hash()
        };
        assert_ne!(hash(i.clone()), hash(other), "the alias changes the URLs");
        l.platform = Platform::Win64;
        assert!(CondaInputs::of(&l, &g, None, DEFAULT_CHANNEL_ALIAS).is_err());
    }

    #[test]
    fn records_need_both_hashes_and_sort_by_name() {
        let c = to_closure(&[solved("zlib", "1.3", &[]), solved("python", "3.11.9", &[])]).unwrap();
        assert_eq!(c[0].name, "python");
        assert_eq!(c[0].kind, "conda");
        assert_eq!(c[0].sha256, "a".repeat(64));
        assert_eq!(c[1].md5.as_deref(), Some("b".repeat(32).as_str()));
        assert_eq!(c[1].build.as_deref(), Some("h0_0"));
        let mut no_md5 = solved("numpy", "2.1.0", &[]);
        no_md5.md5 = None;
        let e = to_closure(&[no_md5]).unwrap_err();
        assert!(e.contains("`numpy` 2.1.0"), "{e}");
        let mut short = solved("numpy", "2.1.0", &[]);
        short.sha256 = Some("ab".into());
        assert!(to_closure(&[short]).is_err());
    }

    #[test]
    fn python_packages_are_held_under_their_pypi_names() {
        let mut noarch = solved("typing_extensions", "4.12.2", &[]);
        noarch.noarch_python = true;
        let s = [
            solved("python", "3.11.9", &["libzlib >=1.3"]),
            solved("pytorch", "2.5.1", &["python >=3.11,<3.12.0a0", "mkl"]),
            solved("mkl", "2024.0.0", &[]),
            solved("numpy", "1.26.4", &["python_abi 3.11.* *_cp311", "python"]),
            solved("weird", "1.0_post", &["python"]),
            noarch,
        ];
        let p = python_provided(&s);
        assert_eq!(
            p.keys().collect::<Vec<_>>(),
            ["numpy", "torch", "typing-extensions", "weird"]
        );
        let held: Vec<String> = pip_installed(&p)
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        assert_eq!(
            held,
            ["numpy 1.26.4", "torch 2.5.1", "typing-extensions 4.12.2"]
        );
    }

    #[test]
    fn pip_never_reinstalls_what_conda_provides() {
        let conda = to_closure(&[solved("pytorch", "2.5.1", &["python"])]).unwrap();
        let pip = |n: &str| ClosurePkg {
            name: n.into(),
            version: "1".into(),
            kind: "pip".into(),
            url: String::new(),
            index: String::new(),
            sha256: "c".repeat(64),
            md5: None,
            build: None,
            yanked: None,
            subdir: None,
        };
        let provided = python_provided(&[solved("pytorch", "2.5.1", &["python"])]);
        let all = merge(conda, vec![pip("torch"), pip("einops")], &provided);
        let got: Vec<(&str, &str)> = all
            .iter()
            .map(|p| (p.kind.as_str(), p.name.as_str()))
            .collect();
        assert_eq!(got, [("conda", "pytorch"), ("pip", "einops")]);
    }
}
