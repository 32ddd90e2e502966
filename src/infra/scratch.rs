//! Temporary folders that a signal does not leave behind. This module performs file I/O.
//!
//! A `tempfile::TempDir` is removed when it is dropped, which a process ended by a signal
//! never does: SIGTERM during a lock (while uv resolves) would leave envbuild's folder and the
//! one uv made inside it. A [`Scratch`] is registered while it lives and, while any lives,
//! SIGHUP, SIGINT, SIGQUIT and SIGTERM are caught (the child loop of `proc` acts on them at
//! once); on the way out every registered folder is removed, then the signal is raised again
//! with envbuild's own disposition, so the run still ends by it.

use crate::infra::signals as forward;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The folders of the scratches alive now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A temporary folder, removed when dropped or when a signal ends the run.
pub struct Scratch {
    dir: Option<tempfile::TempDir>,
    guard: Option<forward::Guard>,
}

/// A new registered temporary folder under the system's temporary folder (`TMPDIR`).
pub fn tempdir() -> std::io::Result<Scratch> {
    // Catch first, so that no signal falls between the folder's creation and its registration.
    let guard = forward::Guard::install();
    let dir = tempfile::tempdir()?;
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(dir.path().to_path_buf());
    Ok(Scratch {
        dir: Some(dir),
        guard: Some(guard),
    })
}

impl Scratch {
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            unregister(dir.path());
            let _ = dir.close();
        }
        drop(self.guard.take());
        // A signal caught while no child ran: act on it now that this folder is gone.
        if let Some(signal) = forward::take() {
            remove_all();
            forward::raise(signal);
        }
    }
}

fn unregister(path: &Path) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| p != path);
}

/// Remove every live scratch folder: a signal is about to end the run (the children that
/// wrote into them were killed first).
pub fn remove_all() {
    let paths = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    for p in paths {
        let _ = std::fs::remove_dir_all(&p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_is_removed_when_dropped() {
        // `remove_all` is left to the integration test: it would empty other tests' scratches.
        let a = tempdir().unwrap();
        let path = a.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        assert!(LIVE.lock().unwrap().contains(&path));
        drop(a);
        assert!(!path.exists());
        assert!(!LIVE.lock().unwrap().contains(&path));
    }
}
