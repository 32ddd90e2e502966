//! `envbuild matrix SPEC...|DIR [--format github|gitlab|json]`: print the CI matrix of the
//! specs' current locks on stdout (JSON unless `--format` says otherwise). Performs I/O: reads specs and locks, writes stdout.

use crate::cli::{MatrixArgs, MatrixFormat, MatrixVariant};
use crate::core::compat::Table;
use crate::core::diag::Failure;

pub fn run(o: &super::Output, table: &Table, args: &MatrixArgs) -> Result<i32, Failure> {
    let specs = crate::app::matrix::specs(&args.specs)?;
    let variants: Vec<&str> = match args.variant {
        None => Vec::new(),
        Some(MatrixVariant::Runtime) => vec!["runtime"],
        Some(MatrixVariant::Dev) => vec!["dev"],
    };
    let repo = args.repo.as_ref().map(|r| r.name.clone());
    let entries = crate::app::matrix::matrix(
        table,
        &specs,
        (&variants, args.templates.as_deref()),
        repo.as_deref(),
    )?;
    let text = match args.format {
        MatrixFormat::Github => crate::core::matrix::github(&entries),
        MatrixFormat::Gitlab => crate::core::matrix::gitlab(&entries),
        MatrixFormat::Json => super::json_text(&serde_json::json!({ "matrix": entries }))?,
    };
    o.out(&text)?;
    Ok(crate::core::diag::exit::OK)
}
