//! The architecture checker: a source tree (path relative to `src/` -> text) in, the house
//! rules' violations out. Paths are resolved the way rustc does for the cases this crate
//! writes (`crate::`, `self::`, `super::` chains, a module's own imports and child modules,
//! re-exports followed to the module that defines the item); the rules themselves are the
//! constants in `architecture.rs`.

use super::scan::{scan, Scan};
use super::{IMPURE_CRATES, IMPURE_PAIRS, IMPURE_STD, LAYERS, MAX_FN_LINES, PURE_STD};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// The file does not open with a `//!` doc.
    NoDoc { file: String },
    /// `layer` code names `path`, in the layer `uses`, which it may not use.
    Layer {
        file: String,
        line: usize,
        layer: String,
        uses: String,
        path: String,
    },
    /// Core code (outside test modules) names an effect: a path or a call.
    Impure {
        file: String,
        line: usize,
        what: String,
    },
    /// A function outside test modules is longer than the limit.
    LongFn {
        name: String,
        file: String,
        line: usize,
        lines: usize,
    },
    /// `.display()` outside `core/diag.rs`: a path shown without escaping.
    RawDisplay { file: String, line: usize },
    /// Sibling modules that use each other, with the edges: `file -> file: names`.
    Loop {
        modules: Vec<String>,
        edges: Vec<String>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::NoDoc { file } => write!(f, "src/{file}: no `//!` module doc"),
            Violation::Layer {
                file,
                line,
                layer,
                uses,
                path,
            } => write!(f, "src/{file}:{line}: {layer} uses {uses} ({path})"),
            Violation::Impure { file, line, what } => {
                write!(f, "src/{file}:{line}: core does I/O: {what}")
            }
            Violation::LongFn {
                name,
                file,
                line,
                lines,
            } => write!(f, "{name} (src/{file}:{line}): {lines} lines"),
            Violation::RawDisplay { file, line } => {
                write!(
                    f,
                    "src/{file}:{line}: .display() instead of core::diag::shown"
                )
            }
            Violation::Loop { modules, edges } => {
                write!(f, "loop between {}:", modules.join(", "))?;
                edges.iter().try_for_each(|e| write!(f, "\n    {e}"))
            }
        }
    }
}

/// Every rule's violations in `tree`, sorted.
pub fn check(tree: &BTreeMap<String, String>) -> Vec<Violation> {
    let t = Tree::new(tree);
    let mut out: BTreeSet<Violation> = BTreeSet::new();
    for (file, text) in tree {
        if !text.starts_with("//!") {
            out.insert(Violation::NoDoc { file: file.clone() });
        }
    }
    for f in &t.files {
        t.layers(f, &mut out);
        t.purity(f, &mut out);
        t.lengths(f, &mut out);
    }
    out.extend(t.loops());
    out.into_iter().collect()
}

/// Every function's qualified name and length outside test modules, for the scanner's own check.
pub fn functions(tree: &BTreeMap<String, String>) -> Vec<(String, usize)> {
    let t = Tree::new(tree);
    t.files
        .iter()
        .flat_map(|f| {
            f.scan
                .fns
                .iter()
                .filter(|func| !t.in_test(f, func.ctx))
                .map(|func| (func.name.clone(), func.lines))
        })
        .collect()
}

/// (from sibling, to sibling) -> (file, file) -> the names used.
type Edges = BTreeMap<(String, String), BTreeMap<(String, String), BTreeSet<String>>>;

struct File {
    rel: String,
    /// `crate::a::b`; for a binary's root, `main` (another crate: left out of the graph).
    module: String,
    bin: bool,
    scan: Scan,
}

#[derive(Default)]
struct Module {
    file: Option<String>,
    children: BTreeSet<String>,
    /// Names the module's `use`s bring in, with their paths as written.
    imports: BTreeMap<String, Vec<String>>,
    declared_test: bool,
    test: bool,
}

struct Tree {
    files: Vec<File>,
    modules: BTreeMap<String, Module>,
}

/// The module a file under `src/` is: `lib.rs` is `crate`, `a/mod.rs` and `a.rs` are
/// `crate::a`; `main.rs` and `bin/*.rs` are binaries.
fn module_of(rel: &str) -> (String, bool) {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    match stem {
        "lib" => ("crate".into(), false),
        "main" => ("main".into(), true),
        _ if stem.starts_with("bin/") => (stem.replace('/', "::"), true),
        _ => (format!("crate::{}", stem.replace('/', "::")), false),
    }
}

fn parent_of(module: &str) -> Option<&str> {
    module.rsplit_once("::").map(|(p, _)| p)
}

fn segments(module: &str) -> Vec<String> {
    module.split("::").map(String::from).collect()
}

impl Tree {
    fn new(tree: &BTreeMap<String, String>) -> Tree {
        let mut modules: BTreeMap<String, Module> = BTreeMap::new();
        let mut files = Vec::new();
        for (rel, text) in tree {
            let (module, bin) = module_of(rel);
            let scan = scan(&module, text);
            if !bin {
                modules.entry(module.clone()).or_default().file = Some(rel.clone());
                // Every ancestor holds the next one, `mod` declaration or not.
                let mut m = module.as_str();
                while let Some((parent, name)) = m.rsplit_once("::") {
                    let p = modules.entry(parent.to_string()).or_default();
                    p.children.insert(name.to_string());
                    m = parent;
                }
                for d in &scan.mods {
                    let path = format!("{}::{}", d.parent, d.name);
                    modules
                        .entry(d.parent.clone())
                        .or_default()
                        .children
                        .insert(d.name.clone());
                    let m = modules.entry(path).or_default();
                    m.declared_test |= d.test;
                    if d.inline {
                        m.file = Some(rel.clone());
                    }
                }
                for u in &scan.uses {
                    if let Some(name) = &u.name {
                        let m = modules.entry(scan.ctxs[u.ctx].module.clone()).or_default();
                        m.imports.insert(name.clone(), u.path.clone());
                    }
                }
            }
            files.push(File {
                rel: rel.clone(),
                module,
                bin,
                scan,
            });
        }
        // Parents before children: a module in a test module is test code.
        let mut paths: Vec<String> = modules.keys().cloned().collect();
        paths.sort_by_key(|p| p.matches("::").count());
        for p in paths {
            let parent_test = parent_of(&p).is_some_and(|q| modules.get(q).is_some_and(|m| m.test));
            let m = modules.get_mut(&p).expect("listed");
            m.test = m.declared_test || parent_test;
        }
        Tree { files, modules }
    }

    fn in_test(&self, f: &File, ctx: usize) -> bool {
        f.scan.ctxs[ctx].test || self.modules.get(&f.module).is_some_and(|m| m.test)
    }

    /// `segs` as named in `module`, from the crate root (`crate::..`) or an extern crate's.
    fn absolute(&self, module: &str, segs: &[String], depth: usize) -> Vec<String> {
        let Some(first) = segs.first() else {
            return Vec::new();
        };
        let mut base = segments(module);
        match first.as_str() {
            "crate" => segs.to_vec(),
            "::" => segs[1..].to_vec(),
            "self" => {
                base.extend_from_slice(&segs[1..]);
                base
            }
            "super" => {
                let n = segs.iter().take_while(|s| *s == "super").count();
                base.truncate(base.len().saturating_sub(n));
                base.extend_from_slice(&segs[n..]);
                base
            }
            name => {
                let m = self.modules.get(module);
                if m.is_some_and(|m| m.children.contains(name)) {
                    base.extend_from_slice(segs);
                    return base;
                }
                match m.and_then(|m| m.imports.get(name)) {
                    Some(raw) if depth < 16 => {
                        let mut abs = self.absolute(module, raw, depth + 1);
                        abs.extend_from_slice(&segs[1..]);
                        abs
                    }
                    _ => segs.to_vec(),
                }
            }
        }
    }

    /// The module that defines what the crate path `abs` names (re-exports followed), and the
    /// item's name in it.
    fn target(&self, abs: &[String], depth: usize) -> Option<(String, Option<String>)> {
        if abs.first().map(String::as_str) != Some("crate") {
            return None;
        }
        let mut cur = "crate".to_string();
        for (k, seg) in abs.iter().enumerate().skip(1) {
            let m = self.modules.get(&cur)?;
            if m.children.contains(seg) {
                cur = format!("{cur}::{seg}");
                continue;
            }
            if let Some(raw) = m.imports.get(seg).filter(|_| depth < 16) {
                let mut next = self.absolute(&cur, raw, 0);
                next.extend_from_slice(&abs[k + 1..]);
                if next.first().map(String::as_str) == Some("crate") {
                    return self.target(&next, depth + 1);
                }
            }
            return Some((cur, Some(seg.clone())));
        }
        Some((cur, None))
    }

    /// Every path `f` names, resolved, with its line and whether it is test code.
    fn references(&self, f: &File) -> Vec<(usize, Vec<String>, bool)> {
        let s = &f.scan;
        let uses = s.uses.iter().map(|u| (u.ctx, u.line, &u.path));
        let paths = s.paths.iter().map(|p| (p.ctx, p.line, &p.segs));
        uses.chain(paths)
            .map(|(ctx, line, segs)| {
                let abs = self.absolute(&s.ctxs[ctx].module, segs, 0);
                (line, abs, self.in_test(f, ctx))
            })
            .collect()
    }

    /// Rule a: a layer names only the layers below it (test code included).
    fn layers(&self, f: &File, out: &mut BTreeSet<Violation>) {
        let top = f.rel.split('/').next().unwrap_or("");
        let Some((layer, allowed)) = LAYERS.iter().find(|(l, _)| *l == top) else {
            return;
        };
        for (line, abs, _) in self.references(f) {
            let Some(used) = abs.get(1).filter(|_| abs[0] == "crate") else {
                continue;
            };
            let is_layer = LAYERS.iter().any(|(l, _)| l == used);
            if is_layer && used != layer && !allowed.contains(&used.as_str()) {
                out.insert(Violation::Layer {
                    file: f.rel.clone(),
                    line,
                    layer: layer.to_string(),
                    uses: used.clone(),
                    path: abs.join("::"),
                });
            }
        }
    }

    /// Rule b: core code outside test modules names no effect; rule g: no bare `.display()`.
    fn purity(&self, f: &File, out: &mut BTreeSet<Violation>) {
        for c in &f.scan.calls {
            if self.in_test(f, c.ctx) {
                continue;
            }
            if c.what == ".display()" {
                if f.rel != "core/diag.rs" {
                    out.insert(Violation::RawDisplay {
                        file: f.rel.clone(),
                        line: c.line,
                    });
                }
            } else if f.rel.starts_with("core/") {
                out.insert(Violation::Impure {
                    file: f.rel.clone(),
                    line: c.line,
                    what: c.what.clone(),
                });
            }
        }
        if !f.rel.starts_with("core/") {
            return;
        }
        for (line, abs, test) in self.references(f) {
            if !test && impure(&abs) {
                out.insert(Violation::Impure {
                    file: f.rel.clone(),
                    line,
                    what: abs.join("::"),
                });
            }
        }
    }

    /// Rule c: no function outside test modules is longer than the limit.
    fn lengths(&self, f: &File, out: &mut BTreeSet<Violation>) {
        for func in &f.scan.fns {
            if func.lines > MAX_FN_LINES && !self.in_test(f, func.ctx) {
                out.insert(Violation::LongFn {
                    name: func.name.clone(),
                    file: f.rel.clone(),
                    line: func.line,
                    lines: func.lines,
                });
            }
        }
    }

    /// The uses between sibling modules outside test code.
    fn sibling_edges(&self) -> Edges {
        let mut edges = Edges::new();
        for f in self.files.iter().filter(|f| !f.bin) {
            let s = &f.scan;
            let uses = s.uses.iter().map(|u| (u.ctx, &u.path));
            let paths = s.paths.iter().map(|p| (p.ctx, &p.segs));
            for (ctx, segs) in uses.chain(paths) {
                if self.in_test(f, ctx) {
                    continue;
                }
                let from = &s.ctxs[ctx].module;
                let abs = self.absolute(from, segs, 0);
                let Some((to, item)) = self.target(&abs, 0) else {
                    continue;
                };
                let (a, b) = (segments(from), segments(&to));
                let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                if common == a.len() || common == b.len() {
                    continue; // the same module, a parent or a child
                }
                let sib = |m: &[String]| m[..=common].join("::");
                let to_file = self.modules.get(&to).and_then(|m| m.file.clone());
                let name = item.unwrap_or_else(|| b[b.len() - 1].clone());
                edges
                    .entry((sib(&a), sib(&b)))
                    .or_default()
                    .entry((f.rel.clone(), to_file.unwrap_or_else(|| "?".into())))
                    .or_default()
                    .insert(name);
            }
        }
        edges
    }

    /// Rule d: the strongly connected components of the sibling graph, each a loop.
    fn loops(&self) -> Vec<Violation> {
        let edges = self.sibling_edges();
        let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            graph.entry(a).or_default().push(b);
            graph.entry(b).or_default();
        }
        strongly_connected(&graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|component| {
                let inside = |m: &String| component.contains(m);
                let shown = edges
                    .iter()
                    .filter(|((a, b), _)| inside(a) && inside(b))
                    .flat_map(|(_, files)| files)
                    .map(|((from, to), names)| {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        format!("src/{from} -> src/{to}: {}", names.join(", "))
                    })
                    .collect();
                Violation::Loop {
                    modules: component,
                    edges: shown,
                }
            })
            .collect()
    }
}

/// Whether an absolute path names an effect core may not have.
fn impure(abs: &[String]) -> bool {
    let p: Vec<&str> = abs.iter().map(String::as_str).collect();
    let std_banned = match p.as_slice() {
        ["std" | "core", module, rest @ ..] => {
            IMPURE_STD.contains(module)
                || PURE_STD.iter().any(|(m, allowed)| {
                    m == module && rest.first().is_some_and(|i| !allowed.contains(i))
                })
        }
        _ => false,
    };
    std_banned
        || p.first().is_some_and(|c| IMPURE_CRATES.contains(c))
        || p.windows(2).any(|w| IMPURE_PAIRS.contains(&[w[0], w[1]]))
}

/// Tarjan's algorithm: the components, each sorted, in a stable order.
fn strongly_connected(graph: &BTreeMap<&str, Vec<&str>>) -> Vec<Vec<String>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, g: &BTreeMap<&'a str, Vec<&'a str>>, st: &mut State<'a>) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        st.on_stack.insert(v);
        for &w in &g[v] {
            if !st.index.contains_key(w) {
                visit(w, g, st);
                let low = st.low[v].min(st.low[w]);
                st.low.insert(v, low);
            } else if st.on_stack.contains(w) {
                let low = st.low[v].min(st.index[w]);
                st.low.insert(v, low);
            }
        }
        if st.low[v] == st.index[v] {
            let mut component = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            component.sort();
            st.out.push(component);
        }
    }
    let mut st = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !st.index.contains_key(v) {
            visit(v, graph, &mut st);
        }
    }
    st.out.sort();
    st.out
}
