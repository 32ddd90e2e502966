//! Registries through the engine: pull an image (by tag or digest), push one, ask a registry for
//! a tag's manifest digest without pulling (`/distribution/NAME/json`), and make the one-file
//! verdict image (`docker import` of a tar, labelled). Credentials go only into the engine's
//! `X-Registry-Auth` header. Performs network I/O against the engine (and, through it, the
//! registry).

use super::limits::{self, Call};
use super::{images, is_not_found, short_error, Engine};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::image_ref::pull_parts;
use crate::infra::docker::codes;
use crate::infra::registry_auth::Credentials;
use bollard::auth::DockerCredentials;
use futures_util::StreamExt;

/// One progress message of a pull or a push, as the engine streams it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The layer (short id) it is about, when it is about one.
    pub layer: Option<String>,
    /// `Pulling fs layer`, `Downloading`, `Pushed`, `Digest: sha256:...`, ...
    pub status: String,
    /// Bytes done and total, while a layer moves.
    pub bytes: Option<(i64, i64)>,
}

/// One event of a pull, push or import stream, whatever bollard type carries it.
struct Event {
    layer: Option<String>,
    status: Option<String>,
    error: Option<String>,
    bytes: Option<(i64, i64)>,
}

impl From<bollard::models::CreateImageInfo> for Event {
    fn from(i: bollard::models::CreateImageInfo) -> Event {
        Event {
            layer: i.id,
            status: i.status,
            error: i.error_detail.and_then(|d| d.message),
            bytes: i.progress_detail.and_then(|p| Some((p.current?, p.total?))),
        }
    }
}

impl From<bollard::models::PushImageInfo> for Event {
    fn from(i: bollard::models::PushImageInfo) -> Event {
        Event {
            layer: None,
            status: i.status,
            error: i.error_detail.and_then(|d| d.message),
            bytes: i.progress_detail.and_then(|p| Some((p.current?, p.total?))),
        }
    }
}

/// Follow a pull, push or import stream to its end, giving each event without an error to
/// `on_event`. Like a build, it gets an idle limit, not a total one: silent past it is
/// `ENGINE_TIMEOUT` naming `doing`. Returns the last error the engine reported; the outcome is
/// then decided by asking the engine (bollard may end a good stream with a spurious error).
async fn follow<S, T>(
    engine: &Engine,
    doing: &str,
    mut stream: S,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<Option<String>, Failure>
where
    S: futures_util::Stream<Item = Result<T, bollard::errors::Error>> + Unpin,
    T: Into<Event>,
{
    let idle = engine.limits.of(Call::BuildIdle);
    let mut error = None;
    loop {
        let Ok(next) = tokio::time::timeout(idle, stream.next()).await else {
            return Err(limits::timed_out(
                &engine.host,
                doing,
                Call::BuildIdle,
                idle,
            ));
        };
        match next {
            None => return Ok(error),
            Some(Ok(item)) => {
                let event = item.into();
                match event.error {
                    Some(msg) => error = Some(msg),
                    None => on_event(event),
                }
            }
            Some(Err(e)) => return Ok(Some(short_error(&e))),
        }
    }
}

/// envbuild's credentials in bollard's form (pull, push, inspect, and a BuildKit session).
pub(crate) fn bollard_creds(c: Option<&Credentials>) -> Option<DockerCredentials> {
    c.map(|c| DockerCredentials {
        username: Some(c.username.clone()).filter(|u| !u.is_empty()),
        password: Some(c.password.clone()).filter(|p| !p.is_empty()),
        identitytoken: c.identity_token.clone(),
        serveraddress: Some(c.server.clone()),
        ..Default::default()
    })
}

/// Whether a registry's answer is a refusal of (or a demand for) credentials.
fn is_auth_error(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "unauthorized",
        "authentication required",
        "access to the resource is denied",
        "pull access denied",
        "no basic auth credentials",
        "denied:",
        "incorrect username or password",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// Whether a registry's answer means "no such tag or repository".
fn is_missing(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    ["manifest unknown", "not found", "name unknown", "no such"]
        .iter()
        .any(|p| m.contains(p))
}

fn auth_refused(what: &str, reference: &str, msg: &str, creds: Option<&Credentials>) -> Failure {
    crate::infra::registry_auth::refused(&format!("{what} `{reference}`"), msg, creds)
}

/// Pull `reference` (`name:tag` or `name@sha256:...`) onto the engine.
pub async fn pull(
    engine: &Engine,
    reference: &str,
    creds: Option<&Credentials>,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(), Failure> {
    let (name, tag) = pull_parts(reference);
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
        .from_image(name)
        .tag(tag)
        .build();
    let stream = engine
        .docker
        .create_image(Some(opts), None, bollard_creds(creds));
    let doing = format!("pulling `{reference}`");
    let error = follow(engine, &doing, stream, &mut |e| {
        if let Some(status) = e.status {
            on_progress(Progress {
                layer: e.layer,
                status,
                bytes: e.bytes,
            });
        }
    })
    .await?;
    // bollard 0.21.1 may end a good pull with a spurious stream error: the engine decides.
    if images::inspect(engine, reference).await?.is_some() {
        return Ok(());
    }
    let msg = error.unwrap_or_else(|| "the engine ended the pull without the image".into());
    if is_auth_error(&msg) {
        return Err(auth_refused("pull", reference, &msg, creds));
    }
    Err(Failure::one(
        Diagnostic::error(
            codes::PULL_FAILED,
            format!(
                "cannot pull `{reference}` onto the engine at `{}`: {msg}",
                engine.host
            ),
        )
        .with_hint(if super::errors::registry_unreachable(&msg) {
            // No registry answers from here: the way forward is offline, said in full.
            format!(
                "this engine reaches no registry: {}",
                super::errors::offline_base_hint(reference)
            )
        } else {
            "check the name (and digest) and that the engine reaches the registry; on an \
             offline machine load the image first and pass --pull never"
                .to_string()
        }),
    ))
}

/// Push `name:tag` (already on the engine) and return the manifest digest the registry gave it.
pub async fn push(
    engine: &Engine,
    name: &str,
    tag: &str,
    creds: Option<&Credentials>,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<String, Failure> {
    let reference = format!("{name}:{tag}");
    let opts = bollard::query_parameters::PushImageOptionsBuilder::default()
        .tag(tag)
        .build();
    let stream = engine
        .docker
        .push_image(name, Some(opts), bollard_creds(creds));
    let mut digest = None;
    let doing = format!("pushing `{reference}`");
    let error = follow(engine, &doing, stream, &mut |e| {
        if let Some(status) = e.status {
            // The last status: `TAG: digest: sha256:... size: N`.
            if let Some(d) = status
                .split_once("digest: ")
                .and_then(|(_, r)| r.split_whitespace().next())
            {
                digest = Some(d.to_string());
            }
            on_progress(Progress {
                layer: None,
                status,
                bytes: e.bytes,
            });
        }
    })
    .await?;
    match (error, digest) {
        (None, Some(d)) if d.starts_with("sha256:") => Ok(d),
        (Some(msg), _) if is_auth_error(&msg) => Err(auth_refused("push", &reference, &msg, creds)),
        (error, _) => Err(Failure::one(
            Diagnostic::error(
                codes::PUSH_FAILED,
                format!(
                    "cannot push `{reference}`: {}",
                    error.unwrap_or_else(|| "the engine reported no digest".into())
                ),
            )
            .with_hint("check that the engine reaches the registry and may write the repository"),
        )),
    }
}

/// The manifest digest the registry has for `reference` (`name:tag`), `None` when it has no
/// such tag. Nothing is pulled.
pub async fn remote_digest(
    engine: &Engine,
    reference: &str,
    creds: Option<&Credentials>,
) -> Result<Option<String>, Failure> {
    let answer = engine
        .call(
            Call::Short,
            || format!("asking the registry about `{reference}`"),
            engine
                .docker
                .inspect_registry_image(reference, bollard_creds(creds)),
        )
        .await?;
    match answer {
        Ok(d) => Ok(d.descriptor.digest),
        Err(e) => {
            let msg = short_error(&e);
            if is_not_found(&e) || is_missing(&msg) {
                Ok(None)
            } else if is_auth_error(&msg) {
                Err(auth_refused("look up", reference, &msg, creds))
            } else {
                Err(Failure::one(
                    Diagnostic::error(
                        codes::PUSH_FAILED,
                        format!("cannot ask the registry about `{reference}`: {msg}"),
                    )
                    .with_hint("check that the engine reaches the registry"),
                ))
            }
        }
    }
}

/// Give image `id` the name `name:tag`.
pub async fn tag(engine: &Engine, id: &str, name: &str, tag: &str) -> Result<(), Failure> {
    let opts = bollard::query_parameters::TagImageOptionsBuilder::default()
        .repo(name)
        .tag(tag)
        .build();
    engine
        .call(
            Call::Short,
            || format!("tagging `{id}` as `{name}:{tag}`"),
            engine.docker.tag_image(id, Some(opts)),
        )
        .await?
        .map_err(|e| super::engine_error(&format!("cannot tag `{id}` as `{name}:{tag}`"), &e))
}

/// Remove the name `reference` (the image goes too when no other name holds it); a name
/// already gone is not an error.
pub async fn untag(engine: &Engine, reference: &str) -> Result<(), Failure> {
    let answer = engine
        .call(
            Call::Short,
            || format!("removing `{reference}`"),
            engine.docker.remove_image(
                reference,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            ),
        )
        .await?;
    match answer {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(super::engine_error(
            &format!("cannot remove `{reference}`"),
            &e,
        )),
    }
}

/// Make `name:tag`, an image of one file (`/envbuild-verdict.json` = `json`) with `labels`
/// (values must not hold `"` or `\`: envbuild passes base64 and digests), by `docker import`:
/// no builder and no base image are needed. Returns the image id.
pub async fn import_file_image(
    engine: &Engine,
    name: &str,
    tag: &str,
    json: &[u8],
    labels: &[(&str, &str)],
) -> Result<String, Failure> {
    if let Some((k, _)) = labels
        .iter()
        .find(|(k, v)| format!("{k}{v}").contains(['"', '\\', '\n']))
    {
        return Err(Failure::bug(format!("label `{k}` cannot be quoted")));
    }
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, "envbuild-verdict.json", json)
        .map_err(|e| Failure::bug(format!("cannot make the verdict tar: {e}")))?;
    let tar = tar
        .into_inner()
        .map_err(|e| Failure::bug(format!("cannot make the verdict tar: {e}")))?;
    let changes = labels
        .iter()
        .map(|(k, v)| format!("LABEL {k}=\"{v}\""))
        .collect();
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(name)
        .tag(tag)
        .changes(changes)
        .build();
    let stream = engine
        .docker
        .create_image(Some(opts), Some(bollard::body_full(tar.into())), None);
    let doing = format!("making the verdict image `{name}:{tag}`");
    let error = follow(engine, &doing, stream, &mut |_| {}).await?;
    let reference = format!("{name}:{tag}");
    match images::inspect(engine, &reference).await? {
        Some(i) => Ok(i.id),
        None => Err(Failure::one(Diagnostic::error(
            codes::PUSH_FAILED,
            format!(
                "cannot make the verdict image `{reference}`: {}",
                error.unwrap_or_else(|| "the engine made no image".into())
            ),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_answers_are_classified() {
        assert!(is_auth_error("unauthorized: authentication required"));
        assert!(is_auth_error(
            "denied: requested access to the resource is denied"
        ));
        assert!(is_auth_error(
            "pull access denied for x, repository does not exist"
        ));
        assert!(!is_auth_error("manifest unknown: manifest unknown"));
        assert!(is_missing("manifest unknown: manifest unknown"));
        assert!(is_missing("errors:\nmanifest unknown"));
        assert!(!is_missing(
            "dial tcp 127.0.0.1:1: connect: connection refused"
        ));
    }

    #[test]
    fn credentials_reach_bollard_without_empty_fields() {
        let c = Credentials {
            username: "u".into(),
            password: String::new(),
            identity_token: Some("t".into()),
            server: "r.io".into(),
            origin: "test".into(),
        };
        let b = bollard_creds(Some(&c)).unwrap();
        assert_eq!(b.username.as_deref(), Some("u"));
        assert_eq!(b.password, None);
        assert_eq!(b.identitytoken.as_deref(), Some("t"));
        assert_eq!(b.serveraddress.as_deref(), Some("r.io"));
        assert!(bollard_creds(None).is_none());
        let secret = Credentials {
            password: "s3cret-pw".into(),
            ..c
        };
        let shown = format!("{secret:?}");
        assert!(
            !shown.contains("s3cret-pw") && shown.contains("r.io"),
            "{shown}"
        );
    }
}
