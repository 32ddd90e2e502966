//! `image` of a fleet lock (several platforms): each selected platform's image is built from
//! that platform's own lock entry and rendered files (its closure, its Dockerfile; the render's
//! `linux-aarch64/` folder) for its Docker platform, and smoke-tested; with `--push`, only when
//! every selected platform passed are the images and verdicts pushed, then one OCI image index
//! per variant under the variant's tag, written through the registry's HTTP API. Performs I/O
//! (files, the engine, the registry, the verdict cache); prints nothing.
//!
//! Tags: each platform's image is `NAME:VARIANT-<fleet12>-<arch>` (`-amd64`, `-arm64`), where
//! `<fleet12>` is the content hash of the whole fleet's render; the index is
//! `REGISTRY/REPO:VARIANT-<fleet12>`, so `docker pull` of that one tag gets each machine its
//! own image. Each image also keeps its platform lock's tag (`VARIANT-<lock12>`, what the
//! rendered run snippets of its folder name).

use super::image::{self, ImageEvent, ImageOptions, ImageRun, RenderedImage};
use super::publish::Published;
use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_index::{self, IndexEntry, Member, PushedIndex};
use crate::core::lock::Lock;
use crate::core::spec::Platform;
use crate::infra::docker::run::Interrupt;
use crate::infra::docker::Engine;
use crate::infra::registry_auth::Credentials;
use std::collections::BTreeMap;
use std::path::Path;

/// One platform's image of a fleet, rendered.
#[derive(Debug, Clone)]
pub struct PlatformImage {
    pub platform: Platform,
    pub rendered: RenderedImage,
}

/// The lock of `platform` in `lock`: the lock itself for its own platform, else its fleet's
/// entry.
pub fn platform_lock(lock: &Lock, platform: Platform) -> Option<&Lock> {
    if lock.platform == platform {
        return Some(lock);
    }
    lock.fleet.iter().find(|l| l.platform == platform)
}

/// The platforms of `lock` that `wanted` (`--platform`) selects, every one when it is empty;
/// one the lock does not hold is `PLATFORM_NOT_IN_LOCK`.
pub fn selected(lock: &Lock, wanted: &[Platform]) -> Result<Vec<Platform>, Failure> {
    let held = lock.platforms();
    crate::core::platform::select(&held, wanted).map_err(|missing| {
        let names: Vec<&str> = held.iter().map(|p| p.as_str()).collect();
        Failure::one(
            Diagnostic::error(
                super::codes::PLATFORM_NOT_IN_LOCK,
                format!(
                    "--platform {}: the lock holds no resolution for it (it has: {})",
                    missing.as_str(),
                    names.join(", ")
                ),
            )
            .with_hint(format!(
                "drop `--platform {0}`, or add \"{0}\" to the spec's `[target] platforms` and \
                 run `envbuild lock`",
                missing.as_str()
            )),
        )
    })
}

/// The images of `platforms` (selected from `lock`): the whole fleet rendered once in memory
/// ([`image::rendered_image`]), then cut into each platform's own files; every image's content
/// hash is the whole render's, and each carries its platform's tag suffix.
pub fn platform_images(
    lock: &Lock,
    variants: &[String],
    templates: Option<&Path>,
    spec: &Path,
    mirrors: &crate::core::closure::Mirrors,
    platforms: &[Platform],
) -> Result<Vec<PlatformImage>, Failure> {
    let whole = image::rendered_image(lock, variants, templates, spec, mirrors)?;
    let folders: Vec<String> = lock
        .fleet
        .iter()
        .map(|l| format!("{}/", l.platform.as_str()))
        .collect();
    let spec_dir = spec
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for &platform in platforms {
        let plock = platform_lock(lock, platform)
            .ok_or_else(|| Failure::bug(format!("no lock entry for {}", platform.as_str())))?;
        let files: BTreeMap<String, Vec<u8>> = if plock.platform == lock.platform {
            whole
                .files
                .iter()
                .filter(|(p, _)| !folders.iter().any(|f| p.starts_with(f.as_str())))
                .map(|(p, b)| (p.clone(), b.clone()))
                .collect()
        } else {
            let folder = format!("{}/", platform.as_str());
            let mut own: BTreeMap<String, Vec<u8>> = whole
                .files
                .iter()
                .filter_map(|(p, b)| Some((p.strip_prefix(&folder)?.to_string(), b.clone())))
                .collect();
            for dir in crate::core::render::extra_context_dirs(plock) {
                own.extend(crate::infra::fs::project_wheels(spec_dir, &dir)?);
            }
            own
        };
        let lock_hash = plock
            .hash()
            .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
        out.push(PlatformImage {
            platform,
            rendered: RenderedImage {
                files,
                dockerfile: whole.dockerfile.clone(),
                image_name: whole.image_name.clone(),
                lock_hash,
                content_sha256: Some(whole.identity().to_string()),
                lock_summary: plock.summary_json(),
                platform: crate::core::platform::docker_platform(platform).map(str::to_string),
                tag_suffix: crate::core::platform::tag_suffix(platform),
            },
        });
    }
    Ok(out)
}

/// What a fleet run did.
pub struct FleetRun {
    /// Each platform's run, in the order built; its `published` holds that platform's pushes.
    pub platforms: Vec<(Platform, ImageRun)>,
    /// With `--push` and every platform passed: one index per variant.
    pub indexes: Vec<PushedIndex>,
    /// With `--push`: the platforms whose images did not pass (nothing at all is pushed then).
    pub not_pushed: Vec<Platform>,
}

/// Connect to the engine and [`build_and_test`] every platform, stopping cleanly on signals.
/// The outer `Err`: nothing was attempted; the inner: a build failed or the run was stopped.
/// `whole`: `images` are every platform of the lock (else `--push` writes no index).
pub fn run(
    images: &[PlatformImage],
    whole: bool,
    opts: &ImageOptions,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Result<FleetRun, Failure>, Failure> {
    image::on_engine(|engine, interrupt| async move {
        build_and_test(&engine, (images, whole), opts, interrupt, on_event).await
    })
}

/// A failure of one platform's build, named by its platform.
fn of_platform(mut f: Failure, platform: Platform) -> Failure {
    if let Some(d) = f.diagnostics.iter_mut().find(|d| d.is_error()) {
        d.message = format!("{}: {}", platform.as_str(), d.message);
    }
    f
}

/// Build and smoke-test each platform's image in turn; then, with `--push` and only when every
/// platform passed, push each image with its verdict and, when `images` are the `whole` fleet,
/// one index per variant (an index of some platforms would be a partial image under the
/// variant's tag).
pub async fn build_and_test(
    engine: &Engine,
    (images, whole): (&[PlatformImage], bool),
    opts: &ImageOptions,
    interrupt: Interrupt,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<FleetRun, Failure> {
    let creds = match &opts.push {
        Some(repo) => super::publish::credentials(repo)?,
        None => None,
    };
    let creds_for = |host: &str| -> Result<Option<Credentials>, Failure> {
        match (&opts.push, &creds) {
            (Some(repo), c) if repo.host == host => Ok(c.clone()),
            _ => crate::infra::registry_auth::for_host(host),
        }
    };
    let mut tested = Vec::new();
    for pi in images {
        on_event(ImageEvent::Platform {
            platform: pi.platform,
        });
        let run = image::build_and_smoke(
            engine,
            &pi.rendered,
            opts,
            &creds_for,
            interrupt.clone(),
            on_event,
        )
        .await
        .map_err(|f| of_platform(f, pi.platform))?;
        tested.push((pi, run));
    }
    let failed: Vec<Platform> = tested
        .iter()
        .filter(|(_, (_, smokes))| !smokes.iter().all(|s| s.passed()))
        .map(|(pi, _)| pi.platform)
        .collect();
    let mut platforms = Vec::new();
    let mut indexes = Vec::new();
    let push = opts.push.as_ref().filter(|_| failed.is_empty());
    if opts.push.is_some() && !failed.is_empty() {
        on_event(ImageEvent::FleetNotPushed { failed: &failed });
    }
    for (pi, (builds, smokes)) in tested {
        let published = match push {
            Some(repo) => {
                image::push_passed(
                    engine,
                    repo,
                    (&builds, &smokes),
                    pi.rendered.build_id(),
                    opts,
                    creds.as_ref(),
                    on_event,
                )
                .await?
            }
            None => Vec::new(),
        };
        platforms.push((
            pi.platform,
            ImageRun {
                builds,
                smokes,
                published,
                from_registry: false,
                install_cache: None,
            },
        ));
    }
    if let Some(repo) = push.filter(|_| whole) {
        let api = crate::infra::registry_http::RegistryApi::new(repo, creds.clone())?;
        let fleet12 = images
            .first()
            .map(|pi| pi.rendered.identity().to_string())
            .unwrap_or_default();
        for variant in &opts.variants {
            let index = push_index(&api, repo, variant, &fleet12, &platforms).await?;
            on_event(ImageEvent::IndexPushed { index: &index });
            indexes.push(index);
        }
    }
    Ok(FleetRun {
        platforms,
        indexes,
        not_pushed: failed,
    })
}

/// Read each platform's pushed image of `variant` back from the registry (media type, digest,
/// size), and PUT the index of them under `VARIANT-<fleet12>`.
async fn push_index(
    api: &crate::infra::registry_http::RegistryApi,
    repo: &crate::core::image_ref::Repository,
    variant: &str,
    fleet_identity: &str,
    platforms: &[(Platform, ImageRun)],
) -> Result<PushedIndex, Failure> {
    let mut members: Vec<Member> = Vec::new();
    for (platform, run) in platforms {
        let Some(p) = run
            .published
            .iter()
            .find(|p: &&Published| p.variant == variant)
        else {
            return Err(Failure::bug(format!(
                "{} has no pushed `{variant}` image for the index",
                platform.as_str()
            )));
        };
        let m = api.member(&p.digest, *platform).await?;
        if m.digest != p.digest {
            return Err(Failure::bug(format!(
                "the registry's manifest of {} is {}, the push said {}",
                p.image, m.digest, p.digest
            )));
        }
        members.push(m);
    }
    let bytes = image_index::index_json(&members).map_err(Failure::bug)?;
    let tag = super::publish::variant_tag(variant, fleet_identity);
    let digest = api.put_index(&tag, &bytes).await?;
    Ok(PushedIndex {
        variant: variant.to_string(),
        image: repo.tagged(&tag),
        digest,
        media_type: image_index::OCI_INDEX.to_string(),
        manifests: members
            .iter()
            .map(|m| IndexEntry {
                platform: m.platform.as_str().to_string(),
                architecture: crate::core::platform::image_arch(m.platform)
                    .unwrap_or_default()
                    .to_string(),
                digest: m.digest.clone(),
                media_type: m.media_type.clone(),
                size: m.size,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet_lock() -> Lock {
        let text = include_str!("../../specs/fleet-h100-gh200/envbuild.lock");
        Lock::from_toml(text).expect("the fleet lock")
    }

    /// Each platform gets its own files (the aarch64 folder's, without the folder), its own
    /// lock hash (the one its Dockerfile labels), the fleet's content hash and its suffix.
    #[test]
    fn each_platform_image_is_its_own_render_with_its_suffix() {
        let lock = fleet_lock();
        let all = lock.platforms();
        assert_eq!(all, [Platform::Linux64, Platform::LinuxAarch64]);
        let spec = Path::new("specs/fleet-h100-gh200/envbuild.toml");
        let images = platform_images(
            &lock,
            &["runtime".into()],
            None,
            spec,
            &Default::default(),
            &all,
        )
        .unwrap();
        let (x86, arm) = (&images[0].rendered, &images[1].rendered);
        assert_eq!(x86.tag_suffix, "-amd64");
        assert_eq!(arm.tag_suffix, "-arm64");
        assert_eq!(arm.platform.as_deref(), Some("linux/arm64"));
        assert_eq!(x86.identity(), arm.identity());
        assert_ne!(x86.lock_hash, arm.lock_hash);
        assert_eq!(arm.lock_hash, lock.fleet[0].hash().unwrap());
        assert!(x86.files.keys().all(|k| !k.starts_with("linux-aarch64/")));
        let df = |r: &RenderedImage| String::from_utf8_lossy(&r.files["Dockerfile"]).into_owned();
        assert!(
            df(arm).contains(&arm.lock_hash),
            "its Dockerfile labels its own lock"
        );
        assert!(df(x86).contains(&x86.lock_hash));
        let expect = |r: &RenderedImage| {
            serde_json::from_slice::<serde_json::Value>(&r.files[image::RENDERED_EXPECT]).unwrap()
        };
        assert_eq!(expect(arm)["machine"], "aarch64");
        assert_eq!(expect(x86)["machine"], "x86_64");
        let arm_only = platform_images(
            &lock,
            &[],
            None,
            spec,
            &Default::default(),
            &[Platform::LinuxAarch64],
        )
        .unwrap();
        assert_eq!(arm_only.len(), 1);
        assert_eq!(arm_only[0].rendered.files, arm.files);
    }

    #[test]
    fn a_platform_the_lock_lacks_is_platform_not_in_lock() {
        let lock = fleet_lock();
        assert_eq!(
            selected(&lock, &[Platform::LinuxAarch64]).unwrap(),
            [Platform::LinuxAarch64]
        );
        let text = include_str!("../../specs/torch29-cu128/envbuild.lock");
        let single = Lock::from_toml(text).unwrap();
        let e = selected(&single, &[Platform::LinuxAarch64]).unwrap_err();
        let d = &e.diagnostics[0];
        assert_eq!(d.code, super::super::codes::PLATFORM_NOT_IN_LOCK);
        assert!(d.message.contains("it has: linux-64"), "{}", d.message);
        assert!(d.hint.as_deref().unwrap().contains("[target] platforms"));
    }
}
