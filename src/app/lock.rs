//! `lock`: resolve a spec and write `envbuild.lock` atomically, or check it against the lock on
//! disk (`--locked`). Reads the spec and the lock; writes the lock. Prints nothing.

use super::codes::{LOCK_MISSING, LOCK_STALE};
use super::{load_spec, lock_path, resolve_loaded};
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
    let loaded = match load_spec(req.spec, table) {
        Ok(l) => l,
        Err(diagnostics) => return Ok(LockOutcome::Refused { diagnostics }),
    };
    if !req.upgrade_packages.is_empty() && !loaded.spec.lock.closure {
        return Err(Failure::usage(
            format!(
                "--upgrade-package {}: {} locks no closure, so there is no package to move alone",
                req.upgrade_packages.join(" "),
                crate::core::diag::shown(req.spec)
            ),
            Some(
                "change the package's pin in the spec and run `envbuild lock`; \
                 `--upgrade-package` moves one package of a closure lock (`[lock] closure = true`)"
                    .into(),
            ),
        ));
    }
    let res = resolve_loaded(&loaded, table);
    let mut diagnostics = res.diagnostics;
    let Some(mut lock) = res
        .lock
        .filter(|_| !diagnostics.iter().any(Diagnostic::is_error))
    else {
        return Ok(LockOutcome::Refused { diagnostics });
    };
    let path = match req.out {
        Some(_) => lock_path(req.spec, req.out),
        None => super::beside_input(req.spec, crate::core::lock::FILE_NAME)?,
    };
    if loaded.spec.lock.is_full() {
        let mode = if req.locked || req.offline {
            ClosureMode::Offline {
                why: if req.locked { "--locked" } else { "--offline" },
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
        if let Some(d) = attach_full_from(&mut lock, &loaded.spec, table, &on_disk, mode)? {
            diagnostics.push(d);
            return Ok(LockOutcome::Refused { diagnostics });
        }
    }
    // What a resolver gave (or the lock on disk kept) is checked as `render` checks a lock:
    // a lock that `lock` writes verifies itself and renders.
    let problems = written_lock_problems(&lock);
    if !problems.is_empty() {
        diagnostics.extend(problems);
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

/// Why a lock about to be written (or found current) cannot be: its closure fails its own
/// checks, or a value is one `render` refuses.
pub fn written_lock_problems(lock: &Lock) -> Vec<Diagnostic> {
    let mut out = crate::core::closure::verify::verify(lock);
    if let Err(f) = crate::core::render::check_lock_values(lock) {
        out.extend(f.diagnostics);
    }
    out
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
    Offline { why: &'static str },
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
    /// aside with a warning, and resolved afresh. A lock that only lacks its `closure_sha256`
    /// (an older envbuild's) keeps its checked closure either way: it is sealed when written.
    pub fn distrust(&mut self, strict: bool) -> Option<Vec<Diagnostic>> {
        use crate::core::closure::verify::{codes::LOCK_TAMPERED, verify};
        let lock = self.lock.as_ref()?;
        let mut problems = verify(lock);
        if lock.closure_sha256.is_none() {
            problems.retain(|d| d.code != LOCK_TAMPERED);
        }
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

/// A full lock (`LockOpts::is_full`): the closure when the spec asks for one, then the base
/// image's digest when it wants one, both reused from the lock at `path` when it still holds.
/// `Ok(Some(d))` is a refusal to report.
pub fn attach_full(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    path: &Path,
    mode: ClosureMode<'_>,
) -> Result<Option<Diagnostic>, Failure> {
    attach_full_from(lock, spec, table, &OnDisk::read(path), mode)
}

/// `attach_full` with the lock on disk already read.
pub fn attach_full_from(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
) -> Result<Option<Diagnostic>, Failure> {
    if spec.lock.closure {
        if let Some(d) = attach_closure(lock, spec, table, on_disk, mode)? {
            return Ok(Some(d));
        }
        crate::core::closure::verify::seal(lock);
    }
    if spec.lock.wants_base_digest() {
        return attach_base_digest(lock, on_disk, mode, &EngineDigests);
    }
    Ok(None)
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

    /// Run the resolver(s); `held` keeps every package of the lock on disk but the ones
    /// `--upgrade-package` names at its locked version (and build, for conda).
    fn resolve(&self, held: &Held) -> Result<Vec<crate::core::lock::ClosurePkg>, Failure> {
        use crate::infra::pip_resolve;
        match self {
            Plan::Pip(i) => pip_resolve::resolve(&pip_resolve::interpreter(), i, &held.pip, &[]),
            Plan::Conda(e, alias) => resolve_conda(e, alias, held),
        }
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
) -> Result<Vec<crate::core::lock::ClosurePkg>, Failure> {
    use crate::core::closure::{codes::CLOSURE_RESOLVE_FAILED, conda, markers};
    use crate::infra::{conda_solve, pip_resolve};
    let solved = conda_solve::resolve(&env.conda, alias, &held.conda)?;
    let entries = conda::to_closure(&solved).map_err(|m| {
        Failure::one(Diagnostic::error(CLOSURE_RESOLVE_FAILED, m).with_hint(
            "a closure lock records each package's sha256 and md5: use a channel whose repodata.json carries both",
        ))
    })?;
    let provided = conda::python_provided(&solved);
    let pip = match &env.pip {
        None => Vec::new(),
        Some(inputs) => {
            let mut inputs = inputs.clone();
            // pip resolves for the Python conda chose (`3.12` in the spec is `3.12.7` here).
            if let Some(py) = solved.iter().find(|s| s.name == "python") {
                let machine = inputs
                    .markers
                    .get("platform_machine")
                    .cloned()
                    .unwrap_or_default();
                inputs.markers = markers(&py.version, &machine);
                inputs.python = py.version.clone();
            }
            let installed = conda::pip_installed(&provided);
            pip_resolve::resolve(&pip_resolve::interpreter(), &inputs, &held.pip, &installed)?
        }
    };
    Ok(conda::merge(entries, pip, &provided))
}

/// Give `lock` its closure (`[lock] closure = true`): the one in the lock at `path` when it was
/// resolved from the same inputs, else (mode permitting) a fresh resolution for the target.
/// `Ok(Some(d))` is a refusal to report.
fn attach_closure(
    lock: &mut Lock,
    spec: &crate::core::spec::Spec,
    table: &Table,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
) -> Result<Option<Diagnostic>, Failure> {
    use crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION;
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
            return Ok(Some(
                Diagnostic::error(crate::core::spec::codes::CLOSURE_UNSUPPORTED, m)
                    .with_hint("remove `closure = true` from [lock]"),
            ))
        }
    };
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
    let closure = match (old, mode) {
        (Some(o), _) if reuse => o.closure.clone(),
        (_, ClosureMode::Offline { why }) => {
            return Ok(Some(Diagnostic::error(
                CLOSURE_NEEDS_RESOLUTION,
                format!(
                    "{} has no closure resolved from this spec's inputs (requirements, indexes, channels, Python, platform), and {why} does not run the resolver",
                    crate::core::diag::shown(path)
                ),
            )
            .with_hint("run `envbuild lock` (it resolves the closure on the network: pip for wheels, the conda solver for channels) and commit the lock")));
        }
        _ => plan.resolve(&held)?,
    };
    pin_ranges(lock, spec, &closure);
    lock.closure_inputs = Some(hash);
    lock.closure = closure;
    Ok(None)
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

/// Asks for a base image's digest (the engine, or a stand-in in tests).
pub trait DigestSource {
    /// The digest `FROM image@digest` should name; `Ok(Err(why))` when there is none to pin
    /// the image by.
    fn digest(&self, image: &str) -> Result<Result<String, String>, Failure>;
}

/// The Docker engine: the registry's digest (distribution inspect, no pull), else the local
/// image's repo digest.
pub struct EngineDigests;

impl DigestSource for EngineDigests {
    fn digest(&self, image: &str) -> Result<Result<String, String>, Failure> {
        use crate::infra::docker::{connect, images, runtime};
        let found = runtime()?.block_on(async {
            let engine = connect().await?;
            images::base_digest(&engine, image).await
        })?;
        Ok(match found {
            Ok((d, images::DigestSource::Registry | images::DigestSource::Local)) => Ok(d),
            Ok((id, images::DigestSource::LocalOnly)) => Err(format!(
                "`{image}` is only on this engine (image {id}, no registry digest): a build \
                 cannot name it by digest"
            )),
            Err(registry) => Err(format!(
                "neither the registry nor the Docker engine has `{image}` (the registry, asked \
                 through the engine: {registry})"
            )),
        })
    }
}

/// Give `lock` its base image's digest (a full lock: `[lock] closure = true`): the lock on
/// disk's when it was taken for the same base (no engine call), else (mode permitting) a fresh
/// one from `source`; `--upgrade` always asks again. `Ok(Some(d))` is a refusal to report.
fn attach_base_digest(
    lock: &mut Lock,
    on_disk: &OnDisk<'_>,
    mode: ClosureMode<'_>,
    source: &dyn DigestSource,
) -> Result<Option<Diagnostic>, Failure> {
    let path = on_disk.path;
    use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
    // A base named by digest in the spec is pinned already.
    if lock.image.base.contains('@') {
        return Ok(None);
    }
    let on_disk = on_disk
        .lock
        .as_ref()
        .filter(|o| o.image.base == lock.image.base)
        .and_then(|o| o.image.base_digest.clone());
    let upgrade = matches!(mode, ClosureMode::Resolve { upgrade: true, .. });
    let digest = match (on_disk, mode) {
        (Some(d), _) if !upgrade => d,
        (_, ClosureMode::Offline { why }) => {
            return Ok(Some(
                Diagnostic::error(
                    crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION,
                    format!(
                        "{} has no digest for the base image `{}`, and {why} does not ask the registry",
                        crate::core::diag::shown(path),
                        lock.image.base
                    ),
                )
                .with_hint("run `envbuild lock` (it asks the Docker engine for the digest) and commit the lock"),
            ))
        }
        _ => match source.digest(&lock.image.base)? {
            Ok(d) => d,
            Err(why) => {
                return Ok(Some(Diagnostic::error(BASE_DIGEST_UNAVAILABLE, why).with_hint(
                    "push the base image to a registry the engine can reach (or pull it once), \
                     or set `base-digest = false` in [lock] to build from the tag",
                )))
            }
        },
    };
    // The digest is written into the Dockerfile: only a sha256 one is taken.
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Some(Diagnostic::error(
            BASE_DIGEST_UNAVAILABLE,
            format!(
                "the digest given for `{}` is not a sha256 digest",
                lock.image.base
            ),
        )));
    }
    lock.image.base_digest = Some(digest);
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A registry answering `digest` and counting the questions.
    struct Fake {
        digest: Result<String, String>,
        asked: Cell<u32>,
    }

    impl DigestSource for Fake {
        fn digest(&self, _image: &str) -> Result<Result<String, String>, Failure> {
            self.asked.set(self.asked.get() + 1);
            Ok(self.digest.clone())
        }
    }

    fn fake(d: Result<String, String>) -> Fake {
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
        let offline = ClosureMode::Offline { why: "--locked" };

        // No lock on disk: offline refuses without asking.
        let f = fake(Ok(sha("a")));
        let mut lock = example();
        let d = attach_base_digest(&mut lock, &OnDisk::read(&path), offline, &f)
            .unwrap()
            .unwrap();
        assert_eq!(
            d.code,
            crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION
        );
        assert_eq!((f.asked.get(), lock.image.base_digest.clone()), (0, None));

        assert!(
            attach_base_digest(&mut lock, &OnDisk::read(&path), RESOLVE, &f)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            (f.asked.get(), lock.image.base_digest.clone()),
            (1, Some(sha("a")))
        );
        std::fs::write(&path, lock.to_toml().unwrap()).unwrap();

        // The registry moved on: reuse keeps the locked digest, offline too, upgrade takes it.
        let f = fake(Ok(sha("b")));
        for mode in [RESOLVE, offline] {
            let mut again = example();
            assert!(
                attach_base_digest(&mut again, &OnDisk::read(&path), mode, &f)
                    .unwrap()
                    .is_none()
            );
            assert_eq!(again.image.base_digest, Some(sha("a")));
        }
        assert_eq!(f.asked.get(), 0);
        let mut up = example();
        assert!(
            attach_base_digest(&mut up, &OnDisk::read(&path), UPGRADE, &f)
                .unwrap()
                .is_none()
        );
        assert_eq!((f.asked.get(), up.image.base_digest), (1, Some(sha("b"))));

        // Another base: the old digest is not taken for it.
        let mut other = example();
        other.image.base = "registry.example/team/base:1".into();
        let d = attach_base_digest(&mut other, &OnDisk::read(&path), offline, &f)
            .unwrap()
            .unwrap();
        assert_eq!(
            d.code,
            crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION
        );
        assert!(
            attach_base_digest(&mut other, &OnDisk::read(&path), RESOLVE, &f)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            (f.asked.get(), other.image.base_digest),
            (2, Some(sha("b")))
        );
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

    /// No digest, or one that is not a sha256, is BASE_DIGEST_UNAVAILABLE and sets nothing; a
    /// base already named by digest is left alone.
    #[test]
    fn a_missing_or_odd_digest_is_refused() {
        use crate::infra::docker::codes::BASE_DIGEST_UNAVAILABLE;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envbuild.lock");
        for answer in [
            Err("neither has it".to_string()),
            Ok("sha256:abc\nRUN evil".to_string()),
            Ok(format!("md5:{}", "a".repeat(64))),
        ] {
            let mut lock = example();
            let d = attach_base_digest(&mut lock, &OnDisk::read(&path), RESOLVE, &fake(answer))
                .unwrap();
            assert_eq!(d.unwrap().code, BASE_DIGEST_UNAVAILABLE);
            assert_eq!(lock.image.base_digest, None);
        }
        let mut pinned = example();
        pinned.image.base = format!("python:3.12-slim@{}", sha("c"));
        let f = fake(Ok(sha("a")));
        assert!(
            attach_base_digest(&mut pinned, &OnDisk::read(&path), RESOLVE, &f)
                .unwrap()
                .is_none()
        );
        assert_eq!((f.asked.get(), pinned.image.base_digest), (0, None));
    }
}
