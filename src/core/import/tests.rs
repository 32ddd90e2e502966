//! Tests of `envbuild import` over small environment files, one pattern each.

use super::*;
use crate::core::resolve::codes::NO_SUCH_PACKAGE_VERSION;

fn table() -> Table {
    Table::embedded().unwrap()
}

#[test]
fn conda_env_export_with_pytorch_channel_becomes_a_spec() {
    let yml = "name: torch-gpu-env\nchannels:\n  - pytorch\n  - nvidia\n  - defaults\ndependencies:\n  - python=3.10.14=h955ad1f_1\n  - pytorch=2.5.1=py3.10_cuda11.8_cudnn9.1.0_0\n  - pytorch-cuda=11.8=h7e8668a_6\n  - torchvision=0.20.1=py310_cu118\n  - jupyterlab=4.2.5=py310h06a4308_0\n  - pip:\n    - some-pkg==1.0.0\n";
    let out = import(yml, "environment.yml", &table(), &ImportOptions::default())
        .unwrap()
        .spec;
    assert!(out.contains("pytorch = \"2.5.1\""), "{out}");
    assert!(out.contains("source = \"pytorch-channel\""), "{out}");
    assert!(out.contains("pytorch-cuda = \"11.8\""), "{out}");
    assert!(out.contains("python = \"3.10.14\""), "{out}");
    assert!(out.contains("torchaudio = false"), "{out}");
    assert!(out.contains("\"jupyterlab=4.2.5\""), "{out}");
    assert!(out.contains("\"some-pkg==1.0.0\""), "{out}");
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
            python: None,
        },
    )
    .unwrap()
    .spec;
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
    let out = import(yml, "e.yml", &table(), &ImportOptions::default())
        .unwrap()
        .spec;
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
    let out = import(yml, evil, &table(), &ImportOptions::default())
        .unwrap()
        .spec;
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("# Imported from e.yml\\n"), "{first}");
    let spec =
        crate::core::spec::parse(&out, crate::core::spec::Format::Toml, "spec.toml", &table())
            .unwrap();
    assert_eq!(spec.name, "x");
}

#[test]
fn ranges_and_bare_names_are_kept_as_written() {
    let yml = "name: x\nchannels: [pytorch, nvidia]\ndependencies:\n  - python>=3.9\n  - pytorch\n  - numpy\n  - scipy=1.11.*\n  - pip:\n    - requests >= 2, < 3\n    - einops\n";
    let out = import(yml, "e.yml", &table(), &ImportOptions::default()).unwrap();
    let spec = &out.spec;
    for want in [
        "python = \">=3.9\"",
        "pytorch = \"*\"",
        "source = \"pytorch-channel\"",
        "pytorch-cuda = \"*\"",
        "\"numpy\",",
        "\"scipy=1.11.*\",",
        "\"requests>=2,<3\",",
        "\"einops\",",
    ] {
        assert!(spec.contains(want), "{want} in\n{spec}");
    }
    // The missing selector is said, at pytorch's line; nothing else changed.
    assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
    assert_eq!(out.notes[0].location.as_ref().map(|l| l.line), Some(5));
}

#[test]
fn a_torch_range_no_release_satisfies_is_refused_at_its_line() {
    let yml = "name: x\nchannels: [pytorch]\ndependencies:\n  - python=3.8\n  - pytorch<1.10\n  - pytorch-cuda=11.3\n";
    let errs = import(yml, "e.yml", &table(), &ImportOptions::default()).unwrap_err();
    assert_eq!(errs[0].code, NO_SUCH_PACKAGE_VERSION, "{errs:?}");
    assert_eq!(errs[0].location.as_ref().map(|l| l.line), Some(5));
}

#[test]
fn garbage_and_cpu_only_files_are_clear_errors() {
    assert!(import("{{{{", "e.yml", &table(), &ImportOptions::default()).is_err());
    let cpu = "name: x\ndependencies:\n  - python=3.11\n  - pytorch=2.5.1\n  - cpuonly\n";
    let e = import(cpu, "e.yml", &table(), &ImportOptions::default()).unwrap_err();
    assert!(e[0].message.contains("CPU build (`cpuonly`)"), "{e:?}");
}

#[test]
fn unsafe_values_in_the_file_are_refused() {
    let yml = "name: x\ndependencies:\n  - python=3.11\n  - pip:\n    - torch==2.5.1\n    - \"evil==1.0; rm -rf /\"\n";
    assert!(import(yml, "e.yml", &table(), &ImportOptions::default()).is_err());
}
