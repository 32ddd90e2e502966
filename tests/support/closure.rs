//! The closure tests' made-up package index (tests/fixtures/fake_index.py): wheels served as a
//! `file://` PEP 503 index (or over HTTP on 127.0.0.1: [`mirror_server`]), a spec locking its
//! closure from it, and readers of the lock it gives. Shared by tests/it/closure.rs (offline),
//! tests/docker/closure.rs and tests/docker/arm64.rs (in an image).

use crate::{envbuild, fixture};
use std::fs;
use std::path::Path;

/// The made-up index: torch needs `nvidia-x` (2.0 only for glibc >= 2.34), `numpy-like` (1.2
/// only for Python >= 3.12, by its Requires-Python) and, on Python < 3.12 only, `oldpy-shim`.
/// The host's Python (3.11 here) is not the target's, so the shim must appear, and numpy-like
/// 1.2 must not, only when the target's Python says so.
pub const WHEELS: &str = r#"[
 {"name": "torch", "version": "2.14.1",
  "requires": ["nvidia-x", "numpy-like>=1.0", "oldpy-shim; python_version < \"3.12\""]},
 {"name": "nvidia-x", "version": "1.0", "tag": "py3-none-manylinux_2_17_x86_64"},
 {"name": "nvidia-x", "version": "2.0", "tag": "py3-none-manylinux_2_34_x86_64"},
 {"name": "numpy-like", "version": "1.0"},
 {"name": "numpy-like", "version": "1.2", "requires_python": ">=3.12"},
 {"name": "oldpy-shim", "version": "1.0"},
 {"name": "einops-like", "version": "0.8.0"},
 {"name": "einops-like", "version": "0.9.0"}
]"#;

/// Add wheels to the index at `dir` (created if needed).
pub fn add_wheels(dir: &Path, json: &str) {
    let st = std::process::Command::new("python3")
        .arg(fixture("fake_index.py"))
        .arg(dir)
        .arg(json)
        .status()
        .expect("python3");
    assert!(st.success(), "fake_index.py failed");
}

/// A spec locking torch 2.14.1 (no companions) for Python `python` and glibc `glibc`, its
/// closure from the index at `index`, with `extra` lines at the top level. The base image's
/// digest is left out (no registry here; tests/docker/base_digest.rs covers it).
pub fn closure_spec(name: &str, python: &str, glibc: &str, index: &Path, extra: &str) -> String {
    format!(
        "name = \"{name}\"\npython = \"{python}\"\npytorch = \"2.14.1\"\ntorchvision = false\n\
         torchaudio = false\n{extra}\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H200\"]\n\
         glibc = \"{glibc}\"\n\n[lock]\nclosure = true\nindex-url = \"file://{}/simple\"\n\
         base-digest = false\n",
        index.display()
    )
}

pub fn sha256_file(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(fs::read(p).unwrap());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

pub fn lock_in(dir: &Path, args: &[&str]) -> std::process::Output {
    envbuild()
        .current_dir(dir)
        .arg("lock")
        .arg("envbuild.toml")
        .args(args)
        .output()
        .unwrap()
}

/// (name, version) of every `[[closure]]` entry of the lock in `dir`, in the file's order.
pub fn closure_of(dir: &Path) -> Vec<(String, String)> {
    let text = fs::read_to_string(dir.join("envbuild.lock")).unwrap();
    let lock: toml::Table = toml::from_str(&text).expect("the lock is TOML");
    let entries = lock.get("closure").and_then(|c| c.as_array());
    entries
        .into_iter()
        .flatten()
        .map(|p| {
            let field = |k: &str| p[k].as_str().expect("a closure entry's name and version");
            (field("name").to_string(), field("version").to_string())
        })
        .collect()
}

pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Python's HTTP server for the files under `root` on 127.0.0.1, writing each path it is asked
/// for to `log`; killed when dropped.
pub struct Mirror {
    child: std::process::Child,
    pub port: u16,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn mirror_server(root: &std::path::Path, log: &std::path::Path) -> Mirror {
    const SERVE: &str = "import functools, http.server, sys\n\
        root, port_file, log = sys.argv[1:4]\n\
        class H(http.server.SimpleHTTPRequestHandler):\n\
        \x20   def log_message(self, *a):\n\
        \x20       open(log, 'a').write(self.path + '\\n')\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(H, directory=root))\n\
        open(port_file, 'w').write(str(s.server_address[1]))\n\
        s.serve_forever()\n";
    let port_file = log.with_extension("port");
    let child = std::process::Command::new("python3")
        .args(["-c", SERVE])
        .arg(root)
        .arg(&port_file)
        .arg(log)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    let mut m = Mirror { child, port: 0 };
    for _ in 0..100 {
        if let Some(p) = fs::read_to_string(&port_file)
            .ok()
            .and_then(|p| p.parse().ok())
        {
            m.port = p;
            return m;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the mirror did not start");
}
