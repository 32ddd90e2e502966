//! File helpers: bounded reads and atomic writes. This module performs file I/O.

use crate::diag::{Diagnostic, Failure};
use std::io::Write;
use std::path::Path;

/// Inputs larger than this are refused before parsing: no spec or lock is anywhere near it.
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// Unreadable input (too large, binary, a directory) is reported like any other bad spec.
const INPUT_TOO_LARGE: &str = "INVALID_SPEC";

/// Read a user file as UTF-8 text, refusing huge and binary files with a clear error.
pub fn read_text(path: &Path) -> Result<String, Failure> {
    let meta = std::fs::metadata(path).map_err(|e| Failure::io(path, &e))?;
    if meta.is_dir() {
        return Err(Failure::one(
            Diagnostic::error(
                INPUT_TOO_LARGE,
                format!("`{}` is a directory, not a file", path.display()),
            )
            .with_hint("pass the spec file itself"),
        ));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(Failure::one(
            Diagnostic::error(
                INPUT_TOO_LARGE,
                format!(
                    "`{}` is {} bytes; envbuild reads files of at most {} bytes",
                    path.display(),
                    meta.len(),
                    MAX_INPUT_BYTES
                ),
            )
            .with_hint("is this the right file? a spec is a few hundred bytes"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Failure::io(path, &e))?;
    String::from_utf8(bytes).map_err(|e| {
        Failure::one(
            Diagnostic::error(
                INPUT_TOO_LARGE,
                format!(
                    "`{}` is not UTF-8 text (invalid byte at offset {})",
                    path.display(),
                    e.utf8_error().valid_up_to()
                ),
            )
            .with_hint("a spec is a TOML or YAML text file"),
        )
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
        staged.push((tmp, path));
    }
    for (tmp, path) in staged {
        tmp.persist(path).map_err(|e| Failure::io(path, &e.error))?;
    }
    Ok(())
}
