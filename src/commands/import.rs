//! `envbuild import`: the CLI adapter over `app::import`: prints the spec (or writes it with
//! `--out`) and the diagnostics.

use super::eprint_diagnostics;
use crate::app::import::{import_file, write_new};
use crate::cli::ImportArgs;
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};
use crate::core::import::ImportOptions;

pub fn run(table: &Table, args: &ImportArgs) -> Result<i32, Failure> {
    let opts = ImportOptions {
        driver: args.driver.clone(),
        gpus: args.gpus.clone(),
    };
    let spec = match import_file(&args.file, table, &opts)? {
        Ok(s) => s,
        Err(diags) => {
            eprint_diagnostics(&diags);
            return Ok(exit::FAILURE);
        }
    };
    match &args.out {
        None => super::out(&spec)?,
        Some(out) => {
            write_new(out, spec.as_bytes(), args.force)?;
            eprintln!("wrote {}", out.display());
        }
    }
    Ok(exit::OK)
}
