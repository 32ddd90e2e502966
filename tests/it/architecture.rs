//! The house's shape (the layers in ARCHITECTURE.md), checked on the source
//! by a small checker (`architecture/checker.rs`) over a tree of files: layers used one way only, a pure
//! core, no long functions, no loops between sibling modules, a module doc on every file, paths
//! shown through the one escaping helper; then a `rust-version` that the locked dependencies
//! really allow (the module index is `module_index.rs`'s). The planted-violation tests at the end feed the
//! checker one broken tree per rule, so each rule is shown to fail. Reads src/ (I/O: files).

mod checker;
mod lex;
mod scan;

use crate::support::root;
use checker::{check, functions, Violation};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

/// Top-level modules and the ones each may use. Arrows point down only.
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("infra", &["core"]),
    ("app", &["core", "infra"]),
    // The argument parsers share core's grammar (sizes), so the CLI and the lock agree.
    ("cli", &["core"]),
    ("commands", &["core", "infra", "app", "cli"]),
];

/// The longest function allowed outside test modules.
const MAX_FN_LINES: usize = 123;

/// std modules core never names: files, processes, the network, the environment, threads and
/// the OS.
const IMPURE_STD: &[&str] = &["fs", "process", "net", "env", "thread", "os"];

/// std modules core may name only these items of: writing into a buffer (`io::Write` on a
/// `Vec`), an I/O error's kind in a message (`core::diag`), and durations as values.
const PURE_STD: &[(&str, &[&str])] = &[
    ("io", &["Write", "Error", "ErrorKind"]),
    ("time", &["Duration"]),
];

/// Crates core never names: the runtime, the engine client, HTTP, the C library, dynamic
/// loading, temporary files.
const IMPURE_CRATES: &[&str] = &[
    "tokio",
    "bollard",
    "hyper",
    "hyper_util",
    "hyper_rustls",
    "reqwest",
    "rattler_repodata_gateway",
    "libc",
    "libloading",
    "tempfile",
];

/// Calls core never makes, however `thread`, `Instant` or `SystemTime` came into scope.
const IMPURE_PAIRS: &[[&str; 2]] = &[
    ["thread", "sleep"],
    ["Instant", "now"],
    ["SystemTime", "now"],
];

/// Macros that print: core returns text, the commands print it.
const PRINT_MACROS: &[&str] = &["println", "print", "eprintln", "eprint", "dbg"];

/// The process's own streams, called bare (`stdin()` after `use std::io::stdin`).
const STREAM_CALLS: &[&str] = &["stdin", "stdout", "stderr"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
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

/// Every `.rs` file under src/, by its path relative to src/.
fn source_tree() -> &'static BTreeMap<String, String> {
    static TREE: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    TREE.get_or_init(|| {
        let src = root().join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files
            .into_iter()
            .map(|p| {
                let rel = p.strip_prefix(&src).expect("under src");
                let rel = rel.to_string_lossy().replace('\\', "/");
                (rel, std::fs::read_to_string(&p).expect("read source"))
            })
            .collect()
    })
}

/// The checker's findings on src/, computed once for all the rules' tests.
fn violations() -> &'static [Violation] {
    static FOUND: OnceLock<Vec<Violation>> = OnceLock::new();
    FOUND.get_or_init(|| check(source_tree()))
}

/// The findings on src/ that `rule` selects, one per line.
fn found(rule: fn(&Violation) -> bool) -> String {
    let lines: Vec<String> = violations()
        .iter()
        .filter(|v| rule(v))
        .map(ToString::to_string)
        .collect();
    lines.join("\n")
}

#[test]
fn every_module_says_what_it_is_for() {
    let missing = found(|v| matches!(v, Violation::NoDoc { .. }));
    assert!(missing.is_empty(), "no `//!` module doc:\n{missing}");
}

#[test]
fn layers_are_used_one_way_only() {
    let wrong = found(|v| matches!(v, Violation::Layer { .. }));
    assert!(wrong.is_empty(), "layering broken:\n{wrong}");
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
    let io = found(|v| matches!(v, Violation::Impure { .. }));
    assert!(io.is_empty(), "I/O in the core:\n{io}");
}

#[test]
fn no_function_outside_test_modules_exceeds_the_limit() {
    let fns = functions(source_tree());
    assert!(fns.len() > 500, "the scanner found {} functions", fns.len());
    let long = found(|v| matches!(v, Violation::LongFn { .. }));
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{long}"
    );
}

/// A file name can hold a newline or an escape sequence: every path shown to a user (messages,
/// comments in written files) goes through the one helper, `core::diag::shown`, which escapes
/// control characters. A bare `.display()` anywhere else would print it raw.
#[test]
fn every_path_shown_goes_through_the_one_escaping_helper() {
    let raw = found(|v| matches!(v, Violation::RawDisplay { .. }));
    assert!(raw.is_empty(), "use core::diag::shown(path):\n{raw}");
}

/// No loop between sibling modules anywhere in src/ (parent and child edges aside): each module
/// can be read with only what sits below it.
#[test]
fn no_loop_between_sibling_modules() {
    let loops = found(|v| matches!(v, Violation::Loop { .. }));
    assert!(
        loops.is_empty(),
        "{loops}\n(untie it: the shared type in a module of its own, or the caller passing what \
         the callee needs)"
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

// The checker on planted violations: each rule above fails on a tree that breaks it, with the
// exact violation, and legitimate code trips none.

/// A tree of `files` (path under src/ -> code), each opened by a one-line `//!` doc, so the
/// code's first line is line 2.
fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut t: BTreeMap<String, String> = files
        .iter()
        .map(|(rel, code)| (rel.to_string(), format!("//! {rel}\n{code}")))
        .collect();
    t.entry("lib.rs".into())
        .or_insert_with(|| "//! The crate.\npub mod core;\npub mod infra;\n".into());
    t
}

fn impure(file: &str, line: usize, what: &str) -> Violation {
    Violation::Impure {
        file: file.into(),
        line,
        what: what.into(),
    }
}

fn layer(file: &str, line: usize, layer: &str, uses: &str, path: &str) -> Violation {
    Violation::Layer {
        file: file.into(),
        line,
        layer: layer.into(),
        uses: uses.into(),
        path: path.into(),
    }
}

fn long(name: &str, file: &str, line: usize, lines: usize) -> Violation {
    Violation::LongFn {
        name: name.into(),
        file: file.into(),
        line,
        lines,
    }
}

/// A function item `lines` lines long: the signature line, statements, the closing brace.
fn long_fn(signature: &str, lines: usize) -> String {
    let body: String = (0..lines - 2)
        .map(|k| format!("    let _x{k} = {k};\n"))
        .collect();
    format!("{signature} {{\n{body}}}\n")
}

#[test]
fn planted_io_in_core_fails_in_every_spelling() {
    let t = tree(&[(
        "core/a.rs",
        "use std::{fs, process};\n\
         use std::io::{self as sio, Write};\n\
         use std::env as e;\n\
         extern crate libc;\n\
         use tokio::{runtime as rt};\n\
         pub fn f() {\n\
         let _ = ::std::net::TcpStream::connect(\"x\");\n\
         let _ = (sio::stdin(), e::var(\"X\"));\n\
         bollard::Docker::connect_with_defaults();\n\
         }\n",
    )]);
    let f = "core/a.rs";
    assert_eq!(
        check(&t),
        vec![
            impure(f, 2, "std::fs"),
            impure(f, 2, "std::process"),
            impure(f, 4, "std::env"),
            impure(f, 5, "libc"),
            impure(f, 6, "tokio::runtime"),
            impure(f, 8, "std::net::TcpStream::connect"),
            impure(f, 9, "std::env::var"),
            impure(f, 9, "std::io::stdin"),
            impure(f, 10, "bollard::Docker::connect_with_defaults"),
        ]
    );
}

#[test]
fn planted_printing_stdin_sleep_and_clocks_in_core_fail() {
    let t = tree(&[(
        "core/a.rs",
        "use std::io::stdin;\n\
         use std::thread;\n\
         use std::time::Instant;\n\
         pub fn f(d: std::time::Duration) {\n\
         println!(\"hi\");\n\
         std::eprint!(\"hi\");\n\
         dbg!(d);\n\
         let _ = std::io::stdin();\n\
         let _ = stdin();\n\
         std::thread::sleep(d);\n\
         thread::sleep(d);\n\
         let _ = (Instant::now(), SystemTime::now());\n\
         }\n\
         #[cfg(test)]\n\
         mod tests {}\n\
         pub fn after_the_tests() { print!(\"x\"); }\n",
    )]);
    let f = "core/a.rs";
    assert_eq!(
        check(&t),
        vec![
            impure(f, 2, "std::io::stdin"),
            impure(f, 3, "std::thread"),
            impure(f, 4, "std::time::Instant"),
            impure(f, 6, "println!"),
            impure(f, 7, "eprint!"),
            impure(f, 8, "dbg!"),
            impure(f, 9, "std::io::stdin"),
            impure(f, 10, "stdin()"),
            impure(f, 11, "std::thread::sleep"),
            impure(f, 12, "std::thread::sleep"),
            impure(f, 13, "SystemTime::now"),
            impure(f, 13, "std::time::Instant::now"),
            impure(f, 17, "print!"),
        ]
    );
}

#[test]
fn planted_upward_uses_fail_in_every_spelling() {
    let t = tree(&[
        ("core/a.rs", "use crate::{infra};\n"),
        (
            "core/b/c.rs",
            "use super::super::super::infra::x as y;\n\
             pub fn f() { super::super::super::infra::x(); }\n",
        ),
        ("infra/a.rs", "pub use crate::app::{Thing, other::*};\n"),
        (
            "cli/a.rs",
            "pub fn f() -> crate::infra::X { crate::core::g() }\n",
        ),
    ]);
    assert_eq!(
        check(&t),
        vec![
            layer("cli/a.rs", 2, "cli", "infra", "crate::infra::X"),
            layer("core/a.rs", 2, "core", "infra", "crate::infra"),
            layer("core/b/c.rs", 2, "core", "infra", "crate::infra::x"),
            layer("core/b/c.rs", 3, "core", "infra", "crate::infra::x"),
            layer("infra/a.rs", 2, "infra", "app", "crate::app::Thing"),
            layer("infra/a.rs", 2, "infra", "app", "crate::app::other"),
        ]
    );
}

#[test]
fn planted_long_functions_fail_by_qualified_name_whatever_their_kind() {
    let code = [
        long_fn("pub(in crate::core) fn restricted()", 124),
        long_fn("pub(crate) fn exactly_the_limit()", MAX_FN_LINES),
        format!(
            "impl<T: Clone> Holder<T>\nwhere\n    T: Default,\n{{\n{}}}\n",
            long_fn("    pub const fn method<'a>(&'a self) -> u8", 124)
        ),
        format!(
            "trait Tr {{\n    fn declared(&self);\n{}}}\n",
            long_fn("    fn provided(&self)", 124)
        ),
        format!("fn outer() {{\n{}}}\n", long_fn("fn inner()", 124)),
        long_fn("async unsafe fn both() -> impl Sized", 124),
    ]
    .concat();
    let f = "core/resolve/build.rs";
    let t = tree(&[(f, &code)]);
    let m = "crate::core::resolve::build";
    assert_eq!(
        check(&t),
        vec![
            long(&format!("{m}::Holder::method"), f, 253, 124),
            long(&format!("{m}::Tr::provided"), f, 380, 124),
            long(&format!("{m}::both"), f, 631, 124),
            long(&format!("{m}::outer"), f, 505, 126),
            long(&format!("{m}::outer::inner"), f, 506, 124),
            long(&format!("{m}::restricted"), f, 2, 124),
        ]
    );
}

#[test]
fn planted_long_function_after_a_cfg_test_item_that_is_no_test_module_fails() {
    let code = [
        "#[cfg(test)]\nfn helper() {}\n".to_string(),
        format!(
            "#[cfg(test)]\nmod tests {{\n{}}}\n",
            long_fn("fn in_tests()", 200)
        ),
        long_fn("pub fn after()", 124),
    ]
    .concat();
    let t = tree(&[
        ("infra/a.rs", &code),
        ("core/tests.rs", &long_fn("fn t()", 200)),
    ]);
    let mut t = t;
    t.insert(
        "core/mod.rs".into(),
        "//! core\n#[cfg(test)]\nmod tests;\n".into(),
    );
    assert_eq!(
        check(&t),
        vec![long("crate::infra::a::after", "infra/a.rs", 207, 124)]
    );
}

#[test]
fn planted_loop_between_two_siblings_fails_with_its_edges() {
    let t = tree(&[
        ("core/mod.rs", "pub mod a;\npub mod b;\npub use b::B;\n"),
        ("core/a.rs", "use super::B;\npub struct A;\n"),
        ("core/b.rs", "pub struct B(crate::core::a::A);\n"),
    ]);
    let found = check(&t);
    assert_eq!(
        found,
        vec![Violation::Loop {
            modules: vec!["crate::core::a".into(), "crate::core::b".into()],
            edges: vec![
                "src/core/a.rs -> src/core/b.rs: B".into(),
                "src/core/b.rs -> src/core/a.rs: A".into(),
            ],
        }]
    );
    assert_eq!(
        found[0].to_string(),
        "loop between crate::core::a, crate::core::b:\n    \
         src/core/a.rs -> src/core/b.rs: B\n    src/core/b.rs -> src/core/a.rs: A"
    );
}

#[test]
fn planted_loop_of_three_and_one_between_subtrees_fail() {
    let t = tree(&[
        ("infra/x.rs", "pub fn f() { super::y::g() }\n"),
        (
            "infra/y.rs",
            "use crate::infra::z;\npub fn g() { z::h() }\n",
        ),
        ("infra/z.rs", "pub fn h() { crate::infra::x::f() }\n"),
        // Deeper down: a file of `a` uses one of `b` and back; the loop is a <-> b.
        ("core/a/p.rs", "use crate::core::b::q::Q;\npub struct P;\n"),
        ("core/b/q.rs", "pub struct Q(super::super::a::p::P);\n"),
    ]);
    let loops: Vec<(Vec<String>, Vec<String>)> = check(&t)
        .into_iter()
        .map(|v| match v {
            Violation::Loop { modules, edges } => (modules, edges),
            other => panic!("not a loop: {other}"),
        })
        .collect();
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        loops,
        vec![
            (
                strings(&["crate::core::a", "crate::core::b"]),
                strings(&[
                    "src/core/a/p.rs -> src/core/b/q.rs: Q",
                    "src/core/b/q.rs -> src/core/a/p.rs: P",
                ])
            ),
            (
                strings(&["crate::infra::x", "crate::infra::y", "crate::infra::z"]),
                strings(&[
                    "src/infra/x.rs -> src/infra/y.rs: g",
                    "src/infra/y.rs -> src/infra/z.rs: h, z",
                    "src/infra/z.rs -> src/infra/x.rs: f",
                ])
            ),
        ]
    );
}

#[test]
fn parent_child_uses_and_test_code_make_no_loop() {
    let t = tree(&[
        (
            "core/mod.rs",
            "pub mod a;\npub mod b;\npub fn top() { a::f() }\n",
        ),
        ("core/a.rs", "use super::top;\npub fn f() { top() }\n"),
        (
            "core/b.rs",
            "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use crate::core::a::f;\n}\n",
        ),
        ("core/a/c.rs", "pub fn c() { crate::core::b::g() }\n"),
    ]);
    // core and a use each other (parent and child); a/c.rs -> b is an edge a -> b, and b -> a
    // is only in a test module: no loop.
    assert_eq!(check(&t), vec![]);
}

#[test]
fn planted_file_without_a_module_doc_fails() {
    let mut t = tree(&[("core/a.rs", "pub fn f() {}\n")]);
    t.insert(
        "infra/b.rs".into(),
        "// a comment, not a module doc\n".into(),
    );
    t.insert("infra/c.rs".into(), "\n//! too late\n".into());
    assert_eq!(
        check(&t),
        vec![
            Violation::NoDoc {
                file: "infra/b.rs".into()
            },
            Violation::NoDoc {
                file: "infra/c.rs".into()
            },
        ]
    );
}

#[test]
fn planted_raw_display_fails_outside_the_escaping_helper() {
    let show = "pub fn s(p: &std::path::Path) -> String {\n    p.display().to_string()\n}\n";
    let t = tree(&[("infra/a.rs", show), ("core/diag.rs", show)]);
    assert_eq!(
        check(&t),
        vec![Violation::RawDisplay {
            file: "infra/a.rs".into(),
            line: 3
        }]
    );
}

/// What core legitimately does, and effects written where they are not code, trip nothing.
#[test]
fn legitimate_code_trips_no_rule() {
    let core = r####"use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;
/// Calls `println!("x")` and `std::fs::read` in a doc comment; `thread::sleep` too.
pub fn f(out: &mut Vec<u8>, e: &io::Error, d: Duration) {
    // println!("in a comment"); std::process::exit(1); stdin();
    /* block: tokio::spawn(); /* nested: std::env::var("X") */ println!() */
    let s = "println!(\"x\") std::fs::read stdin() thread::sleep { {";
    let r = r#"eprintln!("x") std::net::TcpStream "#;
    let braces = ('{', '}', b'{', '\'');
    let _ = (s, r, braces, e.kind() == std::io::ErrorKind::NotFound, d);
    let _ = writeln!(out, "{}", stderr_tail("x"));
}
pub fn stderr_tail<'a>(stderr: &'a str) -> &'a str {
    stderr
}
pub struct Child {
    pub stdout: String,
}
#[cfg(test)]
mod tests {
    use std::fs;
    #[test]
    fn t() {
        println!("{:?}", fs::read("x"));
        std::thread::sleep(std::time::Duration::ZERO);
    }
}
"####;
    let t = tree(&[
        ("core/mod.rs", "pub mod a;\n#[cfg(test)]\nmod tests;\n"),
        ("core/a.rs", core),
        (
            "core/tests.rs",
            "use std::process::Command;\nfn t() { dbg!(Command::new(\"x\")); }\n",
        ),
        (
            "infra/a.rs",
            "use std::fs;\npub fn f() { println!(\"{:?}\", fs::read(\"x\")); }\n",
        ),
        ("infra/b.rs", "use crate::core::a::f;\n"),
    ]);
    assert_eq!(check(&t), vec![]);
}

/// Each rule fails on a violation planted in a scratch copy of the real src/: the copy's
/// findings are the real tree's plus exactly the planted ones.
#[test]
fn violations_planted_in_a_copy_of_src_are_found() {
    let real: BTreeSet<Violation> = violations().iter().cloned().collect();
    // An upward use also closes a loop between the layers: loops are checked on their own below.
    let planted = |file: &str, edit: &dyn Fn(&str) -> String| -> Vec<Violation> {
        let mut copy = source_tree().clone();
        let text = copy.get(file).cloned().unwrap_or_default();
        copy.insert(file.to_string(), edit(&text));
        check(&copy)
            .into_iter()
            .filter(|v| !real.contains(v) && !matches!(v, Violation::Loop { .. }))
            .collect()
    };
    let appended = |code: &'static str| move |text: &str| format!("{text}{code}");
    let end = |file: &str| source_tree()[file].lines().count();
    let rules = end("core/rules.rs");
    assert_eq!(
        planted(
            "core/rules.rs",
            &appended("use std::{fs, process};\nuse crate::{infra};\n")
        ),
        vec![
            layer("core/rules.rs", rules + 2, "core", "infra", "crate::infra"),
            impure("core/rules.rs", rules + 1, "std::fs"),
            impure("core/rules.rs", rules + 1, "std::process"),
        ]
    );
    let lock = end("core/lock.rs");
    assert_eq!(
        planted(
            "core/lock.rs",
            &appended(
                "pub fn noisy() {\n    println!(\"x\");\n    let _ = std::io::stdin();\n    \
                 std::thread::sleep(std::time::Duration::ZERO);\n    \
                 super::super::infra::fs::read();\n}\n"
            )
        ),
        vec![
            layer(
                "core/lock.rs",
                lock + 5,
                "core",
                "infra",
                "crate::infra::fs::read"
            ),
            impure("core/lock.rs", lock + 2, "println!"),
            impure("core/lock.rs", lock + 3, "std::io::stdin"),
            impure("core/lock.rs", lock + 4, "std::thread::sleep"),
        ]
    );
    let render = end("core/render/mod.rs");
    let long_after_helper = format!(
        "#[cfg(test)]\nfn helper() {{}}\n{}",
        long_fn("pub(in crate::core) fn planted()", 124)
    );
    assert_eq!(
        planted("core/render/mod.rs", &|t: &str| format!(
            "{t}{long_after_helper}"
        )),
        vec![long(
            "crate::core::render::planted",
            "core/render/mod.rs",
            render + 3,
            124
        )]
    );
    let mut copy = source_tree().clone();
    copy.insert(
        "core/zz_a.rs".into(),
        "//! a\npub fn f() { super::zz_b::g() }\n".into(),
    );
    copy.insert(
        "core/zz_b.rs".into(),
        "//! b\npub fn g() { super::zz_a::f() }\n".into(),
    );
    let doc = copy.get_mut("core/rules.rs").expect("rules.rs");
    *doc = doc.replacen("//!", "//", 1);
    let new: Vec<Violation> = check(&copy)
        .into_iter()
        .filter(|v| !real.contains(v))
        .collect();
    assert_eq!(
        new,
        vec![
            Violation::NoDoc {
                file: "core/rules.rs".into()
            },
            Violation::Loop {
                modules: vec!["crate::core::zz_a".into(), "crate::core::zz_b".into()],
                edges: vec![
                    "src/core/zz_a.rs -> src/core/zz_b.rs: g".into(),
                    "src/core/zz_b.rs -> src/core/zz_a.rs: f".into(),
                ],
            },
        ]
    );
}

/// Every child process is made by `infra::proc::command` and run by `infra::proc`: from an
/// empty working folder, found on `PATH`'s absolute folders only (docs/security.md, "Child
/// processes"). A `Command::new` elsewhere outside test modules would start a program from the
/// checkout's folder, or find one planted there.
#[test]
fn every_child_process_is_made_by_the_one_constructor() {
    let mut elsewhere = Vec::new();
    for (file, text) in source_tree() {
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, line) in code.lines().enumerate() {
            let spawns = ["Command::new(", ".spawn()", ".output()", ".status()"]
                .iter()
                .any(|p| {
                    line.contains(p) && (p.starts_with("Command") || line.contains("Command"))
                });
            if spawns && !line.trim_start().starts_with("//") && file != "infra/proc.rs" {
                elsewhere.push(format!("src/{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "make child processes with infra::proc::command:\n{}",
        elsewhere.join("\n")
    );
}
