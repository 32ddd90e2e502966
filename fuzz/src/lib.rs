//! What each fuzz target asserts of one input, as plain functions: the targets in
//! `fuzz_targets/` call them under libFuzzer, and `tests/it/fuzz_corpus.rs` replays the
//! committed corpus (`corpus/TARGET/`, crash inputs included) through them on every
//! `cargo test`. Each function takes any bytes; non-UTF-8 input is skipped (every caller reads
//! text). What must hold: no panic, and where cheap, parse -> write -> parse gives the same
//! value. No I/O.

use envbuild::core::codes::diag::INTERNAL;
use envbuild::core::compat::{Table, EMBEDDED};
use envbuild::core::image_ref::{
    host_of, is_image_tag, parse_cache_source, pull_parts, ImageRef, Repository,
};
use envbuild::core::import::{import, ImportOptions};
use envbuild::core::learn::{learn, malformed_facts, parse_reports, LearnOptions, Observed};
use envbuild::core::lock::{changed_keys, Lock};
use envbuild::core::marker::{self, Env};
use envbuild::core::smoke::{junit_suite, parse_output, render_table, Expectations};
use envbuild::core::spec::{parse_ranged, Format};
use envbuild::core::version::Version;
use std::sync::LazyLock;

/// What a target asserts of one input (it panics where that does not hold).
pub type Check = fn(&[u8]);

/// Every target: its name (a file in `fuzz_targets/`, a folder in `corpus/`) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("spec_toml", spec_toml),
    ("spec_yaml", spec_yaml),
    ("lock", lock),
    ("import_env", import_env),
    ("import_requirements", import_requirements),
    ("marker", marker),
    ("image_ref", image_ref),
    ("table", table),
    ("report_learn", report_learn),
    ("smoke_output", smoke_output),
];

static TABLE: LazyLock<Table> = LazyLock::new(|| Table::embedded().expect("the embedded table"));

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A spec in TOML (`envbuild.toml`, written by whoever opened the pull request).
pub fn spec_toml(data: &[u8]) {
    if let Some(t) = text(data) {
        let _ = parse_ranged(t, Format::Toml, "envbuild.toml", &TABLE);
    }
}

/// A spec in YAML (`envbuild.yml`).
pub fn spec_yaml(data: &[u8]) {
    if let Some(t) = text(data) {
        let _ = parse_ranged(t, Format::Yaml, "envbuild.yml", &TABLE);
    }
}

/// A lock: one that reads writes text that reads as the same lock and writes the same text
/// (the lock's hash is of that text).
pub fn lock(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let _ = changed_keys(t, t);
    let Ok(lock) = Lock::from_toml(t) else { return };
    let _ = (lock.summary_json(), lock.platforms());
    let written = lock.to_toml().expect("a lock that reads writes");
    let again = Lock::from_toml(&written)
        .unwrap_or_else(|e| panic!("a written lock does not read: {e}\n{written}"));
    assert_eq!(lock, again, "the lock changed through its own text");
    assert_eq!(
        written,
        again.to_toml().expect("writes"),
        "the text is not canonical"
    );
    assert!(changed_keys(&written, &written).is_empty());
}

/// `envbuild import` of a file named `file`: an import that succeeds gives a spec that parses.
fn imported(data: &[u8], file: &str, opts: &ImportOptions) {
    let Some(t) = text(data) else { return };
    if let Ok(imported) = import(t, file, &TABLE, opts) {
        if let Err(e) = parse_ranged(&imported.spec, Format::Toml, "envbuild.toml", &TABLE) {
            panic!(
                "import gave a spec that does not parse: {e}\n{}",
                imported.spec
            );
        }
    }
}

/// `envbuild import environment.yml`.
pub fn import_env(data: &[u8]) {
    imported(data, "environment.yml", &ImportOptions::default());
}

/// `envbuild import requirements.txt --python 3.11`.
pub fn import_requirements(data: &[u8]) {
    let opts = ImportOptions {
        python: Some("3.11".into()),
        ..ImportOptions::default()
    };
    imported(data, "requirements.txt", &opts);
}

/// A PEP 508 marker: its canonical text parses, to a marker with the same text and the same
/// verdicts (`a and (b and c)` and `a and b and c` are one marker, grouped differently).
pub fn marker(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(m) = marker::parse(t) else { return };
    let canonical = m.canonical();
    let again =
        marker::parse(&canonical).unwrap_or_else(|e| panic!("`{canonical}` does not parse: {e}"));
    assert_eq!(
        canonical,
        again.canonical(),
        "`{t}`: the canonical text is not stable"
    );
    let python: Version = "3.11.6".parse().expect("a version");
    for (machine, python) in [("x86_64", Some(&python)), ("aarch64", None)] {
        let env = Env {
            machine,
            windows: false,
            python,
        };
        assert_eq!(
            m.holds(&env).ok(),
            again.holds(&env).ok(),
            "`{t}` -> `{canonical}`"
        );
    }
}

/// An image reference, read every way envbuild reads one: one that parses is its parts.
pub fn image_ref(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let _ = (
        host_of(t),
        pull_parts(t),
        is_image_tag(t),
        ImageRef::pinned(t),
    );
    let _ = (Repository::parse(t), parse_cache_source(t));
    let Ok(r) = ImageRef::parse(t) else { return };
    let mut written = r.host.as_ref().map_or(String::new(), |h| format!("{h}/"));
    written += &r.path;
    if let Some(tag) = &r.tag {
        written = format!("{written}:{tag}");
    }
    if let Some(d) = &r.digest {
        written = format!("{written}@{d}");
    }
    assert_eq!(written, t, "a reference is not its parts");
    assert_eq!(ImageRef::parse(&written), Ok(r.clone()));
    let _ = r.registry();
}

/// A `--table` file: one that loads answers the resolver's lookups.
pub fn table(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(table) = Table::parse(t, "table.toml") else {
        return;
    };
    let _ = table.newest_torch();
    let _ = table.find_gpu("h100");
    let _ = table.gpu_suggestions("rtx 409");
}

/// Reports for `envbuild table learn`: learning from them on the embedded table refuses the
/// input or gives a table that loads, never an internal error.
pub fn report_learn(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(inputs) = parse_reports(t, "report.json") else {
        return;
    };
    let opts = LearnOptions {
        date: Some("2026-01-31".into()),
        image: Some("example.com/env:tag".into()),
    };
    match learn(EMBEDDED, "<embedded table>", &inputs, &opts) {
        Ok(learned) => {
            if let Err(f) = Table::parse(&learned.text, "learned") {
                panic!("a learned table does not load: {f}");
            }
        }
        Err(f) => assert!(
            f.diagnostics.iter().all(|d| d.code != INTERNAL),
            "learn: {f}"
        ),
    }
}

/// The smoke script's stdout (from inside an image) and an expectations file: a report that
/// reads can be reported; expectations that read write back to the same.
pub fn smoke_output(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(e) = Expectations::from_json(t, "expect.json") {
        let again = Expectations::from_json(&e.to_json(), "again");
        assert_eq!(
            Some(&e),
            again.as_ref().ok(),
            "expectations changed through JSON"
        );
    }
    let Ok(report) = parse_output(t, "", Some(0)) else {
        return;
    };
    let _ = (render_table(&report, true), junit_suite(&report, "smoke"));
    let _ = (Observed::from_report(&report), malformed_facts(&report));
}
