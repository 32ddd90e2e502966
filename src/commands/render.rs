//! `envbuild render` and `envbuild templates dump`: CLI adapters over `app::render` (prints the
//! diagnostics and what was written) and the embedded templates' dump into a new or empty
//! directory (writes files).

use super::eprint_diagnostics;
use crate::app::render as app;
use crate::cli::{RenderArgs, TemplatesCommand};
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};

pub fn run(table: &Table, args: &RenderArgs) -> Result<i32, Failure> {
    let mirrors =
        crate::cli::parse::mirrors(args.pip_mirror.as_deref(), args.conda_mirror.as_deref())?;
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
        .map_or_else(|| app::default_out(&args.input), Ok)?;
    let w = app::write(
        &lock,
        args.templates.as_deref(),
        &mirrors,
        (&out, args.force),
    )?;
    eprintln!(
        "rendered {} files into {} ({} changed)",
        w.files,
        crate::core::diag::shown(&w.out),
        w.changed
    );
    Ok(exit::OK)
}

pub fn templates(cmd: &TemplatesCommand) -> Result<i32, Failure> {
    match cmd {
        TemplatesCommand::Dump { dir, force } => {
            let n = app::dump_templates(dir, *force)?;
            eprintln!(
                "wrote {n} templates to {}; use them with `envbuild render --templates {}`",
                crate::core::diag::shown(dir),
                crate::core::diag::shown(dir)
            );
            Ok(exit::OK)
        }
    }
}
