//! Reading the engine's errors: its own message without bollard's wrapper text, whether an
//! answer means "not found", and the one classifier of GPU refusals that the smoke run and the
//! doctor's GPU probe share. Builds coded [`Failure`]s; performs no I/O.

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
        .with_hint(
            "install the NVIDIA Container Toolkit on the engine's host and run \
             `nvidia-ctk runtime configure --runtime=docker` then restart dockerd; on GPU-less \
             CI use `--gpus none`",
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
