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
    // A lock without a closure has nothing to upgrade a package of (issue 20, class 9).
    let out = lock_in(work.path(), &["--no-closure", "--upgrade-package", "torch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let table_level = tempdir();
    write(
        table_level.path(),
        "envbuild.toml",
        &closure_spec("c5", "3.13", "2.28", idx.path(), "")
            .replace("closure = true", "closure = false"),
    );
    let out = lock_in(table_level.path(), &["--upgrade-package", "torch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("this lock has none"),
        "{}",
        stderr_of(&out)
    );
    assert!(!table_level.path().join("envbuild.lock").exists());
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
fn a_table_level_lock_carries_ranges_and_what_sits_outside_a_closure_is_refused() {
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
    // Without a closure nothing pins the range: the lock carries it as written, and warns.
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("warning[RANGE_NOT_LOCKED]: `einops-like>=0.8` is a range"),
        "{err}"
    );
    let text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    assert!(text.contains("\"einops-like>=0.8\""), "{text}");
    assert!(
        !text.contains("einops-like = "),
        "packages holds versions only: {text}"
    );
    // A conda range too (tests/it/conda_closure.rs locks one with a closure).
    write(
        work.path(),
        "envbuild.toml",
        &spec.replace("pip = [\"einops-like>=0.8\"]", "conda = [\"pandas>=2,<3\"]"),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("warning[RANGE_NOT_LOCKED]: `pandas>=2,<3` is a range"),
        "{}",
        stderr_of(&out)
    );
    fs::remove_file(work.path().join("envbuild.lock")).unwrap();
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
        "{}\n[lock]\nclosure = false\nbase-digest = true\n",
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

/// The lock of the spec in `dir` with the host's pip and uv settings planted everywhere they are
/// read: the environment (`PIP_*`, `UV_*`), the user's and the project's config files
/// (`pip.conf`, `uv.toml`, `pyproject.toml`'s `[tool.uv]`), all pointing at `rogue`.
fn lock_with_hostile_settings(
    dir: &std::path::Path,
    rogue: &std::path::Path,
) -> std::process::Output {
    let url = format!("file://{}/simple", rogue.display());
    let home = dir.join("home");
    fs::create_dir_all(home.join(".config/uv")).unwrap();
    fs::create_dir_all(home.join(".config/pip")).unwrap();
    let uv_toml =
        format!("index-url = \"{url}\"\nextra-index-url = [\"{url}\"]\nresolution = \"lowest\"\n");
    let pip_conf = format!("[global]\nindex-url = {url}\nextra-index-url = {url}\n");
    write(&home.join(".config/uv"), "uv.toml", &uv_toml);
    write(&home.join(".config/pip"), "pip.conf", &pip_conf);
    write(dir, "uv.toml", &uv_toml);
    write(dir, "pip.conf", &pip_conf);
    write(
        dir,
        "pyproject.toml",
        &format!("[project]\nname = \"x\"\nversion = \"0\"\n\n[tool.uv]\n{uv_toml}"),
    );
    let constraints = write(dir, "constraints.txt", "numpy-like==9.9\n");
    // The real interpreter, for uv: a pyenv shim would look for its versions under HOME.
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let mut cmd = envbuild();
    cmd.current_dir(dir)
        .args(["lock", "envbuild.toml"])
        .env(
            "ENVBUILD_PYTHON",
            String::from_utf8_lossy(&python.stdout).trim(),
        )
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("PIP_CONFIG_FILE", dir.join("pip.conf"))
        .env("UV_CONFIG_FILE", dir.join("uv.toml"))
        .env("UV_CONSTRAINT", &constraints)
        .env("UV_OVERRIDE", &constraints)
        .env("UV_RESOLUTION", "lowest")
        .env("UV_PRERELEASE", "allow")
        .env("UV_EXCLUDE_NEWER", "2000-01-01T00:00:00Z")
        .env("UV_INDEX_STRATEGY", "first-index")
        .env("UV_PYTHON_PLATFORM", "aarch64-manylinux_2_17")
        .env("UV_NO_BUILD", "0");
    for k in [
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "UV_INDEX_URL",
        "UV_DEFAULT_INDEX",
    ] {
        cmd.env(k, &url);
    }
    for k in ["UV_INDEX", "UV_EXTRA_INDEX_URL"] {
        cmd.env(k, &url);
    }
    for k in ["PIP_FIND_LINKS", "UV_FIND_LINKS"] {
        cmd.env(k, rogue.join("files"));
    }
    cmd.output().unwrap()
}

/// Issue 20, class 10: the locking machine's pip and uv settings (variables and config files,
/// user and project) never reach the resolver, so the closure, and the lock, depend on the spec
/// alone: a rogue index they all point at, whose torch pulls another package and whose
/// numpy-like is newer, changes nothing, byte for byte.
#[test]
fn the_hosts_pip_and_uv_settings_never_change_the_closure() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let rogue = tempdir();
    add_wheels(
        rogue.path(),
        r#"[{"name": "torch", "version": "2.14.1", "requires": ["rogue-dep"]},
            {"name": "rogue-dep", "version": "1.0"},
            {"name": "numpy-like", "version": "9.9"},
            {"name": "nvidia-x", "version": "9.9", "tag": "py3-none-manylinux_2_17_x86_64"}]"#,
    );
    let spec = closure_spec("c-host", "3.13", "2.28", idx.path(), "");
    let clean = tempdir();
    write(clean.path(), "envbuild.toml", &spec);
    let out = lock_in(clean.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let hostile = tempdir();
    write(hostile.path(), "envbuild.toml", &spec);
    let out = lock_with_hostile_settings(hostile.path(), rogue.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read_to_string(hostile.path().join("envbuild.lock")).unwrap(),
        fs::read_to_string(clean.path().join("envbuild.lock")).unwrap()
    );
    assert_eq!(
        closure_of(hostile.path()),
        pairs(&[
            ("numpy-like", "1.2"),
            ("nvidia-x", "1.0"),
            ("torch", "2.14.1")
        ])
    );
    let text = fs::read_to_string(hostile.path().join("envbuild.lock")).unwrap();
    assert!(
        !text.contains(&rogue.path().display().to_string()),
        "{text}"
    );
}

/// Issue 20, class 1: nothing a spec names is built (or run) on the locking machine. Source
/// distributions whose `setup.py` would leave a marker file: one plain, one with static
/// metadata, each on the index (uv refuses both: `--no-build`) and as a pinned `https://` direct
/// reference (uv reads the static one's metadata without building it; envbuild then refuses
/// it, as only a build in the image could install it); and a git reference, refused before any
/// network. Each is CLOSURE_NEEDS_WHEEL naming it; no lock is
/// written and no marker appears.
#[test]
fn code_never_runs_at_lock_time() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let marks = tempdir();
    let mark = |n: &str| marks.path().join(n).display().to_string();
    add_wheels(
        idx.path(),
        &serde_json::json!([
            {"name": "setup-runs", "version": "1.0",
             "sdist": format!("open({:?}, 'w').write('built')", mark("dynamic"))},
            {"name": "static-sdist", "version": "1.0", "static": true,
             "sdist": format!("open({:?}, 'w').write('built')", mark("static"))}
        ])
        .to_string(),
    );
    let certs = tempdir();
    let (ca, cert, key) = crate::conda_closure::tls_files(certs.path(), "localhost");
    let server =
        crate::conda_closure::tls_server(idx.path(), &cert, &key, &certs.path().join("port"));
    let direct = |file: &str| {
        let sha = sha256_file(&idx.path().join("files").join(file));
        format!(
            "https://localhost:{}/files/{file}#sha256={sha}",
            server.port
        )
    };
    let git = format!("x @ git+https://localhost:1/x.git@{}", "a".repeat(40));
    let cases = [
        (
            "setup-runs==1.0".to_string(),
            "Wheels are required for `setup-runs`",
        ),
        (
            "static-sdist==1.0".to_string(),
            "Wheels are required for `static-sdist`",
        ),
        (
            format!("setup-runs @ {}", direct("setup_runs-1.0.tar.gz")),
            "setup_runs-1.0.tar.gz",
        ),
        (
            format!("static-sdist @ {}", direct("static_sdist-1.0.tar.gz")),
            "direct reference to a source distribution",
        ),
        (git.clone(), "is a git reference"),
    ];
    for (req, says) in cases {
        let work = tempdir();
        write(
            work.path(),
            "envbuild.toml",
            &closure_spec(
                "c-build",
                "3.11",
                "2.28",
                idx.path(),
                &format!("pip = [\"{req}\"]"),
            ),
        );
        let out = envbuild()
            .current_dir(work.path())
            .args(["lock", "envbuild.toml"])
            .env("SSL_CERT_FILE", &ca)
            .env_remove("PIP_CERT")
            .env_remove("REQUESTS_CA_BUNDLE")
            .env_remove("SSL_CERT_DIR")
            .env("NO_PROXY", "localhost")
            .env("no_proxy", "localhost")
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{req}: {err}");
        assert!(
            err.contains("CLOSURE_NEEDS_WHEEL") && err.contains(says),
            "{req}: {err}"
        );
        assert!(!work.path().join("envbuild.lock").exists(), "{req}");
        assert!(
            fs::read_dir(marks.path()).unwrap().next().is_none(),
            "{req}: built"
        );
    }
    assert!(
        git.contains("localhost:1/"),
        "the git reference is refused before any fetch"
    );
}

/// The host's pip installing `requirements` into `target` as the image does (`--no-deps
/// --require-hashes`), with none of this machine's pip settings: (exit code, its output).
fn pip_install(requirements: &std::path::Path, target: &std::path::Path) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new("python3");
    cmd.args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--require-hashes",
        "--no-cache-dir",
    ])
    .args(["--disable-pip-version-check", "--target"])
    .arg(target)
    .arg("-r")
    .arg(requirements)
    .env("PIP_CONFIG_FILE", "/dev/null");
    for (k, _) in std::env::vars() {
        if k.starts_with("PIP_") && k != "PIP_CONFIG_FILE" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Issue 23, mirrors: a closure locked against one index installs from a mirror on 127.0.0.1
/// that holds the same files, with no relock: `render --pip-mirror` changes only the index line
/// of requirements.txt and environment.yml (the lock and every other file stay as they are),
/// pip fetches every file from the mirror and checks it against the lock's sha256; a mirror
/// that serves other bytes under a locked name is refused by pip, and envbuild's diagnosis
/// (MIRROR_HASH_MISMATCH) names the package and the mirror.
#[test]
fn a_closure_installs_through_a_mirror_whose_files_the_hashes_check() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c-mirror", "3.11", "2.36", idx.path(), ""),
    );
    assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
    let lock_before = fs::read(work.path().join("envbuild.lock")).unwrap();
    // The mirror: a copy of the index, served over HTTP; the original is then gone.
    let mirror_dir = tempdir();
    for d in ["files", "simple"] {
        copy_dir(&idx.path().join(d), &mirror_dir.path().join(d));
    }
    let moved = tempdir();
    fs::rename(idx.path(), moved.path().join("gone")).unwrap();
    let log = work.path().join("mirror.log");
    let server = mirror_server(mirror_dir.path(), &log);
    let url = format!("http://127.0.0.1:{}/simple", server.port);
    let render = |out: &str, mirror: Option<&str>| {
        let mut cmd = envbuild();
        cmd.current_dir(work.path())
            .args(["render", "envbuild.lock", "--out", out]);
        if let Some(m) = mirror {
            cmd.args(["--pip-mirror", m]);
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    };
    render("plain", None);
    render("mirrored", Some(&format!("{url}/")));
    assert_eq!(
        fs::read(work.path().join("envbuild.lock")).unwrap(),
        lock_before
    );
    let index_line = format!("--index-url file://{}/simple", idx.path().display());
    for f in files_under(&work.path().join("plain")) {
        let read = |d: &str| fs::read_to_string(work.path().join(d).join(&f)).unwrap();
        let (plain, mirrored) = (read("plain"), read("mirrored"));
        if f.starts_with("requirements") || f == "environment.yml" {
            assert!(plain.contains(&index_line), "{f}: {plain}");
            let expected = plain.replace(&index_line, &format!("--index-url {url}"));
            assert_eq!(mirrored, expected, "{f}: only the index line differs");
        } else {
            assert_eq!(mirrored, plain, "{f} changed with the mirror");
        }
    }
    let reqs = work.path().join("mirrored/requirements.txt");
    let (code, said) = pip_install(&reqs, &work.path().join("site"));
    assert_eq!(code, Some(0), "{said}");
    let asked = fs::read_to_string(&log).unwrap();
    for wheel in [
        "torch-2.14.1",
        "numpy_like-1.0",
        "nvidia_x-2.0",
        "oldpy_shim-1.0",
    ] {
        assert!(
            asked.contains(&format!("/files/{wheel}")),
            "{wheel}: {asked}"
        );
    }
    // The mirror now serves other bytes for a locked file (its own index agreeing with them).
    let wheel = mirror_dir
        .path()
        .join("files/numpy_like-1.0-py3-none-any.whl");
    let mut bytes = fs::read(&wheel).unwrap();
    bytes.extend_from_slice(b"tampered");
    fs::write(&wheel, bytes).unwrap();
    add_wheels(mirror_dir.path(), "[]");
    let (code, said) = pip_install(&reqs, &work.path().join("site2"));
    assert_eq!(code, Some(1), "{said}");
    let d = envbuild::core::closure::mirror_mismatch(&said, &url).expect("pip's hash refusal");
    assert_eq!(d.code, "MIRROR_HASH_MISMATCH");
    assert!(
        d.message.contains(&format!("the pip mirror `{url}`"))
            && d.message.contains(&format!(
                "numpy-like==1.0 from http://127.0.0.1:{}/files/numpy_like-1.0-py3-none-any.whl",
                server.port
            )),
        "{}",
        d.message
    );
    // A mirror URL that would carry credentials into the files is refused, unechoed.
    let out = envbuild()
        .current_dir(work.path())
        .args(["render", "envbuild.lock", "--out", "x", "--pip-mirror"])
        .arg("https://user:s3cret@mirror.example/simple")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr_of(&out).contains("s3cret"), "{}", stderr_of(&out));
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            fs::copy(&p, &dest).unwrap();
        }
    }
}

/// Without uv a closure cannot be resolved: RESOLVER_MISSING with the install command, before
/// anything else runs and with nothing written; a closure reused from the lock and a
/// `--no-closure` lock need no uv.
#[test]
fn without_uv_a_resolution_is_resolver_missing_with_the_install_command() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("c-nouv", "3.13", "2.28", idx.path(), ""),
    );
    let no_path = tempdir();
    let lock = |args: &[&str], uv: Option<&std::path::Path>| {
        let mut cmd = envbuild();
        cmd.current_dir(work.path())
            .args(["lock", "envbuild.toml"])
            .args(args);
        match uv {
            Some(p) => cmd.env("ENVBUILD_UV", p),
            None => cmd.env_remove("ENVBUILD_UV").env("PATH", no_path.path()),
        };
        cmd.output().unwrap()
    };
    let bogus = work.path().join("no-such-uv");
    for uv in [Some(bogus.as_path()), None] {
        let out = lock(&[], uv);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("RESOLVER_MISSING")
                && err.contains(envbuild::core::closure::UV_INSTALL)
                && err.contains("--no-closure"),
            "{err}"
        );
        assert!(!work.path().join("envbuild.lock").exists());
    }
    let out = lock(&["--no-closure"], Some(&bogus));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(closure_of(work.path()).is_empty());
    assert_eq!(lock_in(work.path(), &[]).status.code(), Some(0));
    let out = lock(&[], None);
    assert_eq!(out.status.code(), Some(0), "reused: {}", stderr_of(&out));
    assert_eq!(closure_of(work.path()).len(), 3);
}
