//! The registry's own HTTP API (distribution v2), for what the Engine API cannot do: read a
//! pushed image's manifest descriptor (media type, digest, size) and write a fleet's
//! multi-platform image index, which the engine's classic image store cannot hold. Credentials
//! are `--push`'s (`infra::registry_auth`), given as a `401` challenge asks: basic auth, or the
//! bearer token flow of Docker Hub, GHCR, GAR, Harbor and distribution's `auth: token` (the
//! realm asked for a token for the challenge's scope, with basic auth, an identity token's
//! OAuth2 refresh grant, or anonymously). Plain http only for a loopback registry (as the engine
//! treats it); https otherwise. Performs I/O (the network).

use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_index::{self, Member};
use crate::core::image_ref::{Repository, DOCKER_HUB};
use crate::core::spec::Platform;
use crate::infra::docker::codes::PUSH_FAILED;
use crate::infra::registry_auth::{self, Credentials};

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

/// What a request does to the repository: the actions of the token scope it needs when the
/// registry's challenge names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Pull,
    Push,
}

impl Access {
    fn actions(self) -> &'static str {
        match self {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        }
    }
}

/// How the requests after a first challenge authenticate.
#[derive(Debug, Clone, Default)]
enum Auth {
    /// Nothing yet: the first request goes without, the registry's challenge says what it wants.
    #[default]
    Unasked,
    /// The bearer token the last challenge gave (reused until the registry refuses it).
    Bearer(String),
    /// The registry asked for basic auth.
    Basic,
}

/// One `WWW-Authenticate` challenge: its scheme, lower case, and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Challenge {
    scheme: String,
    params: Vec<(String, String)>,
}

impl Challenge {
    /// The parameter `key` (case-insensitive, as RFC 9110 has it).
    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

/// The challenges of a `WWW-Authenticate` value (RFC 9110 11.6.1): `Bearer
/// realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:x:pull,push"`,
/// several in one value, quoted values with commas and escapes, unquoted ones. A word followed
/// by `=` is a parameter of the current challenge, any other word starts the next one.
fn parse_challenges(value: &str) -> Vec<Challenge> {
    let b = value.as_bytes();
    let mut i = 0;
    let mut out: Vec<Challenge> = Vec::new();
    let skip = |i: &mut usize, set: &[u8]| {
        while *i < b.len() && set.contains(&b[*i]) {
            *i += 1;
        }
    };
    // Delimiters are ASCII, so these byte positions are char boundaries.
    let word = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && !b" \t,=\"".contains(&b[*i]) {
            *i += 1;
        }
        &value[start..*i]
    };
    loop {
        skip(&mut i, b" \t,");
        if i >= b.len() {
            return out;
        }
        let w = word(&mut i);
        if w.is_empty() {
            // A stray `=` or quote: not a challenge, step over it.
            i += 1;
            continue;
        }
        let mut j = i;
        skip(&mut j, b" \t");
        let is_param = j < b.len() && b[j] == b'=' && !out.is_empty();
        if !is_param {
            out.push(Challenge {
                scheme: w.to_ascii_lowercase(),
                params: Vec::new(),
            });
            continue;
        }
        i = j + 1;
        skip(&mut i, b" \t");
        let mut v = String::new();
        if i < b.len() && b[i] == b'"' {
            i += 1;
            let mut chars = value[i..].char_indices();
            let mut end = value.len() - i;
            while let Some((k, c)) = chars.next() {
                match c {
                    '"' => {
                        end = k + 1;
                        break;
                    }
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            v.push(e);
                        }
                    }
                    c => v.push(c),
                }
            }
            i += end;
        } else {
            v.push_str(word(&mut i));
        }
        if let Some(c) = out.last_mut() {
            c.params.push((w.to_string(), v));
        }
    }
}

/// The challenge to answer among a 401's `WWW-Authenticate` values: a bearer one before basic.
fn pick_challenge(headers: &reqwest::header::HeaderMap) -> Option<Challenge> {
    let all: Vec<Challenge> = headers
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(parse_challenges)
        .collect();
    let by = |scheme: &str| all.iter().find(|c| c.scheme == scheme).cloned();
    by("bearer").or_else(|| by("basic"))
}

/// The token of a token server's answer: `access_token` (OAuth2's name) or `token`
/// (distribution's), the first that is not empty, as docker reads it.
fn token_of(body: &[u8]) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        token: String,
        #[serde(default)]
        access_token: String,
    }
    let a: Answer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    [a.access_token, a.token]
        .into_iter()
        .find(|t| !t.is_empty())
        .ok_or_else(|| "no `token` or `access_token` in it".to_string())
}

/// One repository of one registry, over HTTP.
pub struct RegistryApi {
    http: reqwest::Client,
    /// `https://HOST` (`http://` for a loopback registry).
    base: String,
    /// The repository's path in the registry (`team/envs`, `library/x` on Docker Hub).
    path: String,
    creds: Option<Credentials>,
    /// What the last challenge asked for, reused for the next requests.
    auth: std::sync::Mutex<Auth>,
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
            (
                format!("https://{}", crate::core::image_ref::DOCKER_HUB_REGISTRY),
                path,
            )
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
            auth: std::sync::Mutex::new(Auth::Unasked),
        })
    }

    fn manifest_url(&self, reference: &str) -> String {
        format!("{}/v2/{}/manifests/{reference}", self.base, self.path)
    }

    fn current_auth(&self) -> Auth {
        self.auth.lock().map(|a| a.clone()).unwrap_or_default()
    }

    fn set_auth(&self, auth: Auth) {
        if let Ok(mut a) = self.auth.lock() {
            *a = auth;
        }
    }

    /// `rb` with the authentication the registry last asked for.
    fn authorized(&self, rb: reqwest::RequestBuilder, auth: &Auth) -> reqwest::RequestBuilder {
        match (auth, &self.creds) {
            (Auth::Bearer(t), _) => rb.bearer_auth(t),
            (Auth::Basic, Some(c)) => rb.basic_auth(&c.username, Some(&c.password)),
            _ => rb,
        }
    }

    /// Send `make()`'s request (`what` it is and what it would `doing`, for messages; needing
    /// `access`) with the authentication
    /// the registry asked for last; a `401` is answered once, as its challenge says (a fresh
    /// bearer token, or basic auth). A `401` or `403` after that is `REGISTRY_AUTH`.
    async fn send(
        &self,
        (what, doing): (&str, &str),
        access: Access,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Failure> {
        let err = |e: reqwest::Error| failed(format!("{what}: {e}"));
        let auth = self.current_auth();
        let first = self.authorized(make(), &auth).send().await.map_err(err)?;
        let resp = if first.status() != reqwest::StatusCode::UNAUTHORIZED {
            first
        } else {
            let auth = match pick_challenge(first.headers()) {
                Some(c) if c.scheme == "bearer" => {
                    Auth::Bearer(self.bearer_token(&c, access).await?)
                }
                Some(_) => match &self.creds {
                    Some(c) if c.identity_token.is_none() => Auth::Basic,
                    Some(_) => {
                        return Err(registry_auth::refused(
                            doing,
                            "it asks for a user name and password, and the credentials are \
                             an identity token",
                            self.creds.as_ref(),
                        ))
                    }
                    None => {
                        return Err(registry_auth::refused(
                            doing,
                            "it asks for a user name and password",
                            None,
                        ))
                    }
                },
                None => {
                    return Err(registry_auth::refused(
                        doing,
                        "401 Unauthorized, with no challenge to answer",
                        self.creds.as_ref(),
                    ))
                }
            };
            self.set_auth(auth.clone());
            self.authorized(make(), &auth).send().await.map_err(err)?
        };
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            let body = resp.text().await.unwrap_or_default();
            let body: String = body.trim().chars().take(300).collect();
            return Err(registry_auth::refused(
                doing,
                format!("{status} {body}").trim_end(),
                self.creds.as_ref(),
            ));
        }
        Ok(resp)
    }

    /// A bearer token from `challenge`'s realm for its `service` and `scope` (this repository
    /// with `access`'s actions when it names none): asked with basic auth, or with an identity
    /// token's OAuth2 refresh grant (a `POST`, as docker does), or anonymously without
    /// credentials. Credentials go only to an https realm, or a loopback one.
    async fn bearer_token(&self, challenge: &Challenge, access: Access) -> Result<String, Failure> {
        let creds = self.creds.as_ref();
        let realm = challenge
            .param("realm")
            .ok_or_else(|| failed("the registry's bearer challenge names no realm".into()))?;
        let realm_url = reqwest::Url::parse(realm).map_err(|e| {
            failed(format!(
                "the registry's bearer challenge names a realm `{realm}` that is no URL: {e}"
            ))
        })?;
        let own_scope = format!("repository:{}:{}", self.path, access.actions());
        let scope = challenge.param("scope").unwrap_or(&own_scope).to_string();
        let doing = format!("give a token for `{scope}`");
        let plain = realm_url.scheme() != "https" && !realm_url.host_str().is_some_and(is_loopback);
        if creds.is_some() && plain {
            return Err(registry_auth::refused(
                &doing,
                &format!("its token server `{realm}` is not https: the credentials would cross the network in the clear"),
                creds,
            ));
        }
        // Several scopes are one space-separated value in a challenge, repeated params here.
        let mut params: Vec<(&str, &str)> = scope
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(|s| ("scope", s))
            .collect();
        if let Some(service) = challenge.param("service") {
            params.push(("service", service));
        }
        let rb = match creds {
            Some(Credentials {
                identity_token: Some(refresh),
                ..
            }) => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                form.append_pair("grant_type", "refresh_token")
                    .append_pair("refresh_token", refresh)
                    .append_pair("client_id", "envbuild");
                for (k, v) in &params {
                    form.append_pair(k, v);
                }
                self.http
                    .post(realm_url)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(form.finish())
            }
            Some(c) => {
                let mut url = realm_url;
                url.query_pairs_mut().extend_pairs(&params);
                if !c.username.is_empty() {
                    // What docker sends too; some token servers log it.
                    url.query_pairs_mut().append_pair("account", &c.username);
                }
                self.http
                    .get(url)
                    .basic_auth(&c.username, Some(&c.password))
            }
            None => {
                let mut url = realm_url;
                url.query_pairs_mut().extend_pairs(&params);
                self.http.get(url)
            }
        };
        let resp = rb
            .send()
            .await
            .map_err(|e| failed(format!("asking {realm} for a token: {e}")))?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(registry_auth::refused(
                &doing,
                &format!("its token server {realm} answered {status}"),
                creds,
            ));
        }
        if !status.is_success() {
            return Err(failed(format!(
                "{realm} gave no token for `{scope}` ({status})"
            )));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| failed(format!("{realm}'s token answer: {e}")))?;
        token_of(&body).map_err(|why| failed(format!("{realm}'s token answer: {why}")))
    }

    /// The manifest `reference` (a tag or digest) names: its media type and bytes.
    pub async fn manifest(&self, reference: &str) -> Result<(String, Vec<u8>), Failure> {
        let url = self.manifest_url(reference);
        let what = format!("reading {url}");
        let resp = self
            .send((&what, &format!("read `{url}`")), Access::Pull, || {
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
            .send(
                (&what, &format!("write the image index `{url}`")),
                Access::Push,
                || {
                    self.http
                        .put(&url)
                        .header(reqwest::header::CONTENT_TYPE, image_index::OCI_INDEX)
                        .body(bytes.to_vec())
                },
            )
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

    fn params(c: &Challenge) -> Vec<(&str, &str)> {
        c.params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn a_bearer_challenge_keeps_the_commas_of_its_scope() {
        // Docker Hub's, as `registry-1.docker.io` sends it for a push.
        let c = parse_challenges(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:someone/envs:pull,push""#,
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].scheme, "bearer");
        assert_eq!(
            params(&c[0]),
            [
                ("realm", "https://auth.docker.io/token"),
                ("service", "registry.docker.io"),
                ("scope", "repository:someone/envs:pull,push"),
            ]
        );
        assert_eq!(
            c[0].param("Scope"),
            Some("repository:someone/envs:pull,push")
        );
        // distribution's after a refused token, with an error and a realm with a query.
        let c = parse_challenges(
            r#"Bearer realm="http://127.0.0.1:5001/token?via=realm",service="reg",scope="repository:a/b:pull",error="insufficient_scope""#,
        );
        assert_eq!(
            c[0].param("realm"),
            Some("http://127.0.0.1:5001/token?via=realm")
        );
        assert_eq!(c[0].param("error"), Some("insufficient_scope"));
    }

    #[test]
    fn challenges_are_read_as_rfc_9110_writes_them() {
        // Two in one value, spaces around `=`, an unquoted value, an escaped quote.
        let c = parse_challenges(
            r#"Basic realm="Registry Realm", BEARER realm = "https://r.io/t?a=1,2" , service=r.io, scope="x\"y""#,
        );
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(
            (c[0].scheme.as_str(), params(&c[0])),
            ("basic", vec![("realm", "Registry Realm")])
        );
        assert_eq!(c[1].scheme, "bearer");
        assert_eq!(
            params(&c[1]),
            [
                ("realm", "https://r.io/t?a=1,2"),
                ("service", "r.io"),
                ("scope", "x\"y")
            ]
        );
        // A scheme alone, an unterminated quote, a stray `=`, nothing at all: no panic.
        assert_eq!(parse_challenges("Basic")[0].params, []);
        assert_eq!(
            parse_challenges(r#"Bearer realm="https://r.io"#)[0].param("realm"),
            Some("https://r.io")
        );
        assert_eq!(parse_challenges("=, Bearer")[0].scheme, "bearer");
        assert!(parse_challenges("").is_empty());
        assert!(parse_challenges(" , ").is_empty());
        // Non-ASCII in a value stays whole.
        assert_eq!(
            parse_challenges(r#"Basic realm="Zürich""#)[0].param("realm"),
            Some("Zürich")
        );
    }

    #[test]
    fn a_bearer_challenge_is_answered_before_a_basic_one() {
        let mut h = reqwest::header::HeaderMap::new();
        h.append(
            reqwest::header::WWW_AUTHENTICATE,
            r#"Basic realm="r""#.parse().unwrap(),
        );
        h.append(
            reqwest::header::WWW_AUTHENTICATE,
            r#"Bearer realm="https://r.io/token""#.parse().unwrap(),
        );
        assert_eq!(pick_challenge(&h).unwrap().scheme, "bearer");
        assert!(pick_challenge(&reqwest::header::HeaderMap::new()).is_none());
    }

    #[test]
    fn a_token_answer_has_token_or_access_token() {
        assert_eq!(
            token_of(br#"{"token":"t1","expires_in":300}"#).unwrap(),
            "t1"
        );
        assert_eq!(
            token_of(br#"{"access_token":"a1","scope":"x"}"#).unwrap(),
            "a1"
        );
        // Both: OAuth2's wins, as docker reads it; an empty one is none.
        assert_eq!(
            token_of(br#"{"token":"t","access_token":"a"}"#).unwrap(),
            "a"
        );
        assert_eq!(
            token_of(br#"{"token":"t","access_token":""}"#).unwrap(),
            "t"
        );
        assert!(token_of(br#"{"token":""}"#).is_err());
        assert!(token_of(b"<html>").is_err());
    }

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
