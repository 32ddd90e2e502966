//! The smoke-test container's lifecycle: create it (labelled, exec-form command, the engine's
//! init as PID 1, GPU request, shared memory, no network), copy the embedded script and
//! expectations in, start it, wait under a time limit, read its report, and remove it on every
//! path: success, failure, timeout and interruption. Performs network I/O against the engine.

use super::context::{deterministic_tar, TarFile};
use super::errors::{gpu_refusal, image_not_found, refused};
use super::limits::Call;
use super::{codes, engine_error, is_not_found, labels, short_error, Engine};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::smoke::codes as smoke_codes;
use crate::core::smoke::{Expectations, Mode, SmokeReport, IMAGE_EXPECT_PATH, IMAGE_SCRIPT_PATH};
use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    ListContainersOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures_util::future::{BoxFuture, FutureExt, Shared};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One smoke-test run in a container from an image (`envbuild smoke` runs the script with an
/// interpreter instead: `app::smoke::PythonSmokeRequest`).
#[derive(Debug, Clone)]
pub struct ContainerSmokeRequest {
    pub image: String,
    /// Copied in as the expectations file; `None` uses the one the image carries.
    pub expectations: Option<Expectations>,
    /// Copied in as the script; `None` uses the one the image carries.
    pub script: Option<Vec<u8>>,
    pub mode: Mode,
    /// Request every GPU (`docker run --gpus all`).
    pub gpus: bool,
    /// `/dev/shm` size in bytes (DataLoader workers share tensors through it).
    pub shm_bytes: i64,
    pub timeout: Duration,
    /// Labels the container (`dev.envbuild.run`) so this run's leftovers can be found.
    pub run_id: String,
}

/// What the smoke container produced.
#[derive(Debug, Clone)]
pub struct SmokeOutcome {
    pub report: SmokeReport,
    pub exit_code: i64,
    /// The last lines the script wrote to stderr.
    pub stderr_tail: String,
    pub elapsed: Duration,
}

/// Resolves when the user interrupts (SIGINT, Ctrl-C), the terminal goes away (SIGHUP), CI
/// cancels (SIGTERM) or the user quits (SIGQUIT).
pub type Interrupt = Shared<BoxFuture<'static, ()>>;

/// The signals that interrupt a run, with their numbers (for the exit status `128 + n`).
const SIGNALS: [(&str, i32); 4] = [
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGTERM", 15),
];

/// Install the SIGINT/SIGTERM/SIGHUP/SIGQUIT handlers; from now on the first such signal no
/// longer kills the process, it resolves the returned future, and the command cleans up and
/// exits with `INTERRUPTED`. A second signal is not swallowed: it ends the process at once
/// (exit `128 + signal`), saying which containers may remain. Must be called inside the tokio
/// runtime.
pub fn install_interrupt() -> Result<Interrupt, Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut streams = Vec::new();
    for (name, number) in SIGNALS {
        let s = signal(SignalKind::from_raw(number))
            .map_err(|e| Failure::bug(format!("cannot install the {name} handler: {e}")))?;
        streams.push(s);
    }
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        next_signal(&mut streams).await;
        let _ = first_tx.send(());
        let (name, number) = next_signal(&mut streams).await;
        second_signal(name, number)
    });
    Ok(async move {
        // A dropped sender (the runtime is shutting down) also ends the wait.
        let _ = first_rx.await;
    }
    .boxed()
    .shared())
}

/// The next of the [`SIGNALS`] to arrive.
async fn next_signal(streams: &mut [tokio::signal::unix::Signal]) -> (&'static str, i32) {
    let [hup, int, quit, term] = streams else {
        unreachable!("one stream per signal")
    };
    tokio::select! {
        _ = hup.recv() => SIGNALS[0],
        _ = int.recv() => SIGNALS[1],
        _ = quit.recv() => SIGNALS[2],
        _ = term.recv() => SIGNALS[3],
    }
}

/// A second signal while the first is being handled: the user means it. End now, saying what
/// the unfinished cleanup may have left.
fn second_signal(name: &str, number: i32) -> ! {
    use std::io::Write;
    let mut msg = format!("envbuild: {name} again: stopping without finishing the cleanup\n");
    for (run_id, name) in live_runs() {
        msg.push_str(&format!(
            "envbuild: the container `{name}` (label {label}={run_id}) may remain: docker rm -f \
             $(docker ps -aq --filter label={label}={run_id})\n",
            label = labels::RUN_ID,
        ));
    }
    let _ = std::io::stderr().write_all(msg.as_bytes());
    std::process::exit(128 + number)
}

/// The run ids whose container may exist right now (created, not yet removed), with the
/// container's name.
static LIVE_RUNS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

fn live_runs() -> Vec<(String, String)> {
    let map = LIVE_RUNS.lock().unwrap_or_else(|p| p.into_inner());
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// While alive, the container `name` of `run_id` counts as possibly existing (for the message
/// of a second signal).
pub(crate) struct LiveRun(String);

impl LiveRun {
    pub(crate) fn new(run_id: &str, name: &str) -> LiveRun {
        if let Ok(mut map) = LIVE_RUNS.lock() {
            map.insert(run_id.to_string(), name.to_string());
        }
        LiveRun(run_id.to_string())
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        if let Ok(mut map) = LIVE_RUNS.lock() {
            map.remove(&self.0);
        }
    }
}

/// The `INTERRUPTED` failure.
pub fn interrupted(during: &str) -> Failure {
    Failure::one(
        Diagnostic::error(codes::INTERRUPTED, format!("interrupted during {during}"))
            .with_hint("nothing was left running: the smoke container (if any) was removed"),
    )
}

/// Most bytes of container output kept (a report is a few KiB; a runaway log is cut).
const MAX_LOG_BYTES: usize = 8 * 1024 * 1024;
const STDERR_TAIL_LINES: usize = 20;

/// The command the container runs: exec form, no shell, nothing interpolated.
pub fn smoke_cmd(mode: Mode) -> Vec<String> {
    vec![
        "python3".into(),
        IMAGE_SCRIPT_PATH.into(),
        "--expect".into(),
        IMAGE_EXPECT_PATH.into(),
        "--mode".into(),
        mode.as_str().into(),
    ]
}

/// `docker run --gpus all`, as the Engine API spells it.
pub fn gpu_request() -> DeviceRequest {
    DeviceRequest {
        driver: Some(String::new()),
        count: Some(-1),
        capabilities: Some(vec![vec!["gpu".to_string()]]),
        ..Default::default()
    }
}

/// The tar copied into the container's `/`: script and/or expectations under `/opt/envbuild`.
fn payload(req: &ContainerSmokeRequest) -> Result<Option<Vec<u8>>, Failure> {
    let expectations = match &req.expectations {
        Some(exp) => Some(
            serde_json::to_vec_pretty(exp)
                .map_err(|e| Failure::bug(format!("cannot serialise expectations: {e}")))?,
        ),
        None => None,
    };
    let mut files: BTreeMap<&str, TarFile<'_>> = BTreeMap::new();
    if let Some(script) = &req.script {
        files.insert(rel(IMAGE_SCRIPT_PATH), (0o755, script));
    }
    if let Some(json) = &expectations {
        files.insert(rel(IMAGE_EXPECT_PATH), (0o644, json));
    }
    if files.is_empty() {
        return Ok(None);
    }
    deterministic_tar(&files, "the smoke payload").map(Some)
}

/// An absolute path in the image as a tar entry name (relative to `/`).
fn rel(path: &str) -> &str {
    path.trim_start_matches('/')
}

/// The ids of every container (running or not) carrying `key=value`.
pub async fn containers_with_label(engine: &Engine, label: &str) -> Result<Vec<String>, Failure> {
    let mut filters: HashMap<String, Vec<String>> = HashMap::new();
    filters.insert("label".into(), vec![label.to_string()]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let list = engine
        .call(
            Call::Short,
            || format!("listing the containers labelled {label}"),
            engine.docker.list_containers(Some(opts)),
        )
        .await?
        .map_err(|e| engine_error("cannot list containers", &e))?;
    Ok(list.into_iter().filter_map(|c| c.id).collect())
}

/// Force-remove every container of this run. Errors are reported, but only after every
/// container was tried.
pub async fn remove_run_containers(engine: &Engine, run_id: &str) -> Result<(), Failure> {
    let ids = containers_with_label(engine, &format!("{}={run_id}", labels::RUN_ID)).await?;
    let mut first_err = None;
    for id in ids {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        let short = &id[..12.min(id.len())];
        let removed = engine
            .call(
                Call::Short,
                || format!("removing container {short}"),
                engine.docker.remove_container(&id, Some(opts)),
            )
            .await?;
        if let Err(e) = removed {
            if !is_not_found(&e) && first_err.is_none() {
                first_err = Some(engine_error(
                    &format!("cannot remove smoke container {short}"),
                    &e,
                ));
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Most bytes read back of one file from an image (an expectations file is a few hundred).
const MAX_IMAGE_FILE_BYTES: usize = 1 << 20;

/// The regular file at `path` in `image`, read from a container that is created and never
/// started (nothing in the image runs); `None` when the image has no such file. The container
/// is labelled with `run_id`, like smoke containers, and removed before this returns.
pub async fn read_image_file(
    engine: &Engine,
    image: &str,
    path: &str,
    run_id: &str,
) -> Result<Option<Vec<u8>>, Failure> {
    let mut container_labels = HashMap::new();
    container_labels.insert(labels::SMOKE.to_string(), "1".to_string());
    container_labels.insert(labels::RUN_ID.to_string(), run_id.to_string());
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        // Never started: a command is only needed for the engine to accept the container.
        entrypoint: Some(vec!["true".into()]),
        cmd: Some(vec![]),
        labels: Some(container_labels),
        network_disabled: Some(true),
        ..Default::default()
    };
    let name = format!("envbuild-read-{run_id}");
    let _live = LiveRun::new(run_id, &name);
    let opts = CreateContainerOptionsBuilder::default().name(&name).build();
    let create = engine.docker.create_container(Some(opts), body);
    let created = engine
        .call(
            Call::Container,
            || format!("creating a container to read `{path}` from image `{image}`"),
            create,
        )
        .await;
    let created = match created {
        Err(f) => {
            // A create that timed out may still land: look for it before reporting.
            let _ = cleanup_run(engine, run_id, true).await;
            return Err(f);
        }
        Ok(c) => c,
    };
    let created = match created {
        Ok(c) => c,
        Err(e) if is_not_found(&e) => return Err(image_not_found(image, &engine.host)),
        Err(e) => {
            return Err(engine_error(
                "cannot create a container to read the image",
                &e,
            ))
        }
    };
    let read = engine
        .call(
            Call::Short,
            || format!("reading `{path}` from image `{image}`"),
            download_file(engine, &created.id, path),
        )
        .await
        .and_then(|r| r);
    let removed = cleanup_run(engine, run_id, read.is_err()).await;
    let file = read?;
    removed?;
    Ok(file)
}

/// One regular file out of a container's filesystem (`docker cp`), at most
/// [`MAX_IMAGE_FILE_BYTES`]; `None` when the path does not exist or is not a regular file.
async fn download_file(engine: &Engine, id: &str, path: &str) -> Result<Option<Vec<u8>>, Failure> {
    let opts = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut stream = engine.docker.download_from_container(id, Some(opts));
    let mut tar_bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => tar_bytes.extend_from_slice(&b),
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => {
                return Err(engine_error(
                    &format!("cannot read `{path}` from the image"),
                    &e,
                ))
            }
        }
        // A tar of one small file: anything far larger is not the file being asked for.
        if tar_bytes.len() > MAX_IMAGE_FILE_BYTES + 64 * 1024 {
            return Ok(None);
        }
    }
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    let Ok(mut entries) = archive.entries() else {
        return Ok(None);
    };
    let Some(Ok(mut entry)) = entries.next() else {
        return Ok(None);
    };
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Ok(None);
    }
    let mut data = Vec::new();
    use std::io::Read;
    match entry.read_to_end(&mut data) {
        Ok(_) if data.len() <= MAX_IMAGE_FILE_BYTES => Ok(Some(data)),
        _ => Ok(None),
    }
}

/// Run the smoke test in a fresh container and remove the container whatever happens.
pub async fn run_smoke(
    engine: &Engine,
    req: &ContainerSmokeRequest,
    interrupt: Interrupt,
) -> Result<SmokeOutcome, Failure> {
    let started = Instant::now();
    let live = LiveRun::new(&req.run_id, &smoke_container_name(&req.run_id));
    let result = tokio::select! {
        r = run_inner(engine, req, started) => r,
        _ = tokio::time::sleep(req.timeout) => {
            let tail = stderr_tail_of_run(engine, &req.run_id).await;
            Err(Failure::one(
                Diagnostic::error(
                    smoke_codes::TIMEOUT,
                    format!(
                        "the smoke test in `{}` did not finish within {}s{}",
                        req.image,
                        req.timeout.as_secs(),
                        if tail.is_empty() { String::new() } else { format!("\n  last stderr lines:\n{tail}") }
                    ),
                )
                .with_hint("a hung CUDA call or NCCL init is the usual cause; raise --timeout if the image is just slow"),
            ))
        }
        _ = interrupt => Err(interrupted("the smoke test")),
    };
    // Always, whatever the branch above: a dropped future may have left a created container.
    let cleanup = cleanup_run(engine, &req.run_id, result.is_err()).await;
    drop(live);
    match (result, cleanup) {
        (Ok(o), Ok(())) => Ok(o),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(mut e), Err(c)) => {
            // "Nothing was left running" would be wrong: say what was not removed.
            for d in &mut e.diagnostics {
                if d.code == codes::INTERRUPTED {
                    d.hint = None;
                }
            }
            e.diagnostics.extend(c.diagnostics);
            Err(e)
        }
    }
}

/// Remove every container of `run_id`, bounded so that a dead engine cannot make the command
/// hang (after a Ctrl-C, say). After a failure (`look_again`), a create request dropped
/// mid-flight may still land on the engine, so it looks a second time. On failure the hint
/// says how to remove them by hand.
pub async fn cleanup_run(engine: &Engine, run_id: &str, look_again: bool) -> Result<(), Failure> {
    let cleanup = async {
        remove_run_containers(engine, run_id).await?;
        if look_again {
            tokio::time::sleep(Duration::from_millis(300)).await;
            remove_run_containers(engine, run_id).await?;
        }
        Ok(())
    };
    let limit = engine.limits.of(Call::Container);
    let result = match tokio::time::timeout(limit, cleanup).await {
        Ok(r) => r,
        Err(_) => Err(super::limits::timed_out(
            &engine.host,
            "removing the smoke container",
            Call::Container,
            limit,
        )),
    };
    result.map_err(|mut f| {
        let by_hand = format!(
            "the container may remain; remove it by hand: docker rm -f $(docker ps -aq --filter \
             label={}={run_id})",
            labels::RUN_ID,
        );
        if let Some(d) = f.diagnostics.first_mut() {
            d.hint = Some(match d.hint.take() {
                Some(h) => format!("{by_hand}; {h}"),
                None => by_hand,
            });
        }
        f
    })
}

async fn stderr_tail_of_run(engine: &Engine, run_id: &str) -> String {
    let Ok(ids) = containers_with_label(engine, &format!("{}={run_id}", labels::RUN_ID)).await
    else {
        return String::new();
    };
    let Some(id) = ids.first() else {
        return String::new();
    };
    match tokio::time::timeout(Duration::from_secs(5), read_logs(engine, id)).await {
        Ok(Ok((_, err))) => tail_lines(&err),
        _ => String::new(),
    }
}

fn tail_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
    lines[start..]
        .iter()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn read_logs(engine: &Engine, id: &str) -> Result<(String, String), Failure> {
    let opts = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .follow(false)
        .build();
    let mut stream = engine.docker.logs(id, Some(opts));
    let mut out = Vec::new();
    let mut err = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                if out.len() < MAX_LOG_BYTES {
                    out.extend_from_slice(&message);
                }
            }
            Ok(bollard::container::LogOutput::StdErr { message }) => {
                if err.len() < MAX_LOG_BYTES {
                    err.extend_from_slice(&message);
                }
            }
            Ok(_) => {}
            Err(e) => {
                // A truncated log still may hold the report; only fail with nothing at all.
                if out.is_empty() && err.is_empty() {
                    return Err(engine_error("cannot read the smoke container's output", &e));
                }
                break;
            }
        }
    }
    Ok((
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    ))
}

async fn run_inner(
    engine: &Engine,
    req: &ContainerSmokeRequest,
    started: Instant,
) -> Result<SmokeOutcome, Failure> {
    let id = create_container(engine, req).await?;
    if let Some(tar) = payload(req)? {
        let opts = UploadToContainerOptionsBuilder::default().path("/").build();
        let upload =
            engine
                .docker
                .upload_to_container(&id, Some(opts), bollard::body_full(tar.into()));
        engine
            .call(
                Call::Container,
                || "copying the smoke test into the container".into(),
                upload,
            )
            .await?
            .map_err(|e| engine_error("cannot copy the smoke test into the container", &e))?;
    }
    start_container(engine, req, &id).await?;
    let exit_code = wait_exit(engine, &id).await?;
    let (stdout, stderr) = engine
        .call(
            Call::Container,
            || "reading the smoke container's output".into(),
            read_logs(engine, &id),
        )
        .await??;
    let stderr_tail = tail_lines(&stderr);
    let report = read_report(req, exit_code, &stdout, &stderr, &stderr_tail)?;
    Ok(SmokeOutcome {
        report,
        exit_code,
        stderr_tail,
        elapsed: started.elapsed(),
    })
}

fn smoke_container_name(run_id: &str) -> String {
    format!("envbuild-smoke-{run_id}")
}

/// Create the labelled smoke container (not started); its id.
async fn create_container(engine: &Engine, req: &ContainerSmokeRequest) -> Result<String, Failure> {
    let mut container_labels = HashMap::new();
    container_labels.insert(labels::SMOKE.to_string(), "1".to_string());
    container_labels.insert(labels::RUN_ID.to_string(), req.run_id.clone());
    let host_config = HostConfig {
        shm_size: Some(req.shm_bytes),
        device_requests: req.gpus.then(|| vec![gpu_request()]),
        // The smoke test needs no network; without one it cannot depend on one.
        network_mode: Some("none".into()),
        // The engine's init (`docker run --init`) as PID 1: a signal a process sends itself is
        // ignored by a container's PID 1, so qemu-user re-raising an emulated program's fatal
        // signal hung until the time limit instead of failing at once; it also reaps workers.
        init: Some(true),
        ..Default::default()
    };
    let body = ContainerCreateBody {
        image: Some(req.image.clone()),
        // The smoke command replaces the image's own ENTRYPOINT (`docker run --entrypoint`),
        // which would otherwise run with the command as its arguments; an empty `cmd` keeps
        // the image's CMD from being appended.
        entrypoint: Some(smoke_cmd(req.mode)),
        cmd: Some(vec![]),
        labels: Some(container_labels),
        env: Some(vec!["PYTHONUNBUFFERED=1".into()]),
        host_config: Some(host_config),
        ..Default::default()
    };
    let name = smoke_container_name(&req.run_id);
    let opts = CreateContainerOptionsBuilder::default().name(&name).build();
    let create = engine.docker.create_container(Some(opts), body);
    let created = engine
        .call(
            Call::Container,
            || format!("creating the smoke container for `{}`", req.image),
            create,
        )
        .await?;
    match created {
        Ok(created) => Ok(created.id),
        Err(e) if is_not_found(&e) => Err(image_not_found(&req.image, &engine.host)),
        Err(e) => Err(match refusal_failure(engine, &short_error(&e)).await {
            Some(f) => f,
            None => engine_error("cannot create the smoke container", &e),
        }),
    }
}

/// The coded failure when `msg` is the engine refusing a GPU (`errors::gpu_refusal`), naming
/// this machine's driver when the engine runs here.
async fn refusal_failure(engine: &Engine, msg: &str) -> Option<Failure> {
    let refusal = gpu_refusal(msg)?;
    let driver = match refusal {
        super::errors::GpuRefusal::NoRuntime => None,
        _ => super::host_gpu_identity(engine)
            .await
            .and_then(|id| id.driver),
    };
    Some(refused(&refusal, &engine.host, msg, driver.as_deref()))
}

async fn start_container(
    engine: &Engine,
    req: &ContainerSmokeRequest,
    id: &str,
) -> Result<(), Failure> {
    let start = engine
        .docker
        .start_container(id, None::<bollard::query_parameters::StartContainerOptions>);
    let started = engine
        .call(
            Call::Container,
            || "starting the smoke container".into(),
            start,
        )
        .await?;
    let Err(e) = started else {
        return Ok(());
    };
    let msg = short_error(&e);
    if let Some(f) = refusal_failure(engine, &msg).await {
        return Err(f);
    }
    Err(if msg.contains("executable file not found") {
        Failure::one(
            Diagnostic::error(
                smoke_codes::PYTHON_NOT_FOUND,
                format!(
                    "the smoke test cannot run in `{}`: the image has no `python3` on its PATH",
                    req.image
                ),
            )
            .with_hint(
                "the smoke test runs the image's own Python: install python3 in the image (or \
                 use a base that has it)",
            ),
        )
    } else {
        engine_error("cannot start the smoke container", &e)
    })
}

/// Wait for the container to end; its exit status.
async fn wait_exit(engine: &Engine, id: &str) -> Result<i64, Failure> {
    let mut wait = engine.docker.wait_container(id, None);
    match wait.next().await {
        Some(Ok(r)) => Ok(r.status_code),
        // bollard reports a non-zero exit as an error carrying the code.
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(e)) => Err(engine_error("waiting for the smoke container failed", &e)),
        None => Err(Failure::one(Diagnostic::error(
            codes::ENGINE_ERROR,
            "the engine closed the wait for the smoke container without an exit status",
        ))),
    }
}

/// The report in what the container printed, or why there is none.
fn read_report(
    req: &ContainerSmokeRequest,
    exit_code: i64,
    stdout: &str,
    stderr: &str,
    stderr_tail: &str,
) -> Result<SmokeReport, Failure> {
    if exit_code == 127 && stdout.trim().is_empty() {
        return Err(Failure::one(
            Diagnostic::error(
                smoke_codes::PYTHON_NOT_FOUND,
                format!(
                    "the smoke test cannot run in `{}`: `python3` was not found (exit 127){}",
                    req.image,
                    if stderr_tail.is_empty() {
                        String::new()
                    } else {
                        format!("\n  last stderr lines:\n{stderr_tail}")
                    }
                ),
            )
            .with_hint("the smoke test runs the image's own Python: install python3 in the image"),
        ));
    }
    // The same parser as `envbuild smoke`: one schema-1 document, verdict and exit code agreeing.
    let code = i32::try_from(exit_code).ok();
    crate::core::smoke::parse_output(stdout, stderr, code).map_err(|mut f| {
        for d in &mut f.diagnostics {
            d.message = format!("in `{}`: {}", req.image, d.message);
        }
        f
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_is_exec_form_without_a_shell() {
        let cmd = smoke_cmd(Mode::Cpu);
        assert_eq!(cmd[0], "python3");
        assert_eq!(cmd.last().unwrap(), "cpu");
        assert!(!cmd.iter().any(|a| a == "sh" || a == "-c"));
    }

    #[test]
    fn gpu_request_is_gpus_all() {
        let r = gpu_request();
        assert_eq!(r.count, Some(-1));
        assert_eq!(r.capabilities, Some(vec![vec!["gpu".to_string()]]));
    }

    #[test]
    fn payload_has_dirs_and_files() {
        let req = ContainerSmokeRequest {
            image: "x".into(),
            expectations: Some(Expectations::default()),
            script: Some(b"print(1)".to_vec()),
            mode: Mode::Cpu,
            gpus: false,
            shm_bytes: 1,
            timeout: Duration::from_secs(1),
            run_id: "r".into(),
        };
        let tar = payload(&req).unwrap().unwrap();
        let mut a = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec![
                "opt/",
                "opt/envbuild/",
                "opt/envbuild/envbuild_smoke.py",
                "opt/envbuild/expect.json"
            ]
        );
    }
}
