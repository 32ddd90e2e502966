//! A pip `requirements.txt` as the input: the same pip lines as an environment file's `- pip:`
//! list, with the Python from the command line (the file cannot name one).
//! This module performs no I/O.

use super::scan::Scan;
use super::{pip, spec_text, ImportOptions, Imported};
use crate::core::compat::Table;
use crate::core::diag::{printable, Diagnostic};
use crate::core::lock::EnvMetadata;
use crate::core::spec::codes::INVALID_SPEC;

pub(super) fn import(
    text: &str,
    file: &str,
    table: &Table,
    opts: &ImportOptions,
) -> Result<Imported, Vec<Diagnostic>> {
    let mut scan = Scan::new(file, table, &[], Vec::new());
    // A trailing backslash continues a requirement on the next line (hashes, long options).
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(raw.trim());
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, format!("{} ", head.trim_end())));
            continue;
        }
        scan.line = Some(start);
        if joined.starts_with("-r ")
            || joined.starts_with("-c ")
            || joined.starts_with("--requirement")
        {
            scan.invalid(format!(
                "`{joined}` includes another file, which import does not follow"
            ));
            continue;
        }
        pip::line(&mut scan, &joined);
    }
    match &opts.python {
        Some(p) => scan.found.python = Some(p.clone()),
        None => scan.error_at(
            None,
            Diagnostic::error(
                INVALID_SPEC,
                format!(
                    "{} is a requirements file, which cannot say which Python it is for",
                    printable(file)
                ),
            )
            .with_hint("pass `--python X.Y` (the Python the requirements were installed with)"),
        ),
    }
    let name = std::path::Path::new(file)
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .filter(|n| {
            n.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
        .unwrap_or("imported-env")
        .to_string();
    let meta = EnvMetadata {
        platform: "linux-64".into(),
        ..Default::default()
    };
    let lines = spec_text::Lines::default();
    super::finish(scan, name, &[], &meta, opts, lines)
}
