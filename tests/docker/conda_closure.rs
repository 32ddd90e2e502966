//! A conda closure's image against the real engine: the rendered Dockerfile's throwaway install
//! stage runs the explicit file and the hashed pip part behind this machine's TLS-inspecting
//! network with the CA bundle, the image keeps no trace of the bundle, and `envbuild test
//! --lock` reads the image's conda records: exactly the closure, then drift after a change.
//!
//! No conda channel and no conda base image are reachable here, so the base is the Debian test
//! image with a stand-in `conda` (TEST FIXTURE below): it refuses to run without a CA bundle in
//! `CONDA_SSL_VERIFY` (as conda would here), reads the explicit file as conda does and writes
//! one `conda-meta` record per line into a prefix that is a venv of the base's Python. The pip
//! part is real: `six` from PyPI, checked against its published sha256.

use crate::bases::{contains, everything_visible_in, HOST_CA};
use crate::support::{envbuild, stderr_of, stdout_of};
use envbuild::core::lock::{ClosurePkg, Lock};
use envbuild::core::spec::Variant;
use std::collections::BTreeMap;
use std::path::Path;

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        a_conda_closure_installs_with_the_ca_keeps_no_trace_and_drift_is_named,
        a_conda_solve_gets_the_ca_in_its_throwaway_stage_and_keeps_no_trace
    ]
}

/// TEST FIXTURE: a stand-in for `conda create --yes --quiet --prefix P --file EXPLICIT` and
/// `conda env create --prefix P --file ENVIRONMENT_YML`.
const STAND_IN_CONDA: &str = r##"#!/usr/bin/python3
# TEST FIXTURE: a stand-in for conda (envbuild's Docker tests): `create --prefix P --file F`
# with an explicit file, or `env create --prefix P --file F` with an environment file. It
# downloads and solves nothing; it writes one conda-meta record per line.
import json, os, subprocess, sys
args = sys.argv[1:]
if args[:1] not in (["create"], ["env"]) or "--prefix" not in args or "--file" not in args:
    sys.exit("stand-in conda: only `[env] create --prefix P --file F` is supported: %r" % args)
prefix, explicit = args[args.index("--prefix") + 1], args[args.index("--file") + 1]
ca = os.environ.get("CONDA_SSL_VERIFY", "")
if not (ca and os.path.isfile(ca) and "BEGIN CERTIFICATE" in open(ca).read()):
    sys.exit("stand-in conda: CERTIFICATE_VERIFY_FAILED (CONDA_SSL_VERIFY names no CA bundle)")
if args[:2] == ["env", "create"]:
    # The environment file's conda dependencies (`- name=version...`, quoted), one record each.
    subprocess.check_call([sys.executable, "-m", "venv", "--without-pip", prefix])
    os.makedirs(os.path.join(prefix, "conda-meta"))
    for line in open(explicit):
        item = line.strip()
        if not item.startswith("- ") or item.endswith(":"):
            continue
        item = item[2:].strip().strip("'\"").split("::")[-1]
        name = item.replace("==", "=").split("=")[0]
        if line.startswith("      ") or not name:
            continue  # the pip: section
        with open(os.path.join(prefix, "conda-meta", "%s-0-0.json" % name), "w") as f:
            json.dump({"name": name, "version": "0", "build": "0", "files": []}, f)
    sys.exit(0)
lines = [l.strip() for l in open(explicit) if l.strip() and not l.lstrip().startswith("#")]
if not lines or lines[0] != "@EXPLICIT":
    sys.exit("stand-in conda: %s is not an explicit file" % explicit)
subprocess.check_call([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                       prefix])
os.makedirs(os.path.join(prefix, "conda-meta"))
for line in lines[1:]:
    url, md5 = line.split("#", 1)
    stem = url.rsplit("/", 1)[1]
    stem = stem[:-len(".conda")] if stem.endswith(".conda") else stem[:-len(".tar.bz2")]
    name, version, build = stem.rsplit("-", 2)
    record = {"name": name, "version": version, "build": build, "url": url, "md5": md5,
              "files": []}
    with open(os.path.join(prefix, "conda-meta", "%s.json" % stem), "w") as f:
        json.dump(record, f)
open(os.path.join(prefix, "conda-meta", "history"), "w").close()
"##;

/// six 1.17.0's wheel on PyPI and its published sha256.
const SIX_URL: &str = "https://files.pythonhosted.org/packages/b7/ce/149a00dd41f10bc29e5921b496af8b574d8413afcd5e30dfa0ed46c2cc5e/six-1.17.0-py2.py3-none-any.whl";
const SIX_SHA256: &str = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274";

/// Build `dockerfile` (target `target`, empty for the last stage) with `files`; its tag.
fn build(
    d: &crate::engine_support::Docker,
    name: &str,
    dockerfile: &str,
    target: &str,
    mut files: BTreeMap<String, Vec<u8>>,
    lock_hash: Option<String>,
) -> Result<String, String> {
    files.insert("Dockerfile".into(), dockerfile.as_bytes().to_vec());
    // An image with no lock label is content-addressed by its files.
    let lock_hash = lock_hash.unwrap_or_else(|| {
        let seed: Vec<u8> = files
            .iter()
            .flat_map(|(k, v)| k.bytes().chain(v.iter().copied()))
            .collect();
        envbuild::core::hash::sha256_hex(&seed)
    });
    let req = envbuild::infra::docker::build::BuildRequest {
        content_sha256: None,
        files,
        dockerfile: "Dockerfile".into(),
        target: target.into(),
        image_name: name.into(),
        variant: "conda".into(),
        // The Dockerfile's label carries the lock's hash; the build checks the image has it.
        lock_hash,
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: Default::default(),
        rebuild: false,
        build_args: Default::default(),
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    crate::engine_support::build_once(d, &req).map_err(|f| f.to_string())
}

/// `envbuild test IMAGE --lock LOCK --gpus none --json`: the `closure` check's status, code and
/// detail.
fn closure_check(image: &str, lock: &Path) -> (String, String, String) {
    let out = envbuild()
        .args(["test", image, "--gpus", "none", "--json", "--lock"])
        .arg(lock)
        .env("ENVBUILD_RUN_ID", crate::engine_support::run_prefix())
        .output()
        .unwrap();
    let stdout = stdout_of(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", stderr_of(&out)));
    // The report's shape differs between runs of one image and several: find the check.
    fn walk(v: &serde_json::Value, found: &mut Option<serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                if m.get("name").and_then(|n| n.as_str()) == Some("closure")
                    && m.contains_key("status")
                {
                    *found = Some(v.clone());
                }
                m.values().for_each(|x| walk(x, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, found)),
            _ => {}
        }
    }
    let mut found = None;
    walk(&v, &mut found);
    let c = found.unwrap_or_else(|| panic!("no closure check in {stdout}"));
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("code"), s("detail"))
}

/// The Debian test base with the stand-in `conda` on its PATH.
fn stand_in_base(d: &crate::engine_support::Docker) -> String {
    let debian = crate::engine_support::debian_python_image(d);
    let files = BTreeMap::from([("conda".to_string(), STAND_IN_CONDA.as_bytes().to_vec())]);
    build(
        d,
        "envbuild-test/conda-stand-in",
        &format!(
            "FROM {debian}\nCOPY conda /usr/local/bin/conda\nRUN chmod 755 /usr/local/bin/conda\n"
        ),
        "",
        files,
        None,
    )
    .unwrap_or_else(|e| panic!("the stand-in base: {e}"))
}

/// A conda lock without a closure (conda solves environment.yml at build time) gets the
/// network's CA bundle in its throwaway install stage too, and no trace of it ships. The
/// committed conda-forge example on the stand-in base: the build fails without the bundle.
fn a_conda_solve_gets_the_ca_in_its_throwaway_stage_and_keeps_no_trace() {
    let test = "a_conda_solve_gets_the_ca_in_its_throwaway_stage_and_keeps_no_trace";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    if !Path::new(HOST_CA).is_file() {
        crate::engine_support::skip_or_fail(test, &format!("no CA bundle at {HOST_CA}"));
        return;
    }
    let base = stand_in_base(&d);
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/conda-forge-torch210/envbuild.lock"),
    )
    .unwrap();
    let mut lock = Lock::from_toml(&text).unwrap();
    lock.name = format!("conda-solve-{}", envbuild::infra::docker::new_run_id());
    lock.image.base = base;
    lock.image.variants = vec![Variant::Runtime];
    assert!(lock.closure.is_empty(), "the example has no closure");
    let rendered = envbuild::app::image::rendered_image(
        &lock,
        &["runtime".into()],
        None,
        Path::new("envbuild.toml"),
        &Default::default(),
    )
    .unwrap();
    let text = String::from_utf8(rendered.files[&rendered.dockerfile].clone()).unwrap();
    assert!(
        text.contains("conda-env.sh solve /tmp/envbuild/environment.yml"),
        "{text}"
    );
    build_with_and_without_the_ca(
        &d,
        &lock,
        Path::new("envbuild.toml"),
        "envbuild-test/conda-solve",
        "pytorch-0-0.json",
    );
}

/// Build `lock`'s runtime image (tagged `name`) on the stand-in base, first without the
/// network's CA bundle (the install stage must fail: the stand-in refuses, as pip reaching PyPI
/// through this network would), then with the host's bundle plus a marker line; check that
/// nothing of the bundle is visible in the image and that `needle` is. The image's tag.
fn build_with_and_without_the_ca(
    d: &crate::engine_support::Docker,
    lock: &Lock,
    spec: &Path,
    name: &str,
    needle: &str,
) -> String {
    let work = crate::support::tempdir();
    let marker = format!(
        "envbuild-conda-ca-marker-{}",
        envbuild::infra::docker::new_run_id()
    );
    let ca = work.path().join("host-ca.pem");
    let mut bundle = std::fs::read(HOST_CA).unwrap();
    bundle.extend(format!("# {marker}\n").as_bytes());
    std::fs::write(&ca, &bundle).unwrap();
    let ca = ca.to_string_lossy().into_owned();
    // `build` takes Dockerfile.buildkit (the bundle bind-mounted) when the engine has BuildKit,
    // else Dockerfile (the bundle copied into the throwaway stage); ENVBUILD_BUILDER=legacy
    // forces the latter.
    let render = |with_ca: bool| {
        let mut r = envbuild::app::image::rendered_image(
            lock,
            &["runtime".into()],
            None,
            spec,
            &Default::default(),
        )
        .unwrap();
        let get = |k: &str| (with_ca && k == "SSL_CERT_FILE").then(|| ca.clone());
        let origin = envbuild::app::image::add_ca_bundle(&mut r, lock, spec, get).unwrap();
        assert_eq!(origin.is_some(), with_ca);
        let dockerfile = String::from_utf8(r.files[&r.dockerfile].clone()).unwrap();
        (dockerfile, r.files)
    };
    let hash = lock.hash().unwrap();
    let (dockerfile, files) = render(false);
    let err = build(d, name, &dockerfile, "runtime", files, Some(hash.clone()))
        .expect_err("built without a CA bundle");
    assert!(err.contains("CERTIFICATE_VERIFY_FAILED"), "{err}");
    let (dockerfile, files) = render(true);
    let tag = build(d, name, &dockerfile, "runtime", files, Some(hash))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    // No trace of the bundle: history, config and every byte of the filesystem.
    let seen = everything_visible_in(&tag);
    assert!(contains(&seen, needle), "the environment is in {tag}");
    assert!(
        !contains(&seen, &marker),
        "the CA bundle is visible in {tag}"
    );
    // The slot's path (the bare file name is in Debian's perl HTTP::Tiny).
    assert!(!contains(&seen, "envbuild/ca-bundle.pem"), "{tag}");
    assert!(!contains(&seen, "CONDA_SSL_VERIFY="), "{tag}");
    tag
}

fn a_conda_closure_installs_with_the_ca_keeps_no_trace_and_drift_is_named() {
    let test = "a_conda_closure_installs_with_the_ca_keeps_no_trace_and_drift_is_named";
    let Some(d) = crate::engine_support::engine(test) else {
        return;
    };
    if !crate::engine_support::real_smoke_script(test) {
        return;
    }
    if !Path::new(HOST_CA).is_file() {
        crate::engine_support::skip_or_fail(test, &format!("no CA bundle at {HOST_CA}"));
        return;
    }
    let base = stand_in_base(&d);

    // The fixture closure on the stand-in base, runtime only, with a real pip part.
    let text =
        std::fs::read_to_string(crate::support::fixture("conda-closure/envbuild.lock")).unwrap();
    let mut lock = Lock::from_toml(&text).unwrap();
    lock.name = format!("conda-closure-{}", envbuild::infra::docker::new_run_id());
    lock.image.base = base.clone();
    lock.image.variants = vec![Variant::Runtime];
    lock.packages.remove("einops");
    lock.packages.insert("six".into(), "1.17.0".into());
    lock.install.pip = vec!["six==1.17.0".into()];
    lock.closure.retain(|p| p.kind == "conda");
    lock.closure.push(ClosurePkg {
        name: "six".into(),
        version: "1.17.0".into(),
        kind: "pip".into(),
        url: SIX_URL.into(),
        index: "https://pypi.org/simple".into(),
        sha256: SIX_SHA256.into(),
        md5: None,
        build: None,
        subdir: None,
        yanked: None,
    });
    let work = tempfile::tempdir().unwrap();
    let lock_path = work.path().join("envbuild.lock");
    // The closure was changed here: the lock's integrity hash follows it.
    envbuild::core::closure::verify::seal(&mut lock);
    std::fs::write(&lock_path, lock.to_toml().unwrap()).unwrap();
    let spec = work.path().join("envbuild.toml");

    // The files `envbuild image` sends: rendered, then the CA slot filled from the host's
    // bundle plus a marker line, so that any copy of it in the image is found.
    let tag = build_with_and_without_the_ca(
        &d,
        &lock,
        &spec,
        "envbuild-test/conda-closure",
        "conda-meta",
    );

    // The image holds exactly the closure: conda records and the pip part.
    let (status, code, detail) = closure_check(&tag, &lock_path);
    assert_eq!((status.as_str(), code.as_str()), ("pass", "OK"), "{detail}");

    // A later change: one record removed, one at another build, one added; and a pip package.
    let prefix = envbuild::core::render::CONDA_ENV_PREFIX;
    let changed = format!(
        "FROM {tag}\nUSER root\nRUN cd {prefix}/conda-meta \
         && rm numpy-2.3.4-py312h33ff503_0.json \
         && sed -i 's/\"h767d61c_7\"/\"h767d61c_8\"/' libgcc-15.2.0-h767d61c_7.json \
         && echo '{{\"name\": \"zlib\", \"version\": \"1.3.1\", \"build\": \"hb9d3cd8_2\", \
         \"files\": []}}' > zlib-1.3.1-hb9d3cd8_2.json \
         && mkdir -p {prefix}/lib/python3.11/site-packages/rogue-1.0.dist-info \
         && printf 'Metadata-Version: 2.1\\nName: rogue\\nVersion: 1.0\\n' \
            > {prefix}/lib/python3.11/site-packages/rogue-1.0.dist-info/METADATA\n"
    );
    let drifted = build(
        &d,
        "envbuild-test/conda-drifted",
        &changed,
        "",
        BTreeMap::new(),
        // FROM the closure image: its lock label is inherited.
        Some(lock.hash().unwrap()),
    )
    .unwrap_or_else(|e| panic!("the drifted image: {e}"));
    let (status, code, detail) = closure_check(&drifted, &lock_path);
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("fail", "CLOSURE_DRIFT"),
        "{detail}"
    );
    for part in [
        "conda package numpy 2.3.4=py312h33ff503_0 missing",
        "conda package libgcc is 15.2.0=h767d61c_8, the lock has 15.2.0=h767d61c_7",
        "conda package zlib 1.3.1=hb9d3cd8_2 is not in the lock",
        "rogue 1.0 is not in the lock",
    ] {
        assert!(detail.contains(part), "{part} not in: {detail}");
    }
    for image in [drifted, tag, base] {
        d.remove_image(&image);
    }
}
