//! The closure lock (`[lock] closure = true`), offline: a package index of made-up wheels
//! (tests/fixtures/fake_index.py) served as a `file://` PEP 503 index, resolved by the host's
//! pip through envbuild; then reuse, `--upgrade`, `--offline`, `--locked`, ranges and render.

use crate::support::closure::*;
use crate::support::*;
use std::fs;

#[test]
fn the_closure_is_resolved_for_the_target_with_hashes() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c1", "3.13", "2.28", idx.path(), ""),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // glibc 2.28 cannot take nvidia-x 2.0 (manylinux_2_34); Python 3.13 needs no oldpy-shim
    // and can take numpy-like 1.2, whatever Python runs pip here.
    assert_eq!(
        closure_of(work.path()),
        pairs(&[
            ("numpy-like", "1.2"),
            ("nvidia-x", "1.0"),
            ("torch", "2.14.1")
        ])
    );
    let text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    let torch_whl = idx.path().join("files/torch-2.14.1-py3-none-any.whl");
    assert!(
        text.contains(&format!("sha256 = \"{}\"", sha256_file(&torch_whl))),
        "{text}"
    );
    assert!(text.contains("closure_inputs = \""), "{text}");

    // A Python 3.11, glibc 2.36 target gets the shim and the newer nvidia-x.
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c1", "3.11", "2.36", idx.path(), ""),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        closure_of(work.path()),
        pairs(&[
            ("numpy-like", "1.0"),
            ("nvidia-x", "2.0"),
            ("oldpy-shim", "1.0"),
            ("torch", "2.14.1")
        ])
    );
}

#[test]
fn an_unchanged_closure_is_reused_offline_and_upgrade_re_resolves() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c2", "3.13", "2.28", idx.path(), ""),
    );
    // --offline before any lock: a closure is needed and nothing may be resolved.
    let out = lock_in(work.path(), &["--offline"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("CLOSURE_NEEDS_RESOLUTION"),
        "{}",
        stderr_of(&out)
    );
    assert!(!work.path().join("envbuild.lock").exists());
    assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
    let first = fs::read(work.path().join("envbuild.lock")).unwrap();

    // A newer numpy-like appears; the index then disappears: re-locking reuses the closure
    // on disk without reading the index, byte for byte, and so do --offline and --locked.
    add_wheels(idx.path(), r#"[{"name": "numpy-like", "version": "1.3"}]"#);
    let moved = tempdir();
    let gone = moved.path().join("index");
    fs::rename(idx.path(), &gone).unwrap();
    for args in [&[][..], &["--offline"], &["--locked"]] {
        let out = lock_in(work.path(), args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), first);
    }
    // --upgrade re-resolves (and fails clearly while the index is gone).
    let out = lock_in(work.path(), &["--upgrade"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("CLOSURE_RESOLVE_FAILED"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), first);
    fs::rename(&gone, idx.path()).unwrap();
    let out = lock_in(work.path(), &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(closure_of(work.path()).contains(&("numpy-like".to_string(), "1.3".to_string())));
}

#[test]
fn upgrade_package_moves_only_the_packages_named() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c5", "3.13", "2.28", idx.path(), ""),
    );
    assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
    add_wheels(
        idx.path(),
        r#"[{"name": "numpy-like", "version": "1.3"},
            {"name": "nvidia-x", "version": "1.5", "tag": "py3-none-manylinux_2_17_x86_64"}]"#,
    );
    let out = lock_in(work.path(), &["--upgrade-package", "Numpy_Like"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        closure_of(work.path()),
        pairs(&[
            ("numpy-like", "1.3"),
            ("nvidia-x", "1.0"),
            ("torch", "2.14.1")
        ])
    );
    let out = lock_in(work.path(), &["--upgrade-package", "no-such-package"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("`no-such-package` is not in the lock's closure"));
    let out = lock_in(work.path(), &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        closure_of(work.path()),
        pairs(&[
            ("numpy-like", "1.3"),
            ("nvidia-x", "1.5"),
            ("torch", "2.14.1")
        ])
    );
}

#[test]
fn changed_inputs_need_a_resolution_under_locked_and_offline() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c3", "3.13", "2.28", idx.path(), ""),
    );
    assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
    let before = fs::read(work.path().join("envbuild.lock")).unwrap();
    // A range extra: the closure's inputs change.
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec(
            "c3",
            "3.13",
            "2.28",
            idx.path(),
            "pip = [\"einops-like>=0.8,<0.9\"]",
        ),
    );
    for args in [&["--locked"][..], &["--offline"]] {
        let out = lock_in(work.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert!(err.contains("CLOSURE_NEEDS_RESOLUTION"), "{args:?}: {err}");
        assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), before);
    }
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // The range is pinned by the closure, and the lock's packages say to what.
    assert!(closure_of(work.path()).contains(&("einops-like".to_string(), "0.8.0".to_string())));
    let text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    assert!(text.contains("einops-like = \"0.8.0\""), "{text}");
    assert!(text.contains("\"einops-like>=0.8,<0.9\""), "{text}");
}

#[test]
fn ranges_need_a_closure_and_what_sits_outside_it_is_refused() {
    let idx = tempdir();
    let work = tempdir();
    let spec = closure_spec(
        "c4",
        "3.13",
        "2.28",
        idx.path(),
        "pip = [\"einops-like>=0.8\"]",
    )
    .replace("closure = true", "closure = false");
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("UNPINNED_VERSION"),
        "{}",
        stderr_of(&out)
    );
    // A conda range too (tests/it/conda_closure.rs locks one with a closure).
    write(
        work.path(),
        "envbuild.toml",
        &spec.replace("pip = [\"einops-like>=0.8\"]", "conda = [\"pandas>=2,<3\"]"),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("UNPINNED_VERSION"),
        "{}",
        stderr_of(&out)
    );
    for (extra, image) in [
        ("", "\n[image]\nbase-provides = [\"torch\"]\n"),
        ("", "\n[image]\nwheels = \"wheels\"\n"),
        (
            "pip-find-links = [\"https://data.pyg.org/whl/torch-2.5.0+cu124.html\"]",
            "",
        ),
    ] {
        let spec = closure_spec("c4", "3.13", "2.28", idx.path(), extra) + image;
        write(work.path(), "envbuild.toml", &spec);
        let out = lock_in(work.path(), &[]);
        assert_eq!(out.status.code(), Some(1), "{spec}");
        assert!(
            stderr_of(&out).contains("CLOSURE_UNSUPPORTED"),
            "{spec}: {}",
            stderr_of(&out)
        );
        assert!(!work.path().join("envbuild.lock").exists());
    }
    // One main index: `[lock] index-url` may not name another than `pip-index-url`.
    let spec = closure_spec(
        "c4",
        "3.13",
        "2.28",
        idx.path(),
        "pip-index-url = \"https://mirror.example/simple\"",
    );
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{spec}");
    let err = stderr_of(&out);
    assert!(
        err.contains("INVALID_SPEC") && err.contains("two main indexes"),
        "{err}"
    );
}

#[test]
fn a_closure_renders_hashed_requirements_that_a_label_does_not_change() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let mut reqs = Vec::new();
    for name in ["label-one", "label-two"] {
        let work = tempdir();
        write(
            work.path(),
            "envbuild.toml",
            &closure_spec(name, "3.13", "2.28", idx.path(), ""),
        );
        assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
        let out = envbuild()
            .current_dir(work.path())
            .args(["render", "envbuild.lock", "--out", "r"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let req = fs::read_to_string(work.path().join("r/requirements.txt")).unwrap();
        let docker = fs::read_to_string(work.path().join("r/Dockerfile")).unwrap();
        assert!(docker.contains("pip install --no-cache-dir --no-deps --require-hashes -r"));
        let env = fs::read_to_string(work.path().join("r/environment.yml")).unwrap();
        assert!(env.contains("--hash=sha256:"), "{env}");
        // pylock.toml (PEP 751) carries the same packages, each with its file and hash.
        let pylock: toml::Table = fs::read_to_string(work.path().join("r/pylock.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(pylock["lock-version"].as_str(), Some("1.0"));
        assert_eq!(pylock["requires-python"].as_str(), Some("==3.13.*"));
        let names: Vec<&str> = pylock["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["numpy-like", "nvidia-x", "torch"]);
        let torch = &pylock["packages"].as_array().unwrap()[2];
        assert!(torch["wheels"][0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/files/torch-2.14.1-py3-none-any.whl"));
        assert_eq!(
            torch["wheels"][0]["hashes"]["sha256"].as_str(),
            Some(sha256_file(&idx.path().join("files/torch-2.14.1-py3-none-any.whl")).as_str())
        );
        // Rendering the spec takes the closure from the lock beside it, never resolving.
        let out = envbuild()
            .current_dir(work.path())
            .args(["render", "envbuild.toml", "--out", "s"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert_eq!(
            fs::read_to_string(work.path().join("s/requirements.txt")).unwrap(),
            req
        );
        fs::remove_file(work.path().join("envbuild.lock")).unwrap();
        let out = envbuild()
            .current_dir(work.path())
            .args(["render", "envbuild.toml", "--out", "t"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr_of(&out).contains("CLOSURE_NEEDS_RESOLUTION"),
            "{}",
            stderr_of(&out)
        );
        reqs.push(req);
    }
    assert!(!reqs[0].contains("Lock sha256"), "{}", reqs[0]);
    let torch = sha256_file(&idx.path().join("files/torch-2.14.1-py3-none-any.whl"));
    assert!(
        reqs[0].contains(&format!("torch==2.14.1 --hash=sha256:{torch}")),
        "{}",
        reqs[0]
    );
    assert!(reqs[0].contains(&format!(
        "--index-url file://{}/simple",
        idx.path().display()
    )));
    // Two locks that differ only in their name: the install layer's input is the same bytes.
    assert_eq!(reqs[0], reqs[1]);
}

// ---------------------------------------------------------------------------------------------
// With a real engine: the image's own pip agrees with the closure, the image holds exactly it,
// and a later `pip install` is CLOSURE_DRIFT.

/// `[lock] base-digest = true` without a closure is not ignored: `--offline` refuses while the
/// lock on disk has no digest for the base, then keeps the one it has, and render builds
/// `FROM base@digest` from it.
#[test]
fn base_digest_true_without_a_closure_pins_the_base() {
    let work = tempdir();
    let spec = format!(
        "{}\n[lock]\nbase-digest = true\n",
        fs::read_to_string(root().join("specs/pypi-torch214/envbuild.toml")).unwrap()
    );
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &["--offline"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("CLOSURE_NEEDS_RESOLUTION") && err.contains("digest for the base image"),
        "{err}"
    );
    assert!(!work.path().join("envbuild.lock").exists());

    // A lock on disk that holds a digest for this base (as `envbuild lock` with an engine
    // writes it): reused offline, with no closure.
    let mut lock = envbuild::core::lock::Lock::from_toml(
        &fs::read_to_string(root().join("specs/pypi-torch214/envbuild.lock")).unwrap(),
    )
    .unwrap();
    let digest = format!("sha256:{}", "5e".repeat(32));
    lock.image.base_digest = Some(digest.clone());
    write(work.path(), "envbuild.lock", &lock.to_toml().unwrap());
    let out = lock_in(work.path(), &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let locked = envbuild::core::lock::Lock::from_toml(
        &fs::read_to_string(work.path().join("envbuild.lock")).unwrap(),
    )
    .unwrap();
    assert_eq!(locked.image.base_digest.as_deref(), Some(digest.as_str()));
    assert!(locked.closure.is_empty());
    let out = envbuild()
        .current_dir(work.path())
        .args(["render", "envbuild.toml", "--out", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let dockerfile = fs::read_to_string(work.path().join("r/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("{}@{digest} AS install", locked.image.base)),
        "{dockerfile}"
    );
}

/// `lock --offline --out DIR` with no lock in DIR reuses the closure of the lock beside the spec
/// (a committed lock), instead of asking for a resolution.
#[test]
fn offline_out_dir_reuses_the_closure_beside_the_spec() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c-out", "3.13", "2.28", idx.path(), ""),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = lock_in(work.path(), &["--offline", "--out", "elsewhere"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read_to_string(work.path().join("elsewhere/envbuild.lock")).unwrap(),
        fs::read_to_string(work.path().join("envbuild.lock")).unwrap()
    );
}
