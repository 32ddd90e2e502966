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
    // The table-level lock: the closure would need the conda channels, unreachable in tests.
    envbuild()
        .arg("lock")
        .arg(&spec)
        .arg("--no-closure")
        .assert()
        .success();
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
fn a_refused_file_writes_nothing_and_says_why_at_its_line() {
    let tmp = tempdir();
    let env = tmp.path().join("environment.yml");
    // pytorch from the default channels with no CUDA selector: no source envbuild knows.
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
    let err = stderr_of(&out);
    assert!(
        err.contains("error[INVALID_SPEC]") && err.contains("environment.yml:4:1"),
        "{err}"
    );
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
        if original.lock.closure {
            // Not yet: import reads a closure's hashed pip lines as the spec's own extras.
            continue;
        }
        let lock = envbuild::core::lock::Lock::from_toml(
            &fs::read_to_string(spec_path.with_file_name("envbuild.lock")).unwrap(),
        )
        .unwrap();
        let rendered = envbuild::core::render::render(&lock, &Default::default()).unwrap();
        let env = String::from_utf8(rendered.files["environment.yml"].clone()).unwrap();
        let imported =
            envbuild::core::import::import(&env, "environment.yml", &table, &Default::default())
                .unwrap_or_else(|d| panic!("{}: {d:?}\n{env}", spec_path.display()))
                .spec;
        let mut back = parse(&imported, Format::Toml, "imported", &table).unwrap();
        // `[lock]` says how the spec is locked, not what the environment holds.
        back.lock = original.lock.clone();
        assert_eq!(
            envbuild::core::resolve::spec_hash(&back),
            envbuild::core::resolve::spec_hash(&original),
            "{}:\noriginal {original:#?}\nimported {back:#?}\n{imported}\n{env}",
            spec_path.display()
        );
    }
}

/// `envbuild import FIXTURE [args]`: (exit code, stdout, stderr).
fn import_fixture(name: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name);
    let out = envbuild()
        .arg("import")
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (out.status.code(), stdout, stderr_of(&out))
}

/// The lock of the spec `envbuild import` printed (at table level), as text.
fn lock_out(spec: &str) -> String {
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, spec).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(&path)
        .arg("--no-closure")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    fs::read_to_string(tmp.path().join("envbuild.lock")).unwrap()
}

/// The spec `envbuild import` printed locks (at table level: a closure would need the real
/// channels and indexes, which tests never reach).
fn locks(spec: &str) {
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, spec).unwrap();
    envbuild()
        .arg("lock")
        .arg(&path)
        .arg("--no-closure")
        .assert()
        .success();
}

#[test]
fn a_conda_env_export_imports_without_the_machine_s_packages_and_locks() {
    let (code, spec, err) = import_fixture("export-linux.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    // The capitalised environment name is kept (image names are lowercased at render).
    assert!(spec.contains("name = \"DiT\""), "{spec}");
    assert!(spec.contains("pytorch-cuda = \"11.8\"") && spec.contains("\"numpy=1.24.3\""));
    // Each left-out package is a note on stderr with its input line, and in the spec's comment.
    for (pkg, line) in [
        ("_libgcc_mutex", 7),
        ("ld_impl_linux-64", 11),
        ("libcublas", 12),
        ("pytorch-mutex", 19),
    ] {
        assert!(err.contains(&format!("`{pkg}=")), "{pkg}: {err}");
        assert!(
            err.contains(&format!("export-linux.yml:{line}:1")),
            "{pkg}: {err}"
        );
        assert!(
            spec.contains(&format!("#   line {line}: `{pkg}=")),
            "{pkg}: {spec}"
        );
        assert!(!spec.contains(&format!("\"{pkg}=")), "{pkg}: {spec}");
    }
    assert!(err.contains("IMPORT_DROPPED"));
    // pip's own NVIDIA tool stays; only torch's CUDA wheels are dropped.
    assert!(spec.contains("\"nvidia-ml-py==12.535.108\""), "{spec}");
    locks(&spec);
}

#[test]
fn a_windows_export_says_so_and_lists_what_it_leaves_out() {
    let (code, spec, err) = import_fixture("export-windows.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("exported on Windows"), "{err}");
    for pkg in ["m2w64-gcc-libs", "pywin32", "ucrt", "vc14_runtime"] {
        assert!(err.contains(&format!("`{pkg}=")), "{pkg}: {err}");
        assert!(!spec.contains(&format!("\"{pkg}=")), "{pkg}: {spec}");
    }
    assert!(spec.contains("\"tqdm=4.65.0\""), "{spec}");
    locks(&spec);
}

#[test]
fn label_channels_capital_names_and_an_empty_pip_list_are_valid_input() {
    let (code, spec, err) = import_fixture("label-channel.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(spec.contains("\"nvidia/label/cuda-12.1.0\""), "{spec}");
    assert!(spec.contains("name = \"SE3nv\""), "{spec}");
    // conda's `numpy=1.26` is any 1.26.x, and stays written in conda's own terms.
    assert!(spec.contains("\"numpy=1.26\""), "{spec}");
    locks(&spec);
}

#[test]
fn a_package_in_both_lists_keeps_pip_s_pin_and_says_so_with_both_lines() {
    let (code, spec, err) = import_fixture("conda-and-pip.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("`scipy=1.13.1`") && err.contains("`scipy==1.14.1` (line 11)"),
        "{err}"
    );
    assert!(err.contains("conda-and-pip.yml:9:1"), "{err}");
    assert!(!spec.contains("\"scipy=1.13.1\"") && spec.contains("\"scipy==1.14.1\""));
    // pytorch-gpu with cuda-version is conda-forge's CUDA build.
    assert!(spec.contains("source = \"conda-forge\"") && spec.contains("cuda-version = \"12.0\""));
    // A git reference pinned to a commit is a pin.
    assert!(spec.contains("openfold @ git+https://"), "{spec}");
    // The find-links line is carried over, at its own key.
    assert!(
        spec.contains(
            "pip-find-links = [\n    \"https://data.pyg.org/whl/torch-2.4.0+cu124.html\",\n]"
        ),
        "{spec}"
    );
    assert!(!err.contains("IMPORT_DROPPED]: `--find-links"), "{err}");
    locks(&spec);
}

#[test]
fn pip_s_local_version_in_a_conda_line_is_named_as_such() {
    let (code, _, err) = import_fixture("local-version.yml", &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("pip's local version"), "{err}");
    assert!(err.contains("local-version.yml:7:1"), "{err}");
    assert!(
        !err.contains("no CUDA selector") && !err.contains("<imported spec>"),
        "{err}"
    );
}

#[test]
fn a_requirements_file_with_pytorch_s_index_imports_with_the_python_given() {
    // Without `--python` the file cannot say which Python: any, for the lock to choose, said.
    let (code, spec, err) = import_fixture("requirements.txt", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(spec.contains("python = \"*\""), "{spec}");
    assert!(err.contains("`--python X.Y` names one"), "{err}");
    locks(&spec);
    let (code, spec, err) = import_fixture("requirements.txt", &["--python", "3.11"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(spec.contains("python = \"3.11\""), "{spec}");
    assert!(spec.contains("source = \"pytorch-index\"") && spec.contains("cuda = \"12.1\""));
    // torchvision 0.15.2 belongs to torch 2.0: the replacement is said, not silent.
    assert!(
        err.contains("torchvision 0.15.2 is not the release for torch 2.2.1"),
        "{err}"
    );
    assert!(err.contains("requirements.txt:4:1"), "{err}");
    locks(&spec);
}

#[test]
fn versions_with_an_epoch_are_versions() {
    // PEP 440 and conda write an epoch as `N!` before the version (conda-forge's x264).
    let (code, spec, err) = import_fixture("epoch.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(spec.contains("\"x264=1!164.3095\""), "{spec}");
    assert!(spec.contains("\"tzdata==1!2024.1\""), "{spec}");
    locks(&spec);
}

#[test]
fn an_empty_list_item_is_a_note_at_its_line_not_a_broken_file() {
    // `- # av==14.4.0` is a package commented out where it stood: YAML reads the item as null.
    let (code, spec, err) = import_fixture("null-item.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    for (item, line) in [("- # numpy=1.26.4", 9), ("- # av==14.4.0", 12), ("-", 13)] {
        assert!(
            err.contains(&format!("`{item}` is not carried over"))
                && err.contains(&format!("null-item.yml:{line}:1")),
            "{item}: {err}"
        );
    }
    assert!(
        err.contains("IMPORT_DROPPED") && !err.contains("untagged"),
        "{err}"
    );
    // The items after the empty ones keep their own lines and pins.
    assert!(spec.contains("\"einops==0.7.0\"") && spec.contains("\"tqdm==4.66.1\""));
    assert!(
        !spec.contains("\"av==") && !spec.contains("\"numpy="),
        "{spec}"
    );
    locks(&spec);
}

#[test]
fn options_after_a_requirement_are_split_off_as_pip_reads_them() {
    let (code, spec, err) = import_fixture("requirement-options.txt", &["--python", "3.11"]);
    assert_eq!(code, Some(0), "{err}");
    // The requirement before the options is read: torch is pinned, its variant named.
    assert!(!err.contains("not pinned"), "{err}");
    assert!(
        spec.contains("pytorch = \"2.1.2\"")
            && spec.contains("source = \"pytorch-index\"")
            && spec.contains("cuda = \"12.1\""),
        "{spec}"
    );
    assert!(spec.contains("\"einops==0.7.0\"") && spec.contains("\"tqdm==4.66.1\""));
    // Each option is said at its line: PyTorch's index is read, the hash is not carried
    // over, and another find-links location is carried over for the whole install.
    for (what, line) in [
        (
            "`--index-url https://download.pytorch.org/whl/cu121` after",
            2,
        ),
        ("`--hash=sha256:", 4),
        (
            "`--find-links https://example.org/wheels` after `tqdm==4.66.1` is carried over",
            5,
        ),
    ] {
        assert!(err.contains(what), "{what}: {err}");
        assert!(
            err.contains(&format!("requirement-options.txt:{line}:1")),
            "{line}: {err}"
        );
    }
    // Only the find-links location reaches a spec value, at its own key; no option does.
    let values: String = spec.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(
        !values.contains("--") && !values.contains("sha256"),
        "{spec}"
    );
    assert!(
        spec.contains("pip-find-links = [\n    \"https://example.org/wheels\",\n]"),
        "{spec}"
    );
    locks(&spec);
}

#[test]
fn a_cuda_selector_without_a_version_is_any_cuda_for_the_lock_to_choose() {
    let (code, spec, err) = import_fixture("unpinned-selector.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    // `cudatoolkit` bare: the pytorch channel's selector, any version, said at its line.
    assert!(
        spec.contains("source = \"pytorch-channel\"") && spec.contains("pytorch-cuda = \"*\""),
        "{spec}"
    );
    assert!(
        err.contains("unpinned-selector.yml:7:1") && err.contains("`pytorch-cuda = \"*\"`"),
        "{err}"
    );
    let out = lock_out(&spec);
    // torch 1.13.1 was built on the pytorch channel for CUDA 11.6 and 11.7: the newest.
    assert!(out.contains("torch = \"1.13.1\""), "{out}");
    assert!(out.contains("pytorch::pytorch-cuda=11.7"), "{out}");
}

#[test]
fn a_pytorch_channel_build_string_names_its_cuda() {
    // `py3.10_cuda11.7_cudnn8.5.0_0`: the channel's builds named their CUDA before pytorch-cuda.
    let (code, spec, err) = import_fixture("channel-build.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        spec.contains("source = \"pytorch-channel\"") && spec.contains("pytorch-cuda = \"11.7\""),
        "{spec}"
    );
    assert!(
        err.contains("channel-build.yml:8:1") && err.contains("CUDA 11.7"),
        "{err}"
    );
    locks(&spec);
}

#[test]
fn a_torch_older_than_the_table_is_refused_at_import_with_the_oldest_release() {
    let (code, spec, err) = import_fixture("old-torch.yml", &[]);
    assert_eq!(code, Some(1), "{spec}");
    assert!(
        err.contains("NO_SUCH_PACKAGE_VERSION") && err.contains("PyTorch 1.11.0"),
        "{err}"
    );
    assert!(err.contains("old-torch.yml:7:1"), "{err}");
    // The hint names the table's oldest release, read from the table itself.
    let table = envbuild().args(["table", "torch"]).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    let oldest = table
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|w| w.starts_with("1.") || w.starts_with("2."))
        .unwrap_or("?")
        .to_string();
    assert!(
        err.contains(&format!("the oldest supported release is {oldest}")),
        "{oldest}: {err}"
    );
    assert!(!err.contains("no CUDA selector"), "{err}");
}

#[test]
fn pyg_s_find_links_page_is_carried_over_and_rendered() {
    let (code, spec, err) = import_fixture("pyg-find-links.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("IMPORT_DROPPED"), "{err}");
    assert!(
        spec.contains(
            "pip-find-links = [\n    \"https://data.pyg.org/whl/torch-1.13.0+cu117.html\",\n]"
        ) && spec.contains("\"torch-scatter==2.1.0+pt113cu117\""),
        "{spec}"
    );
    // A spec problem with the location points at the input line it came from.
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, &spec).unwrap();
    envbuild().arg("lock").arg(&path).assert().success();
    envbuild().arg("render").arg(&path).assert().success();
    let env = fs::read_to_string(tmp.path().join("render/environment.yml")).unwrap();
    assert!(
        env.contains("- '--find-links https://data.pyg.org/whl/torch-1.13.0+cu117.html'"),
        "{env}"
    );
}

#[test]
fn nvidia_s_index_beside_pytorch_s_is_carried_over_and_rendered() {
    let (code, spec, err) = import_fixture("nvidia-index.txt", &["--python", "3.10"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        spec.contains("pip-extra-index-urls = [\n    \"https://pypi.nvidia.com\",\n]")
            && spec.contains("cuda = \"11.8\""),
        "{spec}"
    );
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, &spec).unwrap();
    envbuild()
        .arg("lock")
        .arg(&path)
        .arg("--no-closure")
        .assert()
        .success();
    envbuild()
        .arg("render")
        .arg(tmp.path().join("envbuild.lock"))
        .assert()
        .success();
    let req = fs::read_to_string(tmp.path().join("render/requirements.txt")).unwrap();
    let options: Vec<&str> = req.lines().filter(|l| l.starts_with("--")).collect();
    assert_eq!(
        options,
        [
            "--extra-index-url https://download.pytorch.org/whl/cu118",
            "--extra-index-url https://pypi.nvidia.com"
        ],
        "{req}"
    );
    assert!(req.lines().any(|l| l == "cuml-cu11==23.4.1"), "{req}");
}

#[test]
fn plain_http_sources_are_kept_and_warned_at_their_lines() {
    let (code, spec, err) = import_fixture("insecure.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    for (url, line) in [
        ("http://conda.mirror.internal/extras", 3),
        ("http://pypi.mirror.internal/simple", 13),
        ("http://wheels.mirror.internal/torch-2.4.0+cu124.html", 14),
    ] {
        let at = format!("warning[INSECURE_SOURCE]: `{url}` is reached over plain http");
        let i = err.find(&at).unwrap_or_else(|| panic!("{url}: {err}"));
        assert!(
            err[i..]
                .lines()
                .nth(1)
                .unwrap()
                .ends_with(&format!("insecure.yml:{line}:1")),
            "{url}: {err}"
        );
        assert!(spec.contains(&format!("\"{url}\"")), "{spec}");
    }
    // lock warns again, with the https form as the hint, and still writes the lock.
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, &spec).unwrap();
    let out = envbuild().arg("lock").arg(&path).output().unwrap();
    let lock_err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{lock_err}");
    assert_eq!(
        lock_err.matches("warning[INSECURE_SOURCE]").count(),
        3,
        "{lock_err}"
    );
    assert!(
        lock_err.contains("hint: use https://pypi.mirror.internal/simple"),
        "{lock_err}"
    );
}

#[test]
fn git_references_follow_one_rule_whatever_the_spelling() {
    // Pinned to a commit: `NAME @ URL`, `URL#egg=NAME` and `-e URL#egg=NAME` all import as
    // `NAME @ URL`, the last two with a note saying so.
    let (code, spec, err) = import_fixture("git-pinned.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    for name in ["openfold", "dllogger", "clip"] {
        assert!(spec.contains(&format!("\"{name} @ git+https://")), "{spec}");
    }
    let values: String = spec.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(
        !values.contains("#egg") && !values.contains("-e "),
        "{spec}"
    );
    assert!(err.contains("git-pinned.yml:12:1") && err.contains("git-pinned.yml:13:1"));
    assert!(err.contains("not editable"), "{err}");
    assert!(
        err.contains("`-e .` is not carried over: an editable install of a local directory")
            && err.contains("git-pinned.yml:14:1"),
        "{err}"
    );
    locks(&spec);
    // A branch, a tag or no ref is UNPINNED_VERSION in every spelling; no name is
    // UNNAMED_REFERENCE; nothing is dropped.
    let (code, spec, err) = import_fixture("git-references.yml", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(spec.is_empty());
    assert!(!err.contains("IMPORT_DROPPED"), "{err}");
    let code_at = |line: usize| {
        let at = format!("git-references.yml:{line}:1");
        let i = err.find(&at).unwrap_or_else(|| panic!("{line}: {err}"));
        let head = err[..i].rfind("\n\n").map_or(0, |j| j + 2);
        err[head..].split(']').next().unwrap().to_string()
    };
    for line in [14, 15, 16, 17] {
        assert_eq!(code_at(line), "error[UNPINNED_VERSION", "{line}: {err}");
    }
    for line in [18, 19] {
        assert_eq!(code_at(line), "error[UNNAMED_REFERENCE", "{line}: {err}");
    }
    assert!(err.contains("@<40-hex commit>"), "{err}");
}

/// Every import fixture's whole output: the spec on stdout, the notes and errors on stderr, and
/// the exit code (a requirements file is imported for Python 3.11). The snapshots are the
/// assertion: a change to any kept, changed or dropped line shows in review.
#[test]
fn import_output_snapshots() {
    let dir = root().join("tests/fixtures/import");
    let names = files_in(&dir);
    assert!(names.len() >= 15, "{names:?}");
    for name in names {
        let mut cmd = envbuild();
        cmd.current_dir(&dir).args(["import", &name]);
        if name.ends_with(".txt") {
            cmd.args(["--python", "3.11"]);
        }
        let out = cmd.output().unwrap();
        let stderr = stderr_of(&out);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        let text = format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{stderr}",
            out.status.code().unwrap_or(-1),
            stdout_of(&out)
        );
        insta::assert_snapshot!(format!("import-{name}"), text);
    }
}

#[test]
fn the_founding_example_imports_and_locks_to_the_channel_s_last_release() {
    let (code, spec, err) =
        import_fixture("founding.yml", &["--driver", "535.104.05", "--gpu", "A100"]);
    assert_eq!(code, Some(0), "{err}");
    // The file's own constraints, nothing guessed: pytorch floats, jupyterlab floats.
    for want in [
        "python = \"3.10\"",
        "pytorch = \"*\"",
        "pytorch-cuda = \"11.8\"",
        "\"jupyterlab\",",
    ] {
        assert!(spec.contains(want), "{want}: {spec}");
    }
    assert!(
        !spec.contains("torchvision =") && !spec.contains("torchaudio ="),
        "{spec}"
    );
    let lock = lock_out(&spec);
    for want in [
        "torch = \"2.5.1\"",
        "python = \"3.10\"",
        "pytorch::pytorch-cuda=11.8",
        "\"jupyterlab\"",
        "chosen = \"2.5.1\"",
    ] {
        assert!(lock.contains(want), "{want}: {lock}");
    }
    // The same lock as the hand-written founding spec's (tests/fixtures/choose/founding).
    let fixture = lock_out(
        &fs::read_to_string(root().join("tests/fixtures/choose/founding/envbuild.toml")).unwrap(),
    );
    let pins = |l: &str| -> Vec<String> {
        l.lines()
            .filter(|x| {
                x.starts_with("torch = ") || x.starts_with("cuda = ") || x.starts_with("python = ")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(pins(&lock), pins(&fixture));
}

#[test]
fn ranges_stay_ranges_on_the_core_keys_and_the_extras() {
    let (code, spec, err) = import_fixture("ranges.yml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !err.contains("IMPORT_"),
        "nothing changed or dropped: {err}"
    );
    for want in [
        "python = \">= 3.8\"",
        "pytorch = \">= 1.13\"",
        "pytorch-cuda = \">=11.7,<12\"",
        "\"numpy=1.24.*\",",
        "\"scipy\",",
        "\"timm\",",
        "\"accelerate>=0.20\",",
        "\"tqdm>=4,<5\",",
        "\"black[jupyter]~=24.1\",",
    ] {
        assert!(spec.contains(want), "{want}: {spec}");
    }
    // The table-level lock chooses the core keys and carries the extras' ranges, warning.
    let tmp = tempdir();
    let path = tmp.path().join("envbuild.toml");
    fs::write(&path, &spec).unwrap();
    let out = envbuild()
        .args(["lock", "--no-closure"])
        .arg(&path)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("warning[RANGE_NOT_LOCKED]").count(), 6, "{err}");
    let lock = fs::read_to_string(tmp.path().join("envbuild.lock")).unwrap();
    assert!(
        lock.contains("\"tqdm>=4,<5\"") && lock.contains("pytorch::pytorch-cuda=11.8"),
        "{lock}"
    );
}

#[test]
fn the_project_other_files_and_local_paths_are_dropped_at_their_lines() {
    let (code, spec, err) = import_fixture("dropped-lines.txt", &["--python", "3.11"]);
    assert_eq!(code, Some(0), "{err}");
    for (what, line) in [
        (
            "`-r requirements-base.txt` is not carried over: it includes another requirements file",
            2,
        ),
        (
            "`-c constraints.txt` is not carried over: it names a constraints file",
            3,
        ),
        ("`-e .` is not carried over: an editable install", 4),
        (
            "`./third_party/simple-knn` is not carried over: a local path",
            5,
        ),
        (
            "`submodules/diff-gaussian-rasterization` is not carried over: a local path",
            6,
        ),
        (
            "`dist/mypkg-0.1.0-py3-none-any.whl` is not carried over: a local path",
            7,
        ),
    ] {
        let i = err.find(what).unwrap_or_else(|| panic!("{what}: {err}"));
        assert!(
            err[i..]
                .lines()
                .nth(1)
                .unwrap()
                .ends_with(&format!("dropped-lines.txt:{line}:1")),
            "{what}: {err}"
        );
    }
    assert!(
        spec.contains("\"einops\",") && spec.contains("\"numpy<2\","),
        "{spec}"
    );
    locks(&spec);
}

#[test]
fn torch_s_own_cuda_wheels_are_torch_s_whatever_their_spelling() {
    let (code, spec, err) = import_fixture("torch-cuda-deps.txt", &["--python", "3.12"]);
    assert_eq!(code, Some(0), "{err}");
    let kept: Vec<&str> = spec
        .lines()
        .filter(|l| l.starts_with("    \""))
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"'))
        .collect();
    assert_eq!(
        kept,
        [
            "nvidia-cuda-nvcc==13.0.88",
            "nvidia-ml-py==13.580.82",
            "cuda-python==13.0.3",
            "einops==0.8.1"
        ],
        "{spec}"
    );
    // Each of torch's is a note at its line: 20 of them, lines 4 to 23.
    assert_eq!(
        err.matches("installed with torch for the locked CUDA")
            .count(),
        20,
        "{err}"
    );
    for line in 4..=23 {
        assert!(
            err.contains(&format!("torch-cuda-deps.txt:{line}:1")),
            "{line}: {err}"
        );
    }
    locks(&spec);
}

#[test]
fn pytorch_with_no_cuda_selector_is_any_cuda_on_its_channel() {
    let (code, spec, err) = import_fixture("no-selector.yml", &["--driver", "535.104.05"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        spec.contains("source = \"conda-forge\"") && spec.contains("cuda = \"*\""),
        "{spec}"
    );
    assert!(
        err.contains("no-selector.yml:8:1") && err.contains("no CUDA selector"),
        "{err}"
    );
    let lock = lock_out(&spec);
    assert!(lock.contains("torch = \"2.5.1\""), "{lock}");
}

#[test]
fn markers_on_the_python_a_requirements_file_leaves_open_are_carried_for_the_lock_to_judge() {
    let target = ["--driver", "535.104.05", "--gpu", "A100"];
    let (code, spec, err) = import_fixture("python-markers.txt", &target);
    assert_eq!(code, Some(0), "{err}");
    // Carried with the marker, in its canonical text; a Windows-only line is dropped.
    for want in [
        "'urllib3>=2.5.0; python_version > \"3.8\"',",
        "'importlib-metadata>=4.0; python_version < \"3.8\"',",
        "'tomli>=2.0; python_version < \"3.11\"',",
    ] {
        assert!(spec.contains(want), "{want}: {spec}");
    }
    assert!(!spec.contains("\"pywin32"), "{spec}");
    assert!(
        err.contains("python-markers.txt:9:1") && err.contains("its marker excludes the target"),
        "{err}"
    );
    // The table-level lock chooses the Python (3.12 for torch 2.4.1 on PyPI), then judges
    // each marker for it: what it excludes is neither a package nor an install line.
    let lock = lock_out(&spec);
    assert!(lock.contains("python = \"3.12\""), "{lock}");
    assert!(
        lock.contains("'urllib3>=2.5.0; python_version > \"3.8\"'"),
        "{lock}"
    );
    let install = lock.split("[install]").nth(1).unwrap_or_default();
    let install = install.split("\n[").next().unwrap_or_default();
    assert!(
        !install.contains("tomli") && !install.contains("importlib-metadata"),
        "{install}"
    );
    let excluded = lock
        .split("[excluded]")
        .nth(1)
        .expect("an [excluded] table");
    assert!(
        excluded.contains("tomli = '`tomli>=2.0; python_version < \"3.11\"`: the marker does not hold for Python 3.12 on x86_64'"),
        "{excluded}"
    );
    // With the Python named, import judges the markers itself, as before.
    let (code, spec, err) = import_fixture("python-markers.txt", &["--python", "3.10"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        spec.contains("\"tomli>=2.0\",") && !spec.contains("'tomli"),
        "{spec}"
    );
}

#[test]
fn conda_forge_s_cuda_version_is_the_spec_s_cuda_version_exact_or_a_range() {
    let (code, spec, err) = import_fixture("cuda-version.yml", &["--driver", "560.35.05"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        spec.contains("source = \"conda-forge\"") && spec.contains("cuda-version = \"12.6\""),
        "{spec}"
    );
    assert!(!spec.contains("\ncuda = "), "{spec}");
    let lock = lock_out(&spec);
    assert!(lock.contains("conda-forge::cuda-version==12.6"), "{lock}");
    let (code, spec, err) = import_fixture("cuda-version-range.yml", &["--driver", "560.35.05"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(spec.contains("cuda-version = \">=12.4,<13\""), "{spec}");
    let lock = lock_out(&spec);
    // The range chosen, and recorded under the key as the file wrote it.
    assert!(lock.contains("[choices.cuda-version]"), "{lock}");
    assert!(lock.contains("asked = \">=12.4,<13\""), "{lock}");
}
