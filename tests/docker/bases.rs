//! Issue 13 items 7 and 8 against the real engine: any base a user names builds or is refused
//! before anything is installed (an externally managed Debian 12 without a `python` command,
//! a base with no Python at all), and a build behind this machine's TLS-inspecting network
//! uses the host's CA bundle and proxy settings without leaving either in the image. Issue 21:
//! a base the engine has only for another CPU architecture is named in BuildKit's failure.

use crate::engine_support as support;
use assert_cmd::Command;
use std::path::Path;

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        a_base_without_python_is_refused_as_base_has_no_python,
        proxy_build_args_reach_run_steps_and_stay_out_of_the_image,
        pep668_debian_without_python_command_builds_from_pypi_with_the_host_ca_and_keeps_no_trace,
        a_base_there_only_for_another_architecture_is_named_by_buildkit_s_failure,
    ]
}

/// This machine's CA bundle: the network inspects TLS, so pip in a container needs it.
pub(crate) const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The binary with this run's id, no proxy or CA variables from the caller, and `CI=true`.
pub(crate) fn envbuild() -> Command {
    let mut cmd = Command::cargo_bin("envbuild").expect("binary");
    cmd.env("ENVBUILD_RUN_ID", support::run_prefix());
    for k in envbuild::infra::network::PROXY_VARS
        .iter()
        .chain(envbuild::infra::network::CA_VARS)
    {
        cmd.env_remove(k);
    }
    cmd.env("CI", "true");
    cmd
}

fn nonce() -> String {
    envbuild::infra::docker::new_run_id()
}

/// `docker ARGS` through the CLI (the test reads the image the way a user would).
fn docker_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new("docker")
        .args(args)
        .output()
        .expect("the docker CLI")
}

/// Everything a user can see of `image`: its history (untruncated), its config and labels, and
/// every byte of its filesystem (`docker export` of a container made from it, never started).
pub(crate) fn everything_visible_in(image: &str) -> Vec<u8> {
    let mut all = Vec::new();
    for args in [
        &["history", "--no-trunc", image][..],
        &["image", "inspect", image][..],
    ] {
        let out = docker_cli(args);
        assert!(out.status.success(), "docker {args:?}: {out:?}");
        all.extend(out.stdout);
    }
    let created = docker_cli(&["create", "--label", "dev.envbuild.test=1", image, "true"]);
    assert!(created.status.success(), "{created:?}");
    let id = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let export = docker_cli(&["export", &id]);
    let _ = docker_cli(&["rm", "-f", &id]);
    assert!(export.status.success(), "docker export failed");
    assert!(
        export.stdout.len() > 1 << 20,
        "an export of the whole filesystem"
    );
    all.extend(export.stdout);
    all
}

pub(crate) fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn spec_text(name: &str, base: &str, pip: &str) -> String {
    format!("pip = [\"{pip}\"]\n{}", support::spec_on_base(name, base))
}

/// The proxy settings travel as the engine's predefined build args: a `RUN` step sees them
/// (the step fails unless it does) without an `ARG` line, and the image's history, config and
/// filesystem do not hold them.
fn proxy_build_args_reach_run_steps_and_stay_out_of_the_image() {
    let test = "proxy_build_args_reach_run_steps_and_stay_out_of_the_image";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::busybox_image(&d);
    let proxy = format!("http://user:pw-{}@proxy.invalid:3128", nonce());
    let env =
        |get: &dyn Fn(&str) -> Option<String>| envbuild::infra::network::proxy_build_args_from(get);
    let build_args = env(&|k| match k {
        "HTTPS_PROXY" | "https_proxy" => Some(proxy.clone()),
        "NO_PROXY" => Some("localhost".into()),
        _ => None,
    });
    assert_eq!(build_args.len(), 3);
    // The step checks the value by its sha256, so the Dockerfile itself does not name it.
    let sha = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(proxy.as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let dockerfile = format!(
        "FROM {base}\nRUN test \"$(printf %s \"$HTTPS_PROXY\" | sha256sum | cut -c1-64)\" = {sha} \
         && test \"$https_proxy\" = \"$HTTPS_PROXY\" && test \"$NO_PROXY\" = localhost \
         && echo seen > /proxy-seen\n"
    );
    let req = envbuild::infra::docker::build::BuildRequest {
        content_sha256: None,
        files: [("Dockerfile".to_string(), dockerfile.into_bytes())].into(),
        dockerfile: "Dockerfile".into(),
        target: String::new(),
        image_name: format!("envbuild-test/proxy-{}", nonce()),
        variant: "proxy".into(),
        lock_hash: support::fake_lock_hash(&nonce()),
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: Default::default(),
        rebuild: true,
        build_args,
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    let built = d.block_on(envbuild::infra::docker::build::build(
        &d.engine,
        &req,
        &mut |_| {},
    ));
    let built = built.unwrap_or_else(|f| panic!("the RUN step saw no proxy settings: {f}"));
    let tag = req.primary_tag();
    let seen = everything_visible_in(&tag);
    assert!(contains(&seen, "proxy-seen"), "the step ran");
    assert!(
        !contains(&seen, &proxy),
        "the proxy URL is visible in {tag}"
    );
    assert!(!contains(&seen, "proxy.invalid"), "{tag}");
    assert_eq!(built.tags[0], tag);
    d.remove_image(&tag);
}

/// A base with no Python at all (busybox, named as no table knows it) is refused by the
/// Dockerfile's first step with BASE_HAS_NO_PYTHON and what to do, not a shell "not found";
/// no smoke test runs.
fn a_base_without_python_is_refused_as_base_has_no_python() {
    let test = "a_base_without_python_is_refused_as_base_has_no_python";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::busybox_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let name = format!("no-python-{}", nonce());
    std::fs::write(&spec, support::spec_on_base(&name, &base)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = envbuild()
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none", "--update-lock"])
        .env("ENVBUILD_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error[BASE_HAS_NO_PYTHON]"), "{err}");
    assert!(err.contains("no python3 (or python)"), "{err}");
    assert!(
        err.contains("python3-venv"),
        "the hint says what to do: {err}"
    );
    assert!(!err.contains("BUILD_STEP_FAILED"), "{err}");
    assert!(!err.contains("SMOKE"), "no smoke test: {err}");
    d.assert_no_smoke_container("after a base without Python");
}

/// Debian 12 as it comes (python3, python3-venv, pip; externally managed; no `python`) with
/// a base-provided torch builds a spec whose pip extra comes from PyPI, through this
/// machine's TLS-inspecting network: without the host's CA bundle pip fails with
/// CERTIFICATE_VERIFY_FAILED; with it (SSL_CERT_FILE) and proxy variables set, the image
/// passes the CPU smoke test, and neither its history, its config nor its filesystem holds
/// the bundle or the proxy values. The dev image's JupyterLab comes from PyPI the same way
/// (its throwaway `dev-install` stage trusts the bundle), and the dev image keeps no trace
/// either.
fn pep668_debian_without_python_command_builds_from_pypi_with_the_host_ca_and_keeps_no_trace() {
    let test =
        "pep668_debian_without_python_command_builds_from_pypi_with_the_host_ca_and_keeps_no_trace";
    let Some(d) = support::engine(test) else {
        return;
    };
    if !Path::new(HOST_CA).is_file() {
        support::skip_or_fail(test, &format!("no CA bundle at {HOST_CA}"));
        return;
    }
    let base = support::pep668_fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let name = format!("pep668-{}", nonce());
    let text = spec_text(&name, &base, "six==1.17.0").replace(
        "variants = [\"runtime\"]",
        "variants = [\"runtime\", \"dev\"]",
    );
    assert!(text.contains("\"dev\""), "{text}");
    std::fs::write(&spec, text).unwrap();
    // The bundle envbuild sends: the host's plus a line of its own, so any copy is found.
    let marker = format!("envbuild-ca-marker-{}", nonce());
    let ca = dir.path().join("host-ca.pem");
    let mut bundle = std::fs::read(HOST_CA).unwrap();
    bundle.extend(format!("# {marker}\n").as_bytes());
    std::fs::write(&ca, &bundle).unwrap();
    // HTTP_PROXY is not used for https:// (PyPI), so the build can still reach PyPI directly.
    let proxy = format!("http://envbuild-proxy-{}.invalid:3128", nonce());
    let no_proxy = format!("envbuild-no-proxy-{}.invalid", nonce());
    let cache = tempfile::tempdir().unwrap();
    let image = |ca: Option<&Path>| {
        let mut cmd = envbuild();
        cmd.arg("image")
            .arg(&spec)
            .args([
                "--gpus",
                "none",
                "--update-lock",
                "--json",
                "--variant",
                "all",
            ])
            .env("ENVBUILD_CACHE_DIR", cache.path())
            .env("HTTP_PROXY", &proxy)
            .env("NO_PROXY", &no_proxy);
        if let Some(ca) = ca {
            cmd.env("SSL_CERT_FILE", ca);
        }
        cmd.output().unwrap()
    };

    let out = image(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("BUILD_STEP_FAILED"), "{err}");
    assert!(err.contains("CERTIFICATE_VERIFY_FAILED"), "{err}");
    assert!(!err.contains("externally-managed"), "{err}");

    let out = image(Some(&ca));
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(
        err.contains("trusts the CA bundle of SSL_CERT_FILE"),
        "{err}"
    );
    assert!(err.contains("HTTP_PROXY, NO_PROXY"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("--json");
    assert_eq!(doc["verdict"], "pass", "{stdout}");
    let tag = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
    let dev = doc["builds"][1]["tags"][0].as_str().unwrap().to_string();
    assert!(dev.contains(":dev-"), "{stdout}");

    // The extra came from PyPI into the venv; the base's torch is still the one imported.
    let out = docker_cli(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--label",
        "dev.envbuild.test=1",
        &tag,
        "python3",
        "-c",
        "import six, torch, sys; print(sys.prefix, six.__file__, torch.__file__)",
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.starts_with("/opt/venv /opt/venv/lib/python3.11/site-packages/six.py")
            && said.contains("/usr/lib/python3/dist-packages/torch/"),
        "{said}"
    );

    // JupyterLab came from PyPI into the environment of the dev image.
    let out = docker_cli(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--label",
        "dev.envbuild.test=1",
        "--entrypoint",
        "python3",
        &dev,
        "-c",
        "import jupyterlab, six; print(jupyterlab.__file__)",
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.starts_with("/opt/venv/lib/python3.11/site-packages/jupyterlab/"),
        "{said}"
    );

    for image in [&tag, &dev] {
        let seen = everything_visible_in(image);
        for secret in [marker.as_str(), proxy.as_str(), no_proxy.as_str()] {
            assert!(!contains(&seen, secret), "`{secret}` is visible in {image}");
        }
        // The check can see: the image's own labels are found the same way.
        assert!(contains(&seen, "dev.envbuild.lock-sha256"));
    }
    d.remove_image(&dev);
    d.remove_image(&tag);
    d.assert_no_smoke_container("after the PEP 668 base");
}

/// `image` as `docker save` writes it, with its config's architecture set to `arch` and its tag
/// to `name`: the same layers, recorded for another CPU (what `docker pull --platform` of an
/// arm64 image would leave on an amd64 engine).
fn saved_for_another_architecture(image: &str, name: &str, arch: &str) -> Vec<u8> {
    let saved = docker_cli(&["save", image]);
    assert!(saved.status.success(), "docker save {image}: {saved:?}");
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut archive = tar::Archive::new(saved.stdout.as_slice());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = e.path().unwrap().to_string_lossy().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
        entries.push((path, bytes));
    }
    let get = |p: &str| entries.iter().find(|(n, _)| n == p).map(|(_, b)| b.clone());
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&get("manifest.json").unwrap()).unwrap();
    let config_name = manifest[0]["Config"].as_str().unwrap().to_string();
    let mut config: serde_json::Value =
        serde_json::from_slice(&get(&config_name).unwrap()).unwrap();
    config["architecture"] = arch.into();
    let config_bytes = serde_json::to_vec(&config).unwrap();
    let digest = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(&config_bytes);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    manifest[0]["Config"] = format!("{digest}.json").into();
    manifest[0]["RepoTags"] = serde_json::json!([name]);
    let mut out = tar::Builder::new(Vec::new());
    let mut add = |path: &str, bytes: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        out.append_data(&mut h, path, bytes).unwrap();
    };
    for (path, bytes) in &entries {
        if path != "manifest.json" && path != "repositories" && *path != config_name {
            add(path, bytes);
        }
    }
    add(&format!("{digest}.json"), &config_bytes);
    add("manifest.json", &serde_json::to_vec(&manifest).unwrap());
    out.into_inner().unwrap()
}

/// Issue 21: with BuildKit, a base the engine has only for another CPU architecture makes
/// BuildKit look for the engine's own in a registry. When that fails, `BASE_IMAGE_MISSING`
/// names the base and both platforms (it once read "base image `the base image`").
fn a_base_there_only_for_another_architecture_is_named_by_buildkit_s_failure() {
    let test = "a_base_there_only_for_another_architecture_is_named_by_buildkit_s_failure";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::busybox_image(&d);
    let arm = format!("envbuild-test/arm64-only-{}:1", nonce());
    let tar = saved_for_another_architecture(&base, &arm, "arm64");
    let mut load = std::process::Command::new("docker")
        .arg("load")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the docker CLI");
    std::io::Write::write_all(load.stdin.as_mut().unwrap(), &tar).unwrap();
    drop(load.stdin.take());
    assert!(load.wait().unwrap().success(), "docker load of {arm}");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let name = format!("arm64-only-{}", nonce());
    std::fs::write(&spec, support::spec_on_base(&name, &arm)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = envbuild()
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none", "--update-lock"])
        .env("ENVBUILD_CACHE_DIR", cache.path())
        .env("ENVBUILD_BUILDER", "buildkit")
        .output()
        .unwrap();
    d.remove_image(&arm);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error[BASE_IMAGE_MISSING]"), "{err}");
    assert!(
        err.contains(&format!("`{arm}`")) && err.contains("only for linux/arm64"),
        "{err}"
    );
    assert!(!err.contains("the base image`"), "{err}");
    d.assert_no_smoke_container("after a base for another architecture");
}
