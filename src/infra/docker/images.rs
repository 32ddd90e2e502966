//! Images on the engine: look one up, import a root filesystem tarball as an image (the
//! `docker import` the test suite uses to make base images without a registry), remove one.
//! Performs network I/O against the engine.

use super::{codes, engine_error, is_not_found, short_error, Engine};
use crate::core::diag::{Diagnostic, Failure};
use bollard::query_parameters::{CreateImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures_util::StreamExt;
use std::collections::HashMap;

/// An image the engine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub labels: HashMap<String, String>,
    pub tags: Vec<String>,
}

/// Look an image up by name or id; `None` when the engine does not have it.
pub async fn inspect(engine: &Engine, image: &str) -> Result<Option<ImageInfo>, Failure> {
    match engine.docker.inspect_image(image).await {
        Ok(i) => Ok(Some(ImageInfo {
            id: i.id.unwrap_or_default(),
            labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
            tags: i.repo_tags.unwrap_or_default(),
        })),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(&format!("cannot inspect image `{image}`"), &e)),
    }
}

/// Import a root filesystem tar as `repo:tag` (`docker import`), with Dockerfile-style
/// `changes` such as `CMD ["sh"]`. Returns the image id.
pub async fn import_rootfs(
    engine: &Engine,
    rootfs_tar: Vec<u8>,
    repo: &str,
    tag: &str,
    changes: Vec<String>,
) -> Result<String, Failure> {
    let opts = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .changes(changes)
        .build();
    let mut stream = engine.docker.create_image(
        Some(opts),
        Some(bollard::body_full(rootfs_tar.into())),
        None,
    );
    let mut last_err = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(msg) = info.error_detail.and_then(|d| d.message) {
                    last_err = Some(msg);
                }
            }
            // bollard 0.21.1 may end a good import with a spurious stream error: inspect decides.
            Err(e) => {
                last_err = Some(short_error(&e));
                break;
            }
        }
    }
    match inspect(engine, &format!("{repo}:{tag}")).await? {
        Some(info) => Ok(info.id),
        None => Err(Failure::one(Diagnostic::error(
            codes::ENGINE_ERROR,
            format!(
                "importing `{repo}:{tag}` failed: {}",
                last_err.unwrap_or_else(|| "the engine made no image".into())
            ),
        ))),
    }
}

/// Remove an image (forced); a missing image is not an error.
pub async fn remove(engine: &Engine, image: &str) -> Result<(), Failure> {
    let opts = RemoveImageOptionsBuilder::default().force(true).build();
    match engine.docker.remove_image(image, Some(opts), None).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(engine_error(&format!("cannot remove image `{image}`"), &e)),
    }
}
