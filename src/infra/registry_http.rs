//! The registry's own HTTP API (distribution v2), for what the Engine API cannot do: read a
//! pushed image's manifest descriptor (media type, digest, size) and write a fleet's
//! multi-platform image index, which the engine's classic image store cannot hold. Credentials
//! are `--push`'s (`infra::registry_auth`): basic auth, or the bearer token a `401` challenge
//! asks for. Plain http only for a loopback registry (as the engine treats it); https
//! otherwise. Performs I/O (the network).

use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_index::{self, Member};
use crate::core::image_ref::{Repository, DOCKER_HUB};
use crate::core::spec::Platform;
use crate::infra::docker::codes::PUSH_FAILED;
use crate::infra::registry_auth::Credentials;

/// The manifest types a GET accepts: one image's (OCI, Docker v2) and the indexes.
const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// The largest manifest read (an image's is a few KiB).
const MAX_MANIFEST: usize = 4 << 20;

fn failed(message: String) -> Failure {
    Failure::one(Diagnostic::error(PUSH_FAILED, message).with_hint(
        "check that this machine reaches the registry's HTTP API and that the credentials may \
         write the repository (the same as for the images' push)",
    ))
}

/// One repository of one registry, over HTTP.
pub struct RegistryApi {
    http: reqwest::Client,
    /// `https://HOST` (`http://` for a loopback registry).
    base: String,
    /// The repository's path in the registry (`team/envs`, `library/x` on Docker Hub).
    path: String,
    creds: Option<Credentials>,
    /// The bearer token a challenge gave, reused for the next requests.
    token: std::sync::Mutex<Option<String>>,
}

/// Whether `host` is this machine: the engine talks plain http to such a registry.
fn is_loopback(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    name == "localhost" || name.starts_with("127.") || name == "[::1]"
}

impl RegistryApi {
    pub fn new(repo: &Repository, creds: Option<Credentials>) -> Result<RegistryApi, Failure> {
        let (base, path) = if repo.host == DOCKER_HUB {
            let path = repo.name.strip_prefix("docker.io/").unwrap_or(&repo.name);
            let path = match path.contains('/') {
                true => path.to_string(),
                false => format!("library/{path}"),
            };
            ("https://registry-1.docker.io".to_string(), path)
        } else {
            let scheme = if is_loopback(&repo.host) {
                "http"
            } else {
                "https"
            };
            let path = repo
                .name
                .strip_prefix(&format!("{}/", repo.host))
                .unwrap_or(&repo.name)
                .to_string();
            (format!("{scheme}://{}", repo.host), path)
        };
        Ok(RegistryApi {
            http: crate::infra::conda_solve::http_client()?,
            base,
            path,
            creds,
            token: std::sync::Mutex::new(None),
        })
    }

    fn manifest_url(&self, reference: &str) -> String {
        format!("{}/v2/{}/manifests/{reference}", self.base, self.path)
    }

    /// Send `make()`'s request, answering one `401` challenge (bearer token or basic auth).
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Failure> {
        let with_auth = |rb: reqwest::RequestBuilder, basic: bool| {
            let token = self.token.lock().map(|t| t.clone()).unwrap_or_default();
            match (token, &self.creds) {
                (Some(t), _) => rb.bearer_auth(t),
                (None, Some(c)) if basic => rb.basic_auth(&c.username, Some(&c.password)),
                _ => rb,
            }
        };
        let err = |e: reqwest::Error| failed(format!("{what}: {e}"));
        let first = with_auth(make(), false).send().await.map_err(err)?;
        if first.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(first);
        }
        let challenge = first
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if let Some(params) = challenge.strip_prefix("Bearer ") {
            let token = self.bearer_token(params).await?;
            if let Ok(mut t) = self.token.lock() {
                *t = Some(token);
            }
        }
        with_auth(make(), true).send().await.map_err(err)
    }

    /// The token of a bearer challenge's `realm`, for `service` and this repository.
    async fn bearer_token(&self, params: &str) -> Result<String, Failure> {
        let get = |key: &str| {
            params.split(',').find_map(|kv| {
                let (k, v) = kv.trim().split_once('=')?;
                (k == key).then(|| v.trim_matches('"').to_string())
            })
        };
        let realm =
            get("realm").ok_or_else(|| failed("the registry's challenge names no realm".into()))?;
        let mut rb = self
            .http
            .get(&realm)
            .query(&[("scope", format!("repository:{}:pull,push", self.path))]);
        if let Some(service) = get("service") {
            rb = rb.query(&[("service", service)]);
        }
        if let Some(c) = &self.creds {
            rb = rb.basic_auth(&c.username, Some(&c.password));
        }
        let resp = rb
            .send()
            .await
            .map_err(|e| failed(format!("asking {realm} for a token: {e}")))?;
        if !resp.status().is_success() {
            return Err(failed(format!(
                "{realm} refused a token for {} ({})",
                self.path,
                resp.status()
            )));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let t: Token = resp
            .json()
            .await
            .map_err(|e| failed(format!("{realm}'s token answer: {e}")))?;
        t.token
            .or(t.access_token)
            .ok_or_else(|| failed(format!("{realm} gave no token")))
    }

    /// The manifest `reference` (a tag or digest) names: its media type and bytes.
    pub async fn manifest(&self, reference: &str) -> Result<(String, Vec<u8>), Failure> {
        let url = self.manifest_url(reference);
        let what = format!("reading {url}");
        let resp = self
            .send(&what, || {
                self.http.get(&url).header(reqwest::header::ACCEPT, ACCEPT)
            })
            .await?;
        if !resp.status().is_success() {
            return Err(failed(format!("{what}: {}", resp.status())));
        }
        let media_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| failed(format!("{what}: {e}")))?;
        if bytes.len() > MAX_MANIFEST {
            return Err(failed(format!("{what}: over {MAX_MANIFEST} bytes")));
        }
        Ok((media_type, bytes.to_vec()))
    }

    /// The descriptor of `platform`'s image that `reference` names: the manifest itself, or,
    /// when the registry holds an index there, that index's entry for the platform.
    pub async fn member(&self, reference: &str, platform: Platform) -> Result<Member, Failure> {
        let (media_type, bytes) = self.manifest(reference).await?;
        if image_index::is_index(&media_type) {
            let manifests = image_index::parse_index(&bytes)
                .map_err(|e| failed(format!("the index at {reference}: {e}")))?;
            let d = image_index::find_platform(&manifests, platform).ok_or_else(|| {
                failed(format!(
                    "the index at {reference} has no image for {}",
                    platform.as_str()
                ))
            })?;
            return Ok(Member {
                platform,
                media_type: d.media_type.clone(),
                digest: d.digest.clone(),
                size: d.size,
            });
        }
        Ok(Member {
            platform,
            media_type,
            digest: format!("sha256:{}", crate::core::hash::sha256_hex(&bytes)),
            size: bytes.len() as u64,
        })
    }

    /// PUT the index `bytes` under `tag`; the digest the registry stored it under.
    pub async fn put_index(&self, tag: &str, bytes: &[u8]) -> Result<String, Failure> {
        let url = self.manifest_url(tag);
        let what = format!("writing the image index {url}");
        let resp = self
            .send(&what, || {
                self.http
                    .put(&url)
                    .header(reqwest::header::CONTENT_TYPE, image_index::OCI_INDEX)
                    .body(bytes.to_vec())
            })
            .await?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            return Err(failed(format!("{what}: {status} {}", body.trim())));
        }
        Ok(format!("sha256:{}", crate::core::hash::sha256_hex(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_registry_is_plain_http() {
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("localhost"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("registry.example.com"));
        assert!(!is_loopback("127example.com"));
        let repo = Repository::parse("127.0.0.1:5000/team/envs").unwrap();
        let api = RegistryApi::new(&repo, None).unwrap();
        assert_eq!(
            api.manifest_url("runtime-0123"),
            "http://127.0.0.1:5000/v2/team/envs/manifests/runtime-0123"
        );
        let hub = Repository::parse("someone/envs").unwrap();
        let api = RegistryApi::new(&hub, None).unwrap();
        assert_eq!(
            api.manifest_url("t"),
            "https://registry-1.docker.io/v2/someone/envs/manifests/t"
        );
    }
}
