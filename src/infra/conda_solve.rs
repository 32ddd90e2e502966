//! The closure resolver (conda side): fetches each channel's `repodata.json` for the target's
//! subdirs (`https://`, `http://` or `file://`) and solves the lock's match specs in
//! process with rattler's resolvo solver (the one pixi uses), against the target's virtual
//! packages and in strict channel priority. An https channel is reached through the proxy
//! `HTTPS_PROXY` (or `ALL_PROXY`) names unless `NO_PROXY` exempts its host, as curl and pip do.
//! Performs network and file I/O, and reads those environment variables.

use crate::core::closure::codes::CLOSURE_RESOLVE_FAILED;
use crate::core::closure::conda::{split_channel, CondaInputs, Solved, DEFAULT_CHANNEL_ALIAS};
use crate::core::diag::{Diagnostic, Failure};
use rattler_conda_types::{
    Channel, GenericVirtualPackage, MatchSpec, PackageName, ParseStrictness, RepoData,
    RepoDataRecord, Version,
};
use rattler_solve::{SolveError, SolverImpl, SolverTask};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Replaces conda's `channel_alias` (`https://conda.anaconda.org`): where channel names point
/// (a mirror; a test's own channel server).
pub const ALIAS_ENV: &str = "ENVBUILD_CONDA_CHANNEL_ALIAS";

/// How long one repodata.json may take to arrive (conda-forge's linux-64 is large).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the solver may search.
pub const SOLVE_TIMEOUT: Duration = Duration::from_secs(300);

/// The largest repodata.json read (conda-forge's linux-64 is a few hundred MB uncompressed).
const MAX_REPODATA: usize = 2 << 30;

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
    match rest {
        Some(r) if plain && !r.is_empty() => Ok(v),
        _ => Err(Failure::usage(
            format!(
                "{ALIAS_ENV} is not a channel alias envbuild takes{}",
                if v.contains('@') {
                    " (it carries credentials, which would be written into the lock)".to_string()
                } else {
                    format!(": `{v}`")
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

/// The channel's records for every subdir, in the inputs' channel and subdir order. Every
/// repodata.json is fetched at once (a solve over conda-forge, nvidia and pytorch waits for the
/// slowest download, not their sum); each is parsed in turn.
fn fetch_all(inputs: &CondaInputs) -> Result<Vec<Vec<RepoDataRecord>>, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::bug(format!("cannot start the async runtime: {e}")))?;
    let client = client()?;
    let urls: Vec<String> = inputs
        .channels
        .iter()
        .flat_map(|ch| {
            inputs
                .subdirs
                .iter()
                .map(move |sub| format!("{ch}/{sub}/repodata.json"))
        })
        .collect();
    let bodies = rt.block_on(futures_util::future::join_all(
        urls.iter().map(|url| fetch(&client, url)),
    ));
    let mut bodies = urls.iter().zip(bodies);
    let mut out = Vec::new();
    for ch in &inputs.channels {
        let base = Url::parse(&format!("{ch}/"))
            .map_err(|e| failed(format!("channel URL `{ch}`: {e}"), REACH_HINT))?;
        let channel = Channel::from_url(base.clone());
        let mut found = false;
        for (url, body) in bodies.by_ref().take(inputs.subdirs.len()) {
            let Some(bytes) = body? else {
                out.push(Vec::new());
                continue;
            };
            found = true;
            let repodata: RepoData = serde_json::from_slice(&bytes).map_err(|e| {
                failed(
                    format!("{url} does not parse as repodata.json: {e}"),
                    REACH_HINT,
                )
            })?;
            // The solver matches a `channel::` spec by the channel's canonical (redacted) name:
            // records carry the same, so a token channel's specs find its records.
            let name = channel.canonical_name();
            let mut records = repodata.into_repo_data_records(&channel);
            for r in &mut records {
                r.channel = Some(name.clone());
            }
            out.push(records);
        }
        if !found {
            return Err(failed(
                format!(
                    "channel {ch} has no repodata.json for {}",
                    inputs.subdirs.join(" or ")
                ),
                REACH_HINT,
            ));
        }
    }
    Ok(out)
}

use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;

type Body = http_body_util::Empty<bytes::Bytes>;
type Direct = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>;
type Proxied =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Tunnel<HttpConnector>>, Body>;

/// The HTTP clients of one resolution: direct, and the proxy rules of the environment.
struct Client {
    direct: Direct,
    proxies: Matcher,
}

fn tls(
) -> Result<hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes>, Failure>
{
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| {
            failed(
                format!("cannot load this machine's CA certificates: {e}"),
                REACH_HINT,
            )
        })
}

fn client() -> Result<Client, Failure> {
    let https = tls()?.https_or_http().enable_http1().build();
    Ok(Client {
        direct: hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
        proxies: Matcher::from_env(),
    })
}

impl Client {
    /// The client for `uri`: through an HTTP CONNECT tunnel to the proxy when the environment
    /// names one for it. Only https is proxied: a CONNECT to a plain-http port is refused by
    /// common proxies, and http channels are for mirrors on the local network.
    fn proxied(&self, uri: &hyper::Uri) -> Result<Option<(Proxied, String)>, Failure> {
        if uri.scheme_str() != Some("https") {
            return Ok(None);
        }
        let Some(proxy) = self.proxies.intercept(uri) else {
            return Ok(None);
        };
        let mut tunnel = Tunnel::new(proxy.uri().clone(), HttpConnector::new());
        if let Some(auth) = proxy.basic_auth() {
            tunnel = tunnel.with_auth(auth.clone());
        }
        let https = tls()?.https_only().enable_http1().wrap_connector(tunnel);
        // Shown in errors: the proxy's host and port only, never its credentials.
        let shown = format!(
            "{}:{}",
            proxy.uri().host().unwrap_or("?"),
            proxy.uri().port_u16().unwrap_or(80)
        );
        Ok(Some((
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https),
            shown,
        )))
    }
}

/// The body at `url`; `None` when the server says it has none (404: a subdir the channel does
/// not publish). `file://` URLs are read from disk.
async fn fetch(client: &Client, url: &str) -> Result<Option<Vec<u8>>, Failure> {
    use http_body_util::BodyExt;
    if let Some(path) = url.strip_prefix("file://") {
        return match std::fs::read(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(failed(format!("cannot read {url}: {e}"), REACH_HINT)),
        };
    }
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| failed(format!("`{url}` is not a URL: {e}"), REACH_HINT))?;
    let req = hyper::Request::get(uri)
        .header("accept-encoding", "gzip")
        .header(
            "user-agent",
            concat!("envbuild/", env!("CARGO_PKG_VERSION")),
        )
        .body(http_body_util::Empty::new())
        .map_err(|e| Failure::bug(format!("request for {url}: {e}")))?;
    let proxied = client.proxied(req.uri())?;
    let work = async {
        let resp =
            match &proxied {
                Some((c, proxy)) => c.request(req).await.map_err(|e| {
                    failed(
                        format!(
                            "cannot reach {url} through the proxy {proxy}: {}",
                            chain(&e)
                        ),
                        PROXY_HINT,
                    )
                })?,
                None => client.direct.request(req).await.map_err(|e| {
                    failed(format!("cannot reach {url}: {}", chain(&e)), REACH_HINT)
                })?,
            };
        let status = resp.status();
        if status == hyper::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(failed(format!("{url} answered HTTP {status}"), REACH_HINT));
        }
        let gzip = resp
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let body = http_body_util::Limited::new(resp.into_body(), MAX_REPODATA)
            .collect()
            .await
            .map_err(|e| failed(format!("reading {url}: {e}"), REACH_HINT))?
            .to_bytes();
        if !gzip {
            return Ok(Some(body.to_vec()));
        }
        let mut out = Vec::new();
        use std::io::Read;
        flate2::read::GzDecoder::new(&body[..])
            .take(MAX_REPODATA as u64)
            .read_to_end(&mut out)
            .map_err(|e| failed(format!("{url}: bad gzip body: {e}"), REACH_HINT))?;
        Ok(Some(out))
    };
    match tokio::time::timeout(FETCH_TIMEOUT, work).await {
        Ok(r) => r,
        Err(_) => Err(failed(
            format!("{url} did not answer within {} s", FETCH_TIMEOUT.as_secs()),
            REACH_HINT,
        )),
    }
}

/// An error with its causes (hyper's own message is only "client error (Connect)").
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
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
/// must satisfy (`--upgrade-package` holds the rest of the lock with them).
pub fn resolve(inputs: &CondaInputs, alias: &str, hold: &[String]) -> Result<Vec<Solved>, Failure> {
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
    let repodata = fetch_all(inputs)?;
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
