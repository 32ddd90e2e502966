//! A hostile checkout (docs/security.md, "The checkout" and "Child processes"): the files and
//! links a pull request can plant beside a spec make envbuild run none of their code and write
//! nothing outside the outputs its command names.

use crate::conda_closure::{pip_in_conda_spec, FORGE_EXTRAS};
use crate::support::closure::{add_wheels, WHEELS};
use crate::support::conda_channel::{add_packages, Server};
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

/// A lock whose closure needs the stand-in writer (a Python helper: pip extras in a conda
/// environment) run in a checkout that plants standard-library modules and a `uv`, with `.`
/// and an empty entry on `PATH`: nothing planted runs, and the lock is written as usual.
#[test]
fn a_checkouts_code_never_runs_at_lock_time() {
    let ch = tempdir();
    add_packages(ch.path(), FORGE_EXTRAS);
    let server = Server::start(ch.path());
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    add_wheels(
        idx.path(),
        r#"[{"name": "faiss-like", "version": "1.9.0", "requires": ["libfaiss-wheel"]},
            {"name": "libfaiss-wheel", "version": "1.0"},
            {"name": "uses-faiss", "version": "1.0", "requires": ["faiss-like>=1.9"]}]"#,
    );
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
    assert!(
        !marker.exists(),
        "the checkout's code ran: {}",
        fs::read_to_string(&marker).unwrap_or_default()
    );
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
    assert!(
        !marker.exists(),
        "the checkout's code ran: {}",
        fs::read_to_string(&marker).unwrap_or_default()
    );
}
