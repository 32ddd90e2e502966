//! The walk over an environment file's dependencies: what was found (each with its input
//! line), the errors, and the notes on what is not carried over as written.
//! This module performs no I/O.

use super::codes::{IMPORT_CHANGED, IMPORT_DROPPED};
use super::platform::{self, Os};
use super::{location, spec_text, ImportOptions, Imported};
use crate::core::compat::Table;
use crate::core::diag::{printable, Code, Diagnostic};
use crate::core::lock::EnvMetadata;
use crate::core::spec::codes::{INVALID_SPEC, UNPINNED_VERSION};

/// An extra package the spec keeps: its normalised name, the spec entry, its input line.
pub(super) struct Extra {
    pub(super) name: String,
    pub(super) entry: String,
    pub(super) line: Option<usize>,
}

/// A torch companion as the file pins it.
#[derive(Default)]
pub(super) struct Companion {
    pub(super) listed: bool,
    pub(super) pin: Option<(String, Option<usize>)>,
}

/// What the dependencies pin, as far as the spec cares.
#[derive(Default)]
pub(super) struct Found {
    pub(super) python: Option<String>,
    pub(super) python_line: Option<usize>,
    pub(super) pytorch: Option<(String, Option<usize>)>,
    /// conda-forge's `pytorch-gpu` metapackage: its version, when pinned.
    pub(super) pytorch_gpu: Option<Option<String>>,
    pub(super) pytorch_channel_selector: Option<String>,
    /// A CUDA selector listed without a version: (the item, its name, its line).
    pub(super) unpinned_selector: Option<(String, String, Option<usize>)>,
    /// The CUDA a pytorch channel build string names (`py3.7_cuda9.0.176_cudnn7.1.2_2`).
    pub(super) build_cuda: Option<String>,
    pub(super) conda_cuda: Option<String>,
    pub(super) torch_pip: Option<(String, Option<usize>)>,
    pub(super) pip_variant: Option<String>,
    pub(super) torchvision: Companion,
    pub(super) torchaudio: Companion,
    pub(super) conda: Vec<Extra>,
    pub(super) pip: Vec<Extra>,
    /// pip's `--index-url`, `--extra-index-url` and `--find-links` locations other than
    /// PyTorch's, each with its input line.
    pub(super) index_url: Option<(String, Option<usize>)>,
    pub(super) extra_index_urls: Vec<(String, Option<usize>)>,
    pub(super) find_links: Vec<(String, Option<usize>)>,
}

impl Found {
    /// The companion `name` names, if it is one.
    pub(super) fn companion(&mut self, name: &str) -> Option<&mut Companion> {
        match name {
            "torchvision" => Some(&mut self.torchvision),
            "torchaudio" => Some(&mut self.torchaudio),
            _ => None,
        }
    }
}

/// The walk: what was found, every problem and every note, in file order.
pub(super) struct Scan<'a> {
    pub(super) file: &'a str,
    pub(super) table: &'a Table,
    /// Packages envbuild added on its own when it rendered the file; they are not carried
    /// over, so that the spec stays as the user wrote it.
    pub(super) auto_added: &'a [String],
    pub(super) found: Found,
    pub(super) diags: Vec<Diagnostic>,
    pub(super) notes: Vec<Diagnostic>,
    /// The operating system the file was exported on, when not Linux.
    pub(super) os: Option<Os>,
    /// The input line of the item being read.
    pub(super) line: Option<usize>,
    items: Vec<(usize, String)>,
    cursor: usize,
}

impl<'a> Scan<'a> {
    pub(super) fn new(
        file: &'a str,
        table: &'a Table,
        auto_added: &'a [String],
        items: Vec<(usize, String)>,
    ) -> Self {
        Scan {
            file,
            table,
            auto_added,
            found: Found::default(),
            diags: Vec::new(),
            notes: Vec::new(),
            os: None,
            line: None,
            items,
            cursor: 0,
        }
    }

    pub(super) fn shown_file(&self) -> String {
        printable(self.file)
    }

    /// Move to the item `s`: the next `- item` line of the text that reads the same.
    pub(super) fn at(&mut self, s: &str) {
        let s = s.trim();
        let hit = self.items[self.cursor..].iter().position(|(_, t)| t == s);
        self.line = hit.map(|i| {
            self.cursor += i + 1;
            self.items[self.cursor - 1].0
        });
    }

    /// An item YAML reads as null: a dash with nothing after it but, usually, a comment (a
    /// package commented out where it stood). Nothing to install; said at its line.
    pub(super) fn null_item(&mut self) {
        let hit = self.items[self.cursor..]
            .iter()
            .position(|(_, t)| t.is_empty() || t.starts_with('#'));
        self.line = hit.map(|i| {
            self.cursor += i + 1;
            self.items[self.cursor - 1].0
        });
        let shown = match self.line.and_then(|_| self.items.get(self.cursor - 1)) {
            Some((_, t)) if !t.is_empty() => format!("- {t}"),
            _ => "-".to_string(),
        };
        self.drop_item(
            &shown,
            "the list item is empty (YAML reads a dash with only a comment after it as null: a package commented out where it stood), so there is no package in it",
        );
    }

    /// An error at the current item.
    pub(super) fn error(&mut self, d: Diagnostic) {
        self.error_at(self.line, d);
    }

    pub(super) fn error_at(&mut self, line: Option<usize>, d: Diagnostic) {
        self.diags.push(d.with_location(location(self.file, line)));
    }

    /// A note (warning) at the current item.
    pub(super) fn note(&mut self, code: Code, message: String) {
        let d = Diagnostic::warning(code, message).with_location(location(self.file, self.line));
        self.notes.push(d);
    }

    /// `item` is not carried over, because `why`.
    pub(super) fn drop_item(&mut self, item: &str, why: &str) {
        self.note(
            IMPORT_DROPPED,
            format!("`{item}` is not carried over: {why}"),
        );
    }

    /// The `prefix:` of an export names the machine's OS.
    pub(super) fn source_os(&mut self, prefix: Option<&str>, line: Option<usize>) {
        if let Some(os) = prefix.and_then(platform::prefix_os) {
            self.os = Some(os);
            self.line = line;
            self.note(
                IMPORT_CHANGED,
                format!(
                    "exported on {} (`prefix: {}`); the spec builds for linux-64, so packages that exist only on {} are left out",
                    os.as_str(),
                    prefix.unwrap_or(""),
                    os.as_str()
                ),
            );
        }
    }

    /// Drops `item` (package `name`) when it exists only on another OS or only describes the
    /// source machine; true when dropped.
    pub(super) fn machine_only(&mut self, item: &str, name: &str) -> bool {
        if let Some(os) = platform::package_os(name) {
            if self.os.is_none() {
                self.os = Some(os);
                self.note(
                    IMPORT_CHANGED,
                    format!("`{item}` exists only on {}: the file comes from a {} machine; the spec builds for linux-64", os.as_str(), os.as_str()),
                );
            }
            self.drop_item(item, &format!("it exists only on {}", os.as_str()));
            return true;
        }
        if let Some(why) = platform::not_carried(name) {
            self.drop_item(item, why);
            return true;
        }
        false
    }

    /// `dep` (package `name`) floats; `how` is the pin operator to suggest.
    pub(super) fn unpinned(&mut self, dep: &str, name: &str, how: &str) {
        let newest = match name {
            "pytorch" | "torch" => self
                .table
                .newest_torch()
                .map(|t| format!("; the newest PyTorch in the table is {}", t.version)),
            _ => None,
        }
        .unwrap_or_default();
        let d = Diagnostic::error(
            UNPINNED_VERSION,
            format!("`{dep}` in {} is not pinned", self.shown_file()),
        )
        .with_hint(format!(
            "pin it, e.g. `{name}{how}<version>`{newest}; `conda env export` writes exact versions"
        ));
        self.error(d);
    }

    /// A direct reference that names no commit or hash.
    pub(super) fn unpinned_reference(&mut self, dep: &str, why: &str) {
        let d = Diagnostic::error(
            UNPINNED_VERSION,
            format!("`{dep}` in {} {why}", self.shown_file()),
        )
        .with_hint(crate::core::spec::PIN_REFERENCE_HINT);
        self.error(d);
    }

    pub(super) fn invalid(&mut self, message: String) {
        let d = Diagnostic::error(INVALID_SPEC, format!("{}: {message}", self.shown_file()));
        self.error(d);
    }

    /// Write the spec, or return every error (with the notes after them).
    pub(super) fn finish(
        mut self,
        name: String,
        channels: &[String],
        meta: &EnvMetadata,
        opts: &ImportOptions,
        lines: spec_text::Lines,
    ) -> Result<Imported, Vec<Diagnostic>> {
        self.pip_over_conda();
        // Notes in the order of the input's lines (file-wide ones first).
        self.notes
            .sort_by_key(|n| n.location.as_ref().map(|l| l.line));
        let torch = super::conda::torch(&mut self);
        if let Some((_, v)) = &torch {
            self.companions(v);
        }
        let (Some((source, pytorch)), Some(python), true) =
            (torch, self.found.python.clone(), self.diags.is_empty())
        else {
            if self.diags.is_empty() {
                self.invalid("incomplete environment".into());
            }
            self.diags.append(&mut self.notes);
            return Err(self.diags);
        };
        let pins = spec_text::Pins {
            file: self.file,
            name,
            python,
            pytorch,
            source,
            channels,
            found: &self.found,
            notes: &self.notes,
            lines,
        };
        let (spec, origins) = spec_text::spec_text(&pins, meta, opts);
        // Whatever came in must make a valid spec (this also refuses unsafe values); its
        // problems point at the input line each value came from.
        match crate::core::resolve::parse_spec(
            &spec,
            crate::core::spec::Format::Toml,
            "",
            self.table,
        ) {
            Ok(_) => Ok(Imported {
                spec,
                notes: self.notes,
            }),
            Err(e) => {
                let mut diags: Vec<Diagnostic> =
                    e.diagnostics
                        .into_iter()
                        .map(|mut d| {
                            let line = d.location.as_ref().and_then(|l| {
                                origins.get(l.line.wrapping_sub(1)).copied().flatten()
                            });
                            d.location = location(self.file, line);
                            d
                        })
                        .collect();
                diags.append(&mut self.notes);
                Err(diags)
            }
        }
    }

    /// A package in both lists: pip installs after conda and replaces its files, so the pip pin
    /// is the one the environment ends with.
    fn pip_over_conda(&mut self) {
        let norm = |n: &str| n.replace('_', "-");
        let pip: Vec<(String, Option<usize>, String)> = self
            .found
            .pip
            .iter()
            .map(|p| (norm(&p.name), p.line, p.entry.clone()))
            .collect();
        let mut dropped = Vec::new();
        self.found
            .conda
            .retain(|c| match pip.iter().find(|(n, _, _)| *n == norm(&c.name)) {
                Some((_, pl, pe)) => {
                    dropped.push((c.entry.clone(), c.line, *pl, pe.clone()));
                    false
                }
                None => true,
            });
        for (entry, line, pip_line, pip_entry) in dropped {
            self.line = line;
            let at = pip_line.map(|l| format!(" (line {l})")).unwrap_or_default();
            self.drop_item(
                &entry,
                &format!("pip also installs it as `{pip_entry}`{at}, after conda, so the pip pin is the one the environment ends with"),
            );
        }
    }

    /// A pinned torchvision/torchaudio other than the release for this torch: the lock
    /// installs the matching one; say so.
    fn companions(&mut self, torch: &str) {
        let Some(row) =
            crate::core::version::Version::parse(torch).and_then(|v| self.table.torch_row(&v))
        else {
            return;
        };
        let want = [
            (
                "torchvision",
                row.torchvision.clone(),
                row.torchvision_conda.clone(),
            ),
            (
                "torchaudio",
                row.torchaudio.clone(),
                row.torchaudio_conda.clone(),
            ),
        ];
        for (name, pip_v, conda_v) in want {
            let Some(c) = self.found.companion(name) else {
                continue;
            };
            let Some((v, line)) = c.pin.clone() else {
                continue;
            };
            let v_base = v.split('+').next().unwrap_or(&v).to_string();
            if v_base != pip_v && Some(&v_base) != conda_v.as_ref() {
                self.line = line;
                self.note(
                    IMPORT_CHANGED,
                    format!("{name} {v} is not the release for torch {torch}; the lock installs {name} {pip_v}, the one built for it"),
                );
            }
        }
    }
}
