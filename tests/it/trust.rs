//! What other machines act on without looking again, attacked as a hostile user would: locks
//! edited by hand or served by a hostile index or channel, secrets planted in a spec, templates
//! that never end, reports with garbage in them, arguments the parser refuses under `--json`,
//! symlinks planted in render's output folder, a spec read through `/dev/stdin`, and the JUnit
//! file against the real Jenkins xunit schema (issue 20).

use crate::conda_closure::{lock_with as conda_lock_with, spec as conda_spec, CHANNELS, DRIVER};
use crate::support::closure::*;
use crate::support::conda_channel::{add_packages, Server};
use crate::support::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A pip closure lock from the made-up wheel index, in a folder of its own.
pub(crate) fn pip_closure_lock(name: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let idx = tempdir();
    add_wheels(idx.path(), WHEELS);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &closure_spec(name, "3.13", "2.28", idx.path(), ""),
    );
    let out = lock_in(work.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    (idx, work)
}

/// `render ARGS --out DIR` in `dir`.
pub(crate) fn render_in(dir: &Path, input: &str, out: &str) -> std::process::Output {
    envbuild()
        .current_dir(dir)
        .args(["render", input, "--out", out])
        .output()
        .unwrap()
}

/// The `[[closure]]` entry `name`'s `key` in the lock text, replaced by `value`.
pub(crate) fn edit_entry(text: &str, name: &str, key: &str, value: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("name = ") {
            inside = line == format!("name = \"{name}\"");
        }
        if inside && line.starts_with(&format!("{key} = ")) {
            out.push(format!("{key} = \"{value}\""));
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n") + "\n"
}

/// A closure entry pointed at another host, or given another (well-formed) sha256, passes
/// neither `--locked` nor `--offline` nor `render` (of the lock or of the spec): the lock
/// verifies itself, naming the entry, and nothing is written.
#[test]
fn a_hand_edited_closure_entry_is_refused_by_locked_offline_and_render() {
    let (_idx, work) = pip_closure_lock("tamper");
    let lock = work.path().join("envbuild.lock");
    let good = fs::read_to_string(&lock).unwrap();
    let url = good
        .lines()
        .find(|l| l.starts_with("url = ") && l.contains("/torch-2.14.1"))
        .expect("torch's url")
        .to_string();
    let elsewhere = edit_entry(
        &good,
        "torch",
        "url",
        "https://evil.example/files/torch-2.14.1-py3-none-any.whl",
    );
    let other_file = edit_entry(
        &good,
        "torch",
        "url",
        &url[7..url.len() - 1].replace("torch-2.14.1-", "torch-2.14.2-"),
    );
    let sha = good
        .lines()
        .skip_while(|l| *l != "name = \"torch\"")
        .find(|l| l.starts_with("sha256 = "))
        .unwrap()
        .to_string();
    let flipped = if sha.contains("\"0") { "1" } else { "0" };
    let resealed = good.replace(&sha, &format!("sha256 = \"{flipped}{}", &sha[11..]));
    let cases = [
        ("url on another host", elsewhere, "CLOSURE_ENTRY_INVALID"),
        (
            "file of another version",
            other_file,
            "CLOSURE_ENTRY_INVALID",
        ),
        ("another sha256", resealed, "LOCK_TAMPERED"),
    ];
    for (what, text, code) in cases {
        assert_ne!(text, good, "{what}: the edit took");
        fs::write(&lock, &text).unwrap();
        for args in [&["--locked"][..], &["--offline"]] {
            let out = lock_in(work.path(), args);
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{what} {args:?}: {err}");
            assert!(err.contains(code), "{what}: {err}");
            assert!(
                code == "LOCK_TAMPERED" || err.contains("`torch`"),
                "{what}: {err}"
            );
            assert_eq!(
                fs::read_to_string(&lock).unwrap(),
                text,
                "{what}: rewritten"
            );
        }
        for input in ["envbuild.lock", "envbuild.toml"] {
            let out = render_in(work.path(), input, "r");
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{what} render {input}: {err}");
            assert!(err.contains(code), "{what} render {input}: {err}");
            assert!(!work.path().join("r").exists(), "{what}: render wrote");
        }
    }
    // The lock as written verifies and renders.
    fs::write(&lock, &good).unwrap();
    assert_eq!(lock_in(work.path(), &["--locked"]).status.code(), Some(0));
    let out = render_in(work.path(), "envbuild.lock", "r");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A conda entry whose URL leaves its channel (another host, `file://`, `../`) is refused by
/// render, naming the entry.
#[test]
fn a_conda_entry_outside_its_channel_is_refused_by_render() {
    let good = fs::read_to_string(fixture("conda-closure/envbuild.lock")).unwrap();
    let url = good
        .lines()
        .skip_while(|l| *l != "name = \"cuda-version\"")
        .find(|l| l.starts_with("url = "))
        .unwrap()
        .to_string();
    let file = url.rsplit('/').next().unwrap().trim_end_matches('"');
    let tmp = tempdir();
    for bad in [
        format!("https://evil.example/conda-forge/noarch/{file}"),
        format!("file:///tmp/{file}"),
        format!("https://conda.anaconda.org/conda-forge/noarch/../../evil/noarch/{file}"),
    ] {
        let text = edit_entry(&good, "cuda-version", "url", &bad);
        write(tmp.path(), "envbuild.lock", &text);
        let out = render_in(tmp.path(), "envbuild.lock", "r");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains("CLOSURE_ENTRY_INVALID") && err.contains("`cuda-version`"),
            "{bad}: {err}"
        );
        assert!(!tmp.path().join("r").exists());
    }
    write(tmp.path(), "envbuild.lock", &good);
    let out = render_in(tmp.path(), "envbuild.lock", "r");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A channel whose repodata.json points its packages elsewhere (CEP 15's `base_url`) is refused
/// at lock time, naming the record; nothing is written.
#[test]
fn a_channel_serving_records_outside_itself_is_refused_at_lock() {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    let repodata = ch.path().join("conda-forge/linux-64/repodata.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&repodata).unwrap()).unwrap();
    doc["info"]["base_url"] = "https://evil.example/pkgs/".into();
    doc["repodata_version"] = 2.into();
    fs::write(&repodata, doc.to_string()).unwrap();
    let server = Server::start(ch.path());
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &conda_spec("2.28", "", DRIVER),
    );
    let out = conda_lock_with(work.path(), &server.url, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CLOSURE_ENTRY_INVALID"), "{err}");
    assert!(err.contains("evil.example"), "{err}");
    assert!(!work.path().join("envbuild.lock").exists());
}

/// A channel that serves a build string with shell characters: refused where the record enters
/// (the lock is never written), by the rule render applies.
#[test]
fn a_channel_serving_a_hostile_build_string_is_refused_at_lock() {
    let ch = tempdir();
    add_packages(ch.path(), CHANNELS);
    add_packages(
        ch.path(),
        r#"[{"channel":"conda-forge","subdir":"linux-64","name":"libzlib","version":"1.3.9","build":"h0;touch${IFS}x","depends":["__glibc >=2.17"]}]"#,
    );
    let server = Server::start(ch.path());
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &conda_spec("2.28", "", DRIVER),
    );
    let out = conda_lock_with(work.path(), &server.url, &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`libzlib`") && err.contains("build"), "{err}");
    assert!(!work.path().join("envbuild.lock").exists());
}

/// Every output of a run, concatenated: stdout, stderr and the files under `dirs` (but the
/// inputs that hold the planted secret: `envbuild.toml`, `environment.yml`).
fn everything(out: &std::process::Output, dirs: &[PathBuf]) -> String {
    let mut all = format!("{}{}", stdout_of(out), stderr_of(out));
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    while let Some(p) = todo.pop() {
        // The inputs, and the repodata cache the conda tests keep in the work dir (it stands for
        // the user's own ~/.cache, where the gateway keeps a token channel's URLs to revalidate
        // them, as conda and pixi do): not outputs.
        let input = p
            .file_name()
            .is_some_and(|n| n == "envbuild.toml" || n == "environment.yml" || n == ".cache");
        if input {
            continue;
        }
        if p.is_dir() {
            todo.extend(fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if let Ok(bytes) = fs::read(&p) {
            all.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    all
}

const SECRET: &str = "s3cr3tPW9";

/// A secret planted in every URL a spec can name (a direct reference's userinfo, a git token,
/// `[lock] index-url`, pip's indexes and find-links, a conda channel in conda's `/t/TOKEN/`
/// form) and in an environment file `import` reads: each is refused where it enters, and no
/// output (stdout, stderr, `--json`, JUnit, the lock, rendered files, the imported spec) holds it.
#[test]
fn a_planted_secret_reaches_no_output() {
    let base = fs::read_to_string(root().join("specs/torch29-cu128/envbuild.toml")).unwrap();
    let hash = "a".repeat(64);
    let top = |line: &str| format!("{line}\n{base}");
    let pip = |line: String| {
        base.replace(
            "pip = [\"numpy==2.3.4\",",
            &format!("pip = [\"{line}\", \"numpy==2.3.4\","),
        )
    };
    let specs = [
        pip(format!(
            "einops @ https://user:{SECRET}@files.example/einops-0.8.1-py3-none-any.whl#sha256={hash}"
        )),
        pip(format!(
            "einops @ git+https://{SECRET}@github.com/arogozhnikov/einops@{}",
            "b".repeat(40)
        )),
        top(&format!("pip-index-url = \"https://user:{SECRET}@pypi.example/simple\"")),
        top(&format!(
            "pip-extra-index-urls = [\"https://{SECRET}:x-oauth@pypi.example/simple\"]"
        )),
        top(&format!("pip-find-links = [\"https://u:{SECRET}@wheels.example/\"]")),
        base.replace(
            "[lock]\n",
            &format!("[lock]\nindex-url = \"https://u:{SECRET}@pypi.example/simple\"\n"),
        ),
        fs::read_to_string(root().join("specs/conda-forge-torch210/envbuild.toml"))
            .unwrap()
            .replace(
                "channels = [\"conda-forge\"]",
                &format!("channels = [\"https://conda.example/t/{SECRET}/conda-forge\"]"),
            ),
    ];
    for (i, spec) in specs.iter().enumerate() {
        assert!(spec.contains(SECRET), "case {i}: the secret was planted");
        let dir = tempdir();
        write(dir.path(), "envbuild.toml", spec);
        let lock = envbuild()
            .current_dir(dir.path())
            .args(["lock", "envbuild.toml", "--json"])
            .output()
            .unwrap();
        assert_eq!(
            lock.status.code(),
            Some(1),
            "case {i}: {}",
            stderr_of(&lock)
        );
        let doc: serde_json::Value = serde_json::from_slice(&lock.stdout).expect("--json");
        assert_eq!(doc["status"], "error", "case {i}: {doc}");
        let render = render_in(dir.path(), "envbuild.toml", "r");
        assert_eq!(render.status.code(), Some(1), "case {i}");
        let junit = dir.path().join("junit.xml");
        let image = envbuild()
            .current_dir(dir.path())
            .args(["image", "envbuild.toml", "--json", "--junit"])
            .arg(&junit)
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .output()
            .unwrap();
        assert_ne!(image.status.code(), Some(0), "case {i}");
        assert!(junit.exists(), "case {i}: no JUnit file");
        let dirs = [dir.path().to_path_buf()];
        for (what, out) in [("lock", &lock), ("render", &render), ("image", &image)] {
            let all = everything(out, &dirs);
            assert!(!all.contains(SECRET), "case {i} {what} leaked it:\n{all}");
            let said = everything(out, &[]);
            assert!(
                said.contains("***"),
                "case {i} {what} does not show where the secret was:\n{said}"
            );
        }
    }
    // An environment file with a secret in a pip line: import neither echoes nor writes it.
    let dir = tempdir();
    write(
        dir.path(),
        "environment.yml",
        &format!(
            "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip:\n    - \
             torch==2.5.1\n    - --extra-index-url https://u:{SECRET}@pypi.example/simple\n    - \
             einops @ https://u:{SECRET}@files.example/einops-0.8.1-py3-none-any.whl\n"
        ),
    );
    let out = envbuild()
        .current_dir(dir.path())
        .args(["import", "environment.yml", "--out", "spec.toml"])
        .output()
        .unwrap();
    let all = everything(&out, &[dir.path().join("spec.toml")]);
    assert!(!all.contains(SECRET), "import leaked it:\n{all}");
}

/// A token channel alias (`https://HOST/t/TOKEN`, conda's own form) solves, channel-qualified
/// specs included, and the token stays out of the lock and the rendered files.
#[test]
fn a_token_alias_solves_and_stays_out_of_the_lock_and_rendered_files() {
    let ch = tempdir();
    let under = ch.path().join(format!("t/{SECRET}"));
    fs::create_dir_all(&under).unwrap();
    add_packages(&under, CHANNELS);
    let server = Server::start(ch.path());
    let alias = format!("{}/t/{SECRET}", server.url);
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &conda_spec("2.28", "\"conda-forge::numpy=1.26.4\"", DRIVER),
    );
    let out = conda_lock_with(work.path(), &alias, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = fs::read_to_string(work.path().join("envbuild.lock")).unwrap();
    assert!(text.contains("numpy"), "{text}");
    let render = envbuild()
        .current_dir(work.path())
        .env("ENVBUILD_CONDA_CHANNEL_ALIAS", &alias)
        .args(["render", "envbuild.toml", "--out", "r"])
        .output()
        .unwrap();
    assert_eq!(render.status.code(), Some(0), "{}", stderr_of(&render));
    let all = everything(&out, &[work.path().to_path_buf()]) + &everything(&render, &[]);
    assert!(!all.contains(SECRET), "the token leaked:\n{all}");
    // Unchanged inputs reuse the closure without asking the channel again.
    let asked = server.requests();
    let again = conda_lock_with(work.path(), &alias, &["--locked"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert_eq!(server.requests(), asked);
}

/// A template that loops without end, recurses without end or writes without end is stopped
/// by its budget with a code and a hint, in bounded time.
#[test]
fn a_template_that_never_ends_runs_out_of_its_budget() {
    let lock = root().join("specs/torch-gpu-env/envbuild.lock");
    let bodies = [
        "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}x{% endfor %}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    ];
    for body in bodies {
        let tmp = tempdir();
        let templates = tmp.path().join("t");
        fs::create_dir(&templates).unwrap();
        write(&templates, "Dockerfile.j2", body);
        let out = envbuild()
            .arg("render")
            .arg(&lock)
            .arg("--templates")
            .arg(&templates)
            .arg("--out")
            .arg(tmp.path().join("r"))
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{body}: {err}");
        assert!(err.contains("TEMPLATE_BUDGET"), "{body}: {err}");
        assert!(err.contains("hint:"), "{body}: {err}");
    }
}

/// A report whose arch list holds a malformed entry teaches nothing: `table learn` refuses it
/// whole, naming the entry, and prints no table.
#[test]
fn a_report_with_a_malformed_arch_entry_is_refused_whole() {
    let tmp = tempdir();
    let text = fs::read_to_string(crate::support::learn::real_report()).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let arch = doc["smoke"][0]["report"]["environment"]["arch_list"]
        .as_array_mut()
        .expect("the real report has an arch list");
    arch.push("sm_8x".into());
    let bad = write(tmp.path(), "bad.json", &doc.to_string());
    let out = crate::support::learn::learn(
        None,
        &[
            bad.as_os_str(),
            "--image".as_ref(),
            "img:1".as_ref(),
            "--date".as_ref(),
            "2026-12-01".as_ref(),
        ],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("LEARN_INPUT_INVALID") && err.contains("sm_8x"),
        "{err}"
    );
    assert!(stdout_of(&out).is_empty(), "a table was printed");
}

/// `--json` prints one JSON error document even when the argument parser refuses a value or
/// an argument (exit 2), in the command's document shape.
#[test]
fn json_runs_print_one_document_when_the_argument_parser_refuses() {
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let spec = spec.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["image", spec, "--json", "--shm-size", "12q"], "verdict"),
        (
            &["image", spec, "--push", "Not A Repo", "--json"],
            "verdict",
        ),
        (&["test", "img:1", "--json", "--gpus", "some"], "verdict"),
        (&["lock", spec, "--json", "--no-such-flag"], "status"),
        (
            &["--table", "t.toml", "doctor", "--json", "--no-such-flag"],
            "verdict",
        ),
    ];
    for (args, key) in cases {
        let out = envbuild().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON document ({e})"));
        assert_eq!(doc[key], "error", "{args:?}: {doc}");
        let diags = if key == "status" {
            &doc["diagnostics"]
        } else {
            &doc["error"]
        };
        assert_eq!(diags[0]["code"], "USAGE", "{args:?}: {doc}");
    }
}

/// `--upgrade-package NAME` on a spec without a closure, or naming a package the closure does
/// not hold, is a usage error with a hint; nothing is written.
#[test]
fn upgrade_package_needs_a_closure_that_holds_the_name() {
    let dir = tempdir();
    fs::copy(
        root().join("specs/torch29-cu128/envbuild.toml"),
        dir.path().join("envbuild.toml"),
    )
    .unwrap();
    let out = lock_in(dir.path(), &["--upgrade-package", "torch"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("USAGE") && err.contains("hint:"), "{err}");
    assert!(!dir.path().join("envbuild.lock").exists());
    let (_idx, work) = pip_closure_lock("upg");
    let before = fs::read(work.path().join("envbuild.lock")).unwrap();
    let out = lock_in(work.path(), &["--upgrade-package", "not-in-it"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("hint:"));
    assert_eq!(fs::read(work.path().join("envbuild.lock")).unwrap(), before);
}

/// Symlinks planted inside render's output folder (a file, a sub-folder) are not written
/// through: the render is refused and the files they point at stay as they were. A symlinked
/// output folder itself is refused too, with the real folder to pass instead.
#[test]
fn render_refuses_symlinks_planted_in_its_output_folder() {
    let lock = root().join("specs/torch-gpu-env/envbuild.lock");
    let tmp = tempdir();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let victim = write(&outside, "victim.txt", "untouched\n");
    let render = |out: &Path| {
        envbuild()
            .arg("render")
            .arg(&lock)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    // A planted file link.
    let out = tmp.path().join("r1");
    fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("Dockerfile")).unwrap();
    let o = render(&out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("OUTPUT_SYMLINK"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched\n");
    // A planted folder link.
    let out = tmp.path().join("r2");
    fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("envbuild")).unwrap();
    let o = render(&out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert_eq!(files_in(&outside), ["victim.txt"]);
    // The output folder itself a link.
    let link = tmp.path().join("r3");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let o = render(&link);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("--out"), "{}", stderr_of(&o));
    assert_eq!(files_in(&outside), ["victim.txt"]);
    // A plain folder renders.
    let o = render(&tmp.path().join("r4"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
}

/// A spec read through `/dev/stdin` writes no lock into `/dev` (nor a render folder there):
/// refused with a hint to pass `--out`, which then works.
#[test]
fn a_spec_read_through_dev_stdin_writes_no_lock_into_dev() {
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let planted = Path::new("/dev/envbuild.lock");
    let existed = planted.exists();
    // stdin redirected from the spec file: `/dev/stdin` then names a regular file.
    let from_file = |args: &[&str], out: Option<&Path>| {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"));
        cmd.args(args).stdin(fs::File::open(&spec).unwrap());
        if let Some(o) = out {
            cmd.arg("--out").arg(o);
        }
        cmd.output().unwrap()
    };
    let out = from_file(&["lock", "/dev/stdin"], None);
    if !existed && planted.exists() {
        let _ = fs::remove_file(planted);
        panic!("the lock was written into /dev");
    }
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--out"), "{err}");
    let r = from_file(&["render", "/dev/stdin"], None);
    assert!(!Path::new("/dev/render").exists(), "render wrote into /dev");
    assert_eq!(r.status.code(), Some(2), "{}", stderr_of(&r));
    let dir = tempdir();
    let ok = from_file(&["lock", "/dev/stdin"], Some(dir.path()));
    assert_eq!(ok.status.code(), Some(0), "{}", stderr_of(&ok));
    assert!(dir.path().join("envbuild.lock").is_file());
}

/// `xmllint --schema` of `file` against the Jenkins xunit plugin's junit-10.xsd.
fn xunit_valid(file: &Path) -> Result<(), String> {
    let out = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(fixture("xunit/junit-10.xsd"))
        .arg(file)
        .output()
        .map_err(|e| format!("xmllint: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr_of(&out))
    }
}

/// The JUnit files envbuild writes (a smoke report with every status, a run that ended in a
/// multi-line error) pass the Jenkins xunit plugin's junit-10.xsd, and a message's line breaks
/// are written as `&#10;`. Needs `xmllint` (Debian's libxml2-utils); CI installs it.
#[test]
fn junit_files_pass_the_jenkins_xunit_schema() {
    if std::process::Command::new("xmllint")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").is_err(),
            "xmllint (libxml2-utils) is missing in CI"
        );
        eprintln!("skipped: xmllint not installed (apt-get install libxml2-utils)");
        return;
    }
    let tmp = tempdir();
    // A smoke run against the CPU stand-in in gpu mode: passes, fails and skips.
    let torch = fake_torch("cpu");
    let smoke_xml = tmp.path().join("smoke.xml");
    let out = envbuild()
        .args(["smoke", "--junit"])
        .arg(&smoke_xml)
        .env("PYTHONPATH", torch.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    xunit_valid(&smoke_xml).unwrap_or_else(|e| panic!("smoke: {e}"));
    // An image run that ends before a verdict, with a multi-line message (a stale lock).
    let dir = tempdir();
    fs::copy(
        root().join("specs/torch29-cu128/envbuild.toml"),
        dir.path().join("envbuild.toml"),
    )
    .unwrap();
    write(dir.path(), "envbuild.lock", "version = 1\nname = \"old\"\n");
    let image_xml = tmp.path().join("image.xml");
    let out = envbuild()
        .current_dir(dir.path())
        .args(["image", "envbuild.toml", "--junit"])
        .arg(&image_xml)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    xunit_valid(&image_xml).unwrap_or_else(|e| panic!("image: {e}"));
    let xml = fs::read_to_string(&image_xml).unwrap();
    assert!(xml.contains("&#10;"), "{xml}");
    for value in xml.split("message=\"").skip(1) {
        let value = value.split('"').next().unwrap();
        assert!(
            !value.contains('\n'),
            "a raw line break in an attribute: {value}"
        );
    }
}
