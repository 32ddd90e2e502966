//! `envbuild render` and `envbuild templates dump`: read a spec (resolved first) or a lock, render
//! it with the pure `render` module, and write every file at once (all or nothing); dump the
//! embedded templates into a new or empty directory. Reads the input and `--templates`; writes
//! the output directory.

use super::eprint_diagnostics;
use crate::app::{load_spec, read_lock, resolve_loaded};
use crate::cli::{RenderArgs, TemplatesCommand};
use crate::core::compat::Table;
use crate::core::diag::{exit, Diagnostic, Failure};
use crate::core::lock::Lock;
use crate::core::render::{render, RenderOptions};
use std::path::{Path, PathBuf};

/// `FILE.lock` or `envbuild.lock` is a lock; anything else is a spec.
fn is_lock_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "lock")
        || p.file_name()
            .is_some_and(|n| n == crate::core::lock::FILE_NAME)
}

pub fn run(table: &Table, args: &RenderArgs) -> Result<i32, Failure> {
    let lock: Lock = if is_lock_path(&args.input) {
        read_lock(&args.input)?
    } else {
        let loaded = match load_spec(&args.input, table) {
            Ok(l) => l,
            Err(diags) => {
                eprint_diagnostics(&diags);
                return Ok(exit::FAILURE);
            }
        };
        let res = resolve_loaded(&loaded, table);
        match res.lock {
            Some(lock) if !res.diagnostics.iter().any(Diagnostic::is_error) => {
                eprint_diagnostics(&res.diagnostics);
                lock
            }
            _ => {
                eprint_diagnostics(&res.diagnostics);
                return Ok(exit::FAILURE);
            }
        }
    };
    let overrides = match &args.templates {
        Some(dir) => Some(crate::infra::fs::read_template_dir(dir)?),
        None => None,
    };
    let rendered = render(&lock, &RenderOptions { overrides })?;
    let out = match &args.out {
        Some(o) => o.clone(),
        None => args
            .input
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."))
            .join("render"),
    };
    // write_all_atomic leaves files whose bytes are already on disk alone (mtimes too), and
    // gives rendered files 0644 (scripts 0755): a build context keeps modes.
    let files: Vec<(PathBuf, Vec<u8>)> = rendered
        .files
        .iter()
        .map(|(rel, bytes)| (out.join(rel), bytes.clone()))
        .collect();
    let changed = files
        .iter()
        .filter(|(path, bytes)| std::fs::read(path).ok().as_ref() != Some(bytes))
        .count();
    crate::infra::fs::write_all_atomic(&files)?;
    eprintln!(
        "rendered {} files into {} ({} changed)",
        rendered.files.len(),
        out.display(),
        changed
    );
    Ok(exit::OK)
}

pub fn templates(cmd: &TemplatesCommand) -> Result<i32, Failure> {
    match cmd {
        TemplatesCommand::Dump { dir, force } => {
            // Like `import --out`: never write into something that is already there unless told,
            // so a dump cannot mix with (or silently overwrite) someone's edited templates.
            if !force && !is_empty_or_missing_dir(dir) {
                return Err(Failure::one(
                    Diagnostic::error(
                        crate::app::codes::OUTPUT_EXISTS,
                        format!("{} already exists and is not empty", dir.display()),
                    )
                    .with_hint(
                        "pass --force to write into it (files of the same name are \
                         overwritten), or choose a new or empty directory",
                    ),
                ));
            }
            let files: Vec<(PathBuf, Vec<u8>)> = crate::core::render::dump_templates()
                .into_iter()
                .map(|(n, b)| (dir.join(n), b))
                .collect();
            crate::infra::fs::write_all_atomic(&files)?;
            eprintln!(
                "wrote {} templates to {}; use them with `envbuild render --templates {}`",
                files.len(),
                dir.display(),
                dir.display()
            );
            Ok(exit::OK)
        }
    }
}

/// True when nothing is at `dir`, or an empty directory is. A file, or a directory that cannot
/// be listed, counts as "already there".
fn is_empty_or_missing_dir(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}
