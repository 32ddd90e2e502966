//! The embedded templates and the minijinja environment that renders them.
//!
//! Templates are compiled into the binary (`include_str!`). With `--templates DIR`, the loader
//! looks in the team's files (read by the caller) first and falls back to the embedded copy
//! (`add_template` would always win over a loader, so both sources live inside the loader).
//! This module performs no I/O.

use super::filters;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior};
use std::collections::BTreeMap;

/// Every embedded template: (name, text). `envbuild templates dump` writes exactly these.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "Dockerfile.j2",
        include_str!("../../../templates/Dockerfile.j2"),
    ),
    (
        "environment.yml.j2",
        include_str!("../../../templates/environment.yml.j2"),
    ),
    (
        "requirements.txt.j2",
        include_str!("../../../templates/requirements.txt.j2"),
    ),
    (
        "pylock.toml.j2",
        include_str!("../../../templates/pylock.toml.j2"),
    ),
    (
        "dockerignore.j2",
        include_str!("../../../templates/dockerignore.j2"),
    ),
    (
        "dev-entrypoint.sh.j2",
        include_str!("../../../templates/dev-entrypoint.sh.j2"),
    ),
    (
        "python-env.sh.j2",
        include_str!("../../../templates/python-env.sh.j2"),
    ),
    (
        "conda-explicit.txt.j2",
        include_str!("../../../templates/conda-explicit.txt.j2"),
    ),
    (
        "conda-env.sh.j2",
        include_str!("../../../templates/conda-env.sh.j2"),
    ),
    (
        "ca-bundle.pem.j2",
        include_str!("../../../templates/ca-bundle.pem.j2"),
    ),
    (
        "constraints.txt.j2",
        include_str!("../../../templates/constraints.txt.j2"),
    ),
    (
        "sshd_config.j2",
        include_str!("../../../templates/sshd_config.j2"),
    ),
    (
        "docker-run.sh.j2",
        include_str!("../../../templates/docker-run.sh.j2"),
    ),
    (
        "compose.yaml.j2",
        include_str!("../../../templates/compose.yaml.j2"),
    ),
    (
        "pod.yaml.j2",
        include_str!("../../../templates/pod.yaml.j2"),
    ),
];

fn embedded(name: &str) -> Option<&'static str> {
    EMBEDDED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// A minijinja environment: strict undefined, no auto-escaping (Dockerfiles and YAML are not
/// HTML; quoting is explicit with `dq`, `yaml_str` and `sh`), trailing newline kept.
pub(super) fn environment(
    overrides: Option<BTreeMap<String, String>>,
) -> Result<Environment<'static>, Error> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    // Block tags on their own lines leave no blank lines behind; files keep their final newline.
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()?,
    );
    env.add_filter("dq", |s: String| filters::dq(&s));
    env.add_filter("yaml_str", |s: String| filters::yaml_str(&s));
    env.add_filter("toml_str", |s: String| filters::toml_str(&s));
    env.add_filter("sh", |s: String| {
        filters::sh(&s).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
    });
    env.set_loader(move |name: &str| {
        if let Some(text) = overrides.as_ref().and_then(|o| o.get(name)) {
            return Ok(Some(text.clone()));
        }
        Ok(embedded(name).map(str::to_string))
    });
    Ok(env)
}

/// The embedded templates as (file name, bytes), for `envbuild templates dump`.
pub fn dump_templates() -> Vec<(String, Vec<u8>)> {
    EMBEDDED
        .iter()
        .map(|(n, t)| ((*n).to_string(), t.as_bytes().to_vec()))
        .collect()
}
