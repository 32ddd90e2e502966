//! One validation: every string a spec or a `--table` file carries into a lock passes the rules
//! render checks the lock with (`core::rules`), so `lock` never writes a lock `render` refuses.
//! Each string of each example spec (and each column of the table) is replaced in turn by
//! values that are hostile or merely wrong; whenever the result still locks, it must render.

use envbuild::core::compat::Table;
use envbuild::core::render::{render, RenderOptions};
use envbuild::core::spec::{parse, Format};
use std::collections::BTreeSet;

/// Values that break a template position one way or another (a second word, a floating version,
/// an untagged image, a size the engine rejects, a path out of the project, a line break).
const HOSTILE: &[&str] = &[
    "busybox AS evil FROM alpine:3",
    "python",
    "*",
    "999999999999g",
    "x\ny = 1",
    "a b",
    ".",
    "../x",
    "-rf",
    "$(id)",
    "",
    "H100 P100",
];

/// The example specs, plus one that sets every optional key a template uses.
fn specs() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir("specs")
        .unwrap()
        .map(|e| e.unwrap().path().join("envbuild.toml"))
        .filter(|p| p.exists())
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        // A spec's ranges are pinned only by its resolved closure (uv, the network);
        // tests/it/closure.rs locks and renders those against a made-up index.
        .filter(|(_, text)| !has_ranges(text))
        .collect();
    out.sort();
    out.push((
        "full".into(),
        "name = \"full\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"\n\
         pip = [\"einops==0.8.0\"]\nconda = [\"conda-forge::rich=13.7.1\"]\n\
         [target]\ndriver = \"560.35.03\"\ngpus = [\"A100\", \"8.9\"]\nplatform = \"linux-64\"\nglibc = \"2.31\"\n\
         [image]\nbase = \"python:3.11-slim-bookworm\"\nwheels = \"wheels\"\njupyterlab = \"4.4.10\"\nca-bundle = \"certs/ca.pem\"\n\
         variants = [\"runtime\", \"dev\"]\nbase-provides = [\"torchaudio\"]\n\
         [run]\nshm-size = \"8g\"\ndatasets = \"/data\"\ncheckpoints = \"/ckpt\"\n"
            .into(),
    ));
    out
}

/// Whether the spec has a pip or conda range (`einops>=0.8`), which only a closure pins.
fn has_ranges(text: &str) -> bool {
    let table = Table::embedded().unwrap();
    parse(text, Format::Toml, "spec.toml", &table)
        .is_ok_and(|s| s.pip.iter().any(|p| p.is_range()) || s.conda.iter().any(|c| c.is_range()))
}

/// Every string leaf of a TOML value: its path with list indices, and a setter by that path.
fn string_paths(v: &toml::Value, path: &str, out: &mut Vec<String>) {
    match v {
        toml::Value::String(_) => out.push(path.to_string()),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                string_paths(item, &format!("{path}[{i}]"), out);
            }
        }
        toml::Value::Table(t) => {
            for (k, item) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                string_paths(item, &p, out);
            }
        }
        _ => {}
    }
}

/// Set every string leaf whose path, with list indices dropped, is `pattern`.
fn set_all(v: &mut toml::Value, path: &str, pattern: &str, to: &str) {
    match v {
        toml::Value::String(s) if strip_indices(path) == pattern => *s = to.to_string(),
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                set_all(item, &format!("{path}[{i}]"), pattern, to);
            }
        }
        toml::Value::Table(t) => {
            for (k, item) in t.iter_mut() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                set_all(item, &p, pattern, to);
            }
        }
        _ => {}
    }
}

fn strip_indices(path: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for c in path.chars() {
        match c {
            '[' => skip = true,
            ']' => skip = false,
            c if !skip => out.push(c),
            _ => {}
        }
    }
    out
}

/// The lock of `text` against `table`, when it locks without an error.
fn lock_of(text: &str, table: &Table) -> Option<envbuild::core::lock::Lock> {
    let spec = parse(text, Format::Toml, "spec.toml", table).ok()?;
    let r = envbuild::core::resolve::resolve(&spec, table, "0");
    if r.has_errors() {
        return None;
    }
    r.lock
}

/// Lock `text` against `table`; when it locks, render the lock, or say why not.
fn locks_but_does_not_render(text: &str, table: &Table) -> Option<String> {
    let lock = lock_of(text, table)?;
    render(&lock, &RenderOptions::default())
        .err()
        .map(|f| format!("{:?}", f.diagnostics))
}

#[test]
fn every_spec_string_that_locks_renders() {
    let table = Table::embedded().unwrap();
    let mut tried = 0;
    for (name, text) in specs() {
        // Each starting point locks and renders, so the variations below test something.
        assert!(lock_of(&text, &table).is_some(), "{name} does not lock");
        assert!(
            locks_but_does_not_render(&text, &table).is_none(),
            "{name} itself"
        );
        let doc: toml::Value = toml::from_str(&text).unwrap();
        let mut paths = Vec::new();
        string_paths(&doc, "", &mut paths);
        for path in &paths {
            for bad in HOSTILE {
                let mut changed = doc.clone();
                set_all(&mut changed, "", &strip_indices(path), bad);
                let changed = toml::to_string(&changed).unwrap();
                // A value that makes an extra a range (`"*"`, a bare name) is a range spec,
                // which only `lock` takes to a lock (the closure pins it, or the table-level
                // lock leaves it out of `packages`), as for the starting points above.
                if has_ranges(&changed) {
                    continue;
                }
                tried += 1;
                if let Some(why) = locks_but_does_not_render(&changed, &table) {
                    panic!("{name}: `{path}` = {bad:?} locks but render refuses it: {why}");
                }
            }
        }
    }
    assert!(tried > 500, "only {tried} variations");
}

#[test]
fn every_table_string_that_loads_and_locks_renders() {
    let embedded = envbuild::core::compat::EMBEDDED;
    let doc: toml::Value = toml::from_str(embedded).unwrap();
    let mut paths = Vec::new();
    string_paths(&doc, "", &mut paths);
    let patterns: BTreeSet<String> = paths.iter().map(|p| strip_indices(p)).collect();
    let specs = specs();
    for (name, text) in &specs {
        assert!(
            lock_of(text, &Table::embedded().unwrap()).is_some(),
            "{name} does not lock"
        );
    }
    let mut loaded = 0;
    for pattern in &patterns {
        // Source citations and notes never reach a lock; their keys are checked for existence.
        if pattern.starts_with("sources.") || pattern.ends_with(".note") {
            continue;
        }
        for bad in [
            "*",
            "python",
            "busybox AS evil FROM alpine:3",
            "x\ny",
            "a b",
            "$(id)",
            "",
        ] {
            let mut changed = doc.clone();
            set_all(&mut changed, "", pattern, bad);
            let Ok(table) = Table::parse(&toml::to_string(&changed).unwrap(), "t.toml") else {
                continue;
            };
            loaded += 1;
            for (name, text) in &specs {
                if let Some(why) = locks_but_does_not_render(text, &table) {
                    panic!(
                        "table `{pattern}` = {bad:?}: {name} locks but render refuses it: {why}"
                    );
                }
            }
        }
    }
    assert!(
        patterns.len() > 40 && loaded > 0,
        "{} patterns",
        patterns.len()
    );
}

#[test]
fn a_table_value_that_would_reach_a_rendered_file_unpinned_is_refused_at_load() {
    for (from, to, want) in [
        (
            "torchvision = \"0.20.1\"",
            "torchvision = \"*\"",
            "[[torch]] 2.5.1: torchvision `*` is not an exact version",
        ),
        (
            "image = \"python:3.11-slim-bookworm\"",
            "image = \"python\"",
            "image `python` has no tag",
        ),
    ] {
        let embedded = envbuild::core::compat::EMBEDDED;
        assert!(embedded.contains(from), "{from}");
        let text = embedded.replacen(from, to, 1);
        let Err(err) = Table::parse(&text, "t.toml") else {
            panic!("a table with {to} loaded");
        };
        let msgs: Vec<&str> = err.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert!(
            err.diagnostics.iter().all(|d| d.code == "TABLE_INVALID")
                && msgs.iter().any(|m| m.contains(want)),
            "{msgs:?}"
        );
    }
}
