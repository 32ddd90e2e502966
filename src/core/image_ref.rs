//! Image references, as values: the one rule for what a Docker image reference is,
//! `[HOST[:PORT]/]PATH[:TAG][@sha256:<64 hex>]`, and the shapes envbuild asks for where one
//! enters: a pinned base (`[image] base`, the table's base images), a repository to push to
//! (`--push`), a registry build cache (`--cache-from`), a tag put on a built image (`--tag`),
//! and the split the Engine API's pull and the credential lookup need. This module performs no
//! I/O.
//!
//! The rule: the first `/`-component is the registry host when it has a `.` or a `:` or is
//! `localhost` (as docker decides); a host is `.`-separated labels of `a-z0-9-` (not starting
//! or ending with `-`) with an optional port of 1 to 5 digits; the path is `/`-separated
//! components of `a-z0-9._-`, each starting and ending with a letter or digit; the tag (after
//! the last `:` of the last component) is 1 to 128 of `A-Za-z0-9._-`, not starting with `.` or
//! `-`; the digest (after the first `@`) is `sha256:` and 64 hex digits; `HOST/PATH` is at most
//! 255 bytes. Nothing else (a space, a newline, a second word, upper case outside the tag)
//! passes, so a reference is one word wherever it lands (`FROM`, labels, run snippets, the
//! engine's API).

/// Docker Hub's host, as image references imply it and as credentials are filed under.
pub const DOCKER_HUB: &str = "docker.io";

/// The host that serves Docker Hub's registry API, and that BuildKit asks credentials for.
pub const DOCKER_HUB_REGISTRY: &str = "registry-1.docker.io";

/// The longest `HOST/PATH` the engine takes (the reference grammar's `NameTotalLengthMax`).
const MAX_NAME_LEN: usize = 255;
/// The longest tag the engine takes.
const MAX_TAG_LEN: usize = 128;

/// What [`ImageRef::pinned`] says of a string that is no image reference at all.
pub const NOT_A_REF: &str = "is not an image reference such as `python:3.11-slim-bookworm`";

/// A checked image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry host as written (`registry.example.com:5000`); `None` when the reference
    /// names none (Docker Hub, see [`ImageRef::registry`]).
    pub host: Option<String>,
    /// The repository path under the host (`team/env`, `python`).
    pub path: String,
    pub tag: Option<String>,
    /// `sha256:<64 hex>`.
    pub digest: Option<String>,
}

/// Why a string is not an [`ImageRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefError {
    /// The host, path or tag breaks the rule, or the name is too long.
    Syntax,
    /// Everything but the digest is fine; the digest is not `sha256:<64 hex>`.
    Digest,
}

/// The pieces of a reference as written, found by where `@`, `/` and `:` sit; nothing checked.
struct Parts<'a> {
    host: Option<&'a str>,
    path: &'a str,
    /// `[HOST/]PATH`.
    name: &'a str,
    /// `[HOST/]PATH[:TAG]`: everything before the digest.
    name_tag: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

fn split(s: &str) -> Parts<'_> {
    let (name_tag, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    // The tag is after the last `:` of the last component (a registry port is not a tag).
    let last = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last..].rfind(':') {
        Some(i) => (&name_tag[..last + i], Some(&name_tag[last + i + 1..])),
        None => (name_tag, None),
    };
    let (host, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    };
    Parts {
        host,
        path,
        name,
        name_tag,
        tag,
        digest,
    }
}

fn valid_host(h: &str) -> bool {
    let (name, port) = match h.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h, None),
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok
        && !name.is_empty()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn valid_component(c: &str) -> bool {
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = c.as_bytes();
    b.first().is_some_and(lower_alnum)
        && b.last().is_some_and(lower_alnum)
        && b.iter().all(|x| lower_alnum(x) || b"._-".contains(x))
}

fn valid_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TAG_LEN
        && !t.starts_with(['.', '-'])
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl ImageRef {
    /// Check `s` against the rule (see the module doc). A bad digest is told apart only when
    /// the rest is a reference.
    pub fn parse(s: &str) -> Result<ImageRef, RefError> {
        let p = split(s);
        let ok = p.host.is_none_or(valid_host)
            && p.path.split('/').all(valid_component)
            && p.tag.is_none_or(valid_tag)
            && p.name.len() <= MAX_NAME_LEN;
        if !ok {
            return Err(RefError::Syntax);
        }
        if p.digest.is_some_and(|d| !valid_digest(d)) {
            return Err(RefError::Digest);
        }
        Ok(ImageRef {
            host: p.host.map(str::to_string),
            path: p.path.to_string(),
            tag: p.tag.map(str::to_string),
            digest: p.digest.map(str::to_string),
        })
    }

    /// A base image (`[image] base`, a table row's): pinned by a tag other than `latest`, or
    /// by a digest. The refusal completes "base image `X` ...".
    pub fn pinned(s: &str) -> Result<ImageRef, &'static str> {
        let r = ImageRef::parse(s).map_err(|e| match e {
            RefError::Syntax => NOT_A_REF,
            RefError::Digest => "has a malformed digest (want @sha256:<64 hex>)",
        })?;
        if r.digest.is_some() {
            return Ok(r);
        }
        match r.tag.as_deref() {
            Some("latest") => Err("uses the floating tag `latest`"),
            Some(_) => Ok(r),
            None => Err("has no tag, so it floats like `latest`"),
        }
    }

    /// The registry host: the one written, else Docker Hub's.
    pub fn registry(&self) -> &str {
        self.host.as_deref().unwrap_or(DOCKER_HUB)
    }
}

/// Whether `reference` is a tag the engine can put on an image: `NAME[:TAG]` (no tag means
/// `latest`), no digest.
pub fn is_image_tag(reference: &str) -> bool {
    ImageRef::parse(reference).is_ok_and(|r| r.digest.is_none())
}

/// The registry host of an image reference: its first component when that is a host (has `.`
/// or `:`, or is `localhost`), else Docker Hub.
pub fn host_of(reference: &str) -> String {
    split(reference).host.unwrap_or(DOCKER_HUB).to_string()
}

/// A reference split for the Engine API's pull and tag calls: (`name`, `tag or digest`).
/// `repo@sha256:...` gives the digest, `repo:tag` the tag, `repo` `latest`.
pub fn pull_parts(reference: &str) -> (&str, &str) {
    let p = split(reference);
    match p.digest {
        Some(digest) => (p.name_tag, digest),
        None => (p.name, p.tag.unwrap_or("latest")),
    }
}

/// A repository to push to, checked: an [`ImageRef`] without tag or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The registry host (`docker.io` when the reference names none).
    pub host: String,
    /// The repository as written (without tag).
    pub name: String,
}

impl Repository {
    /// Parse `--push REGISTRY/REPO`; a tag or digest is refused (envbuild picks the tag).
    pub fn parse(s: &str) -> Result<Repository, String> {
        let p = split(s);
        if p.tag.is_some() || p.digest.is_some() {
            return Err(format!(
                "`{s}` names a tag or digest; give only the repository (envbuild tags it \
                 VARIANT-<lock hash>)"
            ));
        }
        match ImageRef::parse(s) {
            Ok(r) => Ok(Repository {
                host: r.registry().to_string(),
                name: s.to_string(),
            }),
            Err(_) => Err(format!(
                "`{s}` is not a repository such as registry.example.com/team/project or \
                 127.0.0.1:5000/envs"
            )),
        }
    }

    /// `NAME:tag`.
    pub fn tagged(&self, tag: &str) -> String {
        format!("{}:{tag}", self.name)
    }
}

/// Parse `--cache-from IMAGE`: `[HOST[:PORT]/]PATH:TAG` (a digest is refused: BuildKit reads a
/// registry cache by tag).
pub fn parse_cache_source(s: &str) -> Result<String, String> {
    match ImageRef::parse(s) {
        Ok(r) if r.tag.is_some() && r.digest.is_none() => Ok(s.to_string()),
        _ => Err(format!(
            "`{s}` is not an image such as registry.example.com/team/env:runtime-cache"
        )),
    }
}

/// The content-addressed tag of `variant` for the build `id` (`RenderedImage::identity`: what
/// the image is built from, templates included): `VARIANT-<id12>`, the tag `image` builds and
/// `image --push` pushes a single-platform lock's image under, and a fleet's image index.
pub fn variant_tag(variant: &str, id: &str) -> String {
    format!("{variant}-{}", id.get(..12).unwrap_or(id))
}

/// [`variant_tag`] of a fleet's platform image: with its platform's suffix (`-arm64`,
/// `core::platform::tag_suffix`; empty for a single-platform lock).
pub fn platform_tag(variant: &str, id: &str, suffix: &str) -> String {
    format!("{}{suffix}", variant_tag(variant, id))
}

/// The moving tag of a variant's registry build cache (`REGISTRY/REPO:VARIANT-cache`), pushed
/// after proof next to the content tag and read back by the next build as `cachefrom`.
pub fn cache_tag(variant: &str) -> String {
    format!("{variant}-cache")
}

/// The moving tag of the wheel path's `install` stage as a registry build cache
/// (`REGISTRY/REPO:install-cache`): the stage is the same for every variant, and no variant's
/// inline cache holds its layers (the pip install), so it travels as an image of its own.
pub const INSTALL_CACHE_TAG: &str = "install-cache";

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> String {
        format!("sha256:{}", "a".repeat(64))
    }

    #[test]
    fn a_reference_splits_into_host_path_tag_and_digest() {
        let r = ImageRef::parse(&format!("reg.example:5000/team/env:v1@{}", digest())).unwrap();
        assert_eq!(r.host.as_deref(), Some("reg.example:5000"));
        assert_eq!(r.path, "team/env");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.digest, Some(digest()));
        assert_eq!(r.registry(), "reg.example:5000");
        let hub = ImageRef::parse("python:3.11").unwrap();
        assert_eq!((hub.host.as_deref(), hub.registry()), (None, DOCKER_HUB));
        // A first component without `.` or `:` is a path component, `localhost` a host.
        assert_eq!(ImageRef::parse("team/env").unwrap().host, None);
        let local = ImageRef::parse("localhost/env").unwrap();
        assert_eq!(
            (local.host.as_deref(), local.path.as_str()),
            (Some("localhost"), "env")
        );
        // A `:` in the host is its port, not a tag.
        let port = ImageRef::parse("localhost:5000/img").unwrap();
        assert_eq!(
            (port.host.as_deref(), port.tag),
            (Some("localhost:5000"), None)
        );
        // Without a slash, `name:5000` is a tag.
        assert_eq!(
            ImageRef::parse("reg:5000").unwrap().tag.as_deref(),
            Some("5000")
        );
    }

    #[test]
    fn hostile_strings_are_refused() {
        for bad in [
            "",
            " ",
            "busybox AS evil FROM alpine:3",
            "busybox:1 AS x",
            "x:1\nRUN id",
            "x:1\n",
            "x\r:1",
            "x:1\u{0}",
            "x:$(id)",
            "x:`id`",
            "x;rm -rf /:1",
            "reg.io/x;rm -rf /",
            "x:1;y",
            "x:1 ",
            "'x':1",
            "\"x\":1",
            "x:1#",
            "ünïcode:1",
            "x:ünï",
            "-x:1",
            "/x:1",
            "x//y:1",
            "x/:1",
            "x:",
            ":1",
            "x:-1",
            "x:.1",
            "x:a:b",
            "x@",
            "x@@sha256:00",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hosts_take_lower_case_labels_and_a_numeric_port() {
        for good in [
            "127.0.0.1:5000/x",
            "localhost:1/x",
            "reg-1.example.com/x",
            "reg.io:65535/x",
        ] {
            assert!(ImageRef::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "reg.io:/x",
            "reg.io:port/x",
            "reg.io:123456/x",
            "reg.io:50:00/x",
            "a:b/c:1",
            ":5000/x",
            "Reg.io/x",
            "REG.IO/x",
            "reg_x.io/x",
            "-reg.io/x",
            "reg-.io/x",
            "reg..io/x",
            ".reg.io/x",
            "reg.io./x",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_are_lower_case_and_dot_dot_is_no_component() {
        for good in ["a", "a/b/c", "a_b", "a__b", "a-b", "a.b", "a..b", "0/9"] {
            assert!(ImageRef::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "A",
            "Team/env",
            "a/B",
            "..",
            "../x",
            "a/../b",
            "a/..",
            "./a",
            "a/.",
            ".a",
            "a.",
            "a-",
            "_a",
            "a/b:c/d",
            "a/b:c/d:1",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
        // Upper case is fine in a tag.
        assert!(ImageRef::parse("nvidia/cuda:12.4.1-cudnn-RUNTIME-ubuntu22.04").is_ok());
        let long = format!("{}:1", "a".repeat(MAX_NAME_LEN));
        assert!(ImageRef::parse(&long).is_ok());
        let longer = format!("{}:1", "a".repeat(MAX_NAME_LEN + 1));
        assert_eq!(ImageRef::parse(&longer), Err(RefError::Syntax));
        assert!(ImageRef::parse(&format!("a:{}", "t".repeat(MAX_TAG_LEN))).is_ok());
        assert!(ImageRef::parse(&format!("a:{}", "t".repeat(MAX_TAG_LEN + 1))).is_err());
    }

    #[test]
    fn digests_are_sha256_with_64_hex_digits() {
        assert!(ImageRef::parse(&format!("busybox@{}", digest())).is_ok());
        let upper = format!("busybox@sha256:{}", "A".repeat(64));
        assert!(ImageRef::parse(&upper).is_ok());
        for bad in [
            "busybox@sha256:zz".to_string(),
            format!("busybox@sha256:{}", "a".repeat(63)),
            format!("busybox@sha256:{}", "a".repeat(65)),
            format!("busybox@sha512:{}", "a".repeat(64)),
            format!("busybox@{}", "a".repeat(64)),
            format!("busybox@{}\n", digest()),
            format!("busybox@{}@{}", digest(), digest()),
        ] {
            assert_eq!(ImageRef::parse(&bad), Err(RefError::Digest), "{bad}");
        }
        // The rest decides first: a bad name with a bad digest is a syntax error.
        assert_eq!(ImageRef::parse("Bad@sha256:zz"), Err(RefError::Syntax));
    }

    #[test]
    fn a_pinned_base_has_a_tag_other_than_latest_or_a_digest() {
        for ok in [
            "python:3.11-slim-bookworm".to_string(),
            "nvcr.io/nvidia/pytorch:24.05-py3".to_string(),
            "localhost:5000/img:1.0".to_string(),
            format!("busybox@{}", digest()),
            format!("busybox:1.36@{}", digest()),
            format!("busybox:latest@{}", digest()),
        ] {
            assert!(ImageRef::pinned(&ok).is_ok(), "{ok}");
        }
        assert_eq!(
            ImageRef::pinned("python"),
            Err("has no tag, so it floats like `latest`")
        );
        assert_eq!(
            ImageRef::pinned("localhost:5000/img"),
            Err("has no tag, so it floats like `latest`")
        );
        assert_eq!(
            ImageRef::pinned("python:latest"),
            Err("uses the floating tag `latest`")
        );
        assert_eq!(
            ImageRef::pinned("img@sha256:zz"),
            Err("has a malformed digest (want @sha256:<64 hex>)")
        );
        assert_eq!(ImageRef::pinned("Python:3.11"), Err(NOT_A_REF));
    }

    #[test]
    fn image_tags_take_no_digest_and_may_omit_the_tag() {
        for good in [
            "env:runtime-0123456789ab",
            "team/env:v1",
            "reg.example:5000/a/b:c",
            "a",
        ] {
            assert!(is_image_tag(good), "{good}");
        }
        for bad in [
            "Env:v1", "env:", "env:-x", "env:a b", "/env:v", "env/:v", "env:$x", "",
        ] {
            assert!(!is_image_tag(bad), "{bad}");
        }
        assert!(!is_image_tag(&format!("env@{}", digest())));
    }

    #[test]
    fn cache_sources_need_a_repository_and_a_tag() {
        for good in [
            "127.0.0.1:5000/envs/demo:runtime-cache",
            "registry.example.com/team/env:dev-0123456789ab",
            "team/env:runtime-cache",
        ] {
            assert_eq!(parse_cache_source(good), Ok(good.to_string()));
        }
        for bad in [
            "127.0.0.1:5000/envs/demo",
            "envs/demo@sha256:0000",
            "envs/Demo:runtime",
            "envs/demo:",
            "envs/demo:-x",
            "envs/demo:a b",
            "envs/demo:$(id)",
            ":tag",
            "",
        ] {
            assert!(parse_cache_source(bad).is_err(), "{bad}");
        }
        assert!(parse_cache_source(&format!("e:t@{}", digest())).is_err());
        assert_eq!(cache_tag("runtime"), "runtime-cache");
    }

    #[test]
    fn repositories_are_checked_and_their_host_found() {
        let r = Repository::parse("127.0.0.1:5000/team/envs").unwrap();
        assert_eq!(r.host, "127.0.0.1:5000");
        assert_eq!(
            r.tagged("runtime-0123456789ab"),
            "127.0.0.1:5000/team/envs:runtime-0123456789ab"
        );
        assert_eq!(Repository::parse("team/envs").unwrap().host, DOCKER_HUB);
        assert_eq!(
            Repository::parse("localhost/envs").unwrap().host,
            "localhost"
        );
        assert_eq!(Repository::parse("ghcr.io/org/x").unwrap().host, "ghcr.io");
        for bad in [
            "",
            "Team/envs",
            "reg.io/envs:tag",
            "reg.io/envs@sha256:00",
            "reg.io/",
            "reg.io//x",
            "reg.io/x;rm -rf /",
            "reg.io:port/x",
            "reg.io/-x",
            "reg.io/x y",
            "reg.io/x\n",
        ] {
            assert!(Repository::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Repository::parse("reg.io/envs:tag")
            .unwrap_err()
            .contains("names a tag or digest"));
        assert!(Repository::parse("reg.io/-x")
            .unwrap_err()
            .contains("is not a repository"));
    }

    #[test]
    fn pull_parts_split_tag_and_digest() {
        assert_eq!(pull_parts("python:3.11"), ("python", "3.11"));
        assert_eq!(pull_parts("reg:5000/a/b"), ("reg:5000/a/b", "latest"));
        assert_eq!(
            pull_parts("reg:5000/a/b@sha256:abc"),
            ("reg:5000/a/b", "sha256:abc")
        );
        assert_eq!(
            pull_parts("reg:5000/a/b:t@sha256:abc"),
            ("reg:5000/a/b:t", "sha256:abc")
        );
        assert_eq!(pull_parts("reg:5000/a/b:t"), ("reg:5000/a/b", "t"));
        assert_eq!(pull_parts("a/b:c"), ("a/b", "c"));
        assert_eq!(pull_parts("reg:5000/a:v1"), ("reg:5000/a", "v1"));
        assert_eq!(host_of("reg:5000/a/b:t"), "reg:5000");
        assert_eq!(host_of("localhost/a"), "localhost");
        assert_eq!(host_of("python:3.11"), DOCKER_HUB);
        assert_eq!(host_of("team/env:1"), DOCKER_HUB);
    }
}
