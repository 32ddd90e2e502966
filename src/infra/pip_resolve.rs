//! The closure resolver (pip side): runs the host's `python3 -m pip install --dry-run --report`
//! for the target (its Python, ABI, platform tags and environment markers) through a small shim
//! and reads the report. Performs file, process and (through pip) network I/O.

use crate::core::closure::{codes, from_pip_report, Inputs};
use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::ClosurePkg;
use crate::infra::proc::{self, RunError};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// pip evaluates environment markers against the interpreter that runs it, not the target that
/// `--python-version`/`--platform` describe; the shim replaces pip's vendored
/// `packaging.markers.default_environment` with the target's markers (argv[1], JSON) before
/// pip's own `main` runs with the remaining arguments. `pip install` (unlike `pip download`)
/// also checks a candidate's Requires-Python against the running interpreter, not
/// `--python-version` (pip 23/24 do not pass it to the resolver), which silently picks older
/// releases for a newer target Python; the shim gives the resolver the target's version.
const SHIM: &str = r#"import json, sys
env = json.loads(sys.argv[1])
try:
    from pip._vendor.packaging import markers
except ImportError:
    sys.stderr.write("envbuild: this Python has no pip (install pip >= 23)\n")
    sys.exit(3)
markers.default_environment = lambda: dict(env)
target = tuple(int(p) for p in env["python_full_version"].split("."))
try:
    from pip._internal.resolution.resolvelib import factory
    _init = factory.Factory.__init__

    def _init_for_target(self, *args, **kwargs):
        if kwargs.get("py_version_info") is None:
            kwargs["py_version_info"] = target
        _init(self, *args, **kwargs)

    factory.Factory.__init__ = _init_for_target
except (ImportError, AttributeError):
    pass
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"#;

/// Writes stand-in wheels for distributions that are installed already (by conda): name and
/// version only, no dependencies (conda resolved those), tagged with the target's most
/// preferred tag and a build tag, so that pip, held to exactly that version, prefers them to the
/// index's wheels of the same version (its candidate order: version, then tag preference, then
/// build tag). argv: the folder, the tag, a JSON list of [name, version].
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

/// How long a resolution may take (a cold PyPI torch resolution takes about half a minute).
pub const TIMEOUT: Duration = Duration::from_secs(900);

/// The interpreter that runs pip: `ENVBUILD_PYTHON`, else `python3`.
pub fn interpreter() -> String {
    std::env::var("ENVBUILD_PYTHON")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "python3".to_string())
}

/// pip's arguments for resolving `inputs`, with the report written to `report` and the
/// requirements read from `reqs`.
pub fn pip_args(inputs: &Inputs, reqs: &Path, report: &Path, target_dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--no-input",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--implementation",
        "cp",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in &inputs.platforms {
        a.push("--platform".into());
        a.push(p.clone());
    }
    a.extend([
        "--python-version".into(),
        inputs.python.clone(),
        "--abi".into(),
        inputs.abi.clone(),
        "--target".into(),
        target_dir.to_string_lossy().into_owned(),
        "--report".into(),
        report.to_string_lossy().into_owned(),
        "--index-url".into(),
        inputs.index_url.clone(),
    ]);
    for u in &inputs.extra_index_urls {
        a.push("--extra-index-url".into());
        a.push(u.clone());
    }
    a.push("-r".into());
    a.push(reqs.to_string_lossy().into_owned());
    a
}

fn failed(message: String, hint: &str) -> Failure {
    Failure::one(Diagnostic::error(codes::CLOSURE_RESOLVE_FAILED, message).with_hint(hint))
}

/// Resolve the closure of `inputs` with `python`'s pip, holding packages to `constraints`
/// (`name==version` lines; `--upgrade-package` holds everything else). `installed` (name,
/// version) are taken as already in the environment (a conda environment's Python packages):
/// pip gets a dependency-free stand-in wheel for each, held to exactly that version, so it
/// neither picks another version nor resolves their dependencies from the index's metadata;
/// they appear in the result (the caller leaves them out).
pub fn resolve(
    python: &str,
    inputs: &Inputs,
    constraints: &[String],
    installed: &[(String, String)],
) -> Result<Vec<ClosurePkg>, Failure> {
    let dir = tempfile::tempdir().map_err(|e| Failure::io(Path::new("<temp dir>"), &e))?;
    let reqs = dir.path().join("requirements.in");
    let report = dir.path().join("report.json");
    let shim = dir.path().join("envbuild_pip_shim.py");
    let mut text = inputs.requirements.join("\n");
    text.push('\n');
    std::fs::write(&reqs, text).map_err(|e| Failure::io(&reqs, &e))?;
    std::fs::write(&shim, SHIM).map_err(|e| Failure::io(&shim, &e))?;
    let hint = "the closure is resolved on this machine with Python 3 and pip >= 23 (`ENVBUILD_PYTHON` names another interpreter), from the lock's indexes";
    let mut extra = Vec::new();
    let mut constraints = constraints.to_vec();
    if !installed.is_empty() {
        let stubs = stand_ins(python, inputs, installed, dir.path(), hint)?;
        extra = vec!["--find-links".to_string(), stubs];
        // `===`: the string exactly, so a local-version wheel (`2.5.1+cu124`) is not taken.
        constraints.extend(installed.iter().map(|(n, v)| format!("{n}==={v}")));
    }
    if !constraints.is_empty() {
        let c = dir.path().join("constraints.txt");
        std::fs::write(&c, constraints.join("\n") + "\n").map_err(|e| Failure::io(&c, &e))?;
        extra.extend(["-c".to_string(), c.to_string_lossy().into_owned()]);
    }
    let markers = serde_json::to_string(&inputs.markers).unwrap_or_default();
    let mut cmd = Command::new(python);
    cmd.arg(&shim)
        .arg(markers)
        .args(pip_args(inputs, &reqs, &report, &dir.path().join("target")))
        .args(extra)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    match proc::run_with_timeout(cmd, TIMEOUT) {
        Ok(out) if out.code == Some(0) => {}
        Ok(out) => {
            let tail: Vec<&str> = out.stderr.lines().rev().take(12).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(failed(
                format!(
                    "pip could not resolve the closure for the target (exit {:?}):\n    {}",
                    out.code,
                    tail.join("\n    ")
                ),
                hint,
            ));
        }
        Err(RunError::Spawn(e)) => {
            return Err(failed(format!("cannot run `{python}`: {e}"), hint));
        }
        Err(RunError::TimedOut { .. }) => {
            return Err(failed(
                format!(
                    "pip did not resolve the closure within {} s and was stopped",
                    TIMEOUT.as_secs()
                ),
                "check that the indexes answer",
            ));
        }
        Err(RunError::Wait(e)) => return Err(Failure::bug(format!("waiting for pip: {e}"))),
    }
    let json = std::fs::read_to_string(&report).map_err(|e| Failure::io(&report, &e))?;
    from_pip_report(&json, inputs).map_err(|m| failed(m, hint))
}

/// Write the stand-in wheels of `installed` into `dir/installed` (with `python`), tagged with
/// the target's most preferred tag; the folder, for `--find-links`.
fn stand_ins(
    python: &str,
    inputs: &Inputs,
    installed: &[(String, String)],
    dir: &Path,
    hint: &str,
) -> Result<String, Failure> {
    let out = dir.join("installed");
    std::fs::create_dir(&out).map_err(|e| Failure::io(&out, &e))?;
    let platform = inputs.platforms.first().map_or("any", String::as_str);
    let tag = format!("{abi}-{abi}-{platform}", abi = inputs.abi);
    let list = serde_json::to_string(installed).unwrap_or_default();
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(STUBS).arg(&out).arg(&tag).arg(list);
    match proc::run_with_timeout(cmd, Duration::from_secs(60)) {
        Ok(o) if o.code == Some(0) => Ok(out.to_string_lossy().into_owned()),
        Ok(o) => Err(failed(
            format!(
                "could not write the stand-ins for conda's packages: {}",
                o.stderr.trim()
            ),
            hint,
        )),
        Err(RunError::Spawn(e)) => Err(failed(format!("cannot run `{python}`: {e}"), hint)),
        Err(e) => Err(failed(format!("writing the stand-ins: {e:?}"), hint)),
    }
}
