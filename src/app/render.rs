//! `render`: the lock of a spec (resolved first) or a lock file, rendered with the team's
//! templates, and every file written at once (all or nothing). Reads the input and
//! `--templates`; writes the output directory. Prints nothing.

use super::{load_spec_holding, read_lock, resolve_loaded};
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::Lock;
use crate::core::render::{render, RenderOptions, Rendered};
use std::path::{Path, PathBuf};

/// `FILE.lock` or `envbuild.lock` is a lock; anything else is a spec.
pub fn is_lock_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "lock")
        || p.file_name()
            .is_some_and(|n| n == crate::core::lock::FILE_NAME)
}

/// The lock to render, or why there is none.
#[derive(Debug)]
pub enum LockFor {
    /// The lock, with the spec's warnings (none for a lock file).
    Ready {
        lock: Box<Lock>,
        warnings: Vec<Diagnostic>,
    },
    /// The spec is invalid or does not resolve.
    Refused(Vec<Diagnostic>),
}

/// The lock to render: read from a lock file, or resolved from a spec.
pub fn lock_for(input: &Path, table: &Table) -> Result<LockFor, Failure> {
    if is_lock_path(input) {
        return Ok(LockFor::Ready {
            lock: Box::new(read_lock(input)?),
            warnings: Vec::new(),
        });
    }
    // The lock beside the spec holds the choices for its ranges.
    let held = super::held_choices(&super::lock_path(input, None));
    let loaded = match load_spec_holding(input, table, &held) {
        Ok(l) => l,
        Err(diags) => return Ok(LockFor::Refused(diags)),
    };
    let res = resolve_loaded(&loaded, table);
    let mut diagnostics = res.diagnostics;
    Ok(match res.lock {
        Some(mut lock) if !diagnostics.iter().any(Diagnostic::is_error) => {
            // A closure (or base digest) is never resolved while rendering: it comes from the
            // lock beside the spec, when that was resolved from the same inputs.
            if let Some(why) = &loaded.spec.lock.closure_off {
                lock.notes.push(why.clone());
            }
            if loaded.spec.lock.is_full() {
                let path = super::lock_path(input, None);
                let mode = super::lock::ClosureMode::Offline {
                    why: "render",
                    conda_cache: false,
                };
                let on_disk = super::lock::OnDisk::read(&path);
                // The lock beside the spec verifies itself before its closure is taken.
                let problems = on_disk
                    .lock
                    .as_ref()
                    .map(crate::core::closure::verify::verify)
                    .unwrap_or_default();
                if !problems.is_empty() {
                    diagnostics.extend(problems);
                    return Ok(LockFor::Refused(diagnostics));
                }
                match super::lock::attach_full_from(&mut lock, &loaded.spec, table, &on_disk, mode)?
                {
                    Ok(warnings) => diagnostics.extend(warnings),
                    Err(d) => {
                        diagnostics.push(d);
                        return Ok(LockFor::Refused(diagnostics));
                    }
                }
            }
            LockFor::Ready {
                lock: Box::new(lock),
                warnings: diagnostics,
            }
        }
        _ => LockFor::Refused(diagnostics),
    })
}

/// Render a lock in memory, with `--templates DIR` read first when given, and pip and conda
/// pointed at `mirrors` (`--pip-mirror`, `--conda-mirror`, checked) when given.
pub fn render_with(
    lock: &Lock,
    templates: Option<&Path>,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<Rendered, Failure> {
    let overrides = match templates {
        Some(dir) => Some(crate::infra::fs::read_template_dir(dir)?),
        None => None,
    };
    render(
        lock,
        &RenderOptions {
            overrides,
            pip_mirror: mirrors.pip.clone(),
            conda_mirror: mirrors.conda.clone(),
        },
    )
}

/// The default output directory: `render/` beside the input (refused beside a device,
/// [`super::beside_input`]).
pub fn default_out(input: &Path) -> Result<PathBuf, Failure> {
    super::beside_input(input, "render")
}

/// What a render wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub out: PathBuf,
    pub files: usize,
    /// Files whose bytes differ from what was on disk before.
    pub changed: usize,
}

/// Render `lock` (pip and conda pointed at `mirrors` when given) and write every file under
/// `out`, all or nothing.
pub fn write(
    lock: &Lock,
    templates: Option<&Path>,
    mirrors: &crate::core::closure::Mirrors,
    out: &Path,
) -> Result<Written, Failure> {
    let rendered = render_with(lock, templates, mirrors)?;
    // write_all_atomic leaves files whose bytes are already on disk alone (mtimes too), and
    // gives rendered files 0644 (scripts 0755): a build context keeps modes.
    let files: Vec<(PathBuf, Vec<u8>)> = rendered
        .files
        .iter()
        .map(|(rel, bytes)| (PathBuf::from(rel), bytes.clone()))
        .collect();
    // Only regular files are read back (a planted link to a device is refused below, not read).
    let changed = files
        .iter()
        .filter(|(rel, bytes)| {
            let path = out.join(rel);
            let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && crate::infra::fs::read_bounded(&path, bytes.len() as u64)
                    .ok()
                    .as_ref()
                    == Some(bytes);
            !same
        })
        .count();
    // No symlink at or under `out` is written through (one planted by a cloned repository).
    crate::infra::fs::write_tree(out, &files)?;
    Ok(Written {
        out: out.to_path_buf(),
        files: files.len(),
        changed,
    })
}

/// Write the embedded templates into `dir` (new or empty, or any with `force`); the count.
pub fn dump_templates(dir: &Path, force: bool) -> Result<usize, Failure> {
    // Like `import --out`: never write into something that is already there unless told, so a
    // dump cannot mix with (or silently overwrite) someone's edited templates.
    if !force && !is_empty_or_missing_dir(dir) {
        return Err(Failure::one(
            Diagnostic::error(
                super::codes::OUTPUT_EXISTS,
                format!(
                    "{} already exists and is not empty",
                    crate::core::diag::shown(dir)
                ),
            )
            .with_hint(
                "pass --force to write into it (files of the same name are overwritten), or \
                 choose a new or empty directory",
            ),
        ));
    }
    let files: Vec<(PathBuf, Vec<u8>)> = crate::core::render::dump_templates()
        .into_iter()
        .map(|(n, b)| (PathBuf::from(n), b))
        .collect();
    crate::infra::fs::write_tree(dir, &files)?;
    Ok(files.len())
}

/// True when nothing is at `dir`, or an empty directory is. A file, or a directory that cannot
/// be listed, counts as "already there".
fn is_empty_or_missing_dir(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}
