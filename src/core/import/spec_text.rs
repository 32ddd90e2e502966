//! Writing the imported spec as TOML: the torch keys from what the file pins, then `[target]`,
//! `[image]` and `[run]` from the command line and from the metadata envbuild recorded, each
//! key only where it differs from the default. This module performs no I/O.

use super::{Found, ImportOptions};
use crate::core::compat::variant_cuda;
use crate::core::lock::{EnvMetadata, MetaImage};
use crate::core::spec::{default_channels, Source};
use crate::core::version::Version;

/// What the environment file pins, ready to be written.
pub(super) struct Imported<'a> {
    pub(super) file: &'a str,
    pub(super) name: String,
    pub(super) python: String,
    pub(super) pytorch: String,
    pub(super) source: Source,
    /// The file's channels, as written.
    pub(super) channels: &'a [String],
    pub(super) found: &'a Found,
}

/// The whole spec text.
pub(super) fn spec_text(i: &Imported, meta: &EnvMetadata, opts: &ImportOptions) -> String {
    let mut out = top_keys(i);
    section(&mut out, "target", &target_keys(meta, opts));
    section(&mut out, "image", &image_keys(&meta.image));
    section(&mut out, "run", &run_keys(&meta.image));
    out
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

fn top_keys(i: &Imported) -> String {
    let f = i.found;
    let mut out = format!(
        "# Imported from {} by `envbuild import`.\nname = {}\npython = {}\npytorch = {}\nsource = {}\n",
        crate::core::diag::printable(i.file),
        q(&i.name),
        q(&i.python),
        q(&i.pytorch),
        q(i.source.as_str())
    );
    out.push_str(&cuda_key(i.source, f));
    let channels: Vec<String> = i
        .channels
        .iter()
        .filter(|c| *c != "nodefaults")
        .cloned()
        .collect();
    let selector = f
        .pytorch_channel_selector
        .as_deref()
        .and_then(Version::parse);
    let defaults =
        Version::parse(&i.pytorch).map(|p| default_channels(i.source, &p, selector.as_ref()));
    if !channels.is_empty() && Some(&channels) != defaults.as_ref() {
        out.push_str(&format!("channels = {}\n", q_list(&channels)));
    }
    if !f.torchvision {
        out.push_str("torchvision = false\n");
    }
    if !f.torchaudio {
        out.push_str("torchaudio = false\n");
    }
    if !f.conda.is_empty() {
        out.push_str(&format!("conda = {}\n", q_list(&f.conda)));
    }
    if !f.pip.is_empty() {
        out.push_str(&format!("pip = {}\n", q_list(&f.pip)));
    }
    out
}

/// The CUDA key of the source: `pytorch-cuda` for the pytorch channel, `cuda` for conda-forge
/// and the wheel index, none for PyPI.
fn cuda_key(source: Source, f: &Found) -> String {
    match source {
        Source::PytorchChannel => format!(
            "pytorch-cuda = {}\n",
            q(f.pytorch_channel_selector.as_deref().unwrap_or(""))
        ),
        Source::CondaForge => format!("cuda = {}\n", q(f.conda_cuda.as_deref().unwrap_or(""))),
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
