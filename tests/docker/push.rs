//! `image --push`, `--pull` and `test --show-verdict` against a real registry: Debian's
//! `docker-registry` (distribution 2.8) started by each test on a free 127.0.0.1 port with a
//! temporary storage folder (never the system service). Repositories carry a per-run nonce;
//! a test removes only the images it made.

use crate::docker::{build_and_test, envbuild, interrupt, nonce, options, rendered};
use crate::engine_support as support;
use envbuild::core::image_ref::Repository;
use envbuild::infra::docker::build::{BuildEvent, PullPolicy};
use envbuild::infra::docker::{images, registry as reg};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        pushed_image_skips_on_the_registrys_word_and_its_verdict_reads_back,
        a_failing_image_is_not_pushed,
        a_base_in_the_registry_is_pulled_by_digest,
        a_pushed_image_is_the_next_builds_registry_cache,
    ]
}

/// A registry of this test's own; stopped (and its storage removed) when dropped.
pub(crate) struct Registry {
    child: Child,
    pub(crate) addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `docker-registry serve` on a free port; skip (fail in CI) when it is not installed.
pub(crate) fn registry(test: &str) -> Option<Registry> {
    registry_with(test, "")
}

/// [`registry`] with `extra`, top-level sections of its config (`auth:` for a token server).
pub(crate) fn registry_with(test: &str, extra: &str) -> Option<Registry> {
    if !support::tool_found("docker-registry") {
        support::skip_or_fail(
            test,
            &support::missing_tool("docker-registry", "docker-registry"),
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
             delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{extra}",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start docker-registry");
    let r = Registry {
        child,
        addr: addr.clone(),
        _dir: dir,
    };
    let started = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the registry at {addr} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(r)
}

/// A run whose image passed, pushed; then, with the image gone from the engine and a fresh
/// verdict cache, a second run skips build and test on the registry's word (well under 2 s),
/// leaving the engine without the image; and `test --show-verdict` reads the verdict back.
fn pushed_image_skips_on_the_registrys_word_and_its_verdict_reads_back() {
    let test = "pushed_image_skips_on_the_registrys_word_and_its_verdict_reads_back";
    let Some(d) = support::engine(test) else {
        return;
    };
    let Some(r) = registry(test) else { return };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    std::fs::write(&spec, support::spec_on_base(&format!("push-{n}"), &base)).unwrap();
    let repo = format!("{}/envbuild-test/push-{n}", r.addr);
    let image = |cache: &std::path::Path, extra: &[&str]| {
        let started = Instant::now();
        let (out, err, doc) = crate::docker::ci_json(
            envbuild()
                .arg("image")
                .arg(&spec)
                .args(["--gpus", "none", "--json", "--push", &repo])
                .args(extra)
                .env("ENVBUILD_CACHE_DIR", cache),
        );
        (out.status.code(), doc, err, started.elapsed())
    };
    let cache = tempfile::tempdir().unwrap();
    let (code, doc, err, _) = image(cache.path(), &["--update-lock"]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["builds"][0]["skipped"], false, "{doc}");
    let local_tag = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
    let digest = doc["pushed"][0]["digest"].as_str().unwrap().to_string();
    assert!(pushed.starts_with(&format!("{repo}:runtime-")), "{doc}");
    assert!(digest.starts_with("sha256:"), "{doc}");
    assert!(err.contains("pushed"), "{err}");

    // The engine forgets the image; the verdict cache is gone too.
    d.remove_image(&local_tag);
    d.remove_image(&pushed);
    drop(cache);
    let cache = tempfile::tempdir().unwrap();
    let (code, doc, err, took) = image(cache.path(), &[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["skipped"], "registry", "{doc}\n{err}");
    assert_eq!(doc["verdict"], "pass", "{doc}");
    assert_eq!(doc["pushed"][0]["digest"], digest.as_str(), "{doc}");
    assert!(doc["builds"].as_array().unwrap().is_empty(), "{doc}");
    assert!(
        took < Duration::from_secs(2),
        "the registry no-op took {took:?}"
    );
    for name in [&local_tag, &pushed, &format!("{pushed}.verdict")] {
        let there = d.block_on(images::inspect(&d.engine, name)).unwrap();
        assert!(there.is_none(), "`{name}` is on the engine after the no-op");
    }

    // The verdict, read back with no local cache at all.
    let out = envbuild()
        .args(["test", &pushed, "--show-verdict", "--json"])
        .env("ENVBUILD_CACHE_DIR", dir.path().join("no-cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
    assert_eq!(shown["holds"], true, "{shown}");
    assert_eq!(shown["digest"], digest.as_str(), "{shown}");
    assert_eq!(shown["verdict"]["image_digest"], digest.as_str(), "{shown}");
    assert_eq!(shown["verdict"]["mode"], "cpu", "{shown}");
    assert_eq!(shown["verdict"]["passed"], true, "{shown}");
    assert_eq!(shown["verdict"]["report"]["status"], "pass", "{shown}");
    assert!(err.contains("in cpu mode"), "{err}");
    d.assert_no_smoke_container("after the registry runs");
}

/// An image whose smoke test fails is never pushed: neither it nor a verdict is in the registry.
fn a_failing_image_is_not_pushed() {
    let test = "a_failing_image_is_not_pushed";
    let Some(d) = support::engine(test) else {
        return;
    };
    let Some(r) = registry(test) else { return };
    let report = support::canned_report("fail", &[("torch_import", "fail", "TORCH_MISSING")]);
    let base = support::reporting_image(&d, "push-fail", &report, 1);
    let n = nonce();
    let rendered = rendered(
        &format!("envbuild-test/push-fail-{n}"),
        &format!("push-fail-{n}"),
        &[("Dockerfile", &format!("FROM {base} AS runtime\n"))],
    );
    let repo = Repository::parse(&format!("{}/envbuild-test/push-fail-{n}", r.addr)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut opts = options(cache.path(), false);
    opts.push = Some(repo.clone());
    let run = d
        .block_on(build_and_test(&d.engine, &rendered, &opts, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    assert!(!run.smokes[0].passed(), "the canned report fails");
    assert!(run.published.is_empty());
    let tag = envbuild::app::publish::variant_tag("runtime", &rendered.lock_hash);
    for t in [tag.clone(), format!("{tag}.verdict")] {
        let remote = d
            .block_on(reg::remote_digest(&d.engine, &repo.tagged(&t), None))
            .unwrap();
        assert_eq!(remote, None, "{t} reached the registry");
    }
    d.remove_image(&run.builds[0].1.tags[0]);
    d.assert_no_smoke_container("after the failing image");
}

/// A base pushed to the registry beforehand, then removed from the engine, is pulled by digest
/// (`--pull missing`, the default) and the build goes on; with `--pull never` it is
/// `BASE_IMAGE_MISSING`.
fn a_base_in_the_registry_is_pulled_by_digest() {
    let test = "a_base_in_the_registry_is_pulled_by_digest";
    let Some(d) = support::engine(test) else {
        return;
    };
    let Some(r) = registry(test) else { return };
    let n = nonce();
    // A base of its own (a label makes its id unique), so that removing it removes it.
    let report = support::canned_report("pass", &[("torch_import", "pass", "OK")]);
    let stand_in = support::reporting_image(&d, "push-pass", &report, 0);
    let base_name = format!("{}/envbuild-test/base-{n}", r.addr);
    let made = rendered(
        &base_name,
        &format!("base-{n}"),
        &[(
            "Dockerfile",
            &format!("FROM {stand_in} AS base\nLABEL dev.envbuild.test-nonce={n}\n"),
        )],
    );
    let base_cache = tempfile::tempdir().unwrap();
    let mut opts = options(base_cache.path(), false);
    opts.variants = vec!["base".into()];
    let built = d
        .block_on(build_and_test(&d.engine, &made, &opts, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    let base_tag = built.builds[0].1.tags[0].clone();
    let (name, tag) = base_tag.rsplit_once(':').unwrap();
    let digest = d
        .block_on(reg::push(&d.engine, name, tag, None, &mut |_| {}))
        .unwrap_or_else(|f| panic!("{f}"));
    d.remove_image(&base_tag);
    let by_digest = format!("{base_name}@{digest}");
    assert!(d
        .block_on(images::inspect(&d.engine, &by_digest))
        .unwrap()
        .is_none());

    let child = rendered(
        &format!("envbuild-test/pulled-{n}"),
        &format!("pulled-{n}"),
        &[(
            "Dockerfile",
            &format!("FROM {by_digest} AS runtime\nLABEL x=1\n"),
        )],
    );
    let cache = tempfile::tempdir().unwrap();
    let mut opts = options(cache.path(), false);
    opts.pull = PullPolicy::Never;
    let refused = d.block_on(build_and_test(&d.engine, &child, &opts, interrupt(&d)));
    let f = refused
        .err()
        .expect("--pull never builds nothing without the base");
    assert_eq!(f.diagnostics[0].code, "BASE_IMAGE_MISSING", "{f}");

    opts.pull = PullPolicy::Missing;
    let mut pulled = Vec::new();
    let run = d
        .block_on(envbuild::app::image::build_and_test(
            &d.engine,
            &child,
            &opts,
            interrupt(&d),
            &mut |e| {
                if let envbuild::app::image::ImageEvent::Build {
                    event: BuildEvent::Pull { image, .. },
                    ..
                } = e
                {
                    pulled.push(image);
                }
            },
        ))
        .unwrap_or_else(|f| panic!("{f}"));
    assert!(
        pulled.iter().all(|i| i == &by_digest) && !pulled.is_empty(),
        "{pulled:?}"
    );
    assert!(run.smokes[0].passed(), "the stand-in reports a pass");
    assert!(d
        .block_on(images::inspect(&d.engine, &by_digest))
        .unwrap()
        .is_some());
    d.remove_image(&run.builds[0].1.tags[0]);
    d.remove_image(&by_digest);
    d.assert_no_smoke_container("after the pull");
}

/// With `--push` and BuildKit, the image carries an inline cache and `VARIANT-cache` moves to
/// it after proof; the next build of the variant (a changed late layer, the local images gone)
/// asks BuildKit to read that cache, and BuildKit's status stream says it imported it. On a
/// shared engine the local build cache may answer the unchanged steps too, so what this proves
/// is that the registry cache is requested and read, not that it alone made them CACHED.
fn a_pushed_image_is_the_next_builds_registry_cache() {
    let test = "a_pushed_image_is_the_next_builds_registry_cache";
    let Some(d) = support::engine(test) else {
        return;
    };
    if std::env::var("ENVBUILD_BUILDER").is_ok_and(|b| b.trim() == "legacy") {
        return;
    }
    let Some(r) = registry(test) else { return };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    let repo = format!("{}/envbuild-test/cache-{n}", r.addr);
    let cache_ref = format!("{repo}:runtime-cache");
    let install_ref = format!("{repo}:install-cache");
    let extra = format!("{}/envbuild-test/elsewhere-{n}:runtime-cache", r.addr);
    let skipped = format!("{extra}: not in the registry");
    let image = |name: &str| {
        std::fs::write(&spec, support::spec_on_base(name, &base)).unwrap();
        let out = envbuild()
            .arg("image")
            .arg(&spec)
            .args(["--gpus", "none", "--json", "--verbose", "--update-lock"])
            .args(["--push", &repo, "--cache-from", &extra])
            .env("ENVBUILD_CACHE_DIR", dir.path().join("verdicts"))
            .env("CI", "true")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}\n{err}"));
        assert_eq!(out.status.code(), Some(0), "{doc}\n{err}");
        assert_eq!(doc["builds"][0]["skipped"], false, "{doc}");
        // The other repository is never pushed: it is said and left out of the build.
        assert!(err.contains(&skipped), "no `{skipped}` in:\n{err}");
        let local = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
        let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
        let digest = doc["pushed"][0]["digest"].as_str().unwrap().to_string();
        // BuildKit makes the environment in the image's own stage (its layers are in the
        // inline cache): there is no install stage to push as a cache of its own.
        assert!(doc["install_cache"].is_null(), "{doc}");
        (err, local, pushed, digest)
    };
    let remote = |reference: &str| {
        d.block_on(reg::remote_digest(&d.engine, reference, None))
            .unwrap()
    };

    // First build: no cache in the registry yet (a missing cache is no error), then the
    // moving tag names the proven image.
    let (err, local, pushed, digest) = image(&format!("cache-{n}"));
    let said = format!("[runtime] cache from: none (skipped: {skipped}; {cache_ref}: not in");
    assert!(err.contains(&said), "no `{said}` in:\n{err}");
    assert_eq!(remote(&cache_ref).as_deref(), Some(digest.as_str()));
    assert!(
        remote(&install_ref).is_none(),
        "{install_ref} was pushed:\n{err}"
    );
    let there = d.block_on(images::inspect(&d.engine, &cache_ref)).unwrap();
    assert!(
        there.is_none(),
        "the cache tag {cache_ref} stays off the engine"
    );
    d.remove_image(&local);
    d.remove_image(&pushed);

    // A changed late layer (the image title label): a new lock, a new content tag, and the
    // registry cache read back.
    let (err, local2, pushed2, digest2) = image(&format!("cache-{n}-renamed"));
    assert_ne!(pushed2, pushed);
    let said = format!("[runtime] cache from: {cache_ref} (skipped: {skipped})");
    assert!(err.contains(&said), "no `{said}` in:\n{err}");
    let import = format!("importing cache manifest from {cache_ref}");
    assert!(err.contains(&import), "no `{import}` in:\n{err}");
    assert!(
        err.contains("cached"),
        "no step was answered from a cache:\n{err}"
    );
    assert_eq!(remote(&cache_ref).as_deref(), Some(digest2.as_str()));
    d.remove_image(&local2);
    d.remove_image(&pushed2);
}
