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
        let lock = read_lock(input)?;
        if let Some(refused) = check_against_spec(input, &lock, table)? {
            return Ok(LockFor::Refused(refused));
        }
        return Ok(LockFor::Ready {
            lock: Box::new(lock),
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

/// The specs a lock file may have been locked from, best first: in its folder, the files named
/// like a spec, `envbuild.toml` (`.yaml`, `.yml`) before any other.
fn specs_beside(lock_file: &Path) -> Vec<PathBuf> {
    // A bound on what a planted folder can make render parse.
    const MOST: usize = 32;
    let dir = super::lock_path(lock_file, None)
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let is_spec = |p: &Path| {
        p.extension()
            .is_some_and(|e| e == "toml" || e == "yaml" || e == "yml")
            && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_spec(p))
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|p| {
        let stem = p.file_stem().and_then(|s| s.to_str()) != Some("envbuild");
        (stem, p.clone())
    });
    found.truncate(MOST);
    found
}

/// A lock file named `envbuild.lock` beside its spec is checked exactly as `lock --locked`
/// checks it (the one check, [`super::lock::lock`]): a lock edited by hand, or stale, is
/// refused, not rendered. Its spec is the one in its folder whose hash the lock records, else
/// an `envbuild.toml` (`.yaml`, `.yml`) there, whose lock it is by name; a lock with neither
/// beside it stands alone and is rendered after its own checks. `Some`: the refusal.
fn check_against_spec(
    input: &Path,
    lock: &Lock,
    table: &Table,
) -> Result<Option<Vec<Diagnostic>>, Failure> {
    if input.file_name() != Some(std::ffi::OsStr::new(crate::core::lock::FILE_NAME)) {
        return Ok(None);
    }
    let candidates = specs_beside(input);
    let held = lock
        .choices
        .iter()
        .map(|(k, c)| (k.clone(), c.chosen.clone()))
        .collect();
    let claimed = candidates.iter().find(|p| {
        load_spec_holding(p, table, &held)
            .is_ok_and(|l| crate::core::resolve::spec_hash(&l.spec) == lock.spec_sha256)
    });
    let by_name = || {
        candidates
            .iter()
            .find(|p| p.file_stem() == Some(std::ffi::OsStr::new("envbuild")))
    };
    let Some(spec) = claimed.or_else(by_name) else {
        return Ok(None);
    };
    let req = super::lock::LockRequest {
        spec,
        out: None,
        locked: true,
        upgrade: false,
        upgrade_packages: &[],
        offline: false,
        // A table-level lock (`lock --no-closure`) is checked as one.
        no_closure: lock.closure.is_empty() && lock.closure_inputs.is_none(),
    };
    Ok(match super::lock::lock(table, &req)? {
        super::lock::LockOutcome::Refused { diagnostics } => Some(
            diagnostics
                .into_iter()
                .filter(Diagnostic::is_error)
                .collect(),
        ),
        _ => None,
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
/// `out`, all or nothing; a file there that envbuild did not write is replaced only with
/// `force` (`OUTPUT_EXISTS`, and nothing is written, otherwise).
pub fn write(
    lock: &Lock,
    templates: Option<&Path>,
    mirrors: &crate::core::closure::Mirrors,
    (out, force): (&Path, bool),
) -> Result<Written, Failure> {
    let rendered = render_with(lock, templates, mirrors)?;
    // write_all_atomic leaves files whose bytes are already on disk alone (mtimes too), and
    // gives rendered files 0644 (scripts 0755): a build context keeps modes.
    let files: Vec<(PathBuf, Vec<u8>)> = rendered
        .files
        .iter()
        .map(|(rel, bytes)| (PathBuf::from(rel), bytes.clone()))
        .collect();
    let mut changed = 0;
    let mut foreign = Vec::new();
    for (rel, bytes) in &files {
        match existing(&out.join(rel)) {
            Some(old) if old == *bytes => {}
            Some(old)
                if !force && !crate::core::render::is_own_output(&rel.to_string_lossy(), &old) =>
            {
                foreign.push(crate::core::diag::shown(&out.join(rel)));
                changed += 1;
            }
            _ => changed += 1,
        }
    }
    if !foreign.is_empty() {
        let (s, was, it) = if foreign.len() == 1 {
            ("s", "was", "it")
        } else {
            ("", "were", "them")
        };
        return Err(Failure::one(
            Diagnostic::error(
                super::codes::OUTPUT_EXISTS,
                format!(
                    "{} already exist{s} and {was} not written by envbuild (no `{}` header): \
                     render would replace {it}",
                    foreign.join(", "),
                    crate::core::render::GENERATED,
                ),
            )
            .with_hint(format!(
                "pass --force to overwrite {it}, or choose another --out"
            )),
        ));
    }
    // No symlink at or under `out` is written through (one planted by a cloned repository).
    crate::infra::fs::write_tree(out, &files)?;
    Ok(Written {
        out: out.to_path_buf(),
        files: files.len(),
        changed,
    })
}

/// The bytes of the regular file at `path` (at most a few MiB: a rendered file is small), or
/// `None` when there is none. A planted link or a device is not read (`write_tree` refuses it).
fn existing(path: &Path) -> Option<Vec<u8>> {
    // Only regular files are read back (a planted link to a device is refused by the write).
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    crate::infra::fs::read_bounded(path, 8 << 20).ok()
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
