//! A hostile user's findings against docs/security.md ("The checkout", "Child processes",
//! "Outputs"): each test plants what a pull request (or a hostile index) can plant and asserts
//! the promise as written. They fail on the commit they were written against (32187fa); each
//! names the finding it reproduces.

use crate::support::closure::add_wheels;
use crate::support::*;
use std::fs;
use std::path::Path;
use std::time::Duration;

/// A table-level spec (no network) in `dir`, with `extra` appended to its `[image]` section.
fn plain_spec(dir: &Path, image: &str) {
    write(
        dir,
        "envbuild.toml",
        &format!(
            "name = \"hostile\"\npython = \"3.12\"\npytorch = \"2.10.0\"\ncuda = \"12.9\"\n\
             channels = [\"conda-forge\"]\n\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H100\"]\n\n\
             [image]\n{image}\n\n[lock]\nclosure = false\n"
        ),
    );
}

fn mkfifo(p: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
}

/// Finding: a FIFO planted as `envbuild.lock` beside the spec makes `lock` block forever in
/// open(O_WRONLY) (`infra::fs::target` sends a FIFO to `Target::Through`, opened without
/// O_NONBLOCK). docs/security.md promises outputs are "never blocking on a FIFO"; a CI job
/// hangs until its own time limit.
#[test]
fn a_fifo_planted_as_the_lock_does_not_block_lock() {
    let work = tempdir();
    let state = tempdir();
    plain_spec(work.path(), "");
    mkfifo(&work.path().join("envbuild.lock"));
    let out = envbuild()
        .current_dir(work.path())
        .env("XDG_STATE_HOME", state.path())
        .args(["lock", "envbuild.toml"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    // assert_cmd kills the child at the timeout: no exit code then.
    assert!(
        out.status.code().is_some(),
        "lock blocked on the planted FIFO and was killed after 30 s"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

/// Finding: `render --out build/docker` where the checkout planted `build` as a link to a
/// folder outside writes the whole rendered tree (an executable `dev-entrypoint.sh` among it)
/// there: `write_tree` checks `out` and what lies below it, `absolute()` then canonicalises the
/// parents. The same holds for `lock --out`, `import --out`, `table learn --out`, `--junit` and
/// the lock beside a spec reached through a linked folder.
#[test]
fn render_out_below_a_planted_link_writes_nothing_outside() {
    let work = tempdir();
    let outside = tempdir();
    let state = tempdir();
    plain_spec(work.path(), "");
    std::os::unix::fs::symlink(outside.path(), work.path().join("build")).unwrap();
    let out = envbuild()
        .current_dir(work.path())
        .env("XDG_STATE_HOME", state.path())
        .args(["render", "envbuild.toml", "--out", "build/docker"])
        .output()
        .unwrap();
    assert!(
        files_in(outside.path()).is_empty(),
        "rendered through the planted link `build`: {:?} (exit {:?})",
        files_in(&outside.path().join("docker")),
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("OUTPUT_SYMLINK"),
        "{}",
        stderr_of(&out)
    );
}

/// Finding: the `/dev` exemption of OUTPUT_SYMLINK covers `/dev/shm`, a tmpfs of ordinary
/// files: a checkout's `envbuild.lock -> /dev/shm/<file>` replaces that file (another program's
/// shared memory, the user's) with the lock.
#[test]
fn a_lock_linked_into_dev_shm_is_refused() {
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let work = tempdir();
    let state = tempdir();
    plain_spec(work.path(), "");
    let victim = tempfile::Builder::new()
        .prefix("envbuild-hostile-")
        .tempfile_in("/dev/shm")
        .unwrap();
    fs::write(victim.path(), "someone's shared memory").unwrap();
    std::os::unix::fs::symlink(victim.path(), work.path().join("envbuild.lock")).unwrap();
    let out = envbuild()
        .current_dir(work.path())
        .env("XDG_STATE_HOME", state.path())
        .args(["lock", "envbuild.toml"])
        .output()
        .unwrap();
    let left = fs::read_to_string(victim.path()).unwrap_or_default();
    assert_eq!(
        left, "someone's shared memory",
        "the lock was written into /dev/shm"
    );
    assert!(
        stderr_of(&out).contains("OUTPUT_SYMLINK"),
        "{}",
        stderr_of(&out)
    );
}

/// Finding: `--junit /dev/stdout`, the exemption's own example, works only on a terminal. With
/// stdout a pipe (every CI log) the link does not canonicalise and the report is an IO_ERROR
/// "cannot access `/dev/stdout`"; with stdout a file (`> log`) it is refused as OUTPUT_SYMLINK
/// with the hint `rm /dev/stdout`.
#[test]
fn junit_to_dev_stdout_is_written_when_stdout_is_a_pipe() {
    let state = tempdir();
    let work = tempdir();
    write(work.path(), "expect.json", "{}");
    let out = envbuild()
        .current_dir(work.path())
        .env("XDG_STATE_HOME", state.path())
        .env("ENVBUILD_SMOKE_LIBCUDA", "0")
        .env("ENVBUILD_SMOKE_DEV_NODES", "0")
        .env("ENVBUILD_SMOKE_IN_CONTAINER", "0")
        .args(["smoke", "--python", "python3", "--gpus", "none"])
        .args(["--expect-file", "expect.json", "--junit", "/dev/stdout"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        !err.contains("/dev/stdout") && stdout_of(&out).contains("<testsuite"),
        "no JUnit report on the stdout pipe: {err}"
    );
}

/// Finding: `[image] ca-bundle` comes from the spec (the pull request) and may be "an absolute
/// path on the build machine", or a relative path through a planted link: `envbuild image`
/// reads any host file that holds a PEM certificate (a mitmproxy CA with its private key, a
/// client cert+key bundle) and sends it, whole, in the build context, where a checkout's
/// `--templates` Dockerfile can COPY it into the image or send it anywhere. docs/security.md:
/// a checkout must not make envbuild "read files outside the project".
#[test]
fn the_specs_ca_bundle_is_never_read_outside_the_project() {
    let outside = tempdir();
    let secret = write(
        outside.path(),
        "mitmproxy-ca.pem",
        "-----BEGIN PRIVATE KEY-----\nTOPSECRET\n-----END PRIVATE KEY-----\n\
         -----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    );
    let mut leaked = Vec::new();
    for how in ["absolute", "link"] {
        let work = tempdir();
        let state = tempdir();
        let named = if how == "absolute" {
            secret.display().to_string()
        } else {
            fs::create_dir(work.path().join("certs")).unwrap();
            std::os::unix::fs::symlink(&secret, work.path().join("certs/ca.pem")).unwrap();
            "certs/ca.pem".to_string()
        };
        plain_spec(work.path(), &format!("ca-bundle = \"{named}\""));
        let run = |args: &[&str]| {
            envbuild()
                .current_dir(work.path())
                .env("XDG_STATE_HOME", state.path())
                .env("DOCKER_HOST", "unix:///nonexistent/envbuild-hostile.sock")
                .args(args)
                .output()
                .unwrap()
        };
        let locked = run(&["lock", "envbuild.toml"]);
        if locked.status.code() != Some(0) {
            // Refused at the spec: the promise holds.
            continue;
        }
        let out = run(&["image", "envbuild.toml", "--gpus", "none"]);
        if stderr_of(&out).contains("the build trusts the CA bundle of [image] ca-bundle") {
            leaked.push(format!("{how}: {}", stderr_of(&out)));
        }
    }
    assert!(
        leaked.is_empty(),
        "a file outside the project went into the build context:\n{}",
        leaked.join("\n")
    );
}

/// Finding: `envbuild doctor` loads NVML by its bare name (`libnvidia-ml.so.1`); with an empty
/// entry on `LD_LIBRARY_PATH` (`export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64`
/// with the variable unset) the dynamic loader searches the working folder, and a library the
/// checkout planted runs inside envbuild. `find_program` skips `PATH`'s relative entries for
/// the same reason; the library search does not.
#[test]
fn a_library_planted_in_the_checkout_is_never_loaded() {
    let work = tempdir();
    let outside = tempdir();
    let marker = outside.path().join("ran");
    let src = write(
        outside.path(),
        "nvml.c",
        &format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void p(void) {{ \
             FILE *f = fopen({:?}, \"w\"); if (f) {{ fputs(\"owned\\n\", f); fclose(f); }} }}\n",
            marker.display().to_string()
        ),
    );
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(work.path().join("libnvidia-ml.so.1"))
        .arg(&src)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no C compiler");
        return;
    }
    let _ = envbuild()
        .current_dir(work.path())
        .env("LD_LIBRARY_PATH", ":/nonexistent")
        .env("ENVBUILD_NVIDIA_SMI", "none")
        .env("DOCKER_HOST", "unix:///nonexistent/envbuild-hostile.sock")
        .arg("doctor")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "the checkout's libnvidia-ml.so.1 ran inside envbuild"
    );
}

/// Finding: uv gets `HOME` (and `NETRC`) so that `~/.netrc` authenticates a private index, but
/// the index is the spec's choice: with a `default` entry in `~/.netrc`, the pull request's
/// `[lock] index-url` host answers 401 and receives the user's login and password.
#[test]
fn netrc_default_credentials_never_reach_the_specs_index() {
    let uv_found = std::env::var_os("ENVBUILD_UV").is_some()
        || std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .any(|d| d.join("uv").is_file());
    if !uv_found {
        eprintln!("skipped: no uv");
        return;
    }
    let idx = tempdir();
    add_wheels(idx.path(), r#"[{"name": "torch", "version": "2.14.1"}]"#);
    let log = idx.path().join("auth.log");
    let server = write(
        idx.path(),
        "server.py",
        r#"import http.server, os, sys
root, log = sys.argv[1], sys.argv[2]
os.chdir(root)
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization")
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.path, auth))
        if not auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="x"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        return super().do_GET()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#,
    );
    let mut child = std::process::Command::new("python3")
        .arg(&server)
        .arg(idx.path())
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let home = tempdir();
    let netrc = write(
        home.path(),
        ".netrc",
        "default login ci-bot password TOPSECRET-TOKEN\n",
    );
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&netrc, fs::Permissions::from_mode(0o600)).unwrap();
    let work = tempdir();
    write(
        work.path(),
        "envbuild.toml",
        &format!(
            "name = \"c1\"\npython = \"3.12\"\npytorch = \"2.14.1\"\ntorchvision = false\n\
             torchaudio = false\n\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H200\"]\n\
             glibc = \"2.36\"\n\n[lock]\nclosure = true\n\
             index-url = \"http://127.0.0.1:{}/simple\"\nbase-digest = false\n",
            port.trim()
        ),
    );
    let out = envbuild()
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("XDG_STATE_HOME", home.path().join("state"))
        .args(["lock", "envbuild.toml"])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let seen = fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !seen.contains("Basic "),
        "the spec's index got the user's ~/.netrc default credentials (exit {:?}):\n{seen}",
        out.status.code()
    );
}

/// Finding (low): a spec that is a planted link is read wherever it leads (`read_text` follows
/// links), so a checkout makes envbuild read a file outside the project and print its first
/// key (`unknown field \`github.com\``) from e.g. `~/.config/gh/hosts.yml`.
#[test]
fn a_spec_that_is_a_link_out_of_the_project_is_not_read() {
    let work = tempdir();
    let outside = tempdir();
    let hosts = write(
        outside.path(),
        "hosts.yml",
        "github.com:\n    user: alice\n    oauth_token: gho_SECRET\n",
    );
    std::os::unix::fs::symlink(&hosts, work.path().join("envbuild.yaml")).unwrap();
    let out = envbuild()
        .current_dir(work.path())
        .args(["lock", "--no-closure", "envbuild.yaml"])
        .output()
        .unwrap();
    assert!(
        !stderr_of(&out).contains("github.com"),
        "a file outside the project was read and its key printed: {}",
        stderr_of(&out)
    );
}

/// Finding: uv runs with no `--python` from an empty folder made in `TMPDIR`, and looks for a
/// virtual environment in that folder *and every folder above it*: a `.venv/bin/python` there
/// is executed (uv's interpreter query). With `TMPDIR` inside the checkout (`TMPDIR=$PWD/.tmp`,
/// a common CI setting) the checkout's planted `.venv` runs; with the default `/tmp`, any local
/// user of a shared runner who plants `/tmp/.venv` does.
#[test]
fn a_venv_above_the_resolutions_folder_never_runs() {
    let uv_found = std::env::var_os("ENVBUILD_UV").is_some()
        || std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .any(|d| d.join("uv").is_file());
    if !uv_found {
        eprintln!("skipped: no uv");
        return;
    }
    let idx = tempdir();
    add_wheels(idx.path(), crate::support::closure::WHEELS);
    let work = tempdir();
    let outside = tempdir();
    let marker = outside.path().join("ran");
    let bin = work.path().join(".venv/bin");
    fs::create_dir_all(&bin).unwrap();
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 on PATH");
    script(
        &bin,
        "python",
        &format!(
            "echo \"$0\" >> '{}'\nexec '{}' \"$@\"\n",
            marker.display(),
            real.display()
        ),
    );
    std::os::unix::fs::symlink("python", bin.join("python3")).unwrap();
    write(
        &work.path().join(".venv"),
        "pyvenv.cfg",
        "home = /usr/bin\ninclude-system-site-packages = false\n",
    );
    fs::create_dir(work.path().join(".tmp")).unwrap();
    write(
        work.path(),
        "envbuild.toml",
        &crate::support::closure::closure_spec("c1", "3.12", "2.36", idx.path(), ""),
    );
    let out = envbuild()
        .current_dir(work.path())
        .env("TMPDIR", work.path().join(".tmp"))
        .env("XDG_STATE_HOME", outside.path().join("state"))
        .args(["lock", "envbuild.toml"])
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "the checkout's .venv/bin/python ran (exit {:?}): {}",
        out.status.code(),
        fs::read_to_string(&marker).unwrap_or_default()
    );
}
