//! `envbuild import`: the CLI adapter over `app::import`: prints the spec (or writes it with
//! `--out`), the notes on what changed, and the diagnostics.

use super::eprint_diagnostics;
use crate::app::import::{import_file, write_new};
use crate::cli::ImportArgs;
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};
use crate::core::import::ImportOptions;

pub fn run(o: &super::Output, table: &Table, args: &ImportArgs) -> Result<i32, Failure> {
    let opts = ImportOptions {
        driver: args.driver.clone(),
        gpus: args.gpus.clone(),
        python: args.python.clone(),
    };
    let spec = match import_file(&args.file, table, &opts)? {
        Ok(imported) => {
            // What was changed or left out goes to stderr as well as into the spec's comment.
            eprint_diagnostics(&imported.notes);
            imported.spec
        }
        Err(diags) => {
            eprint_diagnostics(&diags);
            return Ok(exit::FAILURE);
        }
    };
    match &args.out {
        None => o.out(&spec)?,
        Some(out) => {
            write_new(out, spec.as_bytes(), args.force)?;
            eprintln!("wrote {}", crate::core::diag::shown(out));
        }
    }
    Ok(exit::OK)
}
