//! A lock proves it is envbuild's own before anything adopts or renders it (issue 38, classes 3
//! and 14), and envbuild's outputs never replace a file it did not write (class 8).

use crate::support::closure::*;
use crate::support::*;
use crate::trust::{pip_closure_lock, render_in};
use std::fs;

/// The lock text with its `closure_sha256` line removed.
fn unsealed(text: &str) -> String {
    let out: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("closure_sha256 = "))
        .collect();
    assert_ne!(out.len(), text.lines().count(), "the lock had a seal");
    out.join("\n") + "\n"
}

/// torch's `sha256` line in the lock text.
fn torch_sha(text: &str) -> String {
    text.lines()
        .skip_while(|l| *l != "name = \"torch\"")
        .find(|l| l.starts_with("sha256 = "))
        .expect("torch's sha256")
        .to_string()
}

/// A closure lock whose seal was removed and one of whose hashes was edited is never adopted:
/// `--locked` and `--offline` refuse it (nothing written), a plain `lock` sets it aside with a
/// warning and resolves the closure afresh (the edited hash is gone, the seal is back), and
/// `--locked` then passes on what was resolved, not on what was edited. Removing the seal
/// alone is a tampering sign too.
#[test]
fn a_lock_whose_seal_was_removed_is_re_resolved_or_refused_never_adopted() {
    let (_idx, work) = pip_closure_lock("unsealed");
    let lock = work.path().join("envbuild.lock");
    let good = fs::read_to_string(&lock).unwrap();
    let sha = torch_sha(&good);
    let flipped = if sha.contains("\"0") { "1" } else { "0" };
    let edited = good.replace(&sha, &format!("sha256 = \"{flipped}{}", &sha[11..]));
    for (what, text) in [
        ("seal removed", unsealed(&good)),
        ("seal removed, hash edited", unsealed(&edited)),
    ] {
        fs::write(&lock, &text).unwrap();
        for args in [&["--locked"][..], &["--offline"]] {
            let out = lock_in(work.path(), args);
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{what} {args:?}: {err}");
            assert!(err.contains("LOCK_TAMPERED"), "{what} {args:?}: {err}");
            assert_eq!(fs::read_to_string(&lock).unwrap(), text, "{what}: written");
        }
        let out = render_in(work.path(), "envbuild.toml", "r");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{what} render: {err}");
        assert!(err.contains("LOCK_TAMPERED"), "{what} render: {err}");
        assert!(!work.path().join("r").exists(), "{what}: render wrote");
        // A plain lock resolves afresh: the edit is not adopted, and it says why.
        let out = lock_in(work.path(), &[]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{what} lock: {err}");
        assert!(
            err.contains("warning[LOCK_TAMPERED]") && err.contains("resolved afresh"),
            "{what} lock: {err}"
        );
        assert_eq!(fs::read_to_string(&lock).unwrap(), good, "{what}: adopted");
        let out = lock_in(work.path(), &["--locked"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
    }
    // An edited hash under a recomputed-looking but stale seal stays refused as before.
    fs::write(&lock, &edited).unwrap();
    let out = lock_in(work.path(), &["--offline"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

/// `--locked` on an unsealed lock says what it is (`LOCK_TAMPERED`, not a stale lock whose fix
/// is to add the seal), and its hint names a plain `envbuild lock`, which resolves afresh.
#[test]
fn the_refusal_of_an_unsealed_lock_points_at_a_fresh_resolution() {
    let (_idx, work) = pip_closure_lock("unsealed-hint");
    let lock = work.path().join("envbuild.lock");
    let good = fs::read_to_string(&lock).unwrap();
    fs::write(&lock, unsealed(&good)).unwrap();
    let err = stderr_of(&lock_in(work.path(), &["--locked"]));
    let tampered = err
        .split("error[")
        .find(|d| d.starts_with("LOCK_TAMPERED"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(!err.contains("LOCK_STALE"), "{err}");
    assert!(tampered.contains("`envbuild lock SPEC`"), "{err}");
    assert!(!tampered.contains("--offline"), "{err}");
}

/// `text` at `dir/rel`, its folders made first.
fn put(dir: &std::path::Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A committed example's spec and lock, copied into a new folder, the spec named `spec_name`.
fn example_in(spec_name: &str) -> (tempfile::TempDir, String) {
    let dir = tempdir();
    let spec = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.toml")).unwrap();
    write(dir.path(), spec_name, &spec);
    let lock = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.lock")).unwrap();
    write(dir.path(), "envbuild.lock", &lock);
    (dir, lock)
}

/// `render envbuild.lock` of a lock edited by hand while its `spec_sha256` still names the spec
/// beside it (a package's version in `[packages]`, which the smoke expectations come from, or
/// an install line) is refused as `lock --locked` refuses it (`LOCK_STALE`, naming the key),
/// whatever the spec is called; nothing is written. The lock as written renders, and so does a
/// lock with no spec beside it.
#[test]
fn render_refuses_a_hand_edited_lock_as_lock_locked_does() {
    for spec_name in ["envbuild.toml", "vision.toml"] {
        let (dir, good) = example_in(spec_name);
        let edits = [
            (
                "packages.torch",
                good.replace("torch = \"2.9.1\"", "torch = \"2.8.0\""),
            ),
            (
                "install.pip",
                good.replace("\"numpy==2.3.4\"", "\"numpy==1.26.4\""),
            ),
        ];
        for (key, text) in edits {
            assert_ne!(text, good, "{key}: the edit took");
            write(dir.path(), "envbuild.lock", &text);
            let locked = envbuild()
                .current_dir(dir.path())
                .args(["lock", spec_name, "--locked"])
                .output()
                .unwrap();
            assert_eq!(locked.status.code(), Some(1), "{}", stderr_of(&locked));
            let out = render_in(dir.path(), "envbuild.lock", "r");
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{spec_name} {key}: {err}");
            assert!(
                err.contains("LOCK_STALE") && err.contains(key),
                "{spec_name} {key}: {err}"
            );
            assert!(!dir.path().join("r").exists(), "{spec_name} {key}: wrote");
        }
        write(dir.path(), "envbuild.lock", &good);
        let out = render_in(dir.path(), "envbuild.lock", "r");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    // A lock on its own (no spec beside it) is rendered from the lock alone, as before.
    let alone = tempdir();
    let lock = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.lock")).unwrap();
    write(alone.path(), "envbuild.lock", &lock);
    let out = render_in(alone.path(), "envbuild.lock", "r");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// `render --out DIR` never replaces a file it did not write: a hand-written Dockerfile or pod
/// manifest there is refused (`OUTPUT_EXISTS`, naming it), and nothing at all is written; with
/// `--force` it is replaced. envbuild's own earlier output (another lock's, an older smoke
/// script, another lock's expectations) is replaced without `--force`.
#[test]
fn render_never_replaces_a_file_it_did_not_write_without_force() {
    let (dir, _) = example_in("envbuild.toml");
    let other = fs::read_to_string(root().join("specs/pypi-torch214/envbuild.lock")).unwrap();
    write(dir.path(), "other.lock", &other);
    for (rel, mine) in [
        ("Dockerfile", "FROM scratch\n# my own\n"),
        ("run/pod.yaml", "apiVersion: v1\nkind: Pod\n"),
        ("envbuild/expect.json", "{\"mine\": true}\n"),
    ] {
        let out_dir = dir.path().join("out");
        let _ = fs::remove_dir_all(&out_dir);
        put(&out_dir, rel, mine);
        let out = render_in(dir.path(), "envbuild.lock", "out");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{rel}: {err}");
        assert!(
            err.contains("OUTPUT_EXISTS") && err.contains(rel),
            "{rel}: {err}"
        );
        assert!(err.contains("--force"), "{rel}: {err}");
        assert_eq!(fs::read_to_string(out_dir.join(rel)).unwrap(), mine);
        assert_eq!(files_in(&out_dir).len(), 1, "{rel}: render wrote others");
        let out = envbuild()
            .current_dir(dir.path())
            .args(["render", "envbuild.lock", "--out", "out", "--force"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{rel}: {}", stderr_of(&out));
        assert_ne!(fs::read_to_string(out_dir.join(rel)).unwrap(), mine);
    }
    // Over its own output: another lock's render, then an older smoke script, re-rendered.
    let out = render_in(dir.path(), "other.lock", "out");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let smoke = dir.path().join("out/envbuild/envbuild_smoke.py");
    let older = fs::read_to_string(&smoke).unwrap() + "\n# an older release's line\n";
    fs::write(&smoke, older).unwrap();
    let out = render_in(dir.path(), "envbuild.lock", "out");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!fs::read_to_string(&smoke)
        .unwrap()
        .contains("older release"));
}

/// `lock` writes only over a lock: a spec named `envbuild.lock` (or `--out` pointing the lock
/// onto it) is not overwritten by its own lock, nor is another file at the lock path; each is
/// `OUTPUT_EXISTS`, the file unchanged. An old lock is replaced as before.
#[test]
fn lock_never_writes_over_its_spec_or_a_file_that_is_not_a_lock() {
    let (dir, good) = example_in("envbuild.toml");
    let spec = fs::read_to_string(dir.path().join("envbuild.toml")).unwrap();
    let sub = dir.path().join("sub");
    put(&sub, "envbuild.lock", &spec);
    for args in [
        &["lock", "sub/envbuild.lock"][..],
        &["lock", "sub/envbuild.lock", "--out", "sub"],
    ] {
        let out = envbuild()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("OUTPUT_EXISTS") && err.contains("spec itself"),
            "{args:?}: {err}"
        );
        assert_eq!(fs::read_to_string(sub.join("envbuild.lock")).unwrap(), spec);
    }
    let notes = "my notes, not a lock\n";
    write(dir.path(), "envbuild.lock", notes);
    let out = lock_in(dir.path(), &["--no-closure"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("OUTPUT_EXISTS"), "{err}");
    assert_eq!(
        fs::read_to_string(dir.path().join("envbuild.lock")).unwrap(),
        notes
    );
    // A lock (even a stale one) is replaced.
    write(
        dir.path(),
        "envbuild.lock",
        &good.replace("torch = \"2.9.1\"", "torch = \"2.8.0\""),
    );
    let out = lock_in(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read_to_string(dir.path().join("envbuild.lock")).unwrap(),
        good
    );
}
