//! Real builds correct the table. A smoke report says what the installed torch really carries
//! (its CUDA, cuDNN, NCCL, GPU architectures and PTX, Python, the wheel's platform tag);
//! `mismatch` compares those facts with the table row a lock came from (`TABLE_MISMATCH`, a
//! warning), and `edit` turns passing reports into a corrected table (`envbuild table learn`).
//! This module reads the facts out of a report. This module performs no I/O.

mod edit;
mod mismatch;

pub use edit::{learn, parse_reports, LearnOptions, Learned, ReportInput};
pub use mismatch::{compare, row_facts, table_mismatches, Mismatch, RowFacts};

use crate::core::smoke::SmokeReport;
use crate::core::version::{Cc, Version};

/// The codes of this module, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::table::{LEARN_INPUT_INVALID, TABLE_MISMATCH};
}

/// PyTorch has tagged wheels built on glibc 2.17 as `manylinux1` (torch 2.6.0 and earlier), so a
/// tag older than `manylinux2014` says nothing about the glibc a wheel needs.
const OLDEST_INFORMATIVE_GLIBC: (u64, u64) = (2, 17);

/// What a wheel's platform tags say about where it installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelPlatform {
    /// `x86_64`, `aarch64`.
    pub machine: String,
    /// The lowest glibc any of its `manylinux` tags accepts; `None` for a wheel built for one
    /// machine (`linux_x86_64`: a conda-forge or source build, not a PyPI or PyTorch-index one).
    pub glibc: Option<Version>,
}

impl WheelPlatform {
    /// The glibc floor, when the tag really tells it (see `OLDEST_INFORMATIVE_GLIBC`).
    pub fn informative_glibc(&self) -> Option<&Version> {
        let (major, minor) = OLDEST_INFORMATIVE_GLIBC;
        self.glibc
            .as_ref()
            .filter(|g| (g.major(), g.minor()) >= (major, minor))
    }
}

/// Read the platform part of wheel tags (`cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64`,
/// PEP 425 with PEP 600's `manylinux_X_Y`). `None` when no tag is a Linux one.
pub fn wheel_platform(tags: &[String]) -> Option<WheelPlatform> {
    let mut machine: Option<String> = None;
    let mut glibc: Option<Version> = None;
    for tag in tags {
        let Some(platforms) = tag.trim().rsplit('-').next() else {
            continue;
        };
        for p in platforms.split('.') {
            let Some((floor, arch)) = linux_platform(p) else {
                continue;
            };
            machine.get_or_insert_with(|| arch.to_string());
            if let Some(f) = floor {
                if glibc.as_ref().is_none_or(|g| f < *g) {
                    glibc = Some(f);
                }
            }
        }
    }
    machine.map(|machine| WheelPlatform { machine, glibc })
}

/// One platform tag: (its glibc floor, `None` for `linux_*`; its machine).
fn linux_platform(p: &str) -> Option<(Option<Version>, &str)> {
    if let Some(rest) = p.strip_prefix("manylinux_") {
        let mut parts = rest.splitn(3, '_');
        let (major, minor, arch) = (parts.next()?, parts.next()?, parts.next()?);
        let floor = Version::parse(&format!("{major}.{minor}"))?;
        return Some((Some(floor), arch));
    }
    // PEP 600's names for the legacy tags.
    for (prefix, glibc) in [
        ("manylinux2014_", "2.17"),
        ("manylinux2010_", "2.12"),
        ("manylinux1_", "2.5"),
    ] {
        if let Some(arch) = p.strip_prefix(prefix) {
            return Some((Version::parse(glibc), arch));
        }
    }
    p.strip_prefix("linux_").map(|arch| (None, arch))
}

/// The facts a smoke report gives about the installed torch; `None` where it gives none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// `torch.__version__` as reported (`2.14.1+cu130`), for messages.
    pub torch_text: Option<String>,
    /// The release, without the local part.
    pub torch: Option<Version>,
    /// `torch.version.cuda` (`13.0`).
    pub cuda: Option<Version>,
    /// `torch.backends.cudnn.version()` as `9.1.0`.
    pub cudnn: Option<Version>,
    /// `torch.cuda.nccl.version()` as `2.21.5`.
    pub nccl: Option<Version>,
    /// The cubins and the PTX of the build (`sm_XY` and `compute_XY` of its arch list), sorted;
    /// `None` when the list was not read.
    pub arch: Option<(Vec<Cc>, Vec<Cc>)>,
    /// Python as `major.minor`.
    pub python: Option<Version>,
    /// The torch wheel's platform tags, when torch was installed from a wheel.
    pub wheel: Option<WheelPlatform>,
    /// The day the report was made (`YYYY-MM-DD`, UTC), when it says.
    pub date: Option<String>,
}

impl Observed {
    /// Read the facts out of a report's `environment`; anything missing or malformed is `None`.
    pub fn from_report(report: &SmokeReport) -> Observed {
        let env = &report.environment;
        let text = |k: &str| env.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let version = |k: &str| text(k).and_then(|s| Version::parse(&s));
        let torch_text = text("torch");
        let torch = torch_text
            .as_deref()
            .and_then(|t| Version::parse(t.split('+').next().unwrap_or(t)));
        let strings = |k: &str| -> Vec<String> {
            env.get(k)
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let arch = Some(split_arch(&strings("arch_list")))
            .filter(|(a, p)| !(a.is_empty() && p.is_empty()));
        let python = version("python").and_then(|p| Version::parse(&p.major_minor()));
        Observed {
            torch_text,
            torch,
            cuda: version("cuda"),
            cudnn: version("cudnn"),
            nccl: version("nccl"),
            arch,
            python,
            wheel: wheel_platform(&strings("torch_wheel_tags")),
            date: text("date").filter(|d| is_date(d)),
        }
    }
}

/// Every fact of a report's `environment` that is there but malformed, each naming itself
/// (`arch_list[6] = "sm_8x"`): `table learn` refuses such a report whole rather than learn
/// from the rest of it. A fact that is absent is not malformed (`fact_of` says what is missing).
pub fn malformed_facts(report: &SmokeReport) -> Vec<String> {
    let env = &report.environment;
    let mut out = Vec::new();
    for key in ["torch", "cuda", "cudnn", "nccl", "python"] {
        let Some(v) = env.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let ok = v.as_str().is_some_and(|s| {
            let release = s.split('+').next().unwrap_or(s);
            Version::parse(release).is_some()
        });
        if !ok {
            out.push(format!("`{key}` = {v} is not a version"));
        }
    }
    if let Some(d) = env.get("date").filter(|v| !v.is_null()) {
        if !d.as_str().is_some_and(is_date) {
            out.push(format!("`date` = {d} is not a YYYY-MM-DD date"));
        }
    }
    for (key, ok) in [
        ("arch_list", arch_entry as fn(&str) -> bool),
        ("torch_wheel_tags", |t: &str| {
            !t.trim().is_empty() && t.split('-').count() >= 3
        }),
    ] {
        let Some(v) = env.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(items) = v.as_array() else {
            out.push(format!("`{key}` = {v} is not a list"));
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            if !item.as_str().is_some_and(ok) {
                out.push(format!("`{key}[{i}]` = {item} is not an entry it can hold"));
            }
        }
    }
    out
}

/// `sm_XY`, `sm_XYa` (a variant) or `compute_XY`, as torch's arch list spells them.
fn arch_entry(e: &str) -> bool {
    let lower = e.trim().to_ascii_lowercase();
    let Some(digits) = lower
        .strip_prefix("sm_")
        .or_else(|| lower.strip_prefix("compute_"))
    else {
        return false;
    };
    let digits = digits.trim_end_matches(|c: char| c.is_ascii_lowercase());
    digits.len() >= 2
        && digits.len() <= 4
        && digits.bytes().all(|b| b.is_ascii_digit())
        && Cc::parse(&lower).is_some()
}

/// `sm_XY` entries (cubins) and `compute_XY` entries (PTX), each sorted without repeats.
/// `sm_90a` counts as `sm_90`: the table records architectures, not their variants.
pub fn split_arch(entries: &[String]) -> (Vec<Cc>, Vec<Cc>) {
    let mut cubins = Vec::new();
    let mut ptx = Vec::new();
    for e in entries {
        let lower = e.trim().to_ascii_lowercase();
        let Some(cc) = Cc::parse(&lower) else {
            continue;
        };
        if lower.starts_with("compute_") {
            ptx.push(cc);
        } else if lower.starts_with("sm") {
            cubins.push(cc);
        }
    }
    for list in [&mut cubins, &mut ptx] {
        list.sort_unstable();
        list.dedup();
    }
    (cubins, ptx)
}

/// `YYYY-MM-DD`, a real calendar day (the one rule, `core::rules::date`).
pub fn is_date(s: &str) -> bool {
    crate::core::rules::date(s)
}

/// `sm_75 sm_80`, `compute_120`, or `none`.
fn arch_text(list: &[Cc], ptx: bool) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|c| {
            if ptx {
                format!("compute_{}{}", c.major, c.minor)
            } else {
                c.sm()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first three components of a version (`9.1.0.70` -> `9.1.0`): what torch reports of cuDNN.
fn first_three(v: &Version) -> Vec<u64> {
    let mut p: Vec<u64> = v.parts().iter().copied().take(3).collect();
    p.resize(3, 0);
    p
}

#[cfg(test)]
mod tests;
