//! Building one image variant through the engine: the skip-if-present check, the base-image
//! check, the streamed build with step/cache accounting, error mapping and tagging.
//! Performs network I/O against the engine; progress is handed to a caller's callback so
//! this module never writes to the terminal itself.

use super::context::{build_context, label_target_stage, parse_dockerfile};
use super::{codes, engine_error, is_not_found, labels, short_error, Engine};
use crate::core::diag::{Diagnostic, Failure};
use bollard::query_parameters::{BuildImageOptionsBuilder, TagImageOptionsBuilder};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

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
    /// Compact JSON summary of the lock for the `dev.envbuild.lock-summary` label.
    pub summary: String,
    /// Extra tags (`name:tag`) to put on the image.
    pub extra_tags: Vec<String>,
    /// Extra labels (`org.opencontainers.image.*`).
    pub extra_labels: BTreeMap<String, String>,
    /// Build even when an image with this lock hash and variant exists.
    pub rebuild: bool,
}

impl BuildRequest {
    /// `NAME:VARIANT-<first 12 hex of the lock hash>`.
    pub fn primary_tag(&self) -> String {
        let short = self.lock_hash.get(..12).unwrap_or(&self.lock_hash);
        format!("{}:{}-{}", self.image_name, self.variant, short)
    }

    /// Every label the image gets.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = self.extra_labels.clone();
        l.insert(labels::LOCK_SHA256.into(), self.lock_hash.clone());
        l.insert(labels::VARIANT.into(), self.variant.clone());
        l.insert(labels::SUMMARY.into(), self.summary.clone());
        l
    }
}

/// Progress as the build goes, for the caller to display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildEvent {
    /// An image with this lock hash and variant exists; nothing is built.
    Skipped { tag: String, image_id: String },
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
}

/// What a build produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOutcome {
    pub image_id: String,
    /// The primary tag first, then the extra tags.
    pub tags: Vec<String>,
    /// True when an existing image was reused.
    pub skipped: bool,
    pub steps: usize,
    pub cached_steps: usize,
    pub context_bytes: usize,
    pub context_sha256: String,
    pub elapsed: Duration,
}

/// How many output lines of a failing step are kept for the error message.
const TAIL_LINES: usize = 15;

fn split_tag(tag: &str) -> (&str, &str) {
    // The tag is after the last `:` that follows the last `/` (a registry port is not a tag).
    let slash = tag.rfind('/').map(|i| i + 1).unwrap_or(0);
    match tag[slash..].rfind(':') {
        Some(i) => (&tag[..slash + i], &tag[slash + i + 1..]),
        None => (tag, "latest"),
    }
}

/// The labels of an image, or `None` when the engine does not have it.
async fn image_labels(
    engine: &Engine,
    image: &str,
) -> Result<Option<(String, HashMap<String, String>)>, Failure> {
    match engine.docker.inspect_image(image).await {
        Ok(inspect) => Ok(Some((
            inspect.id.unwrap_or_default(),
            inspect.config.and_then(|c| c.labels).unwrap_or_default(),
        ))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(&format!("cannot inspect image `{image}`"), &e)),
    }
}

fn base_missing(image: &str, host: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            codes::BASE_IMAGE_MISSING,
            format!(
                "base image `{image}` is not present on the engine at `{host}` (envbuild does \
                 not pull from a registry)"
            ),
        )
        .with_hint(format!(
            "load it onto the engine first (`docker load -i base.tar`, `docker pull {image}` \
             where a registry is reachable, or `docker import rootfs.tar {image}`), or set \
             `[image] base` in the spec to an image the engine has"
        )),
    )
}

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

/// Build one variant, or reuse the image when one with the same lock hash and variant exists.
pub async fn build(
    engine: &Engine,
    req: &BuildRequest,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<BuildOutcome, Failure> {
    let started = Instant::now();
    if req.lock_hash.len() != 64 || !req.lock_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::bug(format!(
            "lock hash `{}` is not 64 hex digits",
            req.lock_hash
        )));
    }
    let primary = req.primary_tag();
    // A bad tag would only be refused after the whole build: check them first.
    for tag in std::iter::once(&primary).chain(&req.extra_tags) {
        if !valid_tag(tag) {
            return Err(Failure::usage(
                format!("`{tag}` is not a valid image tag"),
                Some(
                    "a tag is `name[:tag]`: the name in lower case letters, digits and `._-/` \
                     (a registry host may carry a port), the tag up to 128 of `A-Za-z0-9_.-`"
                        .into(),
                ),
            ));
        }
    }
    let mut tags = vec![primary.clone()];
    tags.extend(req.extra_tags.iter().cloned());

    let df_bytes = req.files.get(&req.dockerfile).ok_or_else(|| {
        Failure::bug(format!(
            "the rendered files have no `{}` to build from",
            req.dockerfile
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
        req.dockerfile.clone(),
        label_target_stage(&df_text, &req.target, &missing).into_bytes(),
    );
    let context = build_context(&files, &req.dockerfile)?;

    if !req.rebuild {
        if let Some((id, l)) = image_labels(engine, &primary).await? {
            let same = l.get(labels::LOCK_SHA256) == Some(&req.lock_hash)
                && l.get(labels::VARIANT) == Some(&req.variant);
            if same {
                on_event(BuildEvent::Skipped {
                    tag: primary.clone(),
                    image_id: id.clone(),
                });
                tag_extra(engine, &id, &req.extra_tags).await?;
                return Ok(BuildOutcome {
                    image_id: id,
                    tags,
                    skipped: true,
                    steps: 0,
                    cached_steps: 0,
                    context_bytes: context.tar.len(),
                    context_sha256: context.sha256,
                    elapsed: started.elapsed(),
                });
            }
        }
    }

    // Checking the bases first gives a precise error at once instead of a failed pull later.
    for base in parse_dockerfile(&df_text).base_images {
        if image_labels(engine, &base).await?.is_none() {
            return Err(base_missing(&base, &engine.host));
        }
    }

    on_event(BuildEvent::Context {
        bytes: context.tar.len(),
        files: context.files.len(),
    });
    let mut opts = BuildImageOptionsBuilder::default()
        .dockerfile(&req.dockerfile)
        .t(&primary)
        .rm(true)
        .forcerm(true);
    if !req.target.is_empty() {
        opts = opts.target(&req.target);
    }
    let body = bollard::body_full(bytes::Bytes::from(context.tar.clone()));
    let mut stream = engine.docker.build_image(opts.build(), None, Some(body));

    let mut step: Option<(usize, usize, String)> = None;
    let mut steps = 0usize;
    let mut cached = 0usize;
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut engine_message: Option<String> = None;
    let mut transport_error: Option<bollard::errors::Error> = None;
    let mut built_id: Option<String> = None;
    let mut pending = String::new();

    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(text) = info.stream {
                    pending.push_str(&text);
                    while let Some(nl) = pending.find('\n') {
                        let line: String = pending.drain(..=nl).collect();
                        let line = line.trim_end().to_string();
                        handle_line(
                            &line,
                            &mut step,
                            &mut steps,
                            &mut cached,
                            &mut tail,
                            on_event,
                        );
                    }
                }
                if let Some(detail) = info.error_detail {
                    engine_message = detail.message.or(engine_message);
                }
                if let Some(aux) = info.aux.and_then(|a| a.id) {
                    built_id = Some(aux);
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                engine_message = Some(error);
            }
            Err(e) => {
                // bollard 0.21.1 can end a good stream with "bytes remaining on stream":
                // success is decided by inspecting the tag below.
                transport_error = Some(e);
                break;
            }
        }
    }
    if !pending.trim().is_empty() {
        let line = pending.trim_end().to_string();
        handle_line(
            &line,
            &mut step,
            &mut steps,
            &mut cached,
            &mut tail,
            on_event,
        );
    }

    if let Some(msg) = engine_message {
        return Err(step_failure(&msg, step.as_ref(), &tail, &engine.host));
    }
    let image_id = match image_labels(engine, &primary).await? {
        Some((_, l))
            if built_id.is_some() && l.get(labels::LOCK_SHA256) != Some(&req.lock_hash) =>
        {
            return Err(Failure::one(
                Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!(
                        "the image built as `{primary}` has label {}={:?}, not this lock's hash",
                        labels::LOCK_SHA256,
                        l.get(labels::LOCK_SHA256)
                    ),
                )
                .with_hint("the Dockerfile (or a --templates override) sets that label wrong"),
            ))
        }
        Some((id, l)) if l.get(labels::LOCK_SHA256) == Some(&req.lock_hash) => {
            if built_id.as_ref().is_some_and(|b| b != &id) {
                return Err(Failure::one(Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!("the build finished but `{primary}` names another image"),
                )));
            }
            id
        }
        _ => {
            let why = transport_error
                .map(|e| short_error(&e))
                .unwrap_or_else(|| "the engine ended the build without an image".into());
            return Err(Failure::one(
                Diagnostic::error(
                    codes::BUILD_FAILED,
                    format!("building `{primary}` failed: {why}"),
                )
                .with_hint("run again with -v for the full build log"),
            ));
        }
    };
    tag_extra(engine, &image_id, &req.extra_tags).await?;
    Ok(BuildOutcome {
        image_id,
        tags,
        skipped: false,
        steps,
        cached_steps: cached,
        context_bytes: context.tar.len(),
        context_sha256: context.sha256,
        elapsed: started.elapsed(),
    })
}

fn handle_line(
    line: &str,
    step: &mut Option<(usize, usize, String)>,
    steps: &mut usize,
    cached: &mut usize,
    tail: &mut VecDeque<String>,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) {
    if let Some(parsed) = parse_step(line) {
        *steps += 1;
        tail.clear();
        on_event(BuildEvent::Step {
            index: parsed.0,
            total: parsed.1,
            instruction: parsed.2.clone(),
        });
        *step = Some(parsed);
        return;
    }
    let t = line.trim();
    if t == "---> Using cache" {
        *cached += 1;
        on_event(BuildEvent::Cached);
        return;
    }
    if t.is_empty() {
        return;
    }
    // The engine's own bookkeeping lines are not the step's output.
    let bookkeeping = t.starts_with("---> ")
        || t.starts_with("Removing intermediate container")
        || t.starts_with("Successfully built")
        || t.starts_with("Successfully tagged");
    if !bookkeeping {
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(t.to_string());
    }
    on_event(BuildEvent::Output(t.to_string()));
}

/// A Docker image reference `name[:tag]` (no digest), as the engine accepts it.
pub fn valid_tag(reference: &str) -> bool {
    let (name, tag) = split_tag(reference);
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    let mut components = name.split('/').peekable();
    let mut first = true;
    let name_ok = !name.is_empty()
        && name.len() <= 255
        && std::iter::from_fn(|| components.next()).all(|c| {
            let host = std::mem::take(&mut first) && (c.contains('.') || c.contains(':'));
            if host {
                // `registry.example:5000`
                !c.is_empty()
                    && c.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'))
            } else {
                !c.is_empty()
                    && c.bytes()
                        .next()
                        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    && c.bytes()
                        .last()
                        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    && c.bytes().all(|b| {
                        b.is_ascii_lowercase()
                            || b.is_ascii_digit()
                            || matches!(b, b'.' | b'_' | b'-')
                    })
            }
        });
    tag_ok && name_ok
}

/// `Step 3/7 : RUN echo hi` → (3, 7, "RUN echo hi").
pub fn parse_step(line: &str) -> Option<(usize, usize, String)> {
    let rest = line.strip_prefix("Step ")?;
    let (counts, instr) = rest.split_once(" : ")?;
    let (n, m) = counts.split_once('/')?;
    Some((n.parse().ok()?, m.parse().ok()?, instr.trim().to_string()))
}

fn step_failure(
    msg: &str,
    step: Option<&(usize, usize, String)>,
    tail: &VecDeque<String>,
    host: &str,
) -> Failure {
    let msg = msg.trim();
    let (where_, instr) = match step {
        Some((n, m, i)) => (format!("step {n}/{m} `{i}`"), i.as_str()),
        None => ("the build".to_string(), ""),
    };
    if instr.to_ascii_uppercase().starts_with("FROM")
        || (step.is_none() && looks_like_pull_failure(msg))
    {
        let image = instr
            .split_whitespace()
            .skip(1)
            .find(|w| !w.starts_with("--"))
            .unwrap_or("the base image");
        if looks_like_pull_failure(msg) {
            return base_missing(image, host);
        }
    }
    let output = if tail.is_empty() {
        String::new()
    } else {
        format!("\n  last output lines:\n{}", tail_text(tail))
    };
    let code = if msg.contains("returned a non-zero code") {
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
        let (repo, t) = split_tag(tag);
        let opts = TagImageOptionsBuilder::default().repo(repo).tag(t).build();
        engine
            .docker
            .tag_image(image_id, Some(opts))
            .await
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
    fn parses_classic_step_lines() {
        assert_eq!(
            parse_step("Step 3/7 : RUN echo hi"),
            Some((3, 7, "RUN echo hi".into()))
        );
        assert_eq!(parse_step(" ---> Using cache"), None);
        assert_eq!(parse_step("Step x/7 : RUN"), None);
    }

    #[test]
    fn splits_tags_with_registry_ports() {
        assert_eq!(split_tag("a/b:c"), ("a/b", "c"));
        assert_eq!(split_tag("reg:5000/a/b"), ("reg:5000/a/b", "latest"));
        assert_eq!(split_tag("reg:5000/a:v1"), ("reg:5000/a", "v1"));
    }

    #[test]
    fn tags_are_checked_before_building() {
        for good in [
            "env:runtime-0123456789ab",
            "team/env:v1",
            "reg.example:5000/a/b:c",
            "a",
        ] {
            assert!(valid_tag(good), "{good}");
        }
        for bad in [
            "Env:v1", "env:", "env:-x", "env:a b", "/env:v", "env/:v", "env:$x", "",
        ] {
            assert!(!valid_tag(bad), "{bad}");
        }
    }

    #[test]
    fn primary_tag_is_content_addressed() {
        let req = BuildRequest {
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
        };
        assert_eq!(req.primary_tag(), "myenv:runtime-0123456789ab");
        assert_eq!(req.labels()[labels::VARIANT], "runtime");
    }

    #[test]
    fn failing_run_step_names_step_command_and_output() {
        let mut tail = VecDeque::new();
        tail.push_back("boom".to_string());
        let f = step_failure(
            "The command '/bin/sh -c exit 3' returned a non-zero code: 3",
            Some(&(2, 3, "RUN exit 3".into())),
            &tail,
            "unix:///x",
        );
        let d = &f.diagnostics[0];
        assert_eq!(d.code, codes::BUILD_STEP_FAILED);
        assert!(d.message.contains("step 2/3 `RUN exit 3`"), "{}", d.message);
        assert!(d.message.contains("| boom"));
    }

    #[test]
    fn pull_failure_on_from_is_a_missing_base() {
        let f = step_failure(
            "Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host",
            Some(&(1, 3, "FROM nothere:1".into())),
            &VecDeque::new(),
            "unix:///x",
        );
        assert_eq!(f.diagnostics[0].code, codes::BASE_IMAGE_MISSING);
        assert!(f.diagnostics[0].message.contains("`nothere:1`"));
    }
}
