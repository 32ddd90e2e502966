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
            id: i.id.unwrap_or_default(),
            labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
            tags: i.repo_tags.unwrap_or_default(),
        })),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(engine_error(&format!("cannot inspect image `{image}`"), &e)),
    }
}
