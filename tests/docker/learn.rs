//! The Docker test of `table learn`'s area: `envbuild test --lock` warns in its JSON document
//! where the table is wrong. Its fixtures are the shared ones of tests/it/learn.rs
//! (`support::learn`).

use crate::support::learn::{
    learn, lock_with, mismatch_messages, os, real_report, table_claiming_ptx,
};
use crate::support::{envbuild, root, stderr_of, stdout_of, tempdir, write};

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![test_with_a_lock_warns_in_the_json_document]
}

fn test_with_a_lock_warns_in_the_json_document() {
    use crate::engine_support as support;
    let Some(d) = support::engine("test_with_a_lock_warns_in_the_json_document") else {
        return;
    };
    let tmp = tempdir();
    let claims = table_claiming_ptx(tmp.path());
    let spec = root().join("specs/pypi-torch214/envbuild.toml");
    lock_with(Some(&claims), &spec, tmp.path());
    // The stand-in image prints the real build's report, whatever the lock expects.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(real_report()).unwrap()).unwrap();
    let image =
        support::reporting_image(&d, "real-2141", &doc["smoke"][0]["report"].to_string(), 0);
    let out = envbuild()
        .env("ENVBUILD_RUN_ID", support::run_prefix())
        .arg("--table")
        .arg(&claims)
        .args(["test", &image, "--gpus", "none", "--json", "--lock"])
        .arg(tmp.path().join("envbuild.lock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "pass");
    let m = mismatch_messages(&doc);
    assert!(
        m.len() == 1 && m[0].contains(&format!("`{image}`")) && m[0].contains("PTX compute_120"),
        "{m:?}"
    );
    // That document is what `table learn` reads back.
    let verdict = write(tmp.path(), "verdict.json", &stdout_of(&out));
    let out = learn(Some(&claims), &[os(&verdict)]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    d.assert_no_smoke_container("after test --lock");
}
