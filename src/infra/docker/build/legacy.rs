//! The classic builder's stream: send the context to `/build`, follow its JSON messages
//! (`Step N/M : ...`, `---> Using cache`, the steps' output) into the shared [`BuildLog`],
//! and cut a stream that stays silent past the build's idle limit. Performs network I/O
//! against the engine.

use super::{build_stalled, BuildEvent, BuildLog, BuildRequest, TAIL_LINES};
use crate::core::diag::Failure;
use crate::infra::docker::context::BuildContext;
use crate::infra::docker::limits::Call;
use crate::infra::docker::{short_error, Engine};
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;

/// Send the context and follow the engine's build stream to its end. A stream that stays
/// silent past the build's idle limit is `ENGINE_TIMEOUT` (a long build that keeps talking is
/// never cut).
pub(super) async fn stream(
    engine: &Engine,
    req: &BuildRequest,
    primary: &str,
    context: &BuildContext,
    on_event: &mut (dyn FnMut(BuildEvent) + Send),
) -> Result<BuildLog, Failure> {
    let mut opts = BuildImageOptionsBuilder::default()
        .dockerfile(&req.dockerfile)
        .t(primary)
        .rm(true)
        .forcerm(true);
    if !req.target.is_empty() {
        opts = opts.target(&req.target);
    }
    if let Some(platform) = &req.platform {
        opts = opts.platform(platform);
    }
    if !req.build_args.is_empty() {
        let args: std::collections::HashMap<&str, &str> = req
            .build_args
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        opts = opts.buildargs(&args);
    }
    let body = bollard::body_full(bytes::Bytes::from(context.tar.clone()));
    let mut stream = engine.docker.build_image(opts.build(), None, Some(body));
    let mut log = BuildLog::default();
    let idle = engine.limits.of(Call::BuildIdle);
    loop {
        let Ok(next) = tokio::time::timeout(idle, stream.next()).await else {
            return Err(build_stalled(engine, primary, "", &log));
        };
        let Some(item) = next else { break };
        match item {
            Ok(info) => {
                if let Some(text) = info.stream {
                    log.text(&text, on_event);
                }
                if let Some(detail) = info.error_detail {
                    log.engine_message = detail.message.or(log.engine_message.take());
                }
                if let Some(bollard::models::BuildInfoAux::Default(aux)) = info.aux {
                    log.built_id = aux.id.or(log.built_id.take());
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                log.engine_message = Some(error);
            }
            Err(e) => {
                // bollard 0.21.1 can end a good stream with "bytes remaining on stream":
                // success is decided by inspecting the tag afterwards.
                log.transport_error = Some(short_error(&e));
                break;
            }
        }
    }
    log.flush(on_event);
    Ok(log)
}

impl BuildLog {
    fn text(&mut self, text: &str, on_event: &mut (dyn FnMut(BuildEvent) + Send)) {
        self.pending.push_str(text);
        while let Some(nl) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=nl).collect();
            self.line(line.trim_end(), on_event);
        }
    }

    /// The last line, when the stream did not end with a newline.
    fn flush(&mut self, on_event: &mut (dyn FnMut(BuildEvent) + Send)) {
        if !self.pending.trim().is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(line.trim_end(), on_event);
        }
    }

    fn line(&mut self, line: &str, on_event: &mut (dyn FnMut(BuildEvent) + Send)) {
        // The classic builder colours a step's stderr (`ESC[91m` ... `ESC[0m`): the marks are
        // not the output, and would hide a line's start.
        let plain = strip_sgr(line);
        let line = plain.as_str();
        if let Some(parsed) = parse_step(line) {
            self.steps += 1;
            self.tail.clear();
            on_event(BuildEvent::Step {
                index: parsed.0,
                total: parsed.1,
                instruction: parsed.2.clone(),
            });
            self.step = Some(parsed);
            return;
        }
        let t = line.trim();
        if t == "---> Using cache" {
            self.cached += 1;
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
            if self.tail.len() == TAIL_LINES {
                self.tail.pop_front();
            }
            self.tail.push_back(t.to_string());
        }
        on_event(BuildEvent::Output(t.to_string()));
    }
}

/// `line` without ANSI colour sequences (`ESC [ digits ; ... m`).
fn strip_sgr(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("\u{1b}[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find(|c: char| !(c.is_ascii_digit() || c == ';')) {
            Some(j) if after[j..].starts_with('m') => rest = &after[j + 1..],
            _ => {
                out.push('\u{1b}');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `Step 3/7 : RUN echo hi` → (3, 7, "RUN echo hi").
pub fn parse_step(line: &str) -> Option<(usize, usize, String)> {
    let rest = line.strip_prefix("Step ")?;
    let (counts, instr) = rest.split_once(" : ")?;
    let (n, m) = counts.split_once('/')?;
    Some((n.parse().ok()?, m.parse().ok()?, instr.trim().to_string()))
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
    fn step_output_loses_its_colour_marks() {
        assert_eq!(strip_sgr("\u{1b}[91mboom\u{1b}[0m"), "boom");
        assert_eq!(strip_sgr("a\u{1b}[1;31mb"), "ab");
        assert_eq!(
            strip_sgr("keep \u{1b}[x and \u{1b}"),
            "keep \u{1b}[x and \u{1b}"
        );
        let mut log = BuildLog::default();
        log.text(
            "\u{1b}[91menvbuild: BASE_HAS_NO_PYTHON: x\n\u{1b}[0mRemoving intermediate container 1\n",
            &mut |_| {},
        );
        assert_eq!(
            log.tail.iter().collect::<Vec<_>>(),
            ["envbuild: BASE_HAS_NO_PYTHON: x"]
        );
    }
}
