//! The fuzz corpus replayed: every committed input of every fuzz target (`fuzz/corpus/TARGET/`,
//! the crashes fuzzing found included) goes through that target's checks on each `cargo test`,
//! without libFuzzer, so a parser that panics again on an input fuzzing once found fails here.
//! The targets, their corpus folders and their `[[bin]]` entries name the same set.

// The checks the fuzz targets run, compiled here too (the fuzz crate is its own workspace and
// needs a nightly flag to build as a fuzzer; its checks need only envbuild).
#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod checks;

use envbuild_test_support::root;
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn names_in(dir: &str, strip: &str) -> BTreeSet<String> {
    std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter_map(|n| n.strip_suffix(strip).map(str::to_string))
        .collect()
}

#[test]
fn every_fuzz_target_has_its_corpus_and_its_bin() {
    let targets: BTreeSet<String> = checks::TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names_in("fuzz/fuzz_targets", ".rs"), targets);
    assert_eq!(names_in("fuzz/corpus", ""), targets);
    let manifest =
        std::fs::read_to_string(root().join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    for t in &targets {
        assert!(
            manifest.contains(&format!("name = \"{t}\"\npath = \"fuzz_targets/{t}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] for {t}"
        );
    }
}

#[test]
fn the_fuzz_corpus_replays_clean() {
    let mut failed = Vec::new();
    let mut replayed = 0;
    for (target, check) in checks::TARGETS {
        let dir = root().join("fuzz/corpus").join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("an entry").path())
            .collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).expect("a corpus file");
            replayed += 1;
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
                failed.push(format!("{target}: {}", f.display()));
            }
        }
    }
    assert!(failed.is_empty(), "the fuzz checks fail on: {failed:#?}");
    assert!(replayed >= 50, "only {replayed} corpus files replayed");
}
