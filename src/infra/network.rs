//! The build machine's network settings for image builds (reads environment variables and one
//! file): proxies, passed to the engine as its predefined build args, and the CA bundle of a
//! network that inspects TLS, sent only to the Dockerfile's throwaway `install` stage.

use crate::core::diag::{Diagnostic, Failure};
use crate::infra::docker::codes::CA_BUNDLE_INVALID;
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

/// A regular file (a pipe or device is refused before it is opened) of at most 8 MiB.
fn read_small_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CA_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_CA_BYTES {
        return Err(format!("it is over {MAX_CA_BYTES} bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
