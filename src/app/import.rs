//! `import`: a conda environment.yml (or a pip requirements.txt) read from disk and turned into a spec, and the spec written
//! where asked without replacing an existing file by accident. Reads and writes files; prints
//! nothing.

use super::codes::OUTPUT_EXISTS;
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::import::{import, ImportOptions, Imported};
use crate::infra::fs::{read_text, Input};
use std::path::Path;

/// The spec text for an environment file, with notes on what changed; `Err` holds why it
/// cannot be imported.
pub fn import_file(
    file: &Path,
    table: &Table,
    opts: &ImportOptions,
) -> Result<Result<Imported, Vec<Diagnostic>>, Failure> {
    let text = read_text(file, Input::EnvironmentFile)?;
    Ok(import(&text, &crate::core::diag::shown(file), table, opts))
}

/// Write `bytes` to `out` atomically, refusing (`OUTPUT_EXISTS`) to replace an existing file
/// unless `force`.
pub fn write_new(out: &Path, bytes: &[u8], force: bool) -> Result<(), Failure> {
    if out.exists() && !force {
        return Err(Failure::one(
            Diagnostic::error(
                OUTPUT_EXISTS,
                format!("{} already exists", crate::core::diag::shown(out)),
            )
            .with_hint("pass --force to overwrite it, or choose another --out"),
        ));
    }
    crate::infra::fs::write_atomic(out, bytes)
}
