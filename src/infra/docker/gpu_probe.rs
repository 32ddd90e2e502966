//! Whether the engine can give containers a GPU, for `envbuild doctor`: the runtimes and CDI
//! directories it registers (a hint), and, when an image is available, a container started with
//! a GPU request (the only definitive answer). The probe container is labelled like smoke
//! containers and always removed. Performs I/O (the engine).
//!
//! Which image: `--image`, else the image a `--lock` renders to when the engine has it, else
//! the newest image envbuild built here. Only the lock's image is started as it is; from any
//! other the probe asks about the runtime alone, so it sets `NVIDIA_DISABLE_REQUIRE=1` and an
//! unrelated image's `NVIDIA_REQUIRE_CUDA` cannot make a working runtime look broken.

use super::errors::{gpu_refusal, refused, GpuRefusal};
use super::limits::Call;
use super::run::{gpu_request, remove_run_containers};
use super::{images, is_not_found, labels, short_error, Engine};
use crate::core::doctor::ContainerGpu;
use crate::core::render::LABEL_LOCK_SHA256;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, ListImagesOptionsBuilder};
use std::collections::HashMap;

/// The newest image envbuild built on this engine, to try a GPU request with, by its tag (the
/// first in sort order) so the report names it as `envbuild image` did: a tagged one before
/// any untagged leftover, which is named by its id only when no image has a tag.
async fn an_envbuild_image(engine: &Engine) -> Option<String> {
    let mut filters: HashMap<String, Vec<String>> = HashMap::new();
    filters.insert("label".into(), vec![LABEL_LOCK_SHA256.to_string()]);
    let opts = ListImagesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let mut images = engine
        .call(
            Call::Short,
            || "listing envbuild's images".into(),
            engine.docker.list_images(Some(opts)),
        )
        .await
        .ok()?
        .ok()?;
    let tags_of = |i: &bollard::models::ImageSummary| {
        let mut tags: Vec<String> = i
            .repo_tags
            .iter()
            .filter(|t| *t != "<none>:<none>")
            .cloned()
            .collect();
        tags.sort();
        tags
    };
    // A tagged image first (its name means something to the reader), then the newest.
    images.sort_by_key(|i| (tags_of(i).is_empty(), std::cmp::Reverse(i.created)));
    images.into_iter().next().map(|i| {
        let first = tags_of(&i).into_iter().next();
        first.unwrap_or(i.id)
    })
}

/// The image to start, and whether the probe asks about the runtime alone.
struct ProbeImage {
    name: String,
    /// The image is only a vehicle: its own NVIDIA requirements are switched off.
    runtime_only: bool,
    /// How to name it in the detail.
    what: &'static str,
}

/// `image` (`--image`), else the first of `lock_tags` the engine has, else the newest
/// envbuild image.
async fn probe_image(
    engine: &Engine,
    image: Option<&str>,
    lock_tags: &[String],
) -> Option<ProbeImage> {
    if let Some(i) = image {
        return Some(ProbeImage {
            name: i.to_string(),
            runtime_only: true,
            what: "",
        });
    }
    for tag in lock_tags {
        if let Ok(Some(_)) = images::inspect(engine, tag).await {
            return Some(ProbeImage {
                name: tag.clone(),
                runtime_only: false,
                what: "the lock's image ",
            });
        }
    }
    an_envbuild_image(engine).await.map(|name| ProbeImage {
        name,
        runtime_only: true,
        what: "",
    })
}

/// Probe the engine, starting a container from `image`, or from the first of `lock_tags`
/// (the tags a `--lock` renders to) the engine has, or from the newest envbuild image; the
/// probe container is labelled with `run_id` (the caller removes it after an interruption).
/// Never fails: what could not be found out is said in `detail`.
pub async fn container_gpu(
    engine: &Engine,
    image: Option<&str>,
    lock_tags: &[String],
    run_id: &str,
) -> ContainerGpu {
    let mut detail = Vec::new();
    let info = engine
        .call(
            Call::Short,
            || "reading the engine's info".into(),
            engine.docker.info(),
        )
        .await;
    let (nvidia_runtime, cdi) = match info {
        Err(f) => {
            detail.push(f.diagnostics[0].message.clone());
            (None, None)
        }
        Ok(Ok(info)) => {
            // The engine's map has no order of its own: sorted, so two runs print the same.
            let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
            runtimes.sort();
            let nvidia = runtimes.iter().any(|r| r == "nvidia");
            detail.push(format!(
                "runtimes: {}",
                if runtimes.is_empty() {
                    "none".to_string()
                } else {
                    runtimes.join(", ")
                }
            ));
            // Engines before API 1.44 do not report CDI at all: unknown, not absent.
            let cdi = info.cdi_spec_dirs.map(|dirs| !dirs.is_empty());
            if cdi == Some(true) {
                detail.push("CDI spec directories configured".into());
            }
            (Some(nvidia), cdi)
        }
        Ok(Err(e)) => {
            detail.push(format!(
                "cannot read the engine's info: {}",
                short_error(&e)
            ));
            (None, None)
        }
    };
    let (verified, cause) = match probe_image(engine, image, lock_tags).await {
        None => {
            detail.push(
                "no image to start a GPU container from (build one with `envbuild image`, or pass --image)"
                    .into(),
            );
            (None, None)
        }
        Some(image) => {
            let probed = try_gpu_container(engine, &image, run_id).await;
            detail.push(probed.detail);
            (probed.verified, probed.cause)
        }
    };
    ContainerGpu {
        nvidia_runtime,
        cdi,
        verified,
        cause,
        detail: detail.join("; "),
    }
}

/// What starting the probe container said: whether it got a GPU (`None`: it proves nothing),
/// the refusal's code, and the words for the report.
struct Probed {
    verified: Option<bool>,
    cause: Option<String>,
    detail: String,
}

impl Probed {
    fn unknown(detail: String) -> Probed {
        Probed {
            verified: None,
            cause: None,
            detail,
        }
    }
}

/// Create and start a container with `--gpus all` from `image`; always remove it.
async fn try_gpu_container(engine: &Engine, probe: &ProbeImage, run_id: &str) -> Probed {
    let image = probe.name.as_str();
    let mut container_labels = HashMap::new();
    container_labels.insert(labels::SMOKE.to_string(), "1".to_string());
    container_labels.insert(labels::RUN_ID.to_string(), run_id.to_string());
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        // The request is what is being tested; the command only has to exist and end.
        entrypoint: Some(vec!["true".into()]),
        cmd: Some(vec![]),
        labels: Some(container_labels),
        env: probe
            .runtime_only
            .then(|| vec!["NVIDIA_DISABLE_REQUIRE=1".to_string()]),
        host_config: Some(HostConfig {
            device_requests: Some(vec![gpu_request()]),
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = format!("envbuild-gpu-probe-{run_id}");
    let _live = super::run::LiveRun::new(run_id, &name);
    let opts = CreateContainerOptionsBuilder::default().name(&name).build();
    let what = probe.what;
    let create = engine.docker.create_container(Some(opts), body);
    let created = engine
        .call(
            Call::Container,
            || "creating the GPU probe container".into(),
            create,
        )
        .await;
    let outcome = match created {
        Err(f) => Probed::unknown(f.diagnostics[0].message.clone()),
        Ok(Err(e)) if is_not_found(&e) => {
            Probed::unknown(format!("image `{image}` is not on the engine"))
        }
        Ok(Err(e)) => classify(engine, probe, &short_error(&e)).await,
        Ok(Ok(created)) => match engine
            .call(
                Call::Container,
                || "starting the GPU probe container".into(),
                engine.docker.start_container(
                    &created.id,
                    None::<bollard::query_parameters::StartContainerOptions>,
                ),
            )
            .await
        {
            Err(f) => Probed::unknown(f.diagnostics[0].message.clone()),
            Ok(Ok(())) => Probed {
                verified: Some(true),
                cause: None,
                detail: format!("a container from {what}`{image}` started with --gpus all"),
            },
            Ok(Err(e)) => classify(engine, probe, &short_error(&e)).await,
        },
    };
    // Best effort: a leftover would carry the smoke label and be found by the tests.
    let _ = remove_run_containers(engine, run_id).await;
    outcome
}

/// A refused GPU request is a definitive "no"; any other failure proves nothing either way.
/// The lock's image refused for its CUDA requirement is a "no" for that build, said with the
/// refusal's code and requirement.
async fn classify(engine: &Engine, probe: &ProbeImage, msg: &str) -> Probed {
    let (image, what) = (probe.name.as_str(), probe.what);
    match gpu_refusal(msg) {
        None => Probed::unknown(format!(
            "the GPU probe container from {what}`{image}` failed for another reason: {msg}"
        )),
        Some(GpuRefusal::NoRuntime) => Probed {
            verified: Some(false),
            cause: Some(super::codes::NO_GPU_RUNTIME.to_string()),
            detail: format!(
                "a container from {what}`{image}` with --gpus all was refused ({}): {msg}",
                super::codes::NO_GPU_RUNTIME
            ),
        },
        Some(r) => {
            let driver = super::host_gpu_identity(engine)
                .await
                .and_then(|id| id.driver);
            let f = refused(&r, &engine.host, msg, driver.as_deref());
            let d = &f.diagnostics[0];
            Probed {
                verified: Some(false),
                cause: Some(d.code.to_string()),
                detail: format!(
                    "a container from {what}`{image}` with --gpus all was refused ({}): {}",
                    d.code, d.message
                ),
            }
        }
    }
}
