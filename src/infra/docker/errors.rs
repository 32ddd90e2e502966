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

/// Whether an engine message says it cannot give a container the GPU it asked for (no NVIDIA
/// Container Toolkit, no CDI devices, an unregistered runtime), as opposed to any other failure.
pub(crate) fn refuses_gpu(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("could not select device driver")
        || m.contains("nvidia-container-cli")
        || m.contains("unknown or invalid runtime")
        || m.contains("unresolvable cdi devices")
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
            assert!(refuses_gpu(refusal), "{refusal}");
        }
        assert!(!refuses_gpu("no such image"));
        assert!(!refuses_gpu("executable file not found in $PATH"));
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
