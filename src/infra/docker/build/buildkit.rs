//! Building through the engine's own BuildKit (`/build?version=2` plus a `/session` that
//! bollard serves over gRPC), turning BuildKit's status stream into the same progress events
//! and step accounting as the classic builder's, and telling an engine that refused BuildKit
//! from a build that failed. Performs network I/O against the engine.

use super::{build_stalled, BuildEvent, BuildLog, BuildRequest, TAIL_LINES};
use crate::core::diag::Failure;
use crate::infra::docker::context::BuildContext;
use crate::infra::docker::limits::Call;
use crate::infra::docker::{short_error, Engine};
use bollard::models::BuildInfoAux;
use bollard::query_parameters::{BuildImageOptionsBuilder, BuilderVersion};
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};

/// The build arg that makes BuildKit store an inline cache in the image.
const INLINE_CACHE_ARG: &str = "BUILDKIT_INLINE_CACHE";

/// A session id unique to this process and moment: the engine keys the build's session on it.
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("envbuild-{}-{nanos:x}", std::process::id())
}

/// Send the context to BuildKit and follow its status stream to the end. As with the classic
/// builder, the host's proxies go as build args, and a stream silent past the build's idle
/// limit is `ENGINE_TIMEOUT` naming the step. `auth` holds the credentials the build's session
/// gives BuildKit for the registries it reads (its caches).
pub(super) async fn stream(
    engine: &Engine,
    req: &BuildRequest,
    (dockerfile, wheels): (&str, Option<&str>),
    auth: Option<std::collections::HashMap<String, bollard::auth::DockerCredentials>>,
    primary: &str,
    context: &BuildContext,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<BuildLog, Failure> {
    let session = session_id();
    let mut opts = BuildImageOptionsBuilder::default()
        .dockerfile(dockerfile)
        .t(primary)
        .rm(true)
        .forcerm(true)
        .version(BuilderVersion::BuilderBuildKit)
        .session(&session);
    if !req.target.is_empty() {
        opts = opts.target(&req.target);
    }
    if let Some(platform) = &req.platform {
        opts = opts.platform(platform);
    }
    let mut args: std::collections::HashMap<&str, &str> = req
        .build_args
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(w) = wheels {
        args.insert(super::builder::WHEELS_ARG, w);
    }
    if req.cache.inline {
        // BuildKit then writes its cache metadata into the image config; pushed with the
        // image, it lets a build on another engine reuse these layers through `cachefrom`.
        args.insert(INLINE_CACHE_ARG, "1");
    }
    if !args.is_empty() {
        opts = opts.buildargs(&args);
    }
    if !req.cache.from.is_empty() {
        opts = opts.cachefrom(&req.cache.from);
    }
    let body = bollard::body_full(bytes::Bytes::from(context.tar.clone()));
    // `auth`: what the session answers when BuildKit asks for a registry's credentials.
    let mut stream = engine.docker.build_image(opts.build(), auth, Some(body));
    let mut log = BuildLog::default();
    let mut status = Status::default();
    let idle = engine.limits.of(Call::BuildIdle);
    loop {
        let Ok(next) = tokio::time::timeout(idle, stream.next()).await else {
            return Err(build_stalled(engine, primary, " with BuildKit", &log));
        };
        let Some(item) = next else { break };
        match item {
            Ok(info) => match info.aux {
                Some(BuildInfoAux::BuildKit(s)) => {
                    log.buildkit_status = true;
                    status.apply(s, &mut log, on_event)
                }
                Some(BuildInfoAux::Default(id)) => log.built_id = id.id.or(log.built_id.take()),
                None => {
                    if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                        log.engine_message = Some(detail);
                    }
                }
            },
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                log.engine_message = Some(error);
            }
            Err(e) => {
                // As with the classic builder, success is decided by inspecting the tag.
                log.transport_error = Some(short_error(&e));
                break;
            }
        }
    }
    status.finish(&mut log, on_event);
    Ok(log)
}

/// Why a BuildKit build never started, when the engine refused BuildKit itself (no status
/// at all, and a transport error or an answer about BuildKit or its session); `None` when
/// BuildKit ran, whatever the build's outcome.
pub(super) fn refused(log: &BuildLog) -> Option<String> {
    if log.buildkit_status || log.built_id.is_some() {
        return None;
    }
    if let Some(e) = &log.transport_error {
        return Some(format!("BuildKit failed to start ({e})"));
    }
    let msg = log.engine_message.as_deref()?;
    let m = msg.to_ascii_lowercase();
    ["buildkit", "session", "builder version", "version=2"]
        .iter()
        .any(|w| m.contains(w))
        .then(|| format!("the engine refused BuildKit ({})", msg.trim()))
}

/// What the status stream said so far, by vertex digest.
#[derive(Default)]
struct Status {
    /// Vertex digest → its step (`[stage n/m] INSTRUCTION` parsed), for the ones that are
    /// Dockerfile steps.
    steps: BTreeMap<String, (usize, usize, String)>,
    started: BTreeSet<String>,
    cached: BTreeSet<String>,
    /// Output lines not yet ended by a newline, by vertex.
    pending: BTreeMap<String, String>,
    /// The last output lines of each vertex, for the failing one's error message.
    tails: BTreeMap<String, std::collections::VecDeque<String>>,
    /// The vertex that failed, first one wins.
    failed: Option<String>,
}

impl Status {
    fn apply(
        &mut self,
        s: bollard::moby::buildkit::v1::StatusResponse,
        log: &mut BuildLog,
        on_event: &mut (dyn FnMut(BuildEvent) + Send),
    ) {
        for v in s.vertexes {
            let step = parse_vertex_name(&v.name);
            if let Some(step) = &step {
                self.steps.insert(v.digest.clone(), step.clone());
            }
            if (v.started.is_some() || v.cached) && self.started.insert(v.digest.clone()) {
                if let Some((n, m, instr)) = step.clone() {
                    log.steps += 1;
                    on_event(BuildEvent::Step {
                        index: n,
                        total: m,
                        instruction: without_mounts(&instr),
                    });
                    log.step = Some((n, m, instr));
                } else {
                    on_event(BuildEvent::Output(v.name.clone()));
                }
            }
            if v.cached
                && self.steps.contains_key(&v.digest)
                && self.cached.insert(v.digest.clone())
            {
                log.cached += 1;
                on_event(BuildEvent::Cached);
            }
            if !v.error.is_empty() && self.failed.is_none() {
                self.failed = Some(v.digest.clone());
                if log.engine_message.is_none() {
                    log.engine_message = Some(v.error.clone());
                }
            }
        }
        for l in s.logs {
            let text = String::from_utf8_lossy(&l.msg).into_owned();
            let pending = self.pending.entry(l.vertex.clone()).or_default();
            pending.push_str(&text);
            let mut lines = Vec::new();
            while let Some(nl) = pending.find(['\n', '\r']) {
                let line: String = pending.drain(..=nl).collect();
                lines.push(line);
            }
            for line in lines {
                self.line(&l.vertex, &line, on_event);
            }
        }
    }

    fn line(&mut self, vertex: &str, line: &str, on_event: &mut (dyn FnMut(BuildEvent) + Send)) {
        let t = line.trim();
        if t.is_empty() {
            return;
        }
        let tail = self.tails.entry(vertex.to_string()).or_default();
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(t.to_string());
        on_event(BuildEvent::Output(t.to_string()));
    }

    /// Flush unfinished lines; name the failing step and hand its output to the log.
    fn finish(&mut self, log: &mut BuildLog, on_event: &mut (dyn FnMut(BuildEvent) + Send)) {
        for (vertex, rest) in std::mem::take(&mut self.pending) {
            self.line(&vertex, &rest, on_event);
        }
        if let Some(failed) = &self.failed {
            log.step = self.steps.get(failed).cloned().or(log.step.take());
            log.tail = self.tails.get(failed).cloned().unwrap_or_default();
        }
    }
}

/// A `RUN` without its `--mount=` flags, for the progress line (the command is what tells the
/// steps apart); an error message keeps the whole instruction.
fn without_mounts(instr: &str) -> String {
    let Some(rest) = instr.strip_prefix("RUN ") else {
        return instr.to_string();
    };
    let mut rest = rest.trim_start();
    while rest.starts_with("--mount=") {
        rest = rest
            .split_once(char::is_whitespace)
            .map_or("", |(_, tail)| tail.trim_start());
    }
    format!("RUN {rest}")
}

/// `[base 3/5] RUN pip install x` → (3, 5, "RUN pip install x"); `[runtime 2/6]` and `[2/6]`
/// (a single unnamed stage) alike. Internal vertices (`[internal] load ...`) are not steps.
pub fn parse_vertex_name(name: &str) -> Option<(usize, usize, String)> {
    let rest = name.strip_prefix('[')?;
    let (head, instr) = rest.split_once("] ")?;
    let counts = head.rsplit(' ').next()?;
    let (n, m) = counts.split_once('/')?;
    Some((n.parse().ok()?, m.parse().ok()?, instr.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertex_names_become_steps() {
        assert_eq!(
            parse_vertex_name("[base 3/5] RUN python -m pip install -r r.txt"),
            Some((3, 5, "RUN python -m pip install -r r.txt".into()))
        );
        assert_eq!(
            parse_vertex_name("[2/6] COPY a b"),
            Some((2, 6, "COPY a b".into()))
        );
        assert_eq!(
            parse_vertex_name("[internal] load build definition from Dockerfile"),
            None
        );
        assert_eq!(parse_vertex_name("exporting to image"), None);
    }

    use bollard::moby::buildkit::v1::{StatusResponse, Vertex, VertexLog};

    fn vertex(digest: &str, name: &str, cached: bool, error: &str) -> Vertex {
        Vertex {
            digest: digest.into(),
            name: name.into(),
            cached,
            started: Some(Default::default()),
            error: error.into(),
            ..Default::default()
        }
    }

    fn logs(digest: &str, text: &str) -> VertexLog {
        VertexLog {
            vertex: digest.into(),
            msg: text.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn status_stream_becomes_steps_cache_hits_and_the_failing_steps_output() {
        let mut status = Status::default();
        let mut log = BuildLog::default();
        let mut events = Vec::new();
        let mut on = |e: BuildEvent| events.push(e);
        let internal = vertex(
            "d0",
            "[internal] load build definition from Dockerfile",
            false,
            "",
        );
        let from = vertex("d1", "[runtime 1/3] FROM base:1", true, "");
        let run = vertex("d2", "[runtime 2/3] RUN make", false, "");
        // The same vertex arrives again when it changes: it is one step, one cache hit.
        status.apply(
            StatusResponse {
                vertexes: vec![internal, from.clone(), from, run.clone()],
                ..Default::default()
            },
            &mut log,
            &mut on,
        );
        // Output split across messages, a carriage return, and the other vertex's line.
        status.apply(
            StatusResponse {
                logs: vec![
                    logs("d2", "compil"),
                    logs("d2", "ing\r\nlinking\n"),
                    logs("d0", "x\n"),
                ],
                ..Default::default()
            },
            &mut log,
            &mut on,
        );
        let failed = vertex("d2", "[runtime 2/3] RUN make", false, "exit code: 2");
        status.apply(
            StatusResponse {
                vertexes: vec![failed],
                logs: vec![logs("d2", "boom")],
                ..Default::default()
            },
            &mut log,
            &mut on,
        );
        status.finish(&mut log, &mut on);
        assert_eq!((log.steps, log.cached), (2, 1));
        assert_eq!(log.step, Some((2, 3, "RUN make".into())));
        assert_eq!(log.engine_message.as_deref(), Some("exit code: 2"));
        assert_eq!(
            Vec::from(log.tail.clone()),
            vec!["compiling", "linking", "boom"]
        );
        let steps: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                BuildEvent::Step {
                    index, instruction, ..
                } => Some((*index, instruction.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(steps, vec![(1, "FROM base:1"), (2, "RUN make")]);
        assert_eq!(
            without_mounts(
                "RUN --mount=type=cache,target=/c  --mount=type=bind,source=w,target=/w pip x"
            ),
            "RUN pip x"
        );
        assert_eq!(without_mounts("COPY a b"), "COPY a b");
        assert_eq!(
            events.iter().filter(|e| **e == BuildEvent::Cached).count(),
            1
        );
    }

    #[test]
    fn only_a_buildkit_that_never_started_falls_back() {
        let mut log = BuildLog {
            engine_message: Some("buildkit not supported by daemon".into()),
            ..Default::default()
        };
        assert!(refused(&log).is_some_and(|w| w.contains("buildkit not supported")));
        log.buildkit_status = true;
        assert_eq!(refused(&log), None, "a build that ran is not redone");
        let log = BuildLog {
            engine_message: Some("dockerfile parse error line 3: unknown instruction: RUNN".into()),
            ..Default::default()
        };
        assert_eq!(refused(&log), None, "the Dockerfile's own error stands");
        let log = BuildLog {
            transport_error: Some("connection reset".into()),
            ..Default::default()
        };
        assert!(refused(&log).is_some());
    }
}
