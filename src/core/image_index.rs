//! The multi-platform image index `image --push` writes for a fleet lock: one OCI image index
//! (`application/vnd.oci.image.index.v1+json`) whose manifests are the platforms' pushed images,
//! each with its `platform` (`os`, `architecture`); and the index read back. Deterministic: the
//! same members give the same bytes (so the same digest). This module performs no I/O.

use crate::core::spec::Platform;
use serde::{Deserialize, Serialize};

/// The OCI image index's media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker's manifest list: an index too, as a pushed image may come back from a registry.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Whether `media_type` is an index (of either spelling) rather than one image's manifest.
pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// One pushed platform image: its manifest's descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub platform: Platform,
    /// The manifest's media type, as the registry serves it.
    pub media_type: String,
    /// `sha256:<64 hex>`.
    pub digest: String,
    /// The manifest's size in bytes.
    pub size: u64,
}

/// An index's `platform` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPlatform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// One entry of an index's `manifests`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<IndexPlatform>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    manifests: Vec<Descriptor>,
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The index of `members`, in their order, as the bytes to PUT. `Err`: a member that cannot
/// be in an index (a platform no image is built for, a digest that is not sha256, an index).
pub fn index_json(members: &[Member]) -> Result<Vec<u8>, String> {
    let mut manifests = Vec::new();
    for m in members {
        let arch = crate::core::platform::image_arch(m.platform)
            .ok_or_else(|| format!("no image is built for {}", m.platform.as_str()))?;
        if !is_digest(&m.digest) {
            return Err(format!(
                "`{}` ({}) is not a sha256 digest",
                m.digest,
                m.platform.as_str()
            ));
        }
        if is_index(&m.media_type) {
            return Err(format!(
                "the image of {} is an index itself ({})",
                m.platform.as_str(),
                m.media_type
            ));
        }
        manifests.push(Descriptor {
            media_type: m.media_type.clone(),
            digest: m.digest.clone(),
            size: m.size,
            platform: Some(IndexPlatform {
                architecture: arch.to_string(),
                os: "linux".to_string(),
                variant: None,
            }),
        });
    }
    let index = Index {
        schema_version: 2,
        media_type: Some(OCI_INDEX.to_string()),
        manifests,
    };
    serde_json::to_vec(&index).map_err(|e| e.to_string())
}

/// The manifests of an index (OCI or Docker's list).
pub fn parse_index(bytes: &[u8]) -> Result<Vec<Descriptor>, String> {
    let index: Index = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if index.schema_version != 2 {
        return Err(format!("schemaVersion {}", index.schema_version));
    }
    Ok(index.manifests)
}

/// One variant's multi-platform image index, pushed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PushedIndex {
    pub variant: String,
    /// `REGISTRY/REPO:VARIANT-<fleet12>`.
    pub image: String,
    /// The index's digest.
    pub digest: String,
    pub media_type: String,
    /// Each platform's image in it, in the lock's platform order.
    pub manifests: Vec<IndexEntry>,
}

/// One manifest of a pushed index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IndexEntry {
    pub platform: String,
    pub architecture: String,
    pub digest: String,
    pub media_type: String,
    pub size: u64,
}

/// The descriptor of `platform`'s image among an index's `manifests` (a pushed image that came
/// back as an index of its own, e.g. with attestations beside it).
pub fn find_platform(manifests: &[Descriptor], platform: Platform) -> Option<&Descriptor> {
    let arch = crate::core::platform::image_arch(platform)?;
    manifests.iter().find(|d| {
        d.platform
            .as_ref()
            .is_some_and(|p| p.os == "linux" && p.architecture == arch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(platform: Platform, hex: char) -> Member {
        Member {
            platform,
            media_type: "application/vnd.docker.distribution.manifest.v2+json".into(),
            digest: format!("sha256:{}", hex.to_string().repeat(64)),
            size: 1234,
        }
    }

    #[test]
    fn the_index_names_each_platform_and_reads_back() {
        let members = [
            member(Platform::Linux64, 'a'),
            member(Platform::LinuxAarch64, 'b'),
        ];
        let bytes = index_json(&members).unwrap();
        assert_eq!(bytes, index_json(&members).unwrap(), "deterministic");
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["schemaVersion"], 2);
        assert_eq!(v["mediaType"], OCI_INDEX);
        assert_eq!(v["manifests"][1]["platform"]["architecture"], "arm64");
        assert_eq!(v["manifests"][1]["platform"]["os"], "linux");
        assert_eq!(v["manifests"][0]["platform"]["architecture"], "amd64");
        assert_eq!(v["manifests"][0]["size"], 1234);
        let back = parse_index(&bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].digest, members[1].digest);
        let arm = find_platform(&back, Platform::LinuxAarch64).unwrap();
        assert_eq!(arm.digest, members[1].digest);
        assert_eq!(find_platform(&back[..1], Platform::LinuxAarch64), None);
    }

    #[test]
    fn a_member_that_cannot_be_in_an_index_is_refused() {
        let mut bad = member(Platform::LinuxAarch64, 'b');
        bad.digest = "sha256:xyz".into();
        assert!(index_json(&[bad]).unwrap_err().contains("linux-aarch64"));
        assert!(index_json(&[member(Platform::Win64, 'c')]).is_err());
        let mut nested = member(Platform::Linux64, 'a');
        nested.media_type = OCI_INDEX.into();
        assert!(index_json(&[nested]).is_err());
        assert!(parse_index(b"{\"schemaVersion\":1,\"manifests\":[]}").is_err());
    }
}
