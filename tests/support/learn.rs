//! The fixtures of `table learn`'s tests: the real build's report of torch 2.14.1 (cu130), a
//! table whose row claims PTX that build does not carry, and `envbuild lock`/`table learn`
//! runs. Shared by tests/it/learn.rs and tests/docker/learn.rs.

use crate::{envbuild, fixture, stderr_of, stdout_of, write};
use std::path::{Path, PathBuf};

pub fn real_report() -> PathBuf {
    fixture("reports/pypi-torch2141-cu130.json")
}

/// `envbuild table --toml`, parsed.
pub fn embedded_table() -> toml::Table {
    let out = envbuild().args(["table", "--toml"]).output().unwrap();
    assert!(out.status.success());
    stdout_of(&out).parse().expect("the table is TOML")
}

/// The `[[wheel]]` row of torch 2.14 cu130.
pub fn row_2_14_cu130(t: &mut toml::Table) -> &mut toml::Table {
    t["wheel"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter_map(|w| w.as_table_mut())
        .find(|w| w["torch"].as_str() == Some("2.14") && w["variant"].as_str() == Some("cu130"))
        .expect("the table has torch 2.14 cu130")
}

/// A table whose 2.14 cu130 row claims `compute_120` PTX (what the embedded row said before the
/// real build was read).
pub fn table_claiming_ptx(dir: &Path) -> PathBuf {
    let mut t = embedded_table();
    row_2_14_cu130(&mut t).insert("ptx".into(), toml::Value::Array(vec!["12.0".into()]));
    write(dir, "claims-ptx.toml", &toml::to_string(&t).unwrap())
}

/// `envbuild [--table T] lock SPEC --no-closure --out DIR`: the lock's text.
pub fn lock_with(table: Option<&Path>, spec: &Path, dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = envbuild();
    if let Some(t) = table {
        cmd.arg("--table").arg(t);
    }
    // The table-level lock: what learning checks is the table's row, not the closure.
    let out = cmd
        .arg("lock")
        .arg(spec)
        .arg("--no-closure")
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    std::fs::read_to_string(dir.join("envbuild.lock")).unwrap()
}

/// `envbuild [--table T] table learn ARGS...`.
pub fn learn(table: Option<&Path>, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = envbuild();
    if let Some(t) = table {
        cmd.arg("--table").arg(t);
    }
    cmd.args(["table", "learn"]).args(args).output().unwrap()
}

pub fn os(s: &Path) -> &std::ffi::OsStr {
    s.as_os_str()
}

/// The `TABLE_MISMATCH` warnings of a JSON document, by message.
pub fn mismatch_messages(doc: &serde_json::Value) -> Vec<String> {
    doc["diagnostics"]
        .as_array()
        .expect("a diagnostics list")
        .iter()
        .filter(|d| d["code"] == "TABLE_MISMATCH")
        .map(|d| {
            assert_eq!(d["severity"], "warning");
            d["message"].as_str().unwrap().to_string()
        })
        .collect()
}
