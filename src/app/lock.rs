//! `lock`: resolve a spec and write `envbuild.lock` atomically, or check it against the lock on
//! disk (`--locked`). Reads the spec and the lock; writes the lock. Prints nothing.

use super::codes::{LOCK_MISSING, LOCK_STALE};
use super::{load_spec_holding, lock_path, resolve_loaded};
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::{changed_keys, Lock};
use std::path::{Path, PathBuf};

/// What `lock` asked for.
#[derive(Debug, Clone)]
pub struct LockRequest<'a> {
    pub spec: &'a Path,
    /// Write the lock here instead of beside the spec.
    pub out: Option<&'a Path>,
    /// Check only: fail when the lock on disk would change.
    pub locked: bool,
    /// Re-resolve the closure even when its inputs did not change.
    pub upgrade: bool,
    /// Re-resolve the closure letting only these packages move (the rest keep the lock's
    /// versions, as pip constraints).
    pub upgrade_packages: &'a [String],
    /// Never run the closure resolver (no network): reuse the closure on disk or fail.
    pub offline: bool,
    /// `--no-closure`: the table-level lock, whatever `[lock] closure` says.
    pub no_closure: bool,
}

/// How a lock run ended. Every variant carries every diagnostic (warnings included).
#[derive(Debug)]
pub enum LockOutcome {
    /// The spec is invalid or does not resolve, or (`--locked`) the lock is stale or missing.
    Refused { diagnostics: Vec<Diagnostic> },
    /// The lock on disk is current: `--locked`, or a lock run that would write the same bytes
    /// (nothing is written).
    Current {
        lock: Box<Lock>,
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
    /// The lock was written: it was missing or changed.
    Written {
        lock: Box<Lock>,
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
}

/// Resolve the spec and write or check its lock.
pub fn lock(table: &Table, req: &LockRequest<'_>) -> Result<LockOutcome, Failure> {
    let loaded = match load_spec_holding(req.spec, table, &held(req)) {
        Ok(l) => l,
        Err(diagnostics) => return Ok(LockOutcome::Refused { diagnostics }),
    };
    let res = resolve_loaded(&loaded, table);
    let mut diagnostics = res.diagnostics;
    let Some(mut lock) = res
        .lock
        .filter(|_| !diagnostics.iter().any(Diagnostic::is_error))
    else {
        return Ok(LockOutcome::Refused { diagnostics });
    };
    let path = output_path(req)?;
    let mut spec = loaded.spec;
    if req.no_closure {
        spec.lock = spec.lock.without_closure();
    }
    if !spec.lock.closure {
        // Only a closure pins a range: a table-level lock carries it as written, and says so.
        diagnostics.extend(ranges_not_locked(&spec, &lock));
    }
    if !req.upgrade_packages.is_empty() && !spec.lock.closure {
        return Err(Failure::usage(
            format!(
                "--upgrade-package {}: --upgrade-package moves packages of the closure, and this \
                 lock has none",
                req.upgrade_packages.join(" ")
            ),
            Some(
                "drop --upgrade-package (and --no-closure, or `closure = false` in [lock]); to \
                 move a package of a table-level lock, change its pin in the spec"
                    .into(),
            ),
        ));
    }
    if let Some(why) = &spec.lock.closure_off {
        lock.notes.push(why.clone());
    }
    if spec.lock.is_full() {
        let mode = if req.locked || req.offline {
            ClosureMode::Offline {
                why: if req.locked { "--locked" } else { "--offline" },
                // `--offline` may solve a conda closure from the repodata cache; `--locked`
                // only checks the lock on disk.
                conda_cache: !req.locked,
            }
        } else {
            ClosureMode::Resolve {
                upgrade: req.upgrade,
                upgrade_packages: req.upgrade_packages,
            }
        };
        // `--out DIR` with no lock there yet reuses what the lock beside the spec resolved.
        let beside = lock_path(req.spec, None);
        let mut on_disk = OnDisk::read_or(&path, &beside);
        let strict = req.locked || req.offline;
        if let Some(d) = on_disk.distrust(strict) {
            let refused = d.iter().any(Diagnostic::is_error);
            diagnostics.extend(d);
            if refused {
                return Ok(LockOutcome::Refused { diagnostics });
            }
        }
        match attach_full_from(&mut lock, &spec, table, &on_disk, mode)? {
            Ok(warnings) => diagnostics.extend(warnings),
            Err(d) => {
                diagnostics.push(d);
                return Ok(LockOutcome::Refused { diagnostics });
            }
        }
    }
    unpinned_out(&mut lock, &spec);
    // Each platform of a fleet is a lock of its own, with the same ranges.
    for entry in &mut lock.fleet {
        unpinned_out(entry, &spec);
    }
    // What a resolver gave (or the lock on disk kept) is checked as `render` checks a lock:
    // a lock that `lock` writes verifies itself and renders.
    let problems = written_lock_problems(&lock);
    let refused = problems.iter().any(Diagnostic::is_error);
    diagnostics.extend(problems);
    if refused {
        return Ok(LockOutcome::Refused { diagnostics });
    }
    let text = lock
        .to_toml()
        .map_err(|e| Failure::bug(format!("cannot serialise the lock: {e}")))?;
    if req.locked {
        let fix = "run `envbuild lock` and commit the new lock";
        return Ok(match stale_lock(&path, &text, fix)? {
            Some(d) => {
                diagnostics.push(d);
                LockOutcome::Refused { diagnostics }
            }
            None => LockOutcome::Current {
                lock: Box::new(lock),
                path,
                diagnostics,
            },
        });
    }
    // The same bytes make the run say "up to date", not "wrote" (an unreadable old lock is
    // simply replaced). The write still runs: it leaves the same bytes untouched and finishes
    // a write into the folder that an earlier run was killed in.
    let unchanged = matches!(stale_lock(&path, &text, ""), Ok(None));
    crate::infra::fs::write_atomic(&path, text.as_bytes())?;
    if unchanged {
        return Ok(LockOutcome::Current {
            lock: Box::new(lock),
            path,
            diagnostics,
        });
    }
    Ok(LockOutcome::Written {
        lock: Box::new(lock),
        path,
        diagnostics,
    })
}

/// Where the lock goes (`--out DIR`, else beside the spec), refused when writing there would
/// replace something that is not a lock.
fn output_path(req: &LockRequest<'_>) -> Result<PathBuf, Failure> {
    let path = match req.out {
        Some(_) => lock_path(req.spec, req.out),
        None => super::beside_input(req.spec, crate::core::lock::FILE_NAME)?,
    };
    if !req.locked {
        refuse_foreign_lock_path(&path, req.spec)?;
    }
    Ok(path)
}

/// `lock` writes only over a lock: never over the spec itself (a spec named `envbuild.lock`, or
/// `--out` pointing the lock onto it), nor over any other file at the lock path that is not
/// an envbuild lock (`OUTPUT_EXISTS`). An empty file holds nothing to lose.
fn refuse_foreign_lock_path(path: &Path, spec: &Path) -> Result<(), Failure> {
    use std::io::Read;
    let what =
        if std::fs::canonicalize(path).ok() == std::fs::canonicalize(spec).ok() && path.exists() {
            "is the spec itself: its lock would be written over it"
        } else {
            let mut head = Vec::new();
            let read = std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.is_file())
                .then(|| std::fs::File::open(path).ok())
                .flatten()
                .and_then(|f| f.take(64).read_to_end(&mut head).ok());
            if read.is_none()
                || head.is_empty()
                || head.starts_with(crate::core::lock::HEADER.as_bytes())
            {
                return Ok(());
            }
            "already exists and is not an envbuild lock: `lock` would replace it"
        };
    Err(Failure::one(
        Diagnostic::error(
            super::codes::OUTPUT_EXISTS,
            format!("{} {what}", crate::core::diag::shown(path)),
        )
        .with_hint(
            "a lock is written beside its spec as envbuild.lock: give the spec another name \
             (envbuild.toml), move the file away, or pass --out DIR to write the lock elsewhere",
        ),
    ))
}

/// The choices of the lock on disk (at `--out`, else beside the spec) for the spec's ranges:
/// they stand while they satisfy the spec; `--upgrade` chooses again.
fn held(req: &LockRequest<'_>) -> crate::core::resolve::choose::Held {
    if req.upgrade {
        return Default::default();
    }
    let held = super::held_choices(&lock_path(req.spec, req.out));
    if held.is_empty() {
        super::held_choices(&lock_path(req.spec, None))
    } else {
        held
    }
}

/// Why a lock about to be written (or found current) cannot be: its closure fails its own
/// checks, or a value is one `render` refuses (errors); and its yanked releases, said on every
/// run whether resolved now or kept from the lock on disk (a warning where the spec pins one
/// exactly, else an error).
pub fn written_lock_problems(lock: &Lock) -> Vec<Diagnostic> {
    // The lock on disk was verified before any of it was reused: what fails here is what a
    // resolver just gave, worded as such.
    let mut out = crate::core::closure::verify::verify_resolved(lock);
    if let Err(f) = crate::core::render::check_lock_values(lock) {
        out.extend(f.diagnostics);
    }
    out.extend(crate::core::closure::yanked::judge(lock));
    out
}

/// A range the lock does not pin (a table-level lock, or one the closure left out) is not a
/// version: `packages` records versions only (the install list carries the range as written),
/// and the dev image's JupyterLab, which a `jupyterlab` range would name, falls back to the
/// one for the Python.
fn unpinned_out(lock: &mut Lock, spec: &crate::core::spec::Spec) {
    let ranges = spec
        .pip
        .iter()
        .filter(|p| p.is_range())
        .map(|p| (&p.name, &p.version))
        .chain(
            spec.conda
                .iter()
                .filter(|c| c.is_range())
                .map(|c| (&c.name, &c.version)),
        );
    for (name, range) in ranges {
        if lock.packages.get(name) == Some(range) {
            lock.packages.remove(name);
        }
    }
    if !crate::core::rules::version(&lock.image.jupyterlab) {
        let python = lock
            .packages
            .get("python")
            .and_then(|p| crate::core::version::Version::parse(p));
        lock.image.jupyterlab = match (lock.packages.get("jupyterlab"), python) {
            (Some(v), _) => v.clone(),
            (None, Some(py)) => crate::core::resolve::default_jupyterlab(&py).to_string(),
            (None, None) => lock.image.jupyterlab.clone(),
        };
    }
}

/// A table-level lock of a spec with ranges (`einops>=0.8`, `jupyterlab`): one
/// `RANGE_NOT_LOCKED` warning per range, which the lock carries as written.
/// An extra whose marker leaves it out on every platform is not carried, so not warned about.
fn ranges_not_locked(spec: &crate::core::spec::Spec, lock: &Lock) -> Vec<Diagnostic> {
    let excluded = |name: &str| {
        std::iter::once(lock)
            .chain(&lock.fleet)
            .all(|l| l.excluded.contains_key(name))
    };
    let pip = spec
        .pip
        .iter()
        .filter(|p| p.is_range() && !excluded(&p.name))
        .map(|p| p.requirement());
    let conda = spec
        .conda
        .iter()
        .filter(|c| c.is_range())
        .map(|c| c.match_spec());
    pip.chain(conda)
        .map(|r| {
            let what = if r.contains(['<', '>', '=', '!', '~']) {
                "is a range"
            } else {
                "names no version"
            };
            Diagnostic::warning(
                super::codes::RANGE_NOT_LOCKED,
                format!("`{r}` {what}: the table-level lock (no closure) carries it as written, and the build installs whatever version satisfies it then"),
            )
            .with_hint("lock with the closure (drop --no-closure, or `closure = false`) to pin it, or pin an exact version")
        })
        .collect()
}

/// `--locked`: `None` when the lock at `path` is `text` byte for byte; otherwise `LOCK_MISSING`
/// or `LOCK_STALE` naming every key that would change. `fix` is the hint.
pub fn stale_lock(
    path: &std::path::Path,
    text: &str,
    fix: &str,
) -> Result<Option<Diagnostic>, Failure> {
    // The bounded reader: a lock path that is a FIFO or a link to /dev/zero is refused, not read.
    let old = match std::fs::symlink_metadata(path) {
        Ok(_) => crate::infra::fs::read_text(path, crate::infra::fs::Input::Lock)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(
                Diagnostic::error(
                    LOCK_MISSING,
                    format!("{} does not exist", crate::core::diag::shown(path)),
                )
                .with_hint(fix.to_string()),
            ))
        }
        Err(e) => return Err(Failure::io(path, &e)),
    };
    if old == text {
        return Ok(None);
    }
    let changes = changed_keys(&old, text);
    Ok(Some(
        Diagnostic::error(
            LOCK_STALE,
            format!(
                "{} is stale; re-locking would change:\n    {}",
                crate::core::diag::shown(path),
                if changes.is_empty() {
                    "(formatting only)".to_string()
                } else {
                    changes.join("\n    ")
                }
            ),
        )
        .with_hint(fix.to_string()),
    ))
}

/// How the closure of a lock may be obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosureMode<'a> {
    /// Reuse the closure on disk when its inputs match (unless `upgrade` or `upgrade_packages`),
    /// else run the resolver; with `upgrade_packages`, every other package of the closure on
    /// disk is held at its version.
    Resolve {
        upgrade: bool,
        upgrade_packages: &'a [String],
    },
    /// Reuse only; `why` names what forbids resolving (`--offline`, `--locked`, `render`).
    /// `conda_cache` (`--offline`): a conda closure (no pip part) whose inputs changed is
    /// solved from the repodata cache instead, with no request.
    Offline {
        why: &'static str,
        conda_cache: bool,
    },
}

/// The glibc the closure is resolved for: the target's, else the table's base image's, else the
/// build's floor (a base image the table does not know).
fn target_glibc(lock: &Lock, table: &Table) -> Option<crate::core::version::Version> {
    let v = |s: &str| crate::core::version::Version::parse(s);
    lock.glibc_target
        .as_deref()
        .and_then(v)
        .or_else(|| {
            table
                .base_image
                .iter()
                .find(|r| r.image == lock.image.base)
                .map(|r| r.glibc.clone())
        })
        .or_else(|| v(&lock.glibc_min))
}

/// The lock already at a lock path, read once for everything that reuses what it resolved
/// (its closure, its base digest). Unreadable or absent is `None`: resolved afresh.
pub struct OnDisk<'a> {
    pub path: &'a Path,
    pub lock: Option<Lock>,
}

impl<'a> OnDisk<'a> {
    pub fn read(path: &'a Path) -> OnDisk<'a> {
        let lock = crate::infra::fs::read_text(path, crate::infra::fs::Input::Lock)
            .ok()
            .and_then(|t| Lock::from_toml(&t).ok());
        OnDisk { path, lock }
    }

    /// Check the lock read before anything of it is reused. `strict` (`--locked`,
    /// `--offline`): a lock that fails its own checks is refused (errors). Otherwise it is set
    /// aside with a warning, and resolved afresh. A closure without its `closure_sha256` is
    /// one of those: nothing vouches for its hashes, so it is never adopted (and sealed), which
    /// would launder an edit made with the seal removed.
    pub fn distrust(&mut self, strict: bool) -> Option<Vec<Diagnostic>> {
        let lock = self.lock.as_ref()?;
        let mut problems = crate::core::closure::verify::verify(lock);
        if problems.is_empty() {
            return None;
        }
        if !strict {
            self.lock = None;
            for d in &mut problems {
                d.severity = crate::core::diag::Severity::Warning;
                d.message
                    .push_str(" (set aside: the closure is resolved afresh)");
            }
        }
        Some(problems)
    }

    /// The lock at `path`, else (when there is none) the one at `fallback`.
    pub fn read_or(path: &'a Path, fallback: &'a Path) -> OnDisk<'a> {
        let first = OnDisk::read(path);
        if first.lock.is_some() || path == fallback {
            return first;
        }
        let second = OnDisk::read(fallback);
        if second.lock.is_some() {
            second
        } else {
            first
        }
    }
}

/// What giving a lock its full parts ended in: `Ok` with the warnings to report (a base digest
/// no registry gave, when the spec did not ask for it), or `Err` with the refusal to report.
pub type Attached = Result<Vec<Diagnostic>, Diagnostic>;

/// A full lock (`LockOpts::is_full`): the closure when the spec asks for one, and the base
/// image's digest when it wants one, both reused from the lock at `path` when they still hold.
pub fn attach_full(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    path: &Path,
    mode: ClosureMode<'_>,
) -> Result<Attached, Failure> {
    attach_full_from(lock, spec, table, &OnDisk::read(path), mode)
}

/// `attach_full` with the lock on disk already read.
pub fn attach_full_from(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
) -> Result<Attached, Failure> {
    attach_full_with(lock, spec, table, on_disk, mode, &EngineDigests)
}

/// `attach_full_from` asking `digests` for the base image's digest. What can fail fast is
/// checked first (the closure's plan, its git references, `--upgrade-package`'s names, whether
/// a resolution is needed and allowed, the resolver's presence, the digest), the resolution
/// last, so a spec that cannot lock never waits for the network.
fn attach_full_with(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
    digests: &dyn DigestSource,
) -> Result<Attached, Failure> {
    let step = if spec.lock.closure {
        match plan_closure(lock, spec, table, on_disk, mode)? {
            Ok(step) => Some(step),
            Err(refusal) => return Ok(Err(refusal)),
        }
    } else {
        None
    };
    let mut warnings = Vec::new();
    if spec.lock.wants_base_digest() {
        let required = spec.lock.requires_base_digest();
        match attach_base_digest(lock, on_disk, mode, digests, required)? {
            Ok(w) => warnings.extend(w),
            Err(refusal) => return Ok(Err(refusal)),
        }
    }
    if let Some(step) = step {
        step.run(lock, spec)?;
    }
    crate::core::closure::verify::seal(lock);
    // Each other platform of a fleet gets its own closure (and digest) the same way, reusing
    // what the lock on disk resolved for that platform.
    for mut entry in std::mem::take(&mut lock.fleet) {
        let old = on_disk
            .lock
            .as_ref()
            .and_then(|l| l.fleet.iter().find(|f| f.platform == entry.platform))
            .cloned();
        let entry_on_disk = OnDisk {
            path: on_disk.path,
            lock: old,
        };
        match attach_full_with(&mut entry, spec, table, &entry_on_disk, mode, digests)? {
            Ok(w) => warnings.extend(w),
            Err(refusal) => return Ok(Err(refusal)),
        }
        lock.fleet.push(entry);
    }
    Ok(Ok(warnings))
}

/// What a closure is resolved from: a wheel environment's pip inputs, or a conda
/// environment's solve (with its pip extras).
enum Plan {
    Pip(crate::core::closure::Inputs),
    /// The inputs and the channel alias their URLs were made under.
    Conda(crate::core::closure::conda::EnvInputs, String),
}

impl Plan {
    /// The plan for `lock`; `Err` (the reason) when envbuild cannot lock its closure. `alias`
    /// is where conda channel names point.
    fn of(
        lock: &Lock,
        spec: &crate::core::spec::Spec,
        table: &Table,
        alias: &str,
    ) -> Result<Plan, String> {
        use crate::core::closure::{conda, Inputs, PYPI_SIMPLE};
        let index = spec.lock.index_url.as_deref().unwrap_or(PYPI_SIMPLE);
        let glibc = target_glibc(lock, table).ok_or("the lock's glibc is not a version")?;
        if lock.install.conda.is_empty() {
            return Inputs::of(lock, index, &glibc).map(Plan::Pip);
        }
        let cuda = conda::target_cuda(lock, table);
        let pip = if lock.install.pip.is_empty() {
            None
        } else {
            Some(Inputs::of(lock, index, &glibc)?)
        };
        Ok(Plan::Conda(
            conda::EnvInputs {
                conda: conda::CondaInputs::of(lock, &glibc, cuda.as_deref(), alias)?,
                pip,
            },
            alias.to_string(),
        ))
    }

    fn hash(&self) -> String {
        match self {
            Plan::Pip(i) => i.hash(),
            Plan::Conda(e, _) => e.hash(),
        }
    }

    /// The pip inputs, when the closure has a pip part (uv resolves it).
    fn pip(&self) -> Option<&crate::core::closure::Inputs> {
        match self {
            Plan::Pip(i) => Some(i),
            Plan::Conda(e, _) => e.pip.as_ref(),
        }
    }

    /// Run the resolver(s); `held` keeps every package of the lock on disk but the ones
    /// `--upgrade-package` names at its locked version (and build, for conda); `cached`: the
    /// conda repodata from the cache alone. The closure, and the tool that resolved its pip
    /// part.
    fn resolve(
        &self,
        held: &Held,
        uv: Option<&Path>,
        cached: bool,
    ) -> Result<(Vec<crate::core::lock::ClosurePkg>, Option<String>), Failure> {
        use crate::infra::uv_resolve;
        match (self, uv) {
            (Plan::Pip(i), Some(uv)) => {
                let r = uv_resolve::resolve(uv, i, &held.pip, &[])?;
                Ok((r.closure, Some(r.resolver)))
            }
            (Plan::Conda(e, alias), uv) => resolve_conda(e, alias, held, uv, cached),
            (Plan::Pip(_), None) => Err(Failure::bug("a pip closure planned without uv")),
        }
    }
}

/// How the closure of a lock is obtained, decided before anything slow runs.
enum ClosureStep {
    /// The closure on disk, resolved from the same inputs.
    Reuse {
        closure: Vec<crate::core::lock::ClosurePkg>,
        resolver: Option<String>,
        hash: String,
    },
    /// A fresh resolution (uv found already when the closure has a pip part); `cached`: the
    /// conda repodata from the cache alone (`--offline`).
    Resolve {
        plan: Box<Plan>,
        held: Held,
        uv: Option<std::path::PathBuf>,
        hash: String,
        cached: bool,
    },
}

impl ClosureStep {
    /// Give `lock` the closure, resolving it first when it must be.
    fn run(self, lock: &mut Lock, spec: &crate::core::spec::Spec) -> Result<(), Failure> {
        let (closure, resolver, hash) = match self {
            ClosureStep::Reuse {
                closure,
                resolver,
                hash,
            } => (closure, resolver, hash),
            ClosureStep::Resolve {
                plan,
                held,
                uv,
                hash,
                cached,
            } => {
                let (closure, resolver) = plan.resolve(&held, uv.as_deref(), cached)?;
                (closure, resolver, hash)
            }
        };
        pin_ranges(lock, spec, &closure);
        lock.closure_inputs = Some(hash);
        lock.closure = closure;
        lock.closure_resolver = resolver;
        Ok(())
    }
}

/// A conda environment's closure: the conda solve, then its pip extras resolved for the
/// environment's Python with every Python package conda installs taken as installed (held at
/// conda's version, its dependencies conda's business), and left out of the pip part (the pip
/// install never replaces a conda package).
fn resolve_conda(
    env: &crate::core::closure::conda::EnvInputs,
    alias: &str,
    held: &Held,
    uv: Option<&Path>,
    cached: bool,
) -> Result<(Vec<crate::core::lock::ClosurePkg>, Option<String>), Failure> {
    use crate::core::closure::{codes::CLOSURE_RESOLVE_FAILED, conda};
    use crate::infra::{conda_solve, uv_resolve};
    let solved = conda_solve::resolve(&env.conda, alias, &held.conda, cached)?;
    let entries = conda::to_closure(&solved).map_err(|m| {
        Failure::one(Diagnostic::error(CLOSURE_RESOLVE_FAILED, m).with_hint(
            "a closure lock records each package's sha256 and md5: use a channel whose repodata.json carries both",
        ))
    })?;
    let provided = conda::python_provided(&solved);
    let (pip, resolver) = match (&env.pip, uv) {
        (Some(inputs), Some(uv)) => {
            let mut inputs = inputs.clone();
            // uv resolves for the Python conda chose (`3.12` in the spec is `3.12.7` here).
            if let Some(py) = solved.iter().find(|s| s.name == "python") {
                inputs.python = py.version.clone();
            }
            let installed = conda::pip_installed(&provided);
            let r = uv_resolve::resolve(uv, &inputs, &held.pip, &installed)?;
            (r.closure, Some(r.resolver))
        }
        _ => (Vec::new(), None),
    };
    Ok((conda::merge(entries, pip, &provided), resolver))
}

/// Decide how `lock` gets its closure (`[lock] closure`, on by default): the one in the lock
/// on disk when it was resolved from the same inputs, else (mode permitting) a fresh resolution
/// for the target. Nothing slow runs here; `Ok(Err(d))` is a refusal to report.
fn plan_closure(
    lock: &Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
) -> Result<Result<ClosureStep, Diagnostic>, Failure> {
    use crate::core::closure::codes::{CLOSURE_NEEDS_RESOLUTION, CLOSURE_NEEDS_WHEEL};
    let path = on_disk.path;
    // The alias is read only for a conda environment (a wheel lock never depends on it).
    let alias = if lock.install.conda.is_empty() {
        String::new()
    } else {
        crate::infra::conda_solve::channel_alias()?
    };
    let plan = match Plan::of(lock, spec, table, &alias) {
        Ok(p) => p,
        Err(m) => {
            return Ok(Err(Diagnostic::error(
                crate::core::spec::codes::CLOSURE_UNSUPPORTED,
                m,
            )
            .with_hint("set `closure = false` in [lock]")))
        }
    };
    if let Some(git) = plan.pip().and_then(|i| i.git_references().first().copied()) {
        return Ok(Err(Diagnostic::error(
            CLOSURE_NEEDS_WHEEL,
            format!(
                "`{git}` is a git reference: a closure locks each package's wheel by its sha256, \
                 and a git checkout has neither (its metadata could only be read by building it \
                 here, which envbuild never does)"
            ),
        )
        .with_hint(crate::core::closure::NEEDS_WHEEL_HINT)));
    }
    let hash = plan.hash();
    // A lock on disk that cannot be read is resolved afresh (its closure cannot be trusted).
    let on_disk = on_disk.lock.as_ref();
    let held = match mode {
        ClosureMode::Resolve {
            upgrade_packages, ..
        } if !upgrade_packages.is_empty() => held_back(on_disk, upgrade_packages)?,
        _ => Held::default(),
    };
    let old = on_disk
        .filter(|o| o.closure_inputs.as_deref() == Some(hash.as_str()) && !o.closure.is_empty());
    let reuse = match mode {
        ClosureMode::Resolve {
            upgrade,
            upgrade_packages,
        } => !upgrade && upgrade_packages.is_empty(),
        ClosureMode::Offline { .. } => true,
    };
    Ok(Ok(match (old, mode) {
        (Some(o), _) if reuse => ClosureStep::Reuse {
            closure: o.closure.clone(),
            resolver: o.closure_resolver.clone(),
            hash,
        },
        // `--offline` and a conda closure without a pip part: solved from the repodata cache
        // (no request; a subdir it lacks is refused by name). A pip part keeps --offline's
        // meaning: uv is never run.
        (
            _,
            ClosureMode::Offline {
                conda_cache: true, ..
            },
        ) if matches!(&plan, Plan::Conda(e, _) if e.pip.is_none()) => ClosureStep::Resolve {
            plan: Box::new(plan),
            held,
            uv: None,
            hash,
            cached: true,
        },
        (_, ClosureMode::Offline { why, .. }) => {
            return Ok(Err(Diagnostic::error(
                CLOSURE_NEEDS_RESOLUTION,
                format!(
                    "{} has no closure resolved from this spec's inputs (requirements, indexes, channels, Python, platform), and {why} does not run the resolver",
                    crate::core::diag::shown(path)
                ),
            )
            .with_hint("run `envbuild lock` (it resolves the closure on the network: uv for wheels, the conda solver for channels) and commit the lock, or lock without it (`envbuild lock --no-closure`)")));
        }
        _ => {
            let uv = match plan.pip() {
                Some(_) => Some(crate::infra::uv_resolve::find()?),
                None => None,
            };
            ClosureStep::Resolve {
                plan: Box::new(plan),
                held,
                uv,
                hash,
                cached: false,
            }
        }
    }))
}

/// A range in the spec (`einops>=0.8`, `pandas>=2,<3`) is pinned by the closure: the lock's
/// `packages` says which version it is.
fn pin_ranges(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    closure: &[crate::core::lock::ClosurePkg],
) {
    use crate::core::closure::canonical_name;
    let ranges = spec
        .pip
        .iter()
        .filter(|p| p.is_range())
        .map(|p| (&p.name, "pip"))
        .chain(
            spec.conda
                .iter()
                .filter(|c| c.is_range())
                .map(|c| (&c.name, "conda")),
        );
    for (name, kind) in ranges {
        let wanted = canonical_name(name);
        if let Some(c) = closure
            .iter()
            .find(|c| c.kind == kind && canonical_name(&c.name) == wanted)
        {
            lock.packages.insert(name.clone(), c.version.clone());
        }
    }
}

/// What `--upgrade-package` holds: conda match specs (`CHANNEL::name==version=build`) and pip
/// constraints (`name==version`).
#[derive(Debug, Default)]
struct Held {
    conda: Vec<String>,
    pip: Vec<String>,
}

/// `--upgrade-package`: every package of the lock on disk held at its version except `names`,
/// each of which must be in that closure.
fn held_back(on_disk: Option<&Lock>, names: &[String]) -> Result<Held, Failure> {
    use crate::core::closure::canonical_name;
    let closure = on_disk.map(|l| l.closure.as_slice()).unwrap_or_default();
    let names: Vec<String> = names.iter().map(|n| canonical_name(n)).collect();
    if let Some(n) = names
        .iter()
        .find(|n| !closure.iter().any(|p| &canonical_name(&p.name) == *n))
    {
        return Err(Failure::usage(
            format!("--upgrade-package {n}: `{n}` is not in the lock's closure"),
            Some("name a package of the closure, or use --upgrade to re-resolve everything".into()),
        ));
    }
    let mut held = Held::default();
    for p in closure
        .iter()
        .filter(|p| !names.contains(&canonical_name(&p.name)))
    {
        if p.kind == "conda" {
            let build = p.build.as_deref().unwrap_or("*");
            held.conda
                .push(format!("{}::{}=={}={build}", p.index, p.name, p.version));
        } else {
            held.pip.push(format!("{}=={}", p.name, p.version));
        }
    }
    Ok(held)
}

/// Why there is no digest to pin a base image by: a short reason the lock may record (the
/// same words on every machine), and what the engine or registry said (shown, not recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoDigest {
    pub reason: String,
    pub detail: Option<String>,
}

impl NoDigest {
    pub fn new(reason: impl Into<String>) -> NoDigest {
        NoDigest {
            reason: reason.into(),
            detail: None,
        }
    }

    /// The reason with its detail, for a message.
    pub fn shown(&self) -> String {
        match &self.detail {
            Some(d) => format!("{} ({d})", self.reason),
            None => self.reason.clone(),
        }
    }
}

/// Asks for a base image's digest (the engine, or a stand-in in tests).
pub trait DigestSource {
    /// The digest `FROM image@digest` should name; `Ok(Err(why))` when there is none to pin
    /// the image by.
    fn digest(&self, image: &str) -> Result<Result<String, NoDigest>, Failure>;
}

/// The Docker engine: the registry's digest (distribution inspect, no pull), else the local
/// image's repo digest.
pub struct EngineDigests;

impl DigestSource for EngineDigests {
    fn digest(&self, image: &str) -> Result<Result<String, NoDigest>, Failure> {
        use crate::infra::docker::{connect, images, runtime};
        let found = runtime()?.block_on(async {
            let engine = connect().await?;
            images::base_digest(&engine, image).await
        })?;
        Ok(match found {
            Ok((d, images::DigestSource::Registry | images::DigestSource::Local)) => Ok(d),
            Ok((id, images::DigestSource::LocalOnly)) => Err(NoDigest {
                reason: format!(
                    "`{image}` is only on this engine, with no registry digest: a build cannot                      name it by digest"
                ),
                detail: Some(format!("image {id}")),
            }),
            Err(registry) => Err(NoDigest {
                reason: format!("neither the registry nor the Docker engine has `{image}`"),
                detail: Some(format!("the registry, asked through the engine: {registry}")),
            }),
        })
    }
}

/// Give `lock` its base image's digest (a full lock): the lock on disk's when it was taken for
/// the same base (no engine call), or the reason it recorded for having none; else (mode
/// permitting) a fresh answer from `source`; `--upgrade` always asks again (and keeps the
/// digest it has when no answer comes). A digest the registry does not give is a refusal when
/// `required` (`[lock] base-digest = true`), else a warning whose reason the lock records
/// (`base_digest_unavailable`). `Ok(Err(d))` is a refusal.
fn attach_base_digest(
    lock: &mut Lock,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
    source: &dyn DigestSource,
    required: bool,
) -> Result<Attached, Failure> {
    use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
    let path = on_disk.path;
    // A base named by digest in the spec is pinned already.
    if lock.image.base.contains('@') {
        return Ok(Ok(Vec::new()));
    }
    let same_base = on_disk
        .lock
        .as_ref()
        .filter(|o| o.image.base == lock.image.base);
    let upgrade = matches!(mode, ClosureMode::Resolve { upgrade: true, .. });
    if !upgrade {
        if let Some(d) = same_base.and_then(|o| o.image.base_digest.clone()) {
            return Ok(checked_digest(lock, d, required).map(Vec::from_iter));
        }
        if let Some(why) = same_base
            .and_then(|o| o.image.base_digest_unavailable.clone())
            .filter(|_| !required)
        {
            lock.image.base_digest_unavailable = Some(why);
            return Ok(Ok(Vec::new()));
        }
    }
    if let ClosureMode::Offline { why, .. } = mode {
        return Ok(Err(Diagnostic::error(
            crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION,
            format!(
                "{} has no digest for the base image `{}`, and {why} does not ask the registry",
                crate::core::diag::shown(path),
                lock.image.base
            ),
        )
        .with_hint(
            "run `envbuild lock` (it asks the Docker engine for the digest) and commit the lock",
        )));
    }
    let answer = match source.digest(&lock.image.base) {
        Ok(a) => a,
        Err(f) if !required => Err(NoDigest {
            reason: "no Docker engine answered".to_string(),
            detail: f.diagnostics.first().map(|d| d.message.clone()),
        }),
        Err(f) => return Err(f),
    };
    match answer {
        Ok(d) => Ok(checked_digest(lock, d, required).map(Vec::from_iter)),
        // Each message names the platform: a fleet asks once per platform.
        Err(why) if required => Ok(Err(Diagnostic::error(
            BASE_DIGEST_UNAVAILABLE,
            format!(
                "no digest for the base image `{}` ({}): {}",
                lock.image.base,
                lock.platform.as_str(),
                why.shown()
            ),
        )
        .with_hint(
            "push the base image to a registry the engine can reach (or pull it once), \
                 or set `base-digest = false` in [lock] to build from the tag",
        ))),
        // `--upgrade` that gets no answer keeps the digest the lock has (it still names the
        // image it was taken for), and says so.
        Err(why) => match same_base.and_then(|o| o.image.base_digest.clone()) {
            Some(kept) => {
                let shown = why.shown();
                let keep = Diagnostic::warning(
                    BASE_DIGEST_UNAVAILABLE,
                    format!(
                        "no new digest for the base image `{}` ({}): {shown}; the lock keeps \
                         the one it has",
                        lock.image.base,
                        lock.platform.as_str()
                    ),
                );
                Ok(checked_digest(lock, kept, required)
                    .map(|w| w.into_iter().chain([keep]).collect()))
            }
            None => Ok(Ok(vec![unavailable(lock, why)])),
        },
    }
}

/// The digest's form: only `sha256:<64 hex>` is written into a Dockerfile. An odd one is a
/// refusal when the digest is required, else recorded as unavailable (the warning).
fn checked_digest(
    lock: &mut Lock,
    digest: String,
    required: bool,
) -> Result<Option<Diagnostic>, Diagnostic> {
    use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        lock.image.base_digest = Some(digest);
        return Ok(None);
    }
    let why = NoDigest::new(format!(
        "the digest given for `{}` ({}) is not a sha256 digest",
        lock.image.base,
        lock.platform.as_str()
    ));
    if required {
        return Err(Diagnostic::error(BASE_DIGEST_UNAVAILABLE, why.reason));
    }
    Ok(Some(unavailable(lock, why)))
}

/// Record why the base has no digest, and the warning that says so.
fn unavailable(lock: &mut Lock, why: NoDigest) -> Diagnostic {
    let d = Diagnostic::warning(
        crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE,
        format!(
            "no digest for the base image `{}` ({}): {}; the lock records this \
             (`base_digest_unavailable`) and the build names the tag",
            lock.image.base,
            lock.platform.as_str(),
            why.shown()
        ),
    )
    .with_hint(
        "where a registry answers, `envbuild lock --upgrade` asks again; `[lock] base-digest = \
         true` makes a missing digest an error, `base-digest = false` stops asking",
    );
    lock.image.base_digest_unavailable = Some(why.reason);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A registry answering `digest` and counting the questions.
    struct Fake {
        digest: Result<String, NoDigest>,
        asked: Cell<u32>,
    }

    impl DigestSource for Fake {
        fn digest(&self, _image: &str) -> Result<Result<String, NoDigest>, Failure> {
            self.asked.set(self.asked.get() + 1);
            Ok(self.digest.clone())
        }
    }

    fn fake(d: Result<String, NoDigest>) -> Fake {
        Fake {
            digest: d,
            asked: Cell::new(0),
        }
    }

    fn sha(c: &str) -> String {
        format!("sha256:{}", c.repeat(64))
    }

    const RESOLVE: ClosureMode<'static> = ClosureMode::Resolve {
        upgrade: false,
        upgrade_packages: &[],
    };
    const UPGRADE: ClosureMode<'static> = ClosureMode::Resolve {
        upgrade: true,
        upgrade_packages: &[],
    };

    fn example() -> Lock {
        Lock::from_toml(include_str!("../../specs/torch29-cu128/envbuild.lock")).expect("lock")
    }

    /// The digest is asked once, then reused from the lock on disk while the base is the
    /// same (no engine call); `--upgrade` and a new base ask again; `--locked`/`--offline`
    /// never ask and refuse when there is none for this base.
    #[test]
    fn the_base_digest_is_reused_until_the_base_changes_or_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envbuild.lock");
        let offline = ClosureMode::Offline {
            why: "--locked",
            conda_cache: false,
        };
        let ask = |lock: &mut Lock, mode, f: &Fake| {
            attach_base_digest(lock, &OnDisk::read(&path), mode, f, false).unwrap()
        };

        // No lock on disk: offline refuses without asking.
        let f = fake(Ok(sha("a")));
        let mut lock = example();
        let d = ask(&mut lock, offline, &f).unwrap_err();
        assert_eq!(
            d.code,
            crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION
        );
        assert_eq!((f.asked.get(), lock.image.base_digest.clone()), (0, None));

        assert_eq!(ask(&mut lock, RESOLVE, &f), Ok(vec![]));
        assert_eq!(
            (f.asked.get(), lock.image.base_digest.clone()),
            (1, Some(sha("a")))
        );
        std::fs::write(&path, lock.to_toml().unwrap()).unwrap();

        // The registry moved on: reuse keeps the locked digest, offline too, upgrade takes it.
        let f = fake(Ok(sha("b")));
        for mode in [RESOLVE, offline] {
            let mut again = example();
            assert_eq!(ask(&mut again, mode, &f), Ok(vec![]));
            assert_eq!(again.image.base_digest, Some(sha("a")));
        }
        assert_eq!(f.asked.get(), 0);
        let mut up = example();
        assert_eq!(ask(&mut up, UPGRADE, &f), Ok(vec![]));
        assert_eq!((f.asked.get(), up.image.base_digest), (1, Some(sha("b"))));

        // --upgrade with no answer keeps the digest the lock has, and warns.
        let mut kept = example();
        let gone = fake(Err(NoDigest::new("the registry is down")));
        let w = ask(&mut kept, UPGRADE, &gone).unwrap();
        assert_eq!(kept.image.base_digest, Some(sha("a")));
        assert!(
            w.len() == 1 && w[0].message.contains("keeps the one it has"),
            "{w:?}"
        );

        // Another base: the old digest is not taken for it.
        let mut other = example();
        other.image.base = "registry.example/team/base:1".into();
        let d = ask(&mut other, offline, &f).unwrap_err();
        assert_eq!(
            d.code,
            crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION
        );
        assert_eq!(ask(&mut other, RESOLVE, &f), Ok(vec![]));
        assert_eq!(
            (f.asked.get(), other.image.base_digest),
            (2, Some(sha("b")))
        );
    }

    /// A digest no registry gives (or an engine that does not answer) is a warning the lock
    /// records, reused without asking again (offline too) until `--upgrade`; where the spec
    /// asks for the digest (`base-digest = true`) it is a refusal and the record is not taken.
    #[test]
    fn an_unavailable_digest_is_a_recorded_warning_unless_required() {
        use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envbuild.lock");
        let none = fake(Err(NoDigest {
            reason: "no registry answers".to_string(),
            detail: Some("lookup registry.example: no such host".to_string()),
        }));
        let mut lock = example();
        let w = attach_base_digest(&mut lock, &OnDisk::read(&path), RESOLVE, &none, false)
            .unwrap()
            .unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].code, w[0].is_error()),
            (BASE_DIGEST_UNAVAILABLE, false)
        );
        assert!(
            w[0].message.contains(
                "` (linux-64): no registry answers (lookup registry.example: no such host)"
            ),
            "{}",
            w[0].message
        );
        assert_eq!(lock.image.base_digest, None);
        assert_eq!(
            lock.image.base_digest_unavailable.as_deref(),
            Some("no registry answers")
        );
        std::fs::write(&path, lock.to_toml().unwrap()).unwrap();
        for mode in [
            RESOLVE,
            ClosureMode::Offline {
                why: "--locked",
                conda_cache: false,
            },
        ] {
            let mut again = example();
            let w = attach_base_digest(&mut again, &OnDisk::read(&path), mode, &none, false);
            assert_eq!(w, Ok(Ok(vec![])));
            assert_eq!(again.image, lock.image);
        }
        assert_eq!(none.asked.get(), 1);
        // --upgrade asks again, and takes a digest that is there now.
        let mut up = example();
        let w = attach_base_digest(
            &mut up,
            &OnDisk::read(&path),
            UPGRADE,
            &fake(Ok(sha("d"))),
            false,
        );
        assert_eq!(w, Ok(Ok(vec![])));
        assert_eq!(
            (up.image.base_digest, up.image.base_digest_unavailable),
            (Some(sha("d")), None)
        );
        // Required: the record is not taken, and no digest refuses.
        let mut req = example();
        let d = attach_base_digest(&mut req, &OnDisk::read(&path), RESOLVE, &none, true)
            .unwrap()
            .unwrap_err();
        assert_eq!((d.code, d.is_error()), (BASE_DIGEST_UNAVAILABLE, true));
        assert!(
            d.message.contains("(linux-64): no registry answers"),
            "{}",
            d.message
        );
        assert_eq!(none.asked.get(), 2);
    }

    /// `--upgrade-package`: conda entries are held by version and build in their channel, pip
    /// entries by version; names match whatever their spelling (`Typing_Extensions`).
    #[test]
    fn upgrade_package_holds_conda_by_build_and_pip_by_version() {
        use crate::core::lock::ClosurePkg;
        let pkg = |kind: &str, name: &str, version: &str, build: Option<&str>| ClosurePkg {
            name: name.into(),
            version: version.into(),
            kind: kind.into(),
            url: String::new(),
            index: "https://c.example/conda-forge".into(),
            sha256: "a".repeat(64),
            md5: None,
            build: build.map(str::to_string),
            subdir: None,
            yanked: None,
        };
        let mut lock = example();
        lock.closure = vec![
            pkg("conda", "python", "3.11.9", Some("h0_0_cpython")),
            pkg("conda", "typing_extensions", "4.12.2", Some("pyha770c72_0")),
            pkg("pip", "einops", "0.8.1", None),
        ];
        let held = held_back(Some(&lock), &["Typing_Extensions".into()]).unwrap();
        assert_eq!(
            held.conda,
            ["https://c.example/conda-forge::python==3.11.9=h0_0_cpython"]
        );
        assert_eq!(held.pip, ["einops==0.8.1"]);
        let held = held_back(Some(&lock), &["einops".into()]).unwrap();
        assert_eq!(held.conda.len(), 2);
        assert!(held.pip.is_empty());
        assert!(held_back(Some(&lock), &["numpy".into()]).is_err());
    }

    /// No digest, or one that is not a sha256, is BASE_DIGEST_UNAVAILABLE and sets nothing when
    /// the digest is required; a base already named by digest is left alone.
    #[test]
    fn a_missing_or_odd_digest_is_refused_when_required() {
        use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envbuild.lock");
        for answer in [
            Err(NoDigest::new("neither has it")),
            Ok("sha256:abc\nRUN evil".to_string()),
            Ok(format!("md5:{}", "a".repeat(64))),
        ] {
            let mut lock = example();
            let f = fake(answer.clone());
            let d = attach_base_digest(&mut lock, &OnDisk::read(&path), RESOLVE, &f, true).unwrap();
            assert_eq!(d.unwrap_err().code, BASE_DIGEST_UNAVAILABLE);
            assert_eq!(lock.image.base_digest, None);
            // Not required: never written into the Dockerfile, recorded as unavailable.
            let mut lock = example();
            let w = attach_base_digest(&mut lock, &OnDisk::read(&path), RESOLVE, &f, false)
                .unwrap()
                .unwrap();
            assert_eq!(w[0].code, BASE_DIGEST_UNAVAILABLE);
            assert_eq!(lock.image.base_digest, None);
            assert!(lock.image.base_digest_unavailable.is_some());
        }
        let mut pinned = example();
        pinned.image.base = format!("python:3.12-slim@{}", sha("c"));
        let f = fake(Ok(sha("a")));
        assert_eq!(
            attach_base_digest(&mut pinned, &OnDisk::read(&path), RESOLVE, &f, true),
            Ok(Ok(vec![]))
        );
        assert_eq!((f.asked.get(), pinned.image.base_digest), (0, None));
    }
}
