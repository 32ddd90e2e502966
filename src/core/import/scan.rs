//! The walk over an environment file's dependencies: what was found (each with its input
//! line, see `found`), the errors, and the notes on what is not carried over as written.
//! This module performs no I/O.

use super::codes::{IMPORT_CHANGED, IMPORT_DROPPED};
use super::found::Found;
use super::location;
use super::platform::{self, Os};
use crate::core::compat::Table;
use crate::core::diag::{printable, Code, Diagnostic};
use crate::core::spec::codes::{INVALID_SPEC, UNPINNED_VERSION};

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
    /// The target's machine, as PEP 508 markers name it (`x86_64`, `aarch64`).
    pub(super) machine: &'static str,
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
            machine: "x86_64",
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
    pub(super) fn machine_only(
        &mut self,
        item: &str,
        name: &str,
        installer: platform::Installer,
    ) -> bool {
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
        if let Some(why) = platform::not_carried(name, installer) {
            self.drop_item(item, why);
            return true;
        }
        false
    }

    /// The file cannot say which Python (`why`): the spec takes any (`python = "*"`), which
    /// the lock chooses for the torch and the target; said at the current line.
    pub(super) fn any_python(&mut self, why: &str) {
        self.found.python = Some(crate::core::spec::ANY_VERSION.into());
        self.found.python_line = self.line;
        self.note(
            IMPORT_CHANGED,
            format!("{why}: the spec writes `python = \"*\"`, and the lock chooses one for the torch and the target"),
        );
    }

    /// A direct reference that names no commit or hash.
    pub(super) fn unpinned_reference(&mut self, dep: &str, why: &str) {
        let d = Diagnostic::error(
            UNPINNED_VERSION,
            format!("`{dep}` in {} {why}", self.shown_file()),
        )
        .with_hint(crate::core::spec::pin_reference_hint(dep));
        self.error(d);
    }

    pub(super) fn invalid(&mut self, message: String) {
        let d = Diagnostic::error(INVALID_SPEC, format!("{}: {message}", self.shown_file()));
        self.error(d);
    }

    /// A line that repeats an earlier one exactly (`einops==0.4.1` twice): pip and conda
    /// install it once, so the spec lists it once; the repeat is a note. Two different pins of
    /// one package stay, for the spec's own check to refuse.
    pub(super) fn repeats(&mut self) {
        let mut dropped = Vec::new();
        for list in [&mut self.found.conda, &mut self.found.pip] {
            let mut seen: Vec<(String, Option<usize>)> = Vec::new();
            list.retain(|x| match seen.iter().find(|(e, _)| *e == x.entry) {
                Some((_, first)) => {
                    dropped.push((x.entry.clone(), x.line, *first));
                    false
                }
                None => {
                    seen.push((x.entry.clone(), x.line));
                    true
                }
            });
        }
        for (entry, line, first) in dropped {
            self.line = line;
            let at = first.map(|l| format!(" (line {l})")).unwrap_or_default();
            self.drop_item(
                &entry,
                &format!("it repeats an earlier line{at} exactly; the spec lists it once"),
            );
        }
    }

    /// A package in both lists: pip installs after conda and replaces its files, so the pip pin
    /// is the one the environment ends with.
    pub(super) fn pip_over_conda(&mut self) {
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
    pub(super) fn companions(&mut self, torch: &str) {
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
