//! A pip `requirements.txt` as the input: the same pip lines as an environment file's `- pip:`
//! list, with the Python from the command line (the file cannot name one; without
//! `--python` the spec takes any, `*`).
//! This module performs no I/O.

use super::scan::Scan;
use super::{pip, spec_text, ImportOptions, Imported};
use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::lock::EnvMetadata;

pub(super) fn import(
    text: &str,
    file: &str,
    table: &Table,
    opts: &ImportOptions,
) -> Result<Imported, Vec<Diagnostic>> {
    let mut scan = Scan::new(file, table, &[], Vec::new());
    // The Python first: markers on the lines below may ask for it.
    match &opts.python {
        Some(p) => scan.found.python = Some(p.clone()),
        None => scan.any_python(
            "a requirements file cannot say which Python it is for (`--python X.Y` names one)",
        ),
    }
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
        pip::line(&mut scan, &joined);
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
