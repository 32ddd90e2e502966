//! Issue 38's source and fact classes, attacked as a hostile checkout or index would: package
//! names that are not PEP 508 names (in the spec, an imported file and a lock), `--table` files
//! that state one fact twice or an impossible date, a conda channel alias with path tricks, a
//! yanked release, and extra indexes that serve their files outside their `/simple` path
//! (GitLab, devpi).

use crate::support::*;
use std::fs;
use std::path::Path;

/// A table-level spec (no closure) whose `pip` list holds `entry`.
fn spec_with_pip(entry: &str) -> String {
    format!(
        "name = \"names\"\npython = \"3.12\"\npytorch = \"2.9.1\"\ncuda = \"12.8\"\n\
         pip = [\"{entry}\"]\n\n[target]\ndriver = \"570.133.20\"\ngpus = [\"H100\"]\n\n\
         [lock]\nclosure = false\n"
    )
}

fn lock_file(dir: &Path, args: &[&str]) -> std::process::Output {
    envbuild()
        .current_dir(dir)
        .arg("lock")
        .arg("envbuild.toml")
        .args(args)
        .output()
        .unwrap()
}

/// Names that break PEP 508 at an edge (`foo_`, `foo.`, `-foo`) are refused by the spec, by
/// `import` and, in a lock edited to carry one, by `render`; a valid name still locks.
#[test]
fn names_that_are_not_pep_508_names_are_refused_where_they_enter() {
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &spec_with_pip("einops==0.8.1"),
    );
    let out = lock_file(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let good = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    for bad in [
        "einops_==0.8.1",
        "einops.==0.8.1",
        "einops-==0.8.1",
        "einops[extra_]==0.8.1",
    ] {
        let dir = tempdir();
        write(dir.path(), "envbuild.toml", &spec_with_pip(bad));
        let out = lock_file(dir.path(), &[]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains("INVALID_SPEC"), "{bad}: {err}");
        assert!(!dir.path().join("envbuild.lock").exists(), "{bad}");
    }
    let err = stderr_of(&lock_file_with(&spec_with_pip("einops_==0.8.1")));
    assert!(err.contains("not a valid package name (PEP 508"), "{err}");
    // import: a requirements file with such a name is refused at its line.
    let dir = tempdir();
    let req = write(dir.path(), "requirements.txt", "torch==2.9.1\nfoo_==1.0\n");
    let out = envbuild()
        .args(["import", "--python", "3.12"])
        .arg(&req)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("foo_==1.0"), "{err}");
    // The lock reader: a lock edited to carry one (a package's key, an install line) is not
    // rendered.
    for (from, to) in [
        ("einops = \"0.8.1\"", "einops_ = \"0.8.1\""),
        ("\"einops==0.8.1\"", "\"einops.==0.8.1\""),
    ] {
        let edited = good.replace(from, to);
        assert_ne!(edited, good, "{from}");
        let dir = tempdir();
        write(dir.path(), "envbuild.lock", &edited);
        let out = envbuild()
            .current_dir(dir.path())
            .args(["render", "envbuild.lock", "--out", "out"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{to}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains("einops"), "{}", stderr_of(&out));
        assert!(!dir.path().join("out").exists());
    }
}

fn lock_file_with(spec: &str) -> std::process::Output {
    let dir = tempdir();
    write(dir.path(), "envbuild.toml", spec);
    lock_file(dir.path(), &[])
}

/// A `--table` file that states one fact twice (a second `[[numpy1]]` row for a Python, a
/// second `[[conda_forge_build]]` row for a CUDA) is refused at load, naming the row kind and
/// key, where row order used to decide the answer.
#[test]
fn a_table_that_states_a_fact_twice_is_refused_at_load() {
    let dump = envbuild().args(["table", "--toml"]).output().unwrap();
    assert!(dump.status.success());
    let text = String::from_utf8(dump.stdout).unwrap();
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    for (kind, row) in [
        (
            "numpy1",
            "[[numpy1]]\npython = \"3.8\"\nversion = \"1.17.0\"\nsource = \"numpy-python\"\n",
        ),
        (
            "conda_forge_build",
            "[[conda_forge_build]]\ncuda = \"10.2\"\narch = [\"9.0\"]\nptx = []\n\
             glibc = \"2.17\"\nsource = \"cf-feedstock\"\n",
        ),
    ] {
        let tmp = tempdir();
        let table = write(tmp.path(), "table.toml", &format!("{text}\n{row}"));
        let out = envbuild()
            .arg("--table")
            .arg(&table)
            .arg("lock")
            .arg(&spec)
            .arg("--out")
            .arg(tmp.path())
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{kind}: {err}");
        assert!(err.contains("TABLE_INVALID"), "{kind}: {err}");
        assert!(
            err.contains(&format!("[[{kind}]] repeats the key")),
            "{err}"
        );
        assert!(!tmp.path().join("envbuild.lock").exists(), "{kind}");
    }
}

/// `table learn` takes only real calendar days: February 30 and April 31 are refused in
/// `--date` (a usage error) and in a report (the report is refused whole).
#[test]
fn impossible_dates_are_refused_by_table_learn() {
    use crate::support::learn::{learn, os, real_report};
    let mut doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(real_report()).unwrap()).unwrap();
    let env = doc["smoke"][0]["report"]["environment"]
        .as_object_mut()
        .unwrap();
    env.remove("date");
    let tmp = tempdir();
    let undated = write(tmp.path(), "undated.json", &doc.to_string());
    for day in ["2026-02-30", "2026-04-31", "2025-02-29"] {
        let out = learn(None, &[os(&undated), "--date".as_ref(), day.as_ref()]);
        assert_eq!(out.status.code(), Some(2), "{day}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains(day), "{}", stderr_of(&out));
    }
    let out = learn(
        None,
        &[os(&undated), "--date".as_ref(), "2024-02-29".as_ref()],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    doc["smoke"][0]["report"]["environment"]["date"] = "2026-02-30".into();
    let bad = write(tmp.path(), "bad.json", &doc.to_string());
    let out = learn(None, &[os(&bad)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("LEARN_INPUT_INVALID"),
        "{}",
        stderr_of(&out)
    );
    assert!(
        stderr_of(&out).contains("2026-02-30"),
        "{}",
        stderr_of(&out)
    );
}

/// A conda channel alias (or a `--conda-mirror`) with a path trick (`..`, `.`, `%2e%2e`, a
/// backslash, an encoded `/`) is a usage error where it enters, naming the value (its token
/// redacted) with a hint, and nothing is written: it is not accepted and then every entry
/// refused as a hand edit. The same channels through the plain alias lock.
#[test]
fn a_channel_alias_with_path_tricks_is_refused_where_it_enters() {
    use crate::conda_closure::{lock_with, spec, CHANNELS, DRIVER};
    use crate::support::conda_channel::{add_packages, Server};
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let server = Server::start(ch.path());
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &spec("2.28", "\"mkl=2024.0.0\"", DRIVER),
    );
    let token = "tk-s3cret";
    for trick in [
        format!("{}/sub/..", server.url),
        format!("{}/./", server.url),
        format!("{}/sub/%2e%2E", server.url),
        format!("{}/sub\\..", server.url),
        format!("{}/a%2f..", server.url),
        format!("{}/t/{token}/sub/..", server.url),
    ] {
        let out = lock_with(work.path(), &trick, &[]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{trick}: {err}");
        assert!(err.contains("ENVBUILD_CONDA_CHANNEL_ALIAS `"), "{err}");
        assert!(!err.contains("by hand"), "{err}");
        assert!(!err.contains(token), "{err}");
        assert!(err.contains("hint"), "{err}");
        assert!(!work.path().join("envbuild.lock").exists(), "{trick}");
    }
    let out = lock_with(work.path(), &server.url, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // `--conda-mirror` is built on the same way: the same rule.
    let out = envbuild()
        .current_dir(work.path())
        .args(["render", "envbuild.lock", "--out", "r"])
        .args(["--conda-mirror", "https://mirror.example/conda/../x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("`..` segment"),
        "{}",
        stderr_of(&out)
    );
    assert!(!work.path().join("r").exists());
}

/// Wheels served as `layout` (tests/fixtures/fake_index.py) into `dir`.
fn add_wheels_as(dir: &Path, json: &str, layout: &str) {
    let st = std::process::Command::new("python3")
        .arg(fixture("fake_index.py"))
        .arg(dir)
        .arg(json)
        .arg(layout)
        .status()
        .expect("python3");
    assert!(st.success(), "fake_index.py failed");
}

/// A closure lock whose main index is the made-up `file://` index and whose extra index, served
/// over HTTP in `layout` (`gitlab`, `devpi`), holds `lay-pkg`: the work folder, the servers and
/// the extra index's URL.
struct Layout {
    work: tempfile::TempDir,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    _server: crate::support::closure::Mirror,
    extra: String,
    port: u16,
    served: tempfile::TempDir,
}

fn layout(layout: &str, simple: &str) -> Layout {
    use crate::support::closure::{add_wheels, closure_spec, mirror_server, WHEELS};
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let served = tempdir();
    add_wheels_as(
        served.path(),
        r#"[{"name": "lay-pkg", "version": "1.0"}]"#,
        layout,
    );
    let logs = tempdir();
    let server = mirror_server(served.path(), &logs.path().join("log"));
    let extra = format!("http://127.0.0.1:{}/{simple}", server.port);
    let work = tempdir();
    let top = format!("pip = [\"lay-pkg==1.0\"]\npip-extra-index-urls = [\"{extra}\"]");
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec("lay", "3.12", "2.28", idx.path(), &top),
    );
    Layout {
        work,
        _dirs: (idx, logs),
        port: server.port,
        _server: server,
        extra,
        served,
    }
}

/// Extra indexes that serve their files outside their `/simple` path, as GitLab
/// (`/api/v4/projects/N/packages/pypi/simple`, files under `.../pypi/files/SHA/`) and devpi
/// (`/root/pypi/+simple/`, files under `/root/pypi/+f/`) do: a fresh lock records the file
/// under the index that served it, and `--locked` and `render` take it.
#[test]
fn gitlab_and_devpi_index_layouts_lock_check_and_render() {
    use crate::support::closure::lock_in;
    for (name, simple) in [
        ("gitlab", "api/v4/projects/7/packages/pypi/simple"),
        ("devpi", "root/pypi/+simple"),
    ] {
        let l = layout(name, simple);
        let out = lock_in(l.work.path(), &[]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        let text = fs::read_to_string(l.work.path().join("envbuild.lock")).unwrap();
        let lock: toml::Table = toml::from_str(&text).unwrap();
        let entry = lock["closure"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some("lay-pkg"))
            .expect("lay-pkg is locked");
        assert_eq!(entry["index"].as_str(), Some(l.extra.as_str()), "{name}");
        let url = entry["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("http://127.0.0.1:{}/", l.port)) && !url.contains("simple"),
            "{name}: {url}"
        );
        let out = lock_in(l.work.path(), &["--locked"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        let out = envbuild()
            .current_dir(l.work.path())
            .args(["render", "envbuild.lock", "--out", "r"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        let sha = entry["sha256"].as_str().unwrap();
        let rendered: String = crate::support::files_in(&l.work.path().join("r"))
            .iter()
            .map(|f| fs::read_to_string(l.work.path().join("r").join(f)).unwrap_or_default())
            .collect();
        assert!(
            rendered.contains(sha),
            "{name}: the rendered files hash lay-pkg"
        );
    }
}

/// An index whose links send a file to another host than its own is refused at lock time, in
/// words that say what the index served, not that the lock was edited by hand; nothing is
/// written.
#[test]
fn an_index_that_serves_files_from_another_host_is_named_at_lock_time() {
    use crate::support::closure::lock_in;
    let l = layout("gitlab", "api/v4/projects/7/packages/pypi/simple");
    let page = l
        .served
        .path()
        .join("api/v4/projects/7/packages/pypi/simple/lay-pkg/index.html");
    let html = fs::read_to_string(&page).unwrap();
    // `localhost` is the same server, but another origin than the index's `127.0.0.1`.
    let elsewhere = html.replace(
        "href=\"/api/",
        &format!("href=\"http://localhost:{}/api/", l.port),
    );
    assert_ne!(html, elsewhere);
    fs::write(&page, elsewhere).unwrap();
    let out = lock_in(l.work.path(), &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CLOSURE_ENTRY_INVALID"), "{err}");
    assert!(
        err.contains("lay-pkg") && err.contains("localhost"),
        "{err}"
    );
    assert!(!err.contains("by hand"), "{err}");
    assert!(!l.work.path().join("envbuild.lock").exists());
}

/// `lock --json` in `dir`: the exit code and the document.
fn lock_json(dir: &Path, args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let out = envbuild()
        .current_dir(dir)
        .args(["lock", "envbuild.toml", "--json"])
        .args(args)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.code(), doc, stderr_of(&out))
}

/// The `YANKED_RELEASE` diagnostics of a `--json` document, as (severity, message).
fn yanked_of(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["code"] == "YANKED_RELEASE")
        .map(|d| {
            (
                d["severity"].as_str().unwrap_or_default().to_string(),
                d["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A yanked release (PEP 592) is never taken silently: pinned exactly by the spec it is locked
/// with a `YANKED_RELEASE` warning that `--json` carries, its reason recorded on the entry, and
/// every later `lock` (the closure reused, `--locked`) says it again; unpinned, the resolver
/// passes it by; held only by the lock on disk (the index yanked it after it was locked), a
/// re-resolution refuses it, naming the way out, and the lock on disk stays as it was.
#[test]
fn a_yanked_release_is_locked_only_when_pinned_exactly_and_always_said() {
    use crate::support::closure::{add_wheels, closure_spec, WHEELS};
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    add_wheels(
        idx.path(),
        r#"[{"name": "yk-pkg", "version": "1.0"},
            {"name": "yk-pkg", "version": "1.1", "yanked": "broken build"}]"#,
    );
    let work = tempdir();
    let spec =
        |pip: &str| closure_spec("yk", "3.12", "2.28", idx.path(), &format!("pip = [{pip}]"));
    write(work.path(), "envbuild.toml", &spec("\"yk-pkg==1.1\""));
    let (code, doc, err) = lock_json(work.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let said = yanked_of(&doc);
    assert_eq!(said.len(), 1, "{doc}");
    assert_eq!(said[0].0, "warning");
    assert!(
        said[0].1.contains("`yk-pkg` 1.1") && said[0].1.contains("broken build"),
        "{said:?}"
    );
    let text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    assert!(text.contains("yanked = \"broken build\""), "{text}");
    for args in [&[][..], &["--locked"], &["--offline"]] {
        let (code, doc, err) = lock_json(work.path(), args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert_eq!(yanked_of(&doc).len(), 1, "{args:?}: {doc}");
    }
    // Unpinned: the resolver passes the yanked release by.
    write(work.path(), "envbuild.toml", &spec("\"yk-pkg>=1.0\""));
    let (code, doc, err) = lock_json(work.path(), &["--upgrade"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(yanked_of(&doc).is_empty(), "{doc}");
    assert!(closure_has(work.path(), "yk-pkg", "1.0"));

    // Locked before the index yanked it: a re-resolution that holds it refuses it.
    let idx2 = tempdir();
    add_wheels(idx2.path(), WHEELS);
    add_wheels(idx2.path(), r#"[{"name": "yk-pkg", "version": "2.0"}]"#);
    let work2 = tempdir();
    let spec2 = closure_spec(
        "yk2",
        "3.12",
        "2.28",
        idx2.path(),
        "pip = [\"yk-pkg>=1.0\"]",
    );
    write(work2.path(), "envbuild.toml", &spec2);
    let (code, _, err) = lock_json(work2.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(closure_has(work2.path(), "yk-pkg", "2.0"));
    let before = fs::read(work2.path().join("envbuild.lock")).unwrap();
    add_wheels(
        idx2.path(),
        r#"[{"name": "yk-pkg", "version": "2.0", "yanked": "a bad release"}]"#,
    );
    let (code, doc, err) = lock_json(work2.path(), &["--upgrade-package", "torch"]);
    assert_eq!(code, Some(1), "{err}");
    let said = yanked_of(&doc);
    assert_eq!(said.len(), 1, "{doc}");
    assert_eq!(said[0].0, "error");
    assert!(said[0].1.contains("does not pin it exactly"), "{said:?}");
    assert!(
        doc.to_string().contains("--upgrade-package yk-pkg"),
        "{doc}"
    );
    assert_eq!(
        fs::read(work2.path().join("envbuild.lock")).unwrap(),
        before
    );
}

fn closure_has(dir: &Path, name: &str, version: &str) -> bool {
    crate::support::closure::closure_of(dir)
        .iter()
        .any(|(n, v)| n == name && v == version)
}

/// The spec's own index and channel URLs take the same rule: a `.` or `..` segment is
/// refused where the spec names it, not taken and then blamed on every lock entry.
#[test]
fn spec_index_and_channel_urls_with_dot_segments_are_refused_in_the_spec() {
    let table_level = |extra: &str| {
        format!(
            "name = \"pt\"\npython = \"3.12\"\npytorch = \"2.9.1\"\ncuda = \"12.8\"\n{extra}\n\n\
             [target]\ndriver = \"570.133.20\"\ngpus = [\"H100\"]\n\n[lock]\nclosure = false\n"
        )
    };
    for (key, extra) in [
        (
            "pip-extra-index-urls",
            table_level("pip-extra-index-urls = [\"https://idx.example/a/../simple\"]"),
        ),
        (
            "pip-index-url",
            table_level("pip-index-url = \"https://idx.example/./simple\""),
        ),
        (
            "index-url",
            table_level("").replace(
                "closure = false",
                "closure = true\nindex-url = \"file:///srv/idx/../simple\"",
            ),
        ),
    ] {
        let out = lock_file_with(&extra);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{key}: {err}");
        assert!(err.contains("INVALID_SPEC"), "{key}: {err}");
        assert!(!err.contains("by hand"), "{key}: {err}");
    }
    let conda =
        "name = \"pc\"\npython = \"3.12\"\npytorch = \"2.10.0\"\nsource = \"conda-forge\"\n\
                 channels = [\"https://conda.example/x/../conda-forge\"]\n\n[target]\n\
                 driver = \"575.51.03\"\ngpus = [\"H100\"]\n\n[lock]\nclosure = false\n";
    let out = lock_file_with(conda);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("INVALID_SPEC"),
        "{}",
        stderr_of(&out)
    );
}
