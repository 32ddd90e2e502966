//! Building one image variant through the engine: the skip of an image the caller recorded
//! building (never one that only carries envbuild's labels), the base-image
//! check (and pull), the choice of builder, the streamed build with step/cache accounting,
//! error mapping and tagging. The request, event, outcome and log types both builders share
//! are here; the classic builder's stream is [`legacy`], BuildKit's [`buildkit`], the choice
//! between them [`builder`]. Performs network I/O against the engine; progress is handed to a
//! caller's callback so this module never writes to the terminal itself.

pub mod builder;
pub mod buildkit;
pub mod legacy;

use super::context::{build_context, label_target_stage, parse_dockerfile, BuildContext};
use super::errors::{base_in_message, base_missing, BaseMissing, BaseSeen};
use super::limits::{self, Call};
use super::{codes, images, short_error, Engine};
use crate::core::built::Reuse;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_ref::{is_image_tag, pull_parts};
use crate::core::render::{LABEL_LOCK_SHA256, LABEL_LOCK_SUMMARY, LABEL_VARIANT};
use crate::core::resolve::codes::BASE_HAS_NO_PYTHON;
use bollard::query_parameters::TagImageOptionsBuilder;
use builder::Builder;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The label naming what an image was built from (`BuildRequest::content_sha256`).
pub const LABEL_CONTENT_SHA256: &str = "dev.envbuild.content-sha256";

/// Everything needed to build one variant from already-rendered files.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// Rendered files by context-relative path (`Dockerfile`, `environment.yml`, `envbuild/...`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Which of `files` is the Dockerfile.
    pub dockerfile: String,
    /// The Dockerfile stage to build (`runtime`, `dev`).
    pub target: String,
    /// Image repository name (`myenv`, `registry.example/team/myenv`).
    pub image_name: String,
    /// Variant name, used in the tag and the `dev.envbuild.variant` label.
    pub variant: String,
    /// The lock's sha256, 64 lower-case hex.
    pub lock_hash: String,
    /// sha256 of everything the build is made of (the rendered files the context is cut from,
    /// templates included, and the lock), when known: the tag and the skip are keyed on it
    /// (`app::image::content_sha256`); `None` keys them on the lock alone.
    pub content_sha256: Option<String>,
    /// Compact JSON summary of the lock for the `dev.envbuild.lock-summary` label.
    pub summary: String,
    /// Extra tags (`name:tag`) to put on the image.
    pub extra_tags: Vec<String>,
    /// Extra labels (`org.opencontainers.image.*`).
    pub extra_labels: BTreeMap<String, String>,
    /// Build even when the image at the primary tag is one the caller recorded building.
    pub rebuild: bool,
    /// Build args: the host's proxy settings (`infra::network::proxy_build_args`), which the
    /// engine keeps out of the image's history and config.
    pub build_args: BTreeMap<String, String>,
    /// The registry build cache (BuildKit only).
    pub cache: RegistryCache,
    /// The Docker platform to build for (`linux/arm64`, `core::platform::docker_platform`),
    /// sent to either builder as the Engine API's `platform`; `None`: the engine's own.
    pub platform: Option<String>,
    /// Appended to the primary tag: a fleet's platform image carries its architecture
    /// (`-arm64`, `core::platform::tag_suffix`); empty for a single-platform lock.
    pub tag_suffix: String,
}

/// A registry build cache: images whose inline cache BuildKit reads (`cachefrom`), and whether
/// the built image carries one itself (`BUILDKIT_INLINE_CACHE=1`), for a later build elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryCache {
    /// `REGISTRY/REPO:TAG` references, in order.
    pub from: Vec<String>,
    /// Store BuildKit's cache metadata in the image (it is pushed with it).
    pub inline: bool,
    /// Sources asked for that the registry lacks, with why (`REF: not in the registry`); kept
    /// out of `from`, since BuildKit's inline cache export fails on a missing import.
    pub missing: Vec<String>,
}

impl BuildRequest {
    /// `NAME:VARIANT-<first 12 hex of the content hash>` (of the lock hash without one).
    pub fn primary_tag(&self) -> String {
        let id = self.content_sha256.as_deref().unwrap_or(&self.lock_hash);
        format!(
            "{}:{}",
            self.image_name,
            crate::core::image_ref::platform_tag(&self.variant, id, &self.tag_suffix)
        )
    }

    /// Every label the image gets.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = self.extra_labels.clone();
        if let Some(c) = &self.content_sha256 {
            l.insert(LABEL_CONTENT_SHA256.into(), c.clone());
        }
        l.insert(LABEL_LOCK_SHA256.into(), self.lock_hash.clone());
        l.insert(LABEL_VARIANT.into(), self.variant.clone());
        l.insert(LABEL_LOCK_SUMMARY.into(), self.summary.clone());
        l
    }
}

/// Progress as the build goes, for the caller to display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildEvent {
    /// The image envbuild built for this very build on this engine is at its tag (its id is
    /// in the caller's record); nothing is built.
    Skipped { tag: String, image_id: String },
    /// An image is at the build's tag that envbuild has no record of building for this build
    /// on this engine (whatever its labels say): it is not trusted, the build runs over it.
    NotBuiltHere { tag: String, image_id: String },
    /// The context is ready to send.
    Context { bytes: usize, files: usize },
    /// `Step N/M : INSTRUCTION` began.
    Step {
        index: usize,
        total: usize,
        instruction: String,
    },
    /// The current step was answered from the layer cache.
    Cached,
    /// A line of the build's own output (RUN output, engine notes).
    Output(String),
    /// Which builder builds the image: `BuildKit`, or `legacy builder: <why>`.
    Builder(String),
    /// The registry caches the build reads (`used`; empty with the legacy builder, which
    /// reads none) and those asked for but absent; said only when some were asked for.
    CacheFrom {
        used: Vec<String>,
        missing: Vec<String>,
    },
    /// The base `image` is being pulled (`--pull`); one message of the engine's progress.
    Pull {
        image: String,
        progress: crate::infra::docker::registry::Progress,
    },
}

/// When to pull a `FROM` image (`--pull`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    /// Only when the engine lacks it (docker build's behaviour).
    #[default]
    Missing,
    /// Every time, so a moved tag is seen (a digest never moves).
    Always,
    /// Never: a missing base is `BASE_IMAGE_MISSING` (offline machines).
    Never,
}

/// What a build produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOutcome {
    pub image_id: String,
    /// The primary tag first, then the extra tags.
    pub tags: Vec<String>,
    /// True when an existing image was reused.
    pub skipped: bool,
    /// The id of an image found at the primary tag that envbuild had no record of building
    /// (so it was built over, [`BuildEvent::NotBuiltHere`]).
    pub not_built_here: Option<String>,
    pub steps: usize,
    pub cached_steps: usize,
    pub context_bytes: usize,
    pub context_sha256: String,
    pub elapsed: Duration,
}

/// How many output lines of a failing step are kept for the error message.
const TAIL_LINES: usize = 15;

/// Messages the engine gives when a `FROM` image would have to come from a registry.
fn looks_like_pull_failure(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "pull access denied",
        "no such host",
        "dial tcp",
        "lookup ",
        "manifest unknown",
        "repository does not exist",
        "tls handshake timeout",
        "no such image",
    ]
    .iter()
    .any(|p| m.contains(p))
}

fn tail_text(tail: &VecDeque<String>) -> String {
    tail.iter()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Build one variant; nothing is pulled, and no image at its tag is reused (no record of
/// envbuild's own builds is given: see [`build_pulling`]).
pub async fn build(
    engine: &Engine,
    req: &BuildRequest,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<BuildOutcome, Failure> {
    build_pulling(engine, req, PullPolicy::Never, &|_| Ok(None), &[], on_event).await
}

/// Where the credentials of a registry host come from (`infra::registry_auth::for_host`, or a
/// stand-in in tests).
pub type CredsFor<'a> = dyn Fn(&str) -> Result<Option<crate::infra::registry_auth::Credentials>, Failure>
    + Send
    + Sync
    + 'a;

/// Build one variant, pulling the `FROM` images as `pull` says, with credentials from `creds`;
/// or, without `rebuild`, reuse the image at its primary tag when its id is one of `recorded`
/// (the ids envbuild recorded building for this very build on this engine,
/// `infra::built_images`). Labels decide nothing: anyone can copy them onto any image.
pub async fn build_pulling(
    engine: &Engine,
    req: &BuildRequest,
    pull: PullPolicy,
    creds: &CredsFor<'_>,
    recorded: &[String],
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<BuildOutcome, Failure> {
    let started = Instant::now();
    let tags = checked_tags(req)?;
    let primary = tags[0].clone();
    let (dockerfile, context) = labelled_context(req, &req.dockerfile)?;
    let outcome = |image_id: String,
                   log: Option<&BuildLog>,
                   context: &BuildContext,
                   not_built_here: Option<String>| BuildOutcome {
        image_id,
        tags: tags.clone(),
        skipped: log.is_none(),
        not_built_here,
        steps: log.map_or(0, |l| l.steps),
        cached_steps: log.map_or(0, |l| l.cached),
        context_bytes: context.tar.len(),
        context_sha256: context.sha256.clone(),
        elapsed: started.elapsed(),
    };
    let not_built_here = match reuse(engine, &primary, recorded, req.rebuild, on_event).await? {
        Reuse::Reuse(id) => {
            tag_extra(engine, &id, &req.extra_tags).await?;
            return Ok(outcome(id, None, &context, None));
        }
        Reuse::Build { untrusted } => untrusted,
    };
    // Chosen only now, so the no-op above costs no extra round trip to the engine.
    let builder = builder::choose(engine).await?;
    let dockerfile_name = dockerfile_for(req, &builder);
    let context = if dockerfile_name == req.dockerfile {
        context
    } else {
        labelled_context(req, &dockerfile_name)?.1
    };
    // Checking the bases first gives a precise error at once instead of a failed pull later;
    // what the engine had is kept for the message of a pull that fails during the build.
    let mut bases = Vec::new();
    for base in parse_dockerfile(&dockerfile).base_images {
        let info = images::inspect(engine, &base).await?;
        let present = info.is_some();
        bases.push(BaseSeen {
            name: base.clone(),
            platform: info.and_then(|i| i.platform),
        });
        match pull {
            PullPolicy::Never if !present => {
                return Err(base_missing(&base, &engine.host, BaseMissing::NotPulled))
            }
            PullPolicy::Missing if !present => pull_base(engine, &base, creds, on_event).await?,
            PullPolicy::Always => pull_base(engine, &base, creds, on_event).await?,
            _ => {}
        }
    }
    on_event(BuildEvent::Context {
        bytes: context.tar.len(),
        files: context.files.len(),
    });
    let wheels = match &builder {
        Builder::BuildKit => wheels_arg(engine, req, &dockerfile_name).await?,
        Builder::Legacy(_) => None,
    };
    on_event(BuildEvent::Builder(match (&builder, wheels) {
        (Builder::BuildKit, Some("engine")) => {
            format!("BuildKit (`{dockerfile_name}`), the locked wheels downloaded by the engine")
        }
        (Builder::BuildKit, _) => format!("BuildKit (`{dockerfile_name}`)"),
        (Builder::Legacy(why), _) => format!("legacy builder: {why}"),
    }));
    if !req.cache.from.is_empty() || !req.cache.missing.is_empty() {
        on_event(BuildEvent::CacheFrom {
            used: match &builder {
                Builder::BuildKit => req.cache.from.clone(),
                Builder::Legacy(_) => Vec::new(),
            },
            missing: req.cache.missing.clone(),
        });
    }
    let mut log = match builder {
        Builder::BuildKit => {
            let df = dockerfile_name.as_str();
            let auth = cache_credentials(&req.cache.from, creds);
            let target = (df, wheels);
            buildkit::stream(engine, req, target, auth, &primary, &context, on_event).await?
        }
        Builder::Legacy(_) => legacy::stream(engine, req, &primary, &context, on_event).await?,
    };
    // An engine that announced BuildKit but refused its session (a proxy in front of the
    // socket, a daemon built without it) gets the classic builder, said so.
    if let Some(why) = buildkit::refused(&log) {
        on_event(BuildEvent::Builder(format!("legacy builder: {why}")));
        let (_, plain) = labelled_context(req, &req.dockerfile)?;
        log = legacy::stream(engine, req, &primary, &plain, on_event).await?;
        let image_id = built_image(engine, req, &primary, &log, &bases).await?;
        tag_extra(engine, &image_id, &req.extra_tags).await?;
        return Ok(outcome(image_id, Some(&log), &plain, not_built_here));
    }
    let image_id = built_image(engine, req, &primary, &log, &bases).await?;
    tag_extra(engine, &image_id, &req.extra_tags).await?;
    Ok(outcome(image_id, Some(&log), &context, not_built_here))
}

/// The `ENVBUILD_WHEELS` build arg of a BuildKit build of `dockerfile` ([`builder::wheels_for`]):
/// the engine's platform is asked only when it decides.
async fn wheels_arg(
    engine: &Engine,
    req: &BuildRequest,
    dockerfile: &str,
) -> Result<Option<&'static str>, Failure> {
    let forced = builder::wheels_forced()?;
    let text = req
        .files
        .get(dockerfile)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    let own = match (forced, &req.platform) {
        (None, Some(_)) if text.contains(builder::WHEELS_ARG) => {
            images::engine_platform(engine).await
        }
        _ => None,
    };
    Ok(builder::wheels_for(
        &text,
        forced,
        req.platform.as_deref(),
        own.as_deref(),
    ))
}

/// The credentials BuildKit's session hands out while the build reads its registry caches
/// (`cachefrom`), keyed as BuildKit asks for them: Docker Hub as `registry-1.docker.io`, any
/// other registry by its host. Without them BuildKit reads a private cache anonymously, fails,
/// and says so only in its own debug log: every layer is built again. `None` when no cache
/// source has credentials; a credential store that fails leaves that source anonymous, as the
/// check that kept it did ([`BuildRequest::cache`]).
fn cache_credentials(
    sources: &[String],
    creds: &CredsFor<'_>,
) -> Option<std::collections::HashMap<String, bollard::auth::DockerCredentials>> {
    let mut map = std::collections::HashMap::new();
    for source in sources {
        let host = crate::core::image_ref::host_of(source);
        let key = match host.as_str() {
            crate::core::image_ref::DOCKER_HUB => crate::core::image_ref::DOCKER_HUB_REGISTRY,
            other => other,
        };
        if map.contains_key(key) {
            continue;
        }
        let found = creds(&host).ok().flatten();
        if let Some(c) = super::registry::bollard_creds(found.as_ref()) {
            map.insert(key.to_string(), c);
        }
    }
    (!map.is_empty()).then_some(map)
}

async fn pull_base(
    engine: &Engine,
    base: &str,
    creds: &CredsFor<'_>,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<(), Failure> {
    let creds = creds(&crate::core::image_ref::host_of(base))?;
    let mut on_progress = |progress| {
        on_event(BuildEvent::Pull {
            image: base.to_string(),
            progress,
        })
    };
    crate::infra::docker::registry::pull(engine, base, creds.as_ref(), &mut on_progress).await
}

/// The image's tags, primary first, each checked: a bad tag would only be refused after the
/// whole build. Also refuses a lock hash that is not 64 hex digits.
fn checked_tags(req: &BuildRequest) -> Result<Vec<String>, Failure> {
    if req.lock_hash.len() != 64 || !req.lock_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::bug(format!(
            "lock hash `{}` is not 64 hex digits",
            req.lock_hash
        )));
    }
    let tags: Vec<String> = std::iter::once(req.primary_tag())
        .chain(req.extra_tags.iter().cloned())
        .collect();
    if let Some(tag) = tags.iter().find(|t| !is_image_tag(t)) {
        return Err(Failure::usage(
            format!("`{tag}` is not a valid image tag"),
            Some(
                "a tag is `name[:tag]`: the name in lower case letters, digits and `._-/` \
                 (a registry host may carry a port), the tag up to 128 of `A-Za-z0-9_.-`"
                    .into(),
            ),
        ));
    }
    Ok(tags)
}

/// The Dockerfile's text and the build context, with envbuild's labels added to the target
/// stage where the Dockerfile does not set them already.
fn labelled_context(
    req: &BuildRequest,
    dockerfile: &str,
) -> Result<(String, BuildContext), Failure> {
    let df_bytes = req.files.get(dockerfile).ok_or_else(|| {
        Failure::bug(format!(
            "the rendered files have no `{dockerfile}` to build from"
        ))
    })?;
    let df_text = String::from_utf8_lossy(df_bytes).into_owned();
    // Labels the Dockerfile already sets (the rendered one sets envbuild's own) are not added
    // again: each added label would only cost a build step.
    let missing: BTreeMap<String, String> = req
        .labels()
        .into_iter()
        .filter(|(k, _)| !df_text.contains(&format!("{k}=")))
        .collect();
    let mut files = req.files.clone();
    files.insert(
        dockerfile.to_string(),
        label_target_stage(&df_text, &req.target, &missing).into_bytes(),
    );
    let context = build_context(&files, dockerfile)?;
    Ok((df_text, context))
}

/// The Dockerfile to build: with BuildKit its BuildKit form (`Dockerfile.buildkit`, cache and
/// bind mounts) when the rendered files have one, else the plain one every builder reads.
fn dockerfile_for(req: &BuildRequest, builder: &Builder) -> String {
    let bk = format!("{}{}", req.dockerfile, crate::core::render::BUILDKIT_SUFFIX);
    match builder {
        Builder::BuildKit if req.files.contains_key(&bk) => bk,
        _ => req.dockerfile.clone(),
    }
}

/// Whether the image at `primary` stands for this build (`core::built::decide`: only an id in
/// `recorded`), said as [`BuildEvent::Skipped`] or [`BuildEvent::NotBuiltHere`].
async fn reuse(
    engine: &Engine,
    primary: &str,
    recorded: &[String],
    rebuild: bool,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<Reuse, Failure> {
    let found = images::inspect(engine, primary).await?.map(|i| i.id);
    let decided = crate::core::built::decide(found.as_deref(), recorded, rebuild);
    let tag = primary.to_string();
    match &decided {
        Reuse::Reuse(id) => on_event(BuildEvent::Skipped {
            tag,
            image_id: id.clone(),
        }),
        Reuse::Build {
            untrusted: Some(id),
        } => on_event(BuildEvent::NotBuiltHere {
            tag,
            image_id: id.clone(),
        }),
        Reuse::Build { untrusted: None } => {}
    }
    Ok(decided)
}

/// The `ENGINE_TIMEOUT` of a build stream that stayed silent past the idle limit, naming the
/// The `ENGINE_TIMEOUT` of a build stream that stayed silent past the idle limit, naming the
/// step it had reached (`builder` qualifies the build, e.g. " with BuildKit").
fn build_stalled(engine: &Engine, primary: &str, builder: &str, log: &BuildLog) -> Failure {
    let doing = match &log.step {
        Some((n, total, instruction)) => {
            format!("building `{primary}`{builder} (step {n}/{total}: {instruction})")
        }
        None => format!("building `{primary}`{builder} (sending the context)"),
    };
    let idle = engine.limits.of(Call::BuildIdle);
    limits::timed_out(&engine.host, &doing, Call::BuildIdle, idle)
}

/// The id of the image the build made, checked against the lock; or why there is none.
/// `bases` is what the engine had of the Dockerfile's bases before the build.
async fn built_image(
    engine: &Engine,
    req: &BuildRequest,
    primary: &str,
    log: &BuildLog,
    bases: &[BaseSeen],
) -> Result<String, Failure> {
    if let Some(msg) = &log.engine_message {
        // A base the engine has for another platform only is pulled by BuildKit: the engine's
        // own platform says which copy it wanted.
        let want = if bases.iter().any(|b| b.platform.is_some()) && looks_like_pull_failure(msg) {
            images::engine_platform(engine).await
        } else {
            None
        };
        let failed = FailedStep {
            step: log.step.as_ref(),
            tail: &log.tail,
            bases,
            platform: want.as_deref(),
        };
        return Err(step_failure(msg, &failed, &engine.host));
    }
    let info = images::inspect(engine, primary).await?;
    let lock_label = info.as_ref().and_then(|i| i.labels.get(LABEL_LOCK_SHA256));
    match info.as_ref() {
        Some(_) if log.built_id.is_some() && lock_label != Some(&req.lock_hash) => {
            Err(Failure::one(
                Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!(
                        "the image built as `{primary}` has label \
                         {LABEL_LOCK_SHA256}={lock_label:?}, not this lock's hash",
                    ),
                )
                .with_hint("the Dockerfile (or a --templates override) sets that label wrong"),
            ))
        }
        Some(i) if lock_label == Some(&req.lock_hash) => {
            if log.built_id.as_ref().is_some_and(|b| b != &i.id) {
                return Err(Failure::one(Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!("the build finished but `{primary}` names another image"),
                )));
            }
            Ok(i.id.clone())
        }
        _ => {
            let why = log
                .transport_error
                .as_deref()
                .unwrap_or("the engine ended the build without an image");
            Err(Failure::one(
                Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!("building `{primary}` failed: {why}"),
                )
                .with_hint("run again with -v for the full build log"),
            ))
        }
    }
}

/// The build's output as it streams: steps, cache hits, the failing step's last lines.
#[derive(Default)]
struct BuildLog {
    step: Option<(usize, usize, String)>,
    steps: usize,
    cached: usize,
    tail: VecDeque<String>,
    engine_message: Option<String>,
    transport_error: Option<String>,
    built_id: Option<String>,
    /// BuildKit's status stream said something (so BuildKit itself works).
    buildkit_status: bool,
    /// Text after the last newline, waiting for the rest of its line.
    pending: String,
}

/// Where a build failed: its step, the step's last output lines, the bases as the engine had
/// them before the build, and the engine's own platform (when a base was there for another).
struct FailedStep<'a> {
    step: Option<&'a (usize, usize, String)>,
    tail: &'a VecDeque<String>,
    bases: &'a [BaseSeen],
    platform: Option<&'a str>,
}

/// A failed pull of a base during the build: the base from the `FROM` step, else the one the
/// engine's message names (BuildKit reports no step for its metadata pulls), said with the
/// platform the engine had it for when that is not the one the build needs.
fn base_pull_failure(msg: &str, at: &FailedStep<'_>, host: &str) -> Option<Failure> {
    let instr = at.step.map_or("", |(_, _, i)| i.as_str());
    let from_step = instr
        .to_ascii_uppercase()
        .starts_with("FROM")
        .then(|| {
            instr
                .split_whitespace()
                .skip(1)
                .find(|w| !w.starts_with("--"))
        })
        .flatten();
    if !(from_step.is_some() || at.step.is_none()) || !looks_like_pull_failure(msg) {
        return None;
    }
    let seen = match from_step {
        Some(name) => at
            .bases
            .iter()
            .find(|b| b.name == name)
            .cloned()
            .or(Some(BaseSeen {
                name: name.to_string(),
                platform: None,
            })),
        None => base_in_message(msg, at.bases).cloned(),
    }?;
    let os_arch = |p: &str| p.split('/').take(2).collect::<Vec<_>>().join("/");
    let why = match (seen.platform.as_deref(), at.platform) {
        (Some(have), Some(want)) if os_arch(have) != os_arch(want) => BaseMissing::OtherPlatform {
            have,
            want,
            engine_said: msg,
        },
        _ => BaseMissing::PullFailed(msg),
    };
    Some(base_missing(&seen.name, host, why))
}

fn step_failure(msg: &str, at: &FailedStep<'_>, host: &str) -> Failure {
    let msg = msg.trim();
    let (step, tail) = (at.step, at.tail);
    let where_ = match step {
        Some((n, m, i)) => format!("step {n}/{m} `{i}`"),
        None => "the build".to_string(),
    };
    if let Some(f) = base_pull_failure(msg, at, host) {
        return f;
    }
    // The install stage's own refusal (`envbuild/python-env.sh`) is a fact about the base.
    if tail
        .iter()
        .any(|l| l.contains("envbuild: BASE_HAS_NO_PYTHON"))
    {
        return Failure::one(
            Diagnostic::error(
                BASE_HAS_NO_PYTHON,
                format!("{where_} failed: the base image has no python3 (or python) on its PATH"),
            )
            .with_hint(
                "use a base with Python (leave [image] base out for the table's), or build one \
                 FROM this image that installs python3 with python3-venv or python3-pip",
            ),
        );
    }
    let output = if tail.is_empty() {
        String::new()
    } else {
        format!("\n  last output lines:\n{}", tail_text(tail))
    };
    // Classic: "returned a non-zero code: N"; BuildKit (20.10): "executor failed running
    // [...]: exit code: N"; newer BuildKit: "did not complete successfully: exit code: N".
    let code = if msg.contains("returned a non-zero code") || msg.contains("exit code:") {
        codes::BUILD_STEP_FAILED
    } else {
        codes::BUILD_FAILED
    };
    Failure::one(
        Diagnostic::error(code, format!("{where_} failed: {msg}{output}")).with_hint(
            "fix the command (or the spec that renders it); -v shows the full build log",
        ),
    )
}

/// Put the extra tags on an image.
async fn tag_extra(engine: &Engine, image_id: &str, extra: &[String]) -> Result<(), Failure> {
    for tag in extra {
        let (repo, t) = pull_parts(tag);
        let opts = TagImageOptionsBuilder::default().repo(repo).tag(t).build();
        engine
            .call(
                Call::Short,
                || format!("tagging the image as `{tag}`"),
                engine.docker.tag_image(image_id, Some(opts)),
            )
            .await?
            .map_err(|e| {
                Failure::one(
                    Diagnostic::error(
                        codes::ENGINE_ERROR,
                        format!("cannot tag the image as `{tag}`: {}", short_error(&e)),
                    )
                    .with_hint("a tag is `name[:tag]` in lower case, e.g. `team/env:v1`"),
                )
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_credentials_are_keyed_as_buildkit_asks_for_them() {
        use crate::infra::registry_auth::Credentials;
        let creds = |host: &str| -> Result<Option<Credentials>, Failure> {
            match host {
                "ghcr.io" | "docker.io" => Ok(Some(Credentials {
                    username: format!("user-{host}"),
                    password: "pw".into(),
                    identity_token: None,
                    server: host.into(),
                    origin: "test".into(),
                })),
                "broken.example" => Err(Failure::bug("the helper failed")),
                _ => Ok(None),
            }
        };
        let sources = [
            "ghcr.io/team/envs:runtime-cache",
            "ghcr.io/team/envs:install-cache",
            "team/envs:runtime-cache",
            "127.0.0.1:5000/team/envs:runtime-cache",
            "broken.example/team/envs:runtime-cache",
        ]
        .map(String::from);
        let map = cache_credentials(&sources, &creds).expect("two registries have credentials");
        let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
        keys.sort();
        // Docker Hub under the host BuildKit's resolver asks for; no entry for a registry
        // without credentials or whose credential store failed.
        assert_eq!(keys, ["ghcr.io", "registry-1.docker.io"]);
        assert_eq!(map["ghcr.io"].username.as_deref(), Some("user-ghcr.io"));
        assert_eq!(map["registry-1.docker.io"].password.as_deref(), Some("pw"));
        let none = ["127.0.0.1:5000/x:runtime-cache".to_string()];
        assert!(cache_credentials(&none, &creds).is_none());
        assert!(cache_credentials(&[], &creds).is_none());
    }

    #[test]
    fn primary_tag_is_content_addressed() {
        let req = BuildRequest {
            content_sha256: None,
            files: BTreeMap::new(),
            dockerfile: "Dockerfile".into(),
            target: "runtime".into(),
            image_name: "myenv".into(),
            variant: "runtime".into(),
            lock_hash: "0123456789abcdef".repeat(4),
            summary: "{}".into(),
            extra_tags: vec![],
            extra_labels: BTreeMap::new(),
            rebuild: false,
            build_args: BTreeMap::new(),
            cache: Default::default(),
            platform: None,
            tag_suffix: String::new(),
        };
        assert_eq!(req.primary_tag(), "myenv:runtime-0123456789ab");
        assert_eq!(req.labels()[LABEL_VARIANT], "runtime");
    }

    #[test]
    fn failing_run_step_names_step_command_and_output() {
        let mut tail = VecDeque::new();
        tail.push_back("boom".to_string());
        let step = (2, 3, "RUN exit 3".into());
        let f = step_failure(
            "The command '/bin/sh -c exit 3' returned a non-zero code: 3",
            &at(Some(&step), &tail, &[]),
            "unix:///x",
        );
        let d = &f.diagnostics[0];
        assert_eq!(d.code, codes::BUILD_STEP_FAILED);
        assert!(d.message.contains("step 2/3 `RUN exit 3`"), "{}", d.message);
        assert!(d.message.contains("| boom"));
    }

    #[test]
    fn the_install_stages_refusal_is_base_has_no_python() {
        let mut tail = VecDeque::new();
        tail.push_back(
            "envbuild: BASE_HAS_NO_PYTHON: the base image has no python3 (or python) on its PATH"
                .to_string(),
        );
        let step = (4, 20, "RUN sh /tmp/envbuild/python-env.sh venv".into());
        let f = step_failure(
            "The command '/bin/sh -c sh /tmp/envbuild/python-env.sh venv' returned a non-zero code: 3",
            &at(Some(&step), &tail, &[]),
            "unix:///x",
        );
        assert_eq!(f.diagnostics[0].code, BASE_HAS_NO_PYTHON);
        assert!(f.diagnostics[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("python3"));
        // Another step's output that merely mentions the code is not enough.
        tail[0] = "echo BASE_HAS_NO_PYTHON".into();
        let f = step_failure(
            "returned a non-zero code: 1",
            &at(None, &tail, &[]),
            "unix:///x",
        );
        assert_eq!(f.diagnostics[0].code, codes::BUILD_STEP_FAILED);
    }

    fn at<'a>(
        step: Option<&'a (usize, usize, String)>,
        tail: &'a VecDeque<String>,
        bases: &'a [BaseSeen],
    ) -> FailedStep<'a> {
        FailedStep {
            step,
            tail,
            bases,
            platform: None,
        }
    }

    #[test]
    fn pull_failure_on_from_is_a_missing_base() {
        let step = (1, 3, "FROM nothere:1".into());
        let f = step_failure(
            "Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host",
            &at(Some(&step), &VecDeque::new(), &[]),
            "unix:///x",
        );
        assert_eq!(f.diagnostics[0].code, codes::BASE_IMAGE_MISSING);
        assert!(f.diagnostics[0].message.contains("`nothere:1`"));
    }

    /// BuildKit pulls a base's metadata before any step: the failure names no `FROM` step,
    /// and the base comes from the engine's message or the Dockerfile, never a placeholder.
    #[test]
    fn a_buildkit_pull_failure_names_the_base_and_the_platform_it_was_there_for() {
        let bases = [BaseSeen {
            name: "docker.io/library/fh-arm64only:2".into(),
            platform: Some("linux/arm64".into()),
        }];
        let msg = "failed to solve with frontend dockerfile.v0: failed to create LLB definition: \
                   failed to do request: Head \"https://registry-1.docker.io/v2/library/\
                   fh-arm64only/manifests/2\": dial tcp: lookup registry-1.docker.io: no such host";
        let tail = VecDeque::new();
        let mut failed = at(None, &tail, &bases);
        failed.platform = Some("linux/amd64");
        let d = &step_failure(msg, &failed, "unix:///x").diagnostics[0];
        assert_eq!(d.code, codes::BASE_IMAGE_MISSING);
        assert!(
            d.message.contains("`docker.io/library/fh-arm64only:2`")
                && d.message.contains("only for linux/arm64")
                && !d.message.contains("the base image"),
            "{}",
            d.message
        );
        // The same base for the engine's own platform (an arm64 variant aside): absent, pulled.
        failed.platform = Some("linux/arm64");
        let d = &step_failure(msg, &failed, "unix:///x").diagnostics[0];
        assert!(d.message.contains("could not pull it"), "{}", d.message);
    }
}
