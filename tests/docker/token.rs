//! The registry token flow for real (Docker Hub's, GHCR's, Harbor's: a `401` with `Bearer
//! realm=...,service=...,scope=...`, a token from the realm, the request again with it): Debian's
//! `docker-registry` (distribution 2.8) with `auth: token`, and a token server of the test's own
//! on 127.0.0.1 that checks basic auth (or an identity token's OAuth2 refresh grant), grants the
//! scopes asked for (anonymous: `pull` only) and signs its JWTs (RS256, the certificate in the
//! header's `x5c` and in the registry's `rootcertbundle`) with the `openssl` CLI. The engine
//! pushes through it with the credentials envbuild passes; envbuild's own HTTP client
//! (`infra::registry_http`) reads manifests back and PUTs an image index through it; wrong
//! credentials are `REGISTRY_AUTH` on both paths.

use crate::engine_support as support;
use base64::Engine as _;
use envbuild::core::image_index;
use envbuild::core::image_ref::Repository;
use envbuild::core::spec::Platform;
use envbuild::infra::docker::registry as reg;
use envbuild::infra::registry_auth::Credentials;
use envbuild::infra::registry_http::RegistryApi;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        a_token_registry_takes_the_engines_push_and_envbuilds_index,
        image_push_and_its_verdict_go_through_a_token_registry,
        a_registry_cache_behind_a_token_registry_is_read_with_the_login,
    ]
}

/// The login the token server takes.
const USER: &str = "envbuild-ci";
const PASSWORD: &str = "s3cret-pw";
/// The identity token (OAuth2 refresh token) it takes instead.
const REFRESH: &str = "refresh-abc123";
/// The registry's `service` and the tokens' issuer, as the registry's config names them.
const SERVICE: &str = "envbuild-test-registry";
const ISSUER: &str = "envbuild-test-token-server";

/// One request the token server answered.
#[derive(Debug, Clone)]
struct Asked {
    /// `GET` (distribution's token flow) or `POST` (OAuth2's).
    method: String,
    /// `envbuild/...`, `docker/...`: whose client asked.
    agent: String,
    /// Who it was: the user, `anonymous`, `refresh` (an identity token), `refused`.
    who: String,
    /// The scopes asked for, as sent.
    scopes: Vec<String>,
    status: u16,
}

/// A token server on 127.0.0.1 with a key and self-signed certificate of its own (made by
/// `openssl`); stops when dropped.
struct TokenServer {
    /// The realm a registry names: `http://127.0.0.1:PORT/token?via=realm` (the query is kept
    /// by a client that reads the realm right; the server refuses a request without it), or
    /// `http://127.0.0.1:PORT/token`, as Docker Hub's and GHCR's realms are.
    realm: String,
    cert: PathBuf,
    log: Arc<Mutex<Vec<Asked>>>,
    stop: Arc<AtomicBool>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl TokenServer {
    /// A token server whose realm has a query (`via=realm`) or none.
    fn start_with(realm_query: bool) -> TokenServer {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=envbuild-test-token-server", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl");
        assert!(st.success(), "openssl req -x509 failed");
        // The PEM's body is the certificate's DER in standard base64: the `x5c` entry.
        let pem = std::fs::read_to_string(&cert).unwrap();
        let x5c: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (log.clone(), stop.clone());
        let signer = Signer {
            key,
            x5c,
            n: AtomicU64::new(0),
        };
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    serve(c, &signer, &l, realm_query);
                }
            }
        });
        let query = if realm_query { "?via=realm" } else { "" };
        TokenServer {
            realm: format!("http://127.0.0.1:{port}/token{query}"),
            cert,
            log,
            stop,
            port,
            _dir: dir,
        }
    }

    /// The registry config's `auth:` section that sends clients here.
    fn registry_auth(&self) -> String {
        format!(
            "auth:\n  token:\n    realm: \"{}\"\n    service: {SERVICE}\n    issuer: {ISSUER}\n    \
             rootcertbundle: {}\n",
            self.realm,
            self.cert.display()
        )
    }

    /// What envbuild's client (user agent `envbuild/...`) asked since the last call.
    fn envbuilds(&self) -> Vec<Asked> {
        let mut log = self.log.lock().unwrap();
        let (ours, _): (Vec<Asked>, Vec<Asked>) = log
            .drain(..)
            .partition(|a| a.agent.starts_with("envbuild/"));
        ours
    }

    /// Everything asked since the last call.
    fn take(&self) -> Vec<Asked> {
        self.log.lock().unwrap().drain(..).collect()
    }
}

/// Signs tokens with the server's key.
struct Signer {
    key: PathBuf,
    x5c: String,
    n: AtomicU64,
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Signer {
    /// A JWT distribution accepts: RS256 over `header.claims`, the certificate in `x5c`, the
    /// issuer and audience its config names, valid from a minute ago for five minutes, with
    /// `access` the grants.
    fn token(&self, access: &serde_json::Value) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let header = serde_json::json!({"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]});
        let claims = serde_json::json!({
            "iss": ISSUER, "sub": USER, "aud": SERVICE,
            "exp": now + 300, "nbf": now - 60, "iat": now - 60,
            "jti": format!("{now}-{}", self.n.fetch_add(1, Ordering::SeqCst)),
            "access": access,
        });
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let mut child = Command::new("openssl")
            .args(["dgst", "-sha256", "-sign"])
            .arg(&self.key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl dgst");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "openssl dgst -sign failed"
        );
        format!("{input}.{}", b64url(&out.stdout))
    }
}

/// The grants for `scopes` (`repository:NAME:pull,push`, several space-separated in one value
/// too): all that is asked, or only `pull` for an anonymous client.
fn grants(scopes: &[String], anonymous: bool) -> serde_json::Value {
    let mut access = Vec::new();
    for scope in scopes.iter().flat_map(|s| s.split(' ')) {
        let Some((kind, rest)) = scope.split_once(':') else {
            continue;
        };
        let Some((name, actions)) = rest.rsplit_once(':') else {
            continue;
        };
        let actions: Vec<&str> = actions
            .split(',')
            .filter(|a| !anonymous || *a == "pull")
            .collect();
        access.push(serde_json::json!({"type": kind, "name": name, "actions": actions}));
    }
    serde_json::Value::Array(access)
}

/// One request per connection: `GET /token` (basic auth or none) or `POST /token` (a form:
/// `grant_type=password` or `refresh_token`), answered with a token for the scopes asked, or
/// `401` for wrong credentials, or `400` without the realm's own query (`via=realm`) when its
/// realm has one (`realm_query`).
fn serve(mut c: TcpStream, signer: &Signer, log: &Mutex<Vec<Asked>>, realm_query: bool) {
    let mut reader = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    let (mut length, mut agent, mut authorization) = (0usize, String::new(), String::new());
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = v.parse().unwrap_or(0),
            "user-agent" => agent = v,
            "authorization" => authorization = v,
            _ => {}
        }
    }
    let mut body = vec![0; length.min(1 << 16)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    // A POST's form and the query alike, as Go's `FormValue` reads them.
    let mut form: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if method == "POST" {
        form.extend(url::form_urlencoded::parse(&body).into_owned());
    }
    let value = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let scopes: Vec<String> = form
        .iter()
        .filter(|(k, _)| k == "scope")
        .map(|(_, v)| v.clone())
        .collect();
    let basic = authorization
        .strip_prefix("Basic ")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let who = match method.as_str() {
        "GET" => match &basic {
            None => Some("anonymous"),
            Some(b) if *b == format!("{USER}:{PASSWORD}") => Some(USER),
            Some(_) => None,
        },
        "POST" => match value("grant_type") {
            Some("refresh_token") if value("refresh_token") == Some(REFRESH) => Some("refresh"),
            Some("password")
                if value("username") == Some(USER) && value("password") == Some(PASSWORD) =>
            {
                Some(USER)
            }
            _ => None,
        },
        _ => None,
    };
    let (status, answer) = if path != "/token"
        || (realm_query && value("via") != Some("realm"))
        || value("service") != Some(SERVICE)
    {
        (
            400,
            serde_json::json!({"details": "not the realm's URL or service"}),
        )
    } else {
        match who {
            None => (
                401,
                serde_json::json!({"details": "incorrect username or password"}),
            ),
            Some(who) => {
                let token = signer.token(&grants(&scopes, who == "anonymous"));
                // distribution's flow answers `token`, OAuth2's `access_token`.
                match method.as_str() {
                    "POST" => (
                        200,
                        serde_json::json!({"access_token": token, "expires_in": 300}),
                    ),
                    _ => (200, serde_json::json!({"token": token, "expires_in": 300})),
                }
            }
        }
    };
    log.lock().unwrap().push(Asked {
        method,
        agent,
        who: who.unwrap_or("refused").to_string(),
        scopes,
        status,
    });
    let body = answer.to_string();
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        _ => "Bad Request",
    };
    let _ = write!(
        c,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

fn creds(server: &str, password: &str) -> Credentials {
    Credentials {
        username: USER.into(),
        password: password.into(),
        identity_token: None,
        server: server.into(),
        origin: "the test's login".into(),
    }
}

/// The code and text of a failure that must be a registry refusal.
fn refusal(f: envbuild::core::diag::Failure) -> String {
    assert_eq!(f.diagnostics[0].code, "REGISTRY_AUTH", "{f}");
    let text = f.to_string();
    assert!(
        !text.contains(PASSWORD) && !text.contains(REFRESH),
        "{text}"
    );
    text
}

/// `envbuild image SPEC --gpus none --json --push REPO EXTRA...` logged in as a CI job is: the
/// token server's user with `password` (`ENVBUILD_REGISTRY_USER`/`_PASSWORD`), the verdict
/// cache at `dirs.0`, `DOCKER_CONFIG` at `dirs.1` (a folder that is not there: no docker
/// login); the exit code, the JSON document (`null` when none) and stderr.
fn image_with_login(
    spec: &std::path::Path,
    repo: &str,
    dirs: (&std::path::Path, &std::path::Path),
    password: &str,
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let out = super::docker::envbuild()
        .arg("image")
        .arg(spec)
        .args(["--gpus", "none", "--json", "--push", repo])
        .args(extra)
        .env("ENVBUILD_CACHE_DIR", dirs.0)
        .env("ENVBUILD_REGISTRY_USER", USER)
        .env("ENVBUILD_REGISTRY_PASSWORD", password)
        .env("DOCKER_CONFIG", dirs.1)
        .env("CI", "true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.code(), doc, err)
}

/// The engine, `openssl`, a token server and a registry that sends clients to it; a skip (a
/// failure in CI) with the reason when one is missing.
fn token_start(test: &str) -> Option<(support::Docker, TokenServer, super::push::Registry)> {
    token_start_with(test, true)
}

/// [`token_start`] with a realm that has a query (`via=realm`) or none.
fn token_start_with(
    test: &str,
    realm_query: bool,
) -> Option<(support::Docker, TokenServer, super::push::Registry)> {
    let d = support::engine(test)?;
    if !support::tool_found("openssl") {
        support::skip_or_fail(test, &support::missing_tool("openssl", "openssl"));
        return None;
    }
    let ts = TokenServer::start_with(realm_query);
    let r = super::push::registry_with(test, &ts.registry_auth())?;
    Some((d, ts, r))
}

/// The engine pushes a busybox image through the token flow (refused anonymously and with a
/// wrong password: `REGISTRY_AUTH`); envbuild's client reads its manifest back and PUTs an
/// image index as a fleet push does, asking the realm once per scope (`pull`, then
/// `pull,push`) with the realm's query kept, and reusing the token; without credentials it
/// reads (an anonymous token) but may not write; a wrong password is `REGISTRY_AUTH` naming
/// the refused scope; an identity token gets its token by the OAuth2 refresh grant.
fn a_token_registry_takes_the_engines_push_and_envbuilds_index() {
    let test = "a_token_registry_takes_the_engines_push_and_envbuilds_index";
    let Some((d, ts, r)) = token_start(test) else {
        return;
    };
    let n = super::docker::nonce();
    let repo = Repository::parse(&format!("{}/envbuild-test/token-{n}", r.addr)).unwrap();
    let good = creds(&r.addr, PASSWORD);
    let bad = creds(&r.addr, "wrong-pw");
    let image = support::busybox_image(&d);
    d.block_on(reg::tag(&d.engine, &image, &repo.name, "1"))
        .unwrap();
    let local = repo.tagged("1");
    let push =
        |c: Option<&Credentials>| d.block_on(reg::push(&d.engine, &repo.name, "1", c, &mut |_| {}));

    // The engine's own token flow, with what envbuild passes it.
    let outcomes = (push(None), push(Some(&bad)), push(Some(&good)));
    let engine_asked = ts.take();
    d.remove_image(&local);
    let anonymous = refusal(outcomes.0.expect_err("an anonymous push"));
    assert!(anonymous.contains("without credentials"), "{anonymous}");
    let wrong = refusal(outcomes.1.expect_err("a push with a wrong password"));
    assert!(wrong.contains("the test's login"), "{wrong}");
    let digest = outcomes.2.unwrap_or_else(|f| panic!("the push: {f}"));
    assert!(digest.starts_with("sha256:"), "{digest}");
    let name = format!("repository:envbuild-test/token-{n}:");
    assert!(
        engine_asked.iter().any(|a| a.who == USER
            && a.status == 200
            && a.scopes
                .iter()
                .any(|s| s.starts_with(&name) && s.contains("push"))),
        "the engine got no push token: {engine_asked:?}"
    );
    assert!(
        engine_asked.iter().any(|a| a.status == 401),
        "the wrong password reached no token request: {engine_asked:?}"
    );

    // envbuild's client, as a fleet push uses it: each image read back, then the index PUT.
    let api = RegistryApi::new(&repo, Some(good.clone())).unwrap();
    let member = d
        .block_on(api.member(&digest, Platform::Linux64))
        .unwrap_or_else(|f| panic!("reading the pushed manifest: {f}"));
    assert_eq!(member.digest, digest);
    let again = d.block_on(api.member("1", Platform::Linux64)).unwrap();
    assert_eq!(again.digest, digest);
    let bytes = image_index::index_json(std::slice::from_ref(&member)).unwrap();
    let index = d
        .block_on(api.put_index("fleet", &bytes))
        .unwrap_or_else(|f| panic!("writing the index: {f}"));
    let (media_type, stored) = d.block_on(api.manifest("fleet")).unwrap();
    assert_eq!(media_type, image_index::OCI_INDEX);
    assert_eq!(
        index,
        format!("sha256:{}", envbuild::core::hash::sha256_hex(&stored))
    );
    assert_eq!(image_index::parse_index(&stored).unwrap()[0].digest, digest);
    let ours = ts.envbuilds();
    // The registry writes a scope's actions in no fixed order (`push,pull` or `pull,push`).
    let sorted = |scope: &String| match scope.rsplit_once(':') {
        Some((head, actions)) => {
            let mut a: Vec<&str> = actions.split(',').collect();
            a.sort_unstable();
            format!("{head}:{}", a.join(","))
        }
        None => scope.clone(),
    };
    let asked: Vec<(&str, &str, Vec<String>)> = ours
        .iter()
        .map(|a| {
            let scopes = a.scopes.iter().map(sorted).collect();
            (a.method.as_str(), a.who.as_str(), scopes)
        })
        .collect();
    assert_eq!(
        asked,
        [
            ("GET", USER, vec![format!("{name}pull")]),
            ("GET", USER, vec![format!("{name}pull,push")]),
        ],
        "one token per scope, reused: {ours:?}"
    );

    // Without credentials: an anonymous token reads, and a write is refused, coded.
    let anon = RegistryApi::new(&repo, None).unwrap();
    let m = d.block_on(anon.member(&index, Platform::Linux64)).unwrap();
    assert_eq!(m.digest, digest);
    let f = d
        .block_on(anon.put_index("anon", &bytes))
        .expect_err("an anonymous index push");
    let text = refusal(f);
    assert!(
        text.contains("without credentials") && text.contains("write the image index"),
        "{text}"
    );

    // A wrong password: the token server's 401 is REGISTRY_AUTH naming the scope and the login.
    let wrong = RegistryApi::new(&repo, Some(bad)).unwrap();
    let text = refusal(
        d.block_on(wrong.member(&digest, Platform::Linux64))
            .expect_err("a read with a wrong password"),
    );
    assert!(
        text.contains(&format!("give a token for `{name}pull`"))
            && text.contains("the test's login")
            && text.contains("401"),
        "{text}"
    );

    // An identity token (`docker login` with an OAuth registry): the OAuth2 refresh grant.
    let identity = Credentials {
        username: String::new(),
        password: String::new(),
        identity_token: Some(REFRESH.into()),
        server: r.addr.clone(),
        origin: "the test's identity token".into(),
    };
    let oauth = RegistryApi::new(&repo, Some(identity)).unwrap();
    d.block_on(oauth.put_index("oauth", &bytes))
        .unwrap_or_else(|f| panic!("an index with an identity token: {f}"));
    let ours = ts.envbuilds();
    assert!(
        ours.iter()
            .any(|a| a.method == "POST" && a.who == "refresh" && a.status == 200),
        "{ours:?}"
    );
}

/// `envbuild image --push` with CI's credentials (`ENVBUILD_REGISTRY_USER`/`_PASSWORD`) to a
/// token registry: a wrong password stops the run at the registry lookup before any build
/// (`REGISTRY_AUTH`, exit 1); the right one builds, tests and pushes the image and its verdict;
/// a second run, with the image gone from the engine and an empty verdict cache, skips on the
/// registry's word; and `test --show-verdict` reads the verdict back anonymously (a `pull`
/// token without credentials).
fn image_push_and_its_verdict_go_through_a_token_registry() {
    let test = "image_push_and_its_verdict_go_through_a_token_registry";
    let Some((d, ts, r)) = token_start(test) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = super::docker::nonce();
    std::fs::write(&spec, support::spec_on_base(&format!("token-{n}"), &base)).unwrap();
    let repo = format!("{}/envbuild-test/token-image-{n}", r.addr);
    let no_config = dir.path().join("no-docker-config");
    let image = |cache: &std::path::Path, password: &str, extra: &[&str]| {
        image_with_login(&spec, &repo, (cache, &no_config), password, extra)
    };

    let cache = tempfile::tempdir().unwrap();
    let (code, doc, err) = image(cache.path(), "wrong-pw", &["--update-lock"]);
    assert_eq!(code, Some(1), "{doc}\n{err}");
    assert!(err.contains("REGISTRY_AUTH"), "{err}");
    assert!(
        err.contains("ENVBUILD_REGISTRY_USER/ENVBUILD_REGISTRY_PASSWORD"),
        "the refusal names where the credentials came from: {err}"
    );
    assert!(
        !err.contains("wrong-pw") && !doc.to_string().contains("wrong-pw"),
        "{err}"
    );
    assert!(
        doc["builds"].as_array().is_none_or(|b| b.is_empty()),
        "built before the registry answered: {doc}"
    );

    let (code, doc, err) = image(cache.path(), PASSWORD, &["--update-lock"]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["builds"][0]["skipped"], false, "{doc}");
    let local_tag = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
    let digest = doc["pushed"][0]["digest"].as_str().unwrap().to_string();
    assert!(pushed.starts_with(&format!("{repo}:runtime-")), "{doc}");
    d.remove_image(&local_tag);
    d.remove_image(&pushed);
    let asked = ts.take();
    assert!(
        asked.iter().any(|a| a.who == USER && a.status == 200),
        "no token was given to the login: {asked:?}"
    );

    // The registry's word, with the image gone and a fresh verdict cache.
    let cache = tempfile::tempdir().unwrap();
    let (code, doc, err) = image(cache.path(), PASSWORD, &[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["skipped"], "registry", "{doc}\n{err}");
    assert_eq!(doc["pushed"][0]["digest"], digest.as_str(), "{doc}");

    // The verdict, read back without credentials: the token server gives an anonymous pull.
    let out = super::docker::envbuild()
        .args(["test", &pushed, "--show-verdict", "--json"])
        .env("ENVBUILD_CACHE_DIR", dir.path().join("no-cache"))
        .env("DOCKER_CONFIG", dir.path().join("no-docker-config"))
        .env_remove("ENVBUILD_REGISTRY_USER")
        .env_remove("ENVBUILD_REGISTRY_PASSWORD")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
    assert_eq!(shown["holds"], true, "{shown}");
    assert_eq!(shown["verdict"]["image_digest"], digest.as_str(), "{shown}");
    let asked = ts.take();
    assert!(
        asked
            .iter()
            .any(|a| a.who == "anonymous" && a.status == 200),
        "{asked:?}"
    );
    d.assert_no_smoke_container("after the token registry runs");
}

/// With BuildKit, `image --push` to a token registry whose realm has no query (as Docker Hub's
/// and GHCR's): the next build of the variant (a changed late layer, the local images gone)
/// reads the registry cache (`VARIANT-cache`) with the login, not anonymously: BuildKit asks the
/// build's session for the registry's credentials (or for the token itself) and its token
/// request for the cache repository's `pull` names the user. This token server also grants
/// anonymous pulls, so what is checked is who asked: a private registry refuses an anonymous
/// read, and BuildKit says so only in its debug log (every layer built again on every runner).
fn a_registry_cache_behind_a_token_registry_is_read_with_the_login() {
    let test = "a_registry_cache_behind_a_token_registry_is_read_with_the_login";
    if std::env::var("ENVBUILD_BUILDER").is_ok_and(|b| b.trim() == "legacy") {
        return;
    }
    let Some((d, ts, r)) = token_start_with(test, false) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = super::docker::nonce();
    let path = format!("envbuild-test/token-cache-{n}");
    let repo = format!("{}/{path}", r.addr);
    let cache_ref = format!("{repo}:runtime-cache");
    let (verdicts, no_config) = (
        dir.path().join("verdicts"),
        dir.path().join("no-docker-config"),
    );
    let image = |name: &str| {
        std::fs::write(&spec, support::spec_on_base(name, &base)).unwrap();
        let extra = ["--verbose", "--update-lock"];
        let (code, doc, err) =
            image_with_login(&spec, &repo, (&verdicts, &no_config), PASSWORD, &extra);
        assert_eq!(code, Some(0), "{doc}\n{err}");
        let local = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
        let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
        d.remove_image(&local);
        d.remove_image(&pushed);
        err
    };
    image(&format!("token-cache-{n}"));
    ts.take();

    let err = image(&format!("token-cache-{n}-renamed"));
    let said = format!("[runtime] cache from: {cache_ref}");
    assert!(err.contains(&said), "no `{said}` in:\n{err}");
    let import = format!("importing cache manifest from {cache_ref}");
    assert!(err.contains(&import), "no `{import}` in:\n{err}");
    // The engine's push asks as `docker/...`, envbuild's own client as `envbuild/...`: a token
    // for the cache's `pull` asked by anyone else is BuildKit's, through the session.
    let pull = format!("repository:{path}:pull");
    let asked = ts.take();
    let buildkit: Vec<&Asked> = asked
        .iter()
        .filter(|a| !a.agent.starts_with("docker/") && !a.agent.starts_with("envbuild/"))
        .filter(|a| a.scopes.iter().any(|s| s.starts_with(&pull)))
        .collect();
    assert!(
        buildkit.iter().any(|a| a.who == USER && a.status == 200),
        "BuildKit read the cache without the login: {asked:?}"
    );
    assert!(
        buildkit.iter().all(|a| a.status == 200),
        "a refused token request: {asked:?}"
    );
    d.assert_no_smoke_container("after the registry cache runs");
}
