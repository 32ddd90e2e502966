//! The closure lock's Docker test: the image's own pip agrees with envbuild's resolution, an
//! image built from the closure passes the closure check, and a later install is drift. Its
//! fixtures (the made-up index) are the shared ones of tests/it/closure.rs (`support::closure`).

use crate::support::closure::*;
use crate::support::*;
use std::fs;
use std::path::Path;

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        the_images_pip_agrees_and_a_later_install_is_drift,
        a_closure_lock_pins_its_registry_base_by_digest,
        a_lock_change_outside_the_closure_reuses_the_install_layer,
        a_closure_builds_through_a_mirror_and_one_with_other_bytes_is_named,
    ]
}

/// Every file under `dir`, relative, with its bytes.
fn files_under(dir: &Path, prefix: &str, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = format!("{prefix}/{}", p.file_name().unwrap().to_string_lossy());
        if p.is_dir() {
            files_under(&p, &name, out);
        } else {
            out.insert(name, fs::read(&p).unwrap());
        }
    }
}

/// Build `dockerfile` with `files` through envbuild's engine layer; its tag.
fn build_image(
    d: &crate::engine_support::Docker,
    name: &str,
    dockerfile: String,
    mut files: std::collections::BTreeMap<String, Vec<u8>>,
) -> String {
    use sha2::{Digest, Sha256};
    files.insert("Dockerfile".into(), dockerfile.into_bytes());
    let mut h = Sha256::new();
    for (k, v) in &files {
        h.update(k.as_bytes());
        h.update([0u8]);
        h.update(v);
        h.update([0u8]);
    }
    let req = envbuild::infra::docker::build::BuildRequest {
        content_sha256: None,
        files,
        dockerfile: "Dockerfile".into(),
        target: String::new(),
        image_name: name.into(),
        variant: "base".into(),
        lock_hash: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: Default::default(),
        rebuild: false,
        build_args: Default::default(),
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    crate::engine_support::build_once(d, &req).unwrap_or_else(|f| panic!("building {name}: {f}"))
}

/// `envbuild test IMAGE --lock LOCK --gpus none --json`: the `closure` check's (status, code,
/// detail).
fn closure_check(image: &str, lock: &Path) -> (String, String, String) {
    let out = envbuild()
        .args(["test", image, "--gpus", "none", "--json", "--lock"])
        .arg(lock)
        .output()
        .unwrap();
    let stdout = stdout_of(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", stderr_of(&out)));
    let mut found = None;
    fn walk(v: &serde_json::Value, found: &mut Option<serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                if m.get("name").and_then(|n| n.as_str()) == Some("closure")
                    && m.contains_key("status")
                {
                    *found = Some(v.clone());
                }
                m.values().for_each(|x| walk(x, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, found)),
            _ => {}
        }
    }
    walk(&v, &mut found);
    let c = found.unwrap_or_else(|| panic!("no closure check in {stdout}"));
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("code"), s("detail"))
}

fn the_images_pip_agrees_and_a_later_install_is_drift() {
    let test = "the_images_pip_agrees_and_a_later_install_is_drift";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    if !crate::engine_support::real_smoke_script(test) {
        return;
    }
    // The index lives at the same absolute path on this machine and in the images, so one
    // `file://` URL serves the lock, the build and the container's own pip.
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    add_wheels(
        idx.path(),
        r#"[{"name": "numpy-like", "version": "0.9"}, {"name": "rogue", "version": "1.0"}]"#,
    );
    let mut files = std::collections::BTreeMap::new();
    files_under(idx.path(), "index", &mut files);
    let debian = crate::engine_support::debian_python_image(&d);
    let base = build_image(
        &d,
        "envbuild-test/closure-index",
        format!("FROM {debian}\nCOPY index/ {}/\n", idx.path().display()),
        files,
    );

    // The image's pip (Python 3.11, bookworm's glibc 2.36) resolves the same requirements.
    let work = tempdir();
    let spec = closure_spec("closure-docker", "3.11", "2.36", idx.path(), "")
        + &format!("\n[image]\nbase = \"{base}\"\nvariants = [\"runtime\"]\n");
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let locked = closure_of(work.path());
    let (code, report) = d.run_output(
        &base,
        &[
            "sh",
            "-c",
            &format!(
                "python3 -m pip install --dry-run --ignore-installed --quiet --report /tmp/r.json \
                 --index-url file://{}/simple torch==2.14.1 >&2 && cat /tmp/r.json",
                idx.path().display()
            ),
        ],
    );
    assert_eq!(code, 0, "{report}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let mut theirs: Vec<(String, String)> = report["install"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                envbuild::core::closure::canonical_name(i["metadata"]["name"].as_str().unwrap()),
                i["metadata"]["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    theirs.sort();
    assert_eq!(locked, theirs, "envbuild's closure vs the image's own pip");

    // Build from the closure: the image holds exactly it.
    let out = envbuild()
        .current_dir(work.path())
        .args(["image", "envbuild.toml", "--gpus", "none"])
        .env("ENVBUILD_RUN_ID", crate::engine_support::run_prefix())
        .output()
        .unwrap();
    let lock_text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    let lock = envbuild::core::lock::Lock::from_toml(&lock_text).unwrap();
    let tag = envbuild::core::render::image_tag(&lock, &lock.hash().unwrap(), "runtime");
    assert!(
        d.block_on(envbuild::infra::docker::images::inspect(&d.engine, &tag))
            .unwrap()
            .is_some(),
        "{tag} was not built: {}",
        stderr_of(&out)
    );
    let lock_path = work.path().join("envbuild.lock");
    let (status, code, detail) = closure_check(&tag, &lock_path);
    assert_eq!((status.as_str(), code.as_str()), ("pass", "OK"), "{detail}");

    // A later install replaces one package, adds another, removes a third.
    let drifted = build_image(
        &d,
        "envbuild-test/closure-drifted",
        format!(
            "FROM {tag}\nUSER root\nRUN python -m pip install --no-cache-dir --no-deps --index-url \
             file://{}/simple numpy-like==0.9 rogue==1.0 && python -m pip uninstall -y oldpy-shim\n",
            idx.path().display()
        ),
        Default::default(),
    );
    let (status, code, detail) = closure_check(&drifted, &lock_path);
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("fail", "CLOSURE_DRIFT"),
        "{detail}"
    );
    for part in [
        "numpy-like is 0.9, the lock has 1.0",
        "rogue 1.0 is not in the lock",
        "oldpy-shim 1.0 missing",
    ] {
        assert!(detail.contains(part), "{part} not in: {detail}");
    }
    // The base is per run too (the index's temp path is in it).
    for t in [&drifted, &tag, &base] {
        d.remove_image(t);
    }
    d.assert_no_smoke_container("after the closure images");
}

/// A closure lock whose base is in a registry (a tiny busybox pushed to one on 127.0.0.1, its
/// tag then removed from the engine) records the registry's digest, asked through the engine
/// without a pull; the rendered Dockerfile names it and the engine pulls and builds FROM it;
/// with the registry gone the digest is reused from the lock, `--upgrade` asks again (the
/// engine's pulled copy answers; a local-only or missing image is a BASE_DIGEST_UNAVAILABLE
/// warning that keeps the digest, an error with `base-digest = true`), and `--locked` on a
/// changed base refuses without asking.
fn a_closure_lock_pins_its_registry_base_by_digest() {
    let test = "a_closure_lock_pins_its_registry_base_by_digest";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    let Some(r) = crate::push::registry(test) else {
        return;
    };
    let busybox = crate::engine_support::busybox_image(&d);
    let repo = format!(
        "{}/envbuild-test/digest-base-{}",
        r.addr,
        crate::docker::nonce()
    );
    d.tag_image(&busybox, &repo, "1");
    let digest = d
        .block_on(envbuild::infra::docker::registry::push(
            &d.engine,
            &repo,
            "1",
            None,
            &mut |_| {},
        ))
        .unwrap_or_else(|f| panic!("{f}"));
    // Only the registry has the tag now: the digest can come from nowhere else.
    d.remove_image(&format!("{repo}:1"));
    d.remove_image(&format!("{repo}@{digest}"));

    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    let spec = closure_spec("digest", "3.11", "2.36", idx.path(), "")
        .replace("base-digest = false\n", "")
        + &format!("\n[image]\nbase = \"{repo}:1\"\n");
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock_file = work.path().join("envbuild.lock");
    let base_digest = || {
        envbuild::core::lock::Lock::from_toml(&fs::read_to_string(&lock_file).unwrap())
            .unwrap()
            .image
            .base_digest
    };
    assert_eq!(base_digest().as_deref(), Some(digest.as_str()));

    let out = envbuild()
        .current_dir(work.path())
        .args(["render", "envbuild.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let dockerfile = fs::read_to_string(work.path().join("render/Dockerfile")).unwrap();
    let from = format!("FROM {repo}:1@{digest} AS ");
    assert!(dockerfile.contains(&from), "no `{from}` in:\n{dockerfile}");

    // The engine pulls that reference (tag and digest) and builds FROM it.
    let pinned = format!("{repo}:1@{digest}");
    d.block_on(envbuild::infra::docker::registry::pull(
        &d.engine,
        &pinned,
        None,
        &mut |_| {},
    ))
    .unwrap_or_else(|f| panic!("pulling {pinned}: {f}"));
    let child = build_image(
        &d,
        "envbuild-test/digest-child",
        format!("FROM {pinned}\nLABEL dev.envbuild.test-digest={digest}\n"),
        Default::default(),
    );
    d.remove_image(&child);

    // The registry is gone: an unchanged base reuses the lock's digest.
    drop(r);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(base_digest().as_deref(), Some(digest.as_str()));
    // --upgrade asks again: the engine's pulled copy answers (RepoDigests) for the registry.
    d.tag_image(&pinned, &repo, "1");
    let out = lock_in(work.path(), &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(base_digest().as_deref(), Some(digest.as_str()));
    d.remove_image(&format!("{repo}:1"));
    d.remove_image(&format!("{repo}@{digest}"));
    // A tag only this engine has has no digest a build could name; nor has a missing one:
    // `--upgrade` then keeps the lock's digest with a warning, and where the spec asks for the
    // digest (`base-digest = true`) it refuses and writes nothing.
    let required = spec.replace("[lock]\n", "[lock]\nbase-digest = true\n");
    for (text, code) in [(&spec, 0), (&required, 1)] {
        write(work.path(), "envbuild.toml", text);
        d.tag_image(&busybox, &repo, "1");
        let local_only = lock_in(work.path(), &["--upgrade"]);
        d.remove_image(&format!("{repo}:1"));
        let missing = lock_in(work.path(), &["--upgrade"]);
        for (out, says) in [(local_only, "only on this engine"), (missing, "neither")] {
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(code), "{err}");
            assert!(
                err.contains("BASE_DIGEST_UNAVAILABLE") && err.contains(says),
                "{err}"
            );
        }
        assert_eq!(
            base_digest().as_deref(),
            Some(digest.as_str()),
            "kept, or (a refusal) nothing written"
        );
    }
    write(work.path(), "envbuild.toml", &spec);
    write(
        work.path(),
        "envbuild.toml",
        &spec.replace(&format!("{repo}:1"), &format!("{repo}:2")),
    );
    let out = lock_in(work.path(), &["--locked"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("CLOSURE_NEEDS_RESOLUTION"),
        "{}",
        stderr_of(&out)
    );
}

/// Issue 12's "cheap rebuild": a closure lock built once, then the spec's target driver changes
/// (the lock's bytes change, the closure does not). The install stage's inputs
/// (requirements.txt, python-env.sh) render to the same bytes, so the rebuild answers the pip
/// install from the build cache (its step `cached`, no pip output) while the image is still
/// rebuilt for the new lock (new tag, new labels). The closure holds a 96 MiB wheel so that the
/// figures, printed for the README, have an install step worth skipping.
fn a_lock_change_outside_the_closure_reuses_the_install_layer() {
    const HEAVY: &str = "pip = [\"envbuild-heavydep==1.0\"]";
    let test = "a_lock_change_outside_the_closure_reuses_the_install_layer";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    // The made-up index plus one heavy dependency (a 96 MiB wheel of incompressible data), so
    // that the install step costs what a real one does: time spent unpacking and committing.
    let idx = tempdir();
    let heavy = crate::buildkit::big_wheel(idx.path(), "envbuild_heavydep", 96 << 20);
    fs::create_dir_all(idx.path().join("files")).unwrap();
    fs::rename(
        &heavy,
        idx.path().join("files").join(heavy.file_name().unwrap()),
    )
    .unwrap();
    fs::remove_dir_all(idx.path().join("wheels")).unwrap();
    fs::remove_dir_all(idx.path().join("src-envbuild_heavydep")).unwrap();
    add_wheels(idx.path(), WHEELS);
    let mut files = std::collections::BTreeMap::new();
    files_under(idx.path(), "index", &mut files);
    let debian = crate::engine_support::debian_python_image(&d);
    // The index at the same absolute path as on this machine (a per-run path: a cold build).
    let base = build_image(
        &d,
        "envbuild-test/closure-rebuild-index",
        format!("FROM {debian}\nCOPY index/ {}/\n", idx.path().display()),
        files,
    );
    let work = tempdir();
    let spec = |driver: &str| {
        closure_spec("closure-rebuild", "3.11", "2.36", idx.path(), HEAVY)
            .replace("driver = \"580.95.05\"", &format!("driver = \"{driver}\""))
            + &format!("\n[image]\nbase = \"{base}\"\nvariants = [\"runtime\"]\n")
    };
    // Lock, render (the install inputs) and build; the image's tag and the progress.
    let round = |driver: &str, out: &str| {
        let text = spec(driver);
        assert!(text.contains(driver), "{text}");
        write(work.path(), "envbuild.toml", &text);
        let locked = lock_in(work.path(), &[]);
        assert_eq!(locked.status.code(), Some(0), "{}", stderr_of(&locked));
        let rendered = envbuild()
            .current_dir(work.path())
            .args(["render", "envbuild.toml", "--out", out])
            .output()
            .unwrap();
        assert_eq!(rendered.status.code(), Some(0), "{}", stderr_of(&rendered));
        let started = std::time::Instant::now();
        // The stand-in torch of the index fails the smoke test; the build is what counts here.
        let built = envbuild()
            .current_dir(work.path())
            .args(["image", "envbuild.toml", "--gpus", "none", "--verbose"])
            .env("CI", "true")
            .env("ENVBUILD_CACHE_DIR", work.path().join("verdicts"))
            .env("ENVBUILD_RUN_ID", crate::engine_support::run_prefix())
            .output()
            .unwrap();
        let took = started.elapsed();
        let lock_text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
        let lock = envbuild::core::lock::Lock::from_toml(&lock_text).unwrap();
        let tag = envbuild::core::render::image_tag(&lock, &lock.hash().unwrap(), "runtime");
        (lock_text, tag, stderr_of(&built), took)
    };
    let (lock1, tag1, err1, cold) = round("580.95.05", "r1");
    let (lock2, tag2, err2, warm) = round("590.48.01", "r2");
    for tag in [&tag1, &tag2] {
        let there = d.block_on(envbuild::infra::docker::images::inspect(&d.engine, tag));
        assert!(there.unwrap().is_some(), "{tag} was not built");
    }
    assert_ne!(lock1, lock2, "the driver is part of the lock");
    assert_ne!(tag1, tag2);
    let closure = closure_of(work.path());
    assert!(
        closure.contains(&("envbuild-heavydep".into(), "1.0".into())),
        "{closure:?}"
    );
    for f in ["requirements.txt", "envbuild/python-env.sh"] {
        let read = |out: &str| fs::read(work.path().join(out).join(f)).unwrap();
        assert_eq!(read("r1"), read("r2"), "{f} changed with the driver");
    }
    // The first install layer's step (torch); no `Successfully installed` covers the others.
    let pip_step = "python-env.sh wheels";
    let cached = |err: &str| crate::cache::step_cached(err, "runtime", pip_step);
    assert_eq!(cached(&err1), Some(false), "{err1}");
    // pip says `Successfully installed`; uv `Installed N packages in ...`. Which one installs
    // depends on the engine: the made-up index serves no uv, but the shared pip cache mount
    // holds the pinned uv once any build from PyPI fetched it.
    let installed = |err: &str| {
        err.contains("Successfully installed")
            || (err.contains("Installed ")
                && (err.contains(" package in ") || err.contains(" packages in ")))
    };
    assert!(installed(&err1), "{err1}");
    assert_eq!(
        cached(&err2),
        Some(true),
        "the closure was installed again:\n{err2}"
    );
    assert!(!installed(&err2), "{err2}");
    eprintln!(
        "figures: closure image, cold build {:.1} s; after a driver change (new lock, same \
         closure) {:.1} s",
        cold.as_secs_f64(),
        warm.as_secs_f64()
    );
    for t in [&tag1, &tag2, &base] {
        d.remove_image(t);
    }
    d.assert_no_smoke_container("after the closure rebuild");
}

/// Issue 23, mirrors, in a real build: a closure locked against an index the build cannot reach
/// builds with `image --pip-mirror` from a mirror holding the same files (a `file://` copy in
/// the base image: a build container cannot reach this machine's 127.0.0.1, where
/// tests/it/closure.rs serves one to the host's pip), the lock untouched and the image holding
/// exactly the closure; a mirror whose copy of one wheel holds other bytes fails the build with
/// MIRROR_HASH_MISMATCH naming that package and the mirror.
fn a_closure_builds_through_a_mirror_and_one_with_other_bytes_is_named() {
    let test = "a_closure_builds_through_a_mirror_and_one_with_other_bytes_is_named";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    if !crate::engine_support::real_smoke_script(test) {
        return;
    }
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    // Two mirrors in one base: `good` a copy of the index, `bad` the same with numpy-like's
    // wheel altered (and its own index pages agreeing with the altered file).
    let mirrors = tempdir();
    let (good, bad) = (mirrors.path().join("good"), mirrors.path().join("bad"));
    for m in [&good, &bad] {
        add_wheels(m, WHEELS);
        for f in fs::read_dir(idx.path().join("files")).unwrap() {
            let f = f.unwrap().path();
            fs::copy(&f, m.join("files").join(f.file_name().unwrap())).unwrap();
        }
        add_wheels(m, "[]");
    }
    let altered = bad.join("files/numpy_like-1.0-py3-none-any.whl");
    let mut bytes = fs::read(&altered).unwrap();
    bytes.extend_from_slice(b"altered");
    fs::write(&altered, bytes).unwrap();
    add_wheels(&bad, "[]");
    let mut files = std::collections::BTreeMap::new();
    files_under(mirrors.path(), "mirrors", &mut files);
    let debian = crate::engine_support::debian_python_image(&d);
    let base = build_image(
        &d,
        "envbuild-test/closure-mirrors",
        format!(
            "FROM {debian}\nCOPY mirrors/ {}/\n",
            mirrors.path().display()
        ),
        files,
    );
    let work = tempdir();
    let spec = closure_spec("closure-mirror", "3.11", "2.36", idx.path(), "")
        + &format!("\n[image]\nbase = \"{base}\"\nvariants = [\"runtime\"]\n");
    write(work.path(), "envbuild.toml", &spec);
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock_path = work.path().join("envbuild.lock");
    let lock_text = fs::read_to_string(&lock_path).unwrap();
    let image = |mirror: &Path, extra: &[&str]| {
        envbuild()
            .current_dir(work.path())
            .args(["image", "envbuild.toml", "--gpus", "none", "--pip-mirror"])
            .arg(format!("file://{}/simple", mirror.display()))
            .args(extra)
            .env("ENVBUILD_RUN_ID", crate::engine_support::run_prefix())
            .env("ENVBUILD_CACHE_DIR", work.path().join("verdicts"))
            .output()
            .unwrap()
    };
    // The locked index is not in the base: only the mirror can serve the build.
    let out = image(&good, &[]);
    let lock = envbuild::core::lock::Lock::from_toml(&lock_text).unwrap();
    let tag = envbuild::core::render::image_tag(&lock, &lock.hash().unwrap(), "runtime");
    assert!(
        d.block_on(envbuild::infra::docker::images::inspect(&d.engine, &tag))
            .unwrap()
            .is_some(),
        "{tag} was not built through the mirror: {}",
        stderr_of(&out)
    );
    assert_eq!(fs::read_to_string(&lock_path).unwrap(), lock_text);
    let (status, code, detail) = closure_check(&tag, &lock_path);
    assert_eq!((status.as_str(), code.as_str()), ("pass", "OK"), "{detail}");

    let out = image(&bad, &["--rebuild"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("MIRROR_HASH_MISMATCH")
            && err.contains(&format!("the pip mirror `file://{}/simple`", bad.display()))
            && err.contains("numpy-like==1.0 from file://"),
        "{err}"
    );
    for t in [&tag, &base] {
        d.remove_image(t);
    }
    d.assert_no_smoke_container("after the mirror builds");
}
