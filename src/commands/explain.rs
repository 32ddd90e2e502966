//! `envbuild explain SPEC [--format table|markdown|json] [--all]`: print the candidates the
//! resolver weighed for the spec's core keys, the chosen one marked. Performs I/O: reads the
//! spec (through `app::explain`), writes stdout.

use crate::cli::{ExplainArgs, ExplainFormat};
use crate::core::compat::Table;
use crate::core::diag::{exit, Failure};

pub fn run(o: &super::Output, table: &Table, args: &ExplainArgs) -> Result<i32, Failure> {
    let w = match crate::app::explain::explain(table, &args.spec) {
        Ok(w) => w,
        Err(diags) => {
            super::eprint_diagnostics(&diags);
            return Ok(exit::FAILURE);
        }
    };
    let text = match args.format {
        ExplainFormat::Table => crate::core::explain::text(&w, args.all, args.top),
        ExplainFormat::Markdown => crate::core::explain::markdown(&w, args.all, args.top),
        ExplainFormat::Json => super::json_text(&w)?,
    };
    o.out(&text)?;
    // Nothing locks: the same failure `lock` reports, after the table that shows why.
    Ok(if w.chosen.is_some() {
        exit::OK
    } else {
        exit::FAILURE
    })
}
