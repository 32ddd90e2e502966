//! The embedded templates and the minijinja environment that renders them.
//!
//! Templates are compiled into the binary (`include_str!`). With `--templates DIR`, the loader
//! looks in the team's files (read by the caller) first and falls back to the embedded copy
//! (`add_template` would always win over a loader, so both sources live inside the loader).
//! Every render has a budget ([`FUEL`] instructions, [`DEPTH`] levels of calls and includes,
//! [`MAX_OUTPUT`] bytes of output): a team's template that never ends is stopped with
//! `TEMPLATE_BUDGET`. This module performs no I/O.

use super::filters;
use crate::core::diag::{Diagnostic, Failure};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior};
use std::collections::BTreeMap;

/// A template ran out of its budget (`TEMPLATE_BUDGET`).
pub use crate::core::codes::render::TEMPLATE_BUDGET;

/// The instructions one render may run: the embedded templates need well under a tenth of it
/// for the largest closure lock; a loop nest that never ends spends it in seconds.
pub const FUEL: u64 = 20_000_000;

/// How deep macro calls, includes and recursive loops may nest.
pub const DEPTH: usize = 100;

/// The most bytes one rendered file may have (rendered files are kilobytes).
pub const MAX_OUTPUT: usize = 8 << 20;

/// The message of a render whose output passed [`MAX_OUTPUT`].
const OUTPUT_SPENT: &str = "the rendered output passed its size cap";

/// A writer that refuses to grow past [`MAX_OUTPUT`], remembering that it did.
struct Capped<'a> {
    buf: &'a mut Vec<u8>,
    over: &'a std::cell::Cell<bool>,
}

impl std::io::Write for Capped<'_> {
    fn write(&mut self, data: &[u8]) -> Result<usize, std::io::Error> {
        if self.buf.len() + data.len() > MAX_OUTPUT {
            self.over.set(true);
            return Err(std::io::Error::other(OUTPUT_SPENT));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> Result<(), std::io::Error> {
        Ok(())
    }
}

/// Render `name` with `ctx`, its output capped at [`MAX_OUTPUT`] (fuel and depth are the
/// environment's).
pub(super) fn render_capped(
    env: &Environment<'_>,
    name: &str,
    ctx: &minijinja::Value,
) -> Result<String, Error> {
    let template = env.get_template(name)?;
    let mut buf = Vec::new();
    let over = std::cell::Cell::new(false);
    let written = template.render_captured_to(
        ctx.clone(),
        Capped {
            buf: &mut buf,
            over: &over,
        },
    );
    match written {
        Err(_) if over.get() => Err(Error::new(ErrorKind::InvalidOperation, OUTPUT_SPENT)),
        Err(e) => Err(e),
        Ok(_) => String::from_utf8(buf)
            .map_err(|_| Error::new(ErrorKind::InvalidOperation, "the output is not UTF-8")),
    }
}

/// minijinja's own refusals of one repetition or range too large: a size budget too.
const SIZE_CAPS: &[&str] = &[
    "repeated string is too large",
    "repeated sequence is too large",
    "range has too many elements",
];

/// `TEMPLATE_BUDGET` when `e` is a spent budget (fuel, depth, output or value size) of `template`;
/// `origin` names the `--templates` folder, `None` for the embedded set.
pub(super) fn budget_failure(template: &str, e: &Error, origin: Option<&str>) -> Option<Failure> {
    let detail = format!("{e:#}");
    let what = if e.kind() == ErrorKind::OutOfFuel || detail.contains("out of fuel") {
        format!("ran {FUEL} instructions without ending")
    } else if detail.contains("recursion limit exceeded") {
        format!("nested calls or includes deeper than {DEPTH} levels")
    } else if detail.contains(OUTPUT_SPENT) {
        format!("wrote more than {MAX_OUTPUT} bytes")
    } else if SIZE_CAPS.iter().any(|m| detail.contains(m)) {
        "made a repetition or range past minijinja's size cap".to_string()
    } else if detail.contains(super::guard::INPUT_SPENT) {
        format!(
            "gave a filter more than {} bytes to work on",
            super::guard::MAX_INPUT
        )
    } else {
        return None;
    };
    let from = origin.map_or("the embedded set".to_string(), |o| format!("`{o}`"));
    Some(Failure::one(
        Diagnostic::error(
            TEMPLATE_BUDGET,
            format!("template `{template}` (from {from}) {what}: it was stopped"),
        )
        .with_hint(
            "a loop nest, a recursive macro or a huge repetition never finishes a file: \
             compare the template with `envbuild templates dump DIR` and bound its loops",
        ),
    ))
}

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
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(DEPTH);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    // Block tags on their own lines leave no blank lines behind; files keep their final newline.
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()?,
    );
    super::guard::install(&mut env);
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
