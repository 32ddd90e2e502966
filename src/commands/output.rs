//! The printer of one run, which remembers what it wrote: stdout and the `--junit` file. Every
//! byte envbuild prints on stdout and every JUnit file go through one [`Output`], made by
//! `commands::run` and handed to the command, so that `run` adds the `--json` error document or
//! the failing JUnit file only where the command wrote none. Performs I/O: stdout and the JUnit
//! file.

use crate::core::diag::Failure;
use std::cell::Cell;
use std::path::Path;

/// What one run wrote so far. Commands print from the main thread only (the runs of
/// `image_many` report through events), so plain cells do.
#[derive(Debug, Default)]
pub struct Output {
    /// Whether anything reached stdout: `run` adds an error document only to a run that
    /// printed none, so `--json` gives exactly one.
    stdout_written: Cell<bool>,
    /// Whether the command wrote its `--junit` file: `run` writes one for a failure only when
    /// the command did not, so CI always finds the file it asked for.
    junit_written: Cell<bool>,
}

impl Output {
    pub fn new() -> Output {
        Output::default()
    }

    pub fn stdout_written(&self) -> bool {
        self.stdout_written.get()
    }

    pub fn junit_written(&self) -> bool {
        self.junit_written.get()
    }

    /// Print `text` on stdout. A closed pipe (`| head -c1`) ends the output quietly and the
    /// command keeps its exit code; any other write error (`> /dev/full`) is an `IO_ERROR`,
    /// never a panic.
    pub fn out(&self, text: &str) -> Result<(), Failure> {
        use std::io::Write;
        if !text.is_empty() {
            self.stdout_written.set(true);
        }
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(Failure::io(Path::new("<stdout>"), &e)),
        }
    }

    /// Print a JSON value on stdout (see [`json_text`]).
    pub fn print_json<T: serde::Serialize>(&self, value: &T) -> Result<(), Failure> {
        self.out(&json_text(value)?)
    }

    /// Write the JUnit file (atomically: see `infra::fs::write_atomic`); every `--junit` write
    /// goes through here.
    pub fn write_junit(
        &self,
        path: &Path,
        suites: &[crate::core::report::Suite<'_>],
    ) -> Result<(), Failure> {
        let xml = crate::core::report::junit_xml(suites)?;
        crate::infra::fs::write_atomic(path, xml.as_bytes())?;
        self.junit_written.set(true);
        Ok(())
    }
}

/// A JSON document as printed: pretty, with a final newline.
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    let s = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::bug(format!("cannot serialise JSON: {e}")))?;
    Ok(s + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_it_wrote() {
        let o = Output::new();
        assert!(!o.stdout_written() && !o.junit_written());
        o.out("").unwrap();
        assert!(!o.stdout_written(), "nothing printed, nothing written");
        let dir = std::env::temp_dir().join(format!("envbuild-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("junit.xml");
        o.write_junit(&path, &[]).unwrap();
        assert!(o.junit_written());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("<testsuites"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
