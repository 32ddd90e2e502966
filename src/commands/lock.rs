//! `envbuild lock`: the CLI adapter over `app::lock`: prints the diagnostics (or the JSON
//! document) and maps the outcome to an exit code.

use super::{eprint_diagnostics, Output};
use crate::app::lock::{lock, LockOutcome, LockRequest};
use crate::cli::LockArgs;
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::lock::Lock;
use serde::Serialize;

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

fn report(
    o: &Output,
    json: bool,
    diags: &[Diagnostic],
    lock: Option<&Lock>,
) -> Result<(), Failure> {
    if json {
        o.print_json(&JsonOut {
            status: status(diags),
            diagnostics: diags,
            lock,
        })
    } else {
        eprint_diagnostics(diags);
        for (key, c) in lock.map(|l| &l.choices).into_iter().flatten() {
            eprintln!(
                "note[{}]: {key} = \"{}\" ({})",
                crate::core::resolve::choose::codes::CHOSEN,
                c.chosen,
                c.reason
            );
        }
        Ok(())
    }
}

/// What a written lock holds, in one line: torch, its build, CUDA, and the two driver floors by
/// the lock's own key names (`driver_min` runs the build natively, `driver_min_compat` is the
/// lowest that runs it at all), so the line and the lock never seem to disagree.
fn summary(lock: &Lock) -> String {
    let torch = lock.packages.get("torch").map_or("?", String::as_str);
    let build = lock.cuda_variant.as_deref().unwrap_or(lock.source.as_str());
    let mut text = format!("torch {torch} {build}, CUDA {}", lock.cuda);
    if !lock.driver_min.is_empty() {
        text.push_str(&format!("; driver_min {} natively", lock.driver_min));
        match lock.driver_min_compat.as_deref() {
            Some(compat) if compat != lock.driver_min => text.push_str(&format!(
                ", driver_min_compat {compat} through minor-version compatibility"
            )),
            _ => {}
        }
    }
    text
}

pub fn run(o: &Output, table: &Table, args: &LockArgs) -> Result<i32, Failure> {
    let req = LockRequest {
        spec: &args.spec,
        out: args.out.as_deref(),
        locked: args.locked,
        upgrade: args.upgrade,
        upgrade_packages: &args.upgrade_package,
        offline: args.offline,
        no_closure: args.no_closure,
    };
    match lock(table, &req)? {
        LockOutcome::Refused { diagnostics } => {
            report(o, args.json, &diagnostics, None)?;
            Ok(exit::FAILURE)
        }
        LockOutcome::Current {
            lock,
            path,
            diagnostics,
        } => {
            report(o, args.json, &diagnostics, Some(&lock))?;
            if !args.json {
                eprintln!("{} is up to date", crate::core::diag::shown(&path));
            }
            Ok(exit::OK)
        }
        LockOutcome::Written {
            lock,
            path,
            diagnostics,
        } => {
            report(o, args.json, &diagnostics, Some(&lock))?;
            if !args.json {
                eprintln!(
                    "wrote {} ({})",
                    crate::core::diag::shown(&path),
                    summary(&lock)
                );
            }
            Ok(exit::OK)
        }
    }
}
