//! Diagnostics: the coded messages every command reports, and how they are printed.
//!
//! A diagnostic has a stable code (documented in docs/diagnostics.md), a severity, a message and, where
//! one exists, a hint naming a concrete working alternative. This module performs no I/O except
//! in [`Failure::eprint`]/[`eprint_all`], which write to a caller-supplied writer.

use crate::core::url::redact_text;
use serde::Serialize;
use std::fmt;
use std::io::Write;

/// A stable diagnostic code such as `DRIVER_TOO_OLD`. Codes are part of the CLI contract.
pub use crate::core::codes::Code;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// Where in a user's file a problem sits (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", printable(&self.file), self.line, self.column)
    }
}

/// A coded message. Printed ([`fmt::Display`]) and serialised (`--json`) with every URL's
/// secrets redacted (`core::url::redact_text`): a message may quote what the user wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub hint: Option<String>,
    pub location: Option<Location>,
    /// The spec key the diagnostic is about (`target.driver`), used to find its location.
    pub field: Option<String>,
}

impl Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 3 + usize::from(self.hint.is_some()) + usize::from(self.location.is_some());
        let mut st = s.serialize_struct("Diagnostic", fields)?;
        st.serialize_field("code", self.code)?;
        st.serialize_field("severity", &self.severity)?;
        st.serialize_field("message", &redact_text(&self.message))?;
        if let Some(h) = &self.hint {
            st.serialize_field("hint", &redact_text(h))?;
        }
        if let Some(l) = &self.location {
            st.serialize_field("location", l)?;
        }
        st.end()
    }
}

impl Diagnostic {
    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            message: message.into(),
            hint: None,
            location: None,
            field: None,
        }
    }

    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_location(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// uv-style: `error[CODE]: message`, an optional `  --> file:line:col`, then `hint: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = redact_text(&self.message);
        write!(f, "{}[{}]: {message}", self.severity, self.code)?;
        if let Some(loc) = &self.location {
            write!(f, "\n  --> {loc}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {}", redact_text(hint))?;
        }
        Ok(())
    }
}

/// `s` with control characters, Unicode line breaks and bidirectional overrides escaped (`\n`,
/// `\u{2028}`, `\u{202e}`), so a file name cannot end a message line, forge another diagnostic,
/// add lines to a file it is written into, or make a terminal show it reordered.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A path for a message: [`printable`] of its display form.
pub fn shown(path: &std::path::Path) -> String {
    printable(&path.display().to_string())
}

/// Process exit codes: the contract documented in the README, docs/commands.md and `--help`.
pub mod exit {
    /// Success (warnings allowed).
    pub const OK: i32 = 0;
    /// A user-facing failure: bad spec, incompatible combination, stale lock, failed check.
    pub const FAILURE: i32 = 1;
    /// Usage error, or an envbuild bug.
    pub const USAGE: i32 = 2;
}

/// Why a command failed: the diagnostics to show and the exit code to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub diagnostics: Vec<Diagnostic>,
    pub exit_code: i32,
}

impl Failure {
    /// A user-facing failure (exit 1) made of these diagnostics.
    pub fn new(diagnostics: Vec<Diagnostic>) -> Self {
        Failure {
            diagnostics,
            exit_code: exit::FAILURE,
        }
    }

    pub fn one(diagnostic: Diagnostic) -> Self {
        Failure::new(vec![diagnostic])
    }

    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>, hint: Option<String>) -> Self {
        let mut d = Diagnostic::error(codes::USAGE, message);
        d.hint = hint;
        Failure {
            diagnostics: vec![d],
            exit_code: exit::USAGE,
        }
    }

    /// An envbuild bug (exit 2): the user did nothing wrong.
    pub fn bug(message: impl Into<String>) -> Self {
        Failure {
            diagnostics: vec![Diagnostic::error(codes::INTERNAL, message).with_hint(
                "this is an envbuild bug, not a problem with your input; please report it",
            )],
            exit_code: exit::USAGE,
        }
    }

    /// Reading or writing a file failed.
    pub fn io(path: &std::path::Path, err: &std::io::Error) -> Self {
        let hint = match err.kind() {
            std::io::ErrorKind::NotFound => {
                "check the path (relative paths start from the current directory)"
            }
            std::io::ErrorKind::PermissionDenied => {
                "check the file's permissions, or run as a user who may access it"
            }
            _ => "check the path, its permissions and the free disk space",
        };
        Failure::one(
            Diagnostic::error(
                codes::IO_ERROR,
                format!("cannot access `{}`: {err}", shown(path)),
            )
            .with_hint(hint),
        )
    }

    pub fn eprint(&self, w: &mut dyn Write) {
        eprint_all(&self.diagnostics, w);
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// Print diagnostics, errors first, one blank line between them.
pub fn eprint_all(diagnostics: &[Diagnostic], w: &mut dyn Write) {
    let mut sorted: Vec<&Diagnostic> = diagnostics.iter().collect();
    sorted.sort_by_key(|d| d.severity);
    for d in sorted {
        let _ = writeln!(w, "{d}\n");
    }
}

/// Codes shared by every command, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::diag::*;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_what_could_end_a_line() {
        assert_eq!(
            printable("a\nb\rc\td\u{2028}e\u{1b}[31m"),
            "a\\nb\\rc\\td\\u{2028}e\\u{1b}[31m"
        );
        assert_eq!(printable("a\u{202e}lmth.toml"), "a\\u{202e}lmth.toml");
        assert_eq!(
            printable("plain/ünïcode path.toml"),
            "plain/ünïcode path.toml"
        );
        let loc = Location {
            file: "x\ny".into(),
            line: 1,
            column: 2,
        };
        assert_eq!(loc.to_string(), "x\\ny:1:2");
    }
}
