//! `envbuild import`: read an environment.yml, print or write the spec. Reads the input file,
//! writes the output file atomically (or stdout).

use super::eprint_diagnostics;
use crate::cli::ImportArgs;
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::import::{import, ImportOptions};

pub fn run(table: &Table, args: &ImportArgs) -> Result<i32, Failure> {
    let text = crate::infra::fs::read_text(&args.file)?;
    let opts = ImportOptions {
        driver: args.driver.clone(),
        gpus: args.gpus.clone(),
    };
    let spec = match import(&text, &args.file.display().to_string(), table, &opts) {
        Ok(s) => s,
        Err(diags) => {
            eprint_diagnostics(&diags);
            return Ok(exit::FAILURE);
        }
    };
    match &args.out {
        None => print!("{spec}"),
        Some(out) => {
            if out.exists() && !args.force {
                return Err(Failure::one(
                    Diagnostic::error(
                        crate::app::codes::OUTPUT_EXISTS,
                        format!("{} already exists", out.display()),
                    )
                    .with_hint("pass --force to overwrite it, or choose another --out"),
                ));
            }
            crate::infra::fs::write_atomic(out, spec.as_bytes())?;
            eprintln!("wrote {}", out.display());
        }
    }
    Ok(exit::OK)
}
