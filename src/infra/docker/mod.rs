//! The Docker engine edge: connecting, building and running smoke-test containers through the
//! Docker Engine API (bollard). This is the only module that imports bollard, and every
//! submodule except [`context`] and `errors` performs network I/O against the engine.
//!
//! The engine is found like the `docker` CLI finds it: `DOCKER_HOST` (`unix://`, `tcp://`,
//! `https://` or `tcp://` with `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`, `ssh://`), else the local
//! socket. Every engine error is turned into a coded [`Failure`] with a hint here, so the
//! commands never see a bollard type.

pub mod build;
pub mod context;
pub(crate) mod errors;
pub mod gpu_probe;
pub mod images;
pub mod limits;
pub mod registry;
pub mod run;

use crate::core::diag::{Diagnostic, Failure};
use bollard::Docker;
pub(crate) use errors::{engine_error, is_not_found, short_error};
use std::time::Duration;

/// Diagnostic codes of the engine layer, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::docker::*;
}

/// Container labels envbuild sets (and filters on). The image labels are the ones the rendered
/// Dockerfile writes: `core::render::LABEL_*`.
pub mod labels {
    /// On every smoke-test container, so leftovers can be found with a label filter.
    pub const SMOKE: &str = "dev.envbuild.smoke";
    /// The per-run id on smoke-test containers.
    pub const RUN_ID: &str = "dev.envbuild.run";
}

/// A connected engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) docker: Docker,
    /// Where the engine was found, for messages (`unix:///var/run/docker.sock`, ...).
    pub host: String,
    /// How long each kind of call may take.
    pub limits: limits::Limits,
    /// The engine's `/version` answer, asked once: the builder choice, the build platform and
    /// the verdict's engine note all read it, for every platform and variant of a run.
    version: tokio::sync::OnceCell<Result<bollard::models::SystemVersion, String>>,
}

impl Engine {
    /// The engine's `/version` answer, asked at most once per connection: `Err` holds the
    /// engine's refusal in short. A stalled engine is `ENGINE_TIMEOUT` (and not remembered).
    pub(crate) async fn version(
        &self,
    ) -> Result<&Result<bollard::models::SystemVersion, String>, Failure> {
        self.version
            .get_or_try_init(|| async {
                let answer = self
                    .call(
                        limits::Call::Short,
                        || "reading the engine's version".into(),
                        self.docker.version(),
                    )
                    .await?;
                Ok(answer.map_err(|e| short_error(&e)))
            })
            .await
    }

    /// Run one engine call under the limit for its kind; `doing` names it for `ENGINE_TIMEOUT`
    /// ("inspecting image `x`").
    pub(crate) async fn call<T>(
        &self,
        call: limits::Call,
        doing: impl FnOnce() -> String,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, Failure> {
        self.limits.run(call, &self.host, doing, fut).await
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("host", &self.host).finish()
    }
}

/// bollard's own timeout, only a backstop: every call runs under its own limit
/// ([`limits`]), and a build or a wait streams for longer than any one limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);

fn unreachable_hint() -> String {
    "start the Docker engine (`sudo systemctl start docker`, or `dockerd &`), or point \
     DOCKER_HOST at a reachable one (unix:///path, tcp://host:2376 with DOCKER_TLS_VERIFY=1 and \
     DOCKER_CERT_PATH, ssh://user@host)"
        .to_string()
}

/// Connect to the engine named by `DOCKER_HOST` (or the local socket) and check that it answers.
pub async fn connect() -> Result<Engine, Failure> {
    let limits = limits::Limits::from_env()?;
    build::builder::forced()?;
    build::builder::wheels_forced()?;
    // A silent engine at this point is an unreachable one, not a stalled one.
    let ping_limit = limits.ping();
    let host = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string());
    // An empty DOCKER_HOST means "the default", as for the docker CLI; bollard would refuse it.
    let docker = if std::env::var("DOCKER_HOST").is_ok_and(|h| !h.is_empty()) {
        Docker::connect_with_defaults()
    } else {
        Docker::connect_with_host(&host)
    }
    .map_err(|e| {
        Failure::one(
            Diagnostic::error(
                codes::ENGINE_UNREACHABLE,
                format!(
                    "cannot use the Docker engine at `{host}`: {}",
                    short_error(&e)
                ),
            )
            .with_hint(unreachable_hint()),
        )
    })?
    .with_timeout(REQUEST_TIMEOUT);
    match tokio::time::timeout(ping_limit, docker.ping()).await {
        Ok(Ok(_)) => Ok(Engine {
            docker,
            host,
            limits,
            version: tokio::sync::OnceCell::new(),
        }),
        Ok(Err(e)) => Err(Failure::one(
            Diagnostic::error(
                codes::ENGINE_UNREACHABLE,
                format!(
                    "the Docker engine at `{host}` does not answer: {}",
                    short_error(&e)
                ),
            )
            .with_hint(unreachable_hint()),
        )),
        Err(_) => Err(Failure::one(
            Diagnostic::error(
                codes::ENGINE_UNREACHABLE,
                format!(
                    "the Docker engine at `{host}` did not answer within {}",
                    limits::secs(ping_limit)
                ),
            )
            .with_hint(unreachable_hint()),
        )),
    }
}

/// The engine's own id (`docker info`'s `ID`): another engine, even at the same socket path,
/// has another. `None` when the engine does not say.
pub async fn engine_id(engine: &Engine) -> Option<String> {
    let info = engine
        .call(
            limits::Call::Short,
            || "reading the engine's info".into(),
            engine.docker.info(),
        )
        .await
        .ok()?
        .ok()?;
    info.id.filter(|id| !id.trim().is_empty())
}

/// Whether the engine runs on this machine (a `unix://` socket), so that this machine's driver
/// and GPUs are the ones its containers get.
pub fn is_local(engine: &Engine) -> bool {
    engine.host.starts_with("unix://")
}

/// The driver and GPUs the engine's containers get, from this machine's probes; `None` for an
/// engine elsewhere, whose machine cannot be probed from here.
pub async fn host_gpu_identity(engine: &Engine) -> Option<crate::core::host::GpuIdentity> {
    if !is_local(engine) {
        return None;
    }
    let cfg = crate::infra::host::ProbeConfig::from_env();
    // NVML and nvidia-smi block (nvidia-smi up to its time limit): off the async workers.
    tokio::task::spawn_blocking(move || crate::infra::host::gpu_identity(&cfg))
        .await
        .ok()
}

/// A new id for one run's containers: unique enough to tell concurrent runs apart. With
/// `ENVBUILD_RUN_ID=PREFIX` (letters, digits, `-`, `_`, `.`; at most 64) it is `PREFIX-<id>`, so
/// a CI job can find and clean up its own containers on a shared engine.
pub fn new_run_id() -> String {
    let id = random_id();
    match std::env::var("ENVBUILD_RUN_ID") {
        Ok(p) if valid_run_prefix(&p) => format!("{p}-{id}"),
        _ => id,
    }
}

fn valid_run_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn random_id() -> String {
    use sha2::{Digest, Sha256};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!("{}-{}", std::process::id(), nanos);
    crate::core::hash::hex(&Sha256::digest(seed.as_bytes()))[..16].to_string()
}

/// A tokio runtime for one command. Two worker threads are plenty for one engine connection.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::bug(format!("cannot start the async runtime: {e}")))
}

/// The engine's version (`docker version`'s server version), `None` when it does not say.
pub async fn engine_version(engine: &Engine) -> Option<String> {
    let v = engine.version().await.ok()?.as_ref().ok()?;
    v.version.clone().filter(|v| !v.trim().is_empty())
}
