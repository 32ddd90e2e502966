//! Reading the engine's errors: its own message without bollard's wrapper text, whether an
//! answer means "not found", the one classifier of GPU refusals that the smoke run and the
//! doctor's GPU probe share, and the messages for a base image the engine lacks (with the way
//! forward on a machine that reaches no registry). Builds coded [`Failure`]s; performs no I/O.

use super::codes;
use crate::core::diag::{Diagnostic, Failure};

/// An engine call failed in a way envbuild has no specific advice for.
pub(crate) fn engine_error(what: &str, err: &bollard::errors::Error) -> Failure {
    Failure::one(
        Diagnostic::error(codes::ENGINE_ERROR, format!("{what}: {}", short_error(err)))
            .with_hint("check the engine's health with `docker info`, and its log"),
    )
}

/// The engine's own message where there is one, without bollard's wrapper text.
pub(crate) fn short_error(err: &bollard::errors::Error) -> String {
    use bollard::errors::Error as E;
    match err {
        E::DockerResponseServerError { message, .. } => message.trim().to_string(),
        E::DockerStreamError { error } => error.trim().to_string(),
        other => with_causes(other),
    }
}

/// An error and its causes (`client error (Connect): Connection refused (os error 111)`):
/// the innermost cause is usually the one a person can act on.
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Whether the error is the engine's "no such image/container" answer.
pub(crate) fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// `IMAGE_NOT_FOUND`: the engine at `host` has no `image`.
pub(crate) fn image_not_found(image: &str, host: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            codes::IMAGE_NOT_FOUND,
            format!("image `{image}` is not present on the engine at `{host}`"),
        )
        .with_hint("build it with `envbuild image SPEC`, or load it (`docker load -i image.tar`)"),
    )
}

/// Why the engine would not give a container the GPU it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GpuRefusal {
    /// No way to give GPUs at all: no NVIDIA Container Toolkit, no CDI devices, an
    /// unregistered runtime, or a toolkit that cannot reach the driver.
    NoRuntime,
    /// The runtime works, but the image's own requirement (`NVIDIA_REQUIRE_CUDA`) on the
    /// driver is not met: `cuda>=12.4` (or `driver>=...`), as the toolkit wrote it.
    DriverTooOld { condition: String },
    /// The image requires something else of the GPUs (`arch>=8.0`, `brand=tesla`).
    Requirement { condition: String },
}

/// Classify an engine message: `None` for a failure that has nothing to do with GPUs. The one
/// place that reads these messages, for the smoke run and for `doctor`'s probe alike.
pub(crate) fn gpu_refusal(msg: &str) -> Option<GpuRefusal> {
    let m = msg.to_ascii_lowercase();
    if let Some(condition) = unsatisfied_condition(msg) {
        let c = condition.to_ascii_lowercase();
        return Some(if c.starts_with("cuda") || c.starts_with("driver") {
            GpuRefusal::DriverTooOld { condition }
        } else {
            GpuRefusal::Requirement { condition }
        });
    }
    let no_runtime = m.contains("could not select device driver")
        || m.contains("nvidia-container-cli")
        || m.contains("unknown or invalid runtime")
        || m.contains("unresolvable cdi devices");
    no_runtime.then_some(GpuRefusal::NoRuntime)
}

/// The condition in nvidia-container-cli's `requirement error: unsatisfied condition: cuda>=12.4,
/// please update your driver ...`, up to the comma, the line's end or the quoting that engines
/// and shells wrap around it (`cuda >= 9.0\\n\"`).
fn unsatisfied_condition(msg: &str) -> Option<String> {
    const KEY: &str = "unsatisfied condition:";
    let at = msg.to_ascii_lowercase().find(KEY)? + KEY.len();
    let rest = &msg[at..];
    let end = rest
        .find([',', '\n', '\r', '\\', '"'])
        .unwrap_or(rest.len());
    let condition = rest[..end].trim();
    (!condition.is_empty()).then(|| condition.to_string())
}

/// The failure for a refusal of `gpu_refusal`: `NO_GPU_RUNTIME`, or `CUDA_DRIVER_TOO_OLD`
/// naming the image's requirement and the host's `driver` when known.
pub(crate) fn refused(
    refusal: &GpuRefusal,
    host: &str,
    msg: &str,
    driver: Option<&str>,
) -> Failure {
    let driver = driver.map_or_else(
        || "the engine host's driver".to_string(),
        |d| format!("driver {d}"),
    );
    match refusal {
        GpuRefusal::NoRuntime => no_gpu_runtime(host, msg),
        GpuRefusal::DriverTooOld { condition } => Failure::one(
            Diagnostic::error(
                codes::CUDA_DRIVER_TOO_OLD,
                format!(
                    "the image requires `{condition}` (its NVIDIA_REQUIRE_CUDA), which {driver} \
                     on the engine at `{host}` does not meet: the NVIDIA runtime refused to start it"
                ),
            )
            .with_hint(
                "update the host's NVIDIA driver to one whose CUDA version meets the requirement, \
                 or build the image for an older CUDA (`envbuild doctor --lock LOCK` says which \
                 CUDA this driver runs)",
            ),
        ),
        GpuRefusal::Requirement { condition } => Failure::one(
            Diagnostic::error(
                codes::GPU_REQUIREMENT_UNMET,
                format!(
                    "the image requires `{condition}` (its NVIDIA_REQUIRE_* variables), which the \
                     GPUs or {driver} on the engine at `{host}` do not meet: the NVIDIA runtime \
                     refused to start it"
                ),
            )
            .with_hint(
                "run it on GPUs that meet the requirement, or use an image without it; \
                 `envbuild doctor` shows this host's GPUs and driver",
            ),
        ),
    }
}

/// `NO_GPU_RUNTIME`: the engine at `host` refused a GPU request with `msg`.
pub(crate) fn no_gpu_runtime(host: &str, msg: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            codes::NO_GPU_RUNTIME,
            format!("the engine at `{host}` cannot give a container a GPU: {msg}"),
        )
        .with_hint(crate::core::doctor::hints::NO_GPU_RUNTIME),
    )
}

/// Messages of an engine that could not reach a registry at all (no DNS, no route, a proxy
/// that answers nothing), as opposed to a registry that answered "no".
pub(crate) fn registry_unreachable(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "no such host",
        "dial tcp",
        "i/o timeout",
        "connection refused",
        "network is unreachable",
        "tls handshake timeout",
        "server misbehaving",
        "temporary failure in name resolution",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// How to get `image` onto an engine that reaches no registry: copy it from a machine that
/// does, or name it on a registry this machine reaches. Never a hand-made image under an
/// official name: that would pass for the real base.
pub(crate) fn offline_base_hint(image: &str) -> String {
    format!(
        "on a machine that reaches a registry, `docker pull {image}` and `docker save -o \
         base.tar {image}`; copy base.tar here and `docker load -i base.tar`, then build again \
         (`--pull never` keeps envbuild from trying the registry); or set `[image] base` to the \
         image on a registry this machine reaches (an internal mirror): docs/offline.md"
    )
}

/// A base image of the Dockerfile, as the engine had it before the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseSeen {
    pub name: String,
    /// `os/arch[/variant]` of the engine's copy (`linux/arm64`); `None` when it has none.
    pub platform: Option<String>,
}

/// Why a base image cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaseMissing<'a> {
    /// The engine lacks it and `--pull never` forbids pulling it.
    NotPulled,
    /// The engine lacks it and the build could not pull it (the engine's words).
    PullFailed(&'a str),
    /// The engine has it only for another platform (`have`), and the build, which wants
    /// the engine's (`want`), could not pull that one.
    OtherPlatform {
        have: &'a str,
        want: &'a str,
        engine_said: &'a str,
    },
}

/// `BASE_IMAGE_MISSING` for `image` on the engine at `host`, with the way forward.
pub(crate) fn base_missing(image: &str, host: &str, why: BaseMissing<'_>) -> Failure {
    let (message, hint) = match why {
        BaseMissing::NotPulled => (
            format!(
                "base image `{image}` is not present on the engine at `{host}`, and `--pull \
                 never` keeps envbuild from pulling it"
            ),
            format!(
                "where a registry answers, leave out `--pull never` and envbuild pulls it; \
                 without one: {}",
                offline_base_hint(image)
            ),
        ),
        BaseMissing::PullFailed(said) => (
            format!(
                "base image `{image}` is not present on the engine at `{host}`, and the build \
                 could not pull it: {said}"
            ),
            offline_base_hint(image),
        ),
        BaseMissing::OtherPlatform {
            have,
            want,
            engine_said,
        } => (
            format!(
                "base image `{image}` is on the engine at `{host}` only for {have}, and the \
                 build needs it for {want}: the build looked for a {want} copy in a registry and \
                 could not get one: {engine_said}"
            ),
            format!(
                "load a {want} copy: where a registry is reachable, `docker pull --platform \
                 {want} {image}` and `docker save -o base.tar {image}`; here `docker load -i \
                 base.tar` (docs/offline.md)"
            ),
        ),
    };
    Failure::one(Diagnostic::error(codes::BASE_IMAGE_MISSING, message).with_hint(hint))
}

/// The base a failed pull during the build was about: the one the engine's message names, else
/// the only one; `None` when neither tells (several bases, none named).
pub(crate) fn base_in_message<'a>(msg: &str, bases: &'a [BaseSeen]) -> Option<&'a BaseSeen> {
    let named = |b: &&BaseSeen| {
        let short = b.name.strip_prefix("docker.io/library/").unwrap_or(&b.name);
        msg.contains(b.name.as_str()) || msg.contains(short)
    };
    // The longest name first, so `python:3.12` does not claim `python:3.12-slim`'s message.
    let mut candidates: Vec<&BaseSeen> = bases.iter().collect();
    candidates.sort_by_key(|b| std::cmp::Reverse(b.name.len()));
    candidates
        .into_iter()
        .find(named)
        .or_else(|| (bases.len() == 1).then(|| &bases[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_base_says_what_works_offline_and_never_fakes_a_tag() {
        let image = "python:3.12-slim-bookworm";
        for why in [
            BaseMissing::NotPulled,
            BaseMissing::PullFailed("dial tcp: lookup registry-1.docker.io: no such host"),
        ] {
            let f = base_missing(image, "unix:///x", why);
            let d = &f.diagnostics[0];
            assert_eq!(d.code, codes::BASE_IMAGE_MISSING);
            assert!(d.message.contains(&format!("`{image}`")), "{}", d.message);
            let hint = d.hint.as_deref().unwrap();
            assert!(
                hint.contains(&format!("docker save -o base.tar {image}"))
                    && hint.contains("docker load -i base.tar")
                    && hint.contains("[image] base")
                    && hint.contains("docs/offline.md"),
                "{hint}"
            );
            assert!(!hint.contains("docker import"), "{hint}");
        }
        let f = base_missing(
            "docker.io/library/b:1",
            "unix:///x",
            BaseMissing::OtherPlatform {
                have: "linux/arm64",
                want: "linux/amd64",
                engine_said: "no such host",
            },
        );
        let d = &f.diagnostics[0];
        assert!(
            d.message.contains("`docker.io/library/b:1`")
                && d.message.contains("only for linux/arm64"),
            "{}",
            d.message
        );
        assert!(d
            .hint
            .as_deref()
            .unwrap()
            .contains("--platform linux/amd64"));
    }

    #[test]
    fn the_base_a_failed_pull_is_about_is_found_by_name_or_alone() {
        let seen = |n: &str| BaseSeen {
            name: n.into(),
            platform: None,
        };
        let one = [seen("docker.io/library/fh:2")];
        let msg = "failed to resolve source metadata for docker.io/library/fh:2: no such host";
        assert_eq!(base_in_message(msg, &one), Some(&one[0]));
        // The only base, even when the message names none.
        assert_eq!(
            base_in_message("dial tcp: i/o timeout", &one),
            Some(&one[0])
        );
        let two = [seen("python:3.12"), seen("python:3.12-slim")];
        assert_eq!(
            base_in_message("pull access denied for python:3.12-slim", &two),
            Some(&two[1])
        );
        assert_eq!(base_in_message("dial tcp: i/o timeout", &two), None);
        assert!(registry_unreachable(
            "Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io on \
             10.0.0.53:53: no such host"
        ));
        assert!(!registry_unreachable("manifest unknown"));
    }

    #[test]
    fn gpu_refusals_are_told_from_other_failures() {
        for refusal in [
            "could not select device driver \"\" with capabilities: [[gpu]]",
            "nvidia-container-cli: initialization error: nvml error: driver not loaded",
            "Unknown or invalid runtime name: nvidia",
            "unresolvable CDI devices nvidia.com/gpu=all",
        ] {
            assert_eq!(
                gpu_refusal(refusal),
                Some(GpuRefusal::NoRuntime),
                "{refusal}"
            );
        }
        assert_eq!(gpu_refusal("no such image"), None);
        assert_eq!(gpu_refusal("executable file not found in $PATH"), None);
    }

    /// Messages as engines printed them (NVIDIA/nvidia-docker #1442, #536,
    /// NVIDIA/nvidia-container-toolkit #152, SyneRBI/PETRIC2 #27): the toolkit works, the
    /// image's NVIDIA_REQUIRE_CUDA wants a newer driver.
    #[test]
    fn an_images_cuda_requirement_is_a_driver_too_old_naming_it() {
        let cases = [
            (
                "failed to create task for container: failed to create shim task: OCI runtime \
              create failed: runc create failed: unable to start container process: error \
              during container init: error running prestart hook #0: exit status 1, stdout: , \
              stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: \
              unsatisfied condition: cuda>=12.8, please update your driver to a newer version, \
              or use an earlier cuda container: unknown",
                "cuda>=12.8",
            ),
            (
                "OCI runtime create failed: container_linux.go:370: starting container process \
              caused: process_linux.go:459: container init caused: Running hook #0:: error \
              running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement \
              error: unsatisfied condition: cuda>=11.0, please update your driver to a newer \
              version, or use an earlier cuda container: unknown",
                "cuda>=11.0",
            ),
            (
                r#"oci runtime error: container_linux.go:265: starting container process caused "process_linux.go:368: container init caused \"process_linux.go:351: running prestart hook 1 caused \\\"error running hook: exit status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods configure --ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --require=cuda>=9.0 --pid=4781 /var/lib/docker/overlay2/7c70/merged]\\\\nnvidia-container-cli: requirement error: unsatisfied condition: cuda >= 9.0\\\\n\\\"\"""#,
                "cuda >= 9.0",
            ),
            (
                "nvidia-container-cli: requirement error: unsatisfied condition: driver>=470",
                "driver>=470",
            ),
        ];
        for (msg, want) in cases {
            assert_eq!(
                gpu_refusal(msg),
                Some(GpuRefusal::DriverTooOld {
                    condition: want.to_string()
                }),
                "{msg}"
            );
        }
        let r = gpu_refusal(cases[0].0).unwrap();
        let f = refused(&r, "unix:///x", cases[0].0, Some("550.54.15"));
        let d = &f.diagnostics[0];
        assert_eq!(d.code, codes::CUDA_DRIVER_TOO_OLD);
        assert!(
            d.message.contains("`cuda>=12.8`") && d.message.contains("driver 550.54.15"),
            "{}",
            d.message
        );
        let hint = d.hint.as_deref().unwrap();
        assert!(
            hint.contains("driver") && hint.contains("older CUDA"),
            "{hint}"
        );
        assert!(!hint.contains("Container Toolkit"), "{hint}");
        let f = refused(&r, "unix:///x", cases[0].0, None);
        assert!(f.diagnostics[0]
            .message
            .contains("the engine host's driver"));

        let arch = "nvidia-container-cli: requirement error: unsatisfied condition: arch>=8.0";
        let r = gpu_refusal(arch).unwrap();
        assert_eq!(
            r,
            GpuRefusal::Requirement {
                condition: "arch>=8.0".into()
            }
        );
        assert_eq!(
            refused(&r, "h", arch, None).diagnostics[0].code,
            codes::GPU_REQUIREMENT_UNMET
        );
        // Without a condition it is still the toolkit failing: no runtime to speak of.
        assert_eq!(
            gpu_refusal("nvidia-container-cli: requirement error: unsatisfied condition: "),
            Some(GpuRefusal::NoRuntime)
        );
    }

    #[test]
    fn no_gpu_runtime_offers_gpus_none() {
        let f = no_gpu_runtime("unix:///x", "could not select device driver");
        assert_eq!(f.diagnostics[0].code, codes::NO_GPU_RUNTIME);
        assert!(f.diagnostics[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("--gpus none"));
    }
}
