//! PEP 508 environment markers on pip lines (`pkg==1.0; platform_system == "Linux"`), judged
//! for the spec's target: Linux, CPython, the target's machine, and the Python when the file
//! or the command line fixes it. A marker that depends on anything else cannot be judged at
//! import, and says so. This module performs no I/O.

use crate::core::version::Version;

/// What the target is, as far as markers ask.
pub(super) struct Target<'a> {
    /// `x86_64` or `aarch64`.
    pub(super) machine: &'a str,
    /// The Python, when exact (`3.10`, `3.11.6`); `None` when the spec chooses it.
    pub(super) python: Option<Version>,
}

/// A marker's verdict for the target, or why it cannot be judged.
pub(super) fn holds(marker: &str, target: &Target) -> Result<bool, String> {
    let tokens = tokenize(marker)?;
    let mut p = Parser {
        tokens,
        at: 0,
        target,
    };
    let v = p.or()?;
    if p.at != p.tokens.len() {
        return Err(format!("`{marker}` is not a marker envbuild can read"));
    }
    Ok(v)
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
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(if c == '(' { Tok::Open } else { Tok::Close });
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = s[i + 1..]
                .find(c)
                .ok_or_else(|| format!("`{s}` has an unclosed string"))?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if "<>=!~".contains(c) {
            let len = s[i..].bytes().take_while(|x| b"<>=!~".contains(x)).count();
            out.push(Tok::Op(s[i..i + len].to_string()));
            i += len;
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            let len = s[i..]
                .bytes()
                .take_while(|x| x.is_ascii_alphanumeric() || b"_.".contains(x))
                .count();
            out.push(Tok::Word(s[i..i + len].to_string()));
            i += len;
        } else {
            return Err(format!("`{s}` is not a marker envbuild can read"));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Tok>,
    at: usize,
    target: &'a Target<'a>,
}

impl Parser<'_> {
    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.tokens.get(self.at), Some(Tok::Word(x)) if x == w)
    }

    fn or(&mut self) -> Result<bool, String> {
        let mut v = self.and()?;
        while self.peek_word("or") {
            self.at += 1;
            let r = self.and()?;
            v = v || r;
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut v = self.atom()?;
        while self.peek_word("and") {
            self.at += 1;
            let r = self.atom()?;
            v = v && r;
        }
        Ok(v)
    }

    fn atom(&mut self) -> Result<bool, String> {
        if self.tokens.get(self.at) == Some(&Tok::Open) {
            self.at += 1;
            let v = self.or()?;
            return match self.next() {
                Some(Tok::Close) => Ok(v),
                _ => Err("a marker with an unclosed `(`".into()),
            };
        }
        let (lhs, op, rhs) = (self.next(), self.next(), self.next());
        match (lhs, op, rhs) {
            (Some(Tok::Word(var)), Some(Tok::Op(op)), Some(Tok::Str(value))) => {
                self.compare(&var, &op, &value)
            }
            (Some(Tok::Str(value)), Some(Tok::Op(op)), Some(Tok::Word(var))) => {
                // `"3.8" < python_version`: the same comparison, turned round.
                let flipped = match op.as_str() {
                    "<" => ">",
                    ">" => "<",
                    "<=" => ">=",
                    ">=" => "<=",
                    o => o,
                };
                self.compare(&var, flipped, &value)
            }
            _ => Err("a marker that is not `variable operator \"value\"`".into()),
        }
    }

    fn compare(&self, var: &str, op: &str, value: &str) -> Result<bool, String> {
        let known = match var {
            "sys_platform" => Some("linux"),
            "platform_system" => Some("Linux"),
            "os_name" => Some("posix"),
            "platform_machine" => Some(self.target.machine),
            "implementation_name" => Some("cpython"),
            "platform_python_implementation" => Some("CPython"),
            _ => None,
        };
        if let Some(k) = known {
            return match op {
                "==" => Ok(k == value),
                "!=" => Ok(k != value),
                _ => Err(format!("`{var} {op}` compares a name by order")),
            };
        }
        if var != "python_version" && var != "python_full_version" {
            return Err(format!(
                "the marker asks for `{var}`, which import does not judge"
            ));
        }
        let Some(py) = &self.target.python else {
            return Err("the marker depends on the Python, which the spec leaves to the lock to choose (pass `--python X.Y`, or pin python in the file)".into());
        };
        let Some(v) = Version::parse(value) else {
            return Err(format!("`{value}` is not a Python version"));
        };
        let py = if var == "python_version" {
            Version::parse(&py.major_minor()).unwrap_or_else(|| py.clone())
        } else {
            py.clone()
        };
        Ok(match op {
            "==" => py == v,
            "!=" => py != v,
            "<" => py < v,
            "<=" => py <= v,
            ">" => py > v,
            ">=" => py >= v,
            _ => {
                return Err(format!(
                    "`{op}` is not an operator envbuild reads in markers"
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(python: Option<&str>) -> Target<'static> {
        Target {
            machine: "x86_64",
            python: python.and_then(Version::parse),
        }
    }

    #[test]
    fn platform_markers_are_judged_for_linux() {
        let t = t(None);
        assert_eq!(holds("platform_system == \"Linux\"", &t), Ok(true));
        assert_eq!(holds("sys_platform == 'win32'", &t), Ok(false));
        assert_eq!(
            holds("platform_machine==\"x86_64\" and sys_platform==\"linux\" or sys_platform==\"linux2\"", &t),
            Ok(true)
        );
        assert_eq!(
            holds("(sys_platform == 'darwin' or os_name == 'nt')", &t),
            Ok(false)
        );
    }

    #[test]
    fn python_markers_need_a_python() {
        assert!(holds("python_version > \"3.8\"", &t(None)).is_err());
        assert_eq!(
            holds("python_version > \"3.8\"", &t(Some("3.10"))),
            Ok(true)
        );
        assert_eq!(
            holds("python_version < '3.10'", &t(Some("3.10.14"))),
            Ok(false)
        );
        assert!(holds("extra == \"dev\"", &t(Some("3.10"))).is_err());
        assert!(holds("sys_platform ==", &t(None)).is_err());
    }
}
