//! A hostile checkout (docs/security.md, "The checkout" and "Child processes"): the files and
//! links a pull request can plant beside a spec make envbuild run none of their code and write
//! nothing outside the outputs its command names.

use crate::conda_closure::{pip_in_conda_sources, pip_in_conda_spec};
use crate::support::closure::{add_wheels, WHEELS};
use crate::support::*;
use std::fs;
use std::path::Path;

/// Python modules a `python -c` run from the checkout would import first (the standard
/// library's own names, and the start-up hooks), each writing `marker` when imported, and an
/// executable `uv` that writes it when run.
fn plant_code(project: &Path, marker: &Path) {
    let py = format!(
        "open({:?}, 'a').write(__name__ + '\\n')\n",
        marker.to_string_lossy()
    );
    for module in [
        "json",
        "zipfile",
        "sitecustomize",
        "usercustomize",
        "os_helper",
    ] {
        write(project, &format!("{module}.py"), &py);
    }
    let uv = project.join("uv");
    fs::write(
        &uv,
        format!("#!/bin/sh\necho uv >> '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    let mut perms = fs::metadata(&uv).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&uv, perms).unwrap();
}

/// Fail when planted code left its mark.
fn assert_nothing_ran(marker: &Path) {
    assert!(
        !marker.exists(),
        "the checkout's code ran: {}",
        fs::read_to_string(marker).unwrap_or_default()
    );
}

/// A lock whose closure needs the stand-in writer (a Python helper: pip extras in a conda
/// environment) run in a checkout that plants standard-library modules and a `uv`, with `.`
/// and an empty entry on `PATH`: nothing planted runs, and the lock is written as usual.
#[test]
fn a_checkouts_code_never_runs_at_lock_time() {
    let (_ch, server, idx) = pip_in_conda_sources();
    let work = tempdir();
    let outside = tempdir();
    let marker = outside.path().join("ran");
    plant_code(work.path(), &marker);
    write(
        work.path(),
        "envbuild.toml",
        &pip_in_conda_spec(
            idx.path(),
            "linux-64",
            "driver = \"580.95.05\"\ngpus = [\"H200\"]",
        ),
    );
    let path = format!(
        ".::{}",
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let out = envbuild()
        .current_dir(work.path())
        .env("PATH", path)
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &server.url)
        .env("ENVBUILD_CACHE_DIR", outside.path().join("cache"))
        .env("XDG_STATE_HOME", outside.path().join("state"))
        .args(["lock", "envbuild.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_nothing_ran(&marker);
    assert!(work.path().join("envbuild.lock").is_file());
}

/// A recovery journal planted in the checkout (in the format envbuild once kept there), naming
/// a staged file and a destination through a link to a folder outside (`hooks -> .git/hooks`),
/// moves nothing at `lock` (written, then up to date) or `render`; a lock or rendered file that
/// is a planted link is refused (`OUTPUT_SYMLINK`), the file it points at untouched.
#[test]
fn planted_journals_and_links_move_and_write_nothing_outside() {
    let work = tempdir();
    let outside = tempdir();
    let hooks = outside.path().join("hooks");
    fs::create_dir(&hooks).unwrap();
    let spec = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.toml")).unwrap();
    write(work.path(), "envbuild.toml", &spec);
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let journal = format!(
        "envbuild-journal 1\n{} {}\n",
        hex(".envbuild-tmp-x"),
        hex("hooks/pre-commit")
    );
    for dir in [work.path().to_path_buf(), work.path().join("out")] {
        fs::create_dir_all(&dir).unwrap();
        write(&dir, ".envbuild-tmp-x", "#!/bin/sh\necho owned\n");
        write(&dir, ".envbuild-journal", &journal);
        std::os::unix::fs::symlink(&hooks, dir.join("hooks")).unwrap();
    }
    let run = |args: &[&str]| {
        envbuild()
            .current_dir(work.path())
            .env("XDG_STATE_HOME", outside.path().join("state"))
            .args(args)
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let out = run(&["lock", "envbuild.toml"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    let out = run(&["render", "envbuild.lock", "--out", "out"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        fs::read_dir(&hooks).unwrap().next().is_none(),
        "a file was moved out of the checkout"
    );
    assert!(work.path().join("out/Dockerfile").is_file());

    // The lock itself, and a rendered file, as planted links.
    let victim = outside.path().join("bashrc");
    fs::write(&victim, "mine").unwrap();
    fs::remove_file(work.path().join("envbuild.lock")).unwrap();
    std::os::unix::fs::symlink(&victim, work.path().join("envbuild.lock")).unwrap();
    let out = run(&["lock", "envbuild.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("OUTPUT_SYMLINK"),
        "{}",
        stderr_of(&out)
    );
    fs::remove_file(work.path().join("envbuild.lock")).unwrap();
    let out = run(&["lock", "envbuild.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    fs::remove_file(work.path().join("out/Dockerfile")).unwrap();
    std::os::unix::fs::symlink(&victim, work.path().join("out/Dockerfile")).unwrap();
    let out = run(&["render", "envbuild.lock", "--out", "out"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("OUTPUT_SYMLINK"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "mine");
}

/// `smoke` run from a checkout that plants `torch.py` and the start-up hooks: the interpreter
/// under test imports none of them (no torch here: `TORCH_MISSING`, not the planted one).
#[test]
fn the_smoke_test_imports_nothing_from_the_folder_it_is_run_in() {
    let work = tempdir();
    let outside = tempdir();
    let marker = outside.path().join("ran");
    plant_code(work.path(), &marker);
    write(
        work.path(),
        "torch.py",
        &format!(
            "open({:?}, 'a').write('torch\\n')\n__version__ = '9.9.9'\n",
            marker.to_string_lossy()
        ),
    );
    let out = envbuild()
        .current_dir(work.path())
        .args(["smoke", "--python", "python3", "--json", "--gpus", "none"])
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("TORCH_MISSING"),
        "{}",
        stdout_of(&out)
    );
    assert_nothing_ran(&marker);
}

/// Every file under `dir` (links as `-> target`), with its bytes, but what `skip` names.
fn tree(dir: &Path, skip: &[&str]) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if skip
                .iter()
                .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
            {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_symlink() {
                let to = fs::read_link(&p).unwrap();
                out.insert(rel, format!("-> {}", to.display()).into_bytes());
            } else if t.is_dir() {
                todo.push(p);
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A listener that counts every connection made to it: the decoy index, and the proxy every
/// request would have to go through.
fn decoy() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(conn);
        }
    });
    (url, hits)
}

/// The promise as a whole (docs/security.md): `lock`, `lock --locked` and `render` (of the lock
/// and of the spec) on a checkout that plants code (standard-library modules, a `uv` on a
/// relative `PATH` entry), resolver configuration naming another index (`uv.toml`,
/// `pyproject.toml`, `pip.conf`, `.netrc`), a recovery journal, links out of the project and
/// links named like envbuild's temporaries: no planted code runs, nothing outside the project
/// changes (but envbuild's own state and cache folders), in the project only the named outputs
/// change (and envbuild's temporaries go), and no host is reached (every request would pass the
/// counting proxy; the decoy index counts too).
#[test]
fn a_hostile_checkout_runs_nothing_writes_nowhere_and_reaches_no_other_host() {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    let outside = tempdir();
    let (decoy_url, hits) = decoy();
    let marker = outside.path().join("ran");
    plant_code(work.path(), &marker);
    write(
        work.path(),
        "envbuild.toml",
        &crate::support::closure::closure_spec("hostile", "3.13", "2.28", idx.path(), ""),
    );
    let index = format!("{decoy_url}/simple");
    write(
        work.path(),
        "uv.toml",
        &format!("index-url = \"{index}\"\n"),
    );
    write(
        work.path(),
        "pyproject.toml",
        &format!("[project]\nname = \"p\"\nversion = \"1\"\n[tool.uv]\nindex-url = \"{index}\"\n"),
    );
    write(
        work.path(),
        "pip.conf",
        &format!("[global]\nindex-url = {index}\n"),
    );
    write(
        work.path(),
        ".netrc",
        "machine 127.0.0.1 login x password y\n",
    );
    let hooks = outside.path().join("hooks");
    fs::create_dir(&hooks).unwrap();
    fs::write(outside.path().join("bashrc"), "mine").unwrap();
    std::os::unix::fs::symlink(&hooks, work.path().join("hooks")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("bashrc"),
        work.path().join(".envbuild-tmp-bashrc"),
    )
    .unwrap();
    write(work.path(), ".envbuild-tmp-x", "#!/bin/sh\necho owned\n");
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    write(
        work.path(),
        ".envbuild-journal",
        &format!(
            "envbuild-journal 1\n{} {}\n",
            hex(".envbuild-tmp-x"),
            hex("hooks/pre-commit")
        ),
    );
    let before_outside = tree(outside.path(), &["state", "cache"]);
    let before_project = tree(work.path(), &[]);
    let path = format!(".::{}", std::env::var("PATH").unwrap_or_default());
    let run = |args: &[&str]| {
        let out = envbuild()
            .current_dir(work.path())
            .env("PATH", &path)
            .env("XDG_STATE_HOME", outside.path().join("state"))
            .env("ENVBUILD_CACHE_DIR", outside.path().join("cache"))
            .env("HTTP_PROXY", &decoy_url)
            .env("HTTPS_PROXY", &decoy_url)
            .env("ALL_PROXY", &decoy_url)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
    };
    run(&["lock", "envbuild.toml"]);
    run(&["lock", "envbuild.toml", "--locked"]);
    run(&["render", "envbuild.lock", "--out", "out"]);
    run(&["render", "envbuild.toml", "--out", "out2"]);

    assert_nothing_ran(&marker);
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a host was reached"
    );
    assert_eq!(tree(outside.path(), &["state", "cache"]), before_outside);
    let mut after = tree(work.path(), &["out", "out2"]);
    assert!(after.remove("envbuild.lock").is_some());
    let mut expected = before_project;
    // envbuild's temporaries (what a killed run would have left) are removed, links as links.
    expected.retain(|k, _| !k.starts_with(".envbuild-tmp-"));
    assert_eq!(
        after, expected,
        "the project changed beyond the named outputs"
    );
    assert!(work.path().join("out/Dockerfile").is_file());
    assert!(work.path().join("out2/Dockerfile").is_file());
}
