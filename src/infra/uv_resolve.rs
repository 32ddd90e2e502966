//! The closure resolver (pip side): `uv pip compile` for the target (its Python version and
//! `--python-platform`), wheels only, from the spec's indexes alone, in an environment scrubbed
//! of the host's pip and uv settings; uv's `pylock.toml` is read by `core::closure`. Performs
//! file, process and (through uv) network I/O.

use crate::core::closure::codes::{CLOSURE_NEEDS_WHEEL, CLOSURE_RESOLVE_FAILED, RESOLVER_MISSING};
use crate::core::closure::UV_INSTALL;
use crate::core::closure::{from_pylock, Inputs, PylockError, NEEDS_WHEEL_HINT};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::ClosurePkg;
use crate::infra::proc::{self, RunError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Writes stand-in wheels for distributions that are installed already (by conda): name and
/// version only, no dependencies (conda resolved those), tagged with the target's most
/// preferred tag and a build tag, so that uv, held to exactly that version, takes them for the
/// installed distribution. argv: the folder, the tag, a JSON list of [name, version].
const STUBS: &str = r#"import json, os, sys, zipfile
out, tag, stubs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for name, version in stubs:
    dist = name.replace("-", "_")
    info = "%s-%s.dist-info" % (dist, version)
    files = [
        (info + "/METADATA", "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: installed by conda (an envbuild stand-in)\n" % (name, version)),
        (info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: envbuild\nRoot-Is-Purelib: false\nTag: %s\n" % tag),
    ]
    files.append((info + "/RECORD", "".join("%s,,\n" % n for n, _ in files) + info + "/RECORD,,\n"))
    with zipfile.ZipFile(os.path.join(out, "%s-%s-0envbuild-%s.whl" % (dist, version, tag)), "w") as z:
        for n, text in files:
            z.writestr(zipfile.ZipInfo(n, (1980, 1, 1, 0, 0, 0)), text)
"#;

/// How long a resolution may take (a cold PyPI torch resolution takes a few seconds).
pub const TIMEOUT: Duration = Duration::from_secs(900);

/// The variables uv sees: the search path, the home folder, the temporary folder, the locale,
/// the network's proxies and CA bundle, and `NETRC` naming a copy of the user's netrc with
/// named hosts only ([`named_hosts_only`]: credentials for a private index authenticate, they
/// never choose a package or reach the lock). Every other variable, `UV_*` and `PIP_*`
/// included, is withheld.
const PASSED: &[&str] = &["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "SSL_CERT_DIR"];

/// The interpreter uv is told to consult (and that writes the stand-ins), as an absolute path:
/// `ENVBUILD_PYTHON`, else `python3` on `PATH`'s absolute folders. uv is always given one:
/// left to find its own, it would take a `.venv` in its working folder or any folder above it
/// (a checkout's, when `TMPDIR` lies in it) and run that interpreter.
pub fn interpreter() -> Option<String> {
    let named = std::env::var_os("ENVBUILD_PYTHON").filter(|s| !s.is_empty());
    let name = named.unwrap_or_else(|| "python3".into());
    proc::find_program(&name).map(|p| p.to_string_lossy().into_owned())
}

/// The user's netrc (`NETRC`, else `~/.netrc`) without its `default` entry and its macros: uv
/// gets only the credentials the user gave for named hosts, so an index a spec names (the
/// spec is the checkout's) is never sent the catch-all login. `None` when there is none.
fn netrc_for_uv(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    let path = get("NETRC")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| get("HOME").map(|h| Path::new(&h).join(".netrc")))?;
    crate::infra::fs::read_bounded_text(&path, crate::infra::fs::MAX_INPUT_BYTES)
        .ok()
        .map(|t| named_hosts_only(&t))
}

/// A netrc's `machine` entries alone, one a line: `default` entries and `macdef` macros (whose
/// body runs to the next empty line) are dropped.
fn named_hosts_only(text: &str) -> String {
    let (mut out, mut keep, mut in_macro) = (String::new(), false, false);
    for line in text.lines() {
        if in_macro {
            in_macro = !line.trim().is_empty();
            continue;
        }
        for t in line.split_whitespace() {
            match t {
                "machine" => {
                    keep = true;
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str("machine");
                }
                "default" => keep = false,
                "macdef" => {
                    in_macro = true;
                    break;
                }
                _ if keep => {
                    out.push(' ');
                    out.push_str(t);
                }
                _ => {}
            }
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

fn missing(message: String) -> Failure {
    Failure::one(
        Diagnostic::error(RESOLVER_MISSING, message).with_hint(format!(
            "the closure is resolved by uv: install it (`{UV_INSTALL}`, which puts it in \
             ~/.local/bin) and put it on PATH or name it with ENVBUILD_UV; or lock without the \
             closure (`envbuild lock --no-closure`, or `[lock] closure = false`)"
        )),
    )
}

/// uv: `ENVBUILD_UV` when set (it must be an executable file), else `uv` on `PATH`.
pub fn find() -> Result<PathBuf, Failure> {
    if let Some(named) = std::env::var_os("ENVBUILD_UV").filter(|s| !s.is_empty()) {
        let p = PathBuf::from(&named);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(missing(format!(
                "ENVBUILD_UV names `{}`, which is not an executable file",
                crate::core::diag::shown(&p)
            )))
        };
    }
    // Only PATH's absolute folders: a relative entry would find a `uv` planted in the checkout.
    proc::find_program(std::ffi::OsStr::new("uv"))
        .ok_or_else(|| missing("uv is not on PATH and ENVBUILD_UV is not set".to_string()))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `uv 0.13.9`: what `uv --version` says, without its build details.
pub fn version(uv: &Path) -> Result<String, Failure> {
    let mut cmd = proc::command(uv);
    cmd.arg("--version").env_clear();
    match proc::run_with_timeout(cmd, Duration::from_secs(30)) {
        Ok(out) if out.code == Some(0) => {
            let words: Vec<&str> = out.stdout.split_whitespace().take(2).collect();
            match words.as_slice() {
                ["uv", v] => Ok(format!("uv {v}")),
                _ => Err(missing(format!(
                    "`{} --version` does not say it is uv: {}",
                    crate::core::diag::shown(uv),
                    out.stdout.trim()
                ))),
            }
        }
        Ok(out) => Err(missing(format!(
            "`{} --version` failed: {}",
            crate::core::diag::shown(uv),
            out.stderr.trim()
        ))),
        Err(e) => Err(missing(format!(
            "cannot run `{}`: {e:?}",
            crate::core::diag::shown(uv)
        ))),
    }
}

/// What a resolution gave: the closure's pip entries, and the resolver that chose them.
#[derive(Debug)]
pub struct Resolved {
    pub closure: Vec<ClosurePkg>,
    /// `uv 0.13.9`.
    pub resolver: String,
}

/// uv's arguments for resolving `inputs` from `reqs` into `out` (a `pylock.toml`).
pub fn uv_args(inputs: &Inputs, reqs: &Path, out: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "pip",
        "compile",
        // No uv.toml, pyproject.toml or user/system configuration: the spec alone.
        "--no-config",
        "--no-cache",
        // Wheels only, direct references included: nothing is built (or run) here.
        "--no-build",
        "--no-python-downloads",
        // Not `--quiet`: it silences the warning that a release is yanked, which is read.
        "--no-progress",
        "--color",
        "never",
        // The platform's CA store as well as the bundle SSL_CERT_FILE names.
        "--system-certs",
        "--format",
        "pylock.toml",
        // pip's meaning of `--index-url` + `--extra-index-url`: the best match over all.
        "--index-strategy",
        "unsafe-best-match",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend([
        "--python-version".into(),
        inputs.python.clone(),
        "--python-platform".into(),
        inputs.python_platform.clone(),
        "--default-index".into(),
        inputs.index_url.clone(),
    ]);
    for u in &inputs.extra_index_urls {
        a.push("--index".into());
        a.push(u.clone());
    }
    a.push("-o".into());
    a.push(out.to_string_lossy().into_owned());
    a.push(reqs.to_string_lossy().into_owned());
    a
}

/// The scrubbed environment of a uv run: [`PASSED`], the proxies, and the network's CA bundle
/// as `SSL_CERT_FILE` (the first of `PIP_CERT`, `REQUESTS_CA_BUNDLE`, `SSL_CERT_FILE` that is
/// set, as the image build takes it). `get` reads this process's environment.
pub fn environment(get: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = PASSED
        .iter()
        .chain(crate::infra::network::PROXY_VARS)
        .filter_map(|k| get(k).filter(|v| !v.is_empty()).map(|v| (k.to_string(), v)))
        .collect();
    if let Some(ca) = crate::infra::network::CA_VARS
        .iter()
        .find_map(|k| get(k).filter(|v| !v.is_empty()))
    {
        env.push(("SSL_CERT_FILE".into(), ca));
    }
    env
}

fn failed(message: String) -> Failure {
    Failure::one(Diagnostic::error(CLOSURE_RESOLVE_FAILED, message).with_hint(
        "the closure is resolved on this machine by uv (a Python 3 interpreter must be on PATH, \
         or named by ENVBUILD_PYTHON), from the spec's indexes: check that they answer and hold \
         the pinned versions",
    ))
}

fn needs_wheel(message: String) -> Failure {
    Failure::one(Diagnostic::error(CLOSURE_NEEDS_WHEEL, message).with_hint(NEEDS_WHEEL_HINT))
}

/// Resolve the closure of `inputs` with `uv`, holding packages to `constraints` (`name==version`
/// lines; `--upgrade-package` holds everything else). `installed` (name, version) are taken as
/// already in the environment (a conda environment's Python packages): uv gets a
/// dependency-free stand-in wheel for each, held to exactly that version, so it neither picks
/// another version nor resolves their dependencies from the index's metadata; they are left out
/// of the result.
pub fn resolve(
    uv: &Path,
    inputs: &Inputs,
    constraints: &[String],
    installed: &[(String, String)],
) -> Result<Resolved, Failure> {
    // uv would be handed a proxy it may ignore; refuse it before anything connects.
    crate::infra::network::check_proxies_env()?;
    let resolver = version(uv)?;
    let dir =
        crate::infra::scratch::tempdir().map_err(|e| Failure::io(Path::new("<temp dir>"), &e))?;
    let reqs = dir.path().join("requirements.in");
    let out = dir.path().join("pylock.toml");
    let mut text = inputs.requirements.join("\n");
    text.push('\n');
    std::fs::write(&reqs, text).map_err(|e| Failure::io(&reqs, &e))?;
    let mut extra = Vec::new();
    let mut constraints = constraints.to_vec();
    if !installed.is_empty() {
        extra = vec![
            "--find-links".to_string(),
            stand_ins(inputs, installed, dir.path())?,
        ];
        // `===`: the string exactly, so a local-version wheel (`2.5.1+cu124`) is not taken.
        constraints.extend(installed.iter().map(|(n, v)| format!("{n}==={v}")));
    }
    if !constraints.is_empty() {
        let c = dir.path().join("constraints.txt");
        std::fs::write(&c, constraints.join("\n") + "\n").map_err(|e| Failure::io(&c, &e))?;
        extra.extend(["-c".to_string(), c.to_string_lossy().into_owned()]);
    }
    if let Some(py) = interpreter() {
        extra.extend(["--python".to_string(), py]);
    }
    // Always a netrc of envbuild's making: uv reads `~/.netrc` itself when `NETRC` is unset.
    let netrc = dir.path().join("netrc");
    let hosts = netrc_for_uv(|k| std::env::var(k).ok()).unwrap_or_default();
    write_private(&netrc, &hosts)?;
    let mut cmd = proc::command(uv);
    cmd.args(uv_args(inputs, &reqs, &out))
        .args(extra)
        .current_dir(dir.path())
        .env_clear()
        .envs(environment(|k| std::env::var(k).ok()))
        .env("NETRC", &netrc);
    let said = run_uv(cmd, uv)?;
    let pylock = std::fs::read_to_string(&out).map_err(|e| Failure::io(&out, &e))?;
    let names: Vec<String> = installed
        .iter()
        .map(|(n, _)| crate::core::closure::canonical_name(n))
        .collect();
    let mut closure = from_pylock(&pylock, inputs, &names).map_err(|e| match e {
        PylockError::NeedsWheel(m) => needs_wheel(m),
        PylockError::Unusable(m) => failed(m),
    })?;
    // pylock.toml does not say what the index yanked; uv's warning does.
    crate::core::closure::yanked::mark(
        &mut closure,
        &crate::core::closure::yanked::from_uv_output(&said),
    );
    Ok(Resolved { closure, resolver })
}

/// Write `text` readable by its owner alone (credentials).
fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Failure::io(path, &e))
}

/// Run one `uv pip compile`: what it said on stderr, or its failure as a diagnostic with the
/// end of uv's message.
fn run_uv(cmd: std::process::Command, uv: &Path) -> Result<String, Failure> {
    match proc::run_with_timeout(cmd, TIMEOUT) {
        Ok(out) if out.code == Some(0) => Ok(out.stderr),
        Ok(out) => {
            let tail: Vec<&str> = out.stderr.lines().rev().take(16).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            let text = tail.join("\n    ");
            // uv refuses what only a build could read (`--no-build`): say which package.
            if text.contains("building from source is disabled")
                || (text.contains("Building source distributions") && text.contains("disabled"))
            {
                return Err(needs_wheel(format!(
                    "uv could not resolve the closure without building a source distribution:\n    {text}"
                )));
            }
            Err(failed(format!(
                "uv could not resolve the closure for the target (exit {:?}):\n    {text}",
                out.code
            )))
        }
        Err(RunError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(missing(
            format!("`{}` does not exist", crate::core::diag::shown(uv)),
        )),
        Err(RunError::Spawn(e)) => Err(failed(format!(
            "cannot run `{}`: {e}",
            crate::core::diag::shown(uv)
        ))),
        Err(RunError::TimedOut { .. }) => Err(failed(format!(
            "uv did not resolve the closure within {} s and was stopped",
            TIMEOUT.as_secs()
        ))),
        Err(RunError::Wait(e)) => Err(Failure::bug(format!("waiting for uv: {e}"))),
    }
}

/// Write the stand-in wheels of `installed` into `dir/installed` (with the interpreter), tagged
/// with the target's most preferred tag; the folder, for `--find-links`.
fn stand_ins(
    inputs: &Inputs,
    installed: &[(String, String)],
    dir: &Path,
) -> Result<String, Failure> {
    let out = dir.join("installed");
    std::fs::create_dir(&out).map_err(|e| Failure::io(&out, &e))?;
    let list = serde_json::to_string(installed).unwrap_or_default();
    let python = interpreter().unwrap_or_else(|| "python3".to_string());
    let mut cmd = proc::command(&python);
    // `-I`: isolated (no working folder or script folder on `sys.path`, no `PYTHON*`
    // variables, no user site-packages), from the resolution's own folder, with nothing of the
    // user's environment but `PATH`: the stub writer runs the standard library alone.
    cmd.arg("-I")
        .arg("-c")
        .arg(STUBS)
        .arg(&out)
        .arg(inputs.stand_in_tag())
        .arg(list)
        .current_dir(dir)
        .env_clear()
        .envs(std::env::var_os("PATH").map(|p| ("PATH", p)));
    match proc::run_with_timeout(cmd, Duration::from_secs(60)) {
        Ok(o) if o.code == Some(0) => Ok(out.to_string_lossy().into_owned()),
        Ok(o) => Err(failed(format!(
            "could not write the stand-ins for conda's packages: {}",
            o.stderr.trim()
        ))),
        Err(RunError::Spawn(e)) => Err(failed(format!("cannot run `{python}`: {e}"))),
        Err(e) => Err(failed(format!("writing the stand-ins: {e:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// uv's netrc keeps the named hosts and drops the catch-all `default` and macros.
    #[test]
    fn the_netrc_uv_sees_has_named_hosts_only() {
        let text = "machine pypi.corp login ci password s3cret\n\
                    default login everyone password catch-all\n\
                    macdef init\nsome macro\n\n\
                    machine other.corp\n  login u\n  password p\n";
        assert_eq!(
            named_hosts_only(text),
            "machine pypi.corp login ci password s3cret\nmachine other.corp login u password p\n"
        );
        assert_eq!(named_hosts_only("default login x password y\n"), "");
    }

    /// The host's pip and uv settings never reach uv; the proxies and the CA bundle do.
    #[test]
    fn the_environment_is_the_specs_alone() {
        let host: std::collections::BTreeMap<&str, &str> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("PIP_INDEX_URL", "http://elsewhere/simple"),
            ("PIP_FIND_LINKS", "/opt/wheels"),
            ("UV_INDEX_URL", "http://elsewhere/simple"),
            ("UV_CONFIG_FILE", "/tmp/uv.toml"),
            ("UV_EXCLUDE_NEWER", "2020-01-01"),
            ("PIP_CERT", "/etc/corp-ca.pem"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("VIRTUAL_ENV", "/venv"),
        ]
        .into();
        let env = environment(|k| host.get(k).map(|v| v.to_string()));
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["PATH", "HOME", "HTTPS_PROXY", "SSL_CERT_FILE"]);
        assert_eq!(env[3].1, "/etc/corp-ca.pem");
    }

    #[test]
    fn the_arguments_name_the_target_and_build_nothing() {
        let inputs = Inputs {
            requirements: vec!["torch==2.14.1".into()],
            index_url: "https://pypi.org/simple".into(),
            extra_index_urls: vec!["https://download.pytorch.org/whl/cu128".into()],
            python: "3.11".into(),
            abi: "cp311".into(),
            python_platform: "x86_64-manylinux_2_28".into(),
        };
        let a = uv_args(&inputs, Path::new("/t/r.in"), Path::new("/t/pylock.toml")).join(" ");
        for want in [
            "pip compile --no-config --no-cache --no-build",
            "--format pylock.toml",
            "--python-version 3.11 --python-platform x86_64-manylinux_2_28",
            "--default-index https://pypi.org/simple --index https://download.pytorch.org/whl/cu128",
            "-o /t/pylock.toml /t/r.in",
        ] {
            assert!(a.contains(want), "{a}");
        }
        assert!(UV_INSTALL.ends_with(&format!("uv=={}", crate::core::closure::UV_VERSION)));
    }
}
