//! The conda closure (`[lock] closure = true` on a conda environment), offline: conda channels
//! of real package files (tests/fixtures/fake_channel.py) served over HTTP on 127.0.0.1 by the
//! test, the channel alias pointed at them, and envbuild's in-process solver (rattler's
//! resolvo) resolving for the target: its CUDA driver, glibc and platform; strict channel
//! priority; hashes; reuse without a request; `--upgrade`, `--upgrade-package`, `--offline`;
//! and pip extras resolved for the conda environment's Python.

use crate::support::closure::{add_wheels, sha256_file, WHEELS};
use crate::support::conda_channel::{add_packages, md5_file, Server};
use crate::support::*;
use envbuild::core::lock::Lock;
use std::fs;
use std::path::{Path, PathBuf};

/// The channels: `pytorch` (a CUDA and a CPU build of pytorch 2.5.1, the CPU one down-weighted
/// by a track feature; an older tqdm than conda-forge's), `nvidia` (two cudart releases, one
/// outside pytorch-cuda 12.4's range), `conda-forge` (python 3.11.10 needing glibc 2.34 beside
/// 3.11.9 needing 2.17; numpy 1.x and 2.x; a newer mkl than the table's pin; noarch tqdm).
pub(crate) const CHANNELS: &str = r#"[
{"channel":"pytorch","subdir":"linux-64","name":"pytorch","version":"2.5.1","build":"py3.11_cuda12.4_cudnn9.1.0_0","depends":["python >=3.11,<3.12.0a0","pytorch-cuda >=12.4,<12.5","__cuda","mkl >=2023.1.0,<2025.0a0","numpy >=1.23"]},
{"channel":"pytorch","subdir":"linux-64","name":"pytorch","version":"2.5.1","build":"py3.11_cpu_0","track_features":["pytorch-cpu"],"depends":["python >=3.11,<3.12.0a0","mkl >=2023.1.0,<2025.0a0","numpy >=1.23"]},
{"channel":"pytorch","subdir":"linux-64","name":"torchvision","version":"0.20.1","build":"py311_cu124","depends":["python >=3.11,<3.12.0a0","pytorch 2.5.1"]},
{"channel":"pytorch","subdir":"linux-64","name":"torchaudio","version":"2.5.1","build":"py311_cu124","depends":["python >=3.11,<3.12.0a0","pytorch 2.5.1"]},
{"channel":"pytorch","subdir":"noarch","name":"pytorch-cuda","version":"12.4","build":"hc786d27_7","noarch":"generic","depends":["cuda-cudart >=12.4,<12.5"]},
{"channel":"pytorch","subdir":"noarch","name":"tqdm","version":"4.65.0","build":"py_0","noarch":"python","depends":["python >=3.7"]},
{"channel":"nvidia","subdir":"linux-64","name":"cuda-cudart","version":"12.4.127","build":"0","depends":["__glibc >=2.17"]},
{"channel":"nvidia","subdir":"linux-64","name":"cuda-cudart","version":"12.6.77","build":"0","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-64","name":"python","version":"3.11.9","build":"h0_0_cpython","depends":["__glibc >=2.17","libzlib >=1.3"]},
{"channel":"conda-forge","subdir":"linux-64","name":"python","version":"3.11.10","build":"h1_0_cpython","depends":["__glibc >=2.34","libzlib >=1.3"]},
{"channel":"conda-forge","subdir":"linux-64","name":"libzlib","version":"1.3.1","build":"h0_2","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-64","name":"mkl","version":"2024.0.0","build":"ha957f24_49657","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-64","name":"mkl","version":"2024.2.0","build":"ha957f24_665","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-64","name":"numpy","version":"1.26.4","build":"py311h64a7726_0","depends":["python >=3.11,<3.12.0a0","libzlib"]},
{"channel":"conda-forge","subdir":"linux-64","name":"numpy","version":"2.1.0","build":"py311h71ddf71_0","depends":["python >=3.11,<3.12.0a0"]},
{"channel":"conda-forge","subdir":"noarch","name":"tqdm","version":"4.67.1","build":"pyhd8ed1ab_0","noarch":"python","depends":["python >=3.7"]}
]"#;

/// A pytorch-channel spec (torch 2.5.1, pytorch-cuda 12.4) for glibc `glibc`, with `conda`
/// extras and an optional `[target]` driver line.
pub(crate) fn spec(glibc: &str, conda: &str, driver: &str) -> String {
    format!(
        "name = \"cc\"\npython = \"3.11\"\npytorch = \"2.5.1\"\npytorch-cuda = \"12.4\"\n\
         channels = [\"pytorch\", \"nvidia\", \"conda-forge\"]\nconda = [{conda}]\n\n\
         [target]\n{driver}\nglibc = \"{glibc}\"\n\n[lock]\nclosure = true\nbase-digest = false\n"
    )
}

pub(crate) fn lock_with(dir: &Path, alias: &str, args: &[&str]) -> std::process::Output {
    envbuild()
        .current_dir(dir)
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", alias)
        .env("ENVBUILD_CACHE_DIR", dir.join(".cache"))
        .arg("lock")
        .arg("envbuild.toml")
        .args(args)
        .output()
        .unwrap()
}

fn read_lock(dir: &Path) -> Lock {
    Lock::from_toml(&fs::read_to_string(dir.join("envbuild.lock")).unwrap()).unwrap()
}

/// (name, version, build) of every conda entry.
fn conda_of(dir: &Path) -> Vec<(String, String, String)> {
    read_lock(dir)
        .closure
        .iter()
        .filter(|p| p.kind == "conda")
        .map(|p| {
            (
                p.name.clone(),
                p.version.clone(),
                p.build.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn entry<'a>(c: &'a [(String, String, String)], name: &str) -> (&'a str, &'a str) {
    let e = c
        .iter()
        .find(|e| e.0 == name)
        .unwrap_or_else(|| panic!("{name} not in {c:?}"));
    (e.1.as_str(), e.2.as_str())
}

pub(crate) const DRIVER: &str = "driver = \"550.54.15\"\ngpus = [\"A100\"]";

/// The common start: the test channel served on 127.0.0.1, a work folder with the spec of
/// `extras` (glibc 2.28, the test driver), locked once; the lock must pass.
fn locked_once(extras: &str) -> (tempfile::TempDir, Server, tempfile::TempDir) {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let server = Server::start(ch.path());
    let work = tempdir();
    write(work.path(), "envbuild.toml", &spec("2.28", extras, DRIVER));
    let out = lock_with(work.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    (ch, server, work)
}

#[test]
fn the_conda_closure_is_solved_for_the_target_with_real_hashes() {
    let (ch, server, work) = locked_once("\"numpy=1.26.4\", \"tqdm>=4\"");
    let c = conda_of(work.path());
    let names: Vec<&str> = c.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "cuda-cudart",
            "libzlib",
            "mkl",
            "numpy",
            "python",
            "pytorch",
            "pytorch-cuda",
            "torchaudio",
            "torchvision",
            "tqdm"
        ]
    );
    // The driver offers __cuda 12.4: the CUDA build, and the cudart its pytorch-cuda allows.
    assert_eq!(
        entry(&c, "pytorch"),
        ("2.5.1", "py3.11_cuda12.4_cudnn9.1.0_0")
    );
    assert_eq!(entry(&c, "cuda-cudart").0, "12.4.127");
    // glibc 2.28: python 3.11.10 (needs 2.34) is not for this target.
    assert_eq!(entry(&c, "python").0, "3.11.9");
    // The table's pins hold though newer releases exist: mkl 2024.0.0, numpy 1.26.4.
    assert_eq!(entry(&c, "mkl").0, "2024.0.0");
    assert_eq!(entry(&c, "numpy").0, "1.26.4");
    // Strict channel priority: tqdm comes from pytorch (first channel), not conda-forge's newer.
    assert_eq!(entry(&c, "tqdm").0, "4.65.0");
    let lock = read_lock(work.path());
    assert_eq!(lock.packages["tqdm"], "4.65.0", "the range is pinned");
    // Every hash is the file's own, and the URL is the file the channel serves.
    for p in &lock.closure {
        let subdir = p.subdir.as_deref().unwrap();
        let channel = p.index.rsplit('/').next().unwrap();
        let file = p.url.rsplit('/').next().unwrap();
        let path = ch.path().join(channel).join(subdir).join(file);
        assert_eq!(p.url, format!("{}/{channel}/{subdir}/{file}", server.url));
        assert_eq!(p.sha256, sha256_file(&path), "{}", p.name);
        assert_eq!(
            p.md5.as_deref(),
            Some(md5_file(&path).as_str()),
            "{}",
            p.name
        );
    }
    assert_eq!(entry(&c, "pytorch-cuda"), ("12.4", "hc786d27_7"));
    assert!(lock
        .closure
        .iter()
        .any(|p| p.name == "pytorch-cuda" && p.subdir.as_deref() == Some("noarch")));

    // The solved closure renders to an explicit file holding every conda entry by URL and md5,
    // and no pip requirements (this closure has no pip part).
    let out = envbuild()
        .current_dir(work.path())
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &server.url)
        .args(["render", "envbuild.toml", "--out", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let explicit = fs::read_to_string(work.path().join("r/conda-linux-64.txt")).unwrap();
    let mut lines: Vec<&str> = explicit
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('@') && !l.is_empty())
        .collect();
    lines.sort_unstable();
    let mut want: Vec<String> = lock
        .closure
        .iter()
        .map(|p| format!("{}#{}", p.url, p.md5.as_deref().unwrap()))
        .collect();
    want.sort_unstable();
    assert_eq!(lines, want, "{explicit}");
    assert!(explicit.contains("@EXPLICIT"), "{explicit}");
    assert!(!work.path().join("r/requirements.txt").exists());

    // A glibc 2.36 target takes the newer Python.
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.36", "\"numpy=1.26.4\", \"tqdm>=4\"", DRIVER),
    );
    let out = lock_with(work.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(entry(&conda_of(work.path()), "python").0, "3.11.10");
}

#[test]
fn an_unchanged_conda_closure_is_reused_without_a_request_and_upgrades_re_solve() {
    let (ch, server, work) = locked_once("\"tqdm>=4\"");
    // 3 channels x (linux-64, noarch), each repodata.json once (beside the gateway's probes
    // for sharded, zstd and bz2 repodata, which this channel does not serve).
    let fetched = |s: &Server| {
        s.paths()
            .iter()
            .filter(|p| p.ends_with("/repodata.json"))
            .count()
    };
    assert_eq!(fetched(&server), 6, "{:?}", server.paths());
    let asked = server.requests();
    let first = fs::read(work.path().join("envbuild.lock")).unwrap();

    // Newer releases appear: tqdm in the pytorch channel, libzlib on conda-forge.
    add_packages(
        ch.path(),
        r#"[{"channel":"pytorch","subdir":"noarch","name":"tqdm","version":"4.66.5","build":"py_0","noarch":"python","depends":["python >=3.7"]},
            {"channel":"conda-forge","subdir":"linux-64","name":"libzlib","version":"1.3.2","build":"h0_0","depends":["__glibc >=2.17"]}]"#,
    );
    // Unchanged inputs: reused, no request, same bytes; --offline and --locked too.
    for args in [&[][..], &["--offline"], &["--locked"]] {
        let out = lock_with(work.path(), &server.url, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        assert_eq!(server.requests(), asked, "{args:?} asked the channel");
        assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), first);
    }

    // --upgrade-package tqdm moves tqdm only: libzlib stays at its locked version and build.
    let out = lock_with(work.path(), &server.url, &["--upgrade-package", "tqdm"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let c = conda_of(work.path());
    assert_eq!(entry(&c, "tqdm").0, "4.66.5");
    assert_eq!(entry(&c, "libzlib"), ("1.3.1", "h0_2"));
    assert_eq!(read_lock(work.path()).packages["tqdm"], "4.66.5");

    // --upgrade takes every newer release.
    let out = lock_with(work.path(), &server.url, &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(entry(&conda_of(work.path()), "libzlib").0, "1.3.2");
    let upgraded = fs::read(work.path().join("envbuild.lock")).unwrap();
    let out = lock_with(work.path(), &server.url, &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read(work.path().join("envbuild.lock")).unwrap(),
        upgraded,
        "the same solve gives the same bytes"
    );

    // A package not in the closure is a usage error.
    let out = lock_with(work.path(), &server.url, &["--upgrade-package", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));

    // Changed inputs (another extra): --locked refuses without a request.
    let before = server.requests();
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"tqdm>=4\", \"numpy=2.1.0\"", DRIVER),
    );
    let out = lock_with(work.path(), &server.url, &["--locked"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("CLOSURE_NEEDS_RESOLUTION"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(server.requests(), before);
}

/// The repodata files the gateway's cache (under `dir`'s `.cache`) holds for `path` (e.g.
/// `conda-forge/linux-64`): each cached repodata.json beside its `.info.json`, which names the
/// URL it came from.
fn cached_repodata(dir: &Path, path: &str) -> Vec<PathBuf> {
    let cache = dir.join(".cache/conda-repodata");
    let mut out = Vec::new();
    for e in fs::read_dir(&cache).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".info.json") {
            if fs::read_to_string(&p)
                .unwrap()
                .contains(&format!("/{path}/"))
            {
                out.push(cache.join(format!("{stem}.json")));
                out.push(p);
            }
        }
    }
    out
}

/// `lock --offline` with inputs the lock on disk was not resolved from: a conda closure with
/// no pip part is solved from the repodata cache a lock filled, with no request (counted, then
/// with the channel server stopped), to the same closure an online solve gives; a cache that
/// lacks a subdir the solve needs is refused with CLOSURE_NEEDS_RESOLUTION naming it.
#[test]
fn offline_solves_a_conda_closure_from_the_repodata_cache_without_a_request() {
    let (_ch, server, work) = locked_once("");
    let asked = server.requests();

    // Another extra: the closure's inputs changed, and --offline solves from the cache.
    let numpy = spec("2.28", "\"numpy=1.26.4\"", DRIVER);
    write(work.path(), "envbuild.toml", &numpy);
    let out = lock_with(work.path(), &server.url, &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(server.requests(), asked, "--offline asked the channel");
    assert_eq!(
        entry(&conda_of(work.path()), "numpy"),
        ("1.26.4", "py311h64a7726_0")
    );
    // The same closure as an online solve of the same spec, byte for byte.
    let online = tempdir();
    write(online.path(), "envbuild.toml", &numpy);
    let out = lock_with(online.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read_to_string(work.path().join("envbuild.lock")).unwrap(),
        fs::read_to_string(online.path().join("envbuild.lock")).unwrap()
    );

    // With the channel server gone, another change still solves offline.
    let url = server.url.clone();
    drop(server);
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"tqdm>=4\"", DRIVER),
    );
    let out = lock_with(work.path(), &url, &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        entry(&conda_of(work.path()), "tqdm").0,
        "4.65.0",
        "strict priority: pytorch's"
    );
    // Without the server, the same change online fails: the solve above read no channel.
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"tqdm>=4.6\"", DRIVER),
    );
    let out = lock_with(work.path(), &url, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("CLOSURE_RESOLVE_FAILED"),
        "{}",
        stderr_of(&out)
    );

    // A cache without conda-forge's linux-64: refused, naming the channel and the subdir.
    let gone = cached_repodata(work.path(), "conda-forge/linux-64");
    assert_eq!(gone.len(), 2, "one cached repodata.json and its info");
    for f in &gone {
        fs::remove_file(f).unwrap();
    }
    let before = fs::read(work.path().join("envbuild.lock")).unwrap();
    let out = lock_with(work.path(), &url, &["--offline"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("CLOSURE_NEEDS_RESOLUTION"), "{err}");
    assert!(
        err.contains(&format!("linux-64 repodata of channel {url}/conda-forge")),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), before);
}

/// A warm relock (`--upgrade`, the gateway's cache under envbuild's cache dir) revalidates each
/// repodata.json by its ETag: the unchanged ones answer 304 and only the changed one is
/// downloaded again; the new release in it is taken.
#[test]
fn a_warm_relock_downloads_only_the_repodata_that_changed() {
    let (ch, server, work) = locked_once("");
    let cold = server.log();
    let downloads = |log: &[String]| -> Vec<String> {
        let mut d: Vec<String> = log
            .iter()
            .filter(|l| l.ends_with(" 200") || l.ends_with(" 200 conditional"))
            .cloned()
            .collect();
        d.sort();
        d
    };
    assert_eq!(downloads(&cold).len(), 6, "{cold:?}");
    assert!(
        work.path().join(".cache/conda-repodata").is_dir(),
        "the gateway's cache is under ENVBUILD_CACHE_DIR"
    );
    add_packages(
        ch.path(),
        r#"[{"channel":"conda-forge","subdir":"linux-64","name":"libzlib","version":"1.3.2","build":"h0_0","depends":["__glibc >=2.17"]}]"#,
    );
    let out = lock_with(work.path(), &server.url, &["--upgrade"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let warm = server.log()[cold.len()..].to_vec();
    // Every repodata.json is asked again, conditionally; only conda-forge's linux-64 changed.
    let asked: Vec<&String> = warm
        .iter()
        .filter(|l| l.contains("/repodata.json "))
        .collect();
    assert_eq!(asked.len(), 6, "{warm:?}");
    assert!(
        asked.iter().all(|l| l.ends_with(" conditional")),
        "{warm:?}"
    );
    assert_eq!(
        downloads(&warm),
        ["GET /conda-forge/linux-64/repodata.json 200 conditional"],
        "{warm:?}"
    );
    assert_eq!(
        warm.iter().filter(|l| l.contains(" 304 ")).count(),
        5,
        "{warm:?}"
    );
    assert_eq!(entry(&conda_of(work.path()), "libzlib").0, "1.3.2");
}

#[test]
fn the_channel_alias_is_an_input_of_the_closure_and_gzip_answers_are_read() {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let a = Server::start(ch.path());
    let b = Server::start_gzip(ch.path());
    let work = tempdir();
    write(work.path(), "envbuild.toml", &spec("2.28", "", DRIVER));
    let out = lock_with(work.path(), &a.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let via_a = read_lock(work.path());
    // Another mirror: the closure's URLs would change, so it is not reused offline...
    let out = lock_with(work.path(), &b.url, &["--offline"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    // ...and a fresh solve records the new URLs.
    let out = lock_with(work.path(), &b.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let via_b = read_lock(work.path());
    assert!(via_b.closure.iter().all(|p| p.url.starts_with(&b.url)));
    // b's answers were gzip-encoded: the same packages, hashes and builds.
    assert_eq!(b.gzipped(), 6);
    let key = |l: &Lock| -> Vec<(String, String, Option<String>)> {
        l.closure
            .iter()
            .map(|p| (p.name.clone(), p.sha256.clone(), p.build.clone()))
            .collect()
    };
    assert_eq!(key(&via_b), key(&via_a));

    // An alias with credentials (they would be written into the lock) or of another scheme is
    // a usage error, and the credentials are not echoed.
    for bad in [
        "https://me:s3cret@mirror.example/conda",
        "ftp://mirror.example/conda",
    ] {
        let out = lock_with(work.path(), bad, &["--upgrade"]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("ENVBUILD_CONDA_CHANNEL_ALIAS"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}

#[test]
fn an_unsatisfiable_solve_or_an_unreachable_channel_is_closure_resolve_failed() {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    add_packages(
        ch.path(),
        r#"[{"channel":"conda-forge","subdir":"linux-64","name":"new-glibc-only","version":"1.0","build":"h0_0","depends":["__glibc >=2.34"]}]"#,
    );
    let server = Server::start(ch.path());
    let work = tempdir();
    // glibc 2.28: the only build of the extra needs 2.34.
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"new-glibc-only=1.0\"", DRIVER),
    );
    let out = lock_with(work.path(), &server.url, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CLOSURE_RESOLVE_FAILED"), "{err}");
    assert!(err.contains("__glibc"), "the solver's explanation: {err}");
    assert!(err.contains("hint:"), "{err}");
    assert!(!work.path().join("envbuild.lock").exists());

    // A channel that does not answer is named, with the URL the first failed request asked.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    write(work.path(), "envbuild.toml", &spec("2.28", "", DRIVER));
    let out = lock_with(work.path(), &format!("http://127.0.0.1:{port}"), &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CLOSURE_RESOLVE_FAILED"), "{err}");
    assert!(
        err.contains(&format!("cannot reach http://127.0.0.1:{port}/pytorch"))
            && err.contains(&format!("url (http://127.0.0.1:{port}/")),
        "{err}"
    );
}

#[test]
fn a_conda_package_without_an_md5_is_refused_by_name() {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    add_packages(
        ch.path(),
        r#"[{"channel":"conda-forge","subdir":"linux-64","name":"libzlib","version":"1.3.1","build":"h0_2","depends":["__glibc >=2.17"],"no_md5":true}]"#,
    );
    let server = Server::start(ch.path());
    let work = tempdir();
    write(work.path(), "envbuild.toml", &spec("2.28", "", DRIVER));
    let out = lock_with(work.path(), &server.url, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CLOSURE_RESOLVE_FAILED"), "{err}");
    assert!(err.contains("`libzlib` 1.3.1"), "{err}");
}

/// conda-forge's own channel with `faiss-like` in a CUDA build (needs `__cuda`) and a CPU
/// build, and `numpy-like` 1.0.5 (a Python package pip's torch also needs, in a release the
/// index does not have); the PyPI side is the made-up wheel index of the pip closure tests, plus
/// PyPI's own `faiss-like`, whose metadata needs a wheel conda's build does not.
const FORGE_EXTRAS: &str = r#"[
{"channel":"conda-forge","subdir":"linux-64","name":"faiss-like","version":"1.9.0","build":"cuda_h0_0","build_number":1,"depends":["__cuda >=12","python >=3.11,<3.14"]},
{"channel":"conda-forge","subdir":"linux-64","name":"faiss-like","version":"1.9.0","build":"cpu_h0_0","depends":["python >=3.11,<3.14"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"faiss-like","version":"1.9.0","build":"cpu_h0_0","depends":["python >=3.11,<3.14"]},
{"channel":"conda-forge","subdir":"linux-64","name":"python","version":"3.13.1","build":"h0_0_cp313","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"python","version":"3.13.1","build":"h0_0_cp313","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"noarch","name":"numpy-like","version":"1.0.5","build":"pyh0_0","noarch":"python","depends":["python"]},
{"channel":"conda-forge","subdir":"noarch","name":"pip","version":"24.2","build":"pyh0_0","noarch":"python","depends":["python >=3.8"]}
]"#;

/// A PyPI-torch spec with conda extras (a conda environment whose pip part holds torch).
pub(crate) fn pip_in_conda_spec(index: &Path, platform: &str, target: &str) -> String {
    format!(
        "name = \"pc\"\npython = \"3.13\"\npytorch = \"2.14.1\"\ntorchvision = false\n\
         torchaudio = false\nchannels = [\"conda-forge\"]\n\
         conda = [\"faiss-like>=1\", \"numpy-like>=1\"]\n\
         pip = [\"einops-like>=0.8\", \"uses-faiss==1.0\"]\n\n\
         [target]\nplatform = \"{platform}\"\n{target}\nglibc = \"2.28\"\n\n\
         [lock]\nclosure = true\nindex-url = \"file://{}/simple\"\nbase-digest = false\n",
        index.display()
    )
}

/// The channel (served) and the wheel index of [`pip_in_conda_spec`]: conda-forge's extras, and
/// wheels of which faiss-like is also conda's.
pub(crate) fn pip_in_conda_sources() -> (tempfile::TempDir, Server, tempfile::TempDir) {
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
    (ch, server, idx)
}

#[test]
fn pip_extras_in_a_conda_env_take_condas_packages_as_installed() {
    let (_ch, server, idx) = pip_in_conda_sources();
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &pip_in_conda_spec(
            idx.path(),
            "linux-64",
            "driver = \"580.95.05\"\ngpus = [\"H200\"]",
        ),
    );
    let out = lock_with(work.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock = read_lock(work.path());
    let got: Vec<(&str, &str)> = lock
        .closure
        .iter()
        .map(|p| (p.kind.as_str(), p.name.as_str()))
        .collect();
    // numpy-like and faiss-like are conda's: pip takes them as installed (torch's numpy-like
    // at conda's 1.0.5, which the index does not even have, not PyPI's 1.2), installs neither
    // again, and does not pull libfaiss-wheel, which only PyPI's faiss-like needs.
    assert_eq!(
        got,
        [
            ("conda", "faiss-like"),
            ("conda", "numpy-like"),
            ("conda", "pip"),
            ("conda", "python"),
            ("pip", "einops-like"),
            ("pip", "nvidia-x"),
            ("pip", "torch"),
            ("pip", "uses-faiss"),
        ]
    );
    assert_eq!(entry(&conda_of(work.path()), "numpy-like").0, "1.0.5");
    let c = conda_of(work.path());
    assert_eq!(entry(&c, "faiss-like").1, "cuda_h0_0", "a CUDA target");
    assert_eq!(lock.packages["einops-like"], "0.9.0");
    assert_eq!(lock.packages["faiss-like"], "1.9.0");
    let nvidia = lock.closure.iter().find(|p| p.name == "nvidia-x").unwrap();
    assert_eq!(
        nvidia.version, "1.0",
        "glibc 2.28 holds for the pip part too"
    );

    // A pip part keeps --offline's meaning (uv never runs): changed inputs are refused, though
    // the conda repodata is cached.
    let text = fs::read_to_string(work.path().join("envbuild.toml")).unwrap();
    write(
        work.path(),
        "envbuild.toml",
        &text.replace("einops-like>=0.8", "einops-like>=0.9"),
    );
    let asked = server.requests();
    let out = lock_with(work.path(), &server.url, &["--offline"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("CLOSURE_NEEDS_RESOLUTION"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(server.requests(), asked);
}

/// The solver itself: the same specs and channels with and without `__cuda` (a CPU target has
/// none): the CUDA build only when the target offers CUDA, though it is preferred otherwise.
#[test]
fn the_cuda_build_needs_cuda_in_the_targets_virtual_packages() {
    use envbuild::core::closure::conda::{virtual_packages, CondaInputs};
    use envbuild::core::spec::Platform;
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let server = Server::start(ch.path());
    let glibc = envbuild::core::version::Version::parse("2.28").unwrap();
    let inputs = |cuda: Option<&str>| CondaInputs {
        specs: ["python=3.11", "pytorch::pytorch==2.5.1", "mkl==2024.0.0"]
            .map(String::from)
            .to_vec(),
        channels: ["pytorch", "nvidia", "conda-forge"]
            .map(|c| format!("{}/{c}", server.url))
            .to_vec(),
        subdirs: vec!["linux-64".into(), "noarch".into()],
        virtual_packages: virtual_packages(Platform::Linux64, &glibc, cuda),
    };
    let build = |cuda: Option<&str>| {
        let solved =
            envbuild::infra::conda_solve::resolve(&inputs(cuda), &server.url, &[], false).unwrap();
        let torch = solved.iter().find(|s| s.name == "pytorch").unwrap();
        (
            torch.build.clone(),
            solved.iter().any(|s| s.name == "cuda-cudart"),
        )
    };
    assert_eq!(
        build(Some("12.4")),
        ("py3.11_cuda12.4_cudnn9.1.0_0".to_string(), true)
    );
    assert_eq!(build(None), ("py3.11_cpu_0".to_string(), false));
}

/// A linux-aarch64 target solves against the channels' linux-aarch64 and noarch subdirs only,
/// with its own virtual packages: `__archspec` aarch64 (an x86_64-only build is not taken),
/// `__glibc` and, with a driver, `__cuda` (the CUDA build; none without).
#[test]
fn a_linux_aarch64_target_solves_its_own_subdir_with_its_virtual_packages() {
    use envbuild::core::closure::conda::{virtual_packages, CondaInputs};
    use envbuild::core::spec::Platform;
    let ch = tempdir();
    add_packages(
        ch.path(),
        r#"[
{"channel":"conda-forge","subdir":"linux-aarch64","name":"python","version":"3.12.8","build":"h0_0_cpython","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"faiss-like","version":"1.9.0","build":"cuda_h0_0","build_number":1,"depends":["__cuda >=12","__glibc >=2.28","python >=3.12,<3.13.0a0"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"faiss-like","version":"1.9.0","build":"cpu_h0_0","depends":["python >=3.12,<3.13.0a0"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"simd-like","version":"2.0","build":"x86_h0_0","build_number":1,"depends":["__archspec 1 x86_64"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"simd-like","version":"2.0","build":"arm_h0_0","depends":["__archspec 1 aarch64"]},
{"channel":"conda-forge","subdir":"linux-64","name":"python","version":"3.12.9","build":"h0_0_cpython","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"noarch","name":"tqdm","version":"4.67.1","build":"pyhd8ed1ab_0","noarch":"python","depends":["python >=3.7"]}
]"#,
    );
    let server = Server::start(ch.path());
    let glibc = envbuild::core::version::Version::parse("2.34").unwrap();
    let inputs = |cuda: Option<&str>| CondaInputs {
        specs: ["python=3.12", "faiss-like>=1", "simd-like", "tqdm"]
            .map(String::from)
            .to_vec(),
        channels: vec![format!("{}/conda-forge", server.url)],
        subdirs: vec!["linux-aarch64".into(), "noarch".into()],
        virtual_packages: virtual_packages(Platform::LinuxAarch64, &glibc, cuda),
    };
    let solve = |cuda: Option<&str>| {
        let solved =
            envbuild::infra::conda_solve::resolve(&inputs(cuda), &server.url, &[], false).unwrap();
        solved
            .into_iter()
            .map(|s| (s.name, s.version, s.build, s.subdir))
            .collect::<Vec<_>>()
    };
    let gpu = solve(Some("12.8"));
    let find = |all: &[(String, String, String, String)], name: &str| {
        all.iter()
            .find(|s| s.0 == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {all:?}"))
    };
    assert_eq!(
        find(&gpu, "python").1,
        "3.12.8",
        "linux-64's 3.12.9 is not seen"
    );
    assert_eq!(find(&gpu, "python").3, "linux-aarch64");
    assert_eq!(find(&gpu, "faiss-like").2, "cuda_h0_0");
    assert_eq!(find(&gpu, "simd-like").2, "arm_h0_0", "__archspec aarch64");
    assert_eq!(find(&gpu, "tqdm").3, "noarch");
    let cpu = solve(None);
    assert_eq!(find(&cpu, "faiss-like").2, "cpu_h0_0");
    // Only the target's subdir and noarch were read.
    let asked: Vec<String> = server
        .paths()
        .into_iter()
        .filter(|p| p.ends_with("/repodata.json"))
        .collect();
    assert!(!asked.is_empty());
    assert!(
        asked
            .iter()
            .all(|p| p.contains("/linux-aarch64/") || p.contains("/noarch/")),
        "{asked:?}"
    );
}

/// A conda-forge-like channel for a Grace machine: linux-aarch64 CUDA and CPU builds of
/// pytorch 2.7.1 (the CUDA one through libtorch and cudart, conda-forge's split), Python,
/// noarch `cuda-version` and tqdm; and a linux-64 subdir with its own pytorch, Python and `mkl`,
/// which conda-forge builds for x86_64 only.
const FORGE_AARCH64: &str = r#"[
{"channel":"conda-forge","subdir":"linux-aarch64","name":"python","version":"3.12.8","build":"h0_0_cpython","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"pytorch","version":"2.7.1","build":"cuda126_generic_py312_h0_200","build_number":200,"depends":["python >=3.12,<3.13.0a0","libtorch 2.7.1 cuda126_generic_h0_200","cuda-version >=12.6,<13","__cuda"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"pytorch","version":"2.7.1","build":"cpu_generic_py312_h0_0","depends":["python >=3.12,<3.13.0a0"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"libtorch","version":"2.7.1","build":"cuda126_generic_h0_200","build_number":200,"depends":["cuda-cudart >=12.6,<13.0a0","__glibc >=2.28","__cuda"]},
{"channel":"conda-forge","subdir":"linux-aarch64","name":"cuda-cudart","version":"12.6.77","build":"h0_0","depends":["cuda-version >=12.6,<12.7.0a0","__glibc >=2.28"]},
{"channel":"conda-forge","subdir":"noarch","name":"cuda-version","version":"12.6","build":"h0_3","noarch":"generic","constrains":["__cuda >=12"]},
{"channel":"conda-forge","subdir":"noarch","name":"tqdm","version":"4.67.1","build":"pyhd8ed1ab_0","noarch":"python","depends":["python >=3.7"]},
{"channel":"conda-forge","subdir":"linux-64","name":"python","version":"3.12.9","build":"h0_0_cpython","depends":["__glibc >=2.17"]},
{"channel":"conda-forge","subdir":"linux-64","name":"pytorch","version":"2.7.1","build":"cuda126_generic_py312_h0_200","build_number":200,"depends":["python >=3.12,<3.13.0a0","cuda-version >=12.6,<13","__cuda"]},
{"channel":"conda-forge","subdir":"linux-64","name":"mkl","version":"2024.2.0","build":"ha957f24_665","depends":["__glibc >=2.17"]}
]"#;

/// A GH200 spec on conda-forge (its platform inferred from the GPU: Grace is aarch64 only)
/// with `conda` extras, locked with the closure.
fn gh200_forge_spec(conda: &str) -> String {
    format!(
        "name = \"grace\"\npython = \"3.12\"\npytorch = \"2.7.1\"\nsource = \"conda-forge\"\n\
         cuda-version = \"12.6\"\ntorchvision = false\ntorchaudio = false\nconda = [{conda}]\n\n\
         [target]\ndriver = \"580.95.05\"\ngpus = [\"GH200\"]\n\n\
         [lock]\nclosure = true\nbase-digest = false\n"
    )
}

/// End to end: `envbuild lock` of a GH200 conda-forge spec against the channel above locks for
/// `linux-aarch64`: every entry from the linux-aarch64 or noarch subdir (URL, sha256 and md5 the
/// served file's own), the CUDA build with its aarch64 libtorch and cudart, none of linux-64's
/// records; `--locked` holds it, and render writes the aarch64 explicit file. An extra that the
/// channel has for linux-64 only (`mkl`) is `CLOSURE_RESOLVE_FAILED`, naming it and the target,
/// and the lock on disk is left as it was.
#[test]
fn a_gh200_conda_forge_spec_locks_its_linux_aarch64_closure_by_hash() {
    let ch = tempdir();
    add_packages(ch.path(), FORGE_AARCH64);
    let server = Server::start(ch.path());
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &gh200_forge_spec("\"tqdm>=4\""),
    );
    let out = lock_with(work.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock = read_lock(work.path());
    assert_eq!(lock.platform.as_str(), "linux-aarch64");
    assert_eq!(lock.source.as_str(), "conda-forge");
    let c = conda_of(work.path());
    let names: Vec<&str> = c.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "cuda-cudart",
            "cuda-version",
            "libtorch",
            "python",
            "pytorch",
            "tqdm"
        ]
    );
    // `__cuda` 12.6 (the lock's override) takes the CUDA build over the CPU one.
    assert_eq!(
        entry(&c, "pytorch"),
        ("2.7.1", "cuda126_generic_py312_h0_200")
    );
    assert_eq!(entry(&c, "libtorch"), ("2.7.1", "cuda126_generic_h0_200"));
    // linux-64's newer Python is not the target's.
    assert_eq!(entry(&c, "python").0, "3.12.8");
    for p in &lock.closure {
        let subdir = p.subdir.as_deref().unwrap();
        let file = p.url.rsplit('/').next().unwrap();
        let want_subdir = if p.name == "cuda-version" || p.name == "tqdm" {
            "noarch"
        } else {
            "linux-aarch64"
        };
        assert_eq!(subdir, want_subdir, "{}", p.name);
        assert_eq!(
            p.url,
            format!("{}/conda-forge/{subdir}/{file}", server.url),
            "{}",
            p.name
        );
        let path = ch.path().join("conda-forge").join(subdir).join(file);
        assert_eq!(p.sha256, sha256_file(&path), "{}", p.name);
        assert_eq!(
            p.md5.as_deref(),
            Some(md5_file(&path).as_str()),
            "{}",
            p.name
        );
    }
    // The channel was read for the target's subdir and noarch only.
    let asked: Vec<String> = server
        .paths()
        .into_iter()
        .filter(|p| p.ends_with("/repodata.json"))
        .collect();
    assert!(
        asked
            .iter()
            .all(|p| p.contains("/linux-aarch64/") || p.contains("/noarch/")),
        "{asked:?}"
    );
    let first = fs::read(work.path().join("envbuild.lock")).unwrap();
    let out = lock_with(work.path(), &server.url, &["--locked"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));

    let out = envbuild()
        .current_dir(work.path())
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &server.url)
        .args(["render", "envbuild.toml", "--out", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let explicit = fs::read_to_string(work.path().join("r/conda-linux-aarch64.txt")).unwrap();
    let urls: Vec<&str> = explicit.lines().filter(|l| l.starts_with("http")).collect();
    assert_eq!(urls.len(), lock.closure.len(), "{explicit}");
    assert!(
        urls.iter()
            .all(|u| u.contains("/linux-aarch64/") || u.contains("/noarch/")),
        "{explicit}"
    );

    // mkl is x86_64 only: the aarch64 solve has no candidate for it.
    write(
        work.path(),
        "envbuild.toml",
        &gh200_forge_spec("\"tqdm>=4\", \"mkl\""),
    );
    let out = lock_with(work.path(), &server.url, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error[CLOSURE_RESOLVE_FAILED]"), "{err}");
    assert!(err.contains("mkl"), "{err}");
    assert!(err.contains("linux-aarch64 + noarch"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(
        fs::read(work.path().join("envbuild.lock")).unwrap(),
        first,
        "the lock on disk is untouched"
    );
}

/// A stand-in HTTPS proxy on 127.0.0.1: records each request head it receives (the CONNECT line
/// and its headers) and refuses the tunnel with 403, so the test needs no TLS server.
fn refusing_proxy() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            log.lock().unwrap().push(head);
            let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
        }
    });
    (url, seen)
}

/// An https channel is reached through `HTTPS_PROXY` (a CONNECT to the channel's host, with the
/// proxy's credentials as Proxy-Authorization, which no message shows); `NO_PROXY` exempts a
/// host; the failure names the proxy.
#[test]
fn https_channels_go_through_the_proxy_the_environment_names() {
    let (proxy, seen) = refusing_proxy();
    let work = tempdir();
    write(work.path(), "envbuild.toml", &spec("2.28", "", DRIVER));
    let with_proxy = |no_proxy: &str| {
        let authed = proxy.replace("http://", "http://team:s3cret@");
        envbuild()
            .current_dir(work.path())
            .env(
                "ENVBUILD_CONDA_CHANNEL_ALIAS",
                "https://conda.mirror.invalid",
            )
            .env("HTTPS_PROXY", &authed)
            .env("NO_PROXY", no_proxy)
            .env_remove("https_proxy")
            .env_remove("no_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .args(["lock", "envbuild.toml"])
            .output()
            .unwrap()
    };
    let out = with_proxy("");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    let addr = proxy.trim_start_matches("http://");
    assert!(err.contains("CLOSURE_RESOLVE_FAILED"), "{err}");
    assert!(err.contains(&format!("through the proxy {addr}")), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    {
        let heads = seen.lock().unwrap();
        let first = heads.first().expect("the proxy was asked");
        assert!(
            first.starts_with("CONNECT conda.mirror.invalid:443 HTTP/1.1"),
            "{first}"
        );
        // team:s3cret in base64.
        assert!(
            first
                .to_ascii_lowercase()
                .contains("proxy-authorization: basic dgvhbtpzm2nyzxq="),
            "{first}"
        );
    }
    // NO_PROXY exempts the host: a direct attempt (the .invalid name does not resolve), and
    // the proxy is not asked again.
    let before = seen.lock().unwrap().len();
    let out = with_proxy("conda.mirror.invalid");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("cannot reach https://conda.mirror.invalid/") && !err.contains("proxy"),
        "{err}"
    );
    assert_eq!(seen.lock().unwrap().len(), before);
}

/// A CA and a server certificate for `host`, made with the openssl CLI in `dir`: (CA bundle,
/// server certificate, server key).
pub(crate) fn tls_files(dir: &Path, host: &str) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("the openssl command (Debian: openssl, which ca-certificates needs)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=envbuild test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        &format!("/CN={host}"),
    ]);
    fs::write(
        dir.join("ext"),
        format!(
            "subjectAltName=DNS:{host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    (dir.join("ca.pem"), dir.join("srv.pem"), dir.join("srv.key"))
}

/// Python's HTTPS server for the files under `root` on 127.0.0.1; killed when dropped.
pub(crate) struct TlsServer {
    child: std::process::Child,
    pub(crate) port: u16,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn tls_server(root: &Path, cert: &Path, key: &Path, port_file: &Path) -> TlsServer {
    const SERVE: &str = "import functools, http.server, ssl, sys\n\
        root, port_file, cert, key = sys.argv[1:5]\n\
        h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        c.load_cert_chain(cert, key)\n\
        s.socket = c.wrap_socket(s.socket, server_side=True)\n\
        open(port_file, 'w').write(str(s.server_address[1]))\n\
        s.serve_forever()\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", SERVE])
        .args([root, port_file, cert, key])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    for _ in 0..100 {
        if let Some(port) = fs::read_to_string(port_file)
            .ok()
            .and_then(|p| p.parse().ok())
        {
            return TlsServer { child, port };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the TLS server did not start");
}

/// A tunnelling proxy on 127.0.0.1: answers every CONNECT with 200 and pipes the connection to
/// 127.0.0.1:`to` (standing in for the name the client asked for); records the CONNECT lines.
fn tunnelling_proxy(to: u16) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let mut reader = BufReader::new(client.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            // A connection closed before its first line (a client dropping a spare or raced
            // connection) asked nothing of the proxy: only requests are logged.
            if first.trim_end().is_empty() {
                continue;
            }
            log.lock().unwrap().push(first.trim_end().to_string());
            let Ok(upstream) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            let (mut c1, mut u1) = (client, upstream);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut u2);
                let _ = u2.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut u1, &mut c1);
                let _ = c1.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (url, seen)
}

/// The whole https path behind a TLS-inspecting proxy: an https channel (its certificate from a
/// CA only `SSL_CERT_FILE` names, as on such a network) reached through `HTTPS_PROXY`'s tunnel
/// solves, and the lock's URLs are the channel's; without the CA the certificate is refused.
#[test]
fn an_https_channel_behind_a_proxy_solves_with_the_networks_ca() {
    let host = "conda.mirror.test";
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let certs = tempdir();
    let (ca, cert, key) = tls_files(certs.path(), host);
    let server = tls_server(ch.path(), &cert, &key, &certs.path().join("port"));
    let (proxy, seen) = tunnelling_proxy(server.port);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"numpy=1.26.4\"", DRIVER),
    );
    let lock = |ca: Option<&Path>| {
        let mut cmd = envbuild();
        cmd.current_dir(work.path())
            .env("ENVBUILD_CONDA_CHANNEL_ALIAS", format!("https://{host}"))
            .env("HTTPS_PROXY", &proxy)
            .env_remove("https_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env_remove("SSL_CERT_DIR")
            .args(["lock", "envbuild.toml"]);
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        cmd.output().unwrap()
    };
    let out = lock(None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("CLOSURE_RESOLVE_FAILED") && err.to_ascii_lowercase().contains("certificate"),
        "{err}"
    );
    let out = lock(Some(&ca));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock = read_lock(work.path());
    assert!(!lock.closure.is_empty());
    for p in &lock.closure {
        assert!(p.url.starts_with(&format!("https://{host}/")), "{}", p.url);
    }
    let heads = seen.lock().unwrap();
    assert!(
        heads
            .iter()
            .all(|h| h == &format!("CONNECT {host}:443 HTTP/1.1"))
            && heads.len() >= 2,
        "{heads:?}"
    );
}

/// A plain HTTP/1.0 GET of `url` (`http://127.0.0.1:PORT/PATH`): the body of a 200, else
/// `None`.
fn http_get(url: &str) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut c = std::net::TcpStream::connect(host).ok()?;
    write!(c, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).ok()?;
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&answer[..at]).to_string();
    (head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"))
        .then(|| answer[at + 4..].to_vec())
}

/// `render --conda-mirror URL` of a conda closure locked from one server: every explicit line
/// names the mirror (`URL/CHANNEL/SUBDIR/FILE`, the channel alias's layout) with the lock's
/// md5, and the mirror, another server on a copy of the channels, serves each of those files
/// with that md5; the lock and environment.yml are the same as without the mirror. A mirror
/// URL with credentials is a usage error that does not echo them. A lock without a closure
/// solves at build time with conda's channel alias set to the mirror for that step only.
#[test]
fn a_conda_closure_renders_through_a_mirror_that_serves_the_locked_bytes() {
    let (ch, server, work) = locked_once("\"tqdm>=4\"");
    let lock_bytes = fs::read(work.path().join("envbuild.lock")).unwrap();
    // The mirror: the same files on another server (the locked one then goes away).
    let mirror_dir = tempdir();
    fs::create_dir(mirror_dir.path().join("conda")).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", ch.path().display()))
        .arg(mirror_dir.path().join("conda"))
        .status()
        .unwrap();
    assert!(copied.success());
    let mirror = Server::start(mirror_dir.path());
    let alias = server.url.clone();
    drop(server);
    let render = |dir: &str, extra: &[&str]| {
        envbuild()
            .current_dir(work.path())
            .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &alias)
            .env("ENVBUILD_CACHE_DIR", work.path().join(".cache"))
            .args(["render", "envbuild.toml", "--out", dir])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = render("plain", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let mirror_url = format!("{}/conda/", mirror.url);
    let out = render("mirrored", &["--conda-mirror", &mirror_url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = fs::read_to_string(work.path().join("mirrored/conda-linux-64.txt")).unwrap();
    let plain = fs::read_to_string(work.path().join("plain/conda-linux-64.txt")).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("://")).collect();
    assert_eq!(lines.len(), conda_of(work.path()).len(), "{text}");
    for line in &lines {
        let (url, md5) = line.split_once('#').unwrap();
        let rest = url
            .strip_prefix(&format!("{}/conda/", mirror.url))
            .unwrap_or_else(|| panic!("{line} is not on the mirror"));
        let channel = rest.split('/').next().unwrap();
        assert!(
            plain.contains(&format!("{alias}/{rest}#{md5}")),
            "{line}: the locked line is {alias}/{rest}#{md5} ({channel})"
        );
        let body = http_get(url).unwrap_or_else(|| panic!("the mirror does not serve {url}"));
        let got = {
            let f = work.path().join("served");
            fs::write(&f, &body).unwrap();
            md5_file(&f)
        };
        assert_eq!(got, md5, "{url}: the mirror's bytes are the locked ones");
    }
    for same in ["environment.yml", "requirements.txt"] {
        let a = fs::read(work.path().join("plain").join(same)).ok();
        assert_eq!(
            a,
            fs::read(work.path().join("mirrored").join(same)).ok(),
            "{same}"
        );
    }
    assert_eq!(
        fs::read(work.path().join("envbuild.lock")).unwrap(),
        lock_bytes
    );

    // A mirror URL with credentials, or not a URL: usage errors, nothing written.
    for bad in [
        "https://user:s3cret@mirror.example/conda",
        "mirror.example/conda",
    ] {
        let out = render("bad", &["--conda-mirror", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr_of(&out));
        assert!(!stderr_of(&out).contains("s3cret"), "{}", stderr_of(&out));
        assert!(!work.path().join("bad").exists());
    }
    // The environment variable is the same setting.
    let out = envbuild()
        .current_dir(work.path())
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &alias)
        .env("ENVBUILD_CACHE_DIR", work.path().join(".cache"))
        .env("ENVBUILD_CONDA_MIRROR", &mirror_url)
        .args(["render", "envbuild.toml", "--out", "env"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        fs::read_to_string(work.path().join("env/conda-linux-64.txt")).unwrap(),
        text
    );

    // Without a closure: the build's solve takes the mirror as conda's channel alias.
    let example = root().join("specs/conda-forge-torch210/envbuild.toml");
    let out_dir = work.path().join("noclosure");
    let out = envbuild()
        .arg("render")
        .arg(&example)
        .arg("--out")
        .arg(&out_dir)
        .args(["--conda-mirror", "https://mirror.example/conda"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for f in ["Dockerfile", "Dockerfile.buildkit"] {
        let d = fs::read_to_string(out_dir.join(f)).unwrap();
        let solve: Vec<&str> = d
            .lines()
            .filter(|l| l.contains("conda-env.sh solve"))
            .collect();
        assert_eq!(solve.len(), 1, "{f}: {d}");
        assert!(
            solve[0].contains("CONDA_CHANNEL_ALIAS='https://mirror.example/conda' "),
            "{f}: {}",
            solve[0]
        );
        assert_eq!(
            d.matches("CONDA_CHANNEL_ALIAS=").count(),
            1,
            "{f}: this step only"
        );
    }
}
