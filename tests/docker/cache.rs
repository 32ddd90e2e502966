//! The registry build cache on an empty engine: `image --push` sends the image with BuildKit's
//! inline cache as `REPO:runtime-cache`, and a build on an engine that has never seen the spec
//! (only the base) answers the pip install layers from it: with BuildKit they are the image's
//! own layers (no throwaway `install` stage, so no `install-cache` to push).
//!
//! "An engine that has never seen the spec" is a dockerd of the test's own, started on a
//! temporary data root, socket and bridge, and thrown away with everything it built. The
//! shared engine's build cache cannot be made to forget only this test's records: its records
//! carry no label or run id (`docker system df -v` shows random ids, a parent and a
//! description such as `mount / from exec ... pip install ...`, the same for every test), and
//! pruning by description or age would also drop other runs' records. A daemon of its own is
//! also what a fresh CI runner is.

use crate::docker::{envbuild, nonce};
use crate::engine_support as support;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tests in this file, for the harness (tests/docker/main.rs).
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![the_install_layers_reach_an_empty_engine_through_the_registry_cache,]
}

/// A dockerd of this test's own: its data root, exec root and socket in a temporary folder,
/// its containers on a bridge of its own with no route out (nothing here needs one: the
/// registry is reached by the daemon on 127.0.0.1, the wheels come with the build context).
/// Stopped, its bridge deleted and its folder removed when dropped.
struct FreshEngine {
    child: Child,
    bridge: String,
    /// `unix://...`, for `DOCKER_HOST`.
    host: String,
    dir: Option<tempfile::TempDir>,
}

impl FreshEngine {
    /// Start one on the storage driver of the shared engine (the one known to work on this
    /// machine); skip (fail in CI) when this is not root or dockerd or `ip` is missing.
    fn start(test: &str, n: u32) -> Option<FreshEngine> {
        // The effective uid, as the CI scripts read it.
        let uid = Command::new("id").arg("-u").output().ok();
        let root = uid.is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        for (tool, package) in [("dockerd", "docker.io"), ("ip", "iproute2")] {
            if !support::tool_found(tool) {
                support::skip_or_fail(test, &support::missing_tool(tool, package));
                return None;
            }
        }
        if !root {
            support::skip_or_fail(
                test,
                "starting a dockerd of the test's own needs root (run the Docker tests as root)",
            );
            return None;
        }
        let info = Command::new("docker")
            .args(["info", "--format", "{{.Driver}}"])
            .output()
            .expect("the docker CLI");
        let driver = String::from_utf8_lossy(&info.stdout).trim().to_string();
        assert!(
            !driver.is_empty(),
            "the shared engine named no storage driver"
        );
        let dir = tempfile::Builder::new()
            .prefix("ebd")
            .tempdir_in("/tmp")
            .unwrap();
        let pid = std::process::id();
        let bridge = format!("ebt{}x{n}", pid % 100_000);
        let subnet = format!("10.213.{}.1/24", (pid % 120) * 2 + n % 2);
        for args in [
            vec!["link", "add", &bridge, "type", "bridge"],
            vec!["addr", "add", &subnet, "dev", &bridge],
            vec!["link", "set", &bridge, "up"],
        ] {
            let st = Command::new("ip").args(&args).status().expect("ip");
            assert!(st.success(), "ip {args:?} failed");
        }
        let config = dir.path().join("daemon.json");
        // An empty configuration: the machine's own daemon.json names the shared data root.
        std::fs::write(&config, "{}\n").unwrap();
        let sock = dir.path().join("docker.sock");
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .arg("--config-file")
            .arg(&config)
            .arg("--data-root")
            .arg(dir.path().join("data"))
            .arg("--exec-root")
            .arg(dir.path().join("exec"))
            .arg("--pidfile")
            .arg(dir.path().join("docker.pid"))
            .arg("--host")
            .arg(format!("unix://{}", sock.display()))
            .args(["--bridge", &bridge, "--iptables=false", "--ip-masq=false"])
            .args(["--storage-driver", &driver])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start dockerd");
        let fresh = FreshEngine {
            child,
            bridge,
            host: format!("unix://{}", sock.display()),
            dir: Some(dir),
        };
        let started = Instant::now();
        while !fresh.docker(&["info"]).status.success() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the test's dockerd did not answer: {}",
                fresh.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        Some(fresh)
    }

    fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("--host")
            .arg(&self.host)
            .args(args)
            .output()
            .expect("the docker CLI")
    }

    fn log(&self) -> String {
        let dir = self.dir.as_ref().map(|d| d.path().join("dockerd.log"));
        dir.and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Copy `image` from the shared engine (`docker save | docker load`).
    fn load(&self, image: &str) {
        let tar = self.dir.as_ref().unwrap().path().join("image.tar");
        let tar_s = tar.to_string_lossy().into_owned();
        let saved = Command::new("docker")
            .args(["save", "-o", &tar_s, image])
            .output()
            .expect("docker save");
        assert!(saved.status.success(), "docker save {image}: {saved:?}");
        let loaded = self.docker(&["load", "-i", &tar_s]);
        assert!(loaded.status.success(), "docker load: {loaded:?}");
        std::fs::remove_file(&tar).unwrap();
    }
}

impl Drop for FreshEngine {
    fn drop(&mut self) {
        // SIGTERM: dockerd then stops its containerd and unmounts its layers.
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        if let Some(dir) = self.dir.take() {
            // A mount left behind (a killed daemon) would make the removal fail.
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
            let root = dir.path().to_string_lossy().into_owned();
            for m in mounts.lines().filter_map(|l| l.split(' ').nth(1)) {
                if m.starts_with(&root) {
                    let _ = Command::new("umount").args(["-l", m]).status();
                }
            }
            let _ = dir.close();
        }
    }
}

/// A project whose pip extra (a 48 MiB wheel) comes from a find-links folder of its own, on the
/// stand-in torch base; `gpus` varies the lock without touching what the install stage reads.
fn project(dir: &Path, name: &str, base: &str, gpus: &str) -> PathBuf {
    let spec = dir.join("envbuild.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"{name}\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"\n\
             torchvision = false\ntorchaudio = false\npip = [\"envbuild_cachewheel==1.0\"]\n\
             pip-index-url = \"http://127.0.0.1:9/simple\"\npip-find-links = [\"wheels\"]\n\n\
             [target]\ndriver = \"550.54.15\"\ngpus = [{gpus}]\n\n[image]\nbase = \"{base}\"\n\
             base-provides = [\"torch\"]\nvariants = [\"runtime\"]\n"
        ),
    )
    .unwrap();
    spec
}

/// `envbuild image SPEC --push REPO` against the engine at `host`: exit code, JSON, stderr and
/// the wall time.
fn image_on(
    host: &str,
    spec: &Path,
    repo: &str,
    cache: &Path,
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, String, Duration) {
    let started = Instant::now();
    let out = envbuild()
        .arg("image")
        .arg(spec)
        .args(["--gpus", "none", "--json", "--verbose", "--update-lock"])
        .args(["--push", repo])
        .args(extra)
        .env("DOCKER_HOST", host)
        .env("ENVBUILD_CACHE_DIR", cache)
        .env("CI", "true")
        .env_remove("ENVBUILD_BUILDER")
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}\n{err}"));
    (out.status.code(), doc, err, took)
}

/// Whether the progress says `variant`'s step running `needle` was answered from a cache: its
/// step line, then, before the next step's line, `cached` for it. `None`: no such step.
pub(crate) fn step_cached(progress: &str, variant: &str, needle: &str) -> Option<bool> {
    let head = format!("[{variant}] step ");
    let lines: Vec<&str> = progress.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&head) && l.contains(needle))?;
    let (prefix, _) = lines[at].split_once(": ")?;
    let cached = format!("{prefix}: cached");
    let next_step = |l: &&&str| l.starts_with(&head) && !l.ends_with(": cached");
    let until = lines[at + 1..]
        .iter()
        .position(|l| next_step(&l))
        .map_or(lines.len(), |i| at + 1 + i);
    Some(lines[at + 1..until].iter().any(|l| *l == cached))
}

/// Build and push on one empty engine (cold), throw that engine away, then build the spec with
/// another target GPU (a new lock, the same install inputs) on a second empty engine that has
/// only the base: the pip install is answered from `REPO:runtime-cache` (its step `cached`, no
/// pip output), the image passes, and the figures are printed for docs/image.md.
fn the_install_layers_reach_an_empty_engine_through_the_registry_cache() {
    let test = "the_install_layers_reach_an_empty_engine_through_the_registry_cache";
    let Some(d) = support::engine(test) else {
        return;
    };
    if std::env::var("ENVBUILD_BUILDER").is_ok_and(|b| b.trim() == "legacy") {
        return support::skip_because(test, "the legacy builder reads no registry cache");
    }
    let Some(r) = crate::push::registry(test) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    crate::buildkit::big_wheel(dir.path(), "envbuild_cachewheel", 48 << 20);
    let n = nonce();
    let repo = format!("{}/envbuild-test/install-cache-{n}", r.addr);
    let runtime_cache = format!("{repo}:runtime-cache");
    // The install step of requirements.txt or of a closure's layer file.
    let pip_step = "-r /tmp/envbuild/requirements";

    let Some(first) = FreshEngine::start(test, 0) else {
        return;
    };
    first.load(&base);
    let spec = project(dir.path(), &format!("cache-{n}"), &base, "\"A100\"");
    let cache = dir.path().join("verdicts");
    let (code, doc, err, cold) = image_on(&first.host, &spec, &repo, &cache, &[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    let cold_build = doc["builds"][0]["build_s"].as_f64().unwrap_or_default();
    assert_eq!(step_cached(&err, "runtime", pip_step), Some(false), "{err}");
    assert!(
        err.contains("Successfully installed envbuild-cachewheel"),
        "{err}"
    );
    // The environment is made in the image's own stage: no install stage to push apart.
    assert!(!err.contains("pushed the install stage"), "{err}");
    assert!(doc["install_cache"].is_null(), "{doc}");
    let lock1 = std::fs::read_to_string(dir.path().join("envbuild.lock")).unwrap();
    let remote = d
        .block_on(envbuild::infra::docker::registry::remote_digest(
            &d.engine,
            &runtime_cache,
            None,
        ))
        .unwrap();
    assert!(remote.is_some(), "{runtime_cache} is not in the registry");
    drop(first);

    // A new machine: an engine with the base and nothing else, and another target GPU.
    let Some(second) = FreshEngine::start(test, 1) else {
        return;
    };
    second.load(&base);
    let spec = project(dir.path(), &format!("cache-{n}"), &base, "\"H100\"");
    let (code, doc, err, cached) = image_on(&second.host, &spec, &repo, &cache, &[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    let lock2 = std::fs::read_to_string(dir.path().join("envbuild.lock")).unwrap();
    assert_ne!(lock1, lock2, "the GPU change must change the lock");
    let import = format!("importing cache manifest from {runtime_cache}");
    assert!(err.contains(&import), "no `{import}` in:\n{err}");
    assert_eq!(
        step_cached(&err, "runtime", pip_step),
        Some(true),
        "the pip install ran again on the empty engine:\n{err}"
    );
    assert!(
        !err.contains("Successfully installed envbuild-cachewheel"),
        "{err}"
    );
    assert_eq!(doc["verdict"], "pass", "{doc}");
    let cached_build = doc["builds"][0]["build_s"].as_f64().unwrap_or_default();
    eprintln!(
        "figures: on an empty engine, cold: {:.1} s (build {cold_build:.1} s); after a lock \
         change, on another empty engine with the registry cache: {:.1} s (build \
         {cached_build:.1} s)",
        cold.as_secs_f64(),
        cached.as_secs_f64()
    );
}
