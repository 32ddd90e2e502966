//! The record of the images envbuild built: for each build on each engine
//! (`core::built::BuildKey`), the image ids its builds gave, kept in envbuild's own cache
//! folder (`verdict_cache::default_dir`: `ENVBUILD_CACHE_DIR`, `XDG_CACHE_HOME`, `~/.cache`),
//! never in a checkout. `image` skips a build only for an image whose id is recorded here
//! (`core::built::decide`). Performs file I/O.
//!
//! A record that cannot be read is empty (the image is built again, which BuildKit's cache
//! makes fast); one that cannot be written costs only that rebuild next time.

use crate::core::diag::Failure;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A record is a few hundred bytes; anything larger is not one envbuild wrote.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The record's file: its schema and the ids, oldest first.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Record {
    schema: u32,
    image_ids: Vec<String>,
}

fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join("built-images").join(format!("{key}.json"))
}

/// The image ids recorded under `key` (a `BuildKey::digest`); none when there is no readable
/// record (a missing file, a link, a pipe, something too large or not envbuild's).
pub fn load(dir: &Path, key: &str) -> Vec<String> {
    let path = path(dir, key);
    // Not followed through a link, never opened when not a regular file (a FIFO would block).
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
    if !regular {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut bytes));
    if read.is_err() || bytes.len() as u64 > MAX_RECORD_BYTES {
        return Vec::new();
    }
    match serde_json::from_slice::<Record>(&bytes) {
        Ok(r) if r.schema == 1 => r.image_ids,
        _ => Vec::new(),
    }
}

/// Record that envbuild built `image_id` for the build `key`, atomically.
pub fn record(dir: &Path, key: &str, image_id: &str) -> Result<(), Failure> {
    let path = path(dir, key);
    let image_ids = crate::core::built::remember(&load(dir, key), image_id);
    let json = serde_json::to_vec(&Record {
        schema: 1,
        image_ids,
    })
    .map_err(|e| Failure::bug(format!("cannot write the build record: {e}")))?;
    crate::infra::fs::write_atomic(&path, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_load_back_and_unreadable_ones_are_empty() {
        let dir = tempfile::tempdir().unwrap();
        let key = "k".repeat(64);
        assert!(load(dir.path(), &key).is_empty());
        record(dir.path(), &key, "sha256:a").unwrap();
        record(dir.path(), &key, "sha256:b").unwrap();
        assert_eq!(load(dir.path(), &key), ["sha256:a", "sha256:b"]);
        assert!(load(dir.path(), &"o".repeat(64)).is_empty());
        let file = path(dir.path(), &key);
        std::fs::write(&file, "not json").unwrap();
        assert!(load(dir.path(), &key).is_empty());
        std::fs::write(&file, r#"{"schema":2,"image_ids":["sha256:a"]}"#).unwrap();
        assert!(load(dir.path(), &key).is_empty());
        // A link is not followed, even to a record that reads well.
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"schema":1,"image_ids":["sha256:a"]}"#).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(load(dir.path(), &key).is_empty());
    }
}
