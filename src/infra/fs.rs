//! File helpers: bounded reads and atomic writes. This module performs file I/O.

use crate::core::diag::{shown, Code, Diagnostic, Failure};
use crate::infra::journal::{Entry, Journals};
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

/// The specs that `SPEC...|DIR` arguments name: a file stands for itself, a folder for its own
/// `envbuild.toml` when it has one, else for every `*/envbuild.toml` directly under it, sorted
/// by path (so the same tree gives the same order).
/// A path named twice counts once. A folder without one is a usage error, naming the pattern.
pub fn spec_files(args: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out: Vec<PathBuf> = Vec::new();
    for arg in args {
        let found = if arg.join("envbuild.toml").is_file() {
            vec![arg.join("envbuild.toml")]
        } else if arg.is_dir() {
            let entries = std::fs::read_dir(arg).map_err(|e| Failure::io(arg, &e))?;
            let mut specs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path().join("envbuild.toml"))
                .filter(|p| p.is_file())
                .collect();
            specs.sort();
            if specs.is_empty() {
                return Err(Failure::usage(
                    format!("`{}` holds no `*/envbuild.toml`", shown(arg)),
                    Some("name spec files, or a folder with one sub-folder per spec".into()),
                ));
            }
            specs
        } else {
            vec![arg.clone()]
        };
        for p in found {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The working folder and `path` made absolute against it; `None` when there is none, or it is
/// `/` (a container's default: every path would be "below", nothing is the checkout's).
fn in_working_folder(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let cwd = std::env::current_dir()
        .ok()
        .filter(|c| c.parent().is_some())?;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    Some((cwd, abs))
}

/// The folders from the working folder down to `path`'s folder, each as it is reached (a
/// path named outside the working folder yields none: its place is the user's to name).
/// Stops at the first that does not exist yet (it will be made, a real folder).
fn folders_below_cwd(path: &Path) -> Vec<PathBuf> {
    let Some((cwd, abs)) = in_working_folder(path) else {
        return Vec::new();
    };
    let Ok(rel) = abs.strip_prefix(&cwd) else {
        return Vec::new();
    };
    let parts: Vec<_> = rel.components().collect();
    let mut at = cwd.clone();
    let mut out = Vec::new();
    for part in &parts[..parts.len().saturating_sub(1)] {
        match part {
            std::path::Component::Normal(n) => at.push(n),
            // Every folder before was checked to be no link, so `..` goes where it reads.
            std::path::Component::ParentDir if at.pop() && at.starts_with(&cwd) => continue,
            std::path::Component::ParentDir => return out,
            _ => continue,
        }
        if std::fs::symlink_metadata(&at).is_err() {
            break;
        }
        out.push(at.clone());
    }
    out
}

/// Refuse (`OUTPUT_SYMLINK`) an output whose way from the working folder passes a symbolic
/// link: a checkout's `build -> /home/u` or `specs/x -> ~/.config` would send the file, and
/// every folder made for it, wherever the link points.
fn no_link_on_the_way(path: &Path) -> Result<(), Failure> {
    for dir in folders_below_cwd(path) {
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            let to = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            return Err(Failure::one(
                Diagnostic::error(
                    OUTPUT_SYMLINK,
                    format!(
                        "cannot write `{}`: its folder `{}` is a symbolic link (to `{}`); \
                         envbuild does not write through links",
                        shown(path),
                        shown(&dir),
                        shown(&to)
                    ),
                )
                .with_hint("name the real folder, or remove the link (envbuild did not make it)"),
            ));
        }
    }
    Ok(())
}

/// Refuse an input named inside the working folder whose real path (every link resolved)
/// lies outside it: a checkout's `envbuild.toml -> ~/.config/gh/hosts.yml` must not make
/// envbuild read, and quote in its errors, a file elsewhere on the machine.
fn stays_in_working_folder(path: &Path) -> Result<(), String> {
    let Some((cwd, abs)) = in_working_folder(path) else {
        return Ok(());
    };
    if !abs.starts_with(&cwd)
        || abs
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return Ok(());
    }
    match std::fs::canonicalize(&abs) {
        Ok(real) if !real.starts_with(&cwd) => Err(shown(&real)),
        _ => Ok(()),
    }
}

/// Read a user file as UTF-8 text, refusing huge and binary files with a clear error.
pub fn read_text(path: &Path, kind: Input) -> Result<String, Failure> {
    let (name, size, format) = kind.words();
    let refuse = |message: String, hint: String| {
        Failure::one(Diagnostic::error(kind.code(), message).with_hint(hint))
    };
    if let Err(real) = stays_in_working_folder(path) {
        return Err(refuse(
            format!(
                "`{}` is a link that leads out of the working folder (to `{real}`)",
                shown(path)
            ),
            format!(
                "name the {name} file itself (envbuild does not follow a link in the checkout \
                 to a file elsewhere)"
            ),
        ));
    }
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
    // The bounded reader: opened without blocking, the kind checked again on the descriptor
    // (a FIFO swapped in since the check), the cap held while reading.
    let bytes = read_bounded(path, MAX_INPUT_BYTES).map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge => too_large(MAX_INPUT_BYTES + 1),
        _ => Failure::io(path, &e),
    })?;
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

/// Read at most `max` bytes of a regular file, for the files that environment variables and
/// the host name (`ENVBUILD_PROC_DRIVER_VERSION`, `DOCKER_CONFIG`, the CA bundle, the verdict
/// cache) and for files read back beside outputs. Opened without blocking and then checked by
/// its descriptor (no race with a swap after a check): a FIFO, device or socket is refused
/// before a byte is read, and a file over `max` is refused rather than read on.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "it is not a regular file (a pipe, device, socket or folder)",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is over {max} bytes"),
        ));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_bounded_text(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
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
                crate::core::codes::docker::CONTEXT_INVALID,
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
    let real = match real_in_project(project, &project.join(rel))? {
        Placed::Inside(real) => real,
        Placed::Root => return Err(refuse("is the project itself".into())),
        Placed::Outside(real) => {
            return Err(refuse(format!(
                "leads out of the project (to `{}`)",
                shown(&real)
            )))
        }
    };
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

/// Where a path named by the spec really is, every link on the way resolved.
enum Placed {
    /// Strictly inside the project: its real path.
    Inside(PathBuf),
    /// The project folder itself.
    Root,
    /// Elsewhere: its real path.
    Outside(PathBuf),
}

/// The one rule for a path the spec names inside the project (`project`, the spec's folder).
fn real_in_project(project: &Path, path: &Path) -> Result<Placed, Failure> {
    let project_real = std::fs::canonicalize(project).map_err(|e| Failure::io(project, &e))?;
    let real = std::fs::canonicalize(path).map_err(|e| Failure::io(path, &e))?;
    Ok(if real == project_real {
        Placed::Root
    } else if real.starts_with(&project_real) {
        Placed::Inside(real)
    } else {
        Placed::Outside(real)
    })
}

/// Refuse (`code`) a `path` named by the spec whose real path (every link on the way
/// resolved) does not lie strictly inside the project's (`project`, the spec's folder): a link
/// planted in the checkout must not make envbuild read a file elsewhere on the machine.
pub fn inside_project(project: &Path, path: &Path, code: Code) -> Result<(), Failure> {
    let real = match real_in_project(project, path)? {
        Placed::Inside(_) => return Ok(()),
        Placed::Root | Placed::Outside(_) => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
    };
    Err(Failure::one(
        Diagnostic::error(
            code,
            format!(
                "`{}` leads out of the project (to `{}`)",
                shown(path),
                shown(&real)
            ),
        )
        .with_hint(format!(
            "name a file inside the project (`{}`); the machine's own files are named by its \
             environment, not by the spec",
            shown(project)
        )),
    ))
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

/// A symlink at or under an output folder (`render --out`): refused, never written through.
pub use crate::core::codes::fs::OUTPUT_SYMLINK;

/// Whether `path`'s folder is one of the kernel's (`/dev`, `/proc`, `/sys`, or below them),
/// as it resolves: a spec read as `/dev/stdin` or `/proc/self/fd/0` sits in no project.
pub fn is_system_dir(path: &Path) -> bool {
    let dir = parent_of(path);
    let real = std::fs::canonicalize(&dir).unwrap_or(dir);
    ["/dev", "/proc", "/sys"]
        .iter()
        .any(|s| real.starts_with(s))
}

/// Write `files` (paths relative to `out`) into the folder `out`, all or nothing
/// ([`write_all_atomic`]), refusing before anything is written a symlink at `out` itself or at
/// any path from `out` down to a file: a symlink planted in the folder (a cloned repository's)
/// would send a rendered file wherever it points.
pub fn write_tree(out: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    let link = |p: &Path| {
        std::fs::symlink_metadata(p)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
    };
    let refuse = |p: &Path, hint: String| {
        Failure::one(
            Diagnostic::error(
                OUTPUT_SYMLINK,
                format!(
                    "`{}` is a symbolic link: envbuild does not write through links in its output folder",
                    shown(p)
                ),
            )
            .with_hint(hint),
        )
    };
    if link(out) {
        let to = std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf());
        return Err(refuse(
            out,
            format!(
                "pass the folder it points to (`--out {}`) if that is where the files go",
                shown(&to)
            ),
        ));
    }
    let mut joined = Vec::with_capacity(files.len());
    for (rel, bytes) in files {
        let mut at = out.to_path_buf();
        for part in rel.components() {
            at.push(part);
            if link(&at) {
                return Err(refuse(
                    &at,
                    "remove the link (it was not written by envbuild), then render again".into(),
                ));
            }
        }
        joined.push((at, bytes.clone()));
    }
    write_all_atomic(&joined)
}

/// Append `contents` to `path`, creating it if needed: a file others write to as well (a CI
/// job summary), so it is never replaced.
/// A FIFO with no reader is refused at once and one whose reader stops is given up (see
/// [`write_through`]), so the run never hangs on it.
pub fn append(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    write_through_with(path, contents, &options)
}

/// How long a write into a FIFO may wait for its reader to take more bytes before it is given
/// up: a reader that stopped reading must not hold the run (nor its signals) forever.
pub const THROUGH_STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// Write `contents` into `path`, a FIFO or device that is never replaced (`--junit
/// /dev/stdout`): opened without blocking, so a FIFO with no reader is refused at once
/// (`ENXIO`) instead of waiting for one; a FIFO is then written without blocking, waiting at
/// most [`THROUGH_STALL`] for its reader each time it is full. Devices (a terminal,
/// /dev/null) are written as usual.
pub fn write_through(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    let mut options = std::fs::OpenOptions::new();
    // Appended: `/dev/stdout` may stand for a log file, opened anew at offset 0.
    options.append(true);
    write_through_with(path, contents, &options)
}

fn write_through_with(
    path: &Path,
    contents: &[u8],
    options: &std::fs::OpenOptions,
) -> Result<(), Failure> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut options = options.clone();
    options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = match options.open(path) {
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(not_read(
                path,
                "a FIFO (named pipe) or socket that nothing reads",
            ))
        }
        Err(e) => return Err(Failure::io(path, &e)),
        Ok(f) => f,
    };
    let kind = file
        .metadata()
        .map_err(|e| Failure::io(path, &e))?
        .file_type();
    if !kind.is_fifo() {
        // A file or a device: blocking writes as usual (a terminal may be slow, never stuck).
        set_nonblocking(&file, false).map_err(|e| Failure::io(path, &e))?;
        return (&file)
            .write_all(contents)
            .map_err(|e| Failure::io(path, &e));
    }
    let mut rest = contents;
    while !rest.is_empty() {
        match (&file).write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if !writable_within(&file, THROUGH_STALL) {
                    return Err(not_read(path, "a FIFO whose reader stopped reading"));
                }
            }
            Err(e) => return Err(Failure::io(path, &e)),
        }
    }
    Ok(())
}

/// The refusal of an output nobody reads.
fn not_read(path: &Path, what: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            crate::core::diag::codes::IO_ERROR,
            format!(
                "cannot write `{}`: it is {what}; envbuild does not wait for a reader",
                shown(path)
            ),
        )
        .with_hint("start the reader first (e.g. `cat FIFO &`), or name a regular file"),
    )
}

fn set_nonblocking(file: &std::fs::File, on: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl(2) on a descriptor this function's caller owns; no memory is involved.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `file` can take bytes within `limit` (poll(2), retried after a signal).
fn writable_within(file: &std::fs::File, limit: std::time::Duration) -> bool {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut fds = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 1000) as libc::c_int;
        // SAFETY: one valid pollfd on the stack, for the length given.
        let n = unsafe { libc::poll(&mut fds, 1, ms) };
        if n > 0 {
            // POLLERR (the reader left) is "writable" too: the write then says EPIPE.
            return true;
        }
    }
}

/// Write `contents` to `path` atomically: see [`write_all_atomic`].
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    write_all_atomic(&[(path.to_path_buf(), contents.to_vec())])
}

pub use crate::infra::journal::TEMP_PREFIX;

/// Where one file goes.
enum Target {
    /// A regular file, or nothing yet: replaced atomically (temporary sibling, then rename).
    Replace(PathBuf),
    /// A character device, FIFO or socket (`--junit /dev/stdout`): written through
    /// ([`write_through`]: a FIFO nobody reads is refused, never waited on), never replaced by a
    /// regular file.
    Through(PathBuf),
}

/// Decide how to write `path`. A symlink is followed only when it is named in the kernel's
/// folders (`--junit /dev/stdout`), and then written through; any other is refused
/// (`OUTPUT_SYMLINK`): a link planted where an output goes (a checkout's `envbuild.lock`
/// pointing at `.git/hooks/pre-commit`, `~/.bashrc` or `/dev/shm/x`) would send the output
/// wherever it points. A directory is an error.
fn target(path: &Path) -> Result<Target, Failure> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Target::Replace(path.to_path_buf()))
        }
        Err(e) => return Err(Failure::io(path, &e)),
        Ok(m) => m,
    };
    let real = if meta.file_type().is_symlink() {
        // Named in the kernel's folders (`/dev/stdout`, `/proc/self/fd/1`): written through
        // as named, whatever stands behind it (a terminal, a pipe, a log file: appended to).
        // Resolving it would name `pipe:[N]`, or a file to be replaced.
        if ["/dev/", "/proc/"].iter().any(|s| path.starts_with(s)) {
            let behind = std::fs::metadata(path).map_err(|e| Failure::io(path, &e))?;
            if !behind.is_dir() {
                return Ok(Target::Through(path.to_path_buf()));
            }
        }
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        return Err(Failure::one(
            Diagnostic::error(
                OUTPUT_SYMLINK,
                format!(
                    "`{}` is a symbolic link (to `{}`): envbuild does not write its outputs \
                     through links",
                    shown(path),
                    shown(&real)
                ),
            )
            .with_hint(
                "name the file it points to if that is where the output goes, or remove the \
                 link (envbuild did not make it)",
            ),
        ));
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

/// Write several files so that either all of them are written or none is changed, even when the
/// process is killed (kill -9) at any point:
///
/// 1. Every folder written into is created and locked (an exclusive lock on the folder itself;
///    writers into one folder are serialised), then *recovered*: a committed write that a killed
///    run left half done is finished ([`recover_locked`]), and every temporary is removed (no
///    one else can be writing there while the lock is held).
/// 2. Every changed file is staged as a temporary in the *root* folder (the deepest folder that
///    holds all of them), so that one folder holds the whole stage.
/// 3. The commit: a journal naming each temporary and its destination is renamed into place
///    whole in envbuild's own state folder, never in the folder written, so that a checkout
///    cannot plant one ([`crate::infra::journal`]).
/// 4. Each temporary is renamed over its destination, then the journal is removed.
///
/// Killed before 3, the next write discards the stage; killed after 3, the next write rolls the
/// journal forward. A file whose contents are already on disk is left untouched (its mtime too).
/// Devices and pipes (`--junit /dev/stdout`) are written through, outside the journal. Folders
/// this call created are removed again when it fails. Like cargo with Cargo.lock, envbuild does
/// not fsync: surviving power loss is the file system's job.
pub fn write_all_atomic(files: &[(PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    write_all_journaled(&Journals::from_env(), files)
}

/// [`write_all_atomic`] with its journals kept in `journals`.
fn write_all_journaled(journals: &Journals, files: &[(PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    let mut created = Vec::new();
    let result = write_all_in_dirs(journals, files, &mut created);
    if result.is_err() {
        // Innermost first; a folder that is not empty (someone else wrote there) stays.
        for dir in created.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    result
}

fn write_all_in_dirs(
    journals: &Journals,
    files: &[(PathBuf, Vec<u8>)],
    created: &mut Vec<PathBuf>,
) -> Result<(), Failure> {
    for (path, _) in files {
        no_link_on_the_way(path)?;
    }
    for (path, _) in files {
        create_dirs(&parent_of(path), created)?;
    }
    let mut through = Vec::new();
    let mut replace = Vec::new();
    for (path, contents) in files {
        match target(path)? {
            Target::Through(real) => through.push((real, contents)),
            Target::Replace(real) => replace.push((absolute(&real)?, contents)),
        }
    }
    let root = common_dir(replace.iter().map(|(real, _)| parent_of(real)));
    // Locks in path order (an ancestor before its descendants) so that two writers never wait
    // on each other in a cycle.
    let mut dirs: Vec<PathBuf> = replace.iter().map(|(real, _)| parent_of(real)).collect();
    dirs.extend(root.clone());
    dirs.sort();
    dirs.dedup();
    let mut locks = Vec::with_capacity(dirs.len());
    for dir in &dirs {
        locks.push(lock_dir(dir)?);
        recover_locked(journals, dir)?;
    }
    for (real, contents) in through {
        write_through(&real, contents)?;
    }
    let changed: Vec<(PathBuf, &Vec<u8>)> = replace
        .into_iter()
        .filter(|(real, contents)| !std::fs::read(real).is_ok_and(|old| old == **contents))
        .collect();
    if let (Some(root), false) = (root, changed.is_empty()) {
        commit_with(journals, &root, &changed, &|from, to| {
            std::fs::rename(from, to)
        })?;
    }
    drop(locks);
    Ok(())
}

/// Stage `changed` in `root`, commit the journal, rename into place, remove the journal; with
/// the rename step given (a test makes one fail). A rename that fails in this process undoes
/// the renames before it from their backups and removes the journal: a write that reported a
/// failure leaves the old set, and nothing for a later write to roll forward.
fn commit_with(
    journals: &Journals,
    root: &Path,
    changed: &[(PathBuf, &Vec<u8>)],
    rename: &dyn Fn(&Path, &Path) -> std::io::Result<()>,
) -> Result<(), Failure> {
    same_file_system(root, changed.iter().map(|(real, _)| real.as_path()))?;
    let mut staged = Vec::with_capacity(changed.len());
    for (real, contents) in changed {
        staged.push((stage(root, real, contents)?, real.clone()));
    }
    // The old files, kept (hard links: no copy) until the set is in place, for the undo.
    let backups = backups(root, changed)?;
    // The staged temporaries must outlive this process from the commit on: keep them first (a
    // kill before the commit leaves them for the next write to remove).
    let mut renames = Vec::with_capacity(staged.len());
    let mut entries = Vec::with_capacity(staged.len());
    for (tmp, real) in staged {
        let ino = tmp
            .as_file()
            .metadata()
            .map_err(|e| Failure::io(&real, &e))?;
        let path = tmp
            .into_temp_path()
            .keep()
            .map_err(|e| Failure::io(&real, &e.error))?;
        entries.push(Entry {
            tmp: path.clone(),
            real: real.clone(),
            ino: std::os::unix::fs::MetadataExt::ino(&ino),
        });
        renames.push((path, real));
    }
    let journal = match journals.commit(root, &entries) {
        Ok(j) => j,
        Err(e) => {
            for (tmp, _) in &renames {
                let _ = std::fs::remove_file(tmp);
            }
            return Err(e);
        }
    };
    // Committed: from here on the set is written, now or by the next write's recovery.
    for (i, (tmp, real)) in renames.iter().enumerate() {
        if let Err(e) = rename(tmp, real) {
            undo(&renames[..i], &backups);
            for (tmp, _) in &renames[i..] {
                let _ = std::fs::remove_file(tmp);
            }
            if let Some(j) = &journal {
                let _ = Journals::remove(j);
            }
            return Err(Failure::io(real, &e));
        }
    }
    journal.as_deref().map_or(Ok(()), Journals::remove)
}

/// A hard link in `root` to each destination of `changed` that exists, by destination (a
/// temporary: the next write into the folder removes what a kill left).
fn backups(
    root: &Path,
    changed: &[(PathBuf, &Vec<u8>)],
) -> Result<Vec<Option<tempfile::TempPath>>, Failure> {
    let mut out = Vec::with_capacity(changed.len());
    for (real, _) in changed {
        if !real.is_file() {
            out.push(None);
            continue;
        }
        let kept = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}keep-"))
            .make_in(root, |p| std::fs::hard_link(real, p))
            .map_err(|e| Failure::io(real, &e))?;
        out.push(Some(kept.into_temp_path()));
    }
    Ok(out)
}

/// Put back what the first `done` renames replaced: the old file from its backup, or no file
/// where there was none. Best effort: the write is reported as failed either way.
fn undo(done: &[(PathBuf, PathBuf)], backups: &[Option<tempfile::TempPath>]) {
    for ((_, real), backup) in done.iter().zip(backups) {
        let _ = match backup {
            Some(b) => std::fs::rename(b, real),
            None => std::fs::remove_file(real),
        };
    }
}

/// A rename cannot cross file systems: refuse, before anything is written, a set whose files
/// are not all on the file system of the folder that stages them.
#[cfg(unix)]
fn same_file_system<'a>(root: &Path, paths: impl Iterator<Item = &'a Path>) -> Result<(), Failure> {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.dev())
            .map_err(|e| Failure::io(p, &e))
    };
    let root_dev = dev(root)?;
    for path in paths {
        if dev(&parent_of(path))? != root_dev {
            return Err(Failure::one(
                Diagnostic::error(
                    crate::core::diag::codes::IO_ERROR,
                    format!(
                        "cannot write `{}` together with the other files: it is on another file \
                         system than `{}`",
                        shown(path),
                        shown(root)
                    ),
                )
                .with_hint("write into a folder whose files are all on one file system"),
            ));
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn same_file_system<'a>(_: &Path, _: impl Iterator<Item = &'a Path>) -> Result<(), Failure> {
    Ok(())
}

/// Finish or discard what a killed write left in `dir` (whose lock the caller holds): its
/// committed journal, kept in envbuild's state folder, is rolled forward (each temporary still
/// there is renamed to its destination; one already renamed is gone), then every temporary is
/// removed. Returns whether a journal was rolled forward. A `.envbuild-journal` file in the
/// folder itself (where envbuild 0.x kept them) is never read: a checkout could plant one.
fn recover_locked(journals: &Journals, dir: &Path) -> Result<bool, Failure> {
    let rolled = journals.finish(dir);
    remove_temps(dir);
    rolled
}

/// Recover `dir` as the next write into it would: lock it, roll a committed write forward,
/// discard an uncommitted stage and every temporary. Returns whether a write was rolled forward.
pub fn recover(dir: &Path) -> Result<bool, Failure> {
    let _lock = lock_dir(dir)?;
    recover_locked(&Journals::from_env(), dir)
}

/// `path` made absolute against the current directory (its folder exists: it was created).
fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    let dir = parent_of(path);
    let dir = std::fs::canonicalize(&dir).map_err(|e| Failure::io(&dir, &e))?;
    Ok(match path.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    })
}

/// The deepest folder that holds all of `dirs` (absolute paths); `None` for none.
fn common_dir(dirs: impl Iterator<Item = PathBuf>) -> Option<PathBuf> {
    dirs.reduce(|common, d| {
        common
            .ancestors()
            .find(|a| d.starts_with(a))
            .map(Path::to_path_buf)
            .unwrap_or_default()
    })
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

/// Remove every temporary in `dir`: the caller holds its lock, and every writer stages under
/// the lock of the folder it stages in, so none is in use. Best effort: a folder that cannot be
/// listed is reported by the write itself.
fn remove_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `contents` in a temporary in `dir` (the root folder of the write), with `real`'s mode.
fn stage(dir: &Path, real: &Path, contents: &[u8]) -> Result<tempfile::NamedTempFile, Failure> {
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{name}-"))
        .tempfile_in(dir)
        .map_err(|e| Failure::io(dir, &e))?;
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
    fn bounded_reads_refuse_pipes_devices_and_large_files_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        for p in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let e = read_bounded(p, 1024).expect_err("not a regular file");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        assert!(read_bounded(&big, 1024)
            .unwrap_err()
            .to_string()
            .contains("over 1024"));
        assert_eq!(read_bounded_text(&big, 4096).unwrap().len(), 2048);
    }

    #[test]
    fn a_fifo_nobody_reads_is_refused_and_one_read_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("summary.md");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let err = append(&fifo, b"| a |\n").expect_err("nobody reads");
        assert!(
            err.diagnostics[0].message.contains("nothing reads"),
            "{err:?}"
        );
        assert!(write_through(&fifo, b"x").is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // A reader gets everything, past the pipe's buffer.
        let path = fifo.clone();
        let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
        let big = vec![b'y'; 1 << 20];
        let mut tries = 0;
        // The reader opens the FIFO a moment later: until then, it is still unread.
        while append(&fifo, &big).is_err() {
            tries += 1;
            assert!(tries < 500, "the reader never opened");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(reader.join().unwrap(), big);
    }

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
    fn devices_are_written_through_links_refused_and_folders_refused() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), b"<xml/>").unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device(), "/dev/null was replaced");

        // A link named in /dev is written through; any other is refused (one to a device
        // too: a checkout's link names nothing the user chose), its target left alone.
        write_atomic(Path::new("/dev/stderr"), b"").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let to_null = dir.path().join("null.xml");
        std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
        let err = write_atomic(&to_null, b"<xml/>").unwrap_err();
        assert_eq!(err.diagnostics[0].code, OUTPUT_SYMLINK, "{err}");
        let real = dir.path().join("real.xml");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("report.xml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = write_atomic(&link, b"new").unwrap_err();
        assert_eq!(err.diagnostics[0].code, OUTPUT_SYMLINK, "{err}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"old");

        let err = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }

    #[test]
    fn stale_temporaries_are_removed_and_failed_writes_leave_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        // Under the folder's lock no temporary can be in use, however young: all go.
        let old = dir.path().join(format!("{TEMP_PREFIX}envbuild.lock-abc"));
        let fresh = dir.path().join(format!("{TEMP_PREFIX}envbuild.lock-def"));
        std::fs::write(&old, "partial").unwrap();
        std::fs::write(&fresh, "left by a kill a moment ago").unwrap();
        write_atomic(&dir.path().join("envbuild.lock"), b"lock").unwrap();
        assert!(!old.exists() && !fresh.exists(), "a temporary stays");

        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, "x").unwrap();
        let err = write_all_atomic(&[
            (dir.path().join("new/deeper/a.yml"), b"a".to_vec()),
            (blocker.join("f"), b"y".to_vec()),
        ]);
        assert!(err.is_err());
        assert!(!dir.path().join("new").exists(), "a created folder stays");
    }

    /// Journals kept in a state folder of the test's own.
    fn journals() -> (tempfile::TempDir, Journals) {
        let state = tempfile::tempdir().unwrap();
        let j = Journals::at(state.path().join("journals"));
        (state, j)
    }

    /// The journals left in the test's state folder.
    fn journals_left(state: &tempfile::TempDir) -> usize {
        std::fs::read_dir(state.path().join("journals")).map_or(0, |d| d.count())
    }

    /// A staged temporary in `root` with `contents`, and its journal entry for `real`.
    fn staged(root: &Path, tmp: &str, real: &Path, contents: &str) -> Entry {
        let tmp = root.join(format!("{TEMP_PREFIX}{tmp}"));
        std::fs::write(&tmp, contents).unwrap();
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&tmp).unwrap());
        Entry {
            tmp,
            real: real.to_path_buf(),
            ino,
        }
    }

    /// A kill -9 after the commit: the journal names three staged files, one already renamed.
    /// The next write into the folder finishes the set; an uncommitted stage is discarded.
    #[test]
    fn a_committed_journal_is_rolled_forward_and_an_uncommitted_stage_discarded() {
        let (state, journals) = journals();
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("run")).unwrap();
        let (a, b) = (root.join("Dockerfile"), root.join("run/pod.yaml"));
        let ea = staged(&root, "Dockerfile-1", &a, "new");
        std::fs::write(&b, "old").unwrap();
        let eb = staged(&root, "pod.yaml-2", &b, "new");
        // A destination whose folder was removed after the kill.
        let c = root.join("gone/compose.yaml");
        let ec = staged(&root, "compose.yaml-3", &c, "new");
        journals
            .commit(&root, &[ea.clone(), eb.clone(), ec.clone()])
            .unwrap();
        std::fs::rename(&ea.tmp, &a).unwrap(); // renamed before the kill
                                               // Any write into the folder recovers it first (here one of another file).
        write_all_journaled(&journals, &[(root.join("envbuild.lock"), b"lock".to_vec())]).unwrap();
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&c).unwrap(), "new");
        assert!(journals_left(&state) == 0 && !eb.tmp.exists() && !ec.tmp.exists());

        // Killed before the commit: staged files but no journal. They are discarded.
        let later = staged(&root, "pod.yaml-4", &b, "newer");
        let _lock = lock_dir(&root).unwrap();
        assert!(
            !recover_locked(&journals, &root).unwrap(),
            "nothing to roll forward"
        );
        assert!(!later.tmp.exists());
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new");
    }

    /// A rename that fails after the commit (a destination that became a folder, a full
    /// disk's metadata, a mount point) undoes the renames before it and leaves no journal: a
    /// write reported as failed is never rolled forward by the next write (it was before).
    #[test]
    fn a_write_that_failed_after_its_commit_leaves_the_old_set_and_no_journal() {
        let (state, journals) = journals();
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (root.join("a.txt"), root.join("b.txt"));
        std::fs::write(&a, "old a").unwrap();
        let new_a = b"new a".to_vec();
        let new_b = b"new b".to_vec();
        let changed = vec![(a.clone(), &new_a), (b.clone(), &new_b)];
        let calls = std::cell::Cell::new(0);
        let failing = |from: &Path, to: &Path| {
            calls.set(calls.get() + 1);
            if calls.get() == 2 {
                Err(std::io::Error::other("injected: the second rename fails"))
            } else {
                std::fs::rename(from, to)
            }
        };
        let e = commit_with(&journals, &root, &changed, &failing).unwrap_err();
        assert!(e.to_string().contains("injected"), "{e}");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
        assert!(!b.exists());
        assert_eq!(journals_left(&state), 0, "a journal was left");
        assert!(
            !recover_locked(&journals, &root).unwrap(),
            "the next write rolled something forward"
        );
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
        let left: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["a.txt"]);
    }

    /// A journal planted in the folder written (a checkout's `.envbuild-journal`, in the format
    /// envbuild once kept there, naming a file out of the folder and one through a link) is
    /// never read: the write goes on, nothing it names moves, and the file itself is left.
    #[test]
    fn a_journal_planted_in_the_folder_is_never_read() {
        let (_state, journals) = journals();
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("out")).unwrap();
        std::fs::write(root.join("victim"), "mine").unwrap();
        std::fs::write(root.join("out/x"), "planted").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out/hooks")).unwrap();
        let hex = |s: &str| crate::core::hash::hex(s.as_bytes());
        let planted = format!(
            "envbuild-journal 1\n{} {}\n{} {}\n",
            hex("x"),
            hex("hooks/pre-commit"),
            hex("x"),
            hex("../victim")
        );
        let journal = root.join("out/.envbuild-journal");
        std::fs::write(&journal, &planted).unwrap();
        write_all_journaled(&journals, &[(root.join("out/f"), b"x".to_vec())]).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("victim")).unwrap(),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("out/x")).unwrap(),
            "planted"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        assert_eq!(std::fs::read_to_string(&journal).unwrap(), planted);
        assert_eq!(std::fs::read_to_string(root.join("out/f")).unwrap(), "x");
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
