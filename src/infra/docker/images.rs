//! Images on the engine: look one up by name or id. Performs network I/O against the engine.

use super::limits::Call;
use super::{engine_error, is_not_found, Engine};
use crate::core::diag::Failure;
use std::collections::HashMap;

/// An image the engine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub labels: HashMap<String, String>,
    pub tags: Vec<String>,
    /// `os/arch[/variant]` (`linux/arm64`), where the engine says.
    pub platform: Option<String>,
}

/// `os/arch[/variant]` from the parts an engine reports.
fn platform_of(os: Option<&str>, arch: Option<&str>, variant: Option<&str>) -> Option<String> {
    let (os, arch) = (
        os.filter(|o| !o.is_empty())?,
        arch.filter(|a| !a.is_empty())?,
    );
    Some(match variant.filter(|v| !v.is_empty()) {
        Some(v) => format!("{os}/{arch}/{v}"),
        None => format!("{os}/{arch}"),
    })
}

/// The platform the engine builds and runs for (`linux/amd64`); `None` when it does not say.
pub async fn engine_platform(engine: &Engine) -> Option<String> {
    let v = engine.version().await.ok()?.as_ref().ok()?;
    platform_of(v.os.as_deref(), v.arch.as_deref(), None)
}

/// Look an image up by name or id; `None` when the engine does not have it.
pub async fn inspect(engine: &Engine, image: &str) -> Result<Option<ImageInfo>, Failure> {
    let answer = engine
        .call(
            Call::Short,
            || format!("inspecting image `{image}`"),
            engine.docker.inspect_image(image),
        )
        .await?;
    match answer {
        Ok(i) => Ok(Some(ImageInfo {
            platform: platform_of(
                i.os.as_deref(),
                i.architecture.as_deref(),
                i.variant.as_deref(),
            ),
            id: i.id.unwrap_or_default(),
            labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
            tags: i.repo_tags.unwrap_or_default(),
        })),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(&format!("cannot inspect image `{image}`"), &e)),
    }
}

/// Where a base image's digest came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestSource {
    /// The registry's manifest digest (the engine's distribution inspect: nothing is pulled).
    Registry,
    /// The engine's local copy, pulled from a registry once (`RepoDigests`).
    Local,
    /// An image only this engine has (built or loaded): its image id.
    LocalOnly,
}

/// The digest `FROM image@digest` should name: the registry's, else the local image's repo
/// digest, else (an image no registry has) its id. `Ok(Err(why))` when neither has the image:
/// what the registry answered.
pub async fn base_digest(
    engine: &Engine,
    image: &str,
) -> Result<Result<(String, DigestSource), String>, Failure> {
    let remote = engine
        .call(
            Call::Short,
            || format!("asking the registry for `{image}`"),
            engine.docker.inspect_registry_image(image, None),
        )
        .await?;
    // A registry that cannot be reached or does not have the tag is not an error yet: the
    // engine may have the image.
    let registry_said = match remote {
        Ok(r) => match r.descriptor.digest {
            Some(d) => return Ok(Ok((d, DigestSource::Registry))),
            None => "no digest in its answer".to_string(),
        },
        Err(e) => super::short_error(&e),
    };
    let local = engine
        .call(
            Call::Short,
            || format!("inspecting image `{image}`"),
            engine.docker.inspect_image(image),
        )
        .await?;
    let info = match local {
        Ok(i) => i,
        Err(e) if is_not_found(&e) => return Ok(Err(registry_said)),
        Err(e) => return Err(engine_error(&format!("cannot inspect image `{image}`"), &e)),
    };
    let repo = repository_of(image);
    let repo_digest = info
        .repo_digests
        .unwrap_or_default()
        .into_iter()
        .find_map(|rd| {
            let (name, digest) = rd.split_once('@')?;
            (repository_of(name) == repo).then(|| digest.to_string())
        });
    Ok(match (repo_digest, info.id) {
        (Some(d), _) => Ok((d, DigestSource::Local)),
        (None, Some(id)) => Ok((id, DigestSource::LocalOnly)),
        (None, None) => Err(registry_said),
    })
}

/// `host:5000/a/b:tag` -> `host:5000/a/b`; a `docker.io/library/` prefix is dropped, as the
/// engine writes `RepoDigests` without it.
fn repository_of(reference: &str) -> &str {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    let name = match no_digest[last_slash..].rfind(':') {
        Some(i) => &no_digest[..last_slash + i],
        None => no_digest,
    };
    name.strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::repository_of;

    #[test]
    fn repository_of_drops_tag_and_digest_not_the_registry_port() {
        assert_eq!(
            repository_of("127.0.0.1:5000/a/base:1"),
            "127.0.0.1:5000/a/base"
        );
        assert_eq!(
            repository_of("127.0.0.1:5000/a/base"),
            "127.0.0.1:5000/a/base"
        );
        assert_eq!(repository_of("python:3.11-slim@sha256:ab"), "python");
        assert_eq!(repository_of("docker.io/library/python:3.11"), "python");
    }
}
