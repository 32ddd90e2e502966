//! `envbuild table learn`: passing smoke reports of PyPI or PyTorch-index wheels (Linux x86_64)
//! turned into a corrected table. The output is the whole base table, its text kept (comments
//! included) with only the learned rows rewritten: the `[[wheel]]` row's architectures, PTX,
//! cuDNN and NCCL, the `[[torch]]` row's Pythons and glibc floor, each marked `observed` and
//! citing a new `[sources]` entry that names the image and the date. Deterministic: no clock
//! (the date is the report's), rows and sources in a fixed order. This module performs no I/O.

use super::{codes, first_three, is_date, Observed};
use crate::core::compat::{variant_of, Table};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::report::Verdict;
use crate::core::smoke::SmokeReport;
use crate::core::version::{Cc, Version};
use std::collections::{BTreeMap, BTreeSet};

/// One report to learn from.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// The file, and the image inside it for an `image`/`test` verdict: `r.json (img:tag)`.
    pub origin: String,
    /// The image it ran in, when the file says.
    pub image: Option<String>,
    /// Whether the smoke test passed (every required check, and the exit status when known).
    pub passed: bool,
    pub report: SmokeReport,
}

/// What the command line adds for reports that do not say.
#[derive(Debug, Clone, Default)]
pub struct LearnOptions {
    /// `--date`: for reports that carry no date.
    pub date: Option<String>,
    /// `--image`: for reports that do not name their image (`envbuild smoke --json`).
    pub image: Option<String>,
}

/// The learned table and what changed in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// The whole table, for `--table FILE`.
    pub text: String,
    /// One line per learned fact, sorted: `[[wheel]] torch 2.14 cu130: PTX compute_120 -> none`.
    pub changes: Vec<String>,
}

fn invalid(message: String, hint: &str) -> Diagnostic {
    Diagnostic::error(codes::LEARN_INPUT_INVALID, message).with_hint(hint)
}

/// Read a report file: a smoke report (`envbuild smoke --json`, the script's own output) or the
/// `--json` verdict of `envbuild image`/`envbuild test`, one report per image.
pub fn parse_reports(text: &str, origin: &str) -> Result<Vec<ReportInput>, Failure> {
    let hint = "pass the `--json` output of `envbuild smoke`, `envbuild test` or `envbuild image`";
    let bad = |why: String| Failure::one(invalid(format!("`{origin}`: {why}"), hint));
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    if doc.get("schema").is_some() {
        let report: SmokeReport =
            serde_json::from_value(doc).map_err(|e| bad(format!("not a smoke report ({e})")))?;
        let passed = report.status == Verdict::Pass && Verdict::of(&report.checks) == Verdict::Pass;
        return Ok(vec![ReportInput {
            origin: origin.to_string(),
            image: None,
            passed,
            report,
        }]);
    }
    let Some(entries) = doc.get("smoke").and_then(|s| s.as_array()) else {
        return Err(bad(
            "neither a smoke report nor an image/test verdict with smoke reports".into(),
        ));
    };
    let mut out = Vec::new();
    for e in entries {
        let image = e.get("image").and_then(|i| i.as_str()).map(str::to_string);
        let name = image.clone().unwrap_or_else(|| "?".into());
        let Some(r) = e.get("report") else {
            return Err(bad(format!(
                "the smoke test of `{name}` gave no report (it did not run)"
            )));
        };
        let report: SmokeReport = serde_json::from_value(r.clone()).map_err(|err| {
            bad(format!(
                "the report of `{name}` is not a smoke report ({err})"
            ))
        })?;
        let exit_ok = e
            .get("exit_code")
            .and_then(|c| c.as_i64())
            .is_none_or(|c| c == 0);
        let passed = e.get("passed").and_then(|p| p.as_bool()) == Some(true)
            && exit_ok
            && report.status == Verdict::Pass
            && Verdict::of(&report.checks) == Verdict::Pass;
        out.push(ReportInput {
            origin: format!("{origin} ({name})"),
            image,
            passed,
            report,
        });
    }
    if out.is_empty() {
        return Err(bad("it holds no smoke report".into()));
    }
    Ok(out)
}

/// What one report teaches about its wheel.
#[derive(Debug, Clone)]
struct Fact {
    origin: String,
    /// The `[sources]` key and text citing the report.
    source: (String, String),
    date: String,
    torch: Version,
    series: Version,
    variant: String,
    cudnn: Option<Version>,
    nccl: Option<Version>,
    arch: Vec<Cc>,
    ptx: Vec<Cc>,
    python: Version,
    glibc: Option<Version>,
}

/// A report with a fact that is there but malformed is refused whole, each such fact named:
/// learning from the rest of it would record the garbage's absence as an observation.
fn refuse_malformed(origin: &str, report: &SmokeReport) -> Result<(), Vec<Diagnostic>> {
    let malformed = super::malformed_facts(report);
    if malformed.is_empty() {
        return Ok(());
    }
    Err(malformed
        .into_iter()
        .map(|m| {
            invalid(
                format!("`{origin}`: {m}; the whole report is refused"),
                "a report envbuild's smoke test wrote is never malformed: re-run the smoke \
                 test, and learn from its own output",
            )
        })
        .collect())
}

/// The report's facts, or every reason it cannot be learned from.
fn fact_of(
    input: &ReportInput,
    opts: &LearnOptions,
    table: &Table,
) -> Result<Fact, Vec<Diagnostic>> {
    let o = &input.origin;
    let obs = Observed::from_report(&input.report);
    let rerun = "re-run the smoke test with this envbuild (`--retest` if its verdict was \
                 reused): its report records every fact `table learn` needs";
    if !input.passed {
        return Err(vec![invalid(
            format!(
                "`{o}` did not pass its smoke test: a failing build proves nothing about the table"
            ),
            "fix the environment first, or learn only from the reports that passed",
        )]);
    }
    refuse_malformed(o, &input.report)?;
    let mut errs = Vec::new();
    let mut need =
        |what: &str, hint: &str| errs.push(invalid(format!("`{o}` does not say {what}"), hint));
    let date = obs.date.clone().or_else(|| opts.date.clone());
    if date.is_none() {
        need(
            "when it ran",
            "pass `--date YYYY-MM-DD` (the day the report was made)",
        );
    }
    let image = input.image.clone().or_else(|| opts.image.clone());
    if image.is_none() {
        need(
            "which image it ran in",
            "pass `--image NAME` (what the report ran in)",
        );
    }
    if obs.torch.is_none() {
        need("which torch is installed", rerun);
    }
    if obs.cuda.is_none() {
        need(
            "a CUDA version (a CPU build has no table row to correct)",
            rerun,
        );
    }
    if obs.arch.is_none() {
        need("the build's architecture list", rerun);
    }
    if obs.python.is_none() {
        need("the Python version", rerun);
    }
    let wheel_glibc = match &obs.wheel {
        None => {
            need(
                "that torch came from a wheel (no wheel tag)",
                "`table learn` corrects the rows of PyPI and PyTorch-index wheels; re-run the \
                 smoke test with this envbuild (`--retest` if its verdict was reused), which \
                 records the wheel's tags",
            );
            None
        }
        Some(w) if w.glibc.is_none() => {
            errs.push(invalid(
                format!(
                    "`{o}`: torch was built for this machine (a `linux_{}` wheel: conda-forge or \
                     a source build), not a PyPI or PyTorch-index wheel",
                    w.machine
                ),
                "`table learn` corrects the rows of PyPI and PyTorch-index wheels only",
            ));
            None
        }
        Some(w) if w.machine != "x86_64" => {
            errs.push(invalid(
                format!(
                    "`{o}`: a Linux {} wheel; `table learn` corrects the Linux x86_64 rows",
                    w.machine
                ),
                "learn from a report of an x86_64 image",
            ));
            None
        }
        Some(w) => w.informative_glibc().cloned(),
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    let (Some(date), Some(image), Some(torch), Some(cuda), Some((arch, ptx)), Some(python)) =
        (date, image, obs.torch, obs.cuda, obs.arch, obs.python)
    else {
        return Err(vec![Diagnostic::error(
            crate::core::diag::codes::INTERNAL,
            format!("`{o}`: a fact went missing after it was checked"),
        )]);
    };
    let series = Version::parse(&torch.major_minor()).unwrap_or_else(|| torch.clone());
    let variant = variant_of(&cuda);
    if table.torch_row(&torch).is_none() || table.wheel_row(&series, &variant).is_none() {
        return Err(vec![invalid(
            format!("`{o}`: the table has no row for torch {torch} {variant}"),
            "`table learn` corrects rows the table has; a new release or variant needs a new \
             envbuild (or an edited `--table`)",
        )]);
    }
    Ok(Fact {
        origin: o.clone(),
        source: source_entry(&image, &date),
        date,
        torch,
        series,
        variant,
        cudnn: obs.cudnn,
        nccl: obs.nccl,
        arch,
        ptx,
        python,
        glibc: wheel_glibc,
    })
}

/// The `[sources]` key and text that cite an observation: `observed-2026-12-01-img-tag`.
fn source_entry(image: &str, date: &str) -> (String, String) {
    let slug: String = image
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    (
        format!("observed-{date}-{slug}"),
        format!(
            "Observed by `envbuild table learn` in a smoke report of image `{image}` run on {date}"
        ),
    )
}

/// Learn from `inputs` on top of the table `base_text` (the embedded table or `--table FILE`).
pub fn learn(
    base_text: &str,
    base_origin: &str,
    inputs: &[ReportInput],
    opts: &LearnOptions,
) -> Result<Learned, Failure> {
    let base = Table::parse(base_text, base_origin)?;
    if inputs.is_empty() {
        return Err(Failure::usage(
            "no report to learn from",
            Some("pass one or more REPORT.json files".into()),
        ));
    }
    if let Some(d) = opts.date.as_deref().filter(|d| !is_date(d)) {
        return Err(Failure::usage(
            format!("--date `{d}` is not a date"),
            Some("write it as YYYY-MM-DD".into()),
        ));
    }
    let mut facts = Vec::new();
    let mut errs = Vec::new();
    for input in inputs {
        match fact_of(input, opts, &base) {
            Ok(f) => facts.push(f),
            Err(e) => errs.extend(e),
        }
    }
    if !errs.is_empty() {
        return Err(Failure::new(errs));
    }
    let wheels = group_wheels(&facts)?;
    let mut doc: toml_edit::DocumentMut = base_text.parse().map_err(|e| {
        Failure::bug(format!(
            "{base_origin} parsed as a table but not as TOML: {e}"
        ))
    })?;
    let mut changes = Vec::new();
    for ((series, variant), w) in &wheels {
        edit_wheel(&mut doc, series, variant, w, &mut changes);
    }
    edit_torch_rows(&mut doc, &base, &facts, &mut changes);
    edit_sources_and_meta(&mut doc, &base, &facts);
    let text = doc.to_string();
    Table::parse(&text, "the learned table")
        .map_err(|f| Failure::bug(format!("the learned table breaks an invariant: {f}")))?;
    changes.sort();
    changes.dedup();
    Ok(Learned { text, changes })
}

/// What every report of one wheel row agrees on.
struct WheelFacts {
    arch: Vec<Cc>,
    ptx: Vec<Cc>,
    cudnn: Option<Version>,
    nccl: Option<Version>,
    sources: BTreeSet<String>,
}

/// One entry per wheel row; reports of the same row must agree (the table holds one list per
/// torch series and variant, so 2.14.0 and 2.14.1 reports must agree too).
fn group_wheels(facts: &[Fact]) -> Result<BTreeMap<(Version, String), WheelFacts>, Failure> {
    let mut out: BTreeMap<(Version, String), (WheelFacts, String)> = BTreeMap::new();
    let mut errs = Vec::new();
    for f in facts {
        let key = (f.series.clone(), f.variant.clone());
        let Some((w, first)) = out.get_mut(&key) else {
            let w = WheelFacts {
                arch: f.arch.clone(),
                ptx: f.ptx.clone(),
                cudnn: f.cudnn.clone(),
                nccl: f.nccl.clone(),
                sources: BTreeSet::from([f.source.0.clone()]),
            };
            out.insert(key, (w, f.origin.clone()));
            continue;
        };
        if w.arch != f.arch
            || w.ptx != f.ptx
            || both_and_differ(&w.cudnn, &f.cudnn)
            || both_and_differ(&w.nccl, &f.nccl)
        {
            errs.push(invalid(
                format!(
                    "`{first}` and `{}` disagree about torch {} {}",
                    f.origin, f.series, f.variant
                ),
                "the table holds one set of facts per torch series and variant: learn from the \
                 reports of one build",
            ));
            continue;
        }
        w.cudnn = w.cudnn.take().or_else(|| f.cudnn.clone());
        w.nccl = w.nccl.take().or_else(|| f.nccl.clone());
        w.sources.insert(f.source.0.clone());
    }
    if !errs.is_empty() {
        return Err(Failure::new(errs));
    }
    Ok(out.into_iter().map(|(k, (w, _))| (k, w)).collect())
}

/// Two reports contradict each other only on a fact both give.
fn both_and_differ(a: &Option<Version>, b: &Option<Version>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x != y)
}

fn string_array<I: IntoIterator<Item = String>>(items: I) -> toml_edit::Item {
    toml_edit::value(items.into_iter().collect::<toml_edit::Array>())
}

fn ccs(list: &[Cc]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

/// The row's `source` with `keys` added (each once, in order).
fn add_sources(row: &mut toml_edit::Table, keys: &BTreeSet<String>) {
    let current = row
        .get("source")
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    let mut words: Vec<String> = current.split_whitespace().map(str::to_string).collect();
    for k in keys {
        if !words.contains(k) {
            words.push(k.clone());
        }
    }
    row["source"] = toml_edit::value(words.join(" "));
}

/// Every `[[NAME]]` row of the document.
fn rows_mut<'a>(
    doc: &'a mut toml_edit::DocumentMut,
    name: &str,
) -> impl Iterator<Item = &'a mut toml_edit::Table> {
    doc.get_mut(name)
        .and_then(|i| i.as_array_of_tables_mut())
        .into_iter()
        .flat_map(|a| a.iter_mut())
}

fn version_at(row: &toml_edit::Table, key: &str) -> Option<Version> {
    row.get(key)
        .and_then(|v| v.as_str())
        .and_then(Version::parse)
}

/// Rewrite one `[[wheel]]` row with what its reports observed.
fn edit_wheel(
    doc: &mut toml_edit::DocumentMut,
    series: &Version,
    variant: &str,
    w: &WheelFacts,
    changes: &mut Vec<String>,
) {
    let Some(row) = rows_mut(doc, "wheel").find(|r| {
        version_at(r, "torch").as_ref() == Some(series)
            && r.get("variant").and_then(|v| v.as_str()) == Some(variant)
    }) else {
        return;
    };
    let name = format!("[[wheel]] torch {series} {variant}");
    let list = |r: &toml_edit::Table, k: &str| -> Vec<Cc> {
        let mut v: Vec<Cc> = r
            .get(k)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().and_then(Cc::parse))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    };
    for (key, fact, new, ptx) in [
        ("arch", "cubins", &w.arch, false),
        ("ptx", "PTX", &w.ptx, true),
    ] {
        let old = list(row, key);
        changes.push(if old == *new {
            format!("{name}: {fact} {} confirmed", super::arch_text(new, ptx))
        } else {
            format!(
                "{name}: {fact} {} -> {}",
                super::arch_text(&old, ptx),
                super::arch_text(new, ptx)
            )
        });
        row[key] = string_array(ccs(new));
    }
    row.remove("unconfirmed_arch");
    row["confidence"] = toml_edit::value("observed");
    row["ptx_confidence"] = toml_edit::value("observed");
    if let Some(seen) = &w.cudnn {
        let old = version_at(row, "cudnn");
        if old
            .as_ref()
            .is_none_or(|o| first_three(o) != first_three(seen))
        {
            changes.push(format!(
                "{name}: cuDNN {} -> {seen}",
                old.map_or("-".into(), |o| o.to_string())
            ));
            row["cudnn"] = toml_edit::value(seen.to_string());
        }
        row["cudnn_confidence"] = toml_edit::value("observed");
    }
    if let Some(seen) = &w.nccl {
        let old = version_at(row, "nccl");
        if old.as_ref() != Some(seen) {
            changes.push(format!(
                "{name}: NCCL {} -> {seen}",
                old.map_or("-".into(), |o| o.to_string())
            ));
            row["nccl"] = toml_edit::value(seen.to_string());
        }
    }
    add_sources(row, &w.sources);
}

/// Add the Pythons torch ran on to its `[[torch]]` row, and take the glibc floor its wheel's tag
/// gives: from PyPI's default build as it is (that is the build the column describes), from
/// another build only when higher (a stricter floor is safe for every build).
fn edit_torch_rows(
    doc: &mut toml_edit::DocumentMut,
    base: &Table,
    facts: &[Fact],
    changes: &mut Vec<String>,
) {
    let mut by_torch: BTreeMap<Version, Vec<&Fact>> = BTreeMap::new();
    for f in facts {
        by_torch.entry(f.torch.clone()).or_default().push(f);
    }
    for (torch, fs) in by_torch {
        let Some(t) = base.torch_row(&torch) else {
            continue;
        };
        let Some(row) =
            rows_mut(doc, "torch").find(|r| version_at(r, "version").as_ref() == Some(&torch))
        else {
            continue;
        };
        let name = format!("[[torch]] {torch}");
        let mut keys = BTreeSet::new();
        let mut python: Vec<Version> = t.python.clone();
        for f in &fs {
            if !python.contains(&f.python) && !t.python_experimental.contains(&f.python) {
                python.push(f.python.clone());
                changes.push(format!("{name}: wheels for Python {} added", f.python));
                keys.insert(f.source.0.clone());
            }
        }
        python.sort();
        python.dedup();
        if python.len() != t.python.len() {
            row["python"] = string_array(python.iter().map(ToString::to_string));
        }
        let default_floor = fs
            .iter()
            .filter(|f| f.variant == t.pypi_default)
            .filter_map(|f| f.glibc.clone())
            .max();
        let other_floor = fs
            .iter()
            .filter_map(|f| f.glibc.clone())
            .max()
            .filter(|g| *g > t.glibc);
        if let Some(floor) = other_floor.max(default_floor) {
            changes.push(if floor == t.glibc {
                format!("{name}: glibc floor {floor} confirmed")
            } else {
                format!("{name}: glibc floor {} -> {floor}", t.glibc)
            });
            row["glibc"] = toml_edit::value(floor.to_string());
            row["glibc_confidence"] = toml_edit::value("observed");
            keys.extend(
                fs.iter()
                    .filter(|f| f.glibc.is_some())
                    .map(|f| f.source.0.clone()),
            );
        }
        if !keys.is_empty() {
            add_sources(row, &keys);
        }
    }
}

/// Cite every report in `[sources]`, and give the table a version that says it was learned.
fn edit_sources_and_meta(doc: &mut toml_edit::DocumentMut, base: &Table, facts: &[Fact]) {
    if let Some(sources) = doc.get_mut("sources").and_then(|s| s.as_table_like_mut()) {
        let entries: BTreeMap<&String, &String> =
            facts.iter().map(|f| (&f.source.0, &f.source.1)).collect();
        for (k, v) in entries {
            sources.insert(k, toml_edit::value(v.as_str()));
        }
    }
    let newest = facts.iter().map(|f| f.date.as_str()).max().unwrap_or("");
    let stem = base
        .meta
        .version
        .split("+learned")
        .next()
        .unwrap_or(&base.meta.version);
    if let Some(meta) = doc.get_mut("meta").and_then(|m| m.as_table_like_mut()) {
        meta.insert(
            "version",
            toml_edit::value(format!("{stem}+learned.{newest}")),
        );
    }
}
