//! Issue 19 item 4 against the real engine and a real registry, under emulation: `envbuild
//! image --push` of a two-platform fleet lock (H100 servers on x86_64, GH200 on aarch64) builds
//! and smoke-tests each platform's image (`-amd64`, `-arm64`), pushes them with their verdicts
//! once both passed, then one OCI image index under the variant's tag, read back here through
//! the registry's HTTP API: its manifests' platforms and digests are what was pushed. As CI
//! builds a fleet, one platform per runner (`--platform`), the run that pushes the last one
//! writes the index, and a later run of the whole fleet builds nothing. The base
//! is a fake-torch stand-in per platform (seconds to make), put into the test's registry as one
//! multi-platform base.

use crate::engine_support as support;
use envbuild::core::image_index;
use envbuild::core::image_ref::Repository;
use envbuild::core::spec::Platform;
use envbuild::infra::docker::registry as reg;
use envbuild::infra::registry_http::RegistryApi;
use std::time::Instant;

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        a_fleet_lock_pushes_every_platform_under_one_image_index,
        a_fleet_with_a_failing_platform_pushes_nothing,
    ]
}

/// H100 (x86_64 and aarch64 servers) beside GH200 (aarch64 only): no `platform`, so the lock
/// holds both, on `base`, which provides torch.
pub(crate) fn fleet_spec(name: &str, base: &str) -> String {
    format!(
        "name = \"{name}\"\npython = \"3.11\"\npytorch = \"2.14.1\"\ntorchvision = false\n\
         torchaudio = false\n\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H100\", \"GH200\"]\n\n\
         [image]\nbase = \"{base}\"\nbase-provides = [\"torch\"]\nvariants = [\"runtime\"]\n"
    )
}

/// Push each platform's fake-torch image to `repo` and put an index of them under `tag`: one
/// base reference that gives each platform its own image.
fn multi_platform_base(
    d: &support::Docker,
    repo: &Repository,
    tag: &str,
    images: &[(Platform, String)],
) -> String {
    let api = RegistryApi::new(repo, None).unwrap();
    let mut members = Vec::new();
    for (platform, image) in images {
        let t = format!("{tag}{}", envbuild::core::platform::tag_suffix(*platform));
        d.block_on(reg::tag(&d.engine, image, &repo.name, &t))
            .unwrap();
        let digest = d
            .block_on(reg::push(&d.engine, &repo.name, &t, None, &mut |_| {}))
            .unwrap_or_else(|f| panic!("pushing the base: {f}"));
        d.remove_image(&repo.tagged(&t));
        members.push(d.block_on(api.member(&digest, *platform)).unwrap());
    }
    let bytes = image_index::index_json(&members).unwrap();
    d.block_on(api.put_index(tag, &bytes)).unwrap();
    repo.tagged(tag)
}

/// The fleet's base in `r`: a fake-torch image per platform, each answering as `probe`'s entry
/// for its platform does, under one multi-platform reference (the caller removes it).
pub(crate) fn fake_torch_fleet_base(
    d: &support::Docker,
    r: &super::push::Registry,
    n: &str,
    probe: &envbuild::core::lock::Lock,
) -> String {
    let x86 = super::arm64::fake_torch_image_on(
        d,
        &support::debian_python_image(d),
        "linux/amd64",
        super::arm64::fake_torch_like(probe),
    );
    let arm = super::arm64::fake_torch_image_on(
        d,
        &support::arm64_python_image(d),
        "linux/arm64",
        super::arm64::fake_torch_like(&probe.fleet[0]),
    );
    let base_repo = Repository::parse(&format!("{}/envbuild-test/fleet-base-{n}", r.addr)).unwrap();
    multi_platform_base(
        d,
        &base_repo,
        "1",
        &[(Platform::Linux64, x86), (Platform::LinuxAarch64, arm)],
    )
}

/// The fleet pushed as a CI matrix does, one platform per run (`--platform`): the first run
/// builds, tests and pushes the x86_64 image and writes no index (the aarch64 image is not in
/// the registry yet); the second builds the aarch64 one, finds the x86_64 one with its verdict
/// and writes the index; a third run of the whole fleet builds nothing (both images and
/// verdicts are in the registry) and writes the same index again. Each report names its
/// machine, and the index the registry holds has exactly the two pushed manifests, each with
/// its platform.
fn a_fleet_lock_pushes_every_platform_under_one_image_index() {
    let test = "a_fleet_lock_pushes_every_platform_under_one_image_index";
    let Some((d, r, n, probe)) = fleet_start(test) else {
        return;
    };
    assert_eq!(
        probe.platforms(),
        [Platform::Linux64, Platform::LinuxAarch64]
    );
    let base = fake_torch_fleet_base(&d, &r, &n, &probe);

    let repo = format!("{}/envbuild-test/fleet-{n}", r.addr);
    let name = format!("fleet-{n}");
    let mut made: Vec<String> = Vec::new();
    let mut runs = Vec::new();
    let api = RegistryApi::new(&Repository::parse(&repo).unwrap(), None).unwrap();
    // Whether the registry held an index of the variant's tag right after the first run.
    let mut index_after_first = None;
    let started = Instant::now();
    for platform in [
        &["--platform", "linux-64"][..],
        &["--platform", "linux-aarch64"],
        &[],
    ] {
        let (out, err, doc) = push_fleet(&name, &base, &repo, platform);
        if let (None, Some(content)) = (index_after_first, doc["content_sha256"].as_str()) {
            let tag = format!("runtime-{}", &content[..12]);
            index_after_first = Some(d.block_on(api.manifest(&tag)).is_ok());
        }
        for key in ["smoke", "pushed"] {
            for item in doc[key].as_array().into_iter().flatten() {
                made.push(item["image"].as_str().unwrap_or_default().to_string());
            }
        }
        runs.push((out, err, doc));
    }
    let took = started.elapsed();
    let cleanup = |made: &[String]| {
        for image in made.iter().filter(|i| !i.is_empty()) {
            d.remove_image(image);
        }
        d.remove_image(&base);
    };
    if let Some((out, err, doc)) = runs.iter().find(|(o, _, _)| o.status.code() != Some(0)) {
        cleanup(&made);
        panic!("exit {:?}\n{doc}\n{err}", out.status.code());
    }
    let [(_, err1, first), (_, _, second), (_, err3, whole)] = &runs[..] else {
        unreachable!("three runs")
    };
    let content = first["content_sha256"].as_str().unwrap();
    assert_eq!(second["content_sha256"], content, "{second}");
    let index_tag = format!("runtime-{}", &content[..12]);

    // The first run: only linux-64, pushed; no index, and why.
    assert_eq!(first["platforms"].as_array().unwrap().len(), 1, "{first}");
    assert!(first.get("index").is_none(), "{first}");
    let wait = first["index_waits"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        wait.starts_with("linux-aarch64: ") && wait.contains("-arm64 is not in the registry"),
        "{first}"
    );
    assert!(err1.contains("no image index yet: linux-aarch64"), "{err1}");
    assert_eq!(
        index_after_first,
        Some(false),
        "no index in the registry after the first platform"
    );

    // Each platform's run built, tested and pushed its own image.
    let mut pushed = Vec::new();
    for (doc, (platform, docker, arch, machine)) in [first, second].into_iter().zip([
        ("linux-64", "linux/amd64", "amd64", "x86_64"),
        ("linux-aarch64", "linux/arm64", "arm64", "aarch64"),
    ]) {
        assert_eq!(doc["verdict"], "pass", "{doc}");
        assert_eq!(doc["platforms"][0]["platform"], platform, "{doc}");
        assert_eq!(doc["platforms"][0]["docker_platform"], docker, "{doc}");
        let smoke = &doc["smoke"][0];
        assert_eq!(smoke["platform"], platform, "{smoke}");
        assert_eq!(smoke["passed"], true, "{smoke}");
        assert_eq!(smoke["report"]["environment"]["machine"], machine);
        let tag = smoke["image"].as_str().unwrap();
        assert!(tag.ends_with(&format!("-{arch}")), "{tag}");
        assert_eq!(super::arm64::image_arch(tag), arch, "{tag}");
        let p = &doc["pushed"][0];
        assert_eq!(p["platform"], platform, "{doc}");
        assert!(p["image"].as_str().unwrap().ends_with(&format!("-{arch}")));
        pushed.push(p["digest"].as_str().unwrap().to_string());
    }

    // The second run wrote the index of both.
    let index = &second["index"][0];
    assert_eq!(index["image"], format!("{repo}:{index_tag}"), "{second}");
    let (media_type, bytes) = d.block_on(api.manifest(&index_tag)).unwrap();
    assert_eq!(media_type, image_index::OCI_INDEX);
    assert_eq!(
        index["digest"].as_str().unwrap(),
        format!("sha256:{}", envbuild::core::hash::sha256_hex(&bytes))
    );
    let manifests = image_index::parse_index(&bytes).unwrap();
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    for (i, arch) in ["amd64", "arm64"].into_iter().enumerate() {
        let m = &manifests[i];
        let p = m.platform.as_ref().unwrap();
        assert_eq!((p.os.as_str(), p.architecture.as_str()), ("linux", arch));
        assert_eq!(m.digest, pushed[i], "{second}");
    }

    // The whole fleet again: nothing built, both from the registry, the same index.
    for (i, p) in whole["platforms"].as_array().unwrap().iter().enumerate() {
        assert_eq!(p["skipped"], "registry", "{whole}");
        assert_eq!(p["builds"], serde_json::json!([]), "{whole}");
        assert_eq!(p["pushed"][0]["digest"], pushed[i].as_str(), "{whole}");
    }
    assert_eq!(whole["index"][0]["digest"], index["digest"], "{whole}");
    assert!(err3.contains("build and test skipped"), "{err3}");
    eprintln!(
        "fleet (x86_64 + emulated aarch64, fake torch), one platform per run, then the whole \
         fleet from the registry: {:.1} s",
        took.as_secs_f64()
    );
    cleanup(&made);
    d.assert_no_smoke_container("after the fleet runs");
}

/// The same fleet on a base whose arm64 image has no torch: the x86_64 image passes, the
/// aarch64 one fails its smoke test, so nothing at all reaches the registry (neither
/// platform's image or verdict, nor an index), the run exits 1 and names the platform.
fn a_fleet_with_a_failing_platform_pushes_nothing() {
    let test = "a_fleet_with_a_failing_platform_pushes_nothing";
    let Some((d, r, n, probe)) = fleet_start(test) else {
        return;
    };
    let x86 = super::arm64::fake_torch_image_on(
        &d,
        &support::debian_python_image(&d),
        "linux/amd64",
        super::arm64::fake_torch_like(&probe),
    );
    // No torch in the arm64 image: its smoke test fails (`torch_import`).
    let arm = support::arm64_python_image(&d);
    let base_repo =
        Repository::parse(&format!("{}/envbuild-test/fleet-bad-base-{n}", r.addr)).unwrap();
    let base = multi_platform_base(
        &d,
        &base_repo,
        "1",
        &[(Platform::Linux64, x86), (Platform::LinuxAarch64, arm)],
    );
    let repo = format!("{}/envbuild-test/fleet-bad-{n}", r.addr);
    let (out, err, doc) = push_fleet(&format!("fleet-bad-{n}"), &base, &repo, &[]);
    let tags: Vec<String> = doc["smoke"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["image"].as_str().unwrap_or_default().to_string())
        .collect();
    for t in &tags {
        d.remove_image(t);
    }
    d.remove_image(&base);
    assert_eq!(out.status.code(), Some(1), "{doc}\n{err}");
    assert_eq!(doc["verdict"], "fail", "{doc}");
    assert_eq!(doc["smoke"][0]["passed"], true, "{doc}");
    assert_eq!(doc["smoke"][1]["passed"], false, "{doc}");
    assert_eq!(doc["smoke"][1]["platform"], "linux-aarch64", "{doc}");
    assert_eq!(
        doc["not_pushed"],
        serde_json::json!(["linux-aarch64"]),
        "{doc}"
    );
    assert!(
        doc.get("pushed").is_none() && doc.get("index").is_none(),
        "{doc}"
    );
    assert!(err.contains("not pushed: linux-aarch64 failed"), "{err}");
    assert!(
        err.contains("(linux-aarch64)` failed its smoke test"),
        "{err}"
    );
    // Not one tag of the run is in the registry: no image, verdict or index.
    let content = doc["content_sha256"].as_str().unwrap();
    let repo = Repository::parse(&repo).unwrap();
    for tag in [
        format!("runtime-{}", &content[..12]),
        format!("runtime-{}-amd64", &content[..12]),
        format!("runtime-{}-amd64.verdict", &content[..12]),
        format!("runtime-{}-arm64", &content[..12]),
    ] {
        let remote = d
            .block_on(reg::remote_digest(&d.engine, &repo.tagged(&tag), None))
            .unwrap();
        assert_eq!(remote, None, "{tag} reached the registry");
    }
    d.assert_no_smoke_container("after the failing fleet");
}

/// The engine, emulation, smoke script and a registry, each a skip with its reason when absent;
/// then a nonce and the probe lock: each platform's torch facts, from a placeholder base.
pub(crate) fn fleet_start(
    test: &str,
) -> Option<(
    support::Docker,
    super::push::Registry,
    String,
    envbuild::core::lock::Lock,
)> {
    let d = support::engine(test)?;
    if !support::arm64_emulation(test) || !support::real_smoke_script(test) {
        return None;
    }
    let r = super::push::registry(test)?;
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = super::arm64::locked(
        probe_dir.path(),
        &fleet_spec("probe", "envbuild-test/placeholder:1"),
    );
    Some((d, r, super::docker::nonce(), probe))
}

/// `envbuild image --update-lock --json --push repo` (and `args`) of the fleet spec `name` on
/// `base`, on an empty verdict cache, without a step summary: the output, its stderr and its
/// JSON document.
fn push_fleet(
    name: &str,
    base: &str,
    repo: &str,
    args: &[&str],
) -> (std::process::Output, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    std::fs::write(&spec, fleet_spec(name, base)).unwrap();
    let cache = tempfile::tempdir().unwrap();
    super::docker::ci_json(
        super::bases::envbuild()
            .arg("image")
            .arg(&spec)
            .args(["--gpus", "none", "--update-lock", "--json", "--push", repo])
            .args(args)
            .env("ENVBUILD_CACHE_DIR", cache.path()),
    )
}
