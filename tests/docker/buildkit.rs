//! BuildKit through the Engine API: a BuildKit build that passes the CPU smoke test, local wheels
//! bind-mounted into the install step instead of copied into a layer (sizes against the legacy
//! builder), a rebuild after a changed pip extra answered from the pip cache mount, and the
//! install step's script installing the wheels the engine downloaded with uv.

use crate::docker::{envbuild, nonce};
use crate::engine_support as support;
use envbuild::infra::docker;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        buildkit_binds_local_wheels_which_legacy_copies_into_a_layer,
        the_engine_s_wheels_are_installed_by_uv_and_checked_against_the_lock,
        #[ignore = "downloads from PyPI; run with `cargo test --test docker buildkit_rebuild -- --ignored`"]
        buildkit_rebuild_after_a_changed_pip_extra_reuses_the_pip_cache_mount,
    ]
}

/// `envbuild image SPEC --gpus none --json --update-lock` (plus `extra`), with `env`: the exit
/// code, the JSON document, stderr and the wall time.
fn image(
    spec: &Path,
    cache: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, serde_json::Value, String, Duration) {
    let started = Instant::now();
    let out = envbuild()
        .arg("image")
        .arg(spec)
        .args(["--gpus", "none", "--json", "--update-lock"])
        .args(extra)
        .env("ENVBUILD_CACHE_DIR", cache)
        .env("CI", "true")
        .env_remove(docker::build::builder::BUILDER_ENV)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}\n{err}"));
    (out.status.code(), doc, err, started.elapsed())
}

fn image_size(d: &support::Docker, image: &str) -> i64 {
    let client = bollard::Docker::connect_with_defaults().expect("the engine");
    d.block_on(client.inspect_image(image))
        .unwrap_or_else(|e| panic!("inspect {image}: {e}"))
        .size
        .unwrap_or_default()
}

/// A pure-Python wheel whose one module carries `payload` bytes of incompressible data.
pub(crate) fn big_wheel(dir: &Path, name: &str, payload: usize) -> std::path::PathBuf {
    let src = dir.join(format!("src-{name}"));
    let info = src.join(format!("{name}-1.0.dist-info"));
    std::fs::create_dir_all(src.join(name)).unwrap();
    std::fs::create_dir_all(&info).unwrap();
    // xorshift noise: deflate cannot shrink it, so the wheel is as large as its payload.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: Vec<u8> = (0..payload)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(src.join(name).join("blob.bin"), noise).unwrap();
    std::fs::write(src.join(name).join("__init__.py"), "").unwrap();
    std::fs::write(
        info.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"),
    )
    .unwrap();
    std::fs::write(
        info.join("WHEEL"),
        "Wheel-Version: 1.0\nGenerator: envbuild-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    )
    .unwrap();
    std::fs::write(info.join("RECORD"), "").unwrap();
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let whl = wheels.join(format!("{name}-1.0-py3-none-any.whl"));
    let zipped = std::process::Command::new("python3")
        .current_dir(&src)
        .args(["-m", "zipfile", "-c"])
        .arg(&whl)
        .arg(name)
        .arg(format!("{name}-1.0.dist-info"))
        .status()
        .expect("python3 makes the test wheel");
    assert!(zipped.success());
    whl
}

/// The same spec and a 24 MiB wheel, built once with BuildKit (the default here) and once with
/// `ENVBUILD_BUILDER=legacy`: both pass the CPU smoke test and say their builder; the BuildKit
/// image grows by the installed copy only, the legacy one also by the COPY'd wheel.
fn buildkit_binds_local_wheels_which_legacy_copies_into_a_layer() {
    let test = "buildkit_binds_local_wheels_which_legacy_copies_into_a_layer";
    let Some(d) = support::engine(test) else {
        return;
    };
    if !support::real_smoke_script(test) {
        return;
    }
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let payload = 24 << 20;
    let whl = big_wheel(dir.path(), "envbuild_big", payload);
    let wheel = std::fs::metadata(&whl).unwrap().len() as i64;
    assert!(wheel >= payload as i64, "the wheel is not compressed away");
    let spec = dir.path().join("envbuild.toml");
    let cache = tempfile::tempdir().unwrap();
    let base_size = image_size(&d, &base);
    let mut grown = BTreeMap::new();
    for (builder, says) in [
        ("buildkit", "builder: BuildKit (`Dockerfile.buildkit`)"),
        ("legacy", "builder: legacy builder: ENVBUILD_BUILDER=legacy"),
    ] {
        let text = support::spec_on_base(&format!("wheels-{builder}-{}", nonce()), &base);
        std::fs::write(&spec, format!("{text}wheels = \"wheels\"\n")).unwrap();
        let env: &[(&str, &str)] = if builder == "legacy" {
            &[(docker::build::builder::BUILDER_ENV, "legacy")]
        } else {
            &[]
        };
        let (code, doc, err, _) = image(&spec, cache.path(), &[], env);
        assert_eq!(code, Some(0), "{builder}: {doc}\n{err}");
        assert!(err.contains(says), "{builder}: {err}");
        let tag = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
        grown.insert(builder, image_size(&d, &tag) - base_size);
        d.remove_image(&tag);
    }
    // Installed once (BuildKit), against installed plus the COPY'd wheel (legacy); small
    // layers (the user, the smoke files) come on top of both.
    let slack = 4 << 20;
    assert!(
        grown["buildkit"] < wheel + slack,
        "BuildKit image grew {} bytes for a {wheel}-byte wheel",
        grown["buildkit"]
    );
    assert!(
        grown["legacy"] > 2 * wheel - slack,
        "legacy image grew only {} bytes: the fixture no longer shows the COPY layer",
        grown["legacy"]
    );
    eprintln!(
        "wheel {wheel} B; image growth: BuildKit {} B, legacy {} B",
        grown["buildkit"], grown["legacy"]
    );
}

/// The fake CUDA torch on the Debian base that trusts this machine's CA bundle (PyPI downloads
/// go through a TLS-inspecting proxy here).
fn fake_torch_with_host_ca(d: &support::Docker) -> String {
    let base = support::debian_python_image_with_host_ca(d);
    let mut files = support::fake_cuda_torch_files();
    files.insert(
        "Dockerfile".into(),
        format!("FROM {base}\nCOPY torch/ /usr/lib/python3/dist-packages/torch/\n").into_bytes(),
    );
    let req = docker::build::BuildRequest {
        content_sha256: None,
        files,
        dockerfile: "Dockerfile".into(),
        target: String::new(),
        image_name: "envbuild-test/debian-ca-fake-cuda-torch".into(),
        variant: "base".into(),
        lock_hash: support::fake_lock_hash(&format!("ca-fake-torch {base}")),
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: BTreeMap::new(),
        rebuild: false,
        build_args: Default::default(),
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    support::build_once(d, &req).unwrap_or_else(|f| panic!("building the fake-torch base: {f}"))
}

/// A spec with docopt (an sdist: pip builds its wheel) and numpy as pip extras, built cold; then
/// one more extra (six): the install step reruns, and pip takes docopt's wheel from the cache
/// mount instead of building it again. (Downloads are cached the same way where the index
/// sends caching headers, as PyPI does; the TLS-inspecting proxy here strips them, so the wheel
/// cache is what this network can show.)
fn buildkit_rebuild_after_a_changed_pip_extra_reuses_the_pip_cache_mount() {
    let test = "buildkit_rebuild_after_a_changed_pip_extra_reuses_the_pip_cache_mount";
    let Some(d) = support::engine(test) else {
        return;
    };
    if !support::real_smoke_script(test) {
        return;
    }
    let base = fake_torch_with_host_ca(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    let cache = tempfile::tempdir().unwrap();
    let name = format!("pip-cache-{}", nonce());
    let mut tags = vec![];
    let mut times = vec![];
    for pins in [
        r#"["docopt==0.6.2", "numpy==2.1.3"]"#,
        r#"["docopt==0.6.2", "numpy==2.1.3", "six==1.16.0"]"#,
    ] {
        let text = support::spec_on_base(&name, &base).replacen(
            "torchaudio = false\n",
            &format!("torchaudio = false\npip = {pins}\n"),
            1,
        );
        std::fs::write(&spec, text).unwrap();
        let (code, doc, err, took) = image(&spec, cache.path(), &["-v"], &[]);
        assert_eq!(code, Some(0), "{pins}: {doc}\n{err}");
        assert!(err.contains("builder: BuildKit"), "{err}");
        tags.push(doc["builds"][0]["tags"][0].as_str().unwrap().to_string());
        times.push((took, err));
    }
    let (cold, warm) = (&times[0], &times[1]);
    assert!(cold.1.contains("Building wheel for docopt"), "{}", cold.1);
    // pip says where docopt came from: the second install finds its wheel in the cache mount.
    assert!(
        warm.1.contains("Using cached docopt-0.6.2")
            && !warm.1.contains("Building wheel for docopt"),
        "docopt built again:\n{}",
        warm.1
    );
    eprintln!(
        "cold build {:.1}s, rebuild after one more pip extra {:.1}s",
        cold.0.as_secs_f64(),
        warm.0.as_secs_f64()
    );
    for t in tags {
        d.remove_image(&t);
    }
}

/// The BuildKit install step's script (`envbuild/python-env.sh wheels`, rendered from
/// specs/pypi-torch214-closure) given the wheels the engine downloaded (`ENVBUILD_ENGINE_WHEELS`),
/// run in a container of the Debian base with no network: the pinned uv, where `fetch-uv` keeps
/// it in the pip cache mount (here this machine's own uv of the same release), installs the
/// mounted wheel (`Installed 1 package`, not pip's `Successfully installed`), and a mounted file
/// whose bytes are not the locked ones is refused. The script once looked for uv beside the
/// engine's folder, found none, and every emulated build fell back to pip's serial unpack.
fn the_engine_s_wheels_are_installed_by_uv_and_checked_against_the_lock() {
    use envbuild_test_support::closure::{add_wheels, sha256_file};
    let test = "the_engine_s_wheels_are_installed_by_uv_and_checked_against_the_lock";
    let Some(d) = support::engine(test) else {
        return;
    };
    support::need_tool("uv", "uv (.ci/uv-up.sh installs the pinned release)");
    let base = support::debian_python_image(&d);
    let work = tempfile::tempdir().unwrap();
    let spec =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/pypi-torch214-closure/envbuild.toml");
    let rendered = work.path().join("rendered");
    let out = envbuild()
        .arg("render")
        .arg(&spec)
        .arg("--out")
        .arg(&rendered)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = rendered.join("envbuild/python-env.sh");
    let text = std::fs::read_to_string(&script).unwrap();
    let uv_version = text
        .lines()
        .find_map(|l| l.strip_prefix("uv_version="))
        .expect("the script pins uv")
        .to_string();
    let uv = std::process::Command::new("uv")
        .arg("--version")
        .output()
        .unwrap();
    let host_uv = String::from_utf8_lossy(&uv.stdout).into_owned();
    assert!(
        host_uv.starts_with(&format!("uv {uv_version}")),
        "this machine's uv is `{host_uv}`, the script pins {uv_version}: run .ci/uv-up.sh"
    );
    let which = std::process::Command::new("sh")
        .args(["-c", "command -v uv"])
        .output()
        .unwrap();
    let uv_bin = std::fs::canonicalize(String::from_utf8_lossy(&which.stdout).trim()).unwrap();

    let idx = work.path().join("index");
    add_wheels(&idx, r#"[{"name": "numpy-like", "version": "1.0"}]"#);
    let wheel = idx.join("files/numpy_like-1.0-py3-none-any.whl");
    let req = work.path().join("requirements-torch.txt");
    std::fs::write(
        &req,
        format!("numpy-like==1.0 --hash=sha256:{}\n", sha256_file(&wheel)),
    )
    .unwrap();
    // The script, the requirements and the engine's folder as the Dockerfile mounts them; the
    // uv store is filled as `fetch-uv` leaves it, then the install step runs as in the build.
    let run = |engine_files: &Path| {
        let inner = format!(
            "set -e; sh /tmp/envbuild/python-env.sh venv; \
             store=/root/.cache/pip/envbuild-wheels/uv-{uv_version}-$(uname -m)/bin; \
             mkdir -p \"$store\"; cp /tmp/host-uv \"$store/uv\"; \
             ENVBUILD_ENGINE_WHEELS=/tmp/envbuild/engine-wheels sh /tmp/envbuild/python-env.sh \
             wheels /root/.cache/pip/envbuild-wheels --no-deps --require-hashes \
             -r /tmp/envbuild/requirements-torch.txt; \
             /opt/venv/bin/python -c 'import numpy_like; print(\"imported\", numpy_like.__version__)'"
        );
        let mount = |from: &Path, to: &str| format!("{}:{to}:ro", from.display());
        let out = std::process::Command::new("docker")
            .args(["run", "--rm", "--network", "none", "--label"])
            .arg(format!("{}={}", docker::labels::RUN_ID, support::run_id()))
            .args(["-v", &mount(&script, "/tmp/envbuild/python-env.sh")])
            .args(["-v", &mount(&req, "/tmp/envbuild/requirements-torch.txt")])
            .args(["-v", &mount(engine_files, "/tmp/envbuild/engine-wheels")])
            .args(["-v", &mount(&uv_bin, "/tmp/host-uv")])
            .arg(&base)
            .args(["sh", "-c", &inner])
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), all)
    };
    let engine = work.path().join("engine");
    std::fs::create_dir(&engine).unwrap();
    std::fs::copy(&wheel, engine.join(wheel.file_name().unwrap())).unwrap();
    let (code, all) = run(&engine);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        all.contains("Installed 1 package"),
        "uv did not install:\n{all}"
    );
    assert!(
        !all.contains("Successfully installed"),
        "pip installed:\n{all}"
    );
    assert!(all.contains("imported 1.0"), "{all}");

    // A valid wheel of the same name with other bytes (another Requires-Dist): the hash check
    // refuses it, nothing is installed.
    let other = work.path().join("other");
    add_wheels(
        &other,
        r#"[{"name": "numpy-like", "version": "1.0", "requires": ["einops-like"]}]"#,
    );
    let tampered = work.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    let name = wheel.file_name().unwrap();
    std::fs::copy(other.join("files").join(name), tampered.join(name)).unwrap();
    let (code, all) = run(&tampered);
    assert_ne!(code, Some(0), "{all}");
    assert!(all.to_lowercase().contains("hash mismatch"), "{all}");
    assert!(!all.contains("imported"), "{all}");
}
