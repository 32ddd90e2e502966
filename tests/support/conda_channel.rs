//! Test support for the conda closure: conda channels of real package files that
//! `tests/fixtures/fake_channel.py` writes (`.tar.bz2` with info/index.json, info/paths.json and
//! a payload; a repodata.json per subdir computed from them), served over HTTP on 127.0.0.1 by
//! a std-only thread server that counts the requests it answers, gives every file an ETag and
//! answers a matching `If-None-Match` with 304, as conda's CDN does. Used by
//! tests/it/conda_closure.rs.

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
    log: Arc<Mutex<Vec<String>>>,
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
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, g, p, l, s, root) = (
            requests.clone(),
            gzipped.clone(),
            paths.clone(),
            log.clone(),
            stop.clone(),
            root.to_path_buf(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    let seen = Seen {
                        count: &r,
                        paths: &p,
                        log: &l,
                    };
                    serve(c, &root, &seen, gzip.then_some(&*g));
                }
            }
        });
        Server {
            url: format!("http://127.0.0.1:{port}"),
            requests,
            gzipped,
            paths,
            log,
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

    /// Every answer so far, in order: `METHOD PATH STATUS` (`GET /pytorch/noarch/repodata.json
    /// 304`); a conditional request ends with ` conditional`.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// What the server records of each request.
struct Seen<'a> {
    count: &'a AtomicUsize,
    paths: &'a Mutex<Vec<String>>,
    log: &'a Mutex<Vec<String>>,
}

/// A file's ETag: its bytes' digest, so that a changed file has another.
fn etag(body: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:016x}-{}\"", h.finish(), body.len())
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One request per connection (`Connection: close`): GET (or HEAD) a file under `root`, or 404;
/// 304 when `If-None-Match` names the file's ETag; gzip-encoded when `gzipped` counts such
/// answers and the client accepts gzip.
fn serve(mut c: TcpStream, root: &Path, seen: &Seen<'_>, gzipped: Option<&AtomicUsize>) {
    let mut line = String::new();
    let mut reader = BufReader::new(c.try_clone().unwrap());
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    // Read the headers: only Accept-Encoding and If-None-Match matter.
    let mut accepts_gzip = false;
    let mut if_none_match = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        accepts_gzip |= lower.starts_with("accept-encoding:") && lower.contains("gzip");
        if lower.starts_with("if-none-match:") {
            if_none_match = Some(h["if-none-match:".len()..].trim().to_string());
        }
    }
    seen.count.fetch_add(1, Ordering::SeqCst);
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("GET").to_string();
    let path = words.next().unwrap_or("/").to_string();
    seen.paths.lock().unwrap().push(path.clone());
    let rel = path.trim_start_matches('/');
    let file = root.join(rel);
    let body = if rel.split('/').any(|p| p == "..") {
        None
    } else {
        std::fs::read(&file).ok()
    };
    let tag = body.as_deref().map(etag);
    let status = match (&body, &tag) {
        (None, _) => 404,
        (Some(_), Some(t)) if if_none_match.as_deref() == Some(t.as_str()) => 304,
        _ => 200,
    };
    seen.log.lock().unwrap().push(format!(
        "{method} {path} {status}{}",
        if if_none_match.is_some() {
            " conditional"
        } else {
            ""
        }
    ));
    let gzip = gzipped.filter(|_| accepts_gzip);
    let _ = match (status, body) {
        (304, _) => c.write_all(
            format!(
                "HTTP/1.1 304 Not Modified\r\nETag: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                tag.unwrap_or_default()
            )
            .as_bytes(),
        ),
        (_, Some(mut b)) => {
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
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {}\r\n{encoding}Content-Type: application/json\r\nConnection: close\r\n\r\n",
                    b.len(),
                    tag.unwrap_or_default()
                )
                .as_bytes(),
            )
            .and_then(|_| if method == "HEAD" { Ok(()) } else { c.write_all(&b) })
        }
        (_, None) => {
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
