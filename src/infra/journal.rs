//! The journals of envbuild's all-or-nothing writes: where they are kept, how one is written
//! and how one is read back. Performs file I/O.
//!
//! A journal names the staged temporaries of a committed write and their destinations, so that
//! the next write into the folder finishes a write that a kill interrupted. It is kept in
//! envbuild's own state folder (`$XDG_STATE_HOME/envbuild/journals`, else
//! `~/.local/state/envbuild/journals`), never in the folder written: a checkout, which may be
//! hostile, cannot plant one. Each journal is bound to its folder by the folder's real path and
//! its device and inode, and to each temporary by the temporary's inode, so a journal left for
//! a folder that was removed and made again (a new checkout at the same path) moves nothing.

use crate::core::diag::{shown, Failure};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Temporaries start with this, so a run killed mid-write leaves files that say whose they are;
/// the next write into the folder removes them (see `infra::fs::write_all_atomic`).
pub const TEMP_PREFIX: &str = ".envbuild-tmp-";
/// The format's first line.
const HEADER: &str = "envbuild-journal 2";
/// A journal is a few lines per file written; anything larger is not one of envbuild's.
const MAX_BYTES: u64 = 1024 * 1024;

/// Where journals are kept; `None` when envbuild has no state folder it can use (no `HOME`, a
/// read-only home): writes are then still atomic file by file, but a set interrupted between
/// its renames is not finished by the next write.
#[derive(Debug, Clone)]
pub struct Journals {
    dir: Option<PathBuf>,
}

/// One staged file of a write: the temporary (directly in the write's root folder), where it
/// goes, and the temporary's inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub tmp: PathBuf,
    pub real: PathBuf,
    pub ino: u64,
}

impl Journals {
    /// The user's state folder, from `XDG_STATE_HOME` or `HOME`.
    pub fn from_env() -> Journals {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let base = var("XDG_STATE_HOME")
            .filter(|p| p.is_absolute())
            .or_else(|| var("HOME").map(|h| h.join(".local").join("state")));
        Journals {
            dir: base.map(|b| b.join("envbuild").join("journals")),
        }
    }

    /// Journals kept in `dir` (tests).
    pub fn at(dir: PathBuf) -> Journals {
        Journals { dir: Some(dir) }
    }

    /// The folder, made (owner-only) when missing; `None` when it cannot be used: not a
    /// folder of this user's (a link, someone else's) or not writable.
    fn home(&self) -> Option<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.dir.as_ref()?;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        let meta = std::fs::symlink_metadata(dir).ok()?;
        // SAFETY: geteuid has no preconditions and touches no memory.
        let me = unsafe { libc::geteuid() };
        (meta.is_dir() && meta.uid() == me && meta.mode() & 0o022 == 0).then(|| dir.clone())
    }

    /// The journal of the folder `root` (its real path): one file per folder, named by the
    /// hash of the path.
    fn path_for(home: &Path, root: &Path) -> PathBuf {
        let key = crate::core::hash::sha256_hex(root.as_os_str().as_encoded_bytes());
        home.join(key)
    }

    /// Commit a write: the journal of `root` naming `entries`, renamed into place whole.
    /// Returns the journal's path (for [`Journals::remove`]), or `None` when there is no state
    /// folder to keep it in.
    pub fn commit(&self, root: &Path, entries: &[Entry]) -> Result<Option<PathBuf>, Failure> {
        let Some(home) = self.home() else {
            return Ok(None);
        };
        let folder = std::fs::metadata(root).map_err(|e| Failure::io(root, &e))?;
        let mut text = format!(
            "{HEADER}\nroot {}\nfolder {} {}\n",
            hex_of(root),
            folder.dev(),
            folder.ino()
        );
        for e in entries {
            let rel = |p: &Path| {
                p.strip_prefix(root).map(hex_of).map_err(|_| {
                    Failure::io(p, &std::io::Error::other("outside the folder of the write"))
                })
            };
            text.push_str(&format!("{} {} {}\n", rel(&e.tmp)?, rel(&e.real)?, e.ino));
        }
        let path = Self::path_for(&home, root);
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&home)
            .map_err(|e| Failure::io(&home, &e))?;
        tmp.write_all(text.as_bytes())
            .map_err(|e| Failure::io(&home, &e))?;
        tmp.persist(&path)
            .map_err(|e| Failure::io(&path, &e.error))?;
        Ok(Some(path))
    }

    /// Remove a committed journal once its write is done (or undone).
    pub fn remove(journal: &Path) -> Result<(), Failure> {
        match std::fs::remove_file(journal) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Failure::io(journal, &e)),
            _ => Ok(()),
        }
    }

    /// Finish the committed write of the folder `root` (whose lock the caller holds) that a
    /// kill interrupted: each temporary still there is renamed to its destination. Returns
    /// whether there was one. A journal that does not belong to this very folder (another
    /// folder at the same path since), or names a temporary that is not the one staged, moves
    /// nothing and is dropped; no link is followed on the way to a destination.
    pub fn finish(&self, root: &Path) -> Result<bool, Failure> {
        let Some(home) = self.home() else {
            return Ok(false);
        };
        let root = std::fs::canonicalize(root).map_err(|e| Failure::io(root, &e))?;
        let path = Self::path_for(&home, &root);
        let Some(text) = read_journal(&path)? else {
            return Ok(false);
        };
        let folder = std::fs::metadata(&root).map_err(|e| Failure::io(&root, &e))?;
        let entries = parse(&text, &root, (folder.dev(), folder.ino()));
        // Dropped whatever happens: a journal that cannot be finished must not block every
        // later write into the folder.
        let finished = entries
            .as_deref()
            .map(|entries| entries.iter().try_for_each(|e| roll_forward(&root, e)));
        Self::remove(&path)?;
        match finished {
            None => Ok(false),
            Some(result) => result.map(|()| true),
        }
    }
}

/// The journal's text, if there is one: a regular file of this user's, bounded, never a link.
fn read_journal(path: &Path) -> Result<Option<String>, Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io(path, &e)),
        Ok(f) => f,
    };
    let meta = file.metadata().map_err(|e| Failure::io(path, &e))?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        // Not one envbuild wrote: dropped, so it cannot block every later write.
        let _ = std::fs::remove_file(path);
        return Ok(None);
    }
    let mut text = String::new();
    if file.take(MAX_BYTES).read_to_string(&mut text).is_err() {
        let _ = std::fs::remove_file(path);
        return Ok(None);
    }
    Ok(Some(text))
}

/// The entries of a journal written for the folder `root` with `folder`'s (device, inode), or
/// `None` when it is not a whole journal of this folder.
fn parse(text: &str, root: &Path, folder: (u64, u64)) -> Option<Vec<Entry>> {
    if !text.ends_with('\n') {
        return None;
    }
    let mut lines = text.lines();
    (lines.next()? == HEADER).then_some(())?;
    let recorded_root = unhex(lines.next()?.strip_prefix("root ")?)?;
    let (dev, ino) = lines.next()?.strip_prefix("folder ")?.split_once(' ')?;
    if recorded_root != root || (dev.parse().ok()?, ino.parse().ok()?) != folder {
        return None;
    }
    lines
        .map(|line| {
            let mut parts = line.split(' ');
            let (tmp, real, ino) = (parts.next()?, parts.next()?, parts.next()?);
            let (tmp, real) = (unhex(tmp)?, unhex(real)?);
            // The temporary lies directly in the root and is one of envbuild's; the
            // destination lies below the root, without `..`.
            let tmp_ok =
                tmp.components().count() == 1 && tmp.to_string_lossy().starts_with(TEMP_PREFIX);
            (tmp_ok && below(&real) && parts.next().is_none()).then_some(())?;
            Some(Entry {
                tmp: root.join(tmp),
                real: root.join(real),
                ino: ino.parse().ok()?,
            })
        })
        .collect()
}

/// Whether `rel` names something below a folder: only plain names, at least one.
fn below(rel: &Path) -> bool {
    !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Rename one staged temporary to its destination, if it is still there and still the file
/// that was staged. Every folder on the way must be a real folder (one removed since the kill
/// is made again), never a link.
fn roll_forward(root: &Path, e: &Entry) -> Result<(), Failure> {
    let staged = match std::fs::symlink_metadata(&e.tmp) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()), // renamed before the kill
        Err(err) => return Err(Failure::io(&e.tmp, &err)),
        Ok(m) => m,
    };
    if !staged.is_file() || staged.ino() != e.ino {
        return Ok(());
    }
    let rel = e.real.strip_prefix(root).unwrap_or(&e.real);
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&at).map_err(|err| Failure::io(&at, &err))?
            }
            _ => {
                return Err(Failure::io(
                    &at,
                    &std::io::Error::other(format!(
                        "not a folder: the interrupted write into `{}` is not finished",
                        shown(root)
                    )),
                ))
            }
        }
    }
    std::fs::rename(&e.tmp, &e.real).map_err(|err| Failure::io(&e.real, &err))
}

/// A path's bytes as hex: any byte may be in a file name.
fn hex_of(p: &Path) -> String {
    crate::core::hash::hex(p.as_os_str().as_encoded_bytes())
}

fn unhex(s: &str) -> Option<PathBuf> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect();
    let name: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(bytes?);
    Some(PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(root: &Path, tmp: &str, real: &str, contents: &str) -> Entry {
        let tmp = root.join(tmp);
        std::fs::write(&tmp, contents).unwrap();
        let ino = std::fs::metadata(&tmp).unwrap().ino();
        Entry {
            tmp,
            real: root.join(real),
            ino,
        }
    }

    /// A committed journal rolls forward (a destination's removed folder is made again); one
    /// for another folder at the same path, or whose temporary was swapped, moves nothing.
    #[test]
    fn a_journal_finishes_only_its_own_folder_and_its_own_temporaries() {
        let state = tempfile::tempdir().unwrap();
        let journals = Journals::at(state.path().join("journals"));
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let a = entry(&root, ".envbuild-tmp-a-1", "gone/a.txt", "new a");
        journals.commit(&root, std::slice::from_ref(&a)).unwrap();
        assert!(journals.finish(&root).unwrap());
        assert_eq!(
            std::fs::read_to_string(root.join("gone/a.txt")).unwrap(),
            "new a"
        );
        assert!(!journals.finish(&root).unwrap(), "the journal stayed");

        // The temporary was replaced by another file of the same name: left alone.
        let b = entry(&root, ".envbuild-tmp-b-1", "b.txt", "staged");
        journals.commit(&root, std::slice::from_ref(&b)).unwrap();
        // Made while the staged one exists, so its inode differs.
        std::fs::write(root.join("planted"), "planted").unwrap();
        std::fs::rename(root.join("planted"), &b.tmp).unwrap();
        assert!(journals.finish(&root).unwrap());
        assert!(!root.join("b.txt").exists());

        // The folder was removed and made again at the same path: nothing moves.
        let c = entry(&root, ".envbuild-tmp-c-1", "c.txt", "old checkout's");
        journals.commit(&root, std::slice::from_ref(&c)).unwrap();
        let moved = root.with_extension("old");
        std::fs::rename(&root, &moved).unwrap();
        std::fs::create_dir(&root).unwrap();
        std::fs::copy(moved.join(".envbuild-tmp-c-1"), &c.tmp).unwrap();
        assert!(!journals.finish(&root).unwrap());
        assert!(!root.join("c.txt").exists());
        std::fs::remove_dir_all(&moved).unwrap();
    }

    /// No link is followed on the way to a destination, and an entry that leaves the folder
    /// or names a temporary that is not envbuild's is not a journal.
    #[test]
    fn a_journal_follows_no_link_and_names_only_its_folder() {
        let state = tempfile::tempdir().unwrap();
        let journals = Journals::at(state.path().join("journals"));
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let a = entry(
            &root,
            ".envbuild-tmp-hook-1",
            "hooks/pre-commit",
            "#!/bin/sh",
        );
        journals.commit(&root, std::slice::from_ref(&a)).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("hooks")).unwrap();
        assert!(journals.finish(&root).is_err());
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());

        let folder = std::fs::metadata(&root).unwrap();
        let id = (folder.dev(), folder.ino());
        let head = format!(
            "{HEADER}\nroot {}\nfolder {} {}\n",
            hex_of(&root),
            id.0,
            id.1
        );
        let h = |s: &str| hex_of(Path::new(s));
        for bad in [
            format!("{} {} 1\n", h(".envbuild-tmp-x"), h("../victim")),
            format!("{} {} 1\n", h("x"), h("victim")),
            format!("{} {} 1\n", h("sub/.envbuild-tmp-x"), h("victim")),
            format!("{} {} 1\n", h(".envbuild-tmp-x"), h("/etc/passwd")),
        ] {
            assert_eq!(parse(&format!("{head}{bad}"), &root, id), None, "{bad}");
        }
        assert!(parse(&head, &root, id).is_some());
        assert_eq!(parse(&head, &root, (id.0, id.1 + 1)), None);
        assert_eq!(parse(&head[..head.len() - 1], &root, id), None);
    }

    /// A state folder that is a link, or someone else's, or writable by others is not used.
    #[test]
    fn a_state_folder_that_is_a_link_or_open_to_others_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let real = state.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = state.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(Journals::at(link).home().is_none());
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Journals::at(real.clone()).home().is_none());
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(Journals::at(real.clone()).home(), Some(real));
    }
}
