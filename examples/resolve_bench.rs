//! In-process timing of resolution (what `envbuild lock` costs without process start-up and
//! file writes): every example spec in `specs/` (the success path), and every error fixture in
//! `tests/fixtures/errors/` (the error path, where each hint that names values is proven by
//! resolving the changed spec). Run: `cargo run --release --example resolve_bench`.

use envbuild::core::compat::Table;
use envbuild::core::resolve::{resolve, spec_hash};
use envbuild::core::spec::{parse, Format};
use std::path::{Path, PathBuf};
use std::time::Instant;

const N: u32 = 200;

fn files(dir: &str, pick: impl Fn(&Path) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| pick(&e.path())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Mean time of parse + resolve over N runs, and whether it locked.
fn time(path: &Path, table: &Table) -> (std::time::Duration, bool) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let format = Format::from_path(path);
    let once = || match parse(&text, format, "bench", table) {
        Ok(spec) => resolve(&spec, table, &spec_hash(&spec)).lock.is_some(),
        Err(e) => {
            // A spec with errors still resolves when the keys resolution needs are valid.
            if let Some(spec) = e.partial {
                resolve(&spec, table, "");
            }
            false
        }
    };
    let locked = once();
    let t = Instant::now();
    for _ in 0..N {
        once();
    }
    (t.elapsed() / N, locked)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = Table::embedded()?;
    let specs = files("specs", |p| {
        Some(p.join("envbuild.toml")).filter(|s| s.is_file())
    });
    let errors = files("tests/fixtures/errors", |p| Some(p.to_path_buf()));
    let mut worst = std::time::Duration::ZERO;
    for path in specs.iter().chain(&errors) {
        let (d, locked) = time(path, &table);
        worst = worst.max(d);
        let outcome = if locked { "locks" } else { "fails" };
        println!("{:55} {outcome}  {d:?}", path.display());
    }
    println!("slowest: {worst:?} (mean of {N} runs each)");
    Ok(())
}
