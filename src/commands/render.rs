//! `envbuild render` and `envbuild templates dump`: read a spec (resolved first) or a lock, render
//! it with the pure `render` module, and write every file at once (all or nothing). Reads the
//! input and `--templates`; writes the output directory.

use super::{eprint_diagnostics, load_spec, read_lock, resolve_loaded};
use crate::cli::{RenderArgs, TemplatesCommand};
use crate::compat::Table;
use crate::diag::{exit, Diagnostic, Failure};
use crate::lock::Lock;
use crate::render::{render, RenderOptions};
use std::path::{Path, PathBuf};

/// `FILE.lock` or `envbuild.lock` is a lock; anything else is a spec.
fn is_lock_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "lock")
        || p.file_name().is_some_and(|n| n == crate::lock::FILE_NAME)
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
    if let Some(dir) = &args.templates {
        if !dir.is_dir() {
            return Err(Failure::one(
                Diagnostic::error(
                    crate::render::codes::TEMPLATE_ERROR,
                    format!("`{}` is not a directory of templates", dir.display()),
                )
                .with_hint("create one with `envbuild templates dump DIR`"),
            ));
        }
    }
    let rendered = render(
        &lock,
        &RenderOptions {
            templates_dir: args.templates.clone(),
        },
    )?;
    let out = match &args.out {
        Some(o) => o.clone(),
        None => args
            .input
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."))
            .join("render"),
    };
    // Files whose bytes are already on disk are left alone: re-rendering an unchanged lock
    // writes (and fsyncs) nothing, and keeps mtimes, so tools keyed on them see no change.
    let files: Vec<(PathBuf, Vec<u8>)> = rendered
        .files
        .iter()
        .map(|(rel, bytes)| (out.join(rel), bytes.clone()))
        .filter(|(path, bytes)| std::fs::read(path).ok().as_ref() != Some(bytes))
        .collect();
    crate::fsutil::write_all_atomic(&files)?;
    set_modes(&files)?;
    eprintln!(
        "rendered {} files into {} ({} changed)",
        rendered.files.len(),
        out.display(),
        files.len()
    );
    Ok(exit::OK)
}

/// Atomic writes go through private temporary files (mode 0600). A build context keeps file
/// modes, and the image's non-root user must read the smoke test and the entrypoint, so rendered
/// files get 0644, scripts 0755.
fn set_modes(files: &[(PathBuf, Vec<u8>)]) -> Result<(), Failure> {
    #[cfg(unix)]
    for (path, _) in files {
        use std::os::unix::fs::PermissionsExt;
        let script = path.extension().is_some_and(|e| e == "sh");
        let mode = if script { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Failure::io(path, &e))?;
    }
    #[cfg(not(unix))]
    let _ = files;
    Ok(())
}

pub fn templates(cmd: &TemplatesCommand) -> Result<i32, Failure> {
    match cmd {
        TemplatesCommand::Dump { dir, force } => {
            let files: Vec<(PathBuf, Vec<u8>)> = crate::render::dump_templates()
                .into_iter()
                .map(|(n, b)| (dir.join(n), b))
                .collect();
            if !force {
                let existing: Vec<String> = files
                    .iter()
                    .filter(|(p, _)| p.exists())
                    .map(|(p, _)| p.display().to_string())
                    .collect();
                if !existing.is_empty() {
                    return Err(Failure::one(
                        Diagnostic::error(
                            "FILE_EXISTS",
                            format!("would overwrite: {}", existing.join(", ")),
                        )
                        .with_hint("pass --force to overwrite, or choose an empty directory"),
                    ));
                }
            }
            crate::fsutil::write_all_atomic(&files)?;
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
