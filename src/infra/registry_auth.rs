//! Registry credentials the way docker users already have them: `ENVBUILD_REGISTRY_USER` and
//! `ENVBUILD_REGISTRY_PASSWORD` (for CI), else the docker `config.json` (`$DOCKER_CONFIG`, else
//! `~/.docker`): `credHelpers`, inline `auths`, `credsStore`, the helpers run as
//! `docker-credential-NAME get`. Performs I/O (environment, the config file, helper processes).
//! A secret is never printed, never in a message and never in `Debug` output.

use crate::core::diag::{Diagnostic, Failure};
use crate::core::docker_config::{CredentialSource, DockerConfig, DOCKER_HUB_AUTH_KEY};
use crate::core::image_ref::DOCKER_HUB;
use codes::REGISTRY_AUTH;
use std::path::PathBuf;
use std::time::Duration;

/// The diagnostic code of this module, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::registry_auth::REGISTRY_AUTH;
}

/// The env var with the CI user name.
pub const ENV_USER: &str = "ENVBUILD_REGISTRY_USER";
/// The env var with the CI password or token.
pub const ENV_PASSWORD: &str = "ENVBUILD_REGISTRY_PASSWORD";

/// How long a credential helper may take (one that waits for a prompt must not hang a build).
const HELPER_LIMIT: Duration = Duration::from_secs(30);

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    pub identity_token: Option<String>,
    /// The registry host they are for (`docker.io`'s as docker files it).
    pub server: String,
    /// Where they came from, for messages: `ENVBUILD_REGISTRY_USER`, `config.json`, a helper.
    pub origin: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials(for {} from {})", self.server, self.origin)
    }
}

fn auth_failure(message: String, hint: &str) -> Failure {
    Failure::one(Diagnostic::error(REGISTRY_AUTH, message).with_hint(hint))
}

/// A registry's (or its token server's) refusal to `doing` (`push `r/x:1``), saying `why` and
/// where the credentials came from (`creds`' origin, or none); never a secret. The engine's
/// pulls and pushes and envbuild's own HTTP calls to a registry answer a refusal alike.
pub fn refused(doing: &str, why: &str, creds: Option<&Credentials>) -> Failure {
    let had = match creds {
        Some(c) => format!(" with the credentials from {}", c.origin),
        None => " without credentials".to_string(),
    };
    auth_failure(
        format!("the registry refused to {doing}{had}: {why}"),
        "log in (`docker login REGISTRY`, which fills ~/.docker/config.json or its credential \
         helper), or set ENVBUILD_REGISTRY_USER and ENVBUILD_REGISTRY_PASSWORD",
    )
}

/// The credentials for registry `host`, `None` to go anonymous. An env var pair wins, so a CI
/// job's secret is used even where a developer's config also names the registry.
pub fn for_host(host: &str) -> Result<Option<Credentials>, Failure> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let server = if host == DOCKER_HUB {
        DOCKER_HUB_AUTH_KEY.to_string()
    } else {
        host.to_string()
    };
    match (env(ENV_USER), env(ENV_PASSWORD)) {
        (Some(username), Some(password)) => {
            return Ok(Some(Credentials {
                username,
                password,
                identity_token: None,
                server,
                origin: format!("{ENV_USER}/{ENV_PASSWORD}"),
            }))
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(auth_failure(
                format!("only one of {ENV_USER} and {ENV_PASSWORD} is set"),
                "set both (the user name and its password or token), or neither to use the \
                 docker config",
            ))
        }
        (None, None) => {}
    }
    let Some(path) = config_path() else {
        return Ok(None);
    };
    // A config is a few hundred bytes; anything past 1 MiB is not one.
    let text = match std::fs::metadata(&path) {
        Err(_) => return Ok(None),
        Ok(m) if !m.is_file() || m.len() > 1 << 20 => {
            return Err(auth_failure(
                format!(
                    "`{}` is not a docker config file",
                    crate::core::diag::shown(&path)
                ),
                "point DOCKER_CONFIG at the folder of a docker config.json",
            ))
        }
        Ok(_) => crate::infra::fs::read_bounded_text(&path, 1 << 20)
            .map_err(|e| Failure::io(&path, &e))?,
    };
    let config = serde_json::from_str::<DockerConfig>(&text).map_err(|e| {
        auth_failure(
            format!(
                "`{}` is not a docker config: {e}",
                crate::core::diag::shown(&path)
            ),
            "fix the file (`docker login` writes it), or set ENVBUILD_REGISTRY_USER and \
                 ENVBUILD_REGISTRY_PASSWORD",
        )
    })?;
    let source = config.source_for(host).map_err(|why| {
        auth_failure(
            why,
            "run `docker login` again, or set ENVBUILD_REGISTRY_USER and ENVBUILD_REGISTRY_PASSWORD",
        )
    })?;
    match source {
        CredentialSource::None => Ok(None),
        CredentialSource::Inline {
            username,
            password,
            identity_token,
        } => Ok(Some(Credentials {
            username,
            password,
            identity_token,
            server,
            origin: crate::core::diag::shown(&path),
        })),
        CredentialSource::Helper(name) => helper_get(&name, &server),
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn config_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    env("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .map(|d| d.join("config.json"))
}

#[derive(serde::Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Ask `docker-credential-NAME get` for `server`'s credentials (the helper protocol: the server
/// on stdin, `{"Username", "Secret"}` on stdout; a user `<token>` means an identity token).
fn helper_get(name: &str, server: &str) -> Result<Option<Credentials>, Failure> {
    let program = format!("docker-credential-{name}");
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !valid {
        return Err(auth_failure(
            format!(
                "the docker config names a credential helper `{name}` that is not a plain name"
            ),
            "fix `credsStore`/`credHelpers` in the docker config",
        ));
    }
    run_helper(std::process::Command::new(&program), &program, server)
}

/// Run a credential helper (`cmd`, shown as `program`) for `server`.
fn run_helper(
    mut cmd: std::process::Command,
    program: &str,
    server: &str,
) -> Result<Option<Credentials>, Failure> {
    cmd.arg("get");
    let hint = "check the helper (`docker login` with it), or set ENVBUILD_REGISTRY_USER and \
                ENVBUILD_REGISTRY_PASSWORD";
    let out =
        crate::infra::proc::run_with_input(cmd, server.as_bytes(), HELPER_LIMIT).map_err(|e| {
            let why = match e {
                crate::infra::proc::RunError::Spawn(e) => format!("cannot be started: {e}"),
                crate::infra::proc::RunError::TimedOut { .. } => {
                    format!("did not answer within {}s", HELPER_LIMIT.as_secs())
                }
                crate::infra::proc::RunError::Wait(e) => format!("failed: {e}"),
            };
            auth_failure(format!("credential helper `{program}` {why}"), hint)
        })?;
    if out.code != Some(0) {
        // The protocol's "no credentials" answer: go anonymous, as docker does.
        if out.stdout.contains("credentials not found")
            || out.stderr.contains("credentials not found")
        {
            return Ok(None);
        }
        // Its output is not shown: a helper may echo what it was given.
        return Err(auth_failure(
            format!(
                "credential helper `{program}` failed for `{server}` (exit {})",
                out.code.map_or("by signal".to_string(), |c| c.to_string())
            ),
            hint,
        ));
    }
    let answer: HelperAnswer = serde_json::from_str(out.stdout.trim()).map_err(|_| {
        auth_failure(
            format!("credential helper `{program}` gave no credentials document"),
            hint,
        )
    })?;
    let (username, password, identity_token) = if answer.username == "<token>" {
        (String::new(), String::new(), Some(answer.secret))
    } else {
        (answer.username, answer.secret, None)
    };
    Ok(Some(Credentials {
        username,
        password,
        identity_token,
        server: server.to_string(),
        origin: program.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in helper: a shell script answering as `script` says.
    fn helper(script: &str) -> (tempfile::TempDir, std::process::Command) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docker-credential-test");
        std::fs::write(&path, format!("#!/bin/sh\nread server\n{script}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cmd = std::process::Command::new(&path);
        (dir, cmd)
    }

    #[test]
    fn helpers_answer_by_the_protocol_and_their_output_is_never_shown() {
        let (_d, cmd) = helper(
            r#"[ "$server" = "r.io" ] || exit 9; echo '{"ServerURL":"r.io","Username":"bob","Secret":"s3cret"}'"#,
        );
        let c = run_helper(cmd, "docker-credential-test", "r.io")
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("bob", "s3cret")
        );
        assert!(!format!("{c:?}").contains("s3cret"));

        let (_d, cmd) = helper(r#"echo '{"Username":"<token>","Secret":"tok"}'"#);
        let c = run_helper(cmd, "h", "r.io").unwrap().unwrap();
        assert_eq!(c.identity_token.as_deref(), Some("tok"));
        assert!(c.username.is_empty() && c.password.is_empty());

        let (_d, cmd) = helper("echo 'credentials not found in native keychain'; exit 1");
        assert_eq!(run_helper(cmd, "h", "r.io").unwrap(), None);

        // A failing helper that echoes a secret: the failure names the helper, not its output.
        let (_d, cmd) = helper("echo 'bad password hunter2' >&2; echo hunter2; exit 3");
        let f = run_helper(cmd, "docker-credential-test", "r.io").unwrap_err();
        let text = f.to_string();
        assert_eq!(f.diagnostics[0].code, REGISTRY_AUTH);
        assert!(
            text.contains("docker-credential-test") && text.contains("exit 3"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");

        let (_d, cmd) = helper("echo not-json");
        let f = run_helper(cmd, "h", "r.io").unwrap_err();
        assert!(!f.to_string().contains("not-json"), "{f}");
    }

    #[test]
    fn helper_names_are_plain() {
        let f = helper_get("../../bin/sh", "r.io").unwrap_err();
        assert_eq!(f.diagnostics[0].code, REGISTRY_AUTH);
        assert!(f.to_string().contains("not a plain name"), "{f}");
    }
}
