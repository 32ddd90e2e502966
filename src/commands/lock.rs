//! `envbuild lock`: resolve a spec and write `envbuild.lock` atomically, or check it with
//! `--locked`. Reads the spec and the lock on disk; writes the lock.

use super::{eprint_diagnostics, load_spec, lock_path, print_json, resolve_loaded};
use crate::cli::LockArgs;
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::lock::{changed_keys, Lock};
use serde::Serialize;

pub const LOCK_STALE: &str = "LOCK_STALE";
pub const LOCK_MISSING: &str = "LOCK_MISSING";

#[derive(Serialize)]
struct JsonOut<'a> {
    status: &'static str,
    diagnostics: &'a [Diagnostic],
    lock: Option<&'a Lock>,
}

fn status(diags: &[Diagnostic]) -> &'static str {
    if diags.iter().any(Diagnostic::is_error) {
        "error"
    } else if diags.is_empty() {
        "ok"
    } else {
        "warning"
    }
}

fn report(json: bool, diags: &[Diagnostic], lock: Option<&Lock>) -> Result<(), Failure> {
    if json {
        print_json(&JsonOut {
            status: status(diags),
            diagnostics: diags,
            lock,
        })
    } else {
        eprint_diagnostics(diags);
        Ok(())
    }
}

pub fn run(table: &Table, args: &LockArgs) -> Result<i32, Failure> {
    let loaded = match load_spec(&args.spec, table) {
        Ok(l) => l,
        Err(diags) => {
            report(args.json, &diags, None)?;
            return Ok(exit::FAILURE);
        }
    };
    let res = resolve_loaded(&loaded, table);
    let mut diags = res.diagnostics;
    let Some(lock) = res.lock.filter(|_| !diags.iter().any(Diagnostic::is_error)) else {
        report(args.json, &diags, None)?;
        return Ok(exit::FAILURE);
    };
    let text = lock
        .to_toml()
        .map_err(|e| Failure::bug(format!("cannot serialise the lock: {e}")))?;
    let path = lock_path(&args.spec, args.out.as_deref());

    if args.locked {
        let problem = stale_lock(&path, &text, "run `envbuild lock` and commit the new lock")?;
        return match problem {
            Some(d) => {
                diags.push(d);
                report(args.json, &diags, None)?;
                Ok(exit::FAILURE)
            }
            None => {
                report(args.json, &diags, Some(&lock))?;
                if !args.json {
                    eprintln!("{} is up to date", path.display());
                }
                Ok(exit::OK)
            }
        };
    }

    crate::infra::fs::write_atomic(&path, text.as_bytes())?;
    report(args.json, &diags, Some(&lock))?;
    if !args.json {
        eprintln!(
            "wrote {} (torch {} {}, CUDA {}, driver >= {})",
            path.display(),
            lock.packages
                .get("torch")
                .map(String::as_str)
                .unwrap_or("?"),
            lock.cuda_variant.as_deref().unwrap_or(lock.source.as_str()),
            lock.cuda,
            lock.driver_min_compat
                .as_deref()
                .unwrap_or(&lock.driver_min)
        );
    }
    Ok(exit::OK)
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
                Diagnostic::error(LOCK_MISSING, format!("{} does not exist", path.display()))
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
                path.display(),
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
