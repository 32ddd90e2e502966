//! Test support for the Docker tests: reaching the engine (skip with a reason outside CI, fail
//! in CI; the docker target's harness shows a skip as ignored), and making base images reproducibly from Debian's packages on this machine, cached on
//! the engine under a tag derived from the recipe, so a run pays for each once.
//!
//! - `envbuild-test/busybox:<hash>`: a static busybox `FROM scratch`-style rootfs (2 MB).
//! - `envbuild-test/busybox-py-<kind>:<hash>`: busybox plus a stand-in `python3` shell script
//!   (hangs, prints a canned report, ...): the report contract without a real Python.
//! - `envbuild-test/debian-python:<hash>`: `mmdebstrap --variant=minbase --include=python3`.
//!
//! Images are imported with the engine's `docker import` call (`Docker::import_rootfs`), made
//! here because only tests need it; so are the other engine calls only tests make (listing
//! every container, the registered runtimes, removing an image).
#![allow(dead_code)]

use envbuild::core::hash::hex;
use envbuild::infra::docker::{self, images, Engine};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Docker tests run one at a time: they share the engine's containers (the leftover assertions
/// filter by label) and this machine has few cores.
static DOCKER_LOCK: Mutex<()> = Mutex::new(());

/// The run-id prefix of every smoke container this test process makes: in-process runs use
/// [`run_id`], and the binary gets it through `ENVBUILD_RUN_ID`.
pub fn run_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| format!("test{}", &docker::new_run_id()[..8]))
}

/// A run id for an in-process smoke run, under [`run_prefix`].
pub fn run_id() -> String {
    format!("{}-{}", run_prefix(), docker::new_run_id())
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Why a Docker test did not run: the unwind payload of a skip, which the docker target's
/// harness (tests/docker/main.rs) reports as "ignored" with this reason.
#[derive(Debug)]
pub struct Skip(pub String);

/// Skip (outside CI, saying why) or fail (in CI): for what CI must have (an engine, a tool).
/// Either way the test stops here.
pub fn skip_or_fail(test: &str, why: &str) {
    skip_or_fail_in(in_ci(), test, why);
}

/// [`skip_or_fail`] with CI given (the harness checks both ways in one process).
pub fn skip_or_fail_in(ci: bool, test: &str, why: &str) {
    if ci {
        panic!("{test}: {why} (CI=true: Docker tests must not skip)");
    }
    std::panic::panic_any(Skip(why.to_string()));
}

/// Skip for a reason that is not a missing engine or tool (so also in CI), saying why.
pub fn skip_because(test: &str, why: &str) {
    let _ = test;
    std::panic::panic_any(Skip(why.to_string()));
}

/// Whether `tool` can be started (`tool --version`).
pub fn tool_found(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// What to do about a missing tool: the Debian package to install.
pub fn missing_tool(tool: &str, package: &str) -> String {
    format!(
        "`{tool}` is not installed: install {package} (apt-get install {package}; \
         .ci/docker-up.sh does it)"
    )
}

/// Skip or fail, saying which Debian package to install, unless `tool` can be started.
pub fn need_tool(tool: &str, package: &str) {
    if !tool_found(tool) {
        skip_or_fail(tool, &missing_tool(tool, package));
    }
}

/// A test's hold on the engine: the serialising lock, a runtime and a connection (envbuild's,
/// and a bollard client of the test's own for the calls envbuild does not make).
pub struct Docker {
    _guard: MutexGuard<'static, ()>,
    pub rt: tokio::runtime::Runtime,
    pub engine: Engine,
    client: bollard::Docker,
}

impl Docker {
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Every container on the engine (running or not): (id, command, labels).
    fn containers(&self) -> Vec<(String, String, std::collections::HashMap<String, String>)> {
        let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .build();
        let list = self
            .block_on(self.client.list_containers(Some(opts)))
            .expect("list containers");
        list.into_iter()
            .filter_map(|c| {
                Some((
                    c.id?,
                    c.command.unwrap_or_default(),
                    c.labels.unwrap_or_default(),
                ))
            })
            .collect()
    }

    /// Ids of containers whose command contains `needle` (a test's nonce in a `RUN` step): the
    /// engine may be shared, so a test counts only the build containers it made itself.
    pub fn containers_running(&self, needle: &str) -> Vec<String> {
        self.containers()
            .into_iter()
            .filter(|(_, cmd, _)| cmd.contains(needle))
            .map(|(id, _, _)| id)
            .collect()
    }

    /// The OCI runtimes the engine has registered (`runc`, `nvidia`, ...), sorted.
    pub fn runtimes(&self) -> Vec<String> {
        let info = self.block_on(self.client.info()).expect("engine info");
        let mut names: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
        names.sort();
        names
    }

    /// Give `image` the extra name `repo:tag` (`docker tag`).
    pub fn tag_image(&self, image: &str, repo: &str, tag: &str) {
        let opts = bollard::query_parameters::TagImageOptionsBuilder::default()
            .repo(repo)
            .tag(tag)
            .build();
        self.block_on(self.client.tag_image(image, Some(opts)))
            .unwrap_or_else(|e| panic!("cannot tag `{image}` as `{repo}:{tag}`: {e}"));
    }

    /// Remove an image (forced), with the other tags of its repository on it (`envbuild image`
    /// tags a build twice: by content and by lock); a missing image is not an error.
    pub fn remove_image(&self, image: &str) {
        let repo = match image.rsplit_once(':') {
            Some((r, t)) if !image.contains('@') && !t.contains('/') => Some(format!("{r}:")),
            _ => None,
        };
        if let (Some(repo), Ok(info)) = (repo, self.block_on(self.client.inspect_image(image))) {
            for tag in info.repo_tags.unwrap_or_default() {
                if tag.starts_with(&repo) && tag != image {
                    self.remove_one_image(&tag);
                }
            }
        }
        self.remove_one_image(image);
    }

    fn remove_one_image(&self, image: &str) {
        let opts = bollard::query_parameters::RemoveImageOptionsBuilder::default()
            .force(true)
            .build();
        match self.block_on(self.client.remove_image(image, Some(opts), None)) {
            Ok(_) => {}
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => panic!("cannot remove image `{image}`: {e}"),
        }
    }

    /// Import a root filesystem tar as `repo:tag` (`docker import`), with Dockerfile-style
    /// `changes` such as `CMD ["sh"]`. Returns the image id.
    pub fn import_rootfs(
        &self,
        rootfs_tar: Vec<u8>,
        repo: &str,
        tag: &str,
        changes: &[&str],
    ) -> String {
        let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
            .from_src("-")
            .repo(repo)
            .tag(tag)
            .changes(changes.iter().map(|c| c.to_string()).collect())
            .build();
        let mut last_err = None;
        self.block_on(async {
            let mut stream = self.client.create_image(
                Some(opts),
                Some(bollard::body_full(rootfs_tar.into())),
                None,
            );
            while let Some(item) = stream.next().await {
                match item {
                    Ok(info) => {
                        if let Some(msg) = info.error_detail.and_then(|d| d.message) {
                            last_err = Some(msg);
                        }
                    }
                    // bollard 0.21.1 may end a good import with a spurious stream error:
                    // inspect decides.
                    Err(e) => {
                        last_err = Some(e.to_string());
                        break;
                    }
                }
            }
        });
        let name = format!("{repo}:{tag}");
        match self.block_on(images::inspect(&self.engine, &name)) {
            Ok(Some(info)) => info.id,
            other => panic!("importing `{name}` failed: {other:?} {last_err:?}"),
        }
    }

    /// Ids of this test process's smoke containers: labelled `dev.envbuild.smoke=1` with a run
    /// id that starts with [`run_prefix`]. Other runs on a shared engine are not counted.
    pub fn smoke_containers(&self) -> Vec<String> {
        self.containers()
            .into_iter()
            .filter(|(_, _, labels)| {
                labels.get("dev.envbuild.smoke").map(String::as_str) == Some("1")
                    && labels
                        .get(docker::labels::RUN_ID)
                        .is_some_and(|r| r.starts_with(run_prefix()))
            })
            .map(|(id, _, _)| id)
            .collect()
    }

    /// Create (never start) a container of `image` labelled as a smoke container of run
    /// `run_id`: what another envbuild run on the same engine has while it runs, or a crashed
    /// one left. Returns its id.
    pub fn create_smoke_container(&self, image: &str, run_id: &str) -> String {
        let mut labels = std::collections::HashMap::new();
        labels.insert("dev.envbuild.smoke".to_string(), "1".to_string());
        labels.insert(docker::labels::RUN_ID.to_string(), run_id.to_string());
        let body = bollard::models::ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(vec!["true".into()]),
            labels: Some(labels),
            network_disabled: Some(true),
            ..Default::default()
        };
        self.block_on(self.client.create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            body,
        ))
        .expect("create a container")
        .id
    }

    /// Force-remove a container this test made.
    pub fn remove_container(&self, id: &str) {
        let opts = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
            .force(true)
            .build();
        self.block_on(self.client.remove_container(id, Some(opts)))
            .unwrap_or_else(|e| panic!("cannot remove container {id}: {e}"));
    }

    /// Force-remove this test process's smoke containers (after a run that was told not to).
    pub fn remove_smoke_containers(&self) {
        for id in self.smoke_containers() {
            let opts = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                .force(true)
                .build();
            let _ = self.block_on(self.client.remove_container(&id, Some(opts)));
        }
    }

    /// Run `cmd` in a new container from `image` with no network, wait for it, remove it:
    /// (exit status, stdout). Labelled with this run's id, like the smoke containers.
    pub fn run_output(&self, image: &str, cmd: &[&str]) -> (i64, String) {
        use bollard::models::{ContainerCreateBody, HostConfig};
        use bollard::query_parameters as q;
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
            labels: Some(
                [(docker::labels::RUN_ID.to_string(), run_id())]
                    .into_iter()
                    .collect(),
            ),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.block_on(async {
            let id = self
                .client
                .create_container(None::<q::CreateContainerOptions>, body)
                .await
                .expect("create a container")
                .id;
            self.client
                .start_container(&id, None::<q::StartContainerOptions>)
                .await
                .expect("start the container");
            let code = match self
                .client
                .wait_container(&id, None::<q::WaitContainerOptions>)
                .next()
                .await
            {
                Some(Ok(r)) => r.status_code,
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
                other => panic!("waiting for the container: {other:?}"),
            };
            let opts = q::LogsOptionsBuilder::default().stdout(true).build();
            let mut out = Vec::new();
            let mut logs = self.client.logs(&id, Some(opts));
            while let Some(Ok(item)) = logs.next().await {
                if let bollard::container::LogOutput::StdOut { message } = item {
                    out.extend_from_slice(&message);
                }
            }
            let rm = q::RemoveContainerOptionsBuilder::default()
                .force(true)
                .build();
            let _ = self.client.remove_container(&id, Some(rm)).await;
            (code, String::from_utf8_lossy(&out).into_owned())
        })
    }

    pub fn assert_no_smoke_container(&self, context: &str) {
        let left = self.smoke_containers();
        assert!(
            left.is_empty(),
            "{context}: smoke containers left behind: {left:?}"
        );
    }
}

/// Connect, or skip/fail with the reason.
pub fn engine(test: &str) -> Option<Docker> {
    let guard = DOCKER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(docker::connect()) {
        Ok(engine) => {
            // The same engine as envbuild's: DOCKER_HOST when set, else the local socket.
            let client = match std::env::var("DOCKER_HOST") {
                Ok(h) if !h.is_empty() => bollard::Docker::connect_with_defaults(),
                _ => bollard::Docker::connect_with_host("unix:///var/run/docker.sock"),
            }
            .expect("a bollard client for the engine envbuild reached");
            let d = Docker {
                _guard: guard,
                rt,
                engine,
                client,
            };
            // A crashed earlier run must not make this one fail its leftover assertions.
            d.assert_no_smoke_container("before the test");
            Some(d)
        }
        Err(f) => {
            skip_or_fail(test, &format!("no Docker engine reachable: {f}"));
            None
        }
    }
}

fn sha12(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
        h.update([0u8]);
    }
    hex(&h.finalize())[..12].to_string()
}

/// Where downloaded packages and rootfs tars are kept between runs.
pub fn cache_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("envbuild-test-images");
    std::fs::create_dir_all(&dir).expect("cache dir");
    dir
}

/// A statically linked busybox: Debian's `busybox-static`, installed or downloaded.
fn static_busybox() -> Vec<u8> {
    let installed = Path::new("/bin/busybox");
    if let Ok(bytes) = std::fs::read(installed) {
        // Only a static busybox runs in an image with no libc.
        if is_static_elf64(&bytes) {
            return bytes;
        }
    }
    let dir = cache_dir().join("busybox-static");
    let bin = dir.join("bin/busybox");
    if !bin.exists() {
        std::fs::create_dir_all(&dir).expect("dir");
        let ok = Command::new("apt-get")
            .args(["download", "busybox-static"])
            .current_dir(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip_or_fail(
                "busybox",
                &format!(
                    "no static busybox at /bin/busybox and `apt-get download` failed: {}",
                    missing_tool("busybox", "busybox-static")
                ),
            );
        }
        let deb = std::fs::read_dir(&dir)
            .expect("read dir")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .expect("downloaded .deb");
        let ok = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "dpkg-deb -x failed");
    }
    std::fs::read(bin).expect("busybox binary")
}

/// An ELF64 little-endian executable without a `PT_INTERP` program header (no dynamic loader).
fn is_static_elf64(b: &[u8]) -> bool {
    let u16_at = |o: usize| {
        b.get(o..o + 2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
    };
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .map(|s| u64::from_le_bytes(s.try_into().unwrap()) as usize)
    };
    if b.get(..6) != Some(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    const PT_INTERP: u32 = 3;
    (0..phnum).all(|i| u32_at(phoff + i * phentsize).is_some_and(|t| t != PT_INTERP))
}

/// A rootfs tar: busybox with its applets as symlinks, plus `extra` files (path → (mode, bytes)).
fn busybox_rootfs(busybox: &[u8], extra: &BTreeMap<&str, (u32, Vec<u8>)>) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let dir = |b: &mut tar::Builder<Vec<u8>>, p: &str| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, p, std::io::empty()).unwrap();
    };
    let file = |b: &mut tar::Builder<Vec<u8>>, p: &str, mode: u32, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        b.append_data(&mut h, p, data).unwrap();
    };
    for d in [
        "bin/", "usr/", "usr/bin/", "tmp/", "etc/", "dev/", "proc/", "sys/",
    ] {
        dir(&mut b, d);
    }
    file(&mut b, "bin/busybox", 0o755, busybox);
    for applet in [
        "sh", "sleep", "cat", "echo", "true", "false", "ls", "mkdir", "rm", "env", "printf",
        "test", "kill",
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        h.set_mtime(0);
        b.append_link(&mut h, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    file(
        &mut b,
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\n",
    );
    for (path, (mode, data)) in extra {
        file(&mut b, path, *mode, data);
    }
    b.into_inner().unwrap()
}

const BUSYBOX_RECIPE: &[u8] = b"busybox rootfs v1: applet symlinks, /etc/passwd, PATH, CMD sh";

/// Dockerfile-style changes every imported test image gets (part of every image tag).
const IMPORT_CHANGES: &[&str] = &[
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CMD [\"/bin/sh\"]",
];

fn import_if_missing(d: &Docker, repo: &str, tag: &str, make: impl FnOnce() -> Vec<u8>) -> String {
    import_with_changes(d, repo, tag, &[], make)
}

/// Like [`import_if_missing`], with Dockerfile-style `changes` after [`IMPORT_CHANGES`] (part of
/// the tag too).
fn import_with_changes(
    d: &Docker,
    repo: &str,
    tag: &str,
    changes: &[&str],
    make: impl FnOnce() -> Vec<u8>,
) -> String {
    let all: Vec<&str> = IMPORT_CHANGES.iter().chain(changes).copied().collect();
    let tag = sha12(&[tag.as_bytes(), all.join("\n").as_bytes()]);
    let name = format!("{repo}:{tag}");
    if d.block_on(images::inspect(&d.engine, &name))
        .expect("inspect")
        .is_none()
    {
        let tar = make();
        d.import_rootfs(tar, repo, &tag, &all);
    }
    name
}

/// The busybox base image (cached on the engine).
pub fn busybox_image(d: &Docker) -> String {
    let bb = static_busybox();
    let tag = sha12(&[BUSYBOX_RECIPE, &bb]);
    import_if_missing(d, "envbuild-test/busybox", &tag, || {
        busybox_rootfs(&bb, &BTreeMap::new())
    })
}

/// Busybox plus `/usr/bin/python3` = `script` (a shell script standing in for Python).
pub fn busybox_with_python_stand_in(d: &Docker, kind: &str, script: &str) -> String {
    let bb = static_busybox();
    let tag = sha12(&[BUSYBOX_RECIPE, &bb, script.as_bytes()]);
    let mut extra = BTreeMap::new();
    extra.insert("usr/bin/python3", (0o755, script.as_bytes().to_vec()));
    import_if_missing(d, &format!("envbuild-test/busybox-py-{kind}"), &tag, || {
        busybox_rootfs(&bb, &extra)
    })
}

/// Busybox plus `/usr/bin/python3` = `script`, the `files` given (path → contents) and the
/// Dockerfile-style `changes` (`ENTRYPOINT [...]`).
pub fn busybox_stand_in_with(
    d: &Docker,
    kind: &str,
    script: &str,
    files: &[(&str, &str)],
    changes: &[&str],
) -> String {
    let bb = static_busybox();
    let mut parts: Vec<&[u8]> = vec![BUSYBOX_RECIPE, &bb, script.as_bytes()];
    for (p, c) in files {
        parts.push(p.as_bytes());
        parts.push(c.as_bytes());
    }
    let tag = sha12(&parts);
    let mut extra = BTreeMap::new();
    extra.insert("usr/bin/python3", (0o755, script.as_bytes().to_vec()));
    for (p, c) in files {
        extra.insert(*p, (0o644, c.as_bytes().to_vec()));
    }
    import_with_changes(
        d,
        &format!("envbuild-test/busybox-py-{kind}"),
        &tag,
        changes,
        || busybox_rootfs(&bb, &extra),
    )
}

/// A stand-in `python3` that never finishes (for time limits and Ctrl-C).
pub fn hanging_image(d: &Docker) -> String {
    busybox_with_python_stand_in(d, "hang", "#!/bin/sh\necho started >&2\nexec sleep 600\n")
}

/// A canned report in the smoke contract's format.
pub fn canned_report(status: &str, checks: &[(&str, &str, &str)]) -> String {
    let checks: Vec<serde_json::Value> = checks
        .iter()
        .map(|(name, st, code)| {
            serde_json::json!({"name": name, "status": st, "code": code,
                "detail": format!("{code} (canned stand-in report)"), "required": true})
        })
        .collect();
    serde_json::json!({"schema": 1, "status": status, "mode": "cpu", "duration_s": 0.01,
        "environment": {"python": "stand-in"}, "checks": checks})
    .to_string()
}

/// A stand-in `python3` that prints `report` and exits with `code`.
pub fn reporting_image(d: &Docker, kind: &str, report: &str, code: i32) -> String {
    let script = format!("#!/bin/sh\ncat <<'EOF'\n{report}\nEOF\nexit {code}\n");
    busybox_with_python_stand_in(d, kind, &script)
}

/// Packages of the Debian test base: Python with pip and `python` (the rendered Dockerfile runs
/// `python -m pip`), and `useradd` (it adds an unprivileged user).
const DEBIAN_PACKAGES: &str = "python3,python3-pip,python-is-python3,passwd";
/// A base image is a Python environment of its own: pip may install into it (no PEP 668 marker).
const DEBIAN_HOOK: &str = "rm -f \"$1\"/usr/lib/python3*/EXTERNALLY-MANAGED";
const DEBIAN_RECIPE: &str =
    "mmdebstrap v2 --variant=minbase bookworm (machine apt sources), SOURCE_DATE_EPOCH=0";

/// A minimal Debian with python3 and pip, made with mmdebstrap from the machine's apt sources.
pub fn debian_python_image(d: &Docker) -> String {
    debian_image(d, "envbuild-test/debian-python", DEBIAN_HOOK)
}

/// The same Debian, trusting this machine's CA bundle: the network here inspects TLS, so a build
/// that downloads from PyPI needs it (pip is pointed at it through /etc/pip.conf).
pub fn debian_python_image_with_host_ca(d: &Docker) -> String {
    const CA: &str = "/etc/ssl/certs/ca-certificates.crt";
    let bundle = std::fs::read(CA).expect("the machine's CA bundle");
    let hook = format!(
        "{DEBIAN_HOOK}; mkdir -p \"$1\"/etc/ssl/certs; cp {CA} \"$1\"{CA}; \
         printf '[global]\\ncert = {CA}\\n' > \"$1\"/etc/pip.conf; : {}",
        sha12(&[&bundle])
    );
    debian_image(d, "envbuild-test/debian-python-ca", &hook)
}

/// Debian 12 as it comes: python3 with python3-venv and pip, externally managed (PEP 668: the
/// `EXTERNALLY-MANAGED` marker stays), no `python` command; `useradd` for the image's user.
pub fn debian_externally_managed_image(d: &Docker) -> String {
    debian_image_with(
        d,
        "envbuild-test/debian-pep668",
        "python3,python3-venv,python3-pip,passwd",
        ": keep EXTERNALLY-MANAGED",
    )
}

fn debian_image(d: &Docker, repo: &str, hook: &str) -> String {
    debian_image_with(d, repo, DEBIAN_PACKAGES, hook)
}

fn debian_image_with(d: &Docker, repo: &str, packages: &str, hook: &str) -> String {
    let tag = sha12(&[
        DEBIAN_RECIPE.as_bytes(),
        packages.as_bytes(),
        hook.as_bytes(),
    ]);
    let stem = repo.rsplit('/').next().unwrap_or(repo);
    import_if_missing(d, repo, &tag, || {
        let out = cache_dir().join(format!("{stem}-{tag}.tar"));
        if !out.is_file() {
            // mmdebstrap picks its output format from the name: keep `.tar` last, and say it.
            need_tool("mmdebstrap", "mmdebstrap");
            let tmp = cache_dir().join(format!("{stem}-{tag}.partial.tar"));
            let _ = std::fs::remove_file(&tmp);
            let status = Command::new("mmdebstrap")
                .args([
                    "--quiet",
                    "--format=tar",
                    "--variant=minbase",
                    &format!("--include={packages}"),
                    &format!("--customize-hook={hook}"),
                    "bookworm",
                ])
                .arg(&tmp)
                .env("SOURCE_DATE_EPOCH", "0")
                .status();
            match status {
                Ok(s) if s.success() => std::fs::rename(&tmp, &out).expect("rename"),
                other => panic!(
                    "mmdebstrap failed ({other:?}); install it (`apt-get install -y mmdebstrap`, \
                     done by .ci/docker-up.sh)"
                ),
            }
        }
        std::fs::read(&out).expect("read rootfs tar")
    })
}

/// The stand-in CPU-only `torch` package: TEST FIXTURE, not PyTorch. It answers the questions
/// the smoke test asks the way a CPU-only wheel does.
pub fn cpu_torch_files() -> BTreeMap<String, Vec<u8>> {
    let init = r#"# TEST FIXTURE: a stand-in for a CPU-only PyTorch build (envbuild's Docker tests).
__version__ = "2.5.1+cpu"

class version:
    cuda = None
    hip = None
    git_version = "stand-in"

class cuda:
    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def get_arch_list():
        return []

    @staticmethod
    def is_initialized():
        return False

class backends:
    class cudnn:
        @staticmethod
        def version():
            return None

        @staticmethod
        def is_available():
            return False
"#;
    let mut f = BTreeMap::new();
    f.insert("torch/__init__.py".to_string(), init.as_bytes().to_vec());
    f
}

/// A fake 64-hex lock hash derived from a label, for rendered-file fixtures.
pub fn fake_lock_hash(seed: &str) -> String {
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    hex(&h.finalize())
}

/// Whether the embedded smoke script is the real one; the placeholder cannot report.
pub fn real_smoke_script(test: &str) -> bool {
    if envbuild::core::smoke::SCRIPT.starts_with("# placeholder") {
        skip_or_fail(
            test,
            "the embedded smoke script is still the placeholder (templates/smoke/envbuild_smoke.py)",
        );
        return false;
    }
    true
}

/// The stand-in for a CUDA 12.4 build of torch 2.5.1: TEST FIXTURE, not PyTorch. It answers the
/// questions the smoke test asks without a device (versions, CUDA build, architectures, cuDNN,
/// NCCL) the way the real wheel does, so a GPU-less smoke test (`--gpus none`) passes.
pub fn fake_cuda_torch_files() -> BTreeMap<String, Vec<u8>> {
    let files: &[(&str, &str)] = &[
        (
            "torch/__init__.py",
            "# TEST FIXTURE: a stand-in for a CUDA 12.4 build of PyTorch 2.5.1 (envbuild tests).\n\
             __version__ = \"2.5.1+cu124\"\nfrom . import version, cuda, backends  # noqa\n",
        ),
        ("torch/version.py", "cuda = \"12.4\"\nhip = None\n"),
        (
            "torch/cuda/__init__.py",
            "from . import nccl  # noqa\n\n\ndef is_available():\n    return False\n\n\n\
             def device_count():\n    return 0\n\n\ndef get_arch_list():\n    return [\"sm_50\", \
             \"sm_60\", \"sm_70\", \"sm_75\", \"sm_80\", \"sm_86\", \"sm_90\"]\n",
        ),
        (
            "torch/cuda/nccl.py",
            "def version():\n    return (2, 21, 5)\n",
        ),
        (
            "torch/backends/__init__.py",
            "from . import cudnn  # noqa\n",
        ),
        (
            "torch/backends/cudnn.py",
            "def version():\n    return 90100\n\n\ndef is_available():\n    return True\n",
        ),
    ];
    files
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// The Debian test base plus the fake CUDA torch in dist-packages (built once through
/// envbuild's own engine layer, tagged by content).
pub fn fake_cuda_torch_image(d: &Docker) -> String {
    let base = debian_python_image(d);
    fake_cuda_torch_on(d, &base, "envbuild-test/debian-fake-cuda-torch")
}

/// The externally managed Debian 12 (no `python` command) plus the fake CUDA torch in the
/// system's dist-packages, where a base image's own torch would be.
pub fn pep668_fake_cuda_torch_image(d: &Docker) -> String {
    let base = debian_externally_managed_image(d);
    fake_cuda_torch_on(d, &base, "envbuild-test/debian-pep668-fake-cuda-torch")
}

fn fake_cuda_torch_on(d: &Docker, base: &str, name: &str) -> String {
    let mut files = fake_cuda_torch_files();
    files.insert(
        "Dockerfile".into(),
        format!("FROM {base}\nCOPY torch/ /usr/lib/python3/dist-packages/torch/\n").into_bytes(),
    );
    let mut h = Sha256::new();
    for (k, v) in &files {
        h.update(k.as_bytes());
        h.update([0u8]);
        h.update(v);
        h.update([0u8]);
    }
    let req = docker::build::BuildRequest {
        content_sha256: None,
        files,
        dockerfile: "Dockerfile".into(),
        target: String::new(),
        image_name: name.into(),
        variant: "base".into(),
        lock_hash: hex(&h.finalize()),
        summary: "{}".into(),
        extra_tags: vec![],
        extra_labels: BTreeMap::new(),
        rebuild: false,
        build_args: BTreeMap::new(),
        cache: Default::default(),
        platform: None,
        tag_suffix: String::new(),
    };
    build_once(d, &req).unwrap_or_else(|f| panic!("building the fake-torch base: {f}"))
}

/// Build a test base through envbuild's engine layer, once per engine: `build` itself reuses no
/// image (only `envbuild image` does, by the ids it recorded building), so a base already at
/// its content-addressed tag is taken as it is here: these names belong to the tests.
pub fn build_once(
    d: &Docker,
    req: &docker::build::BuildRequest,
) -> Result<String, envbuild::core::diag::Failure> {
    let tag = req.primary_tag();
    if d.block_on(images::inspect(&d.engine, &tag))?.is_none() {
        d.block_on(docker::build::build(&d.engine, req, &mut |_| {}))?;
    }
    Ok(tag)
}

/// A spec on `base`, declared to provide torch (2.5.1, CUDA 12.4), no companions, runtime only.
pub fn spec_on_base(name: &str, base: &str) -> String {
    format!(
        "name = \"{name}\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"\n\
         torchvision = false\ntorchaudio = false\n\n[target]\ndriver = \"550.54.15\"\n\
         gpus = [\"A100\"]\n\n[image]\nbase = \"{base}\"\nbase-provides = [\"torch\"]\n\
         variants = [\"runtime\"]\n"
    )
}

/// Whether this machine runs arm64 binaries: `qemu-aarch64` registered with binfmt_misc
/// (`.ci/qemu-up.sh` installs qemu-user-static and registers it).
pub fn arm64_emulation(test: &str) -> bool {
    let reg = Path::new("/proc/sys/fs/binfmt_misc/qemu-aarch64");
    let enabled = std::fs::read_to_string(reg).is_ok_and(|t| t.starts_with("enabled"));
    if !enabled {
        skip_or_fail(
            test,
            "arm64 binaries do not run here: qemu-aarch64 is not registered with binfmt_misc \
             (run `bash .ci/qemu-up.sh` as root: it installs qemu-user-static and registers it)",
        );
    }
    enabled
}

/// Whether the registered arm64 emulator runs real torch: qemu-user 8.2 or newer, which
/// emulates `/proc/cpuinfo` (an older one hands torch this machine's x86 one, and `import
/// torch` crashes: `EMULATOR_CRASHED`). A skip (a failure in CI) naming the fix otherwise.
pub fn arm64_emulation_runs_torch(test: &str) -> bool {
    let reg = std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64").unwrap_or_default();
    let interp = reg
        .lines()
        .find_map(|l| l.strip_prefix("interpreter "))
        .unwrap_or_default()
        .to_string();
    // The registered name (`aarch64-binfmt-P`) makes qemu read its arguments as the kernel
    // passes them: ask the binary it links to.
    let binary = std::fs::canonicalize(&interp).unwrap_or_else(|_| interp.clone().into());
    let out = Command::new(&binary).arg("--version").output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .and_then(|v| {
            let mut p = v.split('.').map(|n| n.parse::<u32>().ok());
            Some((p.next()??, p.next()??))
        });
    let runs = version.is_some_and(|v| v >= (8, 2));
    if !runs {
        skip_or_fail(
            test,
            &format!(
                "the arm64 emulator `{interp}` ({}) is older than qemu 8.2 and crashes `import \
                 torch`: run `bash .ci/qemu-up.sh --torch` as root",
                text.lines().next().unwrap_or("no version")
            ),
        );
    }
    runs
}

/// The arm64 Debian packages of [`arm64_python_image`]: Python with venv and pip (ensurepip),
/// a shell, `useradd`, the CA certificates, and the C++ runtime that every real torch wheel
/// links (`libstdc++.so.6`: without it `import torch` fails; the x86_64 `minbase` has it
/// through apt).
const ARM64_PACKAGES: &str = "dash,bash,coreutils,grep,sed,findutils,base-files,base-passwd,\
     passwd,login,python3,python3-venv,ca-certificates,libstdc++6";
/// What `--variant=extract` leaves to the maintainer scripts it does not run: the account
/// files (base-passwd's), the mount points, a world-writable /tmp; and Debian's PEP 668 marker
/// goes, as for the x86_64 test base.
const ARM64_HOOK: &str = "cp \"$1\"/usr/share/base-passwd/passwd.master \"$1\"/etc/passwd; \
     cp \"$1\"/usr/share/base-passwd/group.master \"$1\"/etc/group; \
     mkdir -p \"$1\"/tmp \"$1\"/proc \"$1\"/sys \"$1\"/dev; chmod 1777 \"$1\"/tmp; \
     rm -f \"$1\"/usr/lib/python3*/EXTERNALLY-MANAGED";
const ARM64_RECIPE: &str = "mmdebstrap v1 --variant=extract --arch=arm64 bookworm (machine apt \
     sources), SOURCE_DATE_EPOCH=0; docker-archive, architecture arm64";

/// A Debian 12 arm64 base with Python, made here without emulation: `mmdebstrap
/// --variant=extract --arch=arm64` only unpacks the packages (no maintainer script runs, so
/// nothing is emulated: seconds, where a `minbase` arm64 bootstrap runs every package's scripts
/// under qemu), then `docker load` of a docker-archive whose config says `"architecture":
/// "arm64"` (`docker import` would record the engine's amd64). Both tars are cached under
/// [`cache_dir`]; the image is tagged by its recipe.
pub fn arm64_python_image(d: &Docker) -> String {
    let tag = sha12(&[
        ARM64_RECIPE.as_bytes(),
        ARM64_PACKAGES.as_bytes(),
        ARM64_HOOK.as_bytes(),
    ]);
    let name = format!("envbuild-test/debian-arm64-python:{tag}");
    if d.block_on(images::inspect(&d.engine, &name))
        .expect("inspect")
        .is_some()
    {
        return name;
    }
    let archive = cache_dir().join(format!("debian-arm64-python-{tag}.docker.tar"));
    if !archive.is_file() {
        let rootfs = cache_dir().join(format!("debian-arm64-python-{tag}.rootfs.tar"));
        if !rootfs.is_file() {
            need_tool("mmdebstrap", "mmdebstrap");
            let tmp = cache_dir().join(format!("debian-arm64-python-{tag}.partial.tar"));
            let _ = std::fs::remove_file(&tmp);
            let status = Command::new("mmdebstrap")
                .args([
                    "--quiet",
                    "--variant=extract",
                    "--arch=arm64",
                    "--format=tar",
                    &format!("--include={ARM64_PACKAGES}"),
                    &format!("--customize-hook={ARM64_HOOK}"),
                    "bookworm",
                ])
                .arg(&tmp)
                .env("SOURCE_DATE_EPOCH", "0")
                .status();
            match status {
                Ok(s) if s.success() => std::fs::rename(&tmp, &rootfs).expect("rename"),
                other => panic!(
                    "mmdebstrap --arch=arm64 failed ({other:?}); install it (`apt-get install -y \
                     mmdebstrap`, done by .ci/qemu-up.sh)"
                ),
            }
        }
        let layer = std::fs::read(&rootfs).expect("read the arm64 rootfs");
        let tar = docker_archive(&layer, "arm64", &name);
        std::fs::write(&archive, tar).expect("write the arm64 docker archive");
    }
    let out = Command::new("docker")
        .arg("load")
        .arg("--input")
        .arg(&archive)
        .output()
        .expect("the docker CLI");
    assert!(out.status.success(), "docker load of {name}: {out:?}");
    name
}

/// A `docker save`-format archive of one image: `layer` (a rootfs tar) as its only layer, its
/// config saying `architecture`, tagged `name`. `docker load` keeps the architecture.
pub fn docker_archive(layer: &[u8], architecture: &str, name: &str) -> Vec<u8> {
    let diff_id = hex(&Sha256::digest(layer));
    let config = serde_json::json!({
        "architecture": architecture,
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["/bin/sh"],
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": ARM64_RECIPE}],
    });
    let config_bytes = serde_json::to_vec(&config).expect("config json");
    let config_name = format!("{}.json", hex(&Sha256::digest(&config_bytes)));
    let layer_name = format!("{diff_id}/layer.tar");
    let manifest = serde_json::json!([{
        "Config": config_name,
        "RepoTags": [name],
        "Layers": [layer_name],
    }]);
    let mut out = tar::Builder::new(Vec::new());
    let mut add = |path: &str, bytes: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        out.append_data(&mut h, path, bytes).expect("tar entry");
    };
    add(&layer_name, layer);
    add(&config_name, &config_bytes);
    add(
        "manifest.json",
        &serde_json::to_vec(&manifest).expect("manifest json"),
    );
    out.into_inner().expect("tar")
}
