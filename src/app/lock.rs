//! `lock`: resolve a spec and write `envbuild.lock` atomically, or check it against the lock on
//! disk (`--locked`). Reads the spec and the lock; writes the lock. Prints nothing.

use super::codes::{LOCK_MISSING, LOCK_STALE};
use super::{load_spec, lock_path, resolve_loaded};
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::{changed_keys, Lock};
use std::path::{Path, PathBuf};

/// What `lock` asked for.
#[derive(Debug, Clone)]
pub struct LockRequest<'a> {
    pub spec: &'a Path,
    /// Write the lock here instead of beside the spec.
    pub out: Option<&'a Path>,
    /// Check only: fail when the lock on disk would change.
    pub locked: bool,
}

/// How a lock run ended. Every variant carries every diagnostic (warnings included).
#[derive(Debug)]
pub enum LockOutcome {
    /// The spec is invalid or does not resolve, or (`--locked`) the lock is stale or missing.
    Refused { diagnostics: Vec<Diagnostic> },
    /// `--locked` and the lock on disk is current.
    Current {
        lock: Box<Lock>,
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
    /// The lock was written (or left alone when its bytes were the same).
    Written {
        lock: Box<Lock>,
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
}

/// Resolve the spec and write or check its lock.
pub fn lock(table: &Table, req: &LockRequest<'_>) -> Result<LockOutcome, Failure> {
    let loaded = match load_spec(req.spec, table) {
        Ok(l) => l,
        Err(diagnostics) => return Ok(LockOutcome::Refused { diagnostics }),
    };
    let res = resolve_loaded(&loaded, table);
    let mut diagnostics = res.diagnostics;
    let Some(lock) = res
        .lock
        .filter(|_| !diagnostics.iter().any(Diagnostic::is_error))
    else {
        return Ok(LockOutcome::Refused { diagnostics });
    };
    let text = lock
        .to_toml()
        .map_err(|e| Failure::bug(format!("cannot serialise the lock: {e}")))?;
    let path = lock_path(req.spec, req.out);
    if req.locked {
        let fix = "run `envbuild lock` and commit the new lock";
        return Ok(match stale_lock(&path, &text, fix)? {
            Some(d) => {
                diagnostics.push(d);
                LockOutcome::Refused { diagnostics }
            }
            None => LockOutcome::Current {
                lock: Box::new(lock),
                path,
                diagnostics,
            },
        });
    }
    crate::infra::fs::write_atomic(&path, text.as_bytes())?;
    Ok(LockOutcome::Written {
        lock: Box::new(lock),
        path,
        diagnostics,
    })
}

/// `--locked`: `None` when the lock at `path` is `text` byte for byte; otherwise `LOCK_MISSING`
/// or `LOCK_STALE` naming every key that would change. `fix` is the hint.
pub fn stale_lock(
    path: &std::path::Path,
    text: &str,
    fix: &str,
) -> Result<Option<Diagnostic>, Failure> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(
                Diagnostic::error(
                    LOCK_MISSING,
                    format!("{} does not exist", crate::core::diag::shown(path)),
                )
                .with_hint(fix.to_string()),
            ))
        }
        Err(e) => return Err(Failure::io(path, &e)),
    };
    if old == text {
        return Ok(None);
    }
    let changes = changed_keys(&old, text);
    Ok(Some(
        Diagnostic::error(
            LOCK_STALE,
            format!(
                "{} is stale; re-locking would change:\n    {}",
                crate::core::diag::shown(path),
                if changes.is_empty() {
                    "(formatting only)".to_string()
                } else {
                    changes.join("\n    ")
                }
            ),
        )
        .with_hint(fix.to_string()),
    ))
}
