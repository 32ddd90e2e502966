//! `image` of a fleet lock (several platforms): each selected platform's image is built from
//! that platform's own lock entry and rendered files (its closure, its Dockerfile; the render's
//! `linux-aarch64/` folder) for its Docker platform, and smoke-tested (or, with `--push`, found
//! in the registry with a verdict that covers the run, as for one platform); with `--push`,
//! only when every selected platform passed are the images and verdicts pushed, then one OCI
//! image index per variant under the variant's tag, written through the registry's HTTP API
//! once the registry holds every platform's image (those not selected pushed by their own runs,
//! on their own machines). Performs I/O (files, the engine, the registry, the verdict cache);
//! prints nothing.
//!
//! Tags: each platform's image is `NAME:VARIANT-<fleet12>-<arch>` (`-amd64`, `-arm64`), where
//! `<fleet12>` is the content hash of the whole fleet's render; the index is
//! `REGISTRY/REPO:VARIANT-<fleet12>`, so `docker pull` of that one tag gets each machine its
//! own image. Each image also keeps its platform lock's tag (`VARIANT-<lock12>`, what the
//! rendered run snippets of its folder name).

use super::image::{self, ImageEvent, ImageOptions, ImageRun, RenderedImage};
use super::publish::{Published, RegistryWord};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_index::{self, IndexEntry, Member, PushedIndex};
use crate::core::lock::Lock;
use crate::core::spec::Platform;
use crate::core::verdict::GpusWanted;
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
    let spec_dir = image::spec_dir(spec);
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
    /// Each selected platform's run, in the lock's order; its `published` holds that
    /// platform's pushes (or, with `from_registry`, what the registry already held).
    pub platforms: Vec<(Platform, ImageRun)>,
    /// With `--push` and every selected platform passed: one index per variant whose every
    /// platform's image is in the registry.
    pub indexes: Vec<PushedIndex>,
    /// With `--push`: the platforms whose images did not pass (nothing at all is pushed then).
    pub not_pushed: Vec<Platform>,
    /// With `--push` of part of the fleet: why a variant has no index yet (`variant`, reason).
    pub index_waits: Vec<(String, String)>,
}

/// Connect to the engine and [`build_and_test`] the `selected` platforms of the fleet whose
/// every platform's image is in `images`, stopping cleanly on signals. The outer `Err`: nothing
/// was attempted; the inner: a build failed or the run was stopped.
pub fn run(
    images: &[PlatformImage],
    selected: &[Platform],
    opts: &ImageOptions,
    on_event: &mut (dyn FnMut(ImageEvent<'_>) + Send),
) -> Result<Result<FleetRun, Failure>, Failure> {
    image::on_engine(|engine, interrupt| async move {
        build_and_test(&engine, (images, selected), opts, interrupt, on_event).await
    })
}

/// A failure of one platform's build, named by its platform.
fn of_platform(mut f: Failure, platform: Platform) -> Failure {
    if let Some(d) = f.diagnostics.iter_mut().find(|d| d.is_error()) {
        d.message = format!("{}: {}", platform.as_str(), d.message);
    }
    f
}

/// Each `selected` platform's image in turn: with `--push`, skipped when the registry holds it
/// with a verdict that covers this run (as for one platform), else built and smoke-tested.
/// Then, with `--push` and only when every selected platform passed, each new image is pushed
/// with its verdict, and one index per variant is written when the registry holds every
/// platform of the fleet: the selected ones just now, the others pushed by the runs that built
/// them (an Arm runner's `--platform linux-aarch64 --push`), each with a passing verdict for
/// this very build. So the run that pushes the fleet's last platform writes the index, and any
/// later run of the whole fleet finds every image in the registry and writes it too.
pub async fn build_and_test(
    engine: &Engine,
    (images, selected): (&[PlatformImage], &[Platform]),
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
    let mut platforms = Vec::new();
    for pi in images.iter().filter(|pi| selected.contains(&pi.platform)) {
        on_event(ImageEvent::Platform {
            platform: pi.platform,
        });
        let skip = image::registry_skip(engine, &pi.rendered, opts, creds.as_ref(), on_event)
            .await
            .map_err(|f| of_platform(f, pi.platform))?;
        if let Some(run) = skip {
            platforms.push((pi, run));
            continue;
        }
        let (builds, smokes) = image::build_and_smoke(
            engine,
            &pi.rendered,
            opts,
            &creds_for,
            interrupt.clone(),
            on_event,
        )
        .await
        .map_err(|f| of_platform(f, pi.platform))?;
        let run = ImageRun {
            builds,
            smokes,
            published: Vec::new(),
            from_registry: false,
            install_cache: None,
        };
        platforms.push((pi, run));
    }
    let failed: Vec<Platform> = platforms
        .iter()
        .filter(|(_, run)| !run.smokes.iter().all(|s| s.passed()))
        .map(|(pi, _)| pi.platform)
        .collect();
    let push = opts.push.as_ref().filter(|_| failed.is_empty());
    if opts.push.is_some() && !failed.is_empty() {
        on_event(ImageEvent::FleetNotPushed { failed: &failed });
    }
    let mut indexes = Vec::new();
    let mut index_waits = Vec::new();
    if let Some(repo) = push {
        for (pi, run) in platforms.iter_mut().filter(|(_, r)| !r.from_registry) {
            run.published = image::push_passed(
                engine,
                repo,
                (&run.builds, &run.smokes),
                pi.rendered.build_id(),
                opts,
                creds.as_ref(),
                on_event,
            )
            .await?;
        }
        let api = crate::infra::registry_http::RegistryApi::new(repo, creds.clone())?;
        let fleet12 = images
            .first()
            .map(|pi| pi.rendered.identity().to_string())
            .unwrap_or_default();
        for variant in &opts.variants {
            let members = match index_members(
                engine,
                repo,
                variant,
                (images, &platforms),
                opts,
                creds.as_ref(),
            )
            .await?
            {
                Ok(members) => members,
                Err(reason) => {
                    on_event(ImageEvent::IndexWaits {
                        variant,
                        reason: &reason,
                    });
                    index_waits.push((variant.clone(), reason));
                    continue;
                }
            };
            let index = push_index(&api, repo, variant, &fleet12, &members).await?;
            on_event(ImageEvent::IndexPushed { index: &index });
            indexes.push(index);
        }
    }
    Ok(FleetRun {
        platforms: platforms
            .into_iter()
            .map(|(pi, run)| (pi.platform, run))
            .collect(),
        indexes,
        not_pushed: failed,
        index_waits,
    })
}

/// Every platform's pushed image of `variant`, in the lock's order: a selected platform's from
/// this run (`ran`), another's from the registry, which must hold it under its fleet tag with
/// a passing verdict for this very build in a mode that covers this run's (reached on that
/// platform's own machine: its GPUs are not this run's). `Ok(Err(reason))`: one is missing.
async fn index_members(
    engine: &Engine,
    repo: &crate::core::image_ref::Repository,
    variant: &str,
    (images, ran): (&[PlatformImage], &[(&PlatformImage, ImageRun)]),
    opts: &ImageOptions,
    creds: Option<&Credentials>,
) -> Result<Result<Vec<(Platform, Published)>, String>, Failure> {
    let mut members = Vec::new();
    for pi in images {
        if let Some((_, run)) = ran.iter().find(|(r, _)| r.platform == pi.platform) {
            let Some(p) = run.published.iter().find(|p| p.variant == variant) else {
                return Err(Failure::bug(format!(
                    "{} has no pushed `{variant}` image for the index",
                    pi.platform.as_str()
                )));
            };
            members.push((pi.platform, p.clone()));
            continue;
        }
        let wants = (opts.smoke.mode(), GpusWanted::AnyMachine);
        let id = pi.rendered.build_id();
        match super::publish::registry_word(engine, repo, variant, id, wants, creds).await? {
            RegistryWord::Holds(p, _) => members.push((pi.platform, p)),
            RegistryWord::Build(why) => {
                return Ok(Err(format!(
                    "{}: {why} (the run that pushes it writes the index)",
                    pi.platform.as_str()
                )))
            }
        }
    }
    Ok(Ok(members))
}

/// Read each platform's pushed image of `variant` back from the registry (media type, digest,
/// size), and PUT the index of them under `VARIANT-<fleet12>`.
async fn push_index(
    api: &crate::infra::registry_http::RegistryApi,
    repo: &crate::core::image_ref::Repository,
    variant: &str,
    fleet_identity: &str,
    pushed: &[(Platform, Published)],
) -> Result<PushedIndex, Failure> {
    let mut members: Vec<Member> = Vec::new();
    for (platform, p) in pushed {
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
