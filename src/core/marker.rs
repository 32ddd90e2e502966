//! PEP 508 environment markers (`platform_system == "Linux"`, `python_version > "3.8"`): the
//! one parser, its canonical text, and its verdict for a target (Linux, CPython, a machine,
//! a Python). The spec parses and normalises a pip extra's marker with it, the lock judges it
//! for the chosen Python and each platform, and import judges a file's markers. Only the
//! marker grammar is read: known variables, the PEP 508 operators, `and`, `or`, parentheses
//! and quoted literals of plain characters; anything else is refused. This module performs no
//! I/O.

use crate::core::version::Version;

/// What the target is, as far as markers ask.
pub struct Env<'a> {
    /// `x86_64` or `aarch64` (`AMD64` on Windows).
    pub machine: &'a str,
    /// A Windows target (`win-64`) rather than Linux.
    pub windows: bool,
    /// The Python, when known (`3.10`, `3.11.6`); `None` while it is still to be chosen.
    pub python: Option<&'a Version>,
}

/// A parsed marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    And(Box<Marker>, Box<Marker>),
    Or(Box<Marker>, Box<Marker>),
    /// `variable op "literal"`, or `"literal" in variable` (`lit_first`).
    Cmp {
        var: &'static str,
        op: &'static str,
        value: String,
        lit_first: bool,
    },
}

/// The variables envbuild judges for a target. `platform_release`, `platform_version` and
/// `extra` are left out: the first two are the build machine's kernel, and a requirements
/// line has no extra.
const VARIABLES: &[&str] = &[
    "python_version",
    "python_full_version",
    "implementation_version",
    "os_name",
    "sys_platform",
    "platform_system",
    "platform_machine",
    "implementation_name",
    "platform_python_implementation",
];

const OPERATORS: &[&str] = &[
    "===", "==", "!=", "<=", ">=", "<", ">", "~=", "in", "not in",
];

/// The hint for a marker the spec refuses.
pub const HINT: &str = "write a PEP 508 marker on the variables python_version, python_full_version, implementation_version, os_name, sys_platform, platform_system, platform_machine, implementation_name or platform_python_implementation, with double-quoted values of letters, digits and `._-+*`, e.g. `urllib3>=2.5; python_version > \"3.8\"`";

/// The longest marker read, as written and as its canonical text.
const MAX_LEN: usize = 512;

/// Parse a marker, or say why it is not one envbuild reads.
pub fn parse(s: &str) -> Result<Marker, String> {
    if s.len() > MAX_LEN {
        return Err(format!("a marker longer than {MAX_LEN} characters"));
    }
    let tokens = tokenize(s)?;
    let mut p = Parser { tokens, at: 0 };
    let m = p.or(0)?;
    if p.at != p.tokens.len() {
        return Err(format!("`{s}` is not a marker envbuild can read"));
    }
    // The canonical text is what the spec and the lock keep, and it can be longer than what
    // was written (spaces around operators): it must read back under the same bound.
    if m.canonical().len() > MAX_LEN {
        return Err(format!(
            "a marker longer than {MAX_LEN} characters once written out"
        ));
    }
    Ok(m)
}

impl Marker {
    /// The canonical text: `var op "value"`, double quotes, one space around operators, `and`
    /// before `or` with parentheses only where they change the meaning. The same marker,
    /// however written, gives the same text.
    pub fn canonical(&self) -> String {
        match self {
            Marker::Or(a, b) => format!("{} or {}", a.canonical(), b.canonical()),
            Marker::And(a, b) => {
                let side = |m: &Marker| match m {
                    Marker::Or(..) => format!("({})", m.canonical()),
                    _ => m.canonical(),
                };
                format!("{} and {}", side(a), side(b))
            }
            Marker::Cmp {
                var,
                op,
                value,
                lit_first: true,
            } => format!("\"{value}\" {op} {var}"),
            Marker::Cmp { var, op, value, .. } => format!("{var} {op} \"{value}\""),
        }
    }

    /// Whether the marker asks for the Python.
    pub fn needs_python(&self) -> bool {
        match self {
            Marker::And(a, b) | Marker::Or(a, b) => a.needs_python() || b.needs_python(),
            Marker::Cmp { var, .. } => is_python(var),
        }
    }

    /// The verdict for `env`, or why it cannot be given (the Python not known yet, or a
    /// comparison a `X.Y` Python leaves open).
    pub fn holds(&self, env: &Env) -> Result<bool, String> {
        match self {
            Marker::And(a, b) => Ok(a.holds(env)? && b.holds(env)?),
            Marker::Or(a, b) => Ok(a.holds(env)? || b.holds(env)?),
            Marker::Cmp {
                var,
                op,
                value,
                lit_first,
            } => compare(env, var, op, value, *lit_first),
        }
    }
}

fn is_python(var: &str) -> bool {
    var.starts_with("python_") || var == "implementation_version"
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Word(String),
    Str(String),
    Op(String),
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(if c == '(' { Tok::Open } else { Tok::Close });
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = s[i + 1..]
                .find(c)
                .ok_or_else(|| format!("`{s}` has an unclosed string"))?;
            let lit = &s[i + 1..i + 1 + end];
            if lit.len() > 64
                || !lit
                    .bytes()
                    .all(|x| x.is_ascii_alphanumeric() || b"._-+* ".contains(&x))
            {
                return Err(format!(
                    "the marker value `{lit}` holds characters envbuild does not pass on"
                ));
            }
            out.push(Tok::Str(lit.to_string()));
            i += end + 2;
        } else if "<>=!~".contains(c) {
            let len = s[i..].bytes().take_while(|x| b"<>=!~".contains(x)).count();
            out.push(Tok::Op(s[i..i + len].to_string()));
            i += len;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let len = s[i..]
                .bytes()
                .take_while(|x| x.is_ascii_alphanumeric() || *x == b'_')
                .count();
            out.push(Tok::Word(s[i..i + len].to_string()));
            i += len;
        } else {
            return Err(format!("`{s}` is not a marker envbuild can read"));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.tokens.get(self.at), Some(Tok::Word(x)) if x == w)
    }

    fn or(&mut self, depth: usize) -> Result<Marker, String> {
        if depth > 16 {
            return Err("a marker nested deeper than 16 parentheses".into());
        }
        let mut m = self.and(depth)?;
        while self.peek_word("or") {
            self.at += 1;
            m = Marker::Or(Box::new(m), Box::new(self.and(depth)?));
        }
        Ok(m)
    }

    fn and(&mut self, depth: usize) -> Result<Marker, String> {
        let mut m = self.atom(depth)?;
        while self.peek_word("and") {
            self.at += 1;
            m = Marker::And(Box::new(m), Box::new(self.atom(depth)?));
        }
        Ok(m)
    }

    fn atom(&mut self, depth: usize) -> Result<Marker, String> {
        if self.tokens.get(self.at) == Some(&Tok::Open) {
            self.at += 1;
            let m = self.or(depth + 1)?;
            return match self.next() {
                Some(Tok::Close) => Ok(m),
                _ => Err("a marker with an unclosed `(`".into()),
            };
        }
        let lhs = self.next();
        let op = self.op()?;
        match (lhs, self.next()) {
            (Some(Tok::Word(var)), Some(Tok::Str(value))) => cmp(&var, op, value, false),
            (Some(Tok::Str(value)), Some(Tok::Word(var))) => cmp(&var, op, value, true),
            _ => Err("a marker that is not `variable operator \"value\"`".into()),
        }
    }

    /// An operator: `<>=!~` runs, `in`, or `not in`.
    fn op(&mut self) -> Result<&'static str, String> {
        let text = match self.next() {
            Some(Tok::Op(o)) => o,
            Some(Tok::Word(w)) if w == "in" => w,
            Some(Tok::Word(w)) if w == "not" && self.peek_word("in") => {
                self.at += 1;
                "not in".into()
            }
            _ => return Err("a marker that is not `variable operator \"value\"`".into()),
        };
        OPERATORS
            .iter()
            .find(|o| **o == text)
            .copied()
            .ok_or_else(|| format!("`{text}` is not a PEP 508 marker operator"))
    }
}

/// One comparison, checked: a known variable, an operator its kind takes, and a value it reads.
fn cmp(var: &str, op: &'static str, value: String, lit_first: bool) -> Result<Marker, String> {
    let Some(var) = VARIABLES.iter().find(|v| **v == var).copied() else {
        return Err(format!(
            "the marker asks for `{var}`, which envbuild does not judge for a target"
        ));
    };
    let contains = op == "in" || op == "not in";
    // `"3.8" < python_version` is `python_version > "3.8"`, written the canonical way round.
    let (op, lit_first) = match (lit_first && !contains, op) {
        (false, o) => (o, lit_first),
        (true, "<") => (">", false),
        (true, ">") => ("<", false),
        (true, "<=") => (">=", false),
        (true, ">=") => ("<=", false),
        (true, o @ ("==" | "!=")) => (o, false),
        (true, o) => return Err(format!("`\"{value}\" {o} {var}`: write the variable first")),
    };
    if is_python(var) && !contains {
        let base = match value.strip_suffix(".*") {
            Some(b) if op == "==" || op == "!=" => b,
            _ => &value,
        };
        if Version::parse(base).is_none() {
            return Err(format!("`{value}` is not a Python version envbuild reads"));
        }
    } else if !is_python(var) && !contains && op != "==" && op != "!=" {
        return Err(format!("`{var} {op}` compares a name by order"));
    }
    Ok(Marker::Cmp {
        var,
        op,
        value,
        lit_first,
    })
}

/// The value of a name variable on the target.
fn name_value(env: &Env, var: &str) -> String {
    match (var, env.windows) {
        ("sys_platform", false) => "linux",
        ("sys_platform", true) => "win32",
        ("platform_system", false) => "Linux",
        ("platform_system", true) => "Windows",
        ("os_name", false) => "posix",
        ("os_name", true) => "nt",
        ("platform_machine", _) => env.machine,
        ("implementation_name", _) => "cpython",
        _ => "CPython",
    }
    .to_string()
}

fn compare(env: &Env, var: &str, op: &str, value: &str, lit_first: bool) -> Result<bool, String> {
    if !is_python(var) {
        let have = name_value(env, var);
        return Ok(match (op, lit_first) {
            ("==", _) => have == value,
            ("!=", _) => have != value,
            ("in", false) => value.contains(&have),
            ("not in", false) => !value.contains(&have),
            ("in", true) => have.contains(value),
            _ => !have.contains(value),
        });
    }
    let Some(py) = env.python else {
        return Err("the marker depends on the Python, which is not chosen yet".into());
    };
    let have = if var == "python_version" {
        Version::parse(&py.major_minor()).unwrap_or_else(|| py.clone())
    } else {
        py.clone()
    };
    let open = || {
        Err(format!(
            "`{var} {op} \"{value}\"` depends on the Python's patch release, and the Python is {py}: pin python to X.Y.Z, or compare python_version"
        ))
    };
    if op == "in" || op == "not in" || op == "===" {
        if var != "python_version" && py.len() < 3 {
            return open();
        }
        let text = have.as_str().to_string();
        return Ok(match (op, lit_first) {
            ("===", _) => text == value,
            ("in", false) => value.split_whitespace().any(|x| x == text),
            ("not in", false) => !value.split_whitespace().any(|x| x == text),
            ("in", true) => text.contains(value),
            _ => !text.contains(value),
        });
    }
    let (base, wild) = match value.strip_suffix(".*") {
        Some(b) => (b, true),
        None => (value, false),
    };
    let want = Version::parse(base).ok_or_else(|| format!("`{value}` is not a Python version"))?;
    // A `X.Y` Python decides a patch-level comparison only against another minor release.
    if var != "python_version"
        && have.len() < want.len().max(3)
        && have.major_minor() == want.major_minor()
    {
        return open();
    }
    let prefix = |n: usize| {
        (0..n).all(|i| {
            have.parts().get(i).copied().unwrap_or(0) == want.parts().get(i).copied().unwrap_or(0)
        })
    };
    Ok(match op {
        "==" if wild => prefix(want.len()),
        "!=" if wild => !prefix(want.len()),
        "==" => have == want,
        "!=" => have != want,
        "<" => have < want,
        "<=" => have <= want,
        ">" => have > want,
        ">=" => have >= want,
        // `~=X.Y.Z`: at least X.Y.Z, within X.Y.
        _ => have >= want && prefix(want.len().saturating_sub(1).max(1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(python: Option<&Version>) -> Env<'_> {
        Env {
            machine: "x86_64",
            windows: false,
            python,
        }
    }

    fn holds(m: &str, python: Option<&str>) -> Result<bool, String> {
        let py = python.and_then(Version::parse);
        parse(m)?.holds(&env(py.as_ref()))
    }

    #[test]
    fn platform_markers_are_judged_for_linux() {
        assert_eq!(holds("platform_system == \"Linux\"", None), Ok(true));
        assert_eq!(holds("sys_platform == 'win32'", None), Ok(false));
        assert_eq!(
            holds("platform_machine==\"x86_64\" and sys_platform==\"linux\" or sys_platform==\"linux2\"", None),
            Ok(true)
        );
        assert_eq!(
            holds("(sys_platform == 'darwin' or os_name == 'nt')", None),
            Ok(false)
        );
        assert_eq!(holds("sys_platform in \"linux darwin\"", None), Ok(true));
        assert_eq!(holds("\"arm\" not in platform_machine", None), Ok(true));
        let arm = Env {
            machine: "aarch64",
            windows: false,
            python: None,
        };
        assert_eq!(
            parse("platform_machine == 'aarch64'").unwrap().holds(&arm),
            Ok(true)
        );
    }

    #[test]
    fn python_markers_are_judged_for_a_chosen_python() {
        assert!(holds("python_version > \"3.8\"", None).is_err());
        assert_eq!(holds("python_version > \"3.8\"", Some("3.10")), Ok(true));
        assert_eq!(holds("python_version > \"3.8\"", Some("3.8")), Ok(false));
        assert_eq!(holds("python_version < '3.10'", Some("3.10.14")), Ok(false));
        assert_eq!(holds("python_version == '3.*'", Some("3.12")), Ok(true));
        assert_eq!(holds("python_version ~= '3.9'", Some("3.12")), Ok(true));
        assert_eq!(
            holds("python_version in '3.9 3.10'", Some("3.10")),
            Ok(true)
        );
        // A patch-level comparison: decided against another minor, open against the same.
        assert_eq!(
            holds("python_full_version >= '3.8.1'", Some("3.10")),
            Ok(true)
        );
        assert!(holds("python_full_version >= '3.10.2'", Some("3.10")).is_err());
        assert_eq!(
            holds("python_full_version >= '3.10.2'", Some("3.10.14")),
            Ok(true)
        );
        assert_eq!(
            holds("python_full_version ~= '3.10.2'", Some("3.11.1")),
            Ok(false)
        );
    }

    #[test]
    fn only_the_marker_grammar_is_read() {
        for bad in [
            "extra == \"dev\"",
            "platform_release >= '5'",
            "sys_platform ==",
            "sys_platform == \"linux\"; rm -rf /",
            "sys_platform == \"li$(x)nux\"",
            "sys_platform == `linux`",
            "sys_platform >= \"linux\"",
            "python_version > \"3.x\"",
            "python_version > \"3.8\" and",
            "(python_version > \"3.8\"",
            "\"3.8\" ~= python_version",
            "python_version <> \"3.8\"",
            "sys_platform == \"linux\" xor os_name == \"posix\"",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// However written, one marker has one text.
    #[test]
    fn the_canonical_text_is_one_per_marker() {
        for (written, canonical) in [
            ("python_version>'3.8'", "python_version > \"3.8\""),
            (
                "( sys_platform=='linux' )  and (python_version<\"3.12\" or python_version>=\"3.13\")",
                "sys_platform == \"linux\" and (python_version < \"3.12\" or python_version >= \"3.13\")",
            ),
            ("'3.8'<python_version", "python_version > \"3.8\""),
        ] {
            let m = parse(written).unwrap();
            assert_eq!(m.canonical(), canonical);
            assert_eq!(parse(&m.canonical()).unwrap(), m);
        }
        assert_eq!(
            parse("'linux'  in sys_platform").unwrap().canonical(),
            "\"linux\" in sys_platform"
        );
        assert_eq!(
            parse("os_name == 'posix' or os_name == 'nt' and sys_platform != 'win32'")
                .unwrap()
                .canonical(),
            "os_name == \"posix\" or os_name == \"nt\" and sys_platform != \"win32\""
        );
    }

    /// The canonical text is what the spec and the lock keep, and it can be longer than what
    /// was written (spaces around operators, double quotes): a marker is read only when that
    /// text reads back (the fuzz target's round trip; fuzz/corpus/marker/crash-canonical-too-long).
    #[test]
    fn a_marker_is_read_only_when_its_canonical_text_reads_back() {
        let compact = vec!["python_version<'3.9'"; 22].join("or ");
        assert!(compact.len() <= 512);
        for written in [compact.as_str(), "python_version<'3.9'"] {
            if let Ok(m) = parse(written) {
                let again = parse(&m.canonical());
                assert_eq!(again.map(|a| a.canonical()), Ok(m.canonical()), "{written}");
            }
        }
        let refused = parse(&compact).unwrap_err();
        assert!(refused.contains("512"), "{refused}");
    }
}
