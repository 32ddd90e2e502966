//! Docker `config.json` credentials, as values: which credentials the file `docker login`
//! writes names for a registry host (`credHelpers`, an inline `auths` entry, `credsStore`, as
//! the docker CLI looks them up). Reading the file and running a helper is
//! `infra::registry_auth`'s. This module performs no I/O.
//!
//! A secret never reaches a message, even a debug one.

use crate::core::image_ref::DOCKER_HUB;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The key docker files Docker Hub's credentials under in `config.json`.
pub const DOCKER_HUB_AUTH_KEY: &str = "https://index.docker.io/v1/";

/// Standard base64 as other tools write an `auth` value: padding optional, stray low bits of
/// the last character ignored.
const AUTH_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

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
        let decoded = AUTH_BASE64
            .decode(auth)
            .map_err(|_| "`auth` is not base64")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_values_decode_as_docker_writes_them_and_garbage_is_refused() {
        let decode = |s: &str| AUTH_BASE64.decode(s).ok();
        assert_eq!(decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(decode("YTpi").unwrap(), b"a:b");
        // Padding may be left out.
        assert_eq!(decode("dXNlcjpwYXNzMQ==").unwrap(), b"user:pass1");
        assert_eq!(decode("dXNlcjpwYXNzMQ").unwrap(), b"user:pass1");
        assert_eq!(decode("dXNlcjpwYXNz===="), None);
        assert_eq!(decode("d"), None);
        assert_eq!(decode("dX!l"), None);
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
}
