//! `envbuild image DIR --jobs 2`: two tiny specs built and smoke-tested on a real engine at
//! once, one passing and one failing; the summary table, the JUnit file and the one JSON
//! document report both, and the failure does not stop the other spec.

use crate::docker::{envbuild, nonce};
use crate::engine_support as support;

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![several_specs_build_and_test_in_parallel_with_one_report]
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

    // The summary table (stderr under --json): one row per spec and variant.
    let row = |spec: &str, tag: &str, build: &str, smoke: &str| {
        err.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() == 6 && cells[..5] == [spec, "runtime", tag, build, smoke]
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
