//! `envbuild table`: show the compatibility table in force, readably or as JSON/TOML; and
//! `envbuild table learn`, which writes a corrected table (stdout or `--out`) and says on stderr
//! what it learned. Writes to stdout, stderr and the `--out` file.

use super::Output;
use crate::cli::{LearnArgs, TableArgs, TableCommand, TableSection};
use crate::core::compat::{Confidence, Table, EMBEDDED};
use crate::core::diag::{exit, Failure};
use std::io::Write;

/// Left-aligned columns separated by two spaces; the header underlined.
pub fn format_columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    out.push_str(&line(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    ));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

fn mark(c: Confidence) -> &'static str {
    match c {
        Confidence::Observed => " [obs]",
        Confidence::Primary => "",
        Confidence::Secondary => " [2nd]",
        Confidence::Unconfirmed => " [?]",
    }
}

fn list<T: ToString>(xs: &[T]) -> String {
    if xs.is_empty() {
        "-".into()
    } else {
        xs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

pub fn torch_text(t: &Table) -> String {
    let rows: Vec<Vec<String>> = t
        .torch
        .iter()
        .map(|r| {
            vec![
                r.version.to_string(),
                format!(
                    "{}-{}",
                    r.python.first().map(|p| p.to_string()).unwrap_or_default(),
                    r.python.last().map(|p| p.to_string()).unwrap_or_default()
                ),
                list(&r.variants),
                format!("{}{}", r.pypi_default, mark(r.pypi_default_confidence)),
                format!("{}{}", r.torchvision, mark(r.torchvision_confidence)),
                format!(
                    "{}{}",
                    r.torchaudio,
                    if r.torchaudio_frozen { "*" } else { "" }
                ),
                list(&r.pytorch_channel),
                format!(
                    "{}{}",
                    list(&r.conda_forge),
                    if r.conda_forge.is_empty() {
                        ""
                    } else {
                        mark(r.conda_forge_confidence)
                    }
                ),
                format!("{}{}", r.glibc, mark(r.glibc_confidence)),
            ]
        })
        .collect();
    format_columns(
        &[
            "torch",
            "python",
            "wheel variants",
            "pypi",
            "torchvision",
            "torchaudio",
            "pytorch channel",
            "conda-forge cuda",
            "glibc",
        ],
        &rows,
    ) + "\n* torchaudio is no longer released per torch version; this release works with it.\n"
}

pub fn cuda_text(t: &Table) -> String {
    let rows: Vec<Vec<String>> = t
        .cuda
        .iter()
        .map(|r| {
            let (linux, windows) = match &r.like {
                Some(l) => (format!("as {l}"), format!("as {l}")),
                None => (
                    r.linux
                        .as_ref()
                        .map(|v| v.to_string())
                        .unwrap_or("-".into()),
                    r.windows
                        .as_ref()
                        .map(|v| v.to_string())
                        .unwrap_or("-".into()),
                ),
            };
            vec![
                r.version.to_string(),
                format!("{linux}{}", mark(r.confidence)),
                windows,
            ]
        })
        .collect();
    let mut out = format_columns(
        &["CUDA toolkit", "Linux driver (native)", "Windows driver"],
        &rows,
    );
    out.push_str(
        "\nMinor-version compatibility floors (the lowest driver that runs an X.y build at all):\n",
    );
    let fam: Vec<Vec<String>> = t
        .cuda_family
        .iter()
        .map(|f| {
            vec![
                format!("{}.x", f.major),
                f.linux.to_string(),
                format!("{}{}", f.windows, mark(f.windows_confidence)),
            ]
        })
        .collect();
    out.push_str(&format_columns(&["family", "Linux", "Windows"], &fam));
    out.push_str("(10.x has no minor-version compatibility: each release needs its own driver.)\n\nDriver branch -> highest CUDA it supports:\n");
    let br: Vec<Vec<String>> = t
        .driver_branch
        .iter()
        .map(|b| {
            vec![
                format!("R{}", b.branch),
                format!("{}{}", b.max_cuda, mark(b.confidence)),
            ]
        })
        .collect();
    out.push_str(&format_columns(&["branch", "max CUDA"], &br));
    out
}

pub fn gpu_text(t: &Table) -> String {
    let rows: Vec<Vec<String>> = t
        .gpu
        .iter()
        .map(|g| {
            let arch = t.arch_row(g.cc);
            vec![
                g.name.clone(),
                g.cc.to_string(),
                arch.map(|a| a.family.clone()).unwrap_or_default(),
                format!("{:?}", g.kind).to_lowercase(),
                g.cpu_arch
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                g.min_driver
                    .as_ref()
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                g.aliases.join(", "),
            ]
        })
        .collect();
    format_columns(
        &[
            "GPU",
            "cc",
            "architecture",
            "kind",
            "cpu",
            "min driver",
            "also",
        ],
        &rows,
    )
}

pub fn python_text(t: &Table) -> String {
    let rows: Vec<Vec<String>> = t
        .python
        .iter()
        .map(|p| {
            let last = t
                .torch
                .iter()
                .rev()
                .find(|r| r.python.contains(&p.version))
                .map(|r| r.version.to_string())
                .unwrap_or("-".into());
            let eol = if p.eol.as_str() <= t.meta.as_of.as_str() {
                " (EOL)"
            } else {
                ""
            };
            vec![p.version.to_string(), format!("{}{eol}", p.eol), last]
        })
        .collect();
    format_columns(&["python", "end of life", "newest torch"], &rows)
}

pub fn channels_text(t: &Table) -> String {
    let rows: Vec<Vec<String>> = t
        .channel
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.last_torch
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or("-".into()),
                c.note.clone(),
            ]
        })
        .collect();
    format_columns(&["channel", "last torch", "note"], &rows)
}

/// `envbuild table learn`: the learned table to stdout or `--out`, its changes to stderr.
fn learn(
    o: &Output,
    table_path: Option<&std::path::Path>,
    args: &LearnArgs,
) -> Result<i32, Failure> {
    let opts = crate::core::learn::LearnOptions {
        date: args.date.clone(),
        image: args.image.clone(),
    };
    let learned = crate::app::learn::learn(table_path, &args.reports, &opts)?;
    match &args.out {
        Some(path) => crate::infra::fs::write_atomic(path, learned.text.as_bytes())?,
        None => o.out(&learned.text)?,
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "learned from {} report file(s):", args.reports.len());
    for c in &learned.changes {
        let _ = writeln!(err, "  {c}");
    }
    if let Some(path) = &args.out {
        let _ = writeln!(
            err,
            "use it with `envbuild --table {} lock SPEC`",
            crate::core::diag::shown(path)
        );
    }
    Ok(exit::OK)
}

/// `envbuild table [SECTION]`, or `table learn`; `table_path` is `--table FILE`, whose text
/// `learn` edits.
pub fn run(
    o: &Output,
    table: &Table,
    table_path: Option<&std::path::Path>,
    args: &TableArgs,
) -> Result<i32, Failure> {
    if let Some(TableCommand::Learn(learn_args)) = &args.command {
        return learn(o, table_path, learn_args);
    }
    if args.toml {
        // The embedded text keeps its comments; an override is re-serialised.
        let text = if Table::parse(EMBEDDED, "embedded").is_ok_and(|e| {
            e.meta.version == table.meta.version && e.torch.len() == table.torch.len()
        }) {
            EMBEDDED.to_string()
        } else {
            toml::to_string(table)
                .map_err(|e| Failure::bug(format!("cannot serialise the table: {e}")))?
        };
        o.out(&text)?;
        return Ok(exit::OK);
    }
    if args.json {
        match args.section {
            None => o.print_json(table)?,
            Some(TableSection::Torch) => {
                o.print_json(&serde_json::json!({"torch": table.torch, "wheel": table.wheel}))?
            }
            Some(TableSection::Cuda) => o.print_json(
                &serde_json::json!({"cuda": table.cuda, "cuda_family": table.cuda_family, "driver_branch": table.driver_branch}),
            )?,
            Some(TableSection::Gpu) => {
                o.print_json(&serde_json::json!({"gpu": table.gpu, "arch": table.arch}))?
            }
            Some(TableSection::Python) => o.print_json(&serde_json::json!({"python": table.python}))?,
            Some(TableSection::Channels) => {
                o.print_json(&serde_json::json!({"channel": table.channel}))?
            }
        }
        return Ok(exit::OK);
    }
    let text = match args.section {
        Some(TableSection::Torch) => torch_text(table),
        Some(TableSection::Cuda) => cuda_text(table),
        Some(TableSection::Gpu) => gpu_text(table),
        Some(TableSection::Python) => python_text(table),
        Some(TableSection::Channels) => channels_text(table),
        None => format!(
            "envbuild compatibility table {} (as of {}): {} torch releases, {} CUDA toolkits, {} GPUs.\n\
             [obs] = observed in a built image, [2nd] = secondary source, [?] = unconfirmed \
             (warns, never fails).\n\
             Sections: `envbuild table torch|cuda|gpu|python|channels`, `--json`, `--toml`.\n\n{}",
            table.meta.version,
            table.meta.as_of,
            table.torch.len(),
            table.cuda.len(),
            table.gpu.len(),
            torch_text(table)
        ),
    };
    o.out(&text)?;
    Ok(exit::OK)
}
