//! The first hour: each message a new user meets on a GPU-less, registry-less machine, as the
//! binary prints it (insta snapshots), with its way forward. `doctor` and `smoke` hints, the
//! base-image messages (against the fake engine of `engine_faults`: no registry, no real engine
//! needed), the CA-bundle note of a several-spec run, `lock` run twice, `matrix`'s default.

use super::engine_faults::{envbuild_at, wait_within, FakeEngine};
use crate::support::{envbuild, root, stderr_of, stdout_of, tempdir};
use std::path::Path;
use std::time::Duration;

/// `doctor` with every host probe pointed at nothing: the machine has no NVIDIA driver.
fn no_driver(cmd: &mut assert_cmd::Command) -> &mut assert_cmd::Command {
    cmd.env("ENVBUILD_NO_NVML", "1")
        .env(
            "ENVBUILD_NVIDIA_SMI",
            "/nonexistent/envbuild-test/nvidia-smi",
        )
        .env(
            "ENVBUILD_PROC_DRIVER_VERSION",
            "/nonexistent/envbuild-test/version",
        )
        // doctor names the host's CPU: the same in the snapshot on every machine.
        .env("ENVBUILD_HOST_ARCH", "x86_64")
}

#[test]
fn doctor_without_a_driver_says_the_gpu_less_way_forward() {
    let out = no_driver(envbuild().arg("doctor").env("ENVBUILD_DOCKER_CHECK", "0"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("doctor-no-driver", stdout_of(&out));
    // The same hint in the JSON check.
    let out = no_driver(
        envbuild()
            .args(["doctor", "--json"])
            .env("ENVBUILD_DOCKER_CHECK", "0"),
    )
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let driver = &doc["checks"][0];
    assert_eq!(driver["code"], "NO_DRIVER");
    assert!(
        driver["hint"].as_str().unwrap().contains("--gpus none"),
        "{driver}"
    );
}

/// An engine without an NVIDIA runtime: the runtimes in a fixed order whatever order the
/// engine sends them in, the probe image by its tag (never a bare `sha256:`), the cause's code
/// (`NO_GPU_RUNTIME`, as `image` and `test` say it) and a hint.
#[test]
fn doctor_names_the_probe_image_by_its_tag_and_the_cause_with_a_hint() {
    let run = |runtimes: &str| {
        let engine = FakeEngine::start(vec![
            ("/info", 200, format!(r#"{{"ID":"fake","Runtimes":{runtimes}}}"#)),
            (
                "/images/json",
                200,
                r#"[{"Id":"sha256:0000000000000000000000000000000000000000000000000000000000000001","ParentId":"","RepoTags":["<none>:<none>"],"RepoDigests":[],"Created":20,"Size":1,"SharedSize":-1,"Labels":{},"Containers":0},
                   {"Id":"sha256:0000000000000000000000000000000000000000000000000000000000000002","ParentId":"","RepoTags":["envbuild/vision:runtime-0123456789ab"],"RepoDigests":[],"Created":10,"Size":1,"SharedSize":-1,"Labels":{},"Containers":0}]"#
                    .into(),
            ),
            (
                "/containers/create",
                500,
                r#"{"message":"could not select device driver \"\" with capabilities: [[gpu]]"}"#
                    .into(),
            ),
            ("/containers/json", 200, "[]".into()),
        ]);
        let mut child = envbuild_at(&engine, "5")
            .arg("doctor")
            .env("ENVBUILD_NO_NVML", "1")
            .env(
                "ENVBUILD_NVIDIA_SMI",
                "/nonexistent/envbuild-test/nvidia-smi",
            )
            .env(
                "ENVBUILD_PROC_DRIVER_VERSION",
                "/nonexistent/envbuild-test/version",
            )
            .env("NO_COLOR", "1")
            .spawn()
            .unwrap();
        let out = wait_within(&mut child, Duration::from_secs(30), "envbuild doctor");
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    let a = run(r#"{"runc":{},"io.containerd.runc.v2":{},"crun":{}}"#);
    let b = run(r#"{"crun":{},"runc":{},"io.containerd.runc.v2":{}}"#);
    assert_eq!(a, b, "the same engine is reported the same way");
    let row = a
        .lines()
        .skip_while(|l| !l.contains("container_gpu"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("doctor-no-gpu-runtime", row);
}

#[test]
fn smoke_without_torch_says_how_to_install_it() {
    let no_torch = tempdir();
    let out = envbuild()
        .args(["smoke", "--python", "python3", "--gpus", "none"])
        .env("PYTHONPATH", no_torch.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout_of(&out);
    // The interpreter's path is this machine's: the row and its hint, with it named.
    let row: Vec<String> = text
        .lines()
        .skip_while(|l| !l.contains("TORCH_MISSING"))
        .take(2)
        .map(|l| match l.find(" in /") {
            Some(at) if l.contains("not installed") => format!("{} in PYTHON", &l[..at]),
            _ => l.to_string(),
        })
        .collect();
    insta::assert_snapshot!("smoke-torch-missing", row.join("\n"));
}

/// A spec and its lock in a folder of their own (the committed lock, current).
fn spec_copy(dir: &Path, name: &str) -> std::path::PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for f in ["envbuild.toml", "envbuild.lock"] {
        std::fs::copy(root().join("specs").join(name).join(f), to.join(f)).unwrap();
    }
    to.join("envbuild.toml")
}

#[test]
fn lock_run_twice_says_up_to_date_and_names_both_driver_floors() {
    let tmp = tempdir();
    let spec = tmp.path().join("envbuild.toml");
    std::fs::copy(root().join("specs/torch26-cu118-py39/envbuild.toml"), &spec).unwrap();
    let lock = |dir: &Path| {
        let out = envbuild()
            .current_dir(dir)
            .args(["lock", "envbuild.toml"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        stderr_of(&out)
    };
    let first = lock(tmp.path());
    let written = std::fs::metadata(tmp.path().join("envbuild.lock"))
        .unwrap()
        .modified()
        .unwrap();
    let second = lock(tmp.path());
    insta::assert_snapshot!("lock-twice", format!("{first}---\n{second}"));
    // Nothing was written the second time.
    assert_eq!(
        std::fs::metadata(tmp.path().join("envbuild.lock"))
            .unwrap()
            .modified()
            .unwrap(),
        written
    );
}

#[test]
fn matrix_prints_json_without_format() {
    let spec = root().join("specs/torch29-cu128/envbuild.toml");
    let plain = envbuild().arg("matrix").arg(&spec).output().unwrap();
    assert_eq!(plain.status.code(), Some(0), "{}", stderr_of(&plain));
    let json = envbuild()
        .arg("matrix")
        .arg(&spec)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(stdout_of(&plain), stdout_of(&json));
    let doc: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(doc["matrix"].as_array().is_some_and(|m| !m.is_empty()));
}

/// What `envbuild image` says on the fake engine (no registry), its port made stable.
fn image_on(engine: &FakeEngine, spec: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = envbuild_at(engine, "5");
    cmd.arg("image")
        .arg(spec)
        .args(["--gpus", "none", "--variant", "runtime"]);
    cmd.args(args).env("CI", "1");
    for k in ["PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let out = wait_within(&mut child, Duration::from_secs(60), "envbuild image");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    stderr_of(&out).replace(&engine.host(), "tcp://127.0.0.1:PORT")
}

/// No registry: `PULL_FAILED` (the default tries it), then, with `--pull never` as that hint
/// says, `BASE_IMAGE_MISSING`: both with the way that works offline, neither with a made-up
/// image under the official name.
#[test]
fn a_base_on_no_registry_gets_the_offline_way_forward() {
    let tmp = tempdir();
    let spec = spec_copy(tmp.path(), "torch29-cu128");
    let unreachable = r#"{"message":"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io on 10.0.0.53:53: no such host"}"#;
    let engine = FakeEngine::start(vec![
        ("/images/create", 500, unreachable.into()),
        ("/images/", 404, r#"{"message":"No such image"}"#.into()),
    ]);
    let pulled = image_on(&engine, &spec, &[], &[]);
    let never = image_on(&engine, &spec, &["--pull", "never"], &[]);
    for text in [&pulled, &never] {
        assert!(!text.contains("docker import"), "{text}");
    }
    insta::assert_snapshot!("image-pull-failed-offline", pulled);
    insta::assert_snapshot!("image-base-missing-pull-never", never);
}

/// A base the engine holds only for another CPU architecture, and a build that then looks for
/// the right one in a registry (BuildKit's way): the base is named, with the platform it is
/// there for and the one the build needs (it once read "base image `the base image`").
#[test]
fn a_base_for_another_architecture_is_named_with_both_platforms() {
    let tmp = tempdir();
    let spec = spec_copy(tmp.path(), "torch29-cu128");
    let failed = r#"{"errorDetail":{"message":"failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to do request: Head \"https://registry-1.docker.io/v2/library/python/manifests/3.12-slim-bookworm\": dial tcp: lookup registry-1.docker.io: no such host"},"error":"failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to do request: Head \"https://registry-1.docker.io/v2/library/python/manifests/3.12-slim-bookworm\": dial tcp: lookup registry-1.docker.io: no such host"}"#;
    let engine = FakeEngine::start(vec![
        (
            "/images/envbuild/",
            404,
            r#"{"message":"No such image"}"#.into(),
        ),
        (
            "/images/",
            200,
            r#"{"Id":"sha256:22","RepoTags":["python:3.12-slim-bookworm"],"Config":{"Labels":{}},"Os":"linux","Architecture":"arm64","Variant":"v8"}"#.into(),
        ),
        ("/build", 200, failed.into()),
    ]);
    // The fake build stream speaks the classic builder's JSON lines.
    let text = image_on(&engine, &spec, &[], &[("ENVBUILD_BUILDER", "legacy")]);
    let error: String = text
        .lines()
        .skip_while(|l| !l.starts_with("error["))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("image-base-other-platform", error);
}

/// The machine's CA bundle is every spec's: said once for a run of several, not once per spec.
#[test]
fn the_ca_bundle_note_is_said_once_per_run() {
    let tmp = tempdir();
    for name in ["torch29-cu128", "torch26-cu118-py39", "pypi-torch214"] {
        spec_copy(tmp.path(), name);
    }
    // A stand-in: a bundle is only checked for a PEM certificate, and no build starts here.
    let ca = tmp.path().join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let engine = FakeEngine::start(vec![]);
    let text = image_on(
        &engine,
        tmp.path(),
        &[],
        &[
            ("PIP_CERT", ca.to_str().unwrap()),
            ("ENVBUILD_ENGINE_TIMEOUT", "0.5"),
        ],
    );
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("CA bundle")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert_eq!(
        notes[0].replace(ca.to_str().unwrap(), "CA.pem"),
        "note: the builds trust the CA bundle of PIP_CERT (`CA.pem`); no image keeps it"
    );
}
