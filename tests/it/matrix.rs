//! `envbuild matrix` (exact output for the example specs, per format) and the argument handling
//! of `envbuild image SPEC...|DIR` that needs no engine.

use super::support::{envbuild, root};

fn matrix(args: &[&str]) -> (i32, String, String) {
    let out = envbuild()
        .current_dir(root())
        .arg("matrix")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `text` with each example spec's content hash, as the library computes the tags `image`
/// builds and pushes under (`app::image::content_identity`), shown as `<content12>`: a matrix
/// tagged otherwise keeps its hex and fails the snapshot, and a template change (which changes
/// every tag) does not.
fn redacted(text: &str) -> String {
    let mut out = text.to_string();
    for spec in super::support::example_specs() {
        let lock = std::fs::read_to_string(spec.with_file_name("envbuild.lock")).unwrap();
        let lock = envbuild::core::lock::Lock::from_toml(&lock).unwrap();
        let id = envbuild::app::image::content_identity(&lock, None, &spec).unwrap();
        out = out.replace(&id[..12], "<content12>");
    }
    out
}

#[test]
fn github_matrix_of_the_example_specs() {
    let (code, out, err) = matrix(&["specs", "--format", "github"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "one line for $GITHUB_OUTPUT: {out}");
    insta::assert_snapshot!("matrix-github", redacted(&out));
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let include = doc["include"].as_array().unwrap();
    // Every example spec × every variant its lock declares (all declare runtime and dev) ×
    // every platform of its lock (the fleet example has two).
    let platforms: usize = super::support::example_specs()
        .iter()
        .map(|spec| {
            let text = std::fs::read_to_string(spec.with_file_name("envbuild.lock")).unwrap();
            envbuild::core::lock::Lock::from_toml(&text)
                .unwrap()
                .platforms()
                .len()
        })
        .sum();
    assert!(platforms > super::support::example_specs().len());
    assert_eq!(include.len(), 2 * platforms);
    let arm = include
        .iter()
        .find(|e| e["platform"] == "linux-aarch64")
        .expect("the fleet's aarch64 entry");
    assert_eq!(arm["docker_platform"], "linux/arm64", "{arm}");
    assert_eq!(arm["runs_on"], "ubuntu-24.04-arm", "{arm}");
    for e in include {
        let tag = e["image"].as_str().unwrap();
        let variant = e["variant"].as_str().unwrap();
        assert!(tag.contains(&format!(":{variant}-")), "{e}");
        assert!(root().join(e["spec"].as_str().unwrap()).is_file(), "{e}");
    }
}

#[test]
fn gitlab_and_json_matrices_are_exact_and_agree() {
    let (code, gitlab, err) = matrix(&[
        "specs/torch29-cu128",
        "specs/pypi-torch214/envbuild.toml",
        "--format",
        "gitlab",
        "--repo",
        "registry.example.com/team/envs",
    ]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("matrix-gitlab", redacted(&gitlab));
    // The YAML is what GitLab reads: one single-valued variable set per job.
    let yaml: serde_json::Value = serde_saphyr::from_str(&gitlab).unwrap();
    let jobs = yaml["parallel"]["matrix"].as_array().unwrap();
    assert_eq!(jobs.len(), 4);
    assert_eq!(
        jobs[0]["ENVBUILD_GPUS"], "yes",
        "a string, not a YAML boolean"
    );
    let (code, json, _) = matrix(&[
        "specs/torch29-cu128",
        "specs/pypi-torch214/envbuild.toml",
        "--format",
        "json",
        "--repo",
        "registry.example.com/team/envs",
    ]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let entries = doc["matrix"].as_array().unwrap();
    assert_eq!(entries.len(), jobs.len());
    for (e, j) in entries.iter().zip(jobs) {
        assert_eq!(e["name"], j["ENVBUILD_NAME"]);
        assert_eq!(e["image"], j["ENVBUILD_IMAGE"]);
        assert_eq!(e["pushed"], j["ENVBUILD_PUSHED"]);
        let pushed = e["pushed"].as_str().unwrap();
        assert!(pushed.starts_with("registry.example.com/team/envs:"), "{e}");
    }
    // Argument order is the matrix's order; the lock's variant order within a spec.
    assert_eq!(entries[0]["name"], "torch29-cu128-runtime-linux-64");
    assert_eq!(entries[1]["variant"], "dev");
    assert_eq!(entries[2]["spec"], "specs/pypi-torch214/envbuild.toml");
}

#[test]
fn matrix_variant_filter_and_deterministic_output() {
    let a = matrix(&["specs", "--format", "github", "--variant", "dev"]);
    let b = matrix(&["specs", "--format", "github", "--variant", "dev"]);
    assert_eq!(a, b);
    let doc: serde_json::Value = serde_json::from_str(&a.1).unwrap();
    let include = doc["include"].as_array().unwrap();
    assert!(!include.is_empty());
    assert!(include.iter().all(|e| e["variant"] == "dev"), "{doc}");
}

#[test]
fn matrix_refuses_a_missing_lock_and_an_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("one/envbuild.toml");
    std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
    std::fs::copy(root().join("specs/torch29-cu128/envbuild.toml"), &spec).unwrap();
    let (code, out, err) = matrix(&[dir.path().to_str().unwrap(), "--format", "github"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "no partial matrix: {out}");
    assert!(err.contains("LOCK_MISSING"), "{err}");
    // Nothing written: the matrix never locks.
    assert!(!dir.path().join("one/envbuild.lock").exists());

    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = matrix(&[empty.path().to_str().unwrap(), "--format", "gitlab"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no `*/envbuild.toml`"), "{err}");
    // Without --format: JSON (the default), for every spec of the folder.
    let (code, out, err) = matrix(&["specs"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("{\n  \"matrix\": ["), "{out}");
}

/// Two specs without locks: no engine is needed to report them; each is one summary row, one
/// JUnit suite and one run of the single JSON document; exit 1.
#[test]
fn image_with_several_specs_reports_each_failing_lock() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b"] {
        let spec = dir.path().join(name).join("envbuild.toml");
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        std::fs::copy(root().join("specs/torch29-cu128/envbuild.toml"), &spec).unwrap();
    }
    let junit = dir.path().join("junit.xml");
    let out = envbuild()
        .arg("image")
        .arg(dir.path())
        .args(["--variant", "all", "--json", "--junit"])
        .arg(&junit)
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(doc["verdict"], "fail");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["name"], "a");
    assert_eq!(runs[1]["verdict"], "error");
    assert_eq!(runs[1]["error"][0]["code"], "LOCK_MISSING");
    assert_eq!(
        doc["summary"].as_array().unwrap().len(),
        4,
        "2 specs × 2 variants"
    );
    // The summary table goes to stderr under --json.
    assert!(
        stderr.contains("SPEC  PLATFORM  VARIANT  IMAGE  BUILD         SMOKE  TIME"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a     -         dev      -      LOCK_MISSING  -"),
        "{stderr}"
    );
    assert!(stderr.contains("0 of 4 passed"), "{stderr}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    for suite in ["a/runtime", "a/dev", "b/runtime", "b/dev"] {
        assert!(
            xml.contains(&format!("<testsuite name=\"{suite}\"")),
            "{xml}"
        );
    }
    assert_eq!(xml.matches("type=\"LOCK_MISSING\"").count(), 4, "{xml}");

    // --fail-fast: the first failure cancels the rest.
    let out = envbuild()
        .arg("image")
        .arg(dir.path().join("a/envbuild.toml"))
        .arg(dir.path().join("b"))
        .args(["--fail-fast", "--jobs", "2"])
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("a     -         runtime  -      LOCK_MISSING"),
        "{stdout}"
    );
    assert!(
        stdout.contains("b     -         runtime  -      cancelled"),
        "{stdout}"
    );
}

/// `image DIR --platform linux-aarch64` over specs whose locks hold only linux-64: each is
/// skipped (said, one `skipped` row, no JUnit suite), not failed; a spec that fails still
/// fails the run; when every spec is skipped, the run is `PLATFORM_NOT_IN_LOCK`. No engine is
/// needed: nothing is built.
#[test]
fn image_with_several_specs_skips_a_spec_without_the_platform() {
    let dir = tempfile::tempdir().unwrap();
    let example = root().join("specs/torch29-cu128");
    for name in ["a", "b"] {
        let to = dir.path().join(name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(example.join("envbuild.toml"), to.join("envbuild.toml")).unwrap();
    }
    // `a` has its current lock (linux-64 only); `b` none (LOCK_MISSING).
    std::fs::copy(
        example.join("envbuild.lock"),
        dir.path().join("a/envbuild.lock"),
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let image = |specs: &[&std::path::Path]| {
        envbuild()
            .arg("image")
            .args(specs)
            .args(["--platform", "linux-aarch64", "--json", "--junit"])
            .arg(&junit)
            .env("DOCKER_HOST", "unix:///nonexistent.sock")
            .output()
            .unwrap()
    };
    let out = image(&[dir.path()]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "b failed: {stdout}\n{stderr}");
    assert!(
        stderr.contains("note: [a] skipped: its lock holds no linux-aarch64 (it has: linux-64)"),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs[0]["verdict"], "skipped", "{doc}");
    assert_eq!(runs[0]["lock_platforms"], serde_json::json!(["linux-64"]));
    assert_eq!(runs[1]["verdict"], "error", "{doc}");
    let a: Vec<&serde_json::Value> = doc["summary"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["spec"] == "a")
        .collect();
    assert_eq!(a.len(), 1, "one row for the skipped spec: {doc}");
    assert_eq!(a[0]["build"], "skipped");
    assert_eq!(a[0]["platform"], "linux-64");
    assert!(stderr.contains("spec(s) skipped (--platform)"), "{stderr}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        !xml.contains("name=\"a/"),
        "no suite for a skipped spec: {xml}"
    );

    // Only the skipped spec: nothing to build is the run's failure.
    let out = image(&[&dir.path().join("a"), &dir.path().join("a/envbuild.toml")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("PLATFORM_NOT_IN_LOCK"), "{stderr}");
    assert!(stderr.contains("no spec's lock holds it"), "{stderr}");
}

#[test]
fn image_with_several_specs_refuses_tag_and_bad_jobs() {
    let out = envbuild()
        .current_dir(root())
        .args(["image", "specs", "--tag", "x:y"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tag names one image"));
    for bad in ["0", "65", "x"] {
        let out = envbuild()
            .current_dir(root())
            .args(["image", "specs", "--jobs", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--jobs {bad}");
    }
    let out = envbuild().args(["image"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a spec is required");
}
