//! `TABLE_MISMATCH`: what a smoke report observed against the table row the lock came from. Only
//! the locked build is compared (same torch release, same CUDA major.minor): another torch is
//! drift, which the smoke test itself fails (`VERSION_DRIFT`), not an error of the table; except
//! that the locked release from PyPI with another CUDA means the table's `pypi_default` is
//! wrong. A mismatch is a warning: the build is what it is, and the verdict stays the smoke
//! test's.
//! This module performs no I/O.

use super::{arch_text, codes, first_three, Observed};
use crate::core::compat::{variant_of, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::Lock;
use crate::core::smoke::SmokeReport;
use crate::core::spec::{Platform, Source};
use crate::core::version::{Cc, Version};

/// What the table says about the build a lock came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowFacts {
    /// The row, for messages: `[[wheel]] torch 2.14 cu130 (torch 2.14.1 from pypi)`.
    pub row: String,
    /// The row that holds the architectures, when another one does (Linux aarch64 wheels).
    pub arch_row: Option<String>,
    pub torch: Version,
    /// The build's CUDA (compared by major.minor: torch reports no patch).
    pub cuda: Version,
    pub cudnn: Option<Version>,
    pub nccl: Option<Version>,
    pub arch: Vec<Cc>,
    pub ptx: Vec<Cc>,
    /// The Pythons the release has wheels for; `None` when the source is not a wheel index.
    pub python: Option<Vec<Version>>,
    /// The release's glibc floor on Linux x86_64 wheels, and whether this build is the one the
    /// table's column describes (PyPI's default build); `None` for other sources and platforms.
    pub glibc: Option<(Version, bool)>,
    /// For a PyPI lock, the `[[torch]]` row that says which build PyPI serves (`pypi_default`):
    /// plain `pip install torch==X` has no other way to get another CUDA.
    pub pypi_row: Option<String>,
}

/// One fact on which a build and the table disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub row: String,
    /// `PTX`, `cubins`, `cuDNN`, `NCCL`, `Python`, `glibc floor`.
    pub fact: &'static str,
    pub table: String,
    pub observed: String,
}

impl Mismatch {
    /// The warning; `subject` names where the build ran (an image, a Python).
    pub fn diagnostic(&self, subject: &str) -> Diagnostic {
        Diagnostic::warning(
            codes::TABLE_MISMATCH,
            format!(
                "`{subject}`: the table's {} says {} {}; the installed torch has {}",
                self.row, self.fact, self.table, self.observed
            ),
        )
        .with_hint(
            "a real build beats the table: if this build is the one you want, learn from it \
             with `envbuild table learn REPORT.json --out table.toml` (REPORT.json: this run's \
             `--json` output) and lock with `envbuild --table table.toml lock SPEC`",
        )
    }
}

/// The table's facts for the build a lock came from; `None` when the lock names no build the
/// table has (another table, a CPU lock).
pub fn row_facts(lock: &Lock, table: &Table) -> Option<RowFacts> {
    let torch_text = lock.packages.get("torch")?;
    let torch = Version::parse(torch_text.split('+').next().unwrap_or(torch_text))?;
    let series = Version::parse(&torch.major_minor())?;
    let cuda = Version::parse(&lock.cuda)?;
    let from = format!("torch {torch} from {}", lock.source.as_str());
    if lock.source == Source::CondaForge {
        let selector = Version::parse(&cuda.major_minor())?;
        let b = table.conda_forge_build(&selector)?;
        return Some(RowFacts {
            row: format!("[[conda_forge_build]] CUDA {selector} ({from})"),
            arch_row: None,
            torch,
            cuda,
            cudnn: None,
            nccl: None,
            arch: b.arch.clone(),
            ptx: b.ptx.clone(),
            python: None,
            glibc: None,
            pypi_row: None,
        });
    }
    let variant = lock
        .cuda_variant
        .clone()
        .unwrap_or_else(|| variant_of(&cuda));
    let w = table.wheel_row(&series, &variant)?;
    let t = table.torch_row(&torch);
    let wheel_source = matches!(lock.source, Source::Pypi | Source::PytorchIndex);
    let (arch, ptx, arch_row) = match lock.platform {
        Platform::LinuxAarch64 => {
            let a = table.wheel_aarch64_row(&series, &variant)?;
            let row = format!("[[wheel_aarch64]] {variant} ({from})");
            (a.arch.clone(), a.ptx.clone(), Some(row))
        }
        _ => (w.arch.clone(), w.ptx.clone(), None),
    };
    Some(RowFacts {
        row: format!("[[wheel]] torch {series} {variant} ({from})"),
        arch_row,
        torch,
        cuda: w.cuda.clone(),
        cudnn: Version::parse(&w.cudnn),
        nccl: w.nccl.as_deref().and_then(Version::parse),
        arch,
        ptx,
        python: t.filter(|_| wheel_source).map(|t| {
            let mut all: Vec<Version> = t
                .python
                .iter()
                .chain(&t.python_experimental)
                .cloned()
                .collect();
            all.sort();
            all
        }),
        glibc: t
            .filter(|_| wheel_source && lock.platform == Platform::Linux64)
            .map(|t| (t.glibc.clone(), t.pypi_default == variant)),
        pypi_row: t
            .filter(|_| lock.source == Source::Pypi)
            .map(|t| format!("[[torch]] {} ({from})", t.version)),
    })
}

/// Where the observed build and the row disagree; empty when the report is of another build.
pub fn compare(obs: &Observed, row: &RowFacts) -> Vec<Mismatch> {
    let (Some(torch), Some(cuda)) = (&obs.torch, &obs.cuda) else {
        return Vec::new();
    };
    if *torch != row.torch {
        return Vec::new();
    }
    if (cuda.major(), cuda.minor()) != (row.cuda.major(), row.cuda.minor()) {
        // The locked release with another CUDA: from PyPI that is the table's `pypi_default`
        // being wrong (nothing else picks the build); from an index it is drift.
        return row
            .pypi_row
            .iter()
            .map(|pypi_row| Mismatch {
                row: pypi_row.clone(),
                fact: "PyPI's build is",
                table: variant_of(&row.cuda),
                observed: format!("a CUDA {cuda} build ({})", variant_of(cuda)),
            })
            .collect();
    }
    let mut out = Vec::new();
    let mut push = |row: &str, fact: &'static str, table: String, observed: String| {
        out.push(Mismatch {
            row: row.to_string(),
            fact,
            table,
            observed,
        })
    };
    if let (Some(t), Some(o)) = (&row.cudnn, &obs.cudnn) {
        if first_three(t) != first_three(o) {
            push(&row.row, "cuDNN", t.to_string(), o.to_string());
        }
    }
    if let (Some(t), Some(o)) = (&row.nccl, &obs.nccl) {
        if t != o {
            push(&row.row, "NCCL", t.to_string(), o.to_string());
        }
    }
    if let Some((cubins, ptx)) = &obs.arch {
        let arch_row = row.arch_row.as_deref().unwrap_or(&row.row);
        let sorted = |v: &[Cc]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (t_arch, t_ptx) = (sorted(&row.arch), sorted(&row.ptx));
        if t_arch != *cubins {
            push(
                arch_row,
                "cubins",
                arch_text(&t_arch, false),
                arch_text(cubins, false),
            );
        }
        if t_ptx != *ptx {
            push(
                arch_row,
                "PTX",
                arch_text(&t_ptx, true),
                arch_text(ptx, true),
            );
        }
    }
    if let (Some(list), Some(py)) = (&row.python, &obs.python) {
        if !list.contains(py) {
            let listed: Vec<String> = list.iter().map(ToString::to_string).collect();
            push(
                &row.row,
                "wheels for Python",
                listed.join(" "),
                format!("Python {py}"),
            );
        }
    }
    if let (Some((floor, default_build)), Some(seen)) = (
        &row.glibc,
        obs.wheel
            .as_ref()
            .filter(|w| w.machine == "x86_64")
            .and_then(|w| w.informative_glibc()),
    ) {
        // The column describes PyPI's default build; another build only contradicts it by
        // needing more (a lower floor there says nothing about the default build's).
        if seen != floor && (*default_build || seen > floor) {
            push(
                &row.row,
                "glibc floor",
                floor.to_string(),
                format!("a wheel tagged for glibc {seen}"),
            );
        }
    }
    out
}

/// `TABLE_MISMATCH` warnings for a smoke report of a lock's build; `subject` names where it ran.
/// Nothing when the table has no row for the lock.
pub fn table_mismatches(
    report: &SmokeReport,
    lock: &Lock,
    table: &Table,
    subject: &str,
) -> Vec<Diagnostic> {
    let Some(row) = row_facts(lock, table) else {
        return Vec::new();
    };
    compare(&Observed::from_report(report), &row)
        .iter()
        .map(|m| m.diagnostic(subject))
        .collect()
}
