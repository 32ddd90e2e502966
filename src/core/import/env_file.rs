//! The conda environment file as written (`name`, `channels`, `dependencies` with an optional
//! `- pip:` list) and the metadata line envbuild writes into the files it renders.
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
    #[serde(default)]
    pub(super) dependencies: Vec<Dep>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Dep {
    Conda(String),
    Pip { pip: Vec<String> },
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
                "{file} is not a conda environment file: {}",
                e.to_string().lines().next().unwrap_or("")
            ),
        )
        .with_location(loc)
        .with_hint(
            "expected `name`, `channels` and `dependencies` (with an optional `- pip:` list)",
        )]
    })
}

/// The settings envbuild recorded in a file it rendered, if this is one (an unreadable
/// metadata line counts as none).
pub(super) fn metadata(text: &str) -> Option<EnvMetadata> {
    text.lines()
        .find_map(|l| l.strip_prefix(ENV_METADATA_PREFIX))
        .and_then(|j| serde_json::from_str(j).ok())
}
