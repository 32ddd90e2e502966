//! `render` under kill -9: two specs rendered in turn into one folder, each render (and every
//! third time a `lock` into the folder) killed at a random moment; after each kill, the next envbuild command that writes the folder (here
//! `lock --out`, which rewrites none of the rendered files) recovers it. Every rendered file then
//! comes from one spec, and no temporary or journal is left.

use crate::support::{envbuild, root, tempdir, write};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every file under `dir` (relative path → bytes).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A small xorshift: random delays without a dependency; the seed is printed on failure.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Two specs that render the same file names, most of them with different bytes (the lock hash
/// is in their headers).
fn two_locks(dir: &Path) -> [(PathBuf, PathBuf); 2] {
    let base = std::fs::read_to_string(root().join("specs/torch-gpu-env/envbuild.toml")).unwrap();
    ["alpha", "beta"].map(|name| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let text = base.replacen("name = ", &format!("name = \"{name}\"\n# was: "), 1);
        let spec = write(&d, "envbuild.toml", &text);
        envbuild().arg("lock").arg(&spec).assert().code(0);
        (spec, d.join("envbuild.lock"))
    })
}

#[test]
fn kill_9_mid_render_then_the_next_write_leaves_one_whole_set_and_no_temporary() {
    let tmp = tempdir();
    let sets = two_locks(tmp.path());
    let reference: Vec<BTreeMap<String, Vec<u8>>> = sets
        .iter()
        .enumerate()
        .map(|(i, (_, lock))| {
            let out = tmp.path().join(format!("ref{i}"));
            envbuild()
                .arg("render")
                .arg(lock)
                .arg("--out")
                .arg(&out)
                .assert()
                .code(0);
            tree(&out)
        })
        .collect();
    assert_eq!(
        reference[0].keys().collect::<Vec<_>>(),
        reference[1].keys().collect::<Vec<_>>()
    );
    let differ = reference[0]
        .iter()
        .filter(|(n, b)| reference[1].get(*n) != Some(*b))
        .count();
    assert!(
        differ >= 5,
        "only {differ} files differ between the two specs"
    );
    let out = tmp.path().join("out");
    let bin = assert_cmd::cargo::cargo_bin("envbuild");
    // How long one render takes here: kills land anywhere from start-up to the last rename.
    let t0 = Instant::now();
    envbuild()
        .arg("render")
        .arg(&sets[0].1)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(0);
    let span = (t0.elapsed().as_micros() as u64).max(1000);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = seed;
    let start = Instant::now();
    let (mut kills, mut mixed_before_recovery, mut interrupted) = (0, 0, 0);
    while kills < 150 && start.elapsed() < Duration::from_secs(60) {
        let (spec, lock) = &sets[kills % 2];
        // Every third kill hits `lock` writing into the folder instead (its temporaries too).
        let (command, input) = if kills % 3 == 2 {
            ("lock", spec)
        } else {
            ("render", lock)
        };
        let mut child = std::process::Command::new(&bin)
            .arg(command)
            .arg(input)
            .arg("--out")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(next(&mut rng) % (span * 3 / 2)));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        kills += 1;
        let seen = tree(&out);
        // Files that differ between the specs and are on disk as spec `i` renders them.
        let from = |i: usize| {
            reference[i]
                .iter()
                .filter(|(n, b)| reference[1 - i].get(*n) != Some(*b) && seen.get(*n) == Some(b))
                .count()
        };
        if seen.keys().any(|n| n.contains(".envbuild-")) {
            interrupted += 1;
        }
        if from(0) > 0 && from(1) > 0 {
            mixed_before_recovery += 1;
        }
        // Recovery: any command that writes the folder, here one that rewrites no rendered file.
        envbuild()
            .arg("lock")
            .arg(spec)
            .arg("--out")
            .arg(&out)
            .assert()
            .code(0);
        let mut seen = tree(&out);
        seen.remove("envbuild.lock");
        let leftovers: Vec<&String> = seen
            .keys()
            .filter(|n| !reference[0].contains_key(*n))
            .collect();
        assert!(
            leftovers.is_empty(),
            "kill {kills} (seed {seed}): left behind {leftovers:?}"
        );
        let whole = (0..2).any(|i| seen == reference[i]);
        assert!(
            whole,
            "kill {kills} (seed {seed}): after recovery the folder mixes both specs: {:?}",
            seen.iter()
                .map(|(n, b)| (n, (0..2).find(|i| reference[*i].get(n) == Some(b))))
                .collect::<Vec<_>>()
        );
    }
    eprintln!(
        "{kills} kills in {:?} (render takes ~{span} µs); {interrupted} left a temporary or a \
         journal, {mixed_before_recovery} a mix of both specs, all repaired by the next write",
        start.elapsed()
    );
    // A last render completes normally over whatever the loop left.
    envbuild()
        .arg("render")
        .arg(&sets[1].1)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(0);
    let mut seen = tree(&out);
    seen.remove("envbuild.lock");
    assert!(seen == reference[1]);
}
