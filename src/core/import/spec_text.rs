//! Writing the imported spec as TOML: a comment block with the notes, the torch keys from what
//! the file pins, then `[target]`, `[image]` and `[run]` from the command line and from the
//! metadata envbuild recorded, each key only where it differs from the default. Each line of
//! the spec remembers the input line it came from, so that the spec's own checks point there.
//! This module performs no I/O.

use super::found::{Extra, Found};
use super::ImportOptions;
use crate::core::compat::variant_cuda;
use crate::core::diag::Diagnostic;
use crate::core::lock::{EnvMetadata, MetaImage};
use crate::core::spec::{default_channels, Source};
use crate::core::version::Version;

/// The input lines of the top-level keys, where known.
#[derive(Default)]
pub(super) struct Lines {
    pub(super) name: Option<usize>,
    pub(super) channels: Option<usize>,
}

/// What the environment file pins, ready to be written.
pub(super) struct Pins<'a> {
    pub(super) file: &'a str,
    pub(super) name: String,
    pub(super) python: String,
    pub(super) pytorch: String,
    pub(super) source: Source,
    /// The file's channels, as written.
    pub(super) channels: &'a [String],
    pub(super) found: &'a Found,
    pub(super) notes: &'a [Diagnostic],
    pub(super) lines: Lines,
}

/// The spec text being written, with the input line of each of its lines.
struct Out {
    text: String,
    origins: Vec<Option<usize>>,
}

impl Out {
    /// Append `s` (whole lines), which came from input line `from`.
    fn push(&mut self, s: &str, from: Option<usize>) {
        self.text.push_str(s);
        self.origins
            .extend(std::iter::repeat_n(from, s.matches('\n').count()));
    }
}

/// The whole spec text, and the input line (if any) of each of its lines.
pub(super) fn spec_text(
    i: &Pins,
    meta: &EnvMetadata,
    opts: &ImportOptions,
) -> (String, Vec<Option<usize>>) {
    let mut out = Out {
        text: String::new(),
        origins: Vec::new(),
    };
    top_keys(&mut out, i);
    let mut rest = String::new();
    section(&mut rest, "target", &target_keys(meta, opts));
    section(&mut rest, "image", &image_keys(&meta.image));
    section(&mut rest, "run", &run_keys(&meta.image));
    out.push(&rest, None);
    (out.text, out.origins)
}

/// The notes as comment lines: what was changed or left out, by input line.
fn notes_block(i: &Pins) -> String {
    if i.notes.is_empty() {
        return String::new();
    }
    let mut s =
        "#\n# Changed from the input (`envbuild import` prints these notes too):\n".to_string();
    for n in i.notes {
        let at = n
            .location
            .as_ref()
            .map(|l| format!("line {}: ", l.line))
            .unwrap_or_default();
        s.push_str(&format!(
            "#   {at}{}\n",
            crate::core::diag::printable(&crate::core::url::redact_text(&n.message))
        ));
    }
    s
}

/// A TOML array, one entry a line, each line with its input line.
fn list(out: &mut Out, key: &str, xs: &[Extra]) {
    if xs.is_empty() {
        return;
    }
    out.push(&format!("{key} = [\n"), None);
    for x in xs {
        out.push(&format!("    {},\n", q(&x.entry)), x.line);
    }
    out.push("]\n", None);
}

/// A TOML string.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn q_list(xs: &[String]) -> String {
    format!(
        "[{}]",
        xs.iter().map(|x| q(x)).collect::<Vec<_>>().join(", ")
    )
}

/// Appends `[name]` and its keys, unless it has none.
fn section(out: &mut String, name: &str, keys: &str) {
    if !keys.is_empty() {
        out.push_str(&format!("\n[{name}]\n{keys}"));
    }
}

fn top_keys(out: &mut Out, i: &Pins) {
    let f = i.found;
    out.push(
        &format!(
            "# Imported from {} by `envbuild import`.\n{}",
            crate::core::diag::printable(i.file),
            notes_block(i)
        ),
        None,
    );
    out.push(&format!("name = {}\n", q(&i.name)), i.lines.name);
    out.push(&format!("python = {}\n", q(&i.python)), f.python_line);
    let torch_line = f
        .pytorch
        .as_ref()
        .or(f.torch_pip.as_ref())
        .and_then(|p| p.1);
    out.push(&format!("pytorch = {}\n", q(&i.pytorch)), torch_line);
    out.push(&format!("source = {}\n", q(i.source.as_str())), torch_line);
    out.push(&cuda_key(i.source, f), torch_line);
    let channels: Vec<String> = i
        .channels
        .iter()
        .filter(|c| *c != "nodefaults")
        .map(|c| crate::core::url::redact(c))
        .collect();
    let selector = f
        .pytorch_channel_selector
        .as_deref()
        .and_then(Version::parse);
    let defaults =
        Version::parse(&i.pytorch).map(|p| default_channels(i.source, &p, selector.as_ref()));
    if !channels.is_empty() && Some(&channels) != defaults.as_ref() {
        out.push(
            &format!("channels = {}\n", q_list(&channels)),
            i.lines.channels,
        );
    }
    for (key, c) in [
        ("torchvision", &f.torchvision),
        ("torchaudio", &f.torchaudio),
    ] {
        match (&c.range, c.listed) {
            (Some((r, line)), _) => out.push(&format!("{key} = {}\n", q(r)), *line),
            (None, false) => out.push(&format!("{key} = false\n"), None),
            (None, true) => {}
        }
    }
    list(out, "conda", &f.conda);
    list(out, "pip", &f.pip);
    if let Some((u, line)) = &f.index_url {
        out.push(&format!("pip-index-url = {}\n", q(u)), *line);
    }
    locations(out, "pip-extra-index-urls", &f.extra_index_urls);
    locations(out, "pip-find-links", &f.find_links);
}

/// A TOML array of pip locations, one a line, each with its input line; a location given
/// twice is written once.
fn locations(out: &mut Out, key: &str, xs: &[(String, Option<usize>)]) {
    if xs.is_empty() {
        return;
    }
    out.push(&format!("{key} = [\n"), None);
    let mut seen = Vec::new();
    for (u, line) in xs {
        if !seen.contains(&u) {
            seen.push(u);
            out.push(&format!("    {},\n", q(u)), *line);
        }
    }
    out.push("]\n", None);
}

/// The CUDA key of the source: `pytorch-cuda` for the pytorch channel, `cuda` for conda-forge
/// (`cuda-version` when the file names it so) and the wheel index, none for PyPI.
fn cuda_key(source: Source, f: &Found) -> String {
    match source {
        Source::PytorchChannel => format!(
            "pytorch-cuda = {}\n",
            q(f.pytorch_channel_selector.as_deref().unwrap_or(""))
        ),
        // The file's own key: conda-forge's `cuda-version`, as written.
        Source::CondaForge => format!(
            "{} = {}\n",
            if f.cuda_version_named {
                "cuda-version"
            } else {
                "cuda"
            },
            q(f.conda_cuda.as_deref().unwrap_or(""))
        ),
        Source::PytorchIndex => {
            let cuda = f
                .pip_variant
                .as_deref()
                .and_then(variant_cuda)
                .map(|v| v.to_string())
                .unwrap_or_default();
            format!("cuda = {}\n", q(&cuda))
        }
        Source::Pypi => String::new(),
    }
}

/// The command line's driver and GPUs win over the recorded ones.
fn target_keys(meta: &EnvMetadata, opts: &ImportOptions) -> String {
    let driver = opts.driver.clone().or(meta.driver.clone());
    let gpus = if opts.gpus.is_empty() {
        meta.gpus.clone()
    } else {
        opts.gpus.clone()
    };
    let mut target = String::new();
    if let Some(d) = driver {
        target.push_str(&format!("driver = {}\n", q(&d)));
    }
    if !gpus.is_empty() {
        target.push_str(&format!("gpus = {}\n", q_list(&gpus)));
    }
    if meta.platform != "linux-64" {
        target.push_str(&format!("platform = {}\n", q(&meta.platform)));
    }
    if let Some(g) = &meta.glibc {
        target.push_str(&format!("glibc = {}\n", q(g)));
    }
    if meta.forward_compat {
        target.push_str("forward-compat = true\n");
    }
    target
}

fn image_keys(i: &MetaImage) -> String {
    let mut image = String::new();
    if let Some(b) = &i.base {
        image.push_str(&format!("base = {}\n", q(b)));
    }
    if !i.base_provides.is_empty() {
        image.push_str(&format!("base-provides = {}\n", q_list(&i.base_provides)));
    }
    if !i.variants.is_empty() && i.variants != ["runtime", "dev"] {
        image.push_str(&format!("variants = {}\n", q_list(&i.variants)));
    }
    if let Some(w) = &i.wheels {
        image.push_str(&format!("wheels = {}\n", q(w)));
    }
    if i.ssh {
        image.push_str("ssh = true\n");
    }
    if let Some(j) = &i.jupyterlab {
        image.push_str(&format!("jupyterlab = {}\n", q(j)));
    }
    image
}

fn run_keys(i: &MetaImage) -> String {
    let mut run = String::new();
    if !i.shm_size.is_empty() && i.shm_size != "16g" {
        run.push_str(&format!("shm-size = {}\n", q(&i.shm_size)));
    }
    if i.port != 0 && i.port != 8888 {
        run.push_str(&format!("port = {}\n", i.port));
    }
    if let Some(d) = &i.datasets {
        run.push_str(&format!("datasets = {}\n", q(d)));
    }
    if let Some(c) = &i.checkpoints {
        run.push_str(&format!("checkpoints = {}\n", q(c)));
    }
    run
}
