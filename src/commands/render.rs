//! `envbuild render` and `envbuild templates dump`: CLI adapters over `app::render` (prints the
//! diagnostics and what was written) and the embedded templates' dump (writes files).

use super::eprint_diagnostics;
use crate::app::render as app;
use crate::cli::{RenderArgs, TemplatesCommand};
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use std::path::PathBuf;

pub fn run(table: &Table, args: &RenderArgs) -> Result<i32, Failure> {
    let lock = match app::lock_for(&args.input, table)? {
        app::LockFor::Ready { lock, warnings } => {
            eprint_diagnostics(&warnings);
            lock
        }
        app::LockFor::Refused(diags) => {
            eprint_diagnostics(&diags);
            return Ok(exit::FAILURE);
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| app::default_out(&args.input));
    let w = app::write(&lock, args.templates.as_deref(), &out)?;
    eprintln!(
        "rendered {} files into {} ({} changed)",
        w.files,
        w.out.display(),
        w.changed
    );
    Ok(exit::OK)
}

pub fn templates(cmd: &TemplatesCommand) -> Result<i32, Failure> {
    match cmd {
        TemplatesCommand::Dump { dir, force } => {
            let files: Vec<(PathBuf, Vec<u8>)> = crate::core::render::dump_templates()
                .into_iter()
                .map(|(n, b)| (dir.join(n), b))
                .collect();
            if !force {
                let existing: Vec<String> = files
                    .iter()
                    .filter(|(p, _)| p.exists())
                    .map(|(p, _)| p.display().to_string())
                    .collect();
                if !existing.is_empty() {
                    return Err(Failure::one(
                        Diagnostic::error(
                            "FILE_EXISTS",
                            format!("would overwrite: {}", existing.join(", ")),
                        )
                        .with_hint("pass --force to overwrite, or choose an empty directory"),
                    ));
                }
            }
            crate::infra::fs::write_all_atomic(&files)?;
            eprintln!(
                "wrote {} templates to {}; use them with `envbuild render --templates {}`",
                files.len(),
                dir.display(),
                dir.display()
            );
            Ok(exit::OK)
        }
    }
}
