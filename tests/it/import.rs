//! `envbuild import`: environment.yml in, a spec that locks out.

use crate::support::*;
use std::fs;

#[test]
fn an_exported_environment_becomes_a_spec_that_locks() {
    let tmp = tempdir();
    let env = tmp.path().join("environment.yml");
    fs::write(
        &env,
        "name: research\nchannels:\n  - pytorch\n  - nvidia\n  - conda-forge\ndependencies:\n  - python=3.11.6=h955ad1f_0\n  - pytorch=2.1.0=py3.11_cuda11.8_cudnn8.7.0_0\n  - pytorch-cuda=11.8=h7e8668a_5\n  - torchvision=0.16.0=py311_cu118\n  - numpy=1.24.3=py311h08b1b3b_1\n  - conda-forge::pandas=2.1.1=py311hd9cb1b8_1\n  - pip\n  - pip:\n    - some-pypi-only-package==1.0.0\n",
    )
    .unwrap();
    let spec = tmp.path().join("envbuild.toml");
    envbuild()
        .current_dir(tmp.path())
        .args(["import", "environment.yml", "--out", "envbuild.toml"])
        .args(["--driver", "535.104.05", "--gpu", "A100"])
        .assert()
        .success();
    let text = fs::read_to_string(&spec).unwrap();
    insta::assert_snapshot!("import-exported-env", text);
    envbuild().arg("lock").arg(&spec).assert().success();
    // Refuses to overwrite without --force.
    let out = envbuild()
        .arg("import")
        .arg(&env)
        .arg("--out")
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("OUTPUT_EXISTS"));
}

#[test]
fn floating_versions_are_refused_and_nothing_is_written() {
    let tmp = tempdir();
    let env = tmp.path().join("environment.yml");
    fs::write(
        &env,
        "name: x\ndependencies:\n  - python=3.11\n  - pytorch\n  - pip:\n    - torch\n",
    )
    .unwrap();
    let spec = tmp.path().join("envbuild.toml");
    let out = envbuild()
        .arg("import")
        .arg(&env)
        .arg("--out")
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("UNPINNED_VERSION"));
    assert!(!spec.exists());
}

/// Round trip: the environment.yml rendered from each example's lock imports back to the same
/// spec (compared in canonical form, so key order and defaults do not matter).
#[test]
fn rendered_environment_files_import_back_to_the_same_spec() {
    use envbuild::core::spec::{parse, Format};
    let table = envbuild::core::compat::Table::embedded().unwrap();
    for spec_path in example_specs() {
        let text = fs::read_to_string(&spec_path).unwrap();
        let original = parse(&text, Format::Toml, "spec", &table).unwrap();
        let lock = envbuild::core::lock::Lock::from_toml(
            &fs::read_to_string(spec_path.with_file_name("envbuild.lock")).unwrap(),
        )
        .unwrap();
        let rendered = envbuild::core::render::render(&lock, &Default::default()).unwrap();
        let env = String::from_utf8(rendered.files["environment.yml"].clone()).unwrap();
        let imported =
            envbuild::core::import::import(&env, "environment.yml", &table, &Default::default())
                .unwrap_or_else(|d| panic!("{}: {d:?}\n{env}", spec_path.display()));
        let back = parse(&imported, Format::Toml, "imported", &table).unwrap();
        assert_eq!(
            envbuild::core::resolve::spec_hash(&back),
            envbuild::core::resolve::spec_hash(&original),
            "{}:\noriginal {original:#?}\nimported {back:#?}\n{imported}\n{env}",
            spec_path.display()
        );
    }
}
