//! `envbuild table` and `--table FILE`.

use crate::support::*;
use std::fs;

#[test]
fn sections_show_the_facts_readably_and_as_json() {
    let out = envbuild().args(["table", "torch"]).output().unwrap();
    let text = stdout_of(&out);
    assert!(
        text.contains("2.5.1") && text.contains("cu118 cu121 cu124"),
        "{text}"
    );
    let out = envbuild()
        .args(["table", "gpu", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "H100" && g["cc"] == "9.0"));
    let out = envbuild().args(["table", "cuda"]).output().unwrap();
    assert!(stdout_of(&out).contains("R580    13.0"));
    // Each GPU's row names the CPU architectures of the machines it comes in.
    let out = envbuild().args(["table", "gpu"]).output().unwrap();
    let text = stdout_of(&out);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split("  ").next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{text}"))
            .to_string()
    };
    assert!(text.lines().next().unwrap().contains(" cpu "), "{text}");
    assert!(row("GH200").contains("aarch64") && !row("GH200").contains("x86_64"));
    assert!(row("H100").contains("x86_64, aarch64"), "{}", row("H100"));
    assert!(row("RTX 4090").contains("x86_64") && !row("RTX 4090").contains("aarch64"));
}

#[test]
fn the_dumped_table_used_as_override_gives_the_same_lock() {
    let tmp = tempdir();
    let out = envbuild().args(["table", "--toml"]).output().unwrap();
    let table = tmp.path().join("table.toml");
    fs::write(&table, &out.stdout).unwrap();
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    envbuild()
        .arg("--table")
        .arg(&table)
        .arg("lock")
        .arg(&spec)
        .arg("--out")
        .arg(tmp.path())
        .assert()
        .success();
    assert_eq!(
        fs::read(tmp.path().join("envbuild.lock")).unwrap(),
        fs::read(root().join("specs/torch29-cu128/envbuild.lock")).unwrap()
    );
    // An edited override changes the answer: drop cu128 from 2.9.1.
    let block = "version = \"2.9.1\"\npython = [\"3.10\", \"3.11\", \"3.12\", \"3.13\", \"3.14\"]\nvariants = [\"cu126\", \"cu128\", \"cu130\"]\npypi_default = \"cu128\"";
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(block));
    let edited = text.replace(
        block,
        &block
            .replace("\"cu128\", ", "")
            .replace("= \"cu128\"", "= \"cu130\""),
    );
    fs::write(&table, edited).unwrap();
    let out = envbuild()
        .arg("--table")
        .arg(&table)
        .arg("lock")
        .arg(&spec)
        .arg("--out")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("NO_SUCH_VARIANT"));
}

#[test]
fn a_broken_override_table_is_a_coded_error() {
    let tmp = tempdir();
    let table = tmp.path().join("bad.toml");
    fs::write(&table, "[meta]\nversion = \"x\"\n").unwrap();
    let out = envbuild()
        .arg("--table")
        .arg(&table)
        .args(["table"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("TABLE_INVALID"));
}
