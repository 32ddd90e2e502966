//! Where torch comes from: the `channels` list (names or URLs), and the `source`, given or
//! inferred from the CUDA keys, checked against the keys that apply to it.
//! This module performs no I/O.

use super::codes::INVALID_SPEC;
use super::raw::RawSpec;
use super::safety::{is_name, MAX_VALUE_LEN};
use super::validate::Ctx;
use super::Source;

const CHANNEL_NAME_HINT: &str =
    "a channel is a name such as `conda-forge`, a label channel such as `nvidia/label/cuda-12.4.1`, or an https:// URL without spaces or quotes";

/// A conda channel: a name, a label channel (`nvidia/label/cuda-12.4.1`: names joined by `/`),
/// or an http(s) URL of plain characters.
pub(super) fn is_channel(c: &str) -> bool {
    if let Some(rest) = c
        .strip_prefix("https://")
        .or_else(|| c.strip_prefix("http://"))
    {
        return !rest.is_empty()
            && c.len() <= MAX_VALUE_LEN
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
        if !is_channel(c) {
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

/// `pytorch-cuda` belongs to the pytorch channel, `cuda` to the other sources but PyPI.
fn check_source_keys(cx: &mut Ctx, raw: &RawSpec, src: Source) {
    match src {
        Source::PytorchChannel if raw.pytorch_cuda.is_none() => cx.err(
            INVALID_SPEC,
            "source",
            "source `pytorch-channel` needs `pytorch-cuda` (the channel's CUDA selector)".into(),
            Some("add e.g. pytorch-cuda = \"12.4\"".into()),
        ),
        Source::PytorchChannel if raw.cuda.is_some() => cx.err(
            INVALID_SPEC,
            "cuda",
            "`cuda` does not apply to source `pytorch-channel`".into(),
            Some("the pytorch channel selects CUDA with `pytorch-cuda`; remove `cuda`".into()),
        ),
        Source::CondaForge | Source::PytorchIndex if raw.cuda.is_none() => cx.err(
            INVALID_SPEC,
            "source",
            format!("source `{src}` needs `cuda`"),
            Some(if src == Source::CondaForge {
                "add e.g. cuda = \"12.9\" (conda-forge's cuda-version)".into()
            } else {
                "add e.g. cuda = \"12.4\" (the cu124 wheel index)".into()
            }),
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
