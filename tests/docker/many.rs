//! `envbuild image DIR --jobs 2`: two tiny specs built and smoke-tested on a real engine at
//! once, one passing and one failing; the summary table, the JUnit file and the one JSON
//! document report both, and the failure does not stop the other spec. A folder holding a fleet
//! spec builds and tests every platform of it (the arm64 image under emulation), pushes it with
//! its index, and `envbuild matrix` names exactly what was built and pushed.

use crate::docker::{envbuild, nonce};
use crate::engine_support as support;
use envbuild::infra::docker;
use std::time::{Duration, Instant};

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        several_specs_build_and_test_in_parallel_with_one_report,
        sigint_stops_every_spec_and_removes_every_smoke_container,
        fail_fast_stops_the_spec_under_way,
        a_folder_with_a_fleet_spec_builds_every_platform_and_matrix_names_the_pushes,
    ]
}

fn several_specs_build_and_test_in_parallel_with_one_report() {
    let test = "several_specs_build_and_test_in_parallel_with_one_report";
    let Some(d) = support::engine(test) else {
        return;
    };
    // `good` has the stand-in CUDA torch (passes with --gpus none); `bad` declares a torch its
    // base lacks (TORCH_MISSING).
    let good_base = support::fake_cuda_torch_image(&d);
    let bad_base = support::debian_python_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let n = nonce();
    for (name, base) in [("good", &good_base), ("bad", &bad_base)] {
        let spec = dir.path().join(name).join("envbuild.toml");
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        std::fs::write(&spec, support::spec_on_base(&format!("{name}-{n}"), base)).unwrap();
    }
    let cache = tempfile::tempdir().unwrap();
    let junit = dir.path().join("smoke.xml");
    let image = |jobs: &str| {
        envbuild()
            .arg("image")
            .arg(dir.path())
            .args(["--gpus", "none", "--update-lock", "--json", "--jobs", jobs])
            .arg("--junit")
            .arg(&junit)
            .env("ENVBUILD_CACHE_DIR", cache.path())
            .env("CI", "true")
            .output()
            .unwrap()
    };
    let out = image("2");
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{err}");

    // Both started before either one's build finished: two at once. (Folders are sorted.)
    let pos = |s: &str| err.find(s).unwrap_or_else(|| panic!("no `{s}` in:\n{err}"));
    assert!(pos("[good] started") < pos("[bad/runtime] built"), "{err}");
    assert!(pos("[bad] started") < pos("[good/runtime] built"), "{err}");
    assert!(
        err.contains("[good/runtime] step 1/"),
        "CI step lines: {err}"
    );

    // One JSON document with both runs.
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(doc["verdict"], "fail");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["name"].as_str(), runs[0]["verdict"].as_str()),
        (Some("bad"), Some("fail"))
    );
    assert_eq!(
        (runs[1]["name"].as_str(), runs[1]["verdict"].as_str()),
        (Some("good"), Some("pass"))
    );
    assert_eq!(runs[1]["smoke"][0]["passed"], true);
    assert_eq!(runs[1]["builds"][0]["skipped"], false);
    let good_tag = runs[1]["builds"][0]["tags"][0]
        .as_str()
        .unwrap()
        .to_string();
    let bad_tag = runs[0]["builds"][0]["tags"][0]
        .as_str()
        .unwrap()
        .to_string();
    let checks: Vec<&str> = runs[0]["smoke"][0]["report"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .filter_map(|c| c["code"].as_str())
        .collect();
    assert!(checks.contains(&"TORCH_MISSING"), "{checks:?}");

    // The summary table (stderr under --json): one row per spec, platform and variant.
    let row = |spec: &str, tag: &str, build: &str, smoke: &str| {
        err.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() == 7 && cells[..6] == [spec, "linux-64", "runtime", tag, build, smoke]
        })
    };
    assert!(row("bad", &bad_tag, "built", "fail"), "{err}");
    assert!(row("good", &good_tag, "built", "pass"), "{err}");
    assert!(err.contains("1 of 2 passed"), "{err}");
    assert!(
        err.contains("SMOKE_FAILED") && err.contains("TORCH_MISSING"),
        "{err}"
    );

    // One JUnit file, a suite per spec and variant.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"bad/runtime\""), "{xml}");
    assert!(xml.contains("<testsuite name=\"good/runtime\""), "{xml}");
    assert!(xml.contains("TORCH_MISSING"), "{xml}");

    // Again with one job at a time: nothing is rebuilt, `good`'s verdict is reused, and the
    // second spec starts only after the first is done.
    let out = image("1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last_bad = err.rfind("[bad/runtime]").unwrap();
    assert!(err.find("[good] started").unwrap() > last_bad, "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"][1]["builds"][0]["skipped"], true);
    assert_eq!(doc["runs"][1]["smoke"][0]["reused"], true);
    assert!(
        err.contains("exists") && err.contains("pass (reused)"),
        "{err}"
    );

    d.remove_image(&good_tag);
    d.remove_image(&bad_tag);
    d.assert_no_smoke_container("after several specs");
}

/// The Debian test base with a `torch` whose import never returns (TEST FIXTURE): the build
/// (pip, useradd) works, the smoke test hangs at `import torch`.
fn torch_import_hangs_image(d: &support::Docker) -> String {
    let base = support::debian_python_image(d);
    let mut files = std::collections::BTreeMap::new();
    files.insert(
        "torch/__init__.py".to_string(),
        b"# TEST FIXTURE: an import that never returns (envbuild's Ctrl-C test).\n\
          import time\ntime.sleep(600)\n"
            .to_vec(),
    );
    let dockerfile = format!("FROM {base}\nCOPY torch/ /usr/lib/python3/dist-packages/torch/\n");
    let req = docker::build::BuildRequest {
        content_sha256: None,
        lock_hash: support::fake_lock_hash(&format!("{dockerfile}{:?}", files)),
        files: {
            files.insert("Dockerfile".into(), dockerfile.into_bytes());
            files
        },
        dockerfile: "Dockerfile".into(),
        target: String::new(),
        image_name: "envbuild-test/debian-hanging-torch".into(),
        variant: "base".into(),
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: std::collections::BTreeMap::new(),
        rebuild: false,
        build_args: std::collections::BTreeMap::new(),
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    support::build_once(d, &req).unwrap_or_else(|f| panic!("building the hanging-torch base: {f}"))
}

/// Ctrl-C while two specs' smoke tests run at once: envbuild exits 1 with `INTERRUPTED`, still
/// prints its one JSON document, and leaves neither smoke container behind.
fn sigint_stops_every_spec_and_removes_every_smoke_container() {
    let test = "sigint_stops_every_spec_and_removes_every_smoke_container";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = torch_import_hangs_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let n = nonce();
    for name in ["one", "two"] {
        let spec = dir.path().join(name).join("envbuild.toml");
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        std::fs::write(&spec, support::spec_on_base(&format!("{name}-{n}"), &base)).unwrap();
    }
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"))
        .arg("image")
        .arg(dir.path())
        .args(["--gpus", "none", "--update-lock", "--jobs", "2", "--json"])
        .args(["--timeout", "300"])
        .env("ENVBUILD_RUN_ID", support::run_prefix())
        .env("ENVBUILD_CACHE_DIR", dir.path().join("cache"))
        .env("CI", "true")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both smoke containers run before the signal.
    let deadline = Instant::now() + Duration::from_secs(240);
    while d.smoke_containers().len() < 2 {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "two smoke containers never ran at once:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let ok = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "envbuild did not exit after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("INTERRUPTED"), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{doc}");
    d.assert_no_smoke_container("after SIGINT with two specs");
    assert!(runs.iter().all(|r| r["verdict"] == "error"), "{doc}");
    // The images were built before the signal: the summary names them.
    for row in doc["summary"].as_array().unwrap() {
        d.remove_image(row["image"].as_str().unwrap());
    }
}

/// `--fail-fast --jobs 2`: a spec that fails stops the other one mid-smoke-test (its
/// container removed), which is reported `cancelled`; exit 1.
fn fail_fast_stops_the_spec_under_way() {
    let test = "fail_fast_stops_the_spec_under_way";
    let Some(d) = support::engine(test) else {
        return;
    };
    let hanging = torch_import_hangs_image(&d);
    let bad = support::debian_python_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let n = nonce();
    for (name, base) in [("a-hangs", &hanging), ("b-fails", &bad)] {
        let spec = dir.path().join(name).join("envbuild.toml");
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        std::fs::write(&spec, support::spec_on_base(&format!("{name}-{n}"), base)).unwrap();
    }
    let started = Instant::now();
    let out = envbuild()
        .arg("image")
        .arg(dir.path())
        .args([
            "--gpus",
            "none",
            "--update-lock",
            "--jobs",
            "2",
            "--fail-fast",
            "--json",
        ])
        .args(["--timeout", "300"])
        .env("ENVBUILD_CACHE_DIR", dir.path().join("cache"))
        .env("CI", "true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(200),
        "the hanging smoke test was not stopped: {err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["runs"][0]["verdict"], "cancelled", "{doc}");
    assert_eq!(doc["runs"][1]["verdict"], "fail", "{doc}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("a-hangs") && l.contains("cancelled")),
        "{err}"
    );
    d.assert_no_smoke_container("after --fail-fast");
    for row in doc["summary"].as_array().unwrap() {
        d.remove_image(row["image"].as_str().unwrap());
    }
}

/// `envbuild image DIR --push REPO` over a folder holding a fleet spec (x86_64 and aarch64, on a
/// fake-torch base per platform) and a single-platform spec: the fleet's two images are built
/// for their Docker platforms and smoke-tested (each report names its machine), reported per
/// platform (rows, JSON `platforms`, JUnit suites), pushed with one index; then `envbuild
/// matrix DIR --repo REPO` gives each entry the tag that was built (`image`), the reference that
/// was pushed (`pushed`) and, for the fleet, the index (`index`).
fn a_folder_with_a_fleet_spec_builds_every_platform_and_matrix_names_the_pushes() {
    let test = "a_folder_with_a_fleet_spec_builds_every_platform_and_matrix_names_the_pushes";
    let Some((d, r, n, probe)) = super::fleet::fleet_start(test) else {
        return;
    };
    let fleet_base = super::fleet::fake_torch_fleet_base(&d, &r, &n, &probe);
    let one_base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let specs = [
        (
            "fleet",
            super::fleet::fleet_spec(&format!("fleet-{n}"), &fleet_base),
        ),
        ("one", support::spec_on_base(&format!("one-{n}"), &one_base)),
    ];
    for (name, text) in &specs {
        let spec = dir.path().join(name).join("envbuild.toml");
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        std::fs::write(&spec, text).unwrap();
    }
    let repo = format!("{}/envbuild-test/many-{n}", r.addr);
    let junit = dir.path().join("smoke.xml");
    let cache = tempfile::tempdir().unwrap();
    let (out, err, doc) = crate::docker::ci_json(
        envbuild()
            .arg("image")
            .arg(dir.path())
            .args(["--gpus", "none", "--update-lock", "--json", "--push", &repo])
            .arg("--junit")
            .arg(&junit)
            .env("ENVBUILD_CACHE_DIR", cache.path()),
    );
    let built: Vec<String> = doc["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|run| {
            let smoke = run["smoke"].as_array().cloned().unwrap_or_default();
            smoke
                .into_iter()
                .filter_map(|s| s["image"].as_str().map(String::from))
        })
        .collect();
    let cleanup = || {
        for image in &built {
            d.remove_image(image);
        }
        d.remove_image(&fleet_base);
    };
    if out.status.code() != Some(0) {
        cleanup();
        panic!("exit {:?}\n{doc}\n{err}", out.status.code());
    }
    assert_eq!(doc["verdict"], "pass", "{doc}");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(
        (runs[0]["name"].as_str(), runs[1]["name"].as_str()),
        (Some("fleet"), Some("one"))
    );
    let (fleet, one) = (&runs[0], &runs[1]);

    // Every platform of the fleet built for its Docker platform and smoke-tested on it.
    let platforms = fleet["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2, "{fleet}");
    let mut fleet_rows = Vec::new();
    for (i, (platform, docker, arch, machine)) in [
        ("linux-64", "linux/amd64", "amd64", "x86_64"),
        ("linux-aarch64", "linux/arm64", "arm64", "aarch64"),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(platforms[i]["platform"], platform, "{fleet}");
        assert_eq!(platforms[i]["docker_platform"], docker, "{fleet}");
        let smoke = &fleet["smoke"][i];
        assert_eq!(smoke["platform"], platform, "{smoke}");
        assert_eq!(smoke["passed"], true, "{smoke}");
        assert_eq!(
            smoke["report"]["environment"]["machine"], machine,
            "{smoke}"
        );
        let tag = smoke["image"].as_str().unwrap();
        assert!(tag.ends_with(&format!("-{arch}")), "{tag}");
        assert_eq!(super::arm64::image_arch(tag), arch, "{tag}");
        assert_eq!(fleet["builds"][i]["tags"][0], tag, "{fleet}");
        assert_eq!(fleet["pushed"][i]["platform"], platform, "{fleet}");
        assert!(
            err.contains(&format!("[fleet/{platform}/runtime] smoke test")),
            "{err}"
        );
        fleet_rows.push((platform, tag.to_string()));
    }
    let content = fleet["content_sha256"].as_str().unwrap();
    let index = format!("{repo}:runtime-{}", &content[..12]);
    assert_eq!(fleet["index"][0]["image"], index, "{fleet}");
    assert_eq!(fleet["index"][0]["manifests"].as_array().unwrap().len(), 2);

    // The summary: a row per platform of the fleet, one for the single-platform spec.
    let one_tag = one["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let rows: Vec<(String, String, String, String)> = doc["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let cell = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (cell("spec"), cell("platform"), cell("image"), cell("smoke"))
        })
        .collect();
    let mut expected: Vec<(String, String, String, String)> = fleet_rows
        .iter()
        .map(|(p, t)| ("fleet".into(), p.to_string(), t.clone(), "pass".into()))
        .collect();
    expected.push((
        "one".into(),
        "linux-64".into(),
        one_tag.clone(),
        "pass".into(),
    ));
    assert_eq!(rows, expected, "{doc}");
    assert!(
        err.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() == 7
                && cells[..6]
                    == [
                        "fleet",
                        "linux-aarch64",
                        "runtime",
                        &fleet_rows[1].1,
                        "built",
                        "pass",
                    ]
        }),
        "{err}"
    );
    assert!(err.contains("3 of 3 passed"), "{err}");

    // JUnit: the fleet's suites per platform, as one spec's fleet names them.
    let xml = std::fs::read_to_string(&junit).unwrap();
    for suite in [
        "fleet/runtime (linux-64)",
        "fleet/runtime (linux-aarch64)",
        "one/runtime",
    ] {
        assert!(
            xml.contains(&format!("<testsuite name=\"{suite}\"")),
            "{xml}"
        );
    }

    // The matrix of the same folder names what was built and pushed.
    let out = envbuild()
        .arg("matrix")
        .arg(dir.path())
        .args(["--repo", &repo])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let matrix: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entries = matrix["matrix"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{matrix}");
    let pushed = |run: &serde_json::Value, i: usize| run["pushed"][i]["image"].clone();
    for i in 0..2 {
        assert_eq!(
            entries[i]["image"], fleet["builds"][i]["tags"][0],
            "{matrix}"
        );
        assert_eq!(entries[i]["pushed"], pushed(fleet, i), "{matrix}");
        assert_eq!(entries[i]["index"], index, "{matrix}");
    }
    assert_eq!(entries[2]["image"], one_tag, "{matrix}");
    assert_eq!(entries[2]["pushed"], pushed(one, 0), "{matrix}");
    assert!(entries[2].get("index").is_none(), "{matrix}");

    cleanup();
    d.assert_no_smoke_container("after a folder with a fleet spec");
}
