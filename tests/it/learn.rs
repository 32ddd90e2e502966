//! Real builds correct the table: `TABLE_MISMATCH` after a smoke test with a lock (`smoke`,
//! `test`), and `envbuild table learn` feeding a report back into `--table FILE`.
//!
//! The real observation (compat-facts §7, `tests/fixtures/reports/pypi-torch2141-cu130.json`):
//! PyPI's torch 2.14.1 (cu130) carries `sm_75 sm_80 sm_86 sm_90 sm_100 sm_120` and no PTX. The
//! embedded table's row for it is being corrected, so these tests either use a table that claims
//! `compute_120` PTX (as the row did) or a report that says the opposite of whatever the embedded
//! row says: both stay true whichever way the row reads.

use crate::support::learn::{
    embedded_table, learn, lock_with, mismatch_messages, os, real_report, row_2_14_cu130,
    table_claiming_ptx,
};
use crate::support::{envbuild, fixture, root, stderr_of, stdout_of, tempdir, write};
use std::path::Path;

const REAL_FLAGS: &str = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120";

#[test]
fn the_real_2141_build_corrects_a_table_that_claims_ptx() {
    let tmp = tempdir();
    let claims = table_claiming_ptx(tmp.path());
    let spec = root().join("specs/pypi-torch214/envbuild.toml");
    let before = lock_with(Some(&claims), &spec, &tmp.path().join("before"));
    assert!(before.contains("ptx = [\"compute_120\"]"), "{before}");

    let learned = tmp.path().join("learned.toml");
    let out = learn(
        Some(&claims),
        &[os(&real_report()), "--out".as_ref(), os(&learned)],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let said = stderr_of(&out);
    assert!(
        said.contains("[[wheel]] torch 2.14 cu130: PTX compute_120 -> none"),
        "{said}"
    );
    let text = std::fs::read_to_string(&learned).unwrap();
    assert!(
        text.contains("observed-2026-12-01-envbuild-pypi-torch214-runtime-observed = "),
        "the source names the image and the date: {text}"
    );

    let after = lock_with(Some(&learned), &spec, &tmp.path().join("after"));
    assert!(
        !after.contains("ptx ="),
        "the lock follows the build: {after}"
    );
    assert!(after.contains("table_version = \"") && after.contains("+learned.2026-12-01\""));
    let arch = |l: &str| {
        l.lines()
            .find(|x| x.starts_with("arch_list"))
            .map(str::to_string)
    };
    assert_eq!(arch(&before), arch(&after), "the cubins were right");
}

/// The host's `python3` as `major.minor`: the smoke test checks the lock's Python against it.
fn host_python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A stand-in torch with the real build's facts (tests/fixtures/fake_torch.py), `flags` its arch.
fn fake_2141(flags: &str) -> tempfile::TempDir {
    let dir = tempdir();
    let config = serde_json::json!({
        "version": "2.14.1+cu130", "cuda": "13.0", "cudnn": 92400, "nccl": [2, 30, 7],
        "arch": flags, "wheel_tags": ["cp3-none-manylinux_2_28_x86_64"],
    });
    let status = std::process::Command::new("python3")
        .arg(fixture("fake_torch.py"))
        .arg("make")
        .arg(dir.path())
        .args(["--variant", "cuda-no-driver", "--config"])
        .arg(config.to_string())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

/// `envbuild [--table T] smoke --lock LOCK --gpus none --json` with `torch` on the path: (exit
/// code, the JSON document, stderr).
fn smoke(table: Option<&Path>, lock: &Path, torch: &Path) -> (i32, serde_json::Value, String) {
    let mut cmd = envbuild();
    if let Some(t) = table {
        cmd.arg("--table").arg(t);
    }
    let out = cmd
        .args(["smoke", "--gpus", "none", "--json", "--lock"])
        .arg(lock)
        .env("PYTHONPATH", torch)
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    (out.status.code().unwrap(), doc, stderr_of(&out))
}

#[test]
fn smoke_warns_where_the_table_is_wrong_and_the_verdict_stands() {
    let tmp = tempdir();
    let claims = table_claiming_ptx(tmp.path());
    let learned = tmp.path().join("learned.toml");
    assert!(learn(
        Some(&claims),
        &[os(&real_report()), "-o".as_ref(), os(&learned)]
    )
    .status
    .success());
    // Locked with the corrected table, so the build passes its smoke test...
    let spec = write(
        tmp.path(),
        "envbuild.toml",
        &format!(
            "name = \"learn-smoke\"\npython = \"{}\"\npytorch = \"2.14.1\"\ntorchvision = false\n\
             torchaudio = false\n\n[run]\nshm-size = \"1m\"\n",
            host_python()
        ),
    );
    lock_with(Some(&learned), &spec, tmp.path());
    let lock = tmp.path().join("envbuild.lock");
    let torch = fake_2141(REAL_FLAGS);
    // ...and a table that claims PTX is told, with a warning that does not fail the run.
    let (code, doc, err) = smoke(Some(&claims), &lock, torch.path());
    assert_eq!(code, 0, "{doc:#}");
    let m = mismatch_messages(&doc);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].contains("[[wheel]] torch 2.14 cu130 (torch 2.14.1 from pypi)")
            && m[0].contains("says PTX compute_120; the installed torch has none"),
        "{}",
        m[0]
    );
    assert!(err.contains("warning[TABLE_MISMATCH]"), "{err}");
    // The corrected table has nothing to say.
    let (code, doc, err) = smoke(Some(&learned), &lock, torch.path());
    assert_eq!((code, mismatch_messages(&doc).len()), (0, 0), "{err}");
    assert!(!err.contains("TABLE_MISMATCH"), "{err}");

    // That run's own report teaches the same: the script records the date and the wheel tag.
    let report = write(tmp.path(), "smoke.json", &doc.to_string());
    let out = learn(
        Some(&claims),
        &[os(&report), "--image".as_ref(), "local-python".as_ref()],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let t: toml::Table = stdout_of(&out).parse().unwrap();
    let mut t = t;
    let row = row_2_14_cu130(&mut t);
    assert_eq!(row["ptx"].as_array().map(Vec::len), Some(0));
    assert_eq!(row["confidence"].as_str(), Some("observed"));
}

/// torch's flags for the embedded 2.14 cu130 row with its PTX flipped: none if it has some,
/// `compute_120` if it has none.
fn flipped_embedded_flags() -> (String, bool) {
    let mut t = embedded_table();
    let row = row_2_14_cu130(&mut t);
    let cc = |v: &toml::Value| v.as_str().unwrap().replace('.', "");
    let cubins: Vec<String> = row["arch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("sm_{}", cc(v)))
        .collect();
    let has_ptx = !row["ptx"].as_array().unwrap().is_empty();
    let mut flags = cubins.join(" ");
    if !has_ptx {
        flags.push_str(" compute_120");
    }
    (flags, has_ptx)
}

#[test]
fn a_build_that_contradicts_the_embedded_row_is_named_and_learned() {
    let (flags, had_ptx) = flipped_embedded_flags();
    let committed = root().join("specs/pypi-torch214/envbuild.lock");
    let torch = fake_2141(&flags);
    let (_, doc, _) = smoke(None, &committed, torch.path());
    let m = mismatch_messages(&doc);
    assert!(
        m.iter()
            .any(|m| m.contains("torch 2.14 cu130") && m.contains("says PTX")),
        "{m:?}"
    );
    // The committed lock expects the row's PTX: the smoke test fails on it, so this report
    // cannot teach...
    let tmp = tempdir();
    let failing = write(tmp.path(), "failing.json", &doc.to_string());
    let out = learn(None, &[os(&failing), "--image".as_ref(), "x".as_ref()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("error[LEARN_INPUT_INVALID]") && err.contains("did not pass"),
        "{err}"
    );
    // ...but the same build without a lock passes and does.
    let out = envbuild()
        .args(["smoke", "--gpus", "none", "--json"])
        .env("PYTHONPATH", torch.path())
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stdout_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["diagnostics"],
        serde_json::json!([]),
        "no lock, nothing to compare"
    );
    let report = write(tmp.path(), "passing.json", &doc.to_string());
    let learned = tmp.path().join("learned.toml");
    let out = learn(
        None,
        &[
            os(&report),
            "--image".as_ref(),
            "x".as_ref(),
            "-o".as_ref(),
            os(&learned),
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let spec = root().join("specs/pypi-torch214/envbuild.toml");
    let after = lock_with(Some(&learned), &spec, &tmp.path().join("lock"));
    assert_eq!(
        after.contains("ptx = [\"compute_120\"]"),
        !had_ptx,
        "{after}"
    );
}

#[test]
fn learning_is_deterministic_and_needs_a_date() {
    let a = learn(None, &[os(&real_report())]);
    let b = learn(None, &[os(&real_report()), os(&real_report())]);
    assert!(
        a.status.success() && b.status.success(),
        "{}",
        stderr_of(&a)
    );
    assert_eq!(a.stdout, b.stdout, "the same report twice teaches the same");
    assert_eq!(a.stdout, learn(None, &[os(&real_report())]).stdout);

    // A report without a date needs `--date`.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(real_report()).unwrap()).unwrap();
    doc["smoke"][0]["report"]["environment"]
        .as_object_mut()
        .unwrap()
        .remove("date");
    let tmp = tempdir();
    let undated = write(tmp.path(), "undated.json", &doc.to_string());
    let out = learn(None, &[os(&undated)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("--date YYYY-MM-DD"),
        "{}",
        stderr_of(&out)
    );
    let out = learn(
        None,
        &[os(&undated), "--date".as_ref(), "2026-11-02".as_ref()],
    );
    assert!(
        stdout_of(&out).contains("+learned.2026-11-02\""),
        "{}",
        stderr_of(&out)
    );
    let out = learn(
        None,
        &[os(&undated), "--date".as_ref(), "yesterday".as_ref()],
    );
    assert_eq!(out.status.code(), Some(2));

    // Not a report at all, no report, or a section with it: refused.
    let junk = write(tmp.path(), "junk.json", "{\"hello\": 1}");
    let out = learn(None, &[os(&junk)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("LEARN_INPUT_INVALID"));
    assert_eq!(learn(None, &[]).status.code(), Some(2));
    let out = envbuild()
        .args(["table", "torch", "learn", "r.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
