//! An engine that misbehaves, without a real one: a fake Docker engine on 127.0.0.1 (a std
//! `TcpListener`) answers the ping and a few chosen calls, then accepts the next request and
//! never answers. `envbuild test` and `envbuild image` must end with `ENGINE_TIMEOUT` naming the
//! call, and signals must interrupt them (a second one at once). Runs everywhere.

use crate::support::{root, stderr_of, stdout_of, tempdir};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fake engine: `/_ping` and `/version` answer, so do the requests matching `answers`
/// (a path fragment, the status and the JSON body, the first match wins; a body
/// `STREAM:<n>:<ms>` is a build stream of `n` step events `ms` apart that then stalls); any
/// other request is read and never answered.
pub(crate) struct FakeEngine {
    port: u16,
    /// Every request received, as `METHOD PATH`.
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

type Answers = Arc<Vec<(&'static str, u16, String)>>;

impl FakeEngine {
    pub(crate) fn start(answers: Vec<(&'static str, u16, String)>) -> FakeEngine {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let answers: Answers = Arc::new(answers);
        let (s, st) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (s, st, a) = (s.clone(), st.clone(), answers.clone());
                std::thread::spawn(move || serve(conn, &s, &st, &a));
            }
        });
        FakeEngine { port, seen, stop }
    }

    pub(crate) fn host(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }

    pub(crate) fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Wait until a request whose line contains `fragment` arrived.
    fn wait_for(&self, fragment: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.seen().iter().any(|r| r.contains(fragment)) {
            assert!(
                Instant::now() < deadline,
                "no request with `{fragment}` arrived; seen: {:?}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One connection: requests in turn (keep-alive), until one is not answered.
fn serve(conn: TcpStream, seen: &Mutex<Vec<String>>, stop: &AtomicBool, answers: &Answers) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let Some(line) = read_request(&mut reader) else {
            return;
        };
        seen.lock().unwrap().push(line.clone());
        let path = line.split(' ').nth(1).unwrap_or("");
        let answer = if path.ends_with("/_ping") {
            Some((200, "OK".to_string(), "text/plain"))
        } else if path.ends_with("/version") {
            Some((
                200,
                r#"{"Version":"27.0.0","ApiVersion":"1.47","MinAPIVersion":"1.24","Os":"linux","Arch":"amd64"}"#
                    .to_string(),
                "application/json",
            ))
        } else {
            answers
                .iter()
                .find(|(frag, _, _)| path.contains(frag))
                .map(|(_, status, body)| (*status, body.clone(), "application/json"))
        };
        let stall = || {
            // The request was read, the (rest of the) answer never comes.
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let Some((status, body, kind)) = answer else {
            return stall();
        };
        if let Some(spec) = body.strip_prefix("STREAM:") {
            let (n, ms) = spec.split_once(':').unwrap();
            let (n, ms): (usize, u64) = (n.parse().unwrap(), ms.parse().unwrap());
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if conn.write_all(head.as_bytes()).is_err() {
                return;
            }
            for i in 1..=n {
                let event = format!(
                    "{{\"stream\":\"Step {i}/{} : RUN step-{i}\\n\"}}\r\n",
                    n + 1
                );
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                if conn.write_all(chunk.as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(ms));
            }
            return stall();
        }
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nApi-Version: 1.47\r\n\r\n",
            body.len()
        );
        if conn.write_all(head.as_bytes()).is_err() || conn.write_all(body.as_bytes()).is_err() {
            return;
        }
    }
}

/// The request line of the next request, its headers and body consumed; `None` at the end.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end().to_ascii_lowercase();
        if h.is_empty() {
            break;
        }
        if let Some(v) = h.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if h.starts_with("transfer-encoding:") && h.contains("chunked") {
            chunked = true;
        }
    }
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
        }
    } else {
        let mut body = vec![0; length];
        r.read_exact(&mut body).ok()?;
    }
    Some(line.trim_end().to_string())
}

/// `GET /images/{name}/json` for an image that exists.
fn image_answer() -> (&'static str, u16, String) {
    (
        "/images/envbuild-fake:1/json",
        200,
        r#"{"Id":"sha256:1111111111111111111111111111111111111111111111111111111111111111","RepoTags":["envbuild-fake:1"],"Config":{"Labels":{}}}"#.to_string(),
    )
}

/// Wait for `child` at most `within`; kill it and fail when it is still running.
pub(crate) fn wait_within(child: &mut Child, within: Duration, what: &str) -> std::process::Output {
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = std::mem::replace(child, spawn_true())
                .wait_with_output()
                .unwrap();
            panic!(
                "{what}: still running after {within:?}; stderr: {}",
                stderr_of(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::mem::replace(child, spawn_true())
        .wait_with_output()
        .unwrap()
}

fn spawn_true() -> Child {
    Command::new("true").spawn().unwrap()
}

pub(crate) fn envbuild_at(engine: &FakeEngine, timeout_s: &str) -> Command {
    // A std Command (assert_cmd's cannot be spawned and signalled), environment as `envbuild()`.
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("envbuild"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ENVBUILD_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("DOCKER_HOST", engine.host())
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH")
        .env("ENVBUILD_ENGINE_TIMEOUT", timeout_s)
        .env("ENVBUILD_CACHE_DIR", "/nonexistent/envbuild-cache")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn a_stalled_engine_ends_test_with_engine_timeout_naming_the_call() {
    let engine = FakeEngine::start(vec![]);
    let started = Instant::now();
    let mut child = envbuild_at(&engine, "1")
        .args(["test", "envbuild-fake:1", "--gpus", "none", "--json"])
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(20), "envbuild test");
    let (err, json) = (stderr_of(&out), stdout_of(&out));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    let doc: serde_json::Value = serde_json::from_str(&json).expect("one JSON document");
    let text = doc.to_string();
    assert!(text.contains("ENGINE_TIMEOUT"), "{text}");
    assert!(
        text.contains("while inspecting image `envbuild-fake:1`"),
        "the call is named: {text}"
    );
    assert!(text.contains("ENVBUILD_ENGINE_TIMEOUT"), "hint: {text}");
    assert!(engine
        .seen()
        .iter()
        .any(|r| r.contains("/images/envbuild-fake:1/json")));
}

#[test]
fn a_stalled_engine_ends_image_with_engine_timeout_naming_the_call() {
    let engine = FakeEngine::start(vec![]);
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let started = Instant::now();
    let mut child = envbuild_at(&engine, "1")
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none"])
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(20), "envbuild image");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(err.contains("ENGINE_TIMEOUT"), "{err}");
    assert!(
        err.contains("did not answer within 1s while inspecting image `envbuild/"),
        "the call is named: {err}"
    );
}

#[test]
fn a_stalled_create_is_named_and_bounded_by_the_container_limit() {
    let engine = FakeEngine::start(vec![image_answer(), ("/containers/json", 200, "[]".into())]);
    let expect = tempdir();
    let file = expect.path().join("expect.json");
    std::fs::write(&file, "{}").unwrap();
    let started = Instant::now();
    let mut child = envbuild_at(&engine, "1")
        .args(["test", "envbuild-fake:1", "--gpus", "none", "--expect-file"])
        .arg(&file)
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(30), "envbuild test");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Container calls get 4x the short limit.
    assert!(started.elapsed() >= Duration::from_secs(4), "{err}");
    assert!(
        err.contains("ENGINE_TIMEOUT")
            && err.contains("within 4s while creating the smoke container for `envbuild-fake:1`"),
        "{err}"
    );
}

#[test]
fn a_build_is_cut_only_after_its_idle_limit_without_events() {
    // Short limit 0.1 s: a build may stay silent for 6 s. The fake build sends a step every
    // 0.5 s for 8 s (longer than the idle limit: it must not be cut), then goes silent.
    let engine = FakeEngine::start(vec![
        (
            "/images/envbuild/",
            404,
            r#"{"message":"No such image"}"#.into(),
        ),
        (
            "/images/",
            200,
            r#"{"Id":"sha256:22","RepoTags":[],"Config":{"Labels":{}}}"#.into(),
        ),
        ("/build", 200, "STREAM:16:500".into()),
    ]);
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let started = Instant::now();
    let mut child = envbuild_at(&engine, "0.1")
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none"])
        .env("CI", "1")
        // The fake stream speaks the classic builder's JSON lines (BuildKit's stream is cut by
        // the same idle limit, in infra::docker::build::buildkit).
        .env("ENVBUILD_BUILDER", "legacy")
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(40), "envbuild image");
    let err = stderr_of(&out);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ENGINE_TIMEOUT")
            && err.contains("sent nothing for 6s while building `envbuild/torch29-cu128:runtime-")
            && err.contains("(step 16/17: RUN step-16)"),
        "{err}"
    );
    // 8 s of events, then 6 s of silence: cut neither before the events ended nor long after.
    assert!(
        took >= Duration::from_secs(13),
        "cut early, after {took:?}: {err}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn a_bad_engine_timeout_value_is_a_usage_error() {
    let engine = FakeEngine::start(vec![]);
    let mut child = envbuild_at(&engine, "soon")
        .args(["test", "envbuild-fake:1", "--gpus", "none"])
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(20), "envbuild test");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ENVBUILD_ENGINE_TIMEOUT=soon"), "{err}");
}

#[test]
fn a_bad_builder_value_is_a_usage_error_before_any_call() {
    // A typo must not silently pick a builder; it fails before the engine is asked anything.
    let engine = FakeEngine::start(vec![]);
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let mut child = envbuild_at(&engine, "1")
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none"])
        .env("ENVBUILD_BUILDER", "buildkitt")
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(20), "envbuild image");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ENVBUILD_BUILDER=buildkitt is not a builder") && err.contains("auto"),
        "{err}"
    );
    assert!(
        engine.seen().iter().all(|r| !r.contains("/images/")),
        "{:?}",
        engine.seen()
    );
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal}");
}

/// `envbuild test` against an engine that stalls creating the smoke container; returns once
/// the create request arrived.
fn test_stalled_at_create(engine: &FakeEngine, file: &std::path::Path) -> Child {
    let child = envbuild_at(engine, "30")
        .args(["test", "envbuild-fake:1", "--gpus", "none", "--expect-file"])
        .arg(file)
        .spawn()
        .unwrap();
    engine.wait_for("/containers/create", Duration::from_secs(20));
    child
}

#[test]
fn each_interrupting_signal_stops_the_run_and_cleans_up() {
    let dir = tempdir();
    let file = dir.path().join("expect.json");
    std::fs::write(&file, "{}").unwrap();
    for signal in ["HUP", "QUIT", "INT", "TERM"] {
        let engine =
            FakeEngine::start(vec![image_answer(), ("/containers/json", 200, "[]".into())]);
        let mut child = test_stalled_at_create(&engine, &file);
        kill(&child, signal);
        let out = wait_within(&mut child, Duration::from_secs(10), signal);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "SIG{signal}: {err}");
        assert!(err.contains("INTERRUPTED"), "SIG{signal}: {err}");
        // The cleanup looked for this run's containers (twice: a dropped create may land late).
        let lists = engine
            .seen()
            .iter()
            .filter(|r| r.contains("/containers/json"))
            .count();
        assert!(lists >= 2, "SIG{signal}: {:?}", engine.seen());
    }
}

#[test]
fn a_second_signal_during_cleanup_ends_the_process_at_once_naming_the_container() {
    let dir = tempdir();
    let file = dir.path().join("expect.json");
    std::fs::write(&file, "{}").unwrap();
    // The cleanup's listing stalls too, as on a dying engine.
    for (first, second, code) in [
        ("INT", "INT", 130),
        ("HUP", "QUIT", 131),
        ("TERM", "TERM", 143),
    ] {
        let engine = FakeEngine::start(vec![image_answer()]);
        let mut child = test_stalled_at_create(&engine, &file);
        kill(&child, first);
        engine.wait_for("/containers/json", Duration::from_secs(10));
        let sent = Instant::now();
        kill(&child, second);
        let out = wait_within(&mut child, Duration::from_secs(5), "after a second signal");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(code), "{first}+{second}: {err}");
        assert!(sent.elapsed() < Duration::from_secs(3), "{err}");
        assert!(
            err.contains(&format!("SIG{second} again"))
                && err.contains("`envbuild-smoke-")
                && err.contains("may remain")
                && err.contains("docker rm -f"),
            "{first}+{second}: {err}"
        );
    }
}

#[test]
fn a_signal_during_doctors_gpu_probe_removes_the_probe_container() {
    for signal in ["HUP", "QUIT"] {
        let engine = FakeEngine::start(vec![
            (
                "/info",
                200,
                r#"{"ID":"fake","Runtimes":{"runc":{}}}"#.into(),
            ),
            ("/containers/json", 200, "[]".into()),
        ]);
        let mut child = envbuild_at(&engine, "30")
            .args(["doctor", "--image", "envbuild-fake:1"])
            .env("ENVBUILD_NO_NVML", "1")
            .env("ENVBUILD_NVIDIA_SMI", "/nonexistent/nvidia-smi")
            .spawn()
            .unwrap();
        engine.wait_for(
            "/containers/create?name=envbuild-gpu-probe-",
            Duration::from_secs(20),
        );
        kill(&child, signal);
        let out = wait_within(&mut child, Duration::from_secs(10), signal);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "SIG{signal}: {err}");
        assert!(
            err.contains("INTERRUPTED") && err.contains("GPU probe"),
            "{err}"
        );
        let lists = engine
            .seen()
            .iter()
            .filter(|r| r.contains("/containers/json"))
            .count();
        assert!(lists >= 2, "SIG{signal}: {:?}", engine.seen());
    }
}

#[test]
fn a_stalled_pull_is_cut_after_its_idle_limit_naming_the_image() {
    // Every inspect says "no such image", so `image` pulls the spec's base (`--pull missing`);
    // the pull's answer never comes. Short limit 0.1 s: the pull may stay silent for 6 s.
    let engine = FakeEngine::start(vec![(
        "/json",
        404,
        r#"{"message":"No such image"}"#.into(),
    )]);
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let started = Instant::now();
    let mut child = envbuild_at(&engine, "0.1")
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none"])
        .env("CI", "1")
        .spawn()
        .unwrap();
    let out = wait_within(&mut child, Duration::from_secs(30), "envbuild image");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(6), "{err}");
    assert!(
        err.contains("ENGINE_TIMEOUT")
            && err.contains("sent nothing for 6s while pulling `python:3.12"),
        "{err}"
    );
    assert!(engine.seen().iter().any(|r| r.contains("/images/create")));
}
