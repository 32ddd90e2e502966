//! Use cases: what each command does, as functions that take paths and options and return
//! values (outcomes, reports, diagnostics). Nothing here prints; `commands` presents the results.
//! This layer orchestrates `infra` (files, engine, host) around the pure `core`.

pub mod codes;
pub mod doctor;
pub mod explain;
pub mod image;
pub mod image_fleet;
pub mod image_many;
pub mod import;
pub mod learn;
pub mod lock;
pub mod matrix;
pub mod publish;
pub mod render;
pub mod smoke;
pub mod test;

use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::Lock;
use crate::core::lock::INVALID_LOCK;
use crate::core::resolve::Resolution;
use crate::core::spec::{Format, Locator, Spec};
use crate::infra::fs::{read_text, Input};
use std::path::Path;

/// The embedded table, or `--table FILE`.
pub fn load_table(path: Option<&Path>) -> Result<Table, Failure> {
    match path {
        None => Table::embedded(),
        Some(p) => {
            let text = read_text(p, Input::Table)?;
            Table::parse(&text, &crate::core::diag::shown(p))
        }
    }
}

/// A spec read from disk, with its text kept for locating diagnostics.
pub struct LoadedSpec {
    pub spec: Spec,
    pub text: String,
    pub display: String,
}

/// Read and validate a spec file; on failure the diagnostics carry file:line:column. When the
/// spec is invalid but resolvable, its resolution problems are reported too (every problem at
/// once).
pub fn load_spec(path: &Path, table: &Table) -> Result<LoadedSpec, Vec<Diagnostic>> {
    load_spec_holding(path, table, &Default::default())
}

/// [`load_spec`], keeping the choices `held` (a lock's `[choices]`) for the spec's ranges while
/// they still satisfy it.
pub fn load_spec_holding(
    path: &Path,
    table: &Table,
    held: &crate::core::resolve::choose::Held,
) -> Result<LoadedSpec, Vec<Diagnostic>> {
    let display = crate::core::diag::shown(path);
    let text = read_text(path, Input::Spec).map_err(|f| f.diagnostics)?;
    let format = Format::from_path(path);
    match crate::core::resolve::parse_spec_holding(&text, format, &display, table, held) {
        Ok(spec) => Ok(LoadedSpec {
            spec,
            text,
            display,
        }),
        Err(e) => {
            let mut diags = e.diagnostics;
            if let Some(partial) = e.partial {
                let loaded = LoadedSpec {
                    spec: *partial,
                    text,
                    display,
                };
                let res = resolve_loaded(&loaded, table);
                diags.extend(res.diagnostics.into_iter().filter(|d| d.is_error()));
            }
            Err(diags)
        }
    }
}

/// Resolve a loaded spec and give every diagnostic that names a spec key its location.
pub fn resolve_loaded(loaded: &LoadedSpec, table: &Table) -> Resolution {
    let hash = crate::core::resolve::spec_hash(&loaded.spec);
    let mut res = crate::core::resolve::resolve(&loaded.spec, table, &hash);
    let locator = Locator::new(&loaded.text, &loaded.display);
    for d in &mut res.diagnostics {
        // The rules name conda-forge's selector `cuda`; the spec may spell it `cuda-version`.
        if d.field.as_deref() == Some("cuda") && loaded.spec.cuda_version_key {
            d.field = Some("cuda-version".into());
        }
        if d.location.is_none() {
            if let Some(f) = &d.field {
                d.location = locator
                    .find(f)
                    .or_else(|| f.split_once('.').and_then(|(t, _)| locator.find(t)));
            }
        }
    }
    res
}

/// The choices a lock on disk made for its spec's ranges (key -> chosen), to keep them; empty
/// when there is no readable lock.
pub fn held_choices(path: &Path) -> crate::core::resolve::choose::Held {
    read_text(path, Input::Lock)
        .ok()
        .and_then(|t| Lock::from_toml(&t).ok())
        .map(|l| l.choices.into_iter().map(|(k, c)| (k, c.chosen)).collect())
        .unwrap_or_default()
}

/// Where the lock of a spec lives: beside it, or in `out`.
pub fn lock_path(spec: &Path, out: Option<&Path>) -> std::path::PathBuf {
    let dir = match out {
        Some(o) => o.to_path_buf(),
        None => spec
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| Path::new(".").to_path_buf()),
    };
    dir.join(crate::core::lock::FILE_NAME)
}

/// `name` beside `input` (its lock, its render folder), refused when `input` was read through
/// a device or the kernel's files (`/dev/stdin`, `/proc/self/fd/0`): their folder is no
/// project's, and envbuild writes nothing into `/dev`.
pub fn beside_input(input: &Path, name: &str) -> Result<std::path::PathBuf, Failure> {
    let path = lock_path(input, None).with_file_name(name);
    if crate::infra::fs::is_system_dir(&path) {
        return Err(Failure::usage(
            format!(
                "{} is read through {}, which is no project folder: envbuild will not write `{name}` there",
                crate::core::diag::shown(input),
                crate::core::diag::shown(path.parent().unwrap_or(Path::new("/")))
            ),
            Some("pass --out DIR to say where it goes".into()),
        ));
    }
    Ok(path)
}

/// Read a lock file and check it: its closure must verify itself (`core::closure::verify`).
pub fn read_lock(path: &Path) -> Result<Lock, Failure> {
    let lock = parse_lock(path)?;
    let problems = crate::core::closure::verify::verify(&lock);
    if problems.is_empty() {
        Ok(lock)
    } else {
        Err(Failure::new(problems))
    }
}

/// Read a lock file, unchecked.
fn parse_lock(path: &Path) -> Result<Lock, Failure> {
    let text = read_text(path, Input::Lock)?;
    Lock::from_toml(&text).map_err(|e| {
        Failure::one(
            Diagnostic::error(
                INVALID_LOCK,
                format!(
                    "{} is not a valid envbuild lock: {e}",
                    crate::core::diag::shown(path)
                ),
            )
            .with_hint("re-create it with `envbuild lock SPEC`"),
        )
    })
}

/// Read and parse an `--expect-file`.
pub fn read_expectations(
    path: &std::path::Path,
) -> Result<crate::core::smoke::Expectations, Failure> {
    let text = read_text(path, Input::Expectations)?;
    crate::core::smoke::Expectations::from_json(&text, &crate::core::diag::shown(path))
}
