//! The build machine's network settings for image builds (reads environment variables and one
//! file): proxies, passed to the engine as its predefined build args, and the CA bundle of a
//! network that inspects TLS, sent only to the Dockerfile's throwaway `install` stage.

use crate::core::diag::{Diagnostic, Failure};
use crate::infra::docker::codes::CA_BUNDLE_INVALID;

/// The codes this module raises.
pub mod codes {
    pub use crate::core::codes::network::*;
}
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The engine's predefined proxy build args: usable by every `RUN` without an `ARG` line and
/// left out of `docker history` and the image's config (Dockerfile reference, "Predefined
/// ARGs"), so a proxy URL with credentials never reaches the image.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "FTP_PROXY",
    "ftp_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Where a CA bundle may be named, in the order they are asked (the spec's `[image]
/// ca-bundle` comes before all of them): pip's own variable first.
pub const CA_VARS: &[&str] = &["PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"];

/// Largest CA bundle accepted (Debian's full bundle is about 220 KiB).
const MAX_CA_BYTES: u64 = 8 << 20;

/// The proxy variables set (non-empty) in this process's environment, as build args.
pub fn proxy_build_args() -> BTreeMap<String, String> {
    proxy_build_args_from(|k| std::env::var(k).ok())
}

pub fn proxy_build_args_from(get: impl Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    PROXY_VARS
        .iter()
        .filter_map(|k| get(k).filter(|v| !v.is_empty()).map(|v| (k.to_string(), v)))
        .collect()
}

/// The variables that name a proxy for envbuild's own connections and uv's, as curl reads them.
pub const PROXY_URL_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// [`check_proxies`] on this process's environment: called before anything connects.
pub fn check_proxies_env() -> Result<(), Failure> {
    check_proxies(|k| std::env::var(k).ok())
}

/// Refuse (`PROXY_INVALID`) a set proxy variable that is not a proxy URL. The proxy matcher
/// envbuild's HTTP client uses drops a value it cannot parse and connects directly, where
/// curl refuses it: a typo must not silently bypass the proxy a network requires.
pub fn check_proxies(get: impl Fn(&str) -> Option<String>) -> Result<(), Failure> {
    for var in PROXY_URL_VARS {
        let Some(value) = get(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        if let Err(why) = proxy_url(&value) {
            return Err(Failure::one(
                Diagnostic::error(
                    codes::PROXY_INVALID,
                    format!("{var} is not a proxy URL ({why}); envbuild connects nowhere without the proxy it names"),
                )
                .with_hint(format!(
                    "set {var} to `[scheme://][user:password@]host[:port]` (e.g. \
                     `http://proxy.example:3128`), or unset it to connect directly"
                )),
            ));
        }
    }
    Ok(())
}

/// The proxy `value` names, parsed as the HTTP client will parse it (the matcher, then the
/// URL the client is given), or why it names none. Credentials are never part of the reason.
fn proxy_url(value: &str) -> Result<url::Url, String> {
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it holds a space or control character".into());
    }
    let matcher = hyper_util::client::proxy::matcher::Matcher::builder()
        .all(value.to_string())
        .build();
    let probe: http::Uri = "https://example.invalid/"
        .parse()
        .map_err(|_| "no probe".to_string())?;
    let Some(intercept) = matcher.intercept(&probe) else {
        return Err(
            "it does not parse as `[scheme://]host[:port]` with scheme http, https, socks4, \
             socks4a, socks5 or socks5h"
                .into(),
        );
    };
    let url = url::Url::parse(&intercept.uri().to_string())
        .map_err(|e| format!("its host or port is not valid: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err("it names no host".into());
    }
    // What follows the authority is dropped by the matcher: a path or query is a paste error.
    let rest = value.split_once("://").map_or(value, |(_, r)| r);
    if let Some(at) = rest.find(['/', '?', '#']) {
        if &rest[at..] != "/" {
            return Err("it has a path, query or fragment after the host".into());
        }
    }
    Ok(url)
}

/// The CA bundle to trust during the build, and where it was named: the spec's `[image]
/// ca-bundle` (relative to the spec's folder) or the first of [`CA_VARS`] that is set.
pub fn ca_bundle_source(
    spec_key: Option<&str>,
    spec_dir: &Path,
    get: impl Fn(&str) -> Option<String>,
) -> Option<(String, PathBuf)> {
    if let Some(p) = spec_key {
        return Some(("[image] ca-bundle".into(), spec_dir.join(p)));
    }
    CA_VARS.iter().find_map(|k| {
        get(k)
            .filter(|v| !v.is_empty())
            .map(|v| (k.to_string(), PathBuf::from(v)))
    })
}

/// The bundle's bytes: a readable file, at most 8 MiB, with at least one PEM certificate.
pub fn read_ca_bundle(origin: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    let refuse = |why: String| {
        Failure::one(
            Diagnostic::error(
                CA_BUNDLE_INVALID,
                format!(
                    "the CA bundle named by {origin} (`{}`) {why}",
                    crate::core::diag::shown(path)
                ),
            )
            .with_hint(
                "name a PEM file of CA certificates (e.g. /etc/ssl/certs/ca-certificates.crt), \
                 or unset the variable",
            ),
        )
    };
    let bytes = read_small_file(path).map_err(|why| refuse(format!("cannot be read: {why}")))?;
    if !bytes
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(refuse("holds no PEM certificate".into()));
    }
    Ok(bytes)
}

/// A regular file (a pipe or device is refused without blocking) of at most 8 MiB.
fn read_small_file(path: &Path) -> Result<Vec<u8>, String> {
    crate::infra::fs::read_bounded(path, MAX_CA_BYTES).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_proxy_variable_is_refused_and_a_good_one_passes() {
        for good in [
            "http://proxy:3128",
            "proxy.example:3128",
            "https://u:p%40ss@proxy.example:8443/",
            "socks5h://127.0.0.1:1080",
            "http://[::1]:3128",
        ] {
            let env = |k: &str| (k == "https_proxy").then(|| good.to_string());
            assert!(check_proxies(env).is_ok(), "{good}");
        }
        for bad in [
            "http://proxy:99999",
            "http://proxy:3128 ",
            "ftp://proxy:21",
            "http://",
            "http://proxy:port",
            "http://pro xy:3128",
            "http://proxy:3128/path",
            "://proxy",
        ] {
            for var in PROXY_URL_VARS {
                let env = |k: &str| (k == *var).then(|| bad.to_string());
                let err = check_proxies(env).expect_err(bad);
                let d = &err.diagnostics[0];
                assert_eq!(d.code, "PROXY_INVALID", "{bad}");
                assert!(d.message.contains(var), "{}", d.message);
                assert!(d.hint.is_some());
            }
        }
        assert!(check_proxies(|_| Some(String::new())).is_ok());
    }

    #[test]
    fn only_set_proxy_variables_become_build_args() {
        let env: BTreeMap<&str, &str> = [
            ("HTTPS_PROXY", "http://u:p@proxy:3128"),
            ("no_proxy", "localhost"),
            ("HTTP_PROXY", ""),
            ("PATH", "/bin"),
        ]
        .into();
        let args = proxy_build_args_from(|k| env.get(k).map(|v| v.to_string()));
        assert_eq!(
            args.keys().map(String::as_str).collect::<Vec<_>>(),
            ["HTTPS_PROXY", "no_proxy"]
        );
    }

    #[test]
    fn the_spec_key_comes_before_the_variables_and_pip_cert_first() {
        let env: BTreeMap<&str, &str> =
            [("SSL_CERT_FILE", "/ssl.pem"), ("PIP_CERT", "/pip.pem")].into();
        let get = |k: &str| env.get(k).map(|v| v.to_string());
        assert_eq!(
            ca_bundle_source(Some("certs/ca.pem"), Path::new("/p"), get),
            Some(("[image] ca-bundle".into(), PathBuf::from("/p/certs/ca.pem")))
        );
        assert_eq!(
            ca_bundle_source(None, Path::new("/p"), get),
            Some(("PIP_CERT".into(), PathBuf::from("/pip.pem")))
        );
        assert_eq!(ca_bundle_source(None, Path::new("/p"), |_| None), None);
    }

    #[test]
    fn a_bundle_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ca.pem");
        std::fs::write(&p, "not a certificate").unwrap();
        let e = read_ca_bundle("SSL_CERT_FILE", &p).unwrap_err();
        assert_eq!(e.diagnostics[0].code, CA_BUNDLE_INVALID);
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = read_ca_bundle("PIP_CERT", &dir.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("cannot be read"), "{e}");
        std::fs::write(
            &p,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(read_ca_bundle("PIP_CERT", &p).is_ok());
    }
}
