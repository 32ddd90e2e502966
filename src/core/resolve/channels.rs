//! Conda channels and pip locations: the end of the `pytorch` channel, the channels each conda
//! source needs, channel mixes that pull incompatible builds, and locations reached over plain
//! http. This module performs no I/O.

use super::codes::*;
use super::types::Ask;
use super::{err, warn};
use crate::core::compat::{Table, TorchRow};
use crate::core::diag::Diagnostic;
use crate::core::spec::{Source, Spec};

/// The error for a release the `pytorch` channel never published (it ended), asking for a
/// working alternative.
pub(super) fn discontinued(spec: &Spec, table: &Table) -> Option<(Diagnostic, Ask)> {
    if spec.source != Source::PytorchChannel {
        return None;
    }
    let channel_row = table.channel_row("pytorch");
    let last = channel_row.and_then(|c| c.last_torch.as_ref())?;
    if spec.pytorch <= *last {
        return None;
    }
    let d = err(
        CHANNEL_DISCONTINUED,
        "pytorch",
        format!("PyTorch {} is not published on the `pytorch` conda channel: its last release is {last} (the channel ended in {})", spec.pytorch, channel_row.and_then(|c| c.ended.clone()).unwrap_or_default()),
    );
    Some((d, Ask::ChannelEnded { last: last.clone() }))
}

/// The channels the spec's source needs, and mixes to avoid.
pub(super) fn check(spec: &Spec, t: &TorchRow, diags: &mut Vec<Diagnostic>) {
    match spec.source {
        Source::PytorchChannel => pytorch_channel(spec, t, diags),
        Source::CondaForge => conda_forge(spec, diags),
        Source::PytorchIndex | Source::Pypi => {}
    }
}

/// `pytorch-channel` needs `pytorch`, and `nvidia` for the `pytorch-cuda` selector.
fn pytorch_channel(spec: &Spec, t: &TorchRow, diags: &mut Vec<Diagnostic>) {
    let channels = &spec.channels;
    for needed in ["pytorch", "nvidia"] {
        if needed == "nvidia" && t.channel_selector() != "pytorch-cuda" {
            continue;
        }
        if !channels.iter().any(|c| c == needed) {
            diags.push(
                err(
                    CHANNEL_REQUIRED,
                    "channels",
                    format!("source `pytorch-channel` needs the `{needed}` channel"),
                )
                .with_hint(format!(
                    "add \"{needed}\" to channels, e.g. channels = [\"pytorch\", \"nvidia\"{}]",
                    if channels.iter().any(|c| c == "defaults") {
                        ", \"defaults\""
                    } else {
                        ""
                    }
                )),
            );
        }
    }
}

/// `conda-forge` needs its own channel and should not be mixed with `defaults` or `pytorch`.
fn conda_forge(spec: &Spec, diags: &mut Vec<Diagnostic>) {
    let channels = &spec.channels;
    let mixed: Vec<&String> = channels
        .iter()
        .filter(|c| *c == "defaults" || *c == "pytorch")
        .collect();
    if !mixed.is_empty() {
        diags.push(
            warn(
                CHANNEL_MIX,
                "channels",
                format!(
                    "conda-forge's pytorch mixed with {} can pull incompatible builds",
                    mixed
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            )
            .with_hint("use channels = [\"conda-forge\"] alone"),
        );
    }
    if !channels.iter().any(|c| c == "conda-forge") {
        diags.push(
            err(
                CHANNEL_REQUIRED,
                "channels",
                "source `conda-forge` needs the `conda-forge` channel".into(),
            )
            .with_hint("add \"conda-forge\" to channels"),
        );
    }
}

/// Every channel, pip index and find-links URL reached over plain `http://`: accepted (an
/// internal mirror may have no TLS), but anyone on the path can swap the packages, so it warns.
pub(super) fn insecure(spec: &Spec, diags: &mut Vec<Diagnostic>) {
    let conda_channels = spec
        .conda
        .iter()
        .filter_map(|c| c.channel.as_deref().map(|ch| ("conda", ch)));
    let all = spec
        .channels
        .iter()
        .map(|c| ("channels", c.as_str()))
        .chain(conda_channels)
        .chain(spec.pip_sources.urls());
    for (key, url) in all {
        if let Some(d) = insecure_source(key, url) {
            diags.push(d);
        }
    }
}

/// The `INSECURE_SOURCE` warning for one location under `key`, when it is plain http.
pub fn insecure_source(key: &str, url: &str) -> Option<Diagnostic> {
    let rest = url
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &url[7..])?;
    Some(
        warn(
            INSECURE_SOURCE,
            key,
            format!("`{url}` is reached over plain http: anyone on the network path can change the packages it serves"),
        )
        .with_hint(format!("use https://{rest} if the server offers it")),
    )
}
