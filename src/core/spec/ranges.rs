//! Version requirements of the core keys (`python`, `pytorch`, the CUDA selector, the
//! companions) when a spec gives a range instead of an exact version: PEP 440 specifiers for
//! the pip sources (parsed by `pep440_rs`, as pip and uv read them), conda match-spec versions
//! for the conda sources (parsed by rattler, as conda and pixi read them), and "any" (the key
//! present without a version, `"*"`, `latest`). The resolver chooses the version
//! (`core::resolve`); this module only says what satisfies what. This module performs no I/O.

use crate::core::version::Version;
use serde::Serialize;
use std::str::FromStr;

/// Which grammar a requirement is written in: the one of the tool that installs torch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    /// PEP 440 version specifiers (`>=2.3,<2.5`, `~=2.5.0`, `==2.5.*`): the pip sources.
    Pep440,
    /// conda match-spec versions (`>=2.3,<2.5a0`, `2.0.*`, `> 2.0.0`): the conda sources.
    Conda,
}

impl Syntax {
    pub fn as_str(self) -> &'static str {
        match self {
            Syntax::Pep440 => "PEP 440",
            Syntax::Conda => "conda match-spec",
        }
    }
}

/// A requirement on one core key, as written, checked when the spec was validated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Req {
    /// As written (trimmed); empty when the key was given without a version.
    pub written: String,
    pub syntax: Syntax,
}

/// Spellings of "any version": the key present without one.
fn is_any(s: &str) -> bool {
    s.is_empty() || s == "*" || s.eq_ignore_ascii_case("latest") || s.eq_ignore_ascii_case("any")
}

impl Req {
    /// Any version: the key given without one (or a CUDA selector not given at all).
    pub fn any(syntax: Syntax) -> Req {
        Req {
            written: String::new(),
            syntax,
        }
    }

    /// Parse a requirement in `syntax`; the error says why it is not one. A bare version that
    /// is not exact enough for its key (`pytorch = "2.5"`) means that series (`2.5.*`).
    pub fn parse(s: &str, syntax: Syntax) -> Result<Req, String> {
        let written = s.trim().to_string();
        let req = Req { written, syntax };
        if req.is_any() {
            return Ok(req);
        }
        if req.written.len() > 100 {
            return Err("is longer than 100 characters".into());
        }
        match syntax {
            Syntax::Pep440 => pep440(&req.effective()).map(|_| ()),
            Syntax::Conda => conda(&req.effective()).map(|_| ()),
        }?;
        Ok(req)
    }

    /// Whether any version satisfies it.
    pub fn is_any(&self) -> bool {
        is_any(&self.written)
    }

    /// The text handed to the parser: a bare version becomes its series.
    fn effective(&self) -> String {
        let t = self.written.as_str();
        if Version::parse(t).is_some() {
            return match self.syntax {
                Syntax::Pep440 => format!("=={t}.*"),
                Syntax::Conda => format!("{t}.*"),
            };
        }
        match self.syntax {
            // conda writes `> 2.0.0` as often as `>2.0.0`; rattler wants the operator joined.
            Syntax::Conda => t.split_whitespace().collect(),
            Syntax::Pep440 => t.to_string(),
        }
    }

    /// Whether `v` (a table version: a final release, `major.minor` or longer) satisfies it.
    pub fn matches(&self, v: &Version) -> bool {
        if self.is_any() {
            return true;
        }
        let eff = self.effective();
        match self.syntax {
            Syntax::Pep440 => match (pep440(&eff), pep440_rs::Version::from_str(v.as_str())) {
                (Ok(spec), Ok(ver)) => spec.contains(&ver),
                _ => false,
            },
            Syntax::Conda => {
                let ver = rattler_conda_types::Version::from_str(v.as_str());
                match (conda(&eff), ver) {
                    (Ok(spec), Ok(ver)) => spec.matches(&ver),
                    _ => false,
                }
            }
        }
    }

    /// How it reads in a message: `>= 1.13`, or `(any)`.
    pub fn shown(&self) -> String {
        if self.written.is_empty() {
            "(any)".into()
        } else {
            self.written.clone()
        }
    }
}

fn pep440(s: &str) -> Result<pep440_rs::VersionSpecifiers, String> {
    pep440_rs::VersionSpecifiers::from_str(s).map_err(|e| {
        format!(
            "is not a PEP 440 version specifier ({})",
            first_line(&e.to_string())
        )
    })
}

fn conda(s: &str) -> Result<rattler_conda_types::VersionSpec, String> {
    rattler_conda_types::VersionSpec::from_str(s, rattler_conda_types::ParseStrictness::Lenient)
        .map_err(|e| {
            format!(
                "is not a conda version spec ({})",
                first_line(&e.to_string())
            )
        })
}

/// The first line of a parser's message (the rest draws a caret under the input).
fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(':')
        .to_string()
}

/// What a spec asked for where it gave no exact version, by core key; empty for an exact spec
/// (then left out of the canonical JSON, so exact specs keep their hash).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Asked {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<Req>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pytorch: Option<Req>,
    /// The CUDA selector of the source (`pytorch-cuda` or `cuda`), a range or absent (then any:
    /// the build for the target's driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<Req>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torchvision: Option<Req>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torchaudio: Option<Req>,
}

impl Asked {
    pub fn is_empty(&self) -> bool {
        self.python.is_none()
            && self.pytorch.is_none()
            && self.selector.is_none()
            && self.torchvision.is_none()
            && self.torchaudio.is_none()
    }
}

/// One choice the resolver made for a range, as the lock's `[choices]` records it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The requirement as written (`>= 1.13`, `(any)`).
    pub asked: String,
    pub chosen: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn ok(s: &str, syntax: Syntax, yes: &[&str], no: &[&str]) {
        let r = Req::parse(s, syntax).unwrap_or_else(|e| panic!("{s}: {e}"));
        for y in yes {
            assert!(r.matches(&v(y)), "{s} should match {y}");
        }
        for n in no {
            assert!(!r.matches(&v(n)), "{s} should not match {n}");
        }
    }

    #[test]
    fn pep440_ranges_select_as_pip_does() {
        let p = Syntax::Pep440;
        ok(">=1.13", p, &["1.13.0", "2.5.1"], &["1.12.1"]);
        ok(">= 1.13, <2.4", p, &["2.3.1"], &["2.4.0"]);
        ok("~=2.5.0", p, &["2.5.1"], &["2.6.0"]);
        ok("==2.5.*", p, &["2.5.1"], &["2.6.0"]);
        ok("2.5", p, &["2.5.0", "2.5.1"], &["2.6.0"]);
        ok(">=3.9,!=3.13", p, &["3.12"], &["3.13", "3.8"]);
        ok("<2.5a0", p, &["2.4.1"], &["2.5.0"]);
        ok("latest", p, &["1.0.0"], &[]);
        ok("*", p, &["1.0.0"], &[]);
        assert!(Req::parse("", p).unwrap().is_any());
        assert!(Req::parse("^2.1", p).is_err());
        assert!(Req::parse(">=2.1;", p).is_err());
    }

    #[test]
    fn conda_ranges_select_as_conda_does() {
        let c = Syntax::Conda;
        ok(">=2.3,<2.5a0", c, &["2.3.0", "2.4.1"], &["2.5.0", "2.2.2"]);
        ok("2.0.*", c, &["2.0.1"], &["2.1.0"]);
        ok("> 2.0.0", c, &["2.0.1", "2.5.1"], &["2.0.0"]);
        ok(">=11.7", c, &["11.8", "12.1"], &["11.6"]);
        ok("=2.4", c, &["2.4.1"], &["2.5.0"]);
        ok("2.4", c, &["2.4.0", "2.4.1"], &["2.5.0"]);
        ok("latest", c, &["1.0"], &[]);
        assert!(Req::parse(">=2.3,<", c).is_err());
    }
}
