//! One source file read into what the architecture rules look at: the modules it declares, its
//! `use` trees (groups, `self`, aliases, globs, `extern crate`), the paths its code names
//! (`crate::a::b`, `super::super::x`, `io::stdin`), its functions with their qualified names and
//! lengths, and its print and stdin calls. Every record says whether it sits in a test module.

use super::lex::{tokens, Kind, Token};
use super::{PRINT_MACROS, STREAM_CALLS};

/// Where a record sits: the module (a file's or an inline one's), the qualified name prefix for
/// functions (`crate::core::x::Type`), and whether it is test code within this file.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub module: String,
    pub qual: String,
    pub test: bool,
}

/// A `mod name;` or `mod name { .. }`: its parent module and whether it is `#[cfg(test)]`.
#[derive(Debug)]
pub struct ModDecl {
    pub parent: String,
    pub name: String,
    pub test: bool,
    pub inline: bool,
}

/// One name a `use` brings in (`None` for a glob), with its path as written; a path that
/// starts at the extern root (`::std`, `extern crate x`) starts with `"::"`.
#[derive(Debug)]
pub struct Use {
    pub ctx: usize,
    pub line: usize,
    pub name: Option<String>,
    pub path: Vec<String>,
}

/// A path of two or more segments in code, as written.
#[derive(Debug)]
pub struct PathRef {
    pub ctx: usize,
    pub line: usize,
    pub segs: Vec<String>,
}

#[derive(Debug)]
pub struct Func {
    pub ctx: usize,
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// A call worth flagging by its shape alone: `println!`, `stdin()`, `.display()`.
#[derive(Debug)]
pub struct Call {
    pub ctx: usize,
    pub line: usize,
    pub what: String,
}

#[derive(Debug, Default)]
pub struct Scan {
    pub ctxs: Vec<Ctx>,
    pub mods: Vec<ModDecl>,
    pub uses: Vec<Use>,
    pub paths: Vec<PathRef>,
    pub fns: Vec<Func>,
    pub calls: Vec<Call>,
}

/// What the `{` the scanner is waiting for opens.
enum Opening {
    Fn(String, usize),
    Impl(usize),
    Trait(String),
    Mod(String, bool),
}

struct Frame {
    ctx: usize,
    func: Option<(String, usize)>,
}

/// Reads `text`, the file of module `module`.
pub fn scan(module: &str, text: &str) -> Scan {
    let mut sc = Scanner {
        toks: tokens(text),
        s: Scan {
            ctxs: vec![Ctx {
                module: module.to_string(),
                qual: module.to_string(),
                test: false,
            }],
            ..Scan::default()
        },
        stack: vec![Frame { ctx: 0, func: None }],
        pending: None,
        depth: 0,
        cfg_test: false,
    };
    let mut i = 0;
    while i < sc.toks.len() {
        i = sc.step(i);
    }
    sc.s
}

/// The walk over one file's tokens.
struct Scanner {
    toks: Vec<Token>,
    s: Scan,
    /// The open braces, innermost last.
    stack: Vec<Frame>,
    /// An item header read up to its `{` (or its `;`: then it has no body).
    pending: Option<Opening>,
    /// Parentheses and brackets open since the pending header began.
    depth: i32,
    /// A `#[cfg(test)]` waiting for the item it stands on.
    cfg_test: bool,
}

impl Scanner {
    /// Reads what starts at token `i`; returns the index to go on from.
    fn step(&mut self, i: usize) -> usize {
        let ctx = self.stack.last().map_or(0, |f| f.ctx);
        if let Some(next) = self.attribute(i, ctx) {
            return next;
        }
        if let Some(next) = self.import(i, ctx) {
            return next;
        }
        if let Some(next) = self.item_head(i, ctx) {
            return next;
        }
        self.punct(i, ctx);
        code_path(&mut self.s, &self.toks, i, ctx);
        i + 1
    }

    /// `#[..]` or `#![..]`: a `cfg(test)` marks the next item, or the module it is inside.
    fn attribute(&mut self, i: usize, ctx: usize) -> Option<usize> {
        let toks = &self.toks;
        let inner = toks.get(i + 1).is_some_and(|n| n.is("!"));
        let open = if inner { i + 2 } else { i + 1 };
        if !toks[i].is("#") || !toks.get(open).is_some_and(|t| t.is("[")) {
            return None;
        }
        let close = matching(toks, open);
        let is_cfg_test = toks.get(open + 1..close).is_some_and(|a| {
            a.iter()
                .map(|t| t.text.as_str())
                .eq(["cfg", "(", "test", ")"])
        });
        if is_cfg_test && inner {
            self.s.ctxs[ctx].test = true;
        } else if is_cfg_test {
            self.cfg_test = true;
        }
        Some(close + 1)
    }

    /// A `use` declaration or an `extern crate`.
    fn import(&mut self, i: usize, ctx: usize) -> Option<usize> {
        let toks = &self.toks;
        let t = &toks[i];
        if t.is("use") && self.pending.is_none() {
            let mut out = Vec::new();
            let next = use_tree(toks, i + 1, Vec::new(), &mut out);
            for (name, path) in out {
                self.s.uses.push(Use {
                    ctx,
                    line: t.line,
                    name,
                    path,
                });
            }
            self.cfg_test = false;
            return Some(next);
        }
        if !t.is("extern") || !toks.get(i + 1).is_some_and(|n| n.is("crate")) {
            return None;
        }
        if let Some(name) = toks.get(i + 2).and_then(Token::ident) {
            let alias = match (toks.get(i + 3), toks.get(i + 4).and_then(Token::ident)) {
                (Some(a), Some(alias)) if a.is("as") => alias,
                _ => name,
            };
            self.s.uses.push(Use {
                ctx,
                line: t.line,
                name: Some(alias.to_string()),
                path: vec!["::".into(), name.into()],
            });
        }
        Some(i + 3)
    }

    /// `mod name`, `fn name`, `trait Name`, `impl ..`: the header of an item with a body.
    fn item_head(&mut self, i: usize, ctx: usize) -> Option<usize> {
        if self.pending.is_some() {
            return None;
        }
        let t = &self.toks[i];
        let name = self
            .toks
            .get(i + 1)
            .and_then(Token::ident)
            .map(str::to_string);
        let (opening, next) = match (t.ident()?, name) {
            ("mod", Some(name)) => {
                let test = self.cfg_test || self.s.ctxs[ctx].test;
                self.cfg_test = false;
                if !self.toks.get(i + 2).is_some_and(|t| t.is("{")) {
                    self.s.mods.push(ModDecl {
                        parent: self.s.ctxs[ctx].module.clone(),
                        name,
                        test,
                        inline: false,
                    });
                    return Some(i + 2);
                }
                (Opening::Mod(name, test), i + 2)
            }
            ("fn", Some(name)) => (Opening::Fn(name, t.line), i + 2),
            ("trait", Some(name)) => (Opening::Trait(name), i + 2),
            ("impl", _) if item_position(&self.toks, i) => (Opening::Impl(i + 1), i + 1),
            _ => return None,
        };
        self.pending = Some(opening);
        self.depth = 0;
        self.cfg_test = false;
        Some(next)
    }

    /// Brackets, the `;` that ends a body-less item, and the braces that open and close frames.
    fn punct(&mut self, i: usize, ctx: usize) {
        let t = &self.toks[i];
        if t.kind == Kind::Lit || t.kind == Kind::Lifetime {
            return;
        }
        match t.text.as_str() {
            "(" | "[" => self.depth += 1,
            ")" | "]" => self.depth -= 1,
            ";" if self.depth == 0 => {
                self.pending = None;
                self.cfg_test = false;
            }
            "{" => {
                let open = if self.depth == 0 {
                    self.pending.take()
                } else {
                    None
                };
                let frame = open_frame(&mut self.s, &self.toks, ctx, i, open);
                self.stack.push(frame);
                self.cfg_test = false;
            }
            "}" => {
                if let Some(Frame {
                    ctx,
                    func: Some((name, line)),
                }) = self.stack.pop()
                {
                    let lines = t.line - line + 1;
                    self.s.fns.push(Func {
                        ctx,
                        name,
                        line,
                        lines,
                    });
                }
                if self.stack.is_empty() {
                    self.stack.push(Frame { ctx: 0, func: None });
                }
            }
            _ => {}
        }
    }
}

/// The index of the `]` that closes the `[` at `open`.
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.is("[") {
            depth += 1;
        } else if t.is("]") {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len()
}

/// `impl` starting an item (not `-> impl Trait` or `x: impl Fn()`): after the end of an item,
/// a block, an attribute, or `unsafe`/`default`.
fn item_position(toks: &[Token], i: usize) -> bool {
    let mut k = i;
    while k > 0 && (toks[k - 1].is("unsafe") || toks[k - 1].is("default")) {
        k -= 1;
    }
    k == 0 || ["}", "{", ";", "]"].iter().any(|p| toks[k - 1].is(p))
}

/// The frame a `{` at `i` opens: a function, an impl or trait, an inline module, or a block.
fn open_frame(s: &mut Scan, toks: &[Token], ctx: usize, i: usize, open: Option<Opening>) -> Frame {
    let parent = s.ctxs[ctx].clone();
    let mut child = |module: String, qual: String, test: bool| {
        s.ctxs.push(Ctx { module, qual, test });
        s.ctxs.len() - 1
    };
    match open {
        Some(Opening::Fn(name, line)) => {
            let qual = format!("{}::{name}", parent.qual);
            Frame {
                ctx: child(parent.module, qual.clone(), parent.test),
                func: Some((qual, line)),
            }
        }
        Some(Opening::Impl(from)) => {
            let qual = format!("{}::{}", parent.qual, impl_type(&toks[from..i]));
            Frame {
                ctx: child(parent.module, qual, parent.test),
                func: None,
            }
        }
        Some(Opening::Trait(name)) => {
            let qual = format!("{}::{name}", parent.qual);
            Frame {
                ctx: child(parent.module, qual, parent.test),
                func: None,
            }
        }
        Some(Opening::Mod(name, test)) => {
            let module = format!("{}::{name}", parent.module);
            let ctx = child(module.clone(), module, test);
            s.mods.push(ModDecl {
                parent: parent.module,
                name,
                test,
                inline: true,
            });
            Frame { ctx, func: None }
        }
        None => Frame { ctx, func: None },
    }
}

/// The name of the type an `impl` header is for: `impl<T> Trait for a::Type<T> where ..`
/// gives `Type`.
fn impl_type(header: &[Token]) -> String {
    let mut angle = 0;
    let mut self_type: Vec<&Token> = Vec::new();
    for t in header {
        match t.text.as_str() {
            "<" => angle += 1,
            ">" => angle -= 1,
            "where" if angle == 0 => break,
            "for" if angle == 0 => {
                self_type.clear();
                continue;
            }
            _ => {}
        }
        if angle == 0 {
            self_type.push(t);
        }
    }
    self_type
        .iter()
        .rev()
        .find_map(|t| t.ident().filter(|w| !["dyn", "mut", "const"].contains(w)))
        .unwrap_or("impl")
        .to_string()
}

/// One `use` tree from `i` under `prefix`, into (name, path) pairs; returns the index after it
/// (after the `;` at the top level).
fn use_tree(
    toks: &[Token],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) -> usize {
    let top = prefix.is_empty();
    let mut path = prefix;
    if toks.get(i).is_some_and(|t| t.is("::")) {
        if path.is_empty() {
            path.push("::".into());
        }
        i += 1;
    }
    while let Some(t) = toks.get(i) {
        if let Some(seg) = t.ident() {
            path.push(seg.to_string());
            i += 1;
            if toks.get(i).is_some_and(|t| t.is("::")) {
                i += 1;
                continue;
            }
            let mut alias = None;
            if toks.get(i).is_some_and(|t| t.is("as")) {
                alias = toks.get(i + 1).map(|t| t.text.clone());
                i += 2;
            }
            if path.last().is_some_and(|s| s == "self") {
                path.pop();
            }
            let name = alias.or_else(|| path.last().cloned());
            out.push((name, path));
            break;
        } else if t.is("*") {
            out.push((None, path));
            i += 1;
            break;
        } else if t.is("{") {
            i += 1;
            while toks.get(i).is_some_and(|t| !t.is("}")) {
                i = use_tree(toks, i, path.clone(), out);
                if toks.get(i).is_some_and(|t| t.is(",")) {
                    i += 1;
                }
            }
            i += 1;
            break;
        } else {
            break;
        }
    }
    if top {
        // Past the `;` (or whatever a malformed tree stopped at).
        while toks.get(i).is_some_and(|t| !t.is(";")) {
            i += 1;
        }
        i += 1;
    }
    i
}

/// A path, macro call or stream call that starts at token `i` (not in a `use`).
fn code_path(s: &mut Scan, toks: &[Token], i: usize, ctx: usize) {
    let t = &toks[i];
    let prev = i.checked_sub(1).map(|k| &toks[k]);
    let line = t.line;
    let extern_root = t.is("::") && !prev.is_some_and(|p| p.kind == Kind::Ident || p.is(">"));
    if t.kind != Kind::Ident && !extern_root {
        return;
    }
    if prev.is_some_and(|p| p.is("::") || p.is("$")) && !extern_root {
        return;
    }
    if prev.is_some_and(|p| p.is(".")) {
        let called = |k: usize, w: &str| toks.get(i + k).is_some_and(|t| t.is(w));
        if t.is("display") && called(1, "(") && called(2, ")") {
            s.calls.push(Call {
                ctx,
                line,
                what: ".display()".into(),
            });
        }
        return;
    }
    let mut segs = Vec::new();
    let mut j = i;
    if extern_root {
        segs.push("::".to_string());
        j += 1;
    }
    while let Some(seg) = toks.get(j).and_then(Token::ident) {
        segs.push(seg.to_string());
        if toks.get(j + 1).is_some_and(|t| t.is("::"))
            && toks.get(j + 2).is_some_and(|t| t.kind == Kind::Ident)
        {
            j += 2;
        } else {
            break;
        }
    }
    let after = |k: usize| toks.get(j + k);
    let last = segs.last().map_or("", String::as_str);
    if after(1).is_some_and(|t| t.is("!"))
        && after(2).is_some_and(|t| t.is("(") || t.is("[") || t.is("{"))
    {
        if PRINT_MACROS.contains(&last) {
            s.calls.push(Call {
                ctx,
                line,
                what: format!("{last}!"),
            });
        }
        return;
    }
    let bare = segs.len() == 1 && !prev.is_some_and(|p| p.is("fn"));
    if bare && STREAM_CALLS.contains(&last) && after(1).is_some_and(|t| t.is("(")) {
        s.calls.push(Call {
            ctx,
            line,
            what: format!("{last}()"),
        });
    }
    if segs.len() >= 2 {
        s.paths.push(PathRef { ctx, line, segs });
    }
}
