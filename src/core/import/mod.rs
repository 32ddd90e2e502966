//! `envbuild import`: turn a conda environment.yml (hand-written, `conda env export` with or
//! without `--from-history`, one envbuild rendered, or a pip `requirements.txt`) into a spec.
//! The file's own constraints are kept as written: ranges stay ranges, a bare name is any
//! version (`*`), for the resolver (core keys) or the closure (extras) to choose within.
//! Nothing is changed or left out silently: every line not carried over as written becomes a
//! note, both on stderr and as a comment in the spec; what cannot become a spec is refused at
//! its line.
//! The result is re-validated as a spec before it is returned. This module performs no I/O.
//!
//! The pipeline: parse the YAML document (`env_file`), walk its dependencies (`scan`),
//! classifying the conda (`conda`) and pip (`pip`) ones into what they pin (`found`), each with
//! its line in the input, drop what only describes the source machine (`platform`), then, here,
//! decide the source, write the spec text (`spec_text`), and parse that text as a spec.

mod conda;
mod env_file;
mod found;
mod pip;
mod platform;
mod requirements;
mod scan;
mod spec_text;

use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Location};
use crate::core::lock::EnvMetadata;
use crate::core::resolve::choose::codes::NO_MATCHING_BUILD;
use env_file::Dep;
use scan::Scan;

/// Diagnostic codes of import notes (warnings: the import still succeeds), declared in the one
/// registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::import::*;
}

/// Options from the command line that environment.yml cannot carry.
#[derive(Debug, Default, Clone)]
pub struct ImportOptions {
    pub driver: Option<String>,
    pub gpus: Vec<String>,
    /// The Python of a requirements.txt (which cannot name one).
    pub python: Option<String>,
}

/// A successful import: the spec text and the notes on what was changed or left out (also
/// written as a comment block at the top of the spec).
#[derive(Debug, Clone)]
pub struct Imported {
    pub spec: String,
    pub notes: Vec<Diagnostic>,
}

/// Convert; `file` names the input in messages (a name ending in `.txt` is read as a pip
/// requirements file). On failure, the errors followed by the notes gathered so far.
pub fn import(
    text: &str,
    file: &str,
    table: &Table,
    opts: &ImportOptions,
) -> Result<Imported, Vec<Diagnostic>> {
    if file.ends_with(".txt") {
        return requirements::import(text, file, table, opts);
    }
    let env = env_file::parse(text, file)?;
    let meta = env_file::metadata(text);
    let auto_added = meta
        .as_ref()
        .map(|m| m.auto_added.clone())
        .unwrap_or_default();
    let mut scan = Scan::new(file, table, &auto_added, env_file::item_lines(text));
    if meta.as_ref().is_some_and(|m| m.platform == "linux-aarch64") {
        scan.machine = "aarch64";
    }
    scan.source_os(env.prefix.as_deref(), env_file::key_line(text, "prefix"));
    let channels_line = env_file::key_line(text, "channels");
    for c in &env.channels {
        if let Some(d) = crate::core::resolve::insecure_source("channels", c) {
            scan.notes
                .push(d.with_location(location(file, channels_line)));
        }
    }
    for dep in &env.dependencies {
        match dep {
            None => scan.null_item(),
            Some(Dep::Conda(s)) => conda::dep(&mut scan, s),
            Some(Dep::Pip { pip }) => {
                for line in pip.iter().flatten() {
                    match line {
                        Some(line) => {
                            scan.at(line);
                            pip::line(&mut scan, line);
                        }
                        None => scan.null_item(),
                    }
                }
            }
        }
    }
    if scan.found.python.is_none() {
        scan.line = env_file::key_line(text, "dependencies");
        scan.any_python("the file names no python");
    }
    let meta = meta.unwrap_or_else(|| EnvMetadata {
        platform: "linux-64".into(),
        ..Default::default()
    });
    let name = env.name.clone().unwrap_or_else(|| "imported-env".into());
    let lines = spec_text::Lines {
        name: env_file::key_line(text, "name"),
        channels: channels_line,
    };
    finish(scan, name, &env.channels, &meta, opts, lines)
}

/// Write the spec from what the walk found, or return every error (with the notes after them).
fn finish(
    mut scan: Scan,
    name: String,
    channels: &[String],
    meta: &EnvMetadata,
    opts: &ImportOptions,
    lines: spec_text::Lines,
) -> Result<Imported, Vec<Diagnostic>> {
    scan.repeats();
    scan.pip_over_conda();
    // Notes in the order of the input's lines (file-wide ones first).
    scan.notes
        .sort_by_key(|n| n.location.as_ref().map(|l| l.line));
    let torch = conda::torch(&mut scan, channels);
    if let Some((_, v)) = &torch {
        scan.companions(v);
    }
    let (Some((source, pytorch)), Some(python), true) =
        (torch, scan.found.python.clone(), scan.diags.is_empty())
    else {
        if scan.diags.is_empty() {
            scan.invalid("incomplete environment".into());
        }
        scan.diags.append(&mut scan.notes);
        return Err(scan.diags);
    };
    let pins = spec_text::Pins {
        file: scan.file,
        name,
        python,
        pytorch,
        source,
        channels,
        found: &scan.found,
        notes: &scan.notes,
        lines,
    };
    let (spec, origins) = spec_text::spec_text(&pins, meta, opts);
    // Whatever came in must make a valid spec (this also refuses unsafe values); its
    // problems point at the input line each value came from.
    match crate::core::resolve::parse_spec(&spec, crate::core::spec::Format::Toml, "", scan.table) {
        Ok(_) => Ok(Imported {
            spec,
            notes: scan.notes,
        }),
        Err(e) => {
            // Nothing the target allows satisfies the file: said at its torch line.
            let torch_line = scan
                .found
                .pytorch
                .as_ref()
                .or(scan.found.torch_pip.as_ref())
                .and_then(|p| p.1);
            let mut diags: Vec<Diagnostic> = e
                .diagnostics
                .into_iter()
                .map(|mut d| {
                    let line = d
                        .location
                        .as_ref()
                        .and_then(|l| origins.get(l.line.wrapping_sub(1)).copied().flatten())
                        .or(torch_line.filter(|_| d.code == NO_MATCHING_BUILD));
                    d.location = location(scan.file, line);
                    d
                })
                .collect();
            diags.append(&mut scan.notes);
            Err(diags)
        }
    }
}

/// A location in the input file.
fn location(file: &str, line: Option<usize>) -> Option<Location> {
    line.map(|line| Location {
        file: file.to_string(),
        line,
        column: 1,
    })
}

#[cfg(test)]
mod tests;
