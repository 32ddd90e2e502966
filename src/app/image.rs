//! `image`: check the lock, render the image's files in memory (plus the lock's `[image]
//! wheels` directory), build each variant through the engine from a deterministic context, and
//! smoke-test each image, reusing a passing verdict for an unchanged image on the same engine.
//! Performs I/O (files, the engine, the verdict cache); prints nothing: progress goes to the
//! caller as [`ImageEvent`]s, results come back as values.
//!
//! With `--pull`, a missing base is pulled first; with `--push`, the registry is asked before
//! building (`publish::registry_word`) and each image that passed is pushed with its verdict.
//!
//! The engine half starts at [`run`] / [`build_and_test`], which take already-rendered files;
//! [`check_lock`] and [`rendered_image`] get those from the spec, lock and renderer.

use super::lock::{lock, LockOutcome, LockRequest};
use super::publish::{self, Published, RegistryWord, ToPublish};
use super::test::{sent_expectations, smoke, SmokeResult, SmokeSettings};
use crate::core::compat::Table;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_ref::Repository;
use crate::core::lock::Lock;
use crate::core::smoke::Expectations;
use crate::core::smoke::Mode;
use crate::core::verdict::GpusWanted;
use crate::infra::docker::build::{
    build_pulling, BuildEvent, BuildOutcome, BuildRequest, PullPolicy, RegistryCache,
};
use crate::infra::docker::run::{self as drun, Interrupt, SmokeOutcome};
use crate::infra::docker::{self, codes, Engine};
use crate::infra::registry_auth::Credentials;
use crate::infra::verdict_cache::{self, StoredVerdict, VerdictKey};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the rendered expectations sit among the rendered files.
pub const RENDERED_EXPECT: &str = "envbuild/expect.json";

/// The hint of a missing or stale lock, for `image`.
const LOCK_FIX: &str = "run `envbuild lock SPEC` and commit the lock, or pass --update-lock";

/// What the core hands to the engine half: the rendered files and the lock's identity.
#[derive(Debug, Clone)]
pub struct RenderedImage {
    /// Rendered files by relative path: `Dockerfile` (stages `runtime` and `dev`),
    /// `environment.yml`/`requirements.txt`, `envbuild/envbuild_smoke.py`,
    /// `envbuild/expect.json`, ... Only what the Dockerfile copies is sent to the engine.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Which file is the Dockerfile (normally `Dockerfile`).
    pub dockerfile: String,
    /// Image repository name (`[image] name`).
    pub image_name: String,
    /// The lock's sha256 (64 hex).
    pub lock_hash: String,
    /// What the image is built from ([`content_sha256`]): the tag, the build skip and the
    /// verdicts are keyed on it. `None` (files made by hand, in tests): the lock's hash.
    pub content_sha256: Option<String>,
    /// Compact JSON summary of the lock, for the `dev.envbuild.lock-summary` label.
    pub lock_summary: String,
    /// The Docker platform the lock's image is for (`linux/arm64`), sent with every build;
    /// `None`: the engine's own (files made by hand, in tests).
    pub platform: Option<String>,
    /// What a fleet's platform image appends to its content tag and pushed tags (`-arm64`,
    /// `core::platform::tag_suffix`); empty for a single-platform lock.
    pub tag_suffix: String,
}

impl RenderedImage {
    /// The build's identity: [`RenderedImage::content_sha256`], else the lock's hash.
    pub fn identity(&self) -> &str {
        self.content_sha256.as_deref().unwrap_or(&self.lock_hash)
    }

    /// The lock and the identity, for the registry's verdicts.
    pub fn build_id(&self) -> publish::BuildId<'_> {
        publish::BuildId {
            lock_sha256: &self.lock_hash,
            content_sha256: self.identity(),
            tag_suffix: &self.tag_suffix,
        }
    }
}

/// What a build is made of, as one sha256: the lock's hash and every rendered file the context
/// is cut from (the Dockerfile and what it copies: a `--templates` override changes them), by
/// name and bytes. Not the network's CA bundle nor the proxies: they reach no image, and the
/// same build on another network is the same image.
pub fn content_sha256(lock_hash: &str, files: &BTreeMap<String, Vec<u8>>) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(b"envbuild-content 1\0");
    h.update(lock_hash.as_bytes());
    for (name, bytes) in files
        .iter()
        .filter(|(n, _)| n.as_str() != crate::core::render::CA_BUNDLE_FILE)
    {
        h.update([0u8]);
        h.update(name.as_bytes());
        h.update([0u8]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    crate::core::hash::hex(&h.finalize())
}

/// What to build and how to test it.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// Dockerfile targets to build, in order (`runtime`, `dev`).
    pub variants: Vec<String>,
    pub tags: Vec<String>,
    pub rebuild: bool,
    pub retest: bool,
    pub smoke: SmokeSettings,
    /// Where passing verdicts are remembered (`None`: never reuse one).
    pub cache_dir: Option<PathBuf>,
    /// When to pull the `FROM` images (`--pull`).
    pub pull: PullPolicy,
    /// `--push REGISTRY/REPO`: push each image that passed, with its verdict, and skip build
    /// and test when the registry already holds both for this lock and mode.
    pub push: Option<Repository>,
    /// `--cache-from IMAGE`: registry caches BuildKit reads, besides `--push`'s own
    /// `REGISTRY/REPO:VARIANT-cache`.
    pub cache_from: Vec<String>,
    /// Build args for every build: the host's proxy settings
    /// (`infra::network::proxy_build_args`), kept out of the image by the engine.
    pub build_args: BTreeMap<String, String>,
}

/// Progress, in the order it happens.
#[derive(Debug)]
pub enum ImageEvent<'a> {
    /// The build of `variant` begins.
    BuildStarted { variant: &'a str },
    /// Progress of the build of `variant`.
    Build { variant: &'a str, event: BuildEvent },
    /// The build of `variant` ended; `None` when it failed or was interrupted.
    BuildFinished {
        variant: &'a str,
        outcome: Option<&'a BuildOutcome>,
    },
    /// The image of `variant` passed before on this engine: its verdict is reused.
    SmokeReused { variant: &'a str, tag: &'a str },
    /// The smoke test of `variant` begins in a container from `tag`.
    SmokeStarted {
        variant: &'a str,
        tag: &'a str,
        mode: Mode,
    },
    /// The registry holds `published` with a verdict that covers this run: nothing is built.
    RegistryHolds {
        published: &'a Published,
        tested_at: &'a str,
    },
    /// The registry's word does not let the run skip, and why.
    RegistryBuilds { variant: &'a str, reason: &'a str },
    /// Progress of a push of `variant`'s image or verdict.
    Push {
        variant: &'a str,
        progress: crate::infra::docker::registry::Progress,
    },
    /// `variant` was pushed with its verdict.
    Pushed { published: &'a Published },
    /// `variant` failed its smoke test and is not pushed.
    NotPushed { variant: &'a str },
    /// A fleet lock: the builds and tests of `platform`'s image begin (what follows is its).
    Platform {
        platform: crate::core::spec::Platform,
    },
    /// A fleet lock with `--push`: these platforms failed, so nothing at all is pushed.
    FleetNotPushed {
        failed: &'a [crate::core::spec::Platform],
    },
    /// A fleet lock with `--push`: the multi-platform image index of a variant was written.
    IndexPushed {
        index: &'a crate::core::image_index::PushedIndex,
    },
    /// A fleet lock with `--push` of some of its platforms: no index of `variant` yet, since
    /// another platform's image is not in the registry with a passing verdict (`reason`).
    IndexWaits { variant: &'a str, reason: &'a str },
    /// The `install` stage went to the registry as the build cache `reference` (`Ok`: its
    /// digest), or did not (`Err`: why; only a later build's cache is lost).
    InstallCache {
        reference: &'a str,
        result: Result<&'a str, &'a str>,
    },
}

/// What [`build_and_test`] did.
pub struct ImageRun {
    /// (variant, build outcome) in build order.
    pub builds: Vec<(String, BuildOutcome)>,
    pub smokes: Vec<SmokeResult>,
    /// What was pushed (or, with `from_registry`, found in the registry).
    pub published: Vec<Published>,
    /// Build and test were skipped on the registry's word.
    pub from_registry: bool,
    /// With `--push`: the `install` stage's registry cache, as [`ImageEvent::InstallCache`]
    /// said it (`None` when none was attempted).
    pub install_cache: Option<InstallCacheOutcome>,
}

/// The `install` stage's push as the registry build cache.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstallCacheOutcome {
    pub reference: String,
    /// The pushed digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Why it was not pushed (a warning: only a later build's cache is lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_pushed: Option<String>,
}

/// The lock, checked like `envbuild lock --locked` (or rewritten with `update_lock`).
#[derive(Debug)]
pub struct LockCheck {
    /// `None`: the spec or the lock has problems (among `diagnostics`).
    pub lock: Option<Lock>,
    /// Every diagnostic, warnings included.
    pub diagnostics: Vec<Diagnostic>,
}

/// Resolve the spec and check its lock on disk (or write it, with `update_lock`).
pub fn check_lock(table: &Table, spec: &Path, update_lock: bool) -> Result<LockCheck, Failure> {
    let req = LockRequest {
        spec,
        out: None,
        locked: !update_lock,
        upgrade: false,
        upgrade_packages: &[],
        offline: false,
        no_closure: false,
    };
    Ok(match lock(table, &req)? {
        LockOutcome::Refused { mut diagnostics } => {
            for d in &mut diagnostics {
                if [super::codes::LOCK_MISSING, super::codes::LOCK_STALE].contains(&d.code) {
                    d.hint = Some(LOCK_FIX.to_string());
                }
            }
            LockCheck {
                lock: None,
                diagnostics,
            }
        }
        LockOutcome::Current {
            lock, diagnostics, ..
        }
        | LockOutcome::Written {
            lock, diagnostics, ..
        } => LockCheck {
            lock: Some(*lock),
            diagnostics,
        },
    })
}

/// The image of `lock`, rendered in memory for `variants`, with the lock's `[image] wheels`
/// directory read from beside `spec`. `templates` overrides the embedded templates;
/// `mirrors` (`--pip-mirror`, `--conda-mirror`) are where pip and conda install from (the tag
/// stays the lock's).
pub fn rendered_image(
    lock: &Lock,
    variants: &[String],
    templates: Option<&Path>,
    spec: &Path,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<RenderedImage, Failure> {
    let lock_hash = lock
        .hash()
        .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
    for v in variants {
        if !lock.image.variants.iter().any(|lv| lv.as_str() == v) {
            return Err(Failure::usage(
                format!(
                    "the lock has no `{v}` variant (it has: {})",
                    lock.image
                        .variants
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some("add it to the spec's `[image] variants`, or pick another --variant".into()),
            ));
        }
    }
    let spec_dir = spec_dir(spec);
    let (mut files, content) = unmirrored_render(lock, &lock_hash, templates, spec_dir)?;
    if !mirrors.is_none() {
        files = render_files(lock, templates, spec_dir, mirrors)?;
    }
    fill_conda_token(&mut files)?;
    Ok(RenderedImage {
        content_sha256: Some(content),
        files,
        dockerfile: "Dockerfile".into(),
        image_name: image_name(&lock.name),
        lock_hash,
        lock_summary: lock.summary_json(),
        platform: crate::core::platform::docker_platform(lock.platform).map(str::to_string),
        tag_suffix: String::new(),
    })
}

/// The content hash [`rendered_image`] gives `lock`'s image (the `<content12>` of its tags, a
/// fleet's whole render's), for no build: what `matrix` names the images by.
pub fn content_identity(
    lock: &Lock,
    templates: Option<&Path>,
    spec: &Path,
) -> Result<String, Failure> {
    let lock_hash = lock
        .hash()
        .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
    Ok(unmirrored_render(lock, &lock_hash, templates, spec_dir(spec))?.1)
}

/// The folder a spec's relative paths are read from.
pub(crate) fn spec_dir(spec: &Path) -> &Path {
    spec.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The image's files rendered without mirrors, and their content hash. The identity is of the
/// files as rendered (a conda token's placeholder, not the token), and without mirrors: the
/// hashes make a mirror's install the same environment, as the CA bundle and proxies leave it
/// the same.
fn unmirrored_render(
    lock: &Lock,
    lock_hash: &str,
    templates: Option<&Path>,
    spec_dir: &Path,
) -> Result<(BTreeMap<String, Vec<u8>>, String), Failure> {
    let none = crate::core::closure::Mirrors::default();
    let files = render_files(lock, templates, spec_dir, &none)?;
    let content = content_sha256(lock_hash, &files);
    Ok((files, content))
}

/// A lock made through a token channel alias (`https://HOST/t/TOKEN`) records the token's
/// placeholder (`core::url::TOKEN_PLACEHOLDER`); the build's copy of the files gets the token of
/// `ENVBUILD_CONDA_CHANNEL_ALIAS` back, so conda can fetch the packages. Only the throwaway
/// install stage reads those files; the rendered files on disk keep the placeholder.
fn fill_conda_token(files: &mut BTreeMap<String, Vec<u8>>) -> Result<(), Failure> {
    let marker = format!("/t/{}", crate::core::url::TOKEN_PLACEHOLDER);
    let holds = |b: &Vec<u8>| String::from_utf8_lossy(b).contains(&marker);
    if !files.values().any(holds) {
        return Ok(());
    }
    let alias = crate::infra::conda_solve::channel_alias()?;
    let Some(token) = crate::core::url::conda_token(&alias) else {
        return Err(Failure::usage(
            format!(
                "the lock's conda packages come through a token channel alias, and {} names no token",
                crate::infra::conda_solve::ALIAS_ENV
            ),
            Some(format!(
                "set {}=https://HOST/t/<token> as when the lock was made (the token is read from \
                 the environment, never written)",
                crate::infra::conda_solve::ALIAS_ENV
            )),
        ));
    };
    for bytes in files.values_mut().filter(|b| holds(b)) {
        let text = String::from_utf8_lossy(bytes).into_owned();
        *bytes = crate::core::url::with_token(&text, token).into_bytes();
    }
    Ok(())
}

/// The image repository: `envbuild/<name as a DNS label>`, the name the rendered run snippets
/// use (`render::image_tag`).
pub fn image_name(name: &str) -> String {
    format!("envbuild/{}", crate::core::render::dns_label(name))
}

/// The files of the image, rendered in memory from the lock, plus the `*.whl` files of the
/// lock's `[image] wheels` folder, confined to the spec's folder (`infra::fs::project_wheels`).
/// Run snippets are left out: the build needs none.
fn render_files(
    lock: &Lock,
    templates: Option<&Path>,
    spec_dir: &Path,
    mirrors: &crate::core::closure::Mirrors,
) -> Result<BTreeMap<String, Vec<u8>>, Failure> {
    let rendered = super::render::render_with(lock, templates, mirrors)?;
    let mut files: BTreeMap<String, Vec<u8>> = rendered
        .context_files()
        .map(|(p, b)| (p.to_string(), b.to_vec()))
        .collect();
    for dir in crate::core::render::extra_context_dirs(lock) {
        files.extend(crate::infra::fs::project_wheels(spec_dir, &dir)?);
    }
    Ok(files)
}

/// Put the network's CA bundle into the rendered files' slot for it (`envbuild/ca-bundle.pem`,
/// which only the Dockerfile's throwaway `install` and `dev-install` stages read): the spec's
/// `[image] ca-bundle` (relative to the spec's folder), else the first of `PIP_CERT`, `REQUESTS_CA_BUNDLE`,
/// `SSL_CERT_FILE` that `get` finds. Returns where the bundle was named, `None` when no bundle
/// is named or the rendered files have no slot for one (a `--templates` Dockerfile that does
/// not copy it: the bundle is then not sent at all).
pub fn add_ca_bundle(
    rendered: &mut RenderedImage,
    lock: &Lock,
    spec: &Path,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, Failure> {
    let slot = crate::core::render::CA_BUNDLE_FILE;
    let copied = rendered
        .files
        .get(&rendered.dockerfile)
        .is_some_and(|d| String::from_utf8_lossy(d).contains(slot));
    if !rendered.files.contains_key(slot) || !copied {
        return Ok(None);
    }
    let spec_dir = spec_dir(spec);
    let Some((origin, path)) =
        crate::infra::network::ca_bundle_source(lock.image.ca_bundle.as_deref(), spec_dir, get)
    else {
        return Ok(None);
    };
    if lock.image.ca_bundle.is_some() {
        // The spec's (the checkout's) bundle must really lie in the project: no link out.
        crate::infra::fs::inside_project(
            spec_dir,
            &path,
            crate::infra::docker::codes::CA_BUNDLE_INVALID,
        )?;
    }
    let bytes = crate::infra::network::read_ca_bundle(&origin, &path)?;
    rendered.files.insert(slot.to_string(), bytes);
    Ok(Some(format!(
        "{origin} (`{}`)",
        crate::core::diag::shown(&path)
    )))
}

/// Connect to the engine and [`build_and_test`], stopping cleanly on SIGINT/SIGTERM.
///
/// The outer `Err`: nothing was attempted (no async runtime, no signal handlers, no engine).
/// The inner `Err`: a build failed or the run was interrupted, which the caller still reports
/// (JSON, JUnit) as the run's verdict.
pub fn run(
    rendered: &RenderedImage,
    opts: &ImageOptions,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Result<ImageRun, Failure>, Failure> {
    on_engine(|engine, interrupt| async move {
        build_and_test(&engine, rendered, opts, interrupt, on_event).await
    })
}

/// Run `work` on a fresh runtime with the engine connected and the signal handlers installed
/// (a signal while connecting stops the run). The outer `Err`: nothing was attempted.
pub(crate) fn on_engine<T, F, Fut>(work: F) -> Result<Result<T, Failure>, Failure>
where
    F: FnOnce(Engine, Interrupt) -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let rt = docker::runtime()?;
    rt.block_on(async move {
        let interrupt = drun::install_interrupt()?;
        let engine = tokio::select! {
            e = docker::connect() => e?,
            _ = interrupt.clone() => return Err(drun::interrupted("connecting to the engine")),
        };
        Ok(work(engine, interrupt).await)
    })
}

/// The registry caches a build reads (the explicit ones, then `--push`'s moving
/// `VARIANT-cache` tag, then `install-cache` when the Dockerfile has an `install` stage) and
/// whether it writes one: with `--push`, the image carries BuildKit's inline cache so that the
/// next build on any machine can reuse its layers.
fn registry_cache(
    opts: &ImageOptions,
    variant: &str,
    install_stage: bool,
    suffix: &str,
) -> RegistryCache {
    let mut from = opts.cache_from.clone();
    if let Some(repo) = &opts.push {
        // A fleet's platforms each keep their own cache tag (`VARIANT-cache-arm64`).
        let own = repo.tagged(&format!(
            "{}{suffix}",
            crate::core::image_ref::cache_tag(variant)
        ));
        let install = repo.tagged(crate::core::image_ref::INSTALL_CACHE_TAG);
        let wanted = std::iter::once(own).chain(install_stage.then_some(install));
        for source in wanted {
            if !from.contains(&source) {
                from.push(source);
            }
        }
    }
    RegistryCache {
        from,
        inline: opts.push.is_some(),
        missing: Vec::new(),
    }
}

/// Keep the cache sources the registry has: BuildKit's inline cache export fails the whole
/// build when a `cachefrom` image is missing (a first push, a mistyped `--cache-from`).
async fn present_caches(
    engine: &Engine,
    mut cache: RegistryCache,
    creds_for: &(dyn Fn(&str) -> Result<Option<Credentials>, Failure> + Send + Sync),
) -> RegistryCache {
    let mut from = Vec::new();
    for source in std::mem::take(&mut cache.from) {
        let host = crate::core::image_ref::host_of(&source);
        let creds = creds_for(&host).ok().flatten();
        match crate::infra::docker::registry::remote_digest(engine, &source, creds.as_ref()).await {
            Ok(Some(_)) => from.push(source),
            Ok(None) => cache.missing.push(format!("{source}: not in the registry")),
            Err(f) => {
                let why = f
                    .diagnostics
                    .first()
                    .map_or("unreadable", |d| d.message.as_str());
                cache.missing.push(format!("{source}: {why}"));
            }
        }
    }
    cache.from = from;
    cache
}

/// The Dockerfile stage the wheel path installs the environment in; no variant's image holds
/// its layers.
const INSTALL_STAGE: &str = "install";

/// Whether the Dockerfile BuildKit builds (its BuildKit form when rendered) has a stage named
/// [`INSTALL_STAGE`]: the wheel path's does; the conda path's and a `--templates` override's
/// may not.
fn has_install_stage(rendered: &RenderedImage) -> bool {
    let bk = format!(
        "{}{}",
        rendered.dockerfile,
        crate::core::render::BUILDKIT_SUFFIX
    );
    let Some(text) = rendered
        .files
        .get(&bk)
        .or_else(|| rendered.files.get(&rendered.dockerfile))
    else {
        return false;
    };
    String::from_utf8_lossy(text).lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.len() == 4
            && w[0].eq_ignore_ascii_case("FROM")
            && w[2].eq_ignore_ascii_case("AS")
            && w[3].eq_ignore_ascii_case(INSTALL_STAGE)
    })
}

fn build_request(rendered: &RenderedImage, opts: &ImageOptions, variant: &str) -> BuildRequest {
    // The rendered Dockerfile sets the OCI labels itself; envbuild's own are added by `build`
    // only where a Dockerfile lacks them.
    let extra_labels = BTreeMap::new();
    // One `--tag` cannot name two images: the dev variant gets it with a `-dev` suffix.
    let mut extra_tags: Vec<String> = opts
        .tags
        .iter()
        .map(|t| {
            // A fleet's platforms cannot share it either: each gets `-arm64` and the like.
            let t = format!("{t}{}", rendered.tag_suffix);
            if opts.variants.len() > 1 && variant != opts.variants[0] {
                format!("{t}-{variant}")
            } else {
                t
            }
        })
        .collect();
    // The primary tag names the build (`VARIANT-<content12>`); the lock's tag
    // (`VARIANT-<lock12>`, what the rendered run snippets and `doctor` name) goes to the latest
    // image built from the lock.
    if rendered.identity().get(..12) != rendered.lock_hash.get(..12) {
        let short = rendered.lock_hash.get(..12).unwrap_or(&rendered.lock_hash);
        extra_tags.insert(0, format!("{}:{variant}-{short}", rendered.image_name));
    }
    BuildRequest {
        files: rendered.files.clone(),
        dockerfile: rendered.dockerfile.clone(),
        target: variant.to_string(),
        image_name: rendered.image_name.clone(),
        variant: variant.to_string(),
        lock_hash: rendered.lock_hash.clone(),
        content_sha256: rendered.content_sha256.clone(),
        summary: rendered.lock_summary.clone(),
        extra_tags,
        extra_labels,
        rebuild: opts.rebuild,
        build_args: opts.build_args.clone(),
        cache: registry_cache(
            opts,
            variant,
            has_install_stage(rendered),
            &rendered.tag_suffix,
        ),
        platform: rendered.platform.clone(),
        tag_suffix: rendered.tag_suffix.clone(),
    }
}

/// Build every requested variant, then smoke-test each image (reusing a passing verdict for an
/// unchanged image on the same engine unless `retest`). Build errors and an interruption stop
/// at once; a failing smoke test is a result.
pub async fn build_and_test(
    engine: &Engine,
    rendered: &RenderedImage,
    opts: &ImageOptions,
    interrupt: Interrupt,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<ImageRun, Failure> {
    let creds = match &opts.push {
        Some(repo) => publish::credentials(repo)?,
        None => None,
    };
    if let Some(run) = registry_skip(engine, rendered, opts, creds.as_ref(), on_event).await? {
        return Ok(run);
    }
    // Each host's credentials are looked up once a run: the cache check, the base pull and
    // BuildKit's session all ask, and a lookup may run a credential helper (a process).
    let found: std::sync::Mutex<BTreeMap<String, Option<Credentials>>> = Default::default();
    let creds_for = |host: &str| -> Result<Option<Credentials>, Failure> {
        if let (Some(repo), c) = (&opts.push, &creds) {
            if repo.host == host {
                return Ok(c.clone());
            }
        }
        let known = found.lock().ok().and_then(|f| f.get(host).cloned());
        if let Some(c) = known {
            return Ok(c);
        }
        // A failed lookup is not remembered: the next asker gets the same error, or a helper
        // that answers now.
        let c = crate::infra::registry_auth::for_host(host)?;
        if let Ok(mut f) = found.lock() {
            f.insert(host.to_string(), c.clone());
        }
        Ok(c)
    };
    let (builds, smokes) = build_and_smoke(
        engine,
        rendered,
        opts,
        &creds_for,
        interrupt.clone(),
        on_event,
    )
    .await?;
    let mut install_cache = None;
    let published = match &opts.push {
        Some(repo) => {
            let published = push_passed(
                engine,
                repo,
                (&builds, &smokes),
                rendered.build_id(),
                opts,
                creds.as_ref(),
                on_event,
            )
            .await?;
            if !published.is_empty() && has_install_stage(rendered) {
                let cache = InstallCache {
                    engine,
                    rendered,
                    opts,
                    repo,
                    creds: creds.as_ref(),
                    creds_for: &creds_for,
                };
                install_cache = Some(cache.push(interrupt.clone(), on_event).await?);
            }
            published
        }
        None => Vec::new(),
    };
    Ok(ImageRun {
        builds,
        smokes,
        published,
        from_registry: false,
        install_cache,
    })
}

/// The builds of one rendered image's variants and their smoke tests, without any push.
pub(crate) type Tested = (Vec<(String, BuildOutcome)>, Vec<SmokeResult>);

/// Build every requested variant of `rendered`, then smoke-test each image (see
/// [`build_and_test`]); nothing is pushed.
pub(crate) async fn build_and_smoke(
    engine: &Engine,
    rendered: &RenderedImage,
    opts: &ImageOptions,
    creds_for: &crate::infra::docker::build::CredsFor<'_>,
    interrupt: Interrupt,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Tested, Failure> {
    let expectations: Option<Expectations> = match rendered.files.get(RENDERED_EXPECT) {
        Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|e| {
            Failure::bug(format!(
                "the rendered `{RENDERED_EXPECT}` is not valid: {e}"
            ))
        })?),
        None => None,
    };
    // The record of envbuild's own builds and the verdict cache both hold for one engine.
    let engine_id = match opts.cache_dir {
        Some(_) => docker::engine_id(engine).await,
        None => None,
    };
    let mut builds = Vec::new();
    for variant in &opts.variants {
        let mut req = build_request(rendered, opts, variant);
        req.cache = present_caches(engine, req.cache, creds_for).await;
        let record = BuildRecord::of(opts, engine_id.as_deref(), &req);
        let recorded = record.load();
        on_event(ImageEvent::BuildStarted { variant });
        let outcome = {
            let mut on_build = |event| on_event(ImageEvent::Build { variant, event });
            tokio::select! {
                r = build_pulling(engine, &req, opts.pull, creds_for, &recorded, &mut on_build) => r,
                // Dropping the build closes the connection; the engine then stops the build and
                // (forcerm) removes its intermediate containers.
                _ = interrupt.clone() => Err(drun::interrupted(&format!("the `{variant}` build"))),
            }
        };
        on_event(ImageEvent::BuildFinished {
            variant,
            outcome: outcome.as_ref().ok(),
        });
        let outcome = outcome?;
        if !outcome.skipped {
            record.add(&outcome.image_id);
        }
        builds.push((variant.clone(), outcome));
    }
    let scope = match engine_id {
        Some(id) => cache_scope(engine, id, &opts.smoke).await,
        None => None,
    };
    let mut smokes = Vec::new();
    for (variant, b) in &builds {
        let test = ImageTest {
            engine,
            variant,
            build: b,
            expectations: expectations.as_ref(),
            opts,
            scope: scope.as_ref(),
        };
        smokes.push(test.run(interrupt.clone(), on_event).await?);
    }
    Ok((builds, smokes))
}

/// With `--push` (and neither `--rebuild` nor `--retest`): the run the registry's word makes
/// unnecessary, when every variant's tag is there with a verdict that covers this run's mode
/// for that very digest; `None` to build.
pub(crate) async fn registry_skip(
    engine: &Engine,
    rendered: &RenderedImage,
    opts: &ImageOptions,
    creds: Option<&Credentials>,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Option<ImageRun>, Failure> {
    let Some(repo) = opts.push.as_ref().filter(|_| !opts.rebuild && !opts.retest) else {
        return Ok(None);
    };
    let mode = opts.smoke.mode();
    // A gpu verdict holds only for the driver and GPUs this run's containers get.
    let gpus = match mode {
        Mode::Gpu => docker::host_gpu_identity(engine).await.map(|g| g.key()),
        Mode::Cpu => None,
    };
    let gpus = match &gpus {
        Some(key) => GpusWanted::These(key),
        None => GpusWanted::Unprobed,
    };
    let mut found = Vec::new();
    for variant in &opts.variants {
        let id = rendered.build_id();
        match publish::registry_word(engine, repo, variant, id, (mode, gpus), creds).await? {
            RegistryWord::Holds(p, v) => found.push((p, v)),
            RegistryWord::Build(reason) => {
                on_event(ImageEvent::RegistryBuilds {
                    variant,
                    reason: &reason,
                });
                return Ok(None);
            }
        }
    }
    let mut smokes = Vec::new();
    for (p, v) in &found {
        on_event(ImageEvent::RegistryHolds {
            published: p,
            tested_at: &v.tested_at,
        });
        smokes.push(SmokeResult {
            name: p.image.clone(),
            outcome: Ok(SmokeOutcome {
                report: v.report.clone(),
                exit_code: v.exit_code,
                stderr_tail: String::new(),
                elapsed: Duration::ZERO,
            }),
            reused: true,
        });
    }
    Ok(Some(ImageRun {
        builds: Vec::new(),
        smokes,
        published: found.into_iter().map(|(p, _)| p).collect(),
        from_registry: true,
        install_cache: None,
    }))
}

/// Push every image whose smoke test passed, with its verdict; one that failed is not pushed.
pub(crate) async fn push_passed(
    engine: &Engine,
    repo: &Repository,
    (builds, smokes): (&[(String, BuildOutcome)], &[SmokeResult]),
    id: publish::BuildId<'_>,
    opts: &ImageOptions,
    creds: Option<&Credentials>,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Vec<Published>, Failure> {
    let mode = opts.smoke.mode();
    let gpus = match mode {
        Mode::Cpu => "no GPU requested".to_string(),
        Mode::Gpu => match docker::host_gpu_identity(engine).await {
            Some(id) => id.key(),
            None => "GPUs of an engine on another machine (not probed)".to_string(),
        },
    };
    let mut published = Vec::new();
    for ((variant, b), s) in builds.iter().zip(smokes) {
        let Some(outcome) = s.outcome.as_ref().ok().filter(|_| s.passed()) else {
            on_event(ImageEvent::NotPushed { variant });
            continue;
        };
        let item = ToPublish {
            variant,
            image_id: &b.image_id,
            id,
            outcome,
            mode,
            gpus: gpus.clone(),
        };
        let mut on_progress = |progress| on_event(ImageEvent::Push { variant, progress });
        let p = publish::publish(engine, repo, &item, creds, &mut on_progress).await?;
        on_event(ImageEvent::Pushed { published: &p });
        published.push(p);
    }
    Ok(published)
}

/// The wheel path's `install` stage as a registry build cache of its own. BuildKit's inline
/// cache holds only the layers of the image it is stored in, and no variant's image holds this
/// stage's (the pip install, the heaviest step). `VARIANT-cache` still answers
/// `COPY --from=install` when nothing before it changed, but when something did (a new base
/// stage, a `--templates` edit) or the variant has no cache yet, a fresh machine needs the
/// stage's result and would install the environment again. So, after proof, the stage is built
/// as an image (every step answered by the variant builds just made) with an inline cache,
/// pushed as `REGISTRY/REPO:install-cache` and untagged here again; the next build reads it
/// through `cachefrom` ([`registry_cache`]).
struct InstallCache<'a> {
    engine: &'a Engine,
    rendered: &'a RenderedImage,
    opts: &'a ImageOptions,
    repo: &'a Repository,
    creds: Option<&'a Credentials>,
    creds_for: &'a crate::infra::docker::build::CredsFor<'a>,
}

impl InstallCache<'_> {
    /// Build and push it, saying so. `Err` only for an interruption: any other failure is said
    /// and costs only a later build's cache (the images and verdicts are pushed already).
    async fn push(
        &self,
        interrupt: Interrupt,
        on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
    ) -> Result<InstallCacheOutcome, Failure> {
        let reference = self.repo.tagged(crate::core::image_ref::INSTALL_CACHE_TAG);
        let result = tokio::select! {
            r = self.build_and_push(on_event) => r,
            _ = interrupt => Err(drun::interrupted("the install cache build")),
        };
        let interrupted = |f: &Failure| f.diagnostics.iter().any(|d| d.code == codes::INTERRUPTED);
        let outcome = match &result {
            Err(f) if interrupted(f) => return Err(f.clone()),
            Ok(Some(digest)) => Ok(digest.clone()),
            Ok(None) => Err("the legacy builder stores no inline cache".to_string()),
            Err(f) => Err(f.to_string().trim().to_string()),
        };
        on_event(ImageEvent::InstallCache {
            reference: &reference,
            result: outcome.as_deref().map_err(String::as_str),
        });
        let (digest, not_pushed) = match outcome {
            Ok(d) => (Some(d), None),
            Err(why) => (None, Some(why)),
        };
        Ok(InstallCacheOutcome {
            reference,
            digest,
            not_pushed,
        })
    }

    /// The pushed digest; `None` when the legacy builder built the stage (no inline cache, so
    /// nothing worth pushing).
    async fn build_and_push(
        &self,
        on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
    ) -> Result<Option<String>, Failure> {
        let variant = INSTALL_STAGE;
        let mut req = build_request(self.rendered, self.opts, variant);
        req.extra_tags.clear();
        // Built every time with --push: an image of this stage left from a run without an
        // inline cache would carry none.
        req.rebuild = true;
        // The Dockerfile sets envbuild's labels in `runtime` only; this stage would carry the
        // base's, so they go at its end (after the install: no cache key changes).
        let labels = req.labels();
        for text in req
            .files
            .iter_mut()
            .filter_map(|(name, text)| name.starts_with(&self.rendered.dockerfile).then_some(text))
        {
            let df = String::from_utf8_lossy(text).into_owned();
            *text = crate::infra::docker::context::label_target_stage(&df, variant, &labels)
                .into_bytes();
        }
        req.cache = present_caches(self.engine, req.cache, self.creds_for).await;
        on_event(ImageEvent::BuildStarted { variant });
        let mut buildkit = false;
        let outcome = {
            let mut on_build = |event: BuildEvent| {
                if let BuildEvent::Builder(b) = &event {
                    buildkit = b.starts_with("BuildKit");
                }
                on_event(ImageEvent::Build { variant, event })
            };
            build_pulling(
                self.engine,
                &req,
                self.opts.pull,
                self.creds_for,
                &[],
                &mut on_build,
            )
            .await
        };
        on_event(ImageEvent::BuildFinished {
            variant,
            outcome: outcome.as_ref().ok(),
        });
        let outcome = outcome?;
        let local = outcome.tags[0].clone();
        let pushed = match buildkit {
            true => self.push_image(&outcome.image_id, on_event).await.map(Some),
            false => Ok(None),
        };
        // No image is kept of this stage (its layers stay in the build cache).
        let removed = crate::infra::docker::registry::untag(self.engine, &local).await;
        let pushed = pushed?;
        removed?;
        Ok(pushed)
    }

    /// Tag `image_id` as `REGISTRY/REPO:install-cache`, push it and remove that tag here.
    async fn push_image(
        &self,
        image_id: &str,
        on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
    ) -> Result<String, Failure> {
        use crate::infra::docker::registry as reg;
        let tag = crate::core::image_ref::INSTALL_CACHE_TAG;
        reg::tag(self.engine, image_id, &self.repo.name, tag).await?;
        let mut on_progress = |progress| {
            on_event(ImageEvent::Push {
                variant: INSTALL_STAGE,
                progress,
            })
        };
        let pushed = reg::push(
            self.engine,
            &self.repo.name,
            tag,
            self.creds,
            &mut on_progress,
        )
        .await;
        let removed = reg::untag(self.engine, &self.repo.tagged(tag)).await;
        let digest = pushed?;
        removed?;
        Ok(digest)
    }
}

/// Where the ids of the images envbuild built for one build on this engine are recorded
/// (`infra::built_images`): only an image with one of them is taken as that build, never one
/// that merely carries its labels. No record without a cache folder or an engine id: then
/// every image is built.
struct BuildRecord<'a> {
    dir: Option<&'a Path>,
    key: Option<String>,
}

impl<'a> BuildRecord<'a> {
    fn of(opts: &'a ImageOptions, engine_id: Option<&str>, req: &BuildRequest) -> Self {
        let tag = req.primary_tag();
        let key = engine_id.map(|engine_id| {
            crate::core::built::BuildKey {
                engine_id,
                tag: &tag,
                lock_sha256: &req.lock_hash,
                content_sha256: req.content_sha256.as_deref(),
                variant: &req.variant,
                platform: req.platform.as_deref(),
            }
            .digest()
        });
        BuildRecord {
            dir: opts.cache_dir.as_deref(),
            key,
        }
    }

    fn load(&self) -> Vec<String> {
        match (self.dir, &self.key) {
            (Some(dir), Some(key)) => crate::infra::built_images::load(dir, key),
            _ => Vec::new(),
        }
    }

    fn add(&self, image_id: &str) {
        if let (Some(dir), Some(key)) = (self.dir, &self.key) {
            // A record that cannot be written costs only a rebuild next time.
            let _ = crate::infra::built_images::record(dir, key, image_id);
        }
    }
}

/// What a verdict on this engine rests on besides the image and the test itself.
struct CacheScope {
    /// `docker info`'s ID.
    engine_id: String,
    /// The driver and GPUs' UUIDs (`GpuIdentity::key`) in `gpu` mode.
    gpus: String,
}

/// The engine's id (`engine_id`) and, in `gpu` mode, the driver and GPUs its containers get.
/// `None` (no verdict is reused or stored) when the engine runs elsewhere in `gpu` mode: that
/// machine's driver and GPUs cannot be probed from here.
async fn cache_scope(
    engine: &Engine,
    engine_id: String,
    smoke: &SmokeSettings,
) -> Option<CacheScope> {
    let gpus = match smoke.mode() {
        // No GPU is requested: the verdict cannot depend on the driver or the boards.
        Mode::Cpu => "no GPU requested".to_string(),
        Mode::Gpu => docker::host_gpu_identity(engine).await?.key(),
    };
    Some(CacheScope { engine_id, gpus })
}

/// The smoke test of one built variant.
struct ImageTest<'a> {
    engine: &'a Engine,
    variant: &'a str,
    build: &'a BuildOutcome,
    expectations: Option<&'a Expectations>,
    opts: &'a ImageOptions,
    /// `None`: the cache is not used for this run.
    scope: Option<&'a CacheScope>,
}

impl ImageTest<'_> {
    /// Test the image, or reuse its passing verdict. `Err` only for an interruption, which
    /// ends the whole run at once.
    async fn run(
        &self,
        interrupt: Interrupt,
        on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
    ) -> Result<SmokeResult, Failure> {
        let (variant, tag) = (self.variant, self.build.tags[0].as_str());
        let expectations = sent_expectations(self.expectations.cloned(), &self.opts.smoke);
        let key = self.verdict_key(expectations.as_ref());
        if let Some(reused) = key.as_deref().and_then(|k| self.reusable(k)) {
            on_event(ImageEvent::SmokeReused { variant, tag });
            return Ok(SmokeResult {
                name: tag.to_string(),
                outcome: Ok(reused),
                reused: true,
            });
        }
        let smoke_settings = &self.opts.smoke;
        on_event(ImageEvent::SmokeStarted {
            variant,
            tag,
            mode: smoke_settings.mode(),
        });
        let image = &self.build.image_id;
        let outcome = smoke(self.engine, image, expectations, smoke_settings, interrupt).await;
        if let (Ok(o), Some(dir), Some(key)) = (&outcome, self.opts.cache_dir.as_deref(), &key) {
            if o.report.passed(o.exit_code) {
                let verdict = StoredVerdict {
                    exit_code: o.exit_code,
                    report: o.report.clone(),
                };
                // A cache that cannot be written only costs a rerun next time.
                let _ = verdict_cache::store(dir, key, &verdict);
            }
        }
        if let Err(f) = &outcome {
            if f.diagnostics.iter().any(|d| d.code == codes::INTERRUPTED) {
                return Err(f.clone());
            }
        }
        Ok(SmokeResult {
            name: tag.to_string(),
            outcome,
            reused: false,
        })
    }

    /// The cache key of this run, `None` when the cache is not used (see [`cache_scope`]).
    fn verdict_key(&self, expectations: Option<&Expectations>) -> Option<String> {
        let scope = self.scope?;
        Some(
            VerdictKey {
                engine_id: &scope.engine_id,
                gpus: &scope.gpus,
                image_id: &self.build.image_id,
                mode: self.opts.smoke.mode().as_str(),
                expectations,
                shm_bytes: self.opts.smoke.shm_bytes,
            }
            .digest(),
        )
    }

    /// A passing verdict remembered for this very image, when the build was skipped and
    /// `--retest` was not asked for.
    fn reusable(&self, key: &str) -> Option<SmokeOutcome> {
        if !self.build.skipped || self.opts.retest {
            return None;
        }
        let v = verdict_cache::load(self.opts.cache_dir.as_deref()?, key)?;
        v.report.passed(v.exit_code).then_some(SmokeOutcome {
            report: v.report,
            exit_code: v.exit_code,
            stderr_tail: String::new(),
            elapsed: Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's CA bundle fills the rendered slot only when the Dockerfile copies it; the
    /// spec's key comes before the variables; an unusable bundle is CA_BUNDLE_INVALID.
    #[test]
    fn the_ca_bundle_fills_the_slot_the_dockerfile_copies() {
        let text = include_str!("../../specs/torch29-cu128/envbuild.lock");
        let mut lock = Lock::from_toml(text).expect("lock");
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("envbuild.toml");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(dir.path().join("host.pem"), pem).unwrap();
        std::fs::create_dir(dir.path().join("certs")).unwrap();
        std::fs::write(dir.path().join("certs/team.pem"), format!("# team\n{pem}")).unwrap();
        let host = dir.path().join("host.pem").to_string_lossy().into_owned();
        let env = |k: &str| (k == "SSL_CERT_FILE").then(|| host.clone());
        let slot = crate::core::render::CA_BUNDLE_FILE;
        let fresh = |lock: &Lock| {
            rendered_image(lock, &["runtime".into()], None, &spec, &Default::default()).unwrap()
        };

        let mut r = fresh(&lock);
        assert!(!String::from_utf8_lossy(&r.files[slot]).contains("BEGIN CERTIFICATE"));
        let origin = add_ca_bundle(&mut r, &lock, &spec, env).unwrap().unwrap();
        assert!(origin.starts_with("SSL_CERT_FILE"), "{origin}");
        assert_eq!(r.files[slot], pem.as_bytes());

        let mut r = fresh(&lock);
        assert_eq!(add_ca_bundle(&mut r, &lock, &spec, |_| None).unwrap(), None);

        lock.image.ca_bundle = Some("certs/team.pem".into());
        let mut r = fresh(&lock);
        let origin = add_ca_bundle(&mut r, &lock, &spec, env).unwrap().unwrap();
        assert!(origin.starts_with("[image] ca-bundle"), "{origin}");
        assert!(String::from_utf8_lossy(&r.files[slot]).starts_with("# team"));

        // A Dockerfile that does not copy the slot (a --templates override) gets nothing.
        let mut r = fresh(&lock);
        r.files
            .insert("Dockerfile".into(), b"FROM x AS runtime\n".to_vec());
        assert_eq!(add_ca_bundle(&mut r, &lock, &spec, env).unwrap(), None);

        std::fs::write(dir.path().join("certs/team.pem"), "no certificate").unwrap();
        let mut r = fresh(&lock);
        let e = add_ca_bundle(&mut r, &lock, &spec, env).unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::CA_BUNDLE_INVALID);
    }

    /// A conda Dockerfile (closure or not) copies the slot into its throwaway install stage, so
    /// the conda build gets the bundle too (issue 13 item 8 had left conda images without it).
    #[test]
    fn a_conda_image_gets_the_ca_bundle() {
        let text = include_str!("../../tests/fixtures/conda-closure/envbuild.lock");
        let lock = Lock::from_toml(text).expect("lock");
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("envbuild.toml");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(dir.path().join("host.pem"), pem).unwrap();
        let host = dir.path().join("host.pem").to_string_lossy().into_owned();
        let env = |k: &str| (k == "REQUESTS_CA_BUNDLE").then(|| host.clone());
        let slot = crate::core::render::CA_BUNDLE_FILE;
        let mut r =
            rendered_image(&lock, &["runtime".into()], None, &spec, &Default::default()).unwrap();
        let origin = add_ca_bundle(&mut r, &lock, &spec, env).unwrap().unwrap();
        assert!(origin.starts_with("REQUESTS_CA_BUNDLE"), "{origin}");
        assert_eq!(r.files[slot], pem.as_bytes());
        // A conda lock without a closure solves in the same throwaway stage, with the bundle.
        let plain = include_str!("../../specs/conda-forge-torch210/envbuild.lock");
        let plain = Lock::from_toml(plain).expect("lock");
        let mut r = rendered_image(
            &plain,
            &["runtime".into()],
            None,
            &spec,
            &Default::default(),
        )
        .unwrap();
        assert!(add_ca_bundle(&mut r, &plain, &spec, env).unwrap().is_some());
        assert_eq!(r.files[slot], pem.as_bytes());
    }

    /// With `--push`, an image's builds read `VARIANT-cache` then `install-cache` (after the
    /// explicit sources, once each) where the Dockerfile BuildKit builds has an `install` stage
    /// (a `--templates` Dockerfile such as the classic form); the embedded BuildKit form makes
    /// the environment in `base` itself, wheel and conda images alike, so only the former;
    /// without `--push`, only `--cache-from`.
    #[test]
    fn push_reads_the_install_cache_only_where_there_is_an_install_stage() {
        let lock_of = |spec: &str| {
            let path = format!("{}/specs/{spec}/envbuild.lock", env!("CARGO_MANIFEST_DIR"));
            Lock::from_toml(&std::fs::read_to_string(path).unwrap()).expect("lock")
        };
        let spec = Path::new("envbuild.toml");
        let wheel = rendered_image(
            &lock_of("torch29-cu128"),
            &[],
            None,
            spec,
            &Default::default(),
        )
        .unwrap();
        let conda = rendered_image(
            &lock_of("conda-forge-torch210"),
            &[],
            None,
            spec,
            &Default::default(),
        )
        .unwrap();
        assert!(!has_install_stage(&wheel));
        assert!(!has_install_stage(&conda));
        // One Dockerfile only (an override that does not use `buildkit`): the classic form.
        let mut staged = wheel.clone();
        let bk = format!(
            "{}{}",
            staged.dockerfile,
            crate::core::render::BUILDKIT_SUFFIX
        );
        assert!(staged.files.remove(&bk).is_some());
        assert!(has_install_stage(&staged));
        let repo = Repository::parse("127.0.0.1:5000/team/envs").unwrap();
        let mut opts = ImageOptions {
            variants: vec!["runtime".into()],
            tags: vec![],
            rebuild: false,
            retest: false,
            smoke: SmokeSettings {
                gpus: false,
                timeout: Duration::from_secs(1),
                shm_bytes: 0,
                run_id: "unit".into(),
            },
            cache_dir: None,
            pull: Default::default(),
            push: Some(repo),
            cache_from: vec!["127.0.0.1:5000/team/envs:install-cache".into()],
            build_args: BTreeMap::new(),
        };
        let from = |r: &RenderedImage, o: &ImageOptions| build_request(r, o, "dev").cache.from;
        assert_eq!(
            from(&staged, &opts),
            [
                "127.0.0.1:5000/team/envs:install-cache",
                "127.0.0.1:5000/team/envs:dev-cache"
            ]
        );
        opts.cache_from.clear();
        assert_eq!(
            from(&staged, &opts),
            [
                "127.0.0.1:5000/team/envs:dev-cache",
                "127.0.0.1:5000/team/envs:install-cache"
            ]
        );
        for r in [&wheel, &conda] {
            assert_eq!(from(r, &opts), ["127.0.0.1:5000/team/envs:dev-cache"]);
        }
        assert!(build_request(&conda, &opts, "dev").cache.inline);
        opts.push = None;
        assert!(from(&wheel, &opts).is_empty());
        assert_eq!(
            crate::core::image_ref::INSTALL_CACHE_TAG,
            crate::core::image_ref::cache_tag(INSTALL_STAGE)
        );
    }

    #[test]
    fn image_names_match_the_run_snippets() {
        assert_eq!(image_name("Torch GPU env"), "envbuild/torch-gpu-env");
        assert!(crate::core::image_ref::is_image_tag(&format!(
            "{}:runtime-0123456789ab",
            image_name("!!!")
        )));
    }
}
