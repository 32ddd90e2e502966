//! `envbuild import`: turn a conda environment.yml (hand-written, `conda env export`, or one
//! envbuild rendered) into a spec. Floating versions are refused with hints. The result is
//! re-validated as a spec before it is returned. This module performs no I/O.

use crate::core::compat::{variant_cuda, Table};
use crate::core::diag::Diagnostic;
use crate::core::lock::{EnvMetadata, ENV_METADATA_PREFIX};
use crate::core::spec::codes::{INVALID_SPEC, UNPINNED_VERSION};
use crate::core::spec::{default_channels, parse_conda_pkg, parse_pip_pkg, PkgParse, Source};
use crate::core::version::Version;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct EnvFile {
    name: Option<String>,
    #[serde(default)]
    channels: Vec<String>,
    #[serde(default)]
    dependencies: Vec<Dep>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Dep {
    Conda(String),
    Pip { pip: Vec<String> },
}

/// Options from the command line that environment.yml cannot carry.
#[derive(Debug, Default, Clone)]
pub struct ImportOptions {
    pub driver: Option<String>,
    pub gpus: Vec<String>,
}

#[derive(Default)]
struct Found {
    python: Option<String>,
    pytorch: Option<String>,
    pytorch_channel_selector: Option<String>,
    conda_cuda: Option<String>,
    torch_pip: Option<String>,
    pip_variant: Option<String>,
    torchvision: bool,
    torchaudio: bool,
    conda: Vec<String>,
    pip: Vec<String>,
}

impl Found {
    /// Note torchvision/torchaudio, whatever their version: the lock pins the release that
    /// matches torch. True when `name` was one of them.
    fn companion(&mut self, name: &str) -> bool {
        match name {
            "torchvision" => self.torchvision = true,
            "torchaudio" => self.torchaudio = true,
            _ => return false,
        }
        true
    }
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn q_list(xs: &[String]) -> String {
    format!(
        "[{}]",
        xs.iter().map(|x| q(x)).collect::<Vec<_>>().join(", ")
    )
}

/// `https://download.pytorch.org/whl/cu124` → `cu124`.
fn index_variant(url: &str) -> Option<String> {
    let rest = url.trim().trim_end_matches('/').rsplit('/').next()?;
    variant_cuda(rest).map(|_| rest.to_string())
}

/// Convert; `file` names the input in messages. On success, the spec text (TOML).
pub fn import(
    text: &str,
    file: &str,
    table: &Table,
    opts: &ImportOptions,
) -> Result<String, Vec<Diagnostic>> {
    let options = serde_saphyr::options! { with_snippet: false };
    let env: EnvFile = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let loc = e.location().map(|l| crate::core::diag::Location {
            file: file.to_string(),
            line: l.line() as usize,
            column: l.column() as usize,
        });
        vec![Diagnostic::error(
            INVALID_SPEC,
            format!(
                "{file} is not a conda environment file: {}",
                e.to_string().lines().next().unwrap_or("")
            ),
        )
        .with_location(loc)
        .with_hint(
            "expected `name`, `channels` and `dependencies` (with an optional `- pip:` list)",
        )]
    })?;
    let meta: Option<EnvMetadata> = text
        .lines()
        .find_map(|l| l.strip_prefix(ENV_METADATA_PREFIX))
        .and_then(|j| serde_json::from_str(j).ok());
    let auto_added: Vec<String> = meta
        .as_ref()
        .map(|m| m.auto_added.clone())
        .unwrap_or_default();

    let mut diags = Vec::new();
    let mut f = Found::default();
    let unpinned = |diags: &mut Vec<Diagnostic>, dep: &str, name: &str, how: &str| {
        let newest = match name {
            "pytorch" | "torch" => table
                .newest_torch()
                .map(|t| format!("; the newest PyTorch in the table is {}", t.version)),
            _ => None,
        }
        .unwrap_or_default();
        diags.push(
            Diagnostic::error(UNPINNED_VERSION, format!("`{dep}` in {file} is not pinned"))
                .with_hint(format!("pin it, e.g. `{name}{how}<version>`{newest}; `conda env export` writes exact versions")),
        );
    };
    for dep in &env.dependencies {
        match dep {
            Dep::Conda(s) => {
                let s = s.trim();
                if s == "pip" {
                    continue;
                }
                match parse_conda_pkg(s) {
                    PkgParse::Ok(p) => {
                        let build = s
                            .rsplit_once('=')
                            .map(|(_, b)| b)
                            .filter(|_| s.matches('=').count() >= 2 && !s.contains("=="));
                        let build = build.or_else(|| {
                            s.split("==")
                                .nth(1)
                                .and_then(|r| r.split_once('='))
                                .map(|(_, b)| b)
                        });
                        match p.name.as_str() {
                            "python" => f.python = Some(p.version.clone()),
                            "pytorch" => {
                                f.pytorch = Some(p.version.clone());
                                // conda-forge build strings name the CUDA: cuda129_mkl_...
                                if let Some(b) = build.and_then(|b| b.strip_prefix("cuda")) {
                                    let digits: String =
                                        b.chars().take_while(|c| c.is_ascii_digit()).collect();
                                    if let Some(v) = variant_cuda(&format!("cu{digits}")) {
                                        f.conda_cuda.get_or_insert(v.to_string());
                                    }
                                }
                            }
                            "pytorch-cuda" | "cudatoolkit" => {
                                f.pytorch_channel_selector = Some(
                                    Version::parse(&p.version)
                                        .map(|v| v.major_minor())
                                        .unwrap_or(p.version.clone()),
                                )
                            }
                            "cuda-version" => f.conda_cuda = Some(p.version.clone()),
                            "torchvision" => f.torchvision = true,
                            "torchaudio" => f.torchaudio = true,
                            "pytorch-gpu" | "pytorch-mutex" | "cpuonly" => {}
                            n if auto_added.iter().any(|a| a == n) => {}
                            _ => f.conda.push(match &p.channel {
                                Some(c) => format!("{c}::{}={}", p.name, p.version),
                                None => format!("{}={}", p.name, p.version),
                            }),
                        }
                    }
                    PkgParse::Unpinned { name, .. } => {
                        if name == "pytorch-gpu" || name == "cpuonly" || f.companion(&name) {
                            continue;
                        }
                        unpinned(&mut diags, s, &name, "=");
                    }
                    PkgParse::Invalid(m) => {
                        diags.push(Diagnostic::error(INVALID_SPEC, format!("{file}: {m}")))
                    }
                }
            }
            Dep::Pip { pip } => {
                for line in pip.iter().map(|l| l.trim()) {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let opt = [
                        "--index-url",
                        "--extra-index-url",
                        "-i",
                        "-f",
                        "--find-links",
                    ]
                    .iter()
                    .find_map(|o| {
                        line.strip_prefix(o)
                            .map(|r| (o, r.trim_start_matches([' ', '=']).to_string()))
                    });
                    if let Some((_, url)) = opt {
                        if let Some(v) = index_variant(&url) {
                            f.pip_variant = Some(v);
                        }
                        continue;
                    }
                    match parse_pip_pkg(line) {
                        PkgParse::Ok(p) => match p.name.as_str() {
                            "torch" => {
                                let (ver, local) = match p.version.split_once('+') {
                                    Some((v, l)) => (v.to_string(), Some(l.to_string())),
                                    None => (p.version.clone(), None),
                                };
                                f.torch_pip = Some(ver);
                                if let Some(l) = local.filter(|l| variant_cuda(l).is_some()) {
                                    f.pip_variant = Some(l);
                                }
                            }
                            "torchvision" => f.torchvision = true,
                            "torchaudio" => f.torchaudio = true,
                            n if auto_added.iter().any(|a| a == n) => {}
                            _ => f.pip.push(p.requirement()),
                        },
                        PkgParse::Unpinned { name, .. } => {
                            if !f.companion(&name) {
                                unpinned(&mut diags, line, &name, "==");
                            }
                        }
                        PkgParse::Invalid(m) => {
                            diags.push(Diagnostic::error(INVALID_SPEC, format!("{file}: pip: {m}")))
                        }
                    }
                }
            }
        }
    }

    // Source, from what the file pins.
    let (source, pytorch) = match (&f.pytorch, &f.torch_pip) {
        (Some(v), _) if f.pytorch_channel_selector.is_some() => {
            (Some(Source::PytorchChannel), Some(v.clone()))
        }
        (Some(v), _) if f.conda_cuda.is_some() => (Some(Source::CondaForge), Some(v.clone())),
        (Some(v), _) => {
            diags.push(
                Diagnostic::error(INVALID_SPEC, format!("{file} pins pytorch {v} but no CUDA selector (pytorch-cuda, cudatoolkit or cuda-version)"))
                    .with_hint("add `pytorch-cuda=X.Y` (pytorch channel) or `cuda-version=X.Y` (conda-forge); envbuild builds GPU environments"),
            );
            (None, None)
        }
        (None, Some(v)) if f.pip_variant.is_some() => (Some(Source::PytorchIndex), Some(v.clone())),
        (None, Some(v)) => (Some(Source::Pypi), Some(v.clone())),
        (None, None) => {
            if diags.is_empty() {
                diags.push(Diagnostic::error(INVALID_SPEC, format!("{file} does not install PyTorch")).with_hint("add `pytorch=<version>` with `pytorch-cuda=<X.Y>`, or `torch==<version>` under `pip:`"));
            }
            (None, None)
        }
    };
    if f.python.is_none() && diags.is_empty() {
        diags.push(
            Diagnostic::error(INVALID_SPEC, format!("{file} does not pin python"))
                .with_hint("add e.g. `python=3.11`"),
        );
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let (Some(source), Some(pytorch), Some(python)) = (source, pytorch, f.python.clone()) else {
        return Err(vec![Diagnostic::error(
            INVALID_SPEC,
            format!("{file}: incomplete environment"),
        )]);
    };

    let name = env.name.clone().unwrap_or_else(|| "imported-env".into());
    let mut out = format!("# Imported from {file} by `envbuild import`.\nname = {}\npython = {}\npytorch = {}\nsource = {}\n", q(&name), q(&python), q(&pytorch), q(source.as_str()));
    match source {
        Source::PytorchChannel => out.push_str(&format!(
            "pytorch-cuda = {}\n",
            q(f.pytorch_channel_selector.as_deref().unwrap_or(""))
        )),
        Source::CondaForge => out.push_str(&format!(
            "cuda = {}\n",
            q(f.conda_cuda.as_deref().unwrap_or(""))
        )),
        Source::PytorchIndex => {
            let cuda = f
                .pip_variant
                .as_deref()
                .and_then(variant_cuda)
                .map(|v| v.to_string())
                .unwrap_or_default();
            out.push_str(&format!("cuda = {}\n", q(&cuda)));
        }
        Source::Pypi => {}
    }
    let channels: Vec<String> = env
        .channels
        .iter()
        .filter(|c| *c != "nodefaults")
        .cloned()
        .collect();
    let pt = Version::parse(&pytorch);
    let sel = f
        .pytorch_channel_selector
        .as_deref()
        .and_then(Version::parse);
    let defaults = pt
        .as_ref()
        .map(|p| default_channels(source, p, sel.as_ref()));
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

    let meta = meta.unwrap_or_else(|| EnvMetadata {
        platform: "linux-64".into(),
        ..Default::default()
    });
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
    if !target.is_empty() {
        out.push_str(&format!("\n[target]\n{target}"));
    }
    let i = &meta.image;
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
    if !image.is_empty() {
        out.push_str(&format!("\n[image]\n{image}"));
    }
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
    if !run.is_empty() {
        out.push_str(&format!("\n[run]\n{run}"));
    }

    // Whatever came in must make a valid spec (this also refuses unsafe values).
    crate::core::spec::parse(
        &out,
        crate::core::spec::Format::Toml,
        "<imported spec>",
        table,
    )
    .map_err(|e| e.diagnostics)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table::embedded().unwrap()
    }

    #[test]
    fn conda_env_export_with_pytorch_channel_becomes_a_spec() {
        let yml = "name: torch-gpu-env\nchannels:\n  - pytorch\n  - nvidia\n  - defaults\ndependencies:\n  - python=3.10.14=h955ad1f_1\n  - pytorch=2.5.1=py3.10_cuda11.8_cudnn9.1.0_0\n  - pytorch-cuda=11.8=h7e8668a_6\n  - torchvision=0.20.1=py310_cu118\n  - jupyterlab=4.2.5=py310h06a4308_0\n  - pip:\n    - some-pkg==1.0.0\n";
        let out = import(yml, "environment.yml", &table(), &ImportOptions::default()).unwrap();
        assert!(out.contains("pytorch = \"2.5.1\""), "{out}");
        assert!(out.contains("source = \"pytorch-channel\""), "{out}");
        assert!(out.contains("pytorch-cuda = \"11.8\""), "{out}");
        assert!(out.contains("python = \"3.10.14\""), "{out}");
        assert!(out.contains("torchaudio = false"), "{out}");
        assert!(out.contains("jupyterlab=4.2.5"), "{out}");
        assert!(out.contains("some-pkg==1.0.0"), "{out}");
        assert!(
            out.contains("channels = [\"pytorch\", \"nvidia\", \"defaults\"]"),
            "{out}"
        );
    }

    #[test]
    fn pip_index_line_selects_the_wheel_variant() {
        let yml = "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n    - --extra-index-url https://download.pytorch.org/whl/cu124\n    - torch==2.5.1\n    - torchvision==0.20.1\n";
        let out = import(
            yml,
            "e.yml",
            &table(),
            &ImportOptions {
                driver: Some("550.54.15".into()),
                gpus: vec!["A100".into()],
            },
        )
        .unwrap();
        assert!(
            out.contains("source = \"pytorch-index\"") && out.contains("cuda = \"12.4\""),
            "{out}"
        );
        assert!(
            out.contains("driver = \"550.54.15\"") && out.contains("gpus = [\"A100\"]"),
            "{out}"
        );
    }

    #[test]
    fn conda_forge_build_string_names_the_cuda() {
        let yml = "name: cf\nchannels: [conda-forge]\ndependencies:\n  - python=3.12\n  - pytorch=2.10.0=cuda129_mkl_py312_h1234_300\n";
        let out = import(yml, "e.yml", &table(), &ImportOptions::default()).unwrap();
        assert!(
            out.contains("source = \"conda-forge\"") && out.contains("cuda = \"12.9\""),
            "{out}"
        );
        assert!(
            !out.contains("channels ="),
            "default channels are omitted: {out}"
        );
    }

    #[test]
    fn floating_versions_are_refused_with_hints_all_at_once() {
        let yml = "name: x\ndependencies:\n  - python>=3.9\n  - pytorch\n  - numpy\n  - pip:\n    - requests>=2\n";
        let errs = import(yml, "e.yml", &table(), &ImportOptions::default()).unwrap_err();
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(errs.iter().all(|d| d.code == UNPINNED_VERSION));
        assert!(errs
            .iter()
            .any(|d| d.hint.as_deref().unwrap_or("").contains("newest PyTorch")));
    }

    #[test]
    fn garbage_and_cpu_only_files_are_clear_errors() {
        assert!(import("{{{{", "e.yml", &table(), &ImportOptions::default()).is_err());
        let cpu = "name: x\ndependencies:\n  - python=3.11\n  - pytorch=2.5.1\n  - cpuonly\n";
        let e = import(cpu, "e.yml", &table(), &ImportOptions::default()).unwrap_err();
        assert!(e[0].message.contains("no CUDA selector"), "{e:?}");
    }

    #[test]
    fn unsafe_values_in_the_file_are_refused() {
        let yml = "name: x\ndependencies:\n  - python=3.11\n  - pip:\n    - torch==2.5.1\n    - \"evil==1.0; rm -rf /\"\n";
        assert!(import(yml, "e.yml", &table(), &ImportOptions::default()).is_err());
    }
}
