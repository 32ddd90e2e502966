//! `envbuild import`: turn a conda environment.yml (hand-written, `conda env export`, or one
//! envbuild rendered) into a spec. Floating versions are refused with hints. The result is
//! re-validated as a spec before it is returned. This module performs no I/O.
//!
//! The pipeline: parse the YAML document (`env_file`), classify its conda (`conda`) and
//! pip (`pip`) dependencies, decide the source, write the spec text (`spec_text`), and
//! parse that text as a spec.

mod conda;
mod env_file;
mod pip;
mod spec_text;

use crate::core::compat::Table;
use crate::core::diag::Diagnostic;
use crate::core::lock::EnvMetadata;
use crate::core::spec::codes::{INVALID_SPEC, UNPINNED_VERSION};
use crate::core::spec::Source;
use env_file::Dep;
use spec_text::Imported;

/// Options from the command line that environment.yml cannot carry.
#[derive(Debug, Default, Clone)]
pub struct ImportOptions {
    pub driver: Option<String>,
    pub gpus: Vec<String>,
}

/// What the dependencies pin, as far as the spec cares.
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

/// The walk over the dependencies: what was found and every problem, in file order.
struct Scan<'a> {
    file: &'a str,
    table: &'a Table,
    /// Packages envbuild added on its own when it rendered the file; they are not carried
    /// over, so that the spec stays as the user wrote it.
    auto_added: &'a [String],
    found: Found,
    diags: Vec<Diagnostic>,
}

impl Scan<'_> {
    /// `dep` (package `name`) floats; `how` is the pin operator to suggest.
    fn unpinned(&mut self, dep: &str, name: &str, how: &str) {
        let newest = match name {
            "pytorch" | "torch" => self
                .table
                .newest_torch()
                .map(|t| format!("; the newest PyTorch in the table is {}", t.version)),
            _ => None,
        }
        .unwrap_or_default();
        self.diags.push(
            Diagnostic::error(
                UNPINNED_VERSION,
                format!("`{dep}` in {} is not pinned", self.file),
            )
            .with_hint(format!(
                "pin it, e.g. `{name}{how}<version>`{newest}; `conda env export` writes exact versions"
            )),
        );
    }

    fn invalid(&mut self, message: String) {
        let file = self.file;
        self.diags.push(Diagnostic::error(
            INVALID_SPEC,
            format!("{file}: {message}"),
        ));
    }

    /// The source and torch version, from what the file pins: a conda pytorch needs a CUDA
    /// selector; a pip torch comes from the wheel index when a variant was named, else PyPI.
    fn torch(&mut self) -> Option<(Source, String)> {
        let (f, file) = (&self.found, self.file);
        match (&f.pytorch, &f.torch_pip) {
            (Some(v), _) if f.pytorch_channel_selector.is_some() => {
                Some((Source::PytorchChannel, v.clone()))
            }
            (Some(v), _) if f.conda_cuda.is_some() => Some((Source::CondaForge, v.clone())),
            (Some(v), _) => {
                self.diags.push(
                    Diagnostic::error(INVALID_SPEC, format!("{file} pins pytorch {v} but no CUDA selector (pytorch-cuda, cudatoolkit or cuda-version)"))
                        .with_hint("add `pytorch-cuda=X.Y` (pytorch channel) or `cuda-version=X.Y` (conda-forge); envbuild builds GPU environments"),
                );
                None
            }
            (None, Some(v)) if f.pip_variant.is_some() => Some((Source::PytorchIndex, v.clone())),
            (None, Some(v)) => Some((Source::Pypi, v.clone())),
            (None, None) => {
                if self.diags.is_empty() {
                    self.diags.push(Diagnostic::error(INVALID_SPEC, format!("{file} does not install PyTorch")).with_hint("add `pytorch=<version>` with `pytorch-cuda=<X.Y>`, or `torch==<version>` under `pip:`"));
                }
                None
            }
        }
    }
}

/// Convert; `file` names the input in messages. On success, the spec text (TOML).
pub fn import(
    text: &str,
    file: &str,
    table: &Table,
    opts: &ImportOptions,
) -> Result<String, Vec<Diagnostic>> {
    let env = env_file::parse(text, file)?;
    let meta = env_file::metadata(text);
    let auto_added = meta
        .as_ref()
        .map(|m| m.auto_added.clone())
        .unwrap_or_default();
    let mut scan = Scan {
        file,
        table,
        auto_added: &auto_added,
        found: Found::default(),
        diags: Vec::new(),
    };
    for dep in &env.dependencies {
        match dep {
            Dep::Conda(s) => conda::dep(&mut scan, s),
            Dep::Pip { pip } => pip::lines(&mut scan, pip),
        }
    }
    let torch = scan.torch();
    if scan.found.python.is_none() && scan.diags.is_empty() {
        scan.diags.push(
            Diagnostic::error(INVALID_SPEC, format!("{file} does not pin python"))
                .with_hint("add e.g. `python=3.11`"),
        );
    }
    if !scan.diags.is_empty() {
        return Err(scan.diags);
    }
    let (Some((source, pytorch)), Some(python)) = (torch, scan.found.python.clone()) else {
        return Err(vec![Diagnostic::error(
            INVALID_SPEC,
            format!("{file}: incomplete environment"),
        )]);
    };
    let imported = Imported {
        file,
        name: env.name.clone().unwrap_or_else(|| "imported-env".into()),
        python,
        pytorch,
        source,
        channels: &env.channels,
        found: &scan.found,
    };
    let meta = meta.unwrap_or_else(|| EnvMetadata {
        platform: "linux-64".into(),
        ..Default::default()
    });
    let out = spec_text::spec_text(&imported, &meta, opts);
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
    fn a_file_name_with_a_line_break_stays_inside_the_comment() {
        let yml = "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.12.7\n  - pytorch=2.10.0=cuda129_generic_py312_h1234567_0\n";
        let evil = "e.yml\nname = \"evil\"\n[target]\ndriver = \"1\"";
        let out = import(yml, evil, &table(), &ImportOptions::default()).unwrap();
        let first = out.lines().next().unwrap();
        assert!(first.starts_with("# Imported from e.yml\\n"), "{first}");
        let spec =
            crate::core::spec::parse(&out, crate::core::spec::Format::Toml, "spec.toml", &table())
                .unwrap();
        assert_eq!(spec.name, "x");
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
