//! Test support for the conda closure: conda channels of real package files that
//! `tests/fixtures/fake_channel.py` writes (`.tar.bz2` with info/index.json, info/paths.json and
//! a payload; a repodata.json per subdir computed from them), served over HTTP on 127.0.0.1 by
//! a std-only thread server that counts the requests it answers. Used by tests/it/conda_closure.rs.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Add packages (fake_channel.py's JSON) to the channels under `dir`.
pub fn add_packages(dir: &Path, json: &str) {
    let st = std::process::Command::new("python3")
        .arg(crate::fixture("fake_channel.py"))
        .arg(dir)
        .arg(json)
        .status()
        .expect("python3");
    assert!(st.success(), "fake_channel.py failed");
}

/// An HTTP server for the files under a directory, on 127.0.0.1; stops when dropped.
pub struct Server {
    /// `http://127.0.0.1:PORT` (no trailing slash): a channel alias.
    pub url: String,
    requests: Arc<AtomicUsize>,
    gzipped: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl Server {
    pub fn start(root: &Path) -> Server {
        Server::start_with(root, false)
    }

    /// A server that gzips its answers when the client accepts it (as conda's CDN does).
    pub fn start_gzip(root: &Path) -> Server {
        Server::start_with(root, true)
    }

    fn start_with(root: &Path, gzip: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let gzipped = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, g, p, s, root) = (
            requests.clone(),
            gzipped.clone(),
            paths.clone(),
            stop.clone(),
            root.to_path_buf(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    serve(c, &root, &r, &p, gzip.then_some(&*g));
                }
            }
        });
        Server {
            url: format!("http://127.0.0.1:{port}"),
            requests,
            gzipped,
            paths,
            stop,
            port,
        }
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Answers sent gzip-encoded so far.
    pub fn gzipped(&self) -> usize {
        self.gzipped.load(Ordering::SeqCst)
    }

    /// The paths asked for so far, in order.
    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One request per connection (`Connection: close`): GET a file under `root`, or 404; gzip-
/// encoded when `gzipped` counts such answers and the client accepts gzip.
fn serve(
    mut c: TcpStream,
    root: &Path,
    count: &AtomicUsize,
    paths: &Mutex<Vec<String>>,
    gzipped: Option<&AtomicUsize>,
) {
    let mut line = String::new();
    let mut reader = BufReader::new(c.try_clone().unwrap());
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    // Read the headers: only Accept-Encoding matters.
    let mut accepts_gzip = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        let h = h.to_ascii_lowercase();
        accepts_gzip |= h.starts_with("accept-encoding:") && h.contains("gzip");
    }
    count.fetch_add(1, Ordering::SeqCst);
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    paths.lock().unwrap().push(path.clone());
    let rel = path.trim_start_matches('/');
    let file = root.join(rel);
    let body = if rel.split('/').any(|p| p == "..") {
        None
    } else {
        std::fs::read(&file).ok()
    };
    let gzip = gzipped.filter(|_| accepts_gzip);
    let _ = match body {
        Some(mut b) => {
            let mut encoding = "";
            if let Some(g) = gzip {
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(&b).unwrap();
                b = enc.finish().unwrap();
                encoding = "Content-Encoding: gzip\r\n";
                g.fetch_add(1, Ordering::SeqCst);
            }
            c.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{encoding}Content-Type: application/json\r\nConnection: close\r\n\r\n",
                    b.len()
                )
                .as_bytes(),
            )
            .and_then(|_| c.write_all(&b))
        }
        None => {
            c.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
    };
}

/// md5 of a file, hex (the test side's own digest, not envbuild's).
pub fn md5_file(p: &Path) -> String {
    let out = std::process::Command::new("md5sum")
        .arg(p)
        .output()
        .expect("md5sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}
