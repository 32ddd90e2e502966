//! Where packages come from: the `channels` list (names or URLs), the `source`, given or
//! inferred from the CUDA keys and checked against the keys that apply to it, and pip's
//! indexes and find-links locations.
//! This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::context::Ctx;
use super::raw::RawSpec;
use super::safety::is_name;
use super::{PipSources, Source};
use crate::core::rules::{is_safe_path, MAX_VALUE_LEN};

const CHANNEL_NAME_HINT: &str =
    "a channel is a name such as `conda-forge`, a label channel such as `nvidia/label/cuda-12.4.1`, or an https:// URL without spaces, quotes or `.`/`..` segments";

/// A conda channel: a name, a label channel (`nvidia/label/cuda-12.4.1`: names joined by `/`),
/// or an http(s) URL of plain characters.
pub(super) fn is_channel(c: &str) -> bool {
    if let Some(rest) = c
        .strip_prefix("https://")
        .or_else(|| c.strip_prefix("http://"))
    {
        return !rest.is_empty()
            && c.len() <= MAX_VALUE_LEN
            && crate::core::url::path_trick(c).is_none()
            && rest.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
            });
    }
    c.len() <= MAX_VALUE_LEN && c.split('/').count() <= 4 && c.split('/').all(is_name)
}

/// `channels`, as written and in priority order; `None` when the key is absent (the source's
/// defaults apply).
pub(super) fn channels(cx: &mut Ctx, raw: &RawSpec) -> Option<Vec<String>> {
    let list = raw.channels.as_ref()?;
    let mut out = Vec::new();
    for c in list {
        if !cx.safe("channels", c) {
            continue;
        }
        if let Some((why, hint)) = crate::core::url::secret_refusal(c) {
            cx.err(INVALID_SPEC, "channels", why, Some(hint.into()));
        } else if !is_channel(c) {
            cx.err(
                INVALID_SPEC,
                "channels",
                format!("channel `{c}` is not a valid channel"),
                Some(CHANNEL_NAME_HINT.into()),
            );
        } else if out.contains(c) {
            cx.err(
                INVALID_SPEC,
                "channels",
                format!("channel `{c}` is listed twice"),
                Some("list each channel once, in priority order".into()),
            );
        } else {
            out.push(c.clone());
        }
    }
    if list.is_empty() {
        cx.err(
            INVALID_SPEC,
            "channels",
            "`channels` is empty".into(),
            Some("remove the key to use the default channels, or list at least one".into()),
        );
    }
    Some(out)
}

/// `source`: given, or inferred (pytorch-cuda → pytorch channel; conda-forge alone with cuda →
/// conda-forge; cuda → PyTorch wheel index; nothing → plain PyPI). Then the CUDA keys must be
/// the ones that source uses.
pub(super) fn source(cx: &mut Ctx, raw: &RawSpec, channels: Option<&[String]>) -> Option<Source> {
    let source = match raw.source.as_deref() {
        Some(s) => match Source::parse(s) {
            Some(src) => Some(src),
            None => {
                if cx.safe("source", s) {
                    cx.err(
                        INVALID_SPEC,
                        "source",
                        format!("unknown source `{s}`"),
                        Some("use one of pytorch-channel, conda-forge, pytorch-index, pypi".into()),
                    );
                }
                None
            }
        },
        None => Some(infer_source(raw, channels)),
    };
    if let Some(src) = source {
        check_source_keys(cx, raw, src);
    }
    source
}

fn infer_source(raw: &RawSpec, channels: Option<&[String]>) -> Source {
    if raw.pytorch_cuda.is_some() {
        Source::PytorchChannel
    } else if raw.cuda.is_some() && channels == Some(&["conda-forge".to_string()][..]) {
        Source::CondaForge
    } else if raw.cuda.is_some() {
        Source::PytorchIndex
    } else {
        Source::Pypi
    }
}

/// `pytorch-cuda` belongs to the pytorch channel, `cuda` to the other sources but PyPI. A
/// source with several CUDA builds and no selector takes any: the resolver chooses the build for
/// the target's driver (`core::resolve::choose`).
fn check_source_keys(cx: &mut Ctx, raw: &RawSpec, src: Source) {
    match src {
        Source::PytorchChannel if raw.cuda.is_some() => cx.err(
            INVALID_SPEC,
            "cuda",
            "`cuda` does not apply to source `pytorch-channel`".into(),
            Some("the pytorch channel selects CUDA with `pytorch-cuda`; remove `cuda`".into()),
        ),
        Source::Pypi if raw.cuda.is_some() => cx.err(
            INVALID_SPEC,
            "cuda",
            "`cuda` does not apply to source `pypi` (the PyPI wheel's CUDA is fixed per release)"
                .into(),
            Some("use source = \"pytorch-index\" to pick the CUDA, or remove `cuda`".into()),
        ),
        s if s != Source::PytorchChannel && raw.pytorch_cuda.is_some() => cx.err(
            INVALID_SPEC,
            "pytorch-cuda",
            format!("`pytorch-cuda` only applies to source `pytorch-channel`, not `{s}`"),
            Some("use `cuda` for the other sources".into()),
        ),
        _ => {}
    }
}

/// `pip-index-url`, `pip-extra-index-urls`, `pip-find-links`: pip's locations besides PyPI.
pub(super) fn pip_sources(cx: &mut Ctx, raw: &RawSpec) -> PipSources {
    let index_url = raw
        .pip_index_url
        .as_deref()
        .and_then(|u| pip_location(cx, "pip-index-url", u, false));
    let mut lists = [
        ("pip-extra-index-urls", &raw.pip_extra_index_urls, false),
        ("pip-find-links", &raw.pip_find_links, true),
    ]
    .map(|(key, list, dirs)| {
        let mut out: Vec<String> = Vec::new();
        for u in list {
            let Some(u) = pip_location(cx, key, u, dirs) else {
                continue;
            };
            if out.contains(&u) || index_url.as_ref() == Some(&u) {
                cx.err(
                    INVALID_SPEC,
                    key,
                    format!("`{u}` is listed twice"),
                    Some("list each pip location once".into()),
                );
            } else {
                out.push(u);
            }
        }
        out
    });
    PipSources {
        index_url,
        extra_index_urls: std::mem::take(&mut lists[0]),
        find_links: std::mem::take(&mut lists[1]),
    }
}

/// One pip location, checked by [`pip_location_rule`]; reported under `key`.
fn pip_location(cx: &mut Ctx, key: &str, value: &str, dirs: bool) -> Option<String> {
    if !cx.safe(key, value) {
        return None;
    }
    match pip_location_rule(value, dirs) {
        Ok(v) => Some(v),
        Err((why, hint)) => {
            cx.err(INVALID_SPEC, key, why, Some(hint.to_string()));
            None
        }
    }
}

/// One pip location: an http(s) URL of plain characters and no credentials, or (`dirs`, for
/// find-links) a directory inside the project, written relative to the spec; the normalized
/// value, or why not with a hint. PyTorch's own index belongs to the `source` keys, which pick
/// its CUDA variant. The spec and the renderer's lock check both use this rule.
pub fn pip_location_rule(value: &str, dirs: bool) -> Result<String, (String, &'static str)> {
    let lower = value.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        if lower.contains("://") || lower.starts_with("file:") {
            return Err((
                format!(
                    "`{value}`: a pip location must be an https:// (or http://) URL{}",
                    if dirs {
                        " or a directory of the project"
                    } else {
                        ""
                    }
                ),
                if dirs {
                    "a file:// URL names the build machine's disk, which the image build cannot see; write the directory relative to the spec (e.g. \"wheels/pyg\"): it is copied into the build"
                } else {
                    "e.g. \"https://pypi.nvidia.com\""
                },
            ));
        }
        if !dirs {
            return Err((
                format!("`{value}` is not an https:// URL"),
                "e.g. \"https://pypi.nvidia.com\"",
            ));
        }
        let dir = value.trim_end_matches('/');
        let dir = dir.strip_prefix("./").unwrap_or(dir);
        if is_safe_path(dir, false) && dir.split('/').all(|s| !s.is_empty() && s != ".") {
            return Ok(dir.to_string());
        }
        return Err((
            format!("find-links directory `{value}` must be a directory inside the project"),
            "write it relative to the spec, e.g. \"wheels/pyg\" (no `..`, no absolute path, not the project itself)",
        ));
    };
    let host = rest.split(['/', ':']).next().unwrap_or("");
    if let Some(refused) = crate::core::url::secret_refusal(value) {
        return Err(refused);
    }
    if value.contains('@') {
        return Err((
            format!(
                "`{}` has credentials in its URL (`user@host`)",
                crate::core::url::redact(value)
            ),
            "the spec, the lock and the image's files would carry them; give them to pip at build time instead (a netrc file or keyring), and write the URL without them",
        ));
    }
    if host.is_empty()
        || value.len() > MAX_VALUE_LEN
        || !value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':' | b'+' | b'=')
        })
    {
        return Err((
            format!("`{value}` is not a plain http(s) URL"),
            "use letters, digits and . _ - / : + = only (no query strings, fragments or spaces)",
        ));
    }
    // The lock's entries are checked against their index's URL: one with a path trick would
    // be taken here and every entry refused later, as if edited by hand.
    if let Some(trick) = crate::core::url::path_trick(value) {
        return Err((
            format!("`{value}` has {trick}"),
            "write the index's URL as its server names it, without `.` or `..` segments",
        ));
    }
    if host == "download.pytorch.org" {
        return Err((
            format!("`{value}` is PyTorch's own wheel location, which the `source` keys manage"),
            "remove it and set source = \"pytorch-index\" with cuda = \"X.Y\": the lock writes that variant's index",
        ));
    }
    Ok(value.to_string())
}
