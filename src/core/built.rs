//! Which image at a build's tag envbuild takes as that build: only one whose image id envbuild
//! recorded when it built it, for that very build on that very engine. Not its labels: anyone
//! who can build an image can copy them (`docker inspect`, then `LABEL` lines) onto an
//! unrelated one and tag it with the name envbuild would use. The record itself is kept by
//! `infra::built_images`, outside any checkout. Pure: no I/O.

/// How many image ids one build keeps in its record (a rebuild with `--rebuild`, or after the
/// image was removed, may give another id); the newest are kept.
pub const KEPT_IDS: usize = 8;

/// What one build is, on one engine: the record of the image ids envbuild built for it is kept
/// under [`BuildKey::digest`].
#[derive(Debug, Clone, Copy)]
pub struct BuildKey<'a> {
    /// The engine's own id (`docker info`'s `ID`): an image built on another engine behind
    /// the same socket is not this one's.
    pub engine_id: &'a str,
    /// The primary tag the build gives its image (`NAME:VARIANT-<content12>`).
    pub tag: &'a str,
    pub lock_sha256: &'a str,
    /// What the build is made of (`app::image::content_sha256`), when known.
    pub content_sha256: Option<&'a str>,
    /// The Dockerfile target (`runtime`, `dev`).
    pub variant: &'a str,
    /// The Docker platform built for (`linux/arm64`); `None`: the engine's own.
    pub platform: Option<&'a str>,
}

impl BuildKey<'_> {
    /// The key as 64 hex digits; every part counts, each separated from the next.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"envbuild-built-image 1\0");
        for part in [
            Some(self.engine_id),
            Some(self.tag),
            Some(self.lock_sha256),
            self.content_sha256,
            Some(self.variant),
            self.platform,
        ] {
            // An absent part differs from an empty one.
            match part {
                Some(p) => {
                    h.update([1u8]);
                    h.update((p.len() as u64).to_le_bytes());
                    h.update(p.as_bytes());
                }
                None => h.update([0u8]),
            }
        }
        crate::core::hash::hex(&h.finalize())
    }
}

/// The record after envbuild built `id`: `id` last (the newest), once, at most [`KEPT_IDS`].
pub fn remember(ids: &[String], id: &str) -> Vec<String> {
    let mut out: Vec<String> = ids.iter().filter(|i| *i != id).cloned().collect();
    out.push(id.to_string());
    let extra = out.len().saturating_sub(KEPT_IDS);
    out.drain(..extra);
    out
}

/// Whether a build runs or an image already at its tag stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reuse {
    /// The image at the tag (this id) is the one envbuild built for this build here.
    Reuse(String),
    /// Build. `untrusted`: the id of an image found at the tag that envbuild has no record of
    /// building for this build here (whatever its labels say); it is built over, and said so.
    Build { untrusted: Option<String> },
}

/// The decision for the image `found` at the build's tag (its id; `None`: nothing there),
/// given the ids envbuild `recorded` building for this build on this engine, and `--rebuild`.
pub fn decide(found: Option<&str>, recorded: &[String], rebuild: bool) -> Reuse {
    match found {
        None => Reuse::Build { untrusted: None },
        Some(id) if recorded.iter().any(|r| r == id) => match rebuild {
            true => Reuse::Build { untrusted: None },
            false => Reuse::Reuse(id.to_string()),
        },
        Some(id) => Reuse::Build {
            untrusted: Some(id.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BuildKey<'static> {
        BuildKey {
            engine_id: "QEVX:2T32:4M2R",
            tag: "envbuild/x:runtime-0123456789ab",
            lock_sha256: "aa",
            content_sha256: Some("bb"),
            variant: "runtime",
            platform: None,
        }
    }

    /// Only an id envbuild recorded is reused; an image it has no record of is built over and
    /// named (labels are no input at all); `--rebuild` builds even a recorded one.
    #[test]
    fn only_a_recorded_image_id_is_reused() {
        let recorded = vec!["sha256:old".to_string(), "sha256:mine".to_string()];
        assert_eq!(
            decide(Some("sha256:mine"), &recorded, false),
            Reuse::Reuse("sha256:mine".into())
        );
        assert_eq!(
            decide(Some("sha256:planted"), &recorded, false),
            Reuse::Build {
                untrusted: Some("sha256:planted".into())
            }
        );
        assert_eq!(
            decide(Some("sha256:planted"), &[], false),
            Reuse::Build {
                untrusted: Some("sha256:planted".into())
            }
        );
        assert_eq!(
            decide(None, &recorded, false),
            Reuse::Build { untrusted: None }
        );
        assert_eq!(
            decide(Some("sha256:mine"), &recorded, true),
            Reuse::Build { untrusted: None }
        );
        // An id is matched whole, not by prefix.
        assert_eq!(
            decide(Some("sha256:min"), &recorded, false),
            Reuse::Build {
                untrusted: Some("sha256:min".into())
            }
        );
    }

    /// A record is for one build on one engine: every part of the key counts, and an absent
    /// part is not an empty one.
    #[test]
    fn record_keys_differ_by_every_part() {
        let same = key().digest();
        assert_eq!(key().digest(), same);
        assert_eq!(same.len(), 64);
        let others = [
            BuildKey {
                engine_id: "OTHER",
                ..key()
            },
            BuildKey {
                tag: "envbuild/x:runtime-ffffffffffff",
                ..key()
            },
            BuildKey {
                lock_sha256: "ab",
                ..key()
            },
            BuildKey {
                content_sha256: None,
                ..key()
            },
            BuildKey {
                content_sha256: Some(""),
                ..key()
            },
            BuildKey {
                variant: "dev",
                ..key()
            },
            BuildKey {
                platform: Some("linux/arm64"),
                ..key()
            },
            // Text moved from one part to the next is another key.
            BuildKey {
                lock_sha256: "aab",
                content_sha256: Some("b"),
                ..key()
            },
        ];
        let digests: Vec<String> = others.iter().map(BuildKey::digest).collect();
        for (i, d) in digests.iter().enumerate() {
            assert_ne!(d, &same, "part {i}");
            assert!(digests[i + 1..].iter().all(|o| o != d), "{i} collides");
        }
    }

    #[test]
    fn the_record_keeps_the_newest_ids_once() {
        let ids = remember(&[], "a");
        assert_eq!(ids, ["a"]);
        let ids = remember(&ids, "b");
        assert_eq!(remember(&ids, "a"), ["b", "a"]);
        let mut many = Vec::new();
        for i in 0..20 {
            many = remember(&many, &format!("id{i}"));
        }
        assert_eq!(many.len(), KEPT_IDS);
        assert_eq!(many.last().map(String::as_str), Some("id19"));
        assert_eq!(many[0], format!("id{}", 20 - KEPT_IDS));
    }
}
