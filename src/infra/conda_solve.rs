//! The closure resolver (conda side): reads each channel's repodata for the target's subdirs
//! (`https://`, `http://` or `file://`) through rattler's repodata gateway, with a cache under
//! envbuild's cache dir, and solves the lock's match specs in process with rattler's resolvo
//! solver (the one pixi uses), against the target's virtual packages and in strict channel
//! priority. An https channel is reached through the proxy `HTTPS_PROXY` (or `ALL_PROXY`)
//! names unless `NO_PROXY` exempts its host, as curl and pip do. Performs network and file
//! I/O, and reads those environment variables.

use crate::core::closure::codes::CLOSURE_RESOLVE_FAILED;
use crate::core::closure::conda::{split_channel, CondaInputs, Solved, DEFAULT_CHANNEL_ALIAS};
use crate::core::diag::{Diagnostic, Failure};
use rattler_conda_types::{
    Channel, GenericVirtualPackage, MatchSpec, PackageName, ParseStrictness, RepoDataRecord,
    Subdir, Version,
};
use rattler_repodata_gateway::fetch::{CacheAction, FetchRepoDataError};
use rattler_repodata_gateway::{
    ChannelConfig, ChannelRelationsMode, Gateway, GatewayError, SourceConfig,
};
use rattler_solve::{SolveError, SolverImpl, SolverTask};
use std::future::IntoFuture;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Replaces conda's `channel_alias` (`https://conda.anaconda.org`): where channel names point
/// (a mirror; a test's own channel server).
pub const ALIAS_ENV: &str = "ENVBUILD_CONDA_CHANNEL_ALIAS";

/// How long the channels' repodata may take to arrive (conda-forge's linux-64 is large).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the solver may search.
pub const SOLVE_TIMEOUT: Duration = Duration::from_secs(300);

/// The channel alias: `ENVBUILD_CONDA_CHANNEL_ALIAS`, else conda's default. It ends up in
/// the lock's URLs (and from there in rendered files), so only a plain URL without credentials
/// is taken; anything else is a usage error.
pub fn channel_alias() -> Result<String, Failure> {
    let Some(v) = std::env::var(ALIAS_ENV)
        .ok()
        .map(|s| s.trim().trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
    else {
        return Ok(DEFAULT_CHANNEL_ALIAS.to_string());
    };
    let rest = ["https://", "http://", "file:///"]
        .iter()
        .find_map(|p| v.strip_prefix(p));
    let plain = v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-/:~%".contains(&b));
    // A path trick would make every channel URL of the lock name another folder, and each
    // entry then fails its check as if edited by hand: refuse it here, where it enters.
    if let Some(trick) = rest.and(crate::core::url::path_trick(&v)) {
        return Err(Failure::usage(
            format!(
                "{ALIAS_ENV} `{}` has {trick}: the channel URLs made from it would name \
                 another folder than the mirror's",
                crate::core::url::redact(&v)
            ),
            Some("set it to the mirror's URL as its server names it, without `.` or `..` segments, backslashes or percent-encoded `.`, `/` or `%`, e.g. https://mirror.example/conda".into()),
        ));
    }
    match rest {
        Some(r) if plain && !r.is_empty() => Ok(v),
        _ => Err(Failure::usage(
            format!(
                "{ALIAS_ENV} is not a channel alias envbuild takes{}",
                if v.contains('@') {
                    " (it carries credentials, which would be written into the lock)".to_string()
                } else {
                    format!(": `{}`", crate::core::url::redact(&v))
                }
            ),
            Some("set it to an https:// URL (http:// or file:/// for a local mirror) without credentials, e.g. https://mirror.example/conda".into()),
        )),
    }
}

fn failed(message: String, hint: &str) -> Failure {
    Failure::one(Diagnostic::error(CLOSURE_RESOLVE_FAILED, message).with_hint(hint))
}

const PROXY_HINT: &str = "check the proxy that HTTPS_PROXY (or ALL_PROXY) names, or exempt the channel's host with NO_PROXY";

const REACH_HINT: &str = "check that the channel answers from this machine (`ENVBUILD_CONDA_CHANNEL_ALIAS` points channel names at a mirror)";

/// The channel's records for every subdir, in the inputs' channel and subdir order, read by
/// rattler's repodata gateway (pixi's): only the records of the names the specs reach, through
/// their dependencies, are parsed; a `file://` channel is read lazily in place; an http(s)
/// channel's repodata (sharded where it is served, else zstd, bz2 or gzip) is kept under
/// envbuild's cache dir and revalidated by its ETag, so a warm solve downloads only what
/// changed. `cached` (`lock --offline`): the cache only, as it is, never a request; a subdir it
/// does not hold is `CLOSURE_NEEDS_RESOLUTION` naming the channel and subdir.
fn fetch_all(inputs: &CondaInputs, cached: bool) -> Result<Vec<Vec<RepoDataRecord>>, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::bug(format!("cannot start the async runtime: {e}")))?;
    let proxies = Matcher::from_env();
    let client = client()?;
    let mut channels = Vec::new();
    for ch in &inputs.channels {
        let base = Url::parse(&format!("{ch}/"))
            .map_err(|e| failed(format!("channel URL `{ch}`: {e}"), REACH_HINT))?;
        channels.push(Channel::from_url(base));
    }
    let subdirs = inputs
        .subdirs
        .iter()
        .map(|s| Subdir::from_str(s).map_err(|e| Failure::bug(format!("conda subdir `{s}`: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let names = inputs
        .specs
        .iter()
        .map(|s| split_channel(s).1)
        .map(|s| MatchSpec::from_str(s, ParseStrictness::Lenient))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::bug(format!("a conda spec: {e}")))?;
    let mut config = ChannelConfig::default();
    if cached {
        // Whatever the cache holds, however old: the point is to ask nobody.
        config.default = SourceConfig {
            cache_action: CacheAction::ForceCacheOnly,
            ..SourceConfig::default()
        };
    }
    let gateway = Gateway::builder()
        .with_client(client)
        .with_cache_dir(cache_dir())
        .with_channel_config(config)
        .finish();
    let query = gateway
        .query(channels.clone(), subdirs, names)
        .recursive(true)
        .channel_relations(ChannelRelationsMode::Disabled);
    let answer =
        rt.block_on(async { tokio::time::timeout(FETCH_TIMEOUT, query.into_future()).await });
    let output = match answer {
        Err(_) => {
            return Err(failed(
                format!(
                    "the repodata of {} did not arrive within {} s",
                    inputs.channels.join(", "),
                    FETCH_TIMEOUT.as_secs()
                ),
                REACH_HINT,
            ))
        }
        Ok(Err(e)) if cached => return Err(not_cached(&e)),
        Ok(Err(e)) => return Err(gateway_failed(&e, inputs, &proxies)),
        Ok(Ok(o)) => o,
    };
    // The solver matches a `channel::` spec by the channel's canonical (redacted) name: records
    // carry the same, so a token channel's specs find its records.
    let mut out = Vec::new();
    for (i, repodata) in output.repodata.iter().enumerate() {
        let name = channels[i / inputs.subdirs.len().max(1)].canonical_name();
        out.push(
            repodata
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.channel = Some(name.clone());
                    r
                })
                .collect(),
        );
    }
    Ok(out)
}

/// Where the gateway keeps channels' repodata: `conda-repodata` under envbuild's cache dir
/// (`ENVBUILD_CACHE_DIR`, `$XDG_CACHE_HOME/envbuild` or `~/.cache/envbuild`).
pub fn cache_dir() -> PathBuf {
    crate::infra::verdict_cache::default_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("envbuild"))
        .join("conda-repodata")
}

/// `--offline` and the repodata cache lacks what the solve needs: which channel and subdir (or
/// which package's shard), and how to fill it.
fn not_cached(e: &GatewayError) -> Failure {
    use crate::core::closure::codes::CLOSURE_NEEDS_RESOLUTION;
    let what = match e {
        GatewayError::FetchRepoDataError(FetchRepoDataError::NoCacheAvailable(url)) => {
            let url = url.as_str().trim_end_matches('/');
            match url.rsplit_once('/') {
                Some((channel, subdir)) => format!("the {subdir} repodata of channel {channel}"),
                None => url.to_string(),
            }
        }
        GatewayError::ShardNotCached(name) => format!("the repodata shard of `{name}`"),
        other => chain(other),
    };
    Failure::one(
        Diagnostic::error(
            CLOSURE_NEEDS_RESOLUTION,
            format!(
                "--offline solves the conda closure from the repodata cache ({}), and it does not hold {what}",
                crate::core::diag::shown(&cache_dir())
            ),
        )
        .with_hint(
            "run `envbuild lock` once where the channels answer (it fills the cache), then --offline again; or drop --offline",
        ),
    )
}

/// A gateway error as envbuild reports it: the channels it was reading, the proxy that was
/// asked (host and port, never credentials), and the error's causes.
fn gateway_failed(e: &GatewayError, inputs: &CondaInputs, proxies: &Matcher) -> Failure {
    if let GatewayError::SubdirNotFoundError(nf) = e {
        return failed(
            format!(
                "channel {} has no repodata.json for {}",
                nf.channel.base_url.as_str().trim_end_matches('/'),
                nf.subdir
            ),
            REACH_HINT,
        );
    }
    let proxy = inputs.channels.iter().find_map(|ch| {
        let uri: http::Uri = ch.parse().ok()?;
        if uri.scheme_str() != Some("https") {
            return None;
        }
        let p = proxies.intercept(&uri)?;
        Some(format!(
            "{}:{}",
            p.uri().host().unwrap_or("?"),
            p.uri().port_u16().unwrap_or(80)
        ))
    });
    let what = format!(
        "{} for the {} repodata",
        inputs.channels.join(", "),
        inputs.subdirs.join(" and ")
    );
    match proxy {
        Some(p) => failed(
            format!("cannot reach {what} through the proxy {p}: {}", chain(e)),
            PROXY_HINT,
        ),
        None => failed(format!("cannot reach {what}: {}", chain(e)), REACH_HINT),
    }
}

use hyper_util::client::proxy::matcher::Matcher;

/// The gateway's HTTP client: rustls (ring) trusting this machine's CA certificates, where
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` name them as for envbuild's other HTTP, and the proxy rules
/// of the environment. Only https is proxied: a CONNECT to a plain-http port is refused by
/// common proxies, and http channels are for mirrors on the local network.
fn client() -> Result<reqwest::Client, Failure> {
    http_client()
}

/// The HTTP client envbuild's own requests use (the gateway's, and the registry API's): rustls
/// trusting this machine's CA certificates, the environment's proxy rules for https.
pub(crate) fn http_client() -> Result<reqwest::Client, Failure> {
    // A proxy the matcher cannot read would be dropped, and the host reached directly.
    crate::infra::network::check_proxies_env()?;
    let certs = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs.certs);
    if added == 0 {
        let why = certs
            .errors
            .first()
            .map_or("none found".to_string(), |e| e.to_string());
        return Err(failed(
            format!("cannot load this machine's CA certificates: {why}"),
            REACH_HINT,
        ));
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::bug(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let rules = Matcher::from_env();
    let proxy = reqwest::Proxy::custom(move |url| {
        if url.scheme() != "https" {
            return None;
        }
        let uri: http::Uri = url.as_str().parse().ok()?;
        let p = rules.intercept(&uri)?;
        let mut proxy = Url::parse(&p.uri().to_string()).ok()?;
        if let Some(auth) = p.basic_auth().and_then(|a| a.to_str().ok()) {
            // `Basic base64(user:pass)`: back into the URL, where reqwest reads credentials.
            let decoded = auth
                .strip_prefix("Basic ")
                .and_then(base64_decode)
                .unwrap_or_default();
            if let Some((user, pass)) = decoded.split_once(':') {
                let _ = proxy.set_username(user);
                let _ = proxy.set_password(Some(pass));
            }
        }
        Some(proxy)
    });
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .proxy(proxy)
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("envbuild/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            failed(
                format!("cannot build the HTTP client: {}", chain(&e)),
                REACH_HINT,
            )
        })
}

fn base64_decode(b: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    String::from_utf8(bytes).ok()
}

/// An error with its causes (a client's own message is often only "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let next = c.to_string();
        if !s.contains(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = c.source();
    }
    s
}

/// A match spec as the lock writes it, its channel (`pytorch::`) mapped to the same URL the
/// records carry, so that a channel-qualified spec matches its channel's records.
fn match_spec(spec: &str, alias: &str) -> Result<MatchSpec, Failure> {
    let bad = |e: &dyn std::fmt::Display| {
        failed(
            format!("the conda spec `{spec}` does not parse: {e}"),
            "write conda packages as \"name=version\" or \"channel::name=version\"",
        )
    };
    let (channel, rest) = split_channel(spec);
    let mut m = MatchSpec::from_str(rest, ParseStrictness::Lenient).map_err(|e| bad(&e))?;
    if m.name.as_exact().is_none() {
        return Err(bad(&"a conda closure needs an exact package name"));
    }
    if let Some(c) = channel {
        let url = crate::core::closure::conda::channel_url(c, alias);
        // A spec held from the lock names its channel with the token's placeholder.
        let url = match crate::core::url::conda_token(alias) {
            Some(token) => crate::core::url::with_token(&url, token),
            None => url,
        };
        let url = Url::parse(&format!("{url}/")).map_err(|e| bad(&e))?;
        m.channel = Some(Arc::new(Channel::from_url(url)));
    }
    Ok(m)
}

fn virtual_packages(inputs: &CondaInputs) -> Result<Vec<GenericVirtualPackage>, Failure> {
    inputs
        .virtual_packages
        .iter()
        .map(|v| {
            Ok(GenericVirtualPackage {
                name: PackageName::new_unchecked(v.name.clone()),
                version: Version::from_str(&v.version)
                    .map_err(|e| Failure::bug(format!("virtual package {}: {e}", v.name)))?,
                build_string: rattler_conda_types::package::BuildString::new_unchecked(
                    v.build.clone(),
                ),
            })
        })
        .collect()
}

/// Solve `inputs` for the target; `hold` are match specs (`name==version=build`) every solution
/// must satisfy (`--upgrade-package` holds the rest of the lock with them); `cached`: from the
/// repodata cache alone (`lock --offline`), no request.
pub fn resolve(
    inputs: &CondaInputs,
    alias: &str,
    hold: &[String],
    cached: bool,
) -> Result<Vec<Solved>, Failure> {
    // The specs first: one that does not parse fails before any download.
    let specs = inputs
        .specs
        .iter()
        .map(|s| match_spec(s, alias))
        .collect::<Result<Vec<_>, _>>()?;
    let constraints = hold
        .iter()
        .map(|s| match_spec(s, alias))
        .collect::<Result<Vec<_>, _>>()?;
    let repodata = fetch_all(inputs, cached)?;
    let task = SolverTask {
        available_packages: repodata.iter().collect::<Vec<_>>(),
        locked_packages: Vec::new(),
        pinned_packages: Vec::new(),
        virtual_packages: virtual_packages(inputs)?,
        specs,
        constraints,
        timeout: Some(SOLVE_TIMEOUT),
        channel_priority: rattler_solve::ChannelPriority::Strict,
        exclude_newer: None,
        strategy: rattler_solve::SolveStrategy::Highest,
        dependency_overrides: Vec::new(),
        excluded_candidates: Default::default(),
        cancellation_token: None,
    };
    let result = rattler_solve::resolvo::Solver.solve(task).map_err(|e| match e {
        SolveError::Unsolvable(why) => failed(
            format!(
                "the conda solve for the target ({}) has no solution:\n    {}",
                target(inputs),
                why.join("\n").trim_end().replace('\n', "\n    ")
            ),
            "the target's virtual packages (`__cuda` from its driver, `__glibc`) and the channels' strict priority are part of the solve: relax a pin, or check the target",
        ),
        other => failed(format!("the conda solve failed: {other}"), REACH_HINT),
    })?;
    // Each record's channel as the inputs name it (the solver's is redacted).
    let channels: std::collections::HashMap<String, String> = inputs
        .channels
        .iter()
        .filter_map(|ch| {
            let url = Url::parse(&format!("{ch}/")).ok()?;
            Some((Channel::from_url(url).canonical_name(), ch.clone()))
        })
        .collect();
    Ok(result
        .records
        .into_iter()
        .map(|r| solved(r, &channels))
        .collect())
}

/// `linux-64; __cuda 12.4, __glibc 2.28, ...`: what the solve ran for, since resolvo's own
/// explanation only says that no candidate provides a virtual package.
fn target(inputs: &CondaInputs) -> String {
    let virtuals: Vec<String> = inputs
        .virtual_packages
        .iter()
        .map(|v| format!("{} {}", v.name, v.version))
        .collect();
    format!("{}; {}", inputs.subdirs.join(" + "), virtuals.join(", "))
}

fn solved(r: RepoDataRecord, channels: &std::collections::HashMap<String, String>) -> Solved {
    let p = &r.package_record;
    let channel = r.channel.as_deref().unwrap_or_default();
    let channel = channels.get(channel).map_or(channel, String::as_str);
    Solved {
        name: p.name.as_normalized().to_string(),
        version: p.version.to_string(),
        build: p.build.as_str().to_string(),
        subdir: p.subdir.clone(),
        url: r.url.to_string(),
        channel: channel.trim_end_matches('/').to_string(),
        sha256: p.sha256.as_ref().map(|h| hex(h)),
        md5: p.md5.as_ref().map(|h| hex(h)),
        depends: p.depends.clone(),
        noarch_python: p.noarch.is_python(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lock::Lock;

    /// Every match spec the committed conda locks carry parses for the solver (`python=3.12`,
    /// `pytorch::pytorch-cuda=12.4`, conda-forge's `pytorch==2.10.0=cuda*`), and a channel
    /// prefix becomes the channel URL the records carry.
    #[test]
    fn the_specs_envbuild_writes_parse_for_the_solver() {
        let locks = [
            include_str!("../../specs/conda-forge-torch210/envbuild.lock"),
            include_str!("../../specs/py311-torch21-cu118/envbuild.lock"),
            include_str!("../../specs/torch-gpu-env/envbuild.lock"),
            include_str!("../../specs/torch26-cu118-py39/envbuild.lock"),
        ];
        let mut seen = 0;
        for text in locks {
            let lock = Lock::from_toml(text).unwrap();
            for s in &lock.install.conda {
                let m = match_spec(s, "http://127.0.0.1:9").unwrap_or_else(|_| panic!("{s}"));
                seen += 1;
                if let (Some(c), _) = split_channel(s) {
                    let ch = m.channel.as_ref().unwrap();
                    assert_eq!(ch.canonical_name(), format!("http://127.0.0.1:9/{c}/"));
                }
            }
        }
        assert!(seen > 20, "{seen}");
        let cf = match_spec("conda-forge::pytorch==2.10.0=cuda*", DEFAULT_CHANNEL_ALIAS).unwrap();
        assert!(cf.build.is_some());
        assert!(match_spec("python>=3.11,<", DEFAULT_CHANNEL_ALIAS).is_err());
        assert!(match_spec("*", DEFAULT_CHANNEL_ALIAS).is_err());
    }
}
