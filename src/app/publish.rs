//! `image --push`: push a tested image with its passing verdict beside it (tag
//! `VARIANT-<hash12>.verdict`, a one-file image labelled with the verdict), read a verdict back
//! from the registry (`test --show-verdict`, the registry no-op), and decide whether the
//! registry's word lets a run skip build and test. Performs I/O (the engine, the registry
//! through it, the clock); prints nothing.

use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_ref::Repository;
use crate::core::smoke::Mode;
use crate::core::verdict::{
    rfc3339, TravellingVerdict, VerdictEngine, LABEL_VERDICT, LABEL_VERDICT_FOR, VERDICT_SUFFIX,
};
use crate::infra::docker::registry::{self as reg, Progress};
use crate::infra::docker::run::SmokeOutcome;
use crate::infra::docker::{self, codes, images, Engine};
use crate::infra::registry_auth::{self, Credentials};

/// What was pushed for one variant (or found in the registry, for a skip).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Published {
    pub variant: String,
    /// `REGISTRY/REPO:VARIANT-<hash12>`.
    pub image: String,
    /// The registry's manifest digest of it.
    pub digest: String,
    /// `REGISTRY/REPO:VARIANT-<hash12>.verdict`.
    pub verdict: String,
    /// The verdict's mode (`gpu`, `cpu`).
    pub verdict_mode: String,
}

/// The content-addressed tag of `variant` for the build `id` (the one rule, in core: `matrix`
/// names the same tags).
pub use crate::core::image_ref::variant_tag;

/// What one build is: its lock, and everything it is made of (`RenderedImage::identity`).
#[derive(Debug, Clone, Copy)]
pub struct BuildId<'a> {
    pub lock_sha256: &'a str,
    pub content_sha256: &'a str,
    /// A fleet's platform image's tag suffix (`-arm64`); empty for one platform.
    pub tag_suffix: &'a str,
}

impl BuildId<'_> {
    /// The tag `variant`'s image of this build is pushed under (`VARIANT-<hash12>[-arm64]`).
    pub fn tag(&self, variant: &str) -> String {
        crate::core::image_ref::platform_tag(variant, self.content_sha256, self.tag_suffix)
    }
}

/// sha256 of the smoke script this envbuild runs (and records in each verdict).
pub fn smoke_script_sha256() -> String {
    crate::core::hash::sha256_hex(crate::core::smoke::SCRIPT.as_bytes())
}

/// The credentials for `repo`'s registry.
pub fn credentials(repo: &Repository) -> Result<Option<Credentials>, Failure> {
    registry_auth::for_host(&repo.host)
}

/// The verdict stored beside `reference` (`NAME:TAG`), read through the engine: the tiny
/// verdict image is pulled, its label read, and the pulled copy removed again. `None` when the
/// registry has no verdict tag.
pub async fn fetch_verdict(
    engine: &Engine,
    reference: &str,
    creds: Option<&Credentials>,
) -> Result<Option<TravellingVerdict>, Failure> {
    let verdict_ref = format!("{reference}{VERDICT_SUFFIX}");
    if reg::remote_digest(engine, &verdict_ref, creds)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let had = images::inspect(engine, &verdict_ref).await?.is_some();
    // Pulled even when a copy is here: the registry's verdict is the one that counts.
    reg::pull(engine, &verdict_ref, creds, &mut |_| {}).await?;
    let info = images::inspect(engine, &verdict_ref).await?;
    if !had {
        // Only what this run pulled is removed.
        reg::untag(engine, &verdict_ref).await?;
    }
    let label = info
        .and_then(|i| i.labels.get(LABEL_VERDICT).cloned())
        .ok_or_else(|| unreadable(&verdict_ref, "it has no verdict label"))?;
    TravellingVerdict::from_label(&label)
        .map(Some)
        .map_err(|why| unreadable(&verdict_ref, &why))
}

fn unreadable(reference: &str, why: &str) -> Failure {
    Failure::one(
        Diagnostic::error(
            codes::VERDICT_MISSING,
            format!("`{reference}` is not a readable envbuild verdict: {why}"),
        )
        .with_hint("push the image again with `envbuild image SPEC --push REPO`"),
    )
}

/// What the registry says about one variant before a build.
#[derive(Debug)]
pub enum RegistryWord {
    /// The tag and a verdict that holds: nothing to do.
    Holds(Published, Box<TravellingVerdict>),
    /// Build (and test): the reason, for the progress line.
    Build(String),
}

/// Ask the registry whether `repo:variant_tag` exists with a passing verdict that holds for
/// this run (`TravellingVerdict::holds_for`): that very image digest, lock and build, this
/// smoke script and envbuild, a mode that covers `mode` and, in `gpu` mode, the GPUs `gpus`
/// wants.
pub async fn registry_word(
    engine: &Engine,
    repo: &Repository,
    variant: &str,
    id: BuildId<'_>,
    (mode, gpus): (Mode, crate::core::verdict::GpusWanted<'_>),
    creds: Option<&Credentials>,
) -> Result<RegistryWord, Failure> {
    let reference = repo.tagged(&id.tag(variant));
    let Some(digest) = reg::remote_digest(engine, &reference, creds).await? else {
        return Ok(RegistryWord::Build(format!(
            "{reference} is not in the registry"
        )));
    };
    let Some(verdict) = fetch_verdict(engine, &reference, creds).await? else {
        return Ok(RegistryWord::Build(format!(
            "{reference} has no verdict in the registry"
        )));
    };
    let script = smoke_script_sha256();
    let wants = crate::core::verdict::RunWants {
        mode,
        digest: &digest,
        lock_sha256: id.lock_sha256,
        content_sha256: id.content_sha256,
        smoke_script_sha256: &script,
        envbuild_version: env!("CARGO_PKG_VERSION"),
        gpus,
    };
    Ok(match verdict.holds_for(&wants) {
        Ok(()) => RegistryWord::Holds(
            Published {
                variant: variant.to_string(),
                image: reference.clone(),
                digest,
                verdict: format!("{reference}{VERDICT_SUFFIX}"),
                verdict_mode: verdict.mode.clone(),
            },
            Box::new(verdict),
        ),
        Err(why) => RegistryWord::Build(format!("{reference}: {why}")),
    })
}

/// One tested image to publish.
pub struct ToPublish<'a> {
    pub variant: &'a str,
    pub image_id: &'a str,
    pub id: BuildId<'a>,
    pub outcome: &'a SmokeOutcome,
    pub mode: Mode,
    /// The driver and GPUs the container got (`GpuIdentity::key`), or `no GPU requested`.
    pub gpus: String,
}

/// Tag and push a tested image, then its verdict. Refuses an image whose verdict is not a pass:
/// a failed image is never pushed.
pub async fn publish(
    engine: &Engine,
    repo: &Repository,
    item: &ToPublish<'_>,
    creds: Option<&Credentials>,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Published, Failure> {
    if !item.outcome.report.passed(item.outcome.exit_code) {
        return Err(Failure::bug(
            "publish called for an image that did not pass",
        ));
    }
    let tag = item.id.tag(item.variant);
    let reference = repo.tagged(&tag);
    reg::tag(engine, item.image_id, &repo.name, &tag).await?;
    let digest = reg::push(engine, &repo.name, &tag, creds, on_progress).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let verdict = TravellingVerdict {
        schema: 1,
        image: reference.clone(),
        image_digest: digest.clone(),
        image_id: item.image_id.to_string(),
        lock_sha256: item.id.lock_sha256.to_string(),
        content_sha256: item.id.content_sha256.to_string(),
        variant: item.variant.to_string(),
        mode: item.mode.as_str().to_string(),
        passed: true,
        exit_code: item.outcome.exit_code,
        gpus: item.gpus.clone(),
        engine: VerdictEngine {
            id: docker::engine_id(engine).await.unwrap_or_default(),
            version: docker::engine_version(engine).await.unwrap_or_default(),
            host: engine.host.clone(),
        },
        tested_at: rfc3339(now),
        envbuild_version: env!("CARGO_PKG_VERSION").to_string(),
        smoke_script_sha256: smoke_script_sha256(),
        report: item.outcome.report.clone(),
    };
    let json = serde_json::to_vec_pretty(&verdict)
        .map_err(|e| Failure::bug(format!("cannot write the verdict: {e}")))?;
    let verdict_tag = format!("{tag}{VERDICT_SUFFIX}");
    let label = verdict.to_label();
    reg::import_file_image(
        engine,
        &repo.name,
        &verdict_tag,
        &json,
        &[(LABEL_VERDICT, &label), (LABEL_VERDICT_FOR, &digest)],
    )
    .await?;
    let pushed = reg::push(engine, &repo.name, &verdict_tag, creds, on_progress).await;
    // The verdict image is only a carrier: it does not stay on the engine.
    let removed = reg::untag(engine, &repo.tagged(&verdict_tag)).await;
    pushed?;
    removed?;
    push_cache_tag(engine, repo, item, creds, on_progress).await?;
    Ok(Published {
        variant: item.variant.to_string(),
        image: reference,
        digest,
        verdict: repo.tagged(&verdict_tag),
        verdict_mode: item.mode.as_str().to_string(),
    })
}

/// Move `REGISTRY/REPO:VARIANT-cache` to the image just proven, so that the next build of this
/// variant (any lock, any machine) reads its inline cache. Only its manifest travels: the
/// layers are already there. The local tag goes again; the image keeps its content tag.
async fn push_cache_tag(
    engine: &Engine,
    repo: &Repository,
    item: &ToPublish<'_>,
    creds: Option<&Credentials>,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(), Failure> {
    let cache_tag = format!(
        "{}{}",
        crate::core::image_ref::cache_tag(item.variant),
        item.id.tag_suffix
    );
    reg::tag(engine, item.image_id, &repo.name, &cache_tag).await?;
    let pushed = reg::push(engine, &repo.name, &cache_tag, creds, on_progress).await;
    let removed = reg::untag(engine, &repo.tagged(&cache_tag)).await;
    pushed?;
    removed
}

/// A verdict read back from the registry, and whether it still holds for what the tag names.
#[derive(Debug)]
pub struct ShownVerdict {
    pub verdict: TravellingVerdict,
    /// The digest the tag names now.
    pub current_digest: String,
}

impl ShownVerdict {
    /// The verdict is for the image the tag names now.
    pub fn current(&self) -> bool {
        self.verdict.image_digest == self.current_digest
    }
}

/// `test IMAGE --show-verdict`: read `IMAGE`'s verdict from the registry (nothing of the image
/// itself is pulled; the local verdict cache is not consulted).
pub fn show_verdict(image: &str) -> Result<ShownVerdict, Failure> {
    let (name, tag) = crate::core::image_ref::pull_parts(image);
    let has_tag = !image.contains('@') && image.ends_with(&format!(":{tag}"));
    let repo = Repository::parse(name)
        .ok()
        .filter(|_| has_tag)
        .ok_or_else(|| {
            Failure::usage(
                format!("`{image}` is not a pushed image reference such as REGISTRY/REPO:TAG"),
                Some("name the image by the tag `envbuild image --push` gave it".into()),
            )
        })?;
    let creds = credentials(&repo)?;
    let rt = docker::runtime()?;
    rt.block_on(async {
        let engine = docker::connect().await?;
        let missing = |what: String| {
            Failure::one(Diagnostic::error(codes::VERDICT_MISSING, what).with_hint(
                "push the image with `envbuild image SPEC --push REGISTRY/REPO` (only a \
                     passing image gets a verdict)",
            ))
        };
        let current_digest = reg::remote_digest(&engine, image, creds.as_ref())
            .await?
            .ok_or_else(|| missing(format!("the registry has no image `{image}`")))?;
        let verdict = fetch_verdict(&engine, image, creds.as_ref())
            .await?
            .ok_or_else(|| missing(format!("the registry holds no verdict for `{image}`")))?;
        Ok(ShownVerdict {
            verdict,
            current_digest,
        })
    })
}
