//! Registries, as values: image references (`--push REGISTRY/REPO`, a base's `name@sha256:...`),
//! which credentials a docker `config.json` names for a registry host, and the verdict document
//! that travels beside a pushed image (`VARIANT-<hash12>.verdict`). This module performs no I/O.

use crate::core::smoke::{Mode, SmokeReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Docker Hub's host, as image references imply it and as credentials are filed under.
pub const DOCKER_HUB: &str = "docker.io";
/// The key docker files Docker Hub's credentials under in `config.json`.
pub const DOCKER_HUB_AUTH_KEY: &str = "https://index.docker.io/v1/";
/// The suffix of the tag the verdict of `REPO:TAG` is pushed as (`REPO:TAG.verdict`).
pub const VERDICT_SUFFIX: &str = ".verdict";
/// The label of a verdict image holding the verdict document (base64 of its JSON).
pub const LABEL_VERDICT: &str = "dev.envbuild.verdict";
/// The label of a verdict image naming the image digest it holds for.
pub const LABEL_VERDICT_FOR: &str = "dev.envbuild.verdict-for";

/// A repository to push to, checked: `[HOST[:PORT]/]PATH`, PATH in lower case `a-z0-9` with
/// `._-` inside components and `/` between them, as Docker's reference grammar has it.
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
        if s.contains('@') || s.rsplit('/').next().is_some_and(|last| last.contains(':')) {
            return Err(format!(
                "`{s}` names a tag or digest; give only the repository (envbuild tags it \
                 VARIANT-<lock hash>)"
            ));
        }
        let (host, path) = split_host(s);
        let path_ok = !path.is_empty() && path.split('/').all(valid_component);
        let host_ok = host.is_none_or(valid_host);
        if !path_ok || !host_ok || s.len() > 255 {
            return Err(format!(
                "`{s}` is not a repository such as registry.example.com/team/project or \
                 127.0.0.1:5000/envs"
            ));
        }
        Ok(Repository {
            host: host.unwrap_or(DOCKER_HUB).to_string(),
            name: s.to_string(),
        })
    }

    /// `NAME:tag`.
    pub fn tagged(&self, tag: &str) -> String {
        format!("{}:{tag}", self.name)
    }
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

/// Parse `--cache-from IMAGE`: `[HOST[:PORT]/]PATH:TAG` (a digest is refused: BuildKit reads a
/// registry cache by tag).
pub fn parse_cache_source(s: &str) -> Result<String, String> {
    let last = s.rsplit('/').next().unwrap_or(s);
    let Some((name, tag)) = last
        .rfind(':')
        .map(|i| (&s[..s.len() - last.len() + i], &last[i + 1..]))
        .filter(|_| !s.contains('@'))
    else {
        return Err(format!(
            "`{s}` is not an image such as registry.example.com/team/env:runtime-cache"
        ));
    };
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    match Repository::parse(name) {
        Ok(_) if tag_ok => Ok(s.to_string()),
        _ => Err(format!(
            "`{s}` is not an image such as registry.example.com/team/env:runtime-cache"
        )),
    }
}

/// The registry host of an image reference: its first component when that looks like a host
/// (has `.` or `:`, or is `localhost`), else Docker Hub.
pub fn host_of(reference: &str) -> String {
    split_host(reference).0.unwrap_or(DOCKER_HUB).to_string()
}

fn split_host(s: &str) -> (Option<&str>, &str) {
    match s.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (Some(first), rest)
        }
        _ => (None, s),
    }
}

fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|&x| x.is_ascii_lowercase() || x.is_ascii_digit() || b"._-".contains(&x))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
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
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// An image reference split for the Engine API's pull: (`name`, `tag or digest`).
/// `repo@sha256:...` gives the digest, `repo:tag` the tag, `repo` `latest`.
pub fn pull_parts(reference: &str) -> (&str, &str) {
    if let Some((name, digest)) = reference.split_once('@') {
        return (name, digest);
    }
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[slash..].rfind(':') {
        Some(i) => (&reference[..slash + i], &reference[slash + i + 1..]),
        None => (reference, "latest"),
    }
}

/// The part of a docker `config.json` envbuild reads (`docker login` writes it).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerConfig {
    #[serde(default)]
    pub auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    pub creds_store: Option<String>,
    #[serde(default)]
    pub cred_helpers: BTreeMap<String, String>,
}

/// One `auths` entry: `auth` is base64 of `user:password`; an identity token may stand instead.
#[derive(Default, Deserialize)]
pub struct AuthEntry {
    #[serde(default)]
    pub auth: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub identitytoken: Option<String>,
}

impl std::fmt::Debug for AuthEntry {
    // A secret never reaches a message, even a debug one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthEntry(..)")
    }
}

/// Where the credentials of one registry host are, per a docker `config.json`.
#[derive(PartialEq, Eq)]
pub enum CredentialSource {
    /// Ask `docker-credential-NAME get` (from `credHelpers`, else `credsStore`).
    Helper(String),
    /// A user name and password (or identity token with an empty user) found inline.
    Inline {
        username: String,
        password: String,
        identity_token: Option<String>,
    },
    /// The config names none: go anonymous.
    None,
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Helper(h) => write!(f, "Helper({h})"),
            CredentialSource::Inline { .. } => f.write_str("Inline(..)"),
            CredentialSource::None => f.write_str("None"),
        }
    }
}

/// A config key in any of the forms docker writes (`https://host/v1/`, `http://host`, `host`)
/// as its bare host; Docker Hub's keys as `docker.io`.
fn key_host(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = k.split('/').next().unwrap_or(k);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => DOCKER_HUB.to_string(),
        h => h.to_string(),
    }
}

impl DockerConfig {
    /// Where `host`'s credentials are: `credHelpers` first, then an inline `auths` entry, then
    /// `credsStore` (as the docker CLI looks them up).
    pub fn source_for(&self, host: &str) -> Result<CredentialSource, String> {
        let host = key_host(host);
        if let Some((_, helper)) = self.cred_helpers.iter().find(|(k, _)| key_host(k) == host) {
            return Ok(CredentialSource::Helper(helper.clone()));
        }
        if let Some((key, e)) = self.auths.iter().find(|(k, _)| key_host(k) == host) {
            if let Some(inline) = inline_credentials(e).map_err(|why| {
                format!("the `auths` entry for `{key}` in the docker config is unreadable: {why}")
            })? {
                return Ok(inline);
            }
        }
        Ok(match &self.creds_store {
            Some(store) if !store.is_empty() => CredentialSource::Helper(store.clone()),
            _ => CredentialSource::None,
        })
    }
}

fn inline_credentials(e: &AuthEntry) -> Result<Option<CredentialSource>, String> {
    let (mut username, mut password) = (e.username.clone(), e.password.clone());
    if let Some(auth) = e.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = base64_decode(auth).ok_or("`auth` is not base64")?;
        let text = String::from_utf8(decoded).map_err(|_| "`auth` is not UTF-8 text")?;
        let (u, p) = text
            .split_once(':')
            .ok_or("`auth` is not base64 of `user:password`")?;
        (username, password) = (Some(u.to_string()), Some(p.to_string()));
    }
    let token = e.identitytoken.clone().filter(|t| !t.is_empty());
    Ok(match (username, password, token) {
        (Some(u), Some(p), t) => Some(CredentialSource::Inline {
            username: u,
            password: p,
            identity_token: t,
        }),
        (u, _, Some(t)) => Some(CredentialSource::Inline {
            username: u.unwrap_or_default(),
            password: String::new(),
            identity_token: Some(t),
        }),
        _ => None,
    })
}

/// Decode standard base64 (padding optional); `None` for anything else.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c)? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}

/// Encode as standard base64 with padding.
pub fn base64_encode(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &x)| n | (x as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The engine a verdict was reached on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictEngine {
    /// `docker info`'s ID.
    pub id: String,
    /// The engine's version (`docker version`'s server version).
    pub version: String,
    /// Where envbuild reached it (`unix:///var/run/docker.sock`, `tcp://...`).
    pub host: String,
}

/// A passing smoke verdict as it travels beside its image in a registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TravellingVerdict {
    /// 1.
    pub schema: u32,
    /// The image reference pushed (`REGISTRY/REPO:VARIANT-<hash12>`).
    pub image: String,
    /// The manifest digest the registry gave the image (`sha256:...`): the verdict holds for
    /// this digest only.
    pub image_digest: String,
    /// The engine's image id (the config digest).
    pub image_id: String,
    pub lock_sha256: String,
    pub variant: String,
    /// `gpu` or `cpu`: what the smoke test checked.
    pub mode: String,
    pub passed: bool,
    pub exit_code: i64,
    /// The driver and GPUs the container got (`driver=...;gpus=GPU-...`), or `no GPU requested`.
    pub gpus: String,
    pub engine: VerdictEngine,
    /// When the smoke test ended, UTC (`2026-12-01T05:00:00Z`).
    pub tested_at: String,
    pub envbuild_version: String,
    /// sha256 of the smoke script that ran.
    pub smoke_script_sha256: String,
    /// The smoke report itself: every check, and the environment it saw.
    pub report: SmokeReport,
}

/// Why a verdict from the registry does not let a run skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictMismatch {
    NotPassed,
    /// It holds for another image (the tag was pushed again since).
    OtherDigest {
        verdict: String,
        image: String,
    },
    /// It was reached without a GPU and the run asks for one.
    CpuOnly,
    OtherLock,
}

impl std::fmt::Display for VerdictMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerdictMismatch::NotPassed => f.write_str("the stored verdict is not a pass"),
            VerdictMismatch::OtherDigest { verdict, image } => write!(
                f,
                "the verdict holds for image {verdict}, the tag now names {image}"
            ),
            VerdictMismatch::CpuOnly => f.write_str(
                "the verdict was reached in cpu mode (no GPU) and this run asks for gpu",
            ),
            VerdictMismatch::OtherLock => {
                f.write_str("the verdict is for another lock (same 12-hex tag prefix)")
            }
        }
    }
}

impl TravellingVerdict {
    /// Whether this verdict lets a run in `mode` skip for the image whose registry digest is
    /// `digest`, built from the lock `lock_sha256`. A `gpu` verdict covers a `cpu` run (every
    /// cpu check is among the gpu ones); a `cpu` verdict never covers a `gpu` run.
    pub fn holds_for(
        &self,
        mode: Mode,
        digest: &str,
        lock_sha256: &str,
    ) -> Result<(), VerdictMismatch> {
        if !self.passed || !self.report.passed(self.exit_code) {
            return Err(VerdictMismatch::NotPassed);
        }
        if self.image_digest != digest {
            return Err(VerdictMismatch::OtherDigest {
                verdict: self.image_digest.clone(),
                image: digest.to_string(),
            });
        }
        if self.lock_sha256 != lock_sha256 {
            return Err(VerdictMismatch::OtherLock);
        }
        if mode == Mode::Gpu && self.mode != Mode::Gpu.as_str() {
            return Err(VerdictMismatch::CpuOnly);
        }
        Ok(())
    }

    /// The label value that carries it (base64 of its JSON: no quoting issue in a `LABEL`).
    pub fn to_label(&self) -> String {
        base64_encode(&serde_json::to_vec(self).unwrap_or_default())
    }

    /// Read it back from [`LABEL_VERDICT`]'s value.
    pub fn from_label(value: &str) -> Result<TravellingVerdict, String> {
        let bytes = base64_decode(value.trim()).ok_or("the verdict label is not base64")?;
        let v: TravellingVerdict = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the verdict label is not a verdict document: {e}"))?;
        if v.schema != 1 {
            return Err(format!("verdict schema {} is not supported", v.schema));
        }
        Ok(v)
    }
}

/// `seconds` since the Unix epoch as RFC 3339 UTC (`2026-12-01T05:00:00Z`).
pub fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn pull_parts_split_tag_and_digest() {
        assert_eq!(pull_parts("python:3.11"), ("python", "3.11"));
        assert_eq!(pull_parts("reg:5000/a/b"), ("reg:5000/a/b", "latest"));
        assert_eq!(
            pull_parts("reg:5000/a/b@sha256:abc"),
            ("reg:5000/a/b", "sha256:abc")
        );
        assert_eq!(pull_parts("reg:5000/a/b:t"), ("reg:5000/a/b", "t"));
        assert_eq!(host_of("reg:5000/a/b:t"), "reg:5000");
        assert_eq!(host_of("python:3.11"), DOCKER_HUB);
    }

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for s in ["", "a", "ab", "abc", "abcd", "user:pässword"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).as_deref(), Some(s.as_bytes()), "{s}");
        }
        assert_eq!(base64_encode(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64_decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(base64_decode("dXNlcjpwYXNz===="), None);
        assert_eq!(base64_decode("d"), None);
        assert_eq!(base64_decode("dX!l"), None);
    }

    fn config(json: &str) -> DockerConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn credentials_come_from_helpers_then_auths_then_the_store() {
        let c = config(
            r#"{"auths": {"https://index.docker.io/v1/": {"auth": "dXNlcjpwYXNz"},
                          "127.0.0.1:5000": {"auth": "YTpi"},
                          "ghcr.io": {}},
                "credsStore": "desktop",
                "credHelpers": {"gcr.io": "gcloud"}}"#,
        );
        let inline = |u: &str, p: &str| CredentialSource::Inline {
            username: u.into(),
            password: p.into(),
            identity_token: None,
        };
        assert_eq!(c.source_for("docker.io").unwrap(), inline("user", "pass"));
        assert_eq!(c.source_for("127.0.0.1:5000").unwrap(), inline("a", "b"));
        assert_eq!(
            c.source_for("gcr.io").unwrap(),
            CredentialSource::Helper("gcloud".into())
        );
        // An entry with no secret (a store keeps it) falls through to the store.
        assert_eq!(
            c.source_for("ghcr.io").unwrap(),
            CredentialSource::Helper("desktop".into())
        );
        assert_eq!(
            config("{}").source_for("x.io").unwrap(),
            CredentialSource::None
        );
        let bad = config(r#"{"auths": {"x.io": {"auth": "bm9jb2xvbg=="}}}"#);
        let err = bad.source_for("x.io").unwrap_err();
        assert!(
            err.contains("user:password") && !err.contains("nocolon"),
            "{err}"
        );
        // Secrets stay out of debug output.
        let shown = format!("{:?} {:?}", c.auths, c.source_for("docker.io").unwrap());
        assert!(
            !shown.contains("dXNlcjpwYXNz") && !shown.contains("pass"),
            "{shown}"
        );
    }

    fn verdict(mode: &str, status: &str) -> TravellingVerdict {
        let report: SmokeReport = serde_json::from_value(serde_json::json!({
            "schema": 1, "status": status, "mode": mode, "duration_s": 0.1,
            "environment": {}, "checks": []
        }))
        .unwrap();
        TravellingVerdict {
            schema: 1,
            image: "127.0.0.1:5000/e:runtime-0123456789ab".into(),
            image_digest: "sha256:aa".into(),
            image_id: "sha256:bb".into(),
            lock_sha256: "cc".into(),
            variant: "runtime".into(),
            mode: mode.into(),
            passed: status == "pass",
            exit_code: if status == "pass" { 0 } else { 1 },
            gpus: "no GPU requested".into(),
            engine: VerdictEngine {
                id: "E".into(),
                version: "20.10".into(),
                host: "unix:///var/run/docker.sock".into(),
            },
            tested_at: rfc3339(0),
            envbuild_version: "0.1.0".into(),
            smoke_script_sha256: "dd".into(),
            report,
        }
    }

    #[test]
    fn a_verdict_holds_for_its_digest_lock_and_a_mode_it_covers() {
        let gpu = verdict("gpu", "pass");
        assert_eq!(gpu.holds_for(Mode::Gpu, "sha256:aa", "cc"), Ok(()));
        assert_eq!(gpu.holds_for(Mode::Cpu, "sha256:aa", "cc"), Ok(()));
        assert!(matches!(
            gpu.holds_for(Mode::Gpu, "sha256:ab", "cc"),
            Err(VerdictMismatch::OtherDigest { .. })
        ));
        assert_eq!(
            gpu.holds_for(Mode::Gpu, "sha256:aa", "cd"),
            Err(VerdictMismatch::OtherLock)
        );
        let cpu = verdict("cpu", "pass");
        assert_eq!(cpu.holds_for(Mode::Cpu, "sha256:aa", "cc"), Ok(()));
        assert_eq!(
            cpu.holds_for(Mode::Gpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::CpuOnly)
        );
        let failed = verdict("cpu", "fail");
        assert_eq!(
            failed.holds_for(Mode::Cpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::NotPassed)
        );
        // A document claiming a pass whose report failed does not hold either.
        let lying = TravellingVerdict {
            passed: true,
            exit_code: 0,
            ..failed
        };
        assert_eq!(
            lying.holds_for(Mode::Cpu, "sha256:aa", "cc"),
            Err(VerdictMismatch::NotPassed)
        );
    }

    #[test]
    fn verdict_labels_round_trip_and_garbage_is_refused() {
        let v = verdict("gpu", "pass");
        let label = v.to_label();
        assert!(label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)));
        assert_eq!(TravellingVerdict::from_label(&label), Ok(v.clone()));
        assert!(TravellingVerdict::from_label("!!").is_err());
        assert!(TravellingVerdict::from_label(&base64_encode(b"{}")).is_err());
        let v2 = TravellingVerdict { schema: 2, ..v };
        assert!(TravellingVerdict::from_label(&v2.to_label())
            .unwrap_err()
            .contains("schema 2"));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_101_200), "2026-12-01T05:00:00Z");
    }
}
