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
