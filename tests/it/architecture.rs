//! The layout the README's "Architecture" section promises, checked on the source: layers used
//! one way only, a pure core, no long functions, a module doc on every file, and a
//! `rust-version` that the locked dependencies really allow.

use crate::support::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules and the ones each may use. Arrows point down only.
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("infra", &["core"]),
    ("app", &["core", "infra"]),
    // The argument parsers share core's grammar (sizes), so the CLI and the lock agree.
    ("cli", &["core"]),
    ("commands", &["core", "infra", "app", "cli"]),
];

/// The longest function allowed outside tests.
const MAX_FN_LINES: usize = 150;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&p).expect("read source"))
        })
        .collect()
}

/// The file without its test module (test modules sit at the end, after `#[cfg(test)]`), and
/// nothing at all for a `tests.rs` file.
fn non_test_part<'a>(rel: &str, text: &'a str) -> &'a str {
    if rel.ends_with("/tests.rs") {
        return "";
    }
    match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Code with comments, string and char literals blanked out (same length, newlines kept), so
/// braces and paths are counted only where they are code.
fn strip_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) && !is_ident(b, i) {
            let hashes = b[i + 1..].iter().take_while(|&&h| h == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let start = i + 2 + hashes;
            let end = text[start..]
                .find(&close)
                .map_or(b.len(), |n| start + n + close.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only literals are blanked.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|n| i + 2 + n + 1)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                text[i + 1..]
                    .chars()
                    .next()
                    .filter(|ch| ch.len_utf8() > 1)
                    .and_then(|ch| {
                        let k = i + 1 + ch.len_utf8();
                        (b.get(k) == Some(&b'\'')).then_some(k + 1)
                    })
            };
            match end {
                Some(e) => {
                    blank(&mut out, &b[i..e]);
                    i = e;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The top-level modules a piece of code names through `crate::`.
fn used_layers(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if is_ident(code.as_bytes(), i) {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        used.insert(name);
    }
    used
}

fn layer_of(rel: &str) -> Option<&str> {
    let top = rel.split('/').next()?;
    LAYERS.iter().map(|(l, _)| *l).find(|l| *l == top)
}

#[test]
fn layers_are_used_one_way_only() {
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (rel, text) in sources() {
        let Some(layer) = layer_of(&rel) else {
            continue;
        };
        for used in used_layers(&strip_literals(&text)) {
            let is_layer = allowed.contains_key(used.as_str());
            if is_layer && used != layer && !allowed[layer].contains(&used.as_str()) {
                wrong.push(format!("src/{rel} ({layer}) uses {used}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_layer_graph_has_no_cycle() {
    // Implied by the allowed lists, but checked so that a later edit of LAYERS cannot hide one.
    let graph: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    fn visit<'a>(
        n: &'a str,
        g: &BTreeMap<&'a str, &'a [&'a str]>,
        path: &mut Vec<&'a str>,
    ) -> Option<String> {
        if path.contains(&n) {
            return Some(format!("{} -> {n}", path.join(" -> ")));
        }
        path.push(n);
        for m in g[n].iter() {
            if let Some(c) = visit(m, g, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    for n in graph.keys() {
        assert_eq!(visit(n, &graph, &mut Vec::new()), None);
    }
}

#[test]
fn the_core_performs_no_io() {
    const FORBIDDEN: &[&str] = &[
        "std::fs",
        "std::process",
        "std::env",
        "std::net",
        "tokio",
        "bollard",
        "SystemTime",
        "Instant::now",
        "tempfile",
    ];
    let mut found = Vec::new();
    for (rel, text) in sources() {
        if layer_of(&rel) != Some("core") {
            continue;
        }
        let code = strip_literals(non_test_part(&rel, &text));
        for f in FORBIDDEN {
            if code.contains(f) {
                found.push(format!("src/{rel}: {f}"));
            }
        }
    }
    assert!(found.is_empty(), "I/O in the core:\n{}", found.join("\n"));
}

/// Every function outside tests, as (file, name, first line, length in lines).
fn functions() -> Vec<(String, String, usize, usize)> {
    let mut fns = Vec::new();
    for (rel, text) in sources() {
        let code = strip_literals(non_test_part(&rel, &text));
        let lines: Vec<&str> = code.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let Some(name) = fn_name(line) else { continue };
            let Some(len) = body_lines(&lines[n..]) else {
                continue;
            };
            fns.push((rel.clone(), name, n + 1, len));
        }
    }
    fns
}

/// `fn name` at the start of a line, after visibility and qualifiers.
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    loop {
        let before = rest;
        for q in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(q).unwrap_or(rest);
        }
        if rest == before {
            break;
        }
    }
    let name: String = rest
        .strip_prefix("fn ")?
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Lines from the signature to the closing brace; `None` for a declaration without a body.
fn body_lines(lines: &[&str]) -> Option<usize> {
    let mut depth = 0usize;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate() {
        for c in line.chars() {
            match c {
                ';' if !opened && depth == 0 => return None,
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if opened && depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

#[test]
fn no_function_outside_tests_exceeds_the_limit() {
    let fns = functions();
    assert!(fns.len() > 100, "the scanner found too few functions");
    let long: Vec<String> = fns
        .iter()
        .filter(|f| f.3 > MAX_FN_LINES)
        .map(|(file, name, line, len)| format!("src/{file}:{line} {name}: {len} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_scanner_measures_what_it_should() {
    let code = strip_literals(
        "fn a() {\n    let s = \"}}}\";\n    let c = '{';\n    // }\n}\npub(crate) async fn b<'x>(v: &'x str) -> &'x str {\n    v\n}\nfn c();\n",
    );
    let lines: Vec<&str> = code.lines().collect();
    assert_eq!(fn_name(lines[0]).as_deref(), Some("a"));
    assert_eq!(body_lines(&lines[0..]), Some(5));
    assert_eq!(fn_name(lines[5]).as_deref(), Some("b"));
    assert_eq!(body_lines(&lines[5..]), Some(3));
    assert_eq!(body_lines(&lines[8..]), None);
}

#[test]
fn every_module_says_what_it_is_for() {
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| !rel.ends_with("tests.rs") && !text.starts_with("//!"))
        .map(|(rel, _)| format!("src/{rel}"))
        .collect();
    assert!(missing.is_empty(), "no `//!` module doc: {missing:?}");
}

/// A file name can hold a newline or an escape sequence: every path shown to a user (messages,
/// comments in written files) goes through the one helper, `core::diag::shown`, which escapes
/// control characters. A bare `.display()` anywhere else would print it raw.
#[test]
fn every_path_shown_goes_through_the_one_escaping_helper() {
    let raw: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, _)| rel != "core/diag.rs")
        .flat_map(|(rel, text)| {
            let code = strip_literals(non_test_part(&rel, &text));
            code.lines()
                .enumerate()
                .filter(|(_, l)| l.contains(".display()"))
                .map(|(i, _)| format!("src/{rel}:{}", i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        raw.is_empty(),
        "use core::diag::shown(path), not .display(): {raw:?}"
    );
}

/// `1.89` and `1.89.0` compare equal.
fn version_tuple(v: &str) -> Vec<u64> {
    let mut t: Vec<u64> = v.split('.').filter_map(|p| p.parse().ok()).collect();
    t.resize(3, 0);
    t
}

/// `rust-version` in Cargo.toml is at least what every locked dependency declares, and the
/// README names the same version.
#[test]
fn rust_version_is_true() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let declared = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let in_lock: BTreeSet<&str> = meta["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let mut too_new = Vec::new();
    for p in meta["packages"].as_array().expect("packages") {
        let (Some(id), Some(rv)) = (p["id"].as_str(), p["rust_version"].as_str()) else {
            continue;
        };
        if in_lock.contains(id) && version_tuple(rv) > version_tuple(declared) {
            too_new.push(format!("{} {} needs {rv}", p["name"], p["version"]));
        }
    }
    assert!(
        too_new.is_empty(),
        "rust-version = {declared} but: {too_new:?}"
    );
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    assert!(
        readme.contains(&format!("Rust ({declared} or newer)")),
        "the README must say `Rust ({declared} or newer)`"
    );
}

/// The README's module table lists exactly the files under src/ (tests.rs files aside).
#[test]
fn the_readme_lists_every_module() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let listed: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `src/"))
        .filter_map(|l| l.split_once('`'))
        .map(|(path, _)| format!("src/{path}"))
        .collect();
    let files: BTreeSet<String> = sources()
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|rel| !rel.ends_with("tests.rs"))
        .map(|rel| format!("src/{rel}"))
        .collect();
    let missing: Vec<_> = files.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&files).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README Architecture table: missing {missing:?}, not in src/ {stale:?}"
    );
}
