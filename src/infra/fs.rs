//! File helpers: bounded reads and atomic writes. This module performs file I/O.

use crate::core::diag::{shown, Code, Diagnostic, Failure};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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
    // `metadata` follows symlinks, so a link to /dev/zero is seen as the device it is.
    let meta = std::fs::metadata(path).map_err(|e| Failure::io(path, &e))?;
    if meta.is_dir() {
        return Err(refuse(
            format!("`{}` is a directory, not a file", shown(path)),
            format!("pass the {name} file itself"),
        ));
    }
    // A FIFO would block the open and a device never ends: refuse both before opening.
    if !meta.is_file() {
        return Err(refuse(
            format!(
                "`{}` is not a regular file (a pipe, device or socket)",
                shown(path)
            ),
            format!("pass the {name} file itself; envbuild reads only regular files"),
        ));
    }
    let too_large = |len: u64| {
        refuse(
            format!(
                "`{}` is {len} bytes; envbuild reads files of at most {MAX_INPUT_BYTES} bytes",
                shown(path),
            ),
            format!("is this the right file? a {name} is {size}"),
        )
    };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_large(meta.len()));
    }
    // The cap holds while reading too: a file that grows after the check is cut off.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| Failure::io(path, &e))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        refuse(
            format!(
                "`{}` is not UTF-8 text (invalid byte at offset {})",
                shown(path),
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
                format!("`{}` is not a directory of templates", shown(dir)),
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
        origin: shown(dir),
        files,
    })
}

/// The local wheels of `[image] wheels`: the `*.whl` regular files directly in `project/rel`,
/// as `rel/NAME` with their bytes, sorted by name. The folder's real path (every symlink on the
/// way resolved) must lie strictly inside the project's real path, and entries are never
/// followed: a symlinked wheel, a subfolder, `.env` or `.git/config` is not sent to the engine.
/// A folder outside the project, the project itself or one without wheels is `CONTEXT_INVALID`.
pub fn project_wheels(project: &Path, rel: &str) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let refuse = |why: String| {
        Failure::one(
            Diagnostic::error(
                crate::infra::docker::codes::CONTEXT_INVALID,
                format!(
                    "`[image] wheels` folder `{}` {why}",
                    crate::core::diag::printable(rel)
                ),
            )
            .with_hint(format!(
                "point it at a folder of .whl files inside the project (`{}`)",
                shown(project)
            )),
        )
    };
    let project_real = std::fs::canonicalize(project).map_err(|e| Failure::io(project, &e))?;
    let dir = project.join(rel);
    let real = std::fs::canonicalize(&dir).map_err(|e| Failure::io(&dir, &e))?;
    if real == project_real {
        return Err(refuse("is the project itself".into()));
    }
    if !real.starts_with(&project_real) {
        return Err(refuse(format!(
            "leads out of the project (to `{}`)",
            shown(&real)
        )));
    }
    if !real.is_dir() {
        return Err(refuse("is not a folder".into()));
    }
    let mut wheels = Vec::new();
    for entry in std::fs::read_dir(&real).map_err(|e| Failure::io(&real, &e))? {
        let entry = entry.map_err(|e| Failure::io(&real, &e))?;
        // `file_type` does not follow a symlink: only plain files count.
        let kind = entry
            .file_type()
            .map_err(|e| Failure::io(&entry.path(), &e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if kind.is_file() && name.ends_with(".whl") && !name.starts_with('.') {
            let bytes = read_regular_no_follow(&entry.path())?;
            wheels.push((format!("{}/{name}", rel.trim_end_matches('/')), bytes));
        }
    }
    if wheels.is_empty() {
        return Err(refuse("has no .whl files".into()));
    }
    wheels.sort();
    Ok(wheels)
}

/// Read a file listed as a regular file, making sure the file opened is that same file (not a
/// symlink or another file swapped in since it was listed).
fn read_regular_no_follow(path: &Path) -> Result<Vec<u8>, Failure> {
    use std::os::unix::fs::MetadataExt;
    let listed = std::fs::symlink_metadata(path).map_err(|e| Failure::io(path, &e))?;
    let mut f = std::fs::File::open(path).map_err(|e| Failure::io(path, &e))?;
    let opened = f.metadata().map_err(|e| Failure::io(path, &e))?;
    if !listed.is_file() || (listed.dev(), listed.ino()) != (opened.dev(), opened.ino()) {
        return Err(Failure::io(
            path,
            &std::io::Error::other("changed while being read (not the regular file listed)"),
        ));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    f.read_to_end(&mut bytes)
        .map_err(|e| Failure::io(path, &e))?;
    Ok(bytes)
}

/// Write `contents` to `path` atomically: see [`write_all_atomic`].
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    write_all_atomic(&[(path.to_path_buf(), contents.to_vec())])
}

/// Temporaries start with this, so a run killed mid-write leaves files that say whose they are,
/// and the next write into the same folder removes them once they are `STALE_TEMP` old.
pub const TEMP_PREFIX: &str = ".envbuild-tmp-";
/// Older than this, a temporary cannot belong to a write still in progress (writes take ms).
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(600);

/// Where one file goes.
enum Target {
    /// A regular file, or nothing yet: replaced atomically (temporary sibling, then rename).
    Replace(PathBuf),
    /// A character device, FIFO or socket (`--junit /dev/stdout`): written through, never
    /// replaced by a regular file.
    Through(PathBuf),
}

/// Decide how to write `path`. A symlink is followed (its target is written, the link kept);
/// a directory, or a link to nothing, is an error.
fn target(path: &Path) -> Result<Target, Failure> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Target::Replace(path.to_path_buf()))
        }
        Err(e) => return Err(Failure::io(path, &e)),
        Ok(m) => m,
    };
    let real = if meta.file_type().is_symlink() {
        std::fs::canonicalize(path).map_err(|e| Failure::io(path, &e))?
    } else {
        path.to_path_buf()
    };
    let meta = std::fs::metadata(&real).map_err(|e| Failure::io(&real, &e))?;
    if meta.is_dir() {
        return Err(Failure::one(
            Diagnostic::error(
                crate::core::diag::codes::IO_ERROR,
                format!("cannot write `{}`: it is a directory", shown(path)),
            )
            .with_hint("name a file, not a directory"),
        ));
    }
    Ok(if meta.is_file() {
        Target::Replace(real)
    } else {
        Target::Through(real)
    })
}

/// Write several files so that either all of them are written or none is changed: every file is
/// first written to a temporary sibling, and only when all succeeded are they renamed in place.
/// A file whose contents are already on disk is left untouched (its mtime too).
///
/// Writers into one folder are serialised (an exclusive lock on the folder), so two concurrent
/// renders into one folder give one set or the other, not a mix. Folders this call created are
/// removed again when it fails. Like cargo with Cargo.lock, envbuild does not fsync: surviving
/// power loss is the file system's job, and an fsync costs more than the whole resolution.
pub fn write_all_atomic(files: &[(PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    let mut created = Vec::new();
    let result = write_all_in_dirs(files, &mut created);
    if result.is_err() {
        // Innermost first; a folder that is not empty (someone else wrote there) stays.
        for dir in created.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    result
}

fn write_all_in_dirs(
    files: &[(PathBuf, Vec<u8>)],
    created: &mut Vec<PathBuf>,
) -> Result<(), Failure> {
    let mut dirs: Vec<PathBuf> = files.iter().map(|(p, _)| parent_of(p)).collect();
    dirs.sort();
    dirs.dedup();
    let mut locks = Vec::with_capacity(dirs.len());
    for dir in &dirs {
        create_dirs(dir, created)?;
        locks.push(lock_dir(dir)?);
        remove_stale_temps(dir);
    }
    let mut staged = Vec::with_capacity(files.len());
    let mut through = Vec::new();
    for (path, contents) in files {
        match target(path)? {
            Target::Through(real) => through.push((real, contents)),
            Target::Replace(real) => {
                if std::fs::read(&real).is_ok_and(|old| old == *contents) {
                    continue;
                }
                staged.push((stage(&real, contents)?, real));
            }
        }
    }
    for (real, contents) in through {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&real)
            .and_then(|mut f| f.write_all(contents))
            .map_err(|e| Failure::io(&real, &e))?;
    }
    for (tmp, real) in staged {
        tmp.persist(&real)
            .map_err(|e| Failure::io(&real, &e.error))?;
    }
    drop(locks);
    Ok(())
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `create_dir_all`, remembering each folder it made (outermost first).
fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> Result<(), Failure> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.as_os_str().is_empty() && !d.exists() {
        missing.push(d.to_path_buf());
        match d.parent() {
            Some(p) => d = p,
            None => break,
        }
    }
    for m in missing.into_iter().rev() {
        match std::fs::create_dir(&m) {
            Ok(()) => created.push(m),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Failure::io(&m, &e)),
        }
    }
    Ok(())
}

/// An exclusive lock on a folder, held until dropped (flock on the folder itself: no lock file
/// is left beside the user's files).
fn lock_dir(dir: &Path) -> Result<std::fs::File, Failure> {
    let f = std::fs::File::open(dir).map_err(|e| Failure::io(dir, &e))?;
    f.lock().map_err(|e| Failure::io(dir, &e))?;
    Ok(f)
}

/// Remove temporaries that a killed run left in `dir`. Best effort: a folder that cannot be
/// listed is reported by the write itself.
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TEMP);
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `contents` in a temporary sibling of `real`, with the final file's mode.
fn stage(real: &Path, contents: &[u8]) -> Result<tempfile::NamedTempFile, Failure> {
    let dir = parent_of(real);
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{name}-"))
        .tempfile_in(&dir)
        .map_err(|e| Failure::io(&dir, &e))?;
    tmp.write_all(contents).map_err(|e| Failure::io(real, &e))?;
    set_mode(tmp.as_file(), real).map_err(|e| Failure::io(real, &e))?;
    Ok(tmp)
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
    fn local_wheels_stay_inside_the_project_and_are_only_wheels() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.whl"), "outside").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let w = project.join("wheels");
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(project.join("empty")).unwrap();
        for (p, text) in [
            ("wheels/b-1.0-py3-none-any.whl", "b"),
            ("wheels/a-1.0-py3-none-any.whl", "a"),
            ("wheels/.env", "TOKEN=1"),
            ("wheels/notes.txt", "n"),
            ("wheels/.hidden.whl", "h"),
            ("wheels/sub/c-1.0-py3-none-any.whl", "c"),
            (".env", "TOKEN=1"),
            (".git/config", "[remote]"),
        ] {
            std::fs::write(project.join(p), text).unwrap();
        }
        symlink(outside.path().join("secret.whl"), w.join("secret.whl")).unwrap();
        symlink("a-1.0-py3-none-any.whl", w.join("again.whl")).unwrap();
        symlink(outside.path(), project.join("out")).unwrap();
        symlink("wheels", project.join("inside")).unwrap();
        symlink("..", project.join("up")).unwrap();

        let got = project_wheels(&project, "wheels").unwrap();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "wheels/a-1.0-py3-none-any.whl",
                "wheels/b-1.0-py3-none-any.whl"
            ]
        );
        assert_eq!(got[0].1, b"a");
        // A symlink that stays inside the project is resolved; the names keep the spec's path.
        let via_link = project_wheels(&project, "inside").unwrap();
        assert_eq!(via_link[0].0, "inside/a-1.0-py3-none-any.whl");

        for (rel, why) in [
            (".", "is the project itself"),
            ("up/project", "is the project itself"),
            ("out", "leads out of the project"),
            ("up", "leads out of the project"),
            ("empty", "has no .whl files"),
            ("wheels/notes.txt", "is not a folder"),
        ] {
            let err = project_wheels(&project, rel).unwrap_err();
            let d = &err.diagnostics[0];
            assert_eq!(d.code, "CONTEXT_INVALID", "{rel}");
            assert!(d.message.contains(why), "{rel}: {}", d.message);
        }
        assert_eq!(
            project_wheels(&project, "missing").unwrap_err().diagnostics[0].code,
            "IO_ERROR"
        );
    }

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

    #[test]
    fn pipes_devices_and_links_to_them_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("spec.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo");
        let link = dir.path().join("zero.lock");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (path, kind) in [
            (fifo.as_path(), Input::Spec),
            (Path::new("/dev/zero"), Input::Table),
            (Path::new("/dev/urandom"), Input::Spec),
            (link.as_path(), Input::Lock),
        ] {
            let f = read_text(path, kind).unwrap_err();
            assert!(
                f.to_string().contains("not a regular file"),
                "{path:?}: {f}"
            );
        }
    }

    #[test]
    fn devices_are_written_through_links_followed_and_folders_refused() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), b"<xml/>").unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device(), "/dev/null was replaced");

        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.xml");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("report.xml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");

        let err = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }

    #[test]
    fn stale_temporaries_are_removed_and_failed_writes_leave_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(format!("{TEMP_PREFIX}envbuild.lock-abc"));
        let fresh = dir.path().join(format!("{TEMP_PREFIX}envbuild.lock-def"));
        std::fs::write(&old, "partial").unwrap();
        std::fs::write(&fresh, "in progress").unwrap();
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
        write_atomic(&dir.path().join("envbuild.lock"), b"lock").unwrap();
        assert!(!old.exists(), "a stale temporary stays");
        assert!(fresh.exists(), "a temporary that may be in use was removed");

        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, "x").unwrap();
        let err = write_all_atomic(&[
            (dir.path().join("new/deeper/a.yml"), b"a".to_vec()),
            (blocker.join("f"), b"y".to_vec()),
        ]);
        assert!(err.is_err());
        assert!(!dir.path().join("new").exists(), "a created folder stays");
    }

    #[test]
    fn concurrent_writers_into_one_folder_never_show_a_mix() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["Dockerfile", "environment.yml", "pod.yaml"];
        let set = |tag: &str| -> Vec<(PathBuf, Vec<u8>)> {
            names
                .iter()
                .map(|n| (dir.path().join(n), format!("{tag}\n").into_bytes()))
                .collect()
        };
        let (a, b) = (set("a"), set("b"));
        write_all_atomic(&a).unwrap();
        let start = std::sync::Barrier::new(3);
        let mixes = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for files in [&a, &b] {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    for _ in 0..300 {
                        write_all_atomic(files).unwrap();
                    }
                });
            }
            // A reader that takes the same folder lock sees one whole set every time.
            s.spawn(|| {
                start.wait();
                for _ in 0..300 {
                    let _held = lock_dir(dir.path()).unwrap();
                    let seen: Vec<Vec<u8>> = names
                        .iter()
                        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
                        .collect();
                    if seen.iter().any(|c| *c != seen[0]) {
                        mixes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        });
        assert_eq!(mixes.into_inner(), 0, "a reader saw a mix of two sets");
    }
}
