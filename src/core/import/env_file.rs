//! The conda environment file as written (`name`, `channels`, `dependencies` with an optional
//! `- pip:` list, and the `prefix:` an export records), where each list item sits in the text,
//! and the metadata line envbuild writes into the files it renders.
//! This module performs no I/O.

use crate::core::diag::{Diagnostic, Location};
use crate::core::lock::{EnvMetadata, ENV_METADATA_PREFIX};
use crate::core::spec::codes::INVALID_SPEC;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub(super) struct EnvFile {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) channels: Vec<String>,
    /// An item with nothing after its dash (`- # av==14.4.0`, a package commented out where
    /// it stood) reads as null.
    #[serde(default)]
    pub(super) dependencies: Vec<Option<Dep>>,
    /// Where `conda env export` found the environment: names the machine it came from.
    pub(super) prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Dep {
    Conda(String),
    /// `- pip:` with no lines reads as `pip: null`.
    Pip {
        pip: Option<Vec<Option<String>>>,
    },
}

/// Parse the YAML document; `file` names it in the message and location of a failure.
pub(super) fn parse(text: &str, file: &str) -> Result<EnvFile, Vec<Diagnostic>> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let loc = e.location().map(|l| Location {
            file: file.to_string(),
            line: l.line() as usize,
            column: l.column() as usize,
        });
        vec![Diagnostic::error(
            INVALID_SPEC,
            format!(
                "{} is not a conda environment file: {}",
                crate::core::diag::printable(file),
                e.to_string().lines().next().unwrap_or("")
            ),
        )
        .with_location(loc)
        .with_hint(
            "expected `name`, `channels` and `dependencies` (with an optional `- pip:` list)",
        )]
    })
}

/// Every `- item` line of the text, in order, as (1-based line, item without quotes or a
/// trailing comment): YAML keeps list order, so the n-th dependency read is found by walking
/// forward through these.
pub(super) fn item_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.trim();
            // A dash alone is an empty (null) item.
            let item = if l == "-" { "" } else { l.strip_prefix("- ")? };
            let item = match item.find(" #") {
                Some(c) => &item[..c],
                None => item,
            };
            Some((
                i + 1,
                item.trim().trim_matches(['"', '\'']).trim().to_string(),
            ))
        })
        .collect()
}

/// The line of the top-level `key:`.
pub(super) fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))
        .map(|i| i + 1)
}

/// The settings envbuild recorded in a file it rendered, if this is one (an unreadable
/// metadata line counts as none).
pub(super) fn metadata(text: &str) -> Option<EnvMetadata> {
    text.lines()
        .find_map(|l| l.strip_prefix(ENV_METADATA_PREFIX))
        .and_then(|j| serde_json::from_str(j).ok())
}
