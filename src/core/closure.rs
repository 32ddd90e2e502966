//! The closure lock (pip side): what a resolution for the target depends on (its inputs and
//! their hash), the target's platform tags and environment markers, and reading pip's
//! installation report into closure entries. This module performs no I/O.

pub mod conda;
pub mod verify;

use crate::core::lock::{ClosurePkg, Lock};
use crate::core::spec::Platform;
use crate::core::version::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The index the closure comes from when the spec names none.
pub const PYPI_SIMPLE: &str = "https://pypi.org/simple";

/// Codes of the closure lock.
pub mod codes {
    use crate::core::diag::Code;
    /// `--offline`/`--locked`: a closure is needed and the lock on disk has none that is current.
    pub const CLOSURE_NEEDS_RESOLUTION: Code = "CLOSURE_NEEDS_RESOLUTION";
    /// The resolver could not run, failed, or gave a report envbuild cannot use.
    pub const CLOSURE_RESOLVE_FAILED: Code = "CLOSURE_RESOLVE_FAILED";
    pub const ALL: &[Code] = &[CLOSURE_NEEDS_RESOLUTION, CLOSURE_RESOLVE_FAILED];
}

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
    /// Every platform tag the target accepts, newest glibc first.
    pub platforms: Vec<String>,
    /// The environment markers pip evaluates against the target (not the locking machine).
    pub markers: BTreeMap<String, String>,
}

impl Inputs {
    /// The inputs of a lock resolved for a target whose C library is `glibc`. `None` (with the
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
            markers: markers(&python, machine),
            python,
            abi,
            platforms: platform_tags(glibc, machine),
        })
    }

    /// The lock's `closure_inputs`: sha256 of the canonical JSON.
    pub fn hash(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        crate::core::hash::sha256_hex(json.as_bytes())
    }
}

/// pip's platform tags for a glibc-based Linux: `manylinux_2_N` for every glibc from the newest
/// the target has down to 2.5, the legacy aliases (`manylinux2014` = 2.17, `manylinux2010` =
/// 2.12, `manylinux1` = 2.5) and `linux_<machine>`, which is what pip itself accepts there.
pub fn platform_tags(glibc: &Version, machine: &str) -> Vec<String> {
    let parts: Vec<u64> = glibc
        .to_string()
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    let top = if parts.first() == Some(&2) {
        parts.get(1).copied().unwrap_or(17)
    } else {
        17
    };
    // aarch64 wheels start at manylinux2014 (glibc 2.17).
    let floor = if machine == "x86_64" { 5 } else { 17 };
    let mut tags = Vec::new();
    for minor in (floor..=top.max(floor)).rev() {
        tags.push(format!("manylinux_2_{minor}_{machine}"));
        let legacy = match minor {
            17 => Some("manylinux2014"),
            12 if machine == "x86_64" => Some("manylinux2010"),
            5 if machine == "x86_64" => Some("manylinux1"),
            _ => None,
        };
        if let Some(l) = legacy {
            tags.push(format!("{l}_{machine}"));
        }
    }
    tags.push(format!("linux_{machine}"));
    tags
}

/// PEP 508 environment markers of a CPython `python` on Linux `machine`. A python pinned only to
/// its minor release takes `.0` for `python_full_version` (markers on patch releases are rare).
pub fn markers(python: &str, machine: &str) -> BTreeMap<String, String> {
    let minor: String = python.split('.').take(2).collect::<Vec<_>>().join(".");
    let full = if python.split('.').count() >= 3 {
        python.to_string()
    } else {
        format!("{minor}.0")
    };
    [
        ("implementation_name", "cpython"),
        ("implementation_version", full.as_str()),
        ("os_name", "posix"),
        ("platform_machine", machine),
        ("platform_python_implementation", "CPython"),
        ("platform_system", "Linux"),
        ("python_full_version", full.as_str()),
        ("python_version", minor.as_str()),
        ("sys_platform", "linux"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
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

#[derive(Deserialize)]
struct Report {
    version: String,
    install: Vec<ReportItem>,
}

#[derive(Deserialize)]
struct ReportItem {
    metadata: ReportMeta,
    download_info: DownloadInfo,
}

#[derive(Deserialize)]
struct ReportMeta {
    name: String,
    version: String,
}

#[derive(Deserialize)]
struct DownloadInfo {
    url: String,
    #[serde(default)]
    archive_info: Option<ArchiveInfo>,
}

#[derive(Deserialize)]
struct ArchiveInfo {
    #[serde(default)]
    hashes: BTreeMap<String, String>,
    #[serde(default)]
    hash: Option<String>,
}

/// The closure from pip's installation report (`pip install --dry-run --report`, format 1),
/// sorted by name. Every entry must be an archive with a sha256; `index` is the configured index
/// the file's URL sits under (the first extra index that prefixes it, else the main index).
pub fn from_pip_report(json: &str, inputs: &Inputs) -> Result<Vec<ClosurePkg>, String> {
    let report: Report =
        serde_json::from_str(json).map_err(|e| format!("pip's report does not parse: {e}"))?;
    if report.version != "1" {
        return Err(format!(
            "pip's report is format {}, envbuild reads format 1",
            report.version
        ));
    }
    let mut out = Vec::new();
    for item in report.install {
        let name = canonical_name(&item.metadata.name);
        let archive = item.download_info.archive_info.as_ref();
        let sha256 = archive
            .and_then(|a| {
                a.hashes.get("sha256").cloned().or_else(|| {
                    a.hash
                        .as_deref()
                        .and_then(|h| h.strip_prefix("sha256="))
                        .map(str::to_string)
                })
            })
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("`{name}` has no sha256 in pip's report (a directory or VCS requirement cannot be locked by hash)"))?;
        let url = item.download_info.url;
        let index = inputs
            .extra_index_urls
            .iter()
            .find(|u| url.starts_with(u.as_str()))
            .unwrap_or(&inputs.index_url)
            .clone();
        let pkg = ClosurePkg {
            name,
            version: item.metadata.version,
            kind: "pip".to_string(),
            url,
            index,
            sha256: sha256.to_ascii_lowercase(),
            md5: None,
            build: None,
            subdir: None,
        };
        if let Some((field, rule)) = crate::core::rules::closure_entry(values(&pkg)) {
            return Err(conda::entered_badly(&pkg, field, rule, "pip's report"));
        }
        out.push(pkg);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = out.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format!("pip's report installs `{}` twice", w[0].name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn platform_tags_cover_every_glibc_up_to_the_target() {
        let t = platform_tags(&v("2.28"), "x86_64");
        assert_eq!(t[0], "manylinux_2_28_x86_64");
        assert!(t.contains(&"manylinux_2_17_x86_64".to_string()));
        assert!(t.contains(&"manylinux2014_x86_64".to_string()));
        assert!(t.contains(&"manylinux1_x86_64".to_string()));
        assert!(!t.iter().any(|x| x.contains("2_29")));
        assert_eq!(t.last().unwrap(), "linux_x86_64");
        let a = platform_tags(&v("2.36"), "aarch64");
        assert_eq!(a[0], "manylinux_2_36_aarch64");
        assert!(!a.iter().any(|x| x.contains("2_16")));
    }

    #[test]
    fn markers_are_the_targets() {
        let m = markers("3.13", "x86_64");
        assert_eq!(m["python_version"], "3.13");
        assert_eq!(m["python_full_version"], "3.13.0");
        assert_eq!(m["platform_machine"], "x86_64");
        assert_eq!(
            markers("3.12.4", "aarch64")["python_full_version"],
            "3.12.4"
        );
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
            platforms: platform_tags(&v("2.36"), "x86_64"),
            markers: markers("3.13", "x86_64"),
        }
    }

    #[test]
    fn a_report_becomes_a_sorted_closure() {
        let h = "a".repeat(64);
        let report = serde_json::json!({"version": "1", "install": [
            {"metadata": {"name": "Torch", "version": "2.9.1+cu128"},
             "download_info": {"url": "https://download.pytorch.org/whl/cu128/torch-2.9.1.whl",
                               "archive_info": {"hashes": {"sha256": h}}}},
            {"metadata": {"name": "filelock", "version": "3.20.0"},
             "download_info": {"url": "https://files.pythonhosted.org/f.whl",
                               "archive_info": {"hash": format!("sha256={h}")}}}
        ]});
        let c = from_pip_report(&report.to_string(), &inputs()).unwrap();
        assert_eq!(c[0].name, "filelock");
        assert_eq!(c[0].index, "https://pypi.org/simple");
        assert_eq!(c[1].name, "torch");
        assert_eq!(c[1].index, "https://download.pytorch.org/whl/cu128");
        assert_eq!(c[1].sha256, h);
    }

    #[test]
    fn a_report_without_hashes_is_refused() {
        let report = serde_json::json!({"version": "1", "install": [
            {"metadata": {"name": "x", "version": "1"},
             "download_info": {"url": "file:///src/x", "dir_info": {}}}]});
        let e = from_pip_report(&report.to_string(), &inputs()).unwrap_err();
        assert!(e.contains("`x` has no sha256"), "{e}");
        assert!(from_pip_report("{}", &inputs()).is_err());
    }

    #[test]
    fn inputs_hash_changes_with_what_resolution_depends_on() {
        let a = inputs();
        let mut b = inputs();
        assert_eq!(a.hash(), b.hash());
        b.platforms = platform_tags(&v("2.28"), "x86_64");
        assert_ne!(a.hash(), b.hash());
        let mut c = inputs();
        c.requirements.push("einops>=0.8".into());
        assert_ne!(a.hash(), c.hash());
    }
}
