//! File helpers: bounded reads and atomic writes. This module performs file I/O.

use crate::core::diag::{Code, Diagnostic, Failure};
use std::io::Write;
use std::path::Path;

/// Inputs larger than this are refused before parsing: no spec or lock is anywhere near it.
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// What kind of file is read: a refusal (too large, binary, a directory) carries the code and
/// hint of that kind, so a bad lock is `INVALID_LOCK` and a bad table `TABLE_INVALID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Spec,
    /// A conda environment.yml for `import`.
    EnvironmentFile,
    Lock,
    Table,
    Expectations,
    Template,
    /// A smoke report (or an `image`/`test` verdict) for `table learn`.
    Report,
}

impl Input {
    fn code(self) -> Code {
        match self {
            Input::Spec | Input::EnvironmentFile => crate::core::spec::codes::INVALID_SPEC,
            Input::Lock => crate::core::lock::INVALID_LOCK,
            Input::Table => crate::core::compat::TABLE_INVALID,
            Input::Expectations => crate::core::smoke::codes::INVALID_EXPECTATIONS,
            Input::Template => crate::core::render::codes::TEMPLATE_ERROR,
            Input::Report => crate::core::learn::codes::LEARN_INPUT_INVALID,
        }
    }

    /// (what it is called, how big it usually is, what it is made of), for hints.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Input::Spec => ("spec", "a few hundred bytes", "a TOML or YAML text file"),
            Input::EnvironmentFile => (
                "environment file",
                "a few kilobytes",
                "a conda environment.yml (YAML text)",
            ),
            Input::Lock => (
                "lock",
                "a few kilobytes",
                "a TOML text file written by `envbuild lock`",
            ),
            Input::Table => (
                "compatibility table",
                "under 100 kilobytes",
                "a TOML text file like `envbuild table --toml`",
            ),
            Input::Expectations => (
                "expectations file",
                "under a kilobyte",
                "a JSON text file like a rendered envbuild/expect.json",
            ),
            Input::Template => (
                "template",
                "a few kilobytes",
                "a minijinja text file like `envbuild templates dump DIR` writes",
            ),
            Input::Report => (
                "smoke report",
                "tens of kilobytes",
                "the JSON text `envbuild smoke --json` (or `test`/`image --json`) prints",
            ),
        }
    }
}

/// Read a user file as UTF-8 text, refusing huge and binary files with a clear error.
pub fn read_text(path: &Path, kind: Input) -> Result<String, Failure> {
    let (name, size, format) = kind.words();
    let refuse = |message: String, hint: String| {
        Failure::one(Diagnostic::error(kind.code(), message).with_hint(hint))
    };
    let meta = std::fs::metadata(path).map_err(|e| Failure::io(path, &e))?;
    if meta.is_dir() {
        return Err(refuse(
            format!("`{}` is a directory, not a file", path.display()),
            format!("pass the {name} file itself"),
        ));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(refuse(
            format!(
                "`{}` is {} bytes; envbuild reads files of at most {} bytes",
                path.display(),
                meta.len(),
                MAX_INPUT_BYTES
            ),
            format!("is this the right file? a {name} is {size}"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Failure::io(path, &e))?;
    String::from_utf8(bytes).map_err(|e| {
        refuse(
            format!(
                "`{}` is not UTF-8 text (invalid byte at offset {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
            format!("a {name} is {format}"),
        )
    })
}

/// Read a `--templates DIR` into memory: every regular file directly in DIR whose name does not
/// start with `.`, each through [`read_text`]. Symlinks and subdirectories are not followed (a
/// template cannot pull in a file from outside DIR).
pub fn read_template_dir(dir: &Path) -> Result<crate::core::render::TemplateOverrides, Failure> {
    let not_a_dir = || {
        Failure::one(
            Diagnostic::error(
                crate::core::render::codes::TEMPLATE_ERROR,
                format!("`{}` is not a directory of templates", dir.display()),
            )
            .with_hint("create one with `envbuild templates dump DIR`"),
        )
    };
    if !dir.is_dir() {
        return Err(not_a_dir());
    }
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Failure::io(dir, &e))? {
        let entry = entry.map_err(|e| Failure::io(dir, &e))?;
        let file_type = entry
            .file_type()
            .map_err(|e| Failure::io(&entry.path(), &e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !file_type.is_file() || name.starts_with('.') {
            continue;
        }
        files.insert(name, read_text(&entry.path(), Input::Template)?);
    }
    Ok(crate::core::render::TemplateOverrides {
        origin: dir.display().to_string(),
        files,
    })
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, fsync, rename.
/// On any error nothing is left at `path` that was not there before.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    write_all_atomic(&[(path.to_path_buf(), contents.to_vec())])
}

/// Write several files so that either all of them are written or none is changed: every file is
/// first written to a temporary sibling, and only when all succeeded are they renamed in place.
/// A file whose contents are already on disk is left untouched (its mtime too).
///
/// Atomic against errors and interruption (a reader sees the old file or the new one, never a
/// part). Like cargo with Cargo.lock, envbuild does not fsync: surviving power loss is the file
/// system's job, and an fsync costs more than the whole resolution.
pub fn write_all_atomic(files: &[(std::path::PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    let mut staged = Vec::with_capacity(files.len());
    for (path, contents) in files {
        if std::fs::read(path).is_ok_and(|old| old == *contents) {
            continue;
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(|e| Failure::io(dir, &e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Failure::io(dir, &e))?;
        tmp.write_all(contents).map_err(|e| Failure::io(path, &e))?;
        set_mode(tmp.as_file(), path).map_err(|e| Failure::io(path, &e))?;
        staged.push((tmp, path));
    }
    for (tmp, path) in staged {
        tmp.persist(path).map_err(|e| Failure::io(path, &e.error))?;
    }
    Ok(())
}

/// Temporary files are private (0600); what envbuild writes is meant to be read (a build
/// context keeps modes, and the image's non-root user reads the smoke test): 0644, and 0755 for
/// shell scripts.
fn set_mode(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let script = path.extension().is_some_and(|e| e == "sh");
        file.set_permissions(std::fs::Permissions::from_mode(if script {
            0o755
        } else {
            0o644
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_input_carries_the_code_and_hint_of_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'#'; MAX_INPUT_BYTES as usize + 1]).unwrap();
        let binary = dir.path().join("bin");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        for (kind, code, word) in [
            (Input::Spec, "INVALID_SPEC", "spec"),
            (Input::Lock, "INVALID_LOCK", "lock"),
            (Input::Table, "TABLE_INVALID", "compatibility table"),
            (
                Input::Expectations,
                "INVALID_EXPECTATIONS",
                "expectations file",
            ),
        ] {
            for path in [dir.path(), big.as_path(), binary.as_path()] {
                let f = read_text(path, kind).unwrap_err();
                let d = &f.diagnostics[0];
                assert_eq!(d.code, code, "{kind:?} {path:?}");
                assert_eq!(f.exit_code, crate::core::diag::exit::FAILURE);
                assert!(d.hint.as_deref().unwrap().contains(word), "{d}");
            }
        }
    }

    #[test]
    fn writes_are_readable_skip_unchanged_files_and_are_all_or_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.lock");
        let s = dir.path().join("sub/run.sh");
        write_all_atomic(&[
            (a.clone(), b"1".to_vec()),
            (s.clone(), b"#!/bin/sh".to_vec()),
        ])
        .unwrap();
        assert_eq!(
            std::fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(
            std::fs::metadata(&s).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let before = std::fs::metadata(&a).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_atomic(&a, b"1").unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), before);
        // The second file cannot be written (its parent is a file): the first is not replaced.
        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, "x").unwrap();
        let err = write_all_atomic(&[
            (a.clone(), b"2".to_vec()),
            (blocker.join("f"), b"y".to_vec()),
        ]);
        assert!(err.is_err());
        assert_eq!(std::fs::read(&a).unwrap(), b"1");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "no temp file left behind"
        );
    }
}
