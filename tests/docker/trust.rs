//! Identity and verdicts under attack (issues 20 and 38): a run with other `--templates` builds
//! a new image and reuses no verdict, locally or from the registry; a verdict forged in the
//! registry (one that contradicts itself, or that another smoke script reached) lets no run
//! skip; an unrelated image carrying a real build's labels, tagged with its name, is not taken
//! for that build.

use crate::docker::{envbuild, nonce};
use crate::engine_support as support;
use crate::push::registry;
use envbuild::core::verdict::{TravellingVerdict, LABEL_VERDICT, LABEL_VERDICT_FOR};
use envbuild::infra::docker::{images, registry as reg};

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        other_templates_build_a_new_image_and_reuse_no_verdict,
        a_forged_registry_verdict_lets_no_run_skip,
        an_image_with_copied_labels_is_built_over_not_trusted,
        an_image_with_copied_labels_is_never_pushed_as_the_build,
    ]
}

/// `envbuild image SPEC --gpus G --json ARGS` with the verdict cache at `cache`: (exit code,
/// the JSON document, stderr).
fn image(
    spec: &std::path::Path,
    cache: &std::path::Path,
    gpus: &str,
    args: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let out = envbuild()
        .arg("image")
        .arg(spec)
        .args(["--gpus", gpus, "--json"])
        .args(args)
        .env("ENVBUILD_CACHE_DIR", cache)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}\n{err}"));
    (out.status.code(), doc, err)
}

/// A second run with a `--templates` folder that changes the Dockerfile gets a new tag, builds
/// (the old image is not taken for it) and runs the smoke test again (the old verdict is not
/// reused); the same templates again are a no-op.
fn other_templates_build_a_new_image_and_reuse_no_verdict() {
    let test = "other_templates_build_a_new_image_and_reuse_no_verdict";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    std::fs::write(&spec, support::spec_on_base(&format!("tpl-{n}"), &base)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (code, first, err) = image(&spec, cache.path(), "none", &["--update-lock"]);
    assert_eq!(code, Some(0), "{first}\n{err}");
    let tag = first["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let (code, again, err) = image(&spec, cache.path(), "none", &[]);
    assert_eq!(code, Some(0), "{again}\n{err}");
    assert_eq!(again["builds"][0]["skipped"], true, "{again}");
    assert_eq!(again["smoke"][0]["reused"], true, "{again}");

    let templates = dir.path().join("templates");
    let out = envbuild()
        .args(["templates", "dump"])
        .arg(&templates)
        .output()
        .unwrap();
    assert!(out.status.success());
    let df = std::fs::read_to_string(templates.join("Dockerfile.j2")).unwrap();
    let df = df.replacen(
        "FROM base AS runtime\n",
        "FROM base AS runtime\nLABEL dev.envbuild.test-templated=\"yes\"\n",
        1,
    );
    std::fs::write(templates.join("Dockerfile.j2"), df).unwrap();
    let t = templates.to_str().unwrap();
    let (code, other, err) = image(&spec, cache.path(), "none", &["--templates", t]);
    assert_eq!(code, Some(0), "{other}\n{err}");
    let other_tag = other["builds"][0]["tags"][0].as_str().unwrap().to_string();
    assert_ne!(other_tag, tag, "other templates, same tag");
    assert_eq!(other["builds"][0]["skipped"], false, "{other}");
    assert_eq!(other["smoke"][0]["reused"], false, "{other}");
    let info = d
        .block_on(images::inspect(&d.engine, &other_tag))
        .unwrap()
        .expect("the new image");
    assert_eq!(
        info.labels
            .get("dev.envbuild.test-templated")
            .map(String::as_str),
        Some("yes")
    );
    let (code, same, err) = image(&spec, cache.path(), "none", &["--templates", t]);
    assert_eq!(code, Some(0), "{same}\n{err}");
    assert_eq!(same["builds"][0]["skipped"], true, "{same}");
    assert_eq!(same["smoke"][0]["reused"], true, "{same}");
    d.remove_image(&tag);
    d.remove_image(&other_tag);
    d.assert_no_smoke_container("after the templates runs");
}

/// Replace the verdict beside `pushed` in the registry by `verdict`.
fn push_forged(d: &support::Docker, pushed: &str, digest: &str, verdict: &TravellingVerdict) {
    let (name, tag) = pushed.rsplit_once(':').unwrap();
    let verdict_tag = format!("{tag}.verdict");
    let json = serde_json::to_vec(verdict).unwrap();
    let label = verdict.to_label();
    d.block_on(reg::import_file_image(
        &d.engine,
        name,
        &verdict_tag,
        &json,
        &[(LABEL_VERDICT, &label), (LABEL_VERDICT_FOR, digest)],
    ))
    .unwrap_or_else(|f| panic!("{f}"));
    d.block_on(reg::push(&d.engine, name, &verdict_tag, None, &mut |_| {}))
        .unwrap_or_else(|f| panic!("{f}"));
    d.remove_image(&format!("{pushed}.verdict"));
}

/// A cpu-mode verdict relabelled `gpu` (its report and checks still say cpu), and a verdict
/// another smoke script reached, are pushed over the real one: a run asking for what they
/// claim does not skip on them.
fn a_forged_registry_verdict_lets_no_run_skip() {
    let test = "a_forged_registry_verdict_lets_no_run_skip";
    let Some(d) = support::engine(test) else {
        return;
    };
    let Some(r) = registry(test) else { return };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    std::fs::write(&spec, support::spec_on_base(&format!("forge-{n}"), &base)).unwrap();
    let repo = format!("{}/envbuild-test/forge-{n}", r.addr);
    let cache = tempfile::tempdir().unwrap();
    let push = ["--push", repo.as_str()];
    let (code, doc, err) = image(
        &spec,
        cache.path(),
        "none",
        &[&push[..], &["--update-lock"]].concat(),
    );
    assert_eq!(code, Some(0), "{doc}\n{err}");
    let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
    let digest = doc["pushed"][0]["digest"].as_str().unwrap().to_string();
    let local = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let real = envbuild::app::publish::show_verdict(&pushed)
        .unwrap_or_else(|f| panic!("{f}"))
        .verdict;
    assert_eq!(real.mode, "cpu");

    let mut relabelled = real.clone();
    relabelled.mode = "gpu".into();
    relabelled.gpus = "driver=550.54.15;gpus=GPU-forged".into();
    let mut other_script = real.clone();
    other_script.smoke_script_sha256 = "0".repeat(64);
    for (what, forged, gpus) in [
        ("a cpu report relabelled gpu", &relabelled, "all"),
        ("another smoke script's verdict", &other_script, "none"),
    ] {
        push_forged(&d, &pushed, &digest, forged);
        let fresh = tempfile::tempdir().unwrap();
        let (_, doc, err) = image(&spec, fresh.path(), gpus, &push);
        assert_ne!(
            doc["skipped"], "registry",
            "{what}: skipped on it\n{doc}\n{err}"
        );
        assert!(
            err.contains("registry"),
            "{what}: the reason is not said\n{err}"
        );
        d.remove_smoke_containers();
    }
    d.remove_image(&local);
    d.remove_image(&pushed);
    d.assert_no_smoke_container("after the forged verdicts");
}

/// Plant at `tag` an unrelated image: busybox with a stand-in `python3` that prints a passing
/// report, carrying `labels` (copied from a real build's `docker inspect`). Returns its id.
fn plant(
    d: &support::Docker,
    tag: &str,
    labels: &std::collections::HashMap<String, String>,
) -> String {
    let fake = support::reporting_image(
        d,
        "pass",
        &support::canned_report("pass", &[("torch_import", "pass", "OK")]),
        0,
    );
    let mut cmd = std::process::Command::new("docker");
    cmd.args(["build", "-q", "-t", tag])
        .env("DOCKER_BUILDKIT", "0");
    for (k, v) in labels {
        cmd.arg("--label").arg(format!("{k}={v}"));
    }
    let mut child = cmd
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the docker CLI");
    use std::io::Write;
    let dockerfile = format!("FROM {fake}\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dockerfile.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "docker build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = d
        .block_on(images::inspect(&d.engine, tag))
        .unwrap()
        .expect("the planted image");
    assert_eq!(&info.labels, labels, "the labels are copied whole");
    info.id
}

/// Issue 38, class 4: an unrelated image with a real build's labels copied onto it, tagged with
/// the name envbuild gives that build, is not taken as "built from this lock": the build runs
/// (said, with the planted image's id in `--json`), the planted image is never smoke-tested or
/// reused, and the tag names envbuild's own build again. That holds for a record that knows the
/// real image (the tag moved under it) and for a fresh machine with no record at all; an image
/// envbuild built and recorded is still reused.
fn an_image_with_copied_labels_is_built_over_not_trusted() {
    let test = "an_image_with_copied_labels_is_built_over_not_trusted";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    std::fs::write(&spec, support::spec_on_base(&format!("planted-{n}"), &base)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (code, first, err) = image(&spec, cache.path(), "none", &["--update-lock"]);
    assert_eq!(code, Some(0), "{first}\n{err}");
    let tag = first["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let real = d
        .block_on(images::inspect(&d.engine, &tag))
        .unwrap()
        .expect("the real image");

    let fresh = tempfile::tempdir().unwrap();
    let mut planted_ids = Vec::new();
    for (what, cache) in [
        ("a record of the real image", cache.path()),
        ("no record at all", fresh.path()),
    ] {
        let planted = plant(&d, &tag, &real.labels);
        assert_ne!(planted, real.id);
        planted_ids.push(planted.clone());
        let (code, doc, err) = image(&spec, cache, "none", &[]);
        assert_eq!(code, Some(0), "{what}\n{doc}\n{err}");
        let build = &doc["builds"][0];
        assert_eq!(
            build["skipped"], false,
            "{what}: trusted by its labels\n{doc}"
        );
        assert_eq!(build["not_built_here"], planted.as_str(), "{what}\n{doc}");
        assert_ne!(build["image_id"], planted.as_str(), "{what}\n{doc}");
        assert_eq!(doc["smoke"][0]["reused"], false, "{what}\n{doc}");
        assert!(
            err.contains("was not built by envbuild here: building"),
            "{what}: not said\n{err}"
        );
        let now = d
            .block_on(images::inspect(&d.engine, &tag))
            .unwrap()
            .expect("the tag");
        assert_eq!(
            build["image_id"],
            now.id.as_str(),
            "{what}: the tag names envbuild's build"
        );
    }
    // What envbuild built and recorded is still reused, with its verdict.
    let (code, again, err) = image(&spec, fresh.path(), "none", &[]);
    assert_eq!(code, Some(0), "{again}\n{err}");
    assert_eq!(again["builds"][0]["skipped"], true, "{again}");
    assert_eq!(again["smoke"][0]["reused"], true, "{again}");

    d.remove_image(&tag);
    for id in planted_ids {
        d.remove_image(&id);
    }
    d.assert_no_smoke_container("after the planted images");
}

/// With `--push` on a machine with no record, an image with copied labels planted at the build's
/// tag is built over before anything is pushed: the registry gets envbuild's build, and the
/// verdict beside it names that image, not the planted one.
fn an_image_with_copied_labels_is_never_pushed_as_the_build() {
    let test = "an_image_with_copied_labels_is_never_pushed_as_the_build";
    let Some(d) = support::engine(test) else {
        return;
    };
    let Some(r) = registry(test) else { return };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let n = nonce();
    std::fs::write(
        &spec,
        support::spec_on_base(&format!("planted-push-{n}"), &base),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (code, first, err) = image(&spec, cache.path(), "none", &["--update-lock"]);
    assert_eq!(code, Some(0), "{first}\n{err}");
    let tag = first["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let real = d
        .block_on(images::inspect(&d.engine, &tag))
        .unwrap()
        .expect("the real image");
    let planted = plant(&d, &tag, &real.labels);

    let repo = format!("{}/envbuild-test/planted-{n}", r.addr);
    let fresh = tempfile::tempdir().unwrap();
    let (code, doc, err) = image(&spec, fresh.path(), "none", &["--push", &repo]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    let build = &doc["builds"][0];
    assert_eq!(build["skipped"], false, "trusted by its labels\n{doc}");
    assert_eq!(build["not_built_here"], planted.as_str(), "{doc}");
    let pushed = doc["pushed"][0]["image"].as_str().unwrap().to_string();
    let verdict = envbuild::app::publish::show_verdict(&pushed)
        .unwrap_or_else(|f| panic!("{f}"))
        .verdict;
    assert_eq!(verdict.image_id, build["image_id"].as_str().unwrap());
    assert_ne!(verdict.image_id, planted, "the planted image was pushed");

    d.remove_image(&tag);
    d.remove_image(&pushed);
    d.remove_image(&planted);
    d.assert_no_smoke_container("after the planted push");
}
