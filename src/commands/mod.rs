//! Command wiring: each subcommand connects the pure pipeline to files, the engine and the host.
//! This module and its children perform I/O (files, stdout/stderr, the engine, the host).

mod image;
mod import;
mod lock;
mod matrix;
mod render;
mod table;
mod test;

pub mod verdicts;

mod doctor;
mod explain;
mod smoke;

use crate::app::load_table;
use crate::cli::{Cli, Command};
use crate::core::diag::{Diagnostic, Failure};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether anything reached stdout: `run` adds an error document only to a run that printed
/// none, so `--json` gives exactly one.
static STDOUT_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Whether the command wrote its `--junit` file: `run` writes one for a failure only when the
/// command did not, so CI always finds the file it asked for.
static JUNIT_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Run one command; `Ok(code)` is the exit code of a command that ran to completion.
///
/// With `--json`, every run prints exactly one JSON document on stdout: a command that fails
/// before printing its own (an unreadable spec, table or lock, an engine that does not answer, a
/// Python that cannot start) gets the error document here. The failure still goes to stderr.
///
/// Likewise with `--junit FILE`, every run that fails writes the file: a failure before the
/// command wrote its own (a bad spec, lock, table or expectations file, an engine that does not
/// answer, a Python that cannot start) gets one failing test case naming the code and message.
pub fn run(cli: Cli) -> Result<i32, Failure> {
    let json = json_requested(&cli.command);
    let junit = junit_requested(&cli.command);
    let result = run_command(cli);
    if let (Some((path, suite)), Err(failure)) = (&junit, &result) {
        if !JUNIT_WRITTEN.load(Ordering::Relaxed) {
            let written = write_junit(path, &[verdicts::error_suite(suite, failure)]);
            // The run's own failure is what the exit code and stderr report.
            if let Err(e) = written {
                eprint_diagnostics(&e.diagnostics);
            }
        }
    }
    if let (Some(shape), Err(failure)) = (json, &result) {
        if !STDOUT_WRITTEN.load(Ordering::Relaxed) {
            print_json(&error_document(shape, &failure.diagnostics))?;
        }
    }
    result
}

/// A command line the parser refused (exit 2): clap's message on stderr (help and version go
/// to stdout, exit 0), and, as for any other failure, the one `--json` error document in the
/// command's shape and the `--junit` file. Returns the exit code.
pub fn refused_arguments(args: &[std::ffi::OsString], e: &clap::Error) -> i32 {
    use crate::core::diag::exit;
    let _ = e.print();
    if !e.use_stderr() {
        return exit::OK;
    }
    let asked = crate::cli::requested(args);
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("the arguments were refused");
    let command = asked.command.as_deref().unwrap_or("");
    let failure = Failure::usage(
        first.strip_prefix("error: ").unwrap_or(first).to_string(),
        Some(format!("see `envbuild {command} --help`").replace("  ", " ")),
    );
    let shape = match command {
        "lock" => Some(JsonShape::Lock),
        "image" | "test" | "smoke" | "doctor" | "table" => Some(JsonShape::Verdict),
        _ => None,
    };
    if let (true, Some(shape)) = (asked.json, shape) {
        let _ = print_json(&error_document(shape, &failure.diagnostics));
    }
    if let (Some(path), "image" | "test" | "smoke") = (&asked.junit, command) {
        let suite = format!("envbuild {command}");
        if let Err(f) = write_junit(path, &[verdicts::error_suite(&suite, &failure)]) {
            eprint_diagnostics(&f.diagnostics);
        }
    }
    exit::USAGE
}

/// `--junit FILE` and the name of the suite an early failure is reported under.
fn junit_requested(command: &Command) -> Option<(std::path::PathBuf, String)> {
    let (path, suite) = match command {
        Command::Image(a) => (
            a.junit.as_ref(),
            format!(
                "envbuild image {}",
                a.specs
                    .iter()
                    .map(|s| crate::core::diag::shown(s))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ),
        Command::Test(a) => (a.junit.as_ref(), a.image.clone()),
        Command::Smoke(a) => (a.junit.as_ref(), "envbuild.smoke".to_string()),
        _ => (None, String::new()),
    };
    path.map(|p| (p.clone(), suite))
}

/// Write the JUnit file (atomically: see `infra::fs::write_atomic`); every `--junit` write goes
/// through here.
pub fn write_junit(
    path: &std::path::Path,
    suites: &[crate::core::report::Suite<'_>],
) -> Result<(), Failure> {
    let xml = crate::core::report::junit_xml(suites)?;
    crate::infra::fs::write_atomic(path, xml.as_bytes())?;
    JUNIT_WRITTEN.store(true, Ordering::Relaxed);
    Ok(())
}

/// The shape of a command's `--json` document, when `--json` was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonShape {
    /// `lock`: `{"status", "diagnostics", "lock"}`.
    Lock,
    /// `image`, `test`, `smoke`, `doctor`, `table`: `{"verdict": "error", "error": [...]}`, as
    /// `image` and `test` print for a run that ended before a verdict.
    Verdict,
}

fn json_requested(command: &Command) -> Option<JsonShape> {
    let (json, shape) = match command {
        Command::Lock(a) => (a.json, JsonShape::Lock),
        Command::Image(a) => (a.json, JsonShape::Verdict),
        Command::Test(a) => (a.json, JsonShape::Verdict),
        Command::Smoke(a) => (a.json, JsonShape::Verdict),
        Command::Doctor(a) => (a.json, JsonShape::Verdict),
        Command::ShowTable(a) => (a.json, JsonShape::Verdict),
        Command::Import(_)
        | Command::Render(_)
        | Command::Templates(_)
        | Command::Matrix(_)
        | Command::Schema(_)
        | Command::Explain(_) => (false, JsonShape::Verdict),
    };
    json.then_some(shape)
}

fn error_document(shape: JsonShape, diagnostics: &[Diagnostic]) -> serde_json::Value {
    match shape {
        JsonShape::Lock => serde_json::json!({
            "status": "error",
            "diagnostics": diagnostics,
            "lock": null,
        }),
        JsonShape::Verdict => serde_json::json!({
            "verdict": "error",
            "error": diagnostics,
        }),
    }
}

fn run_command(cli: Cli) -> Result<i32, Failure> {
    let table = load_table(cli.table.as_deref())?;
    match cli.command {
        Command::Lock(args) => lock::run(&table, &args),
        Command::ShowTable(args) => table::run(&table, cli.table.as_deref(), &args),
        Command::Import(args) => import::run(&table, &args),
        Command::Smoke(args) => smoke::run(&table, &args),
        Command::Doctor(args) => doctor::run(&table, &args),
        Command::Render(args) => render::run(&table, &args),
        Command::Templates(cmd) => render::templates(&cmd),
        Command::Image(args) => image::run(&table, args),
        Command::Test(args) => test::run(&table, args),
        Command::Matrix(args) => matrix::run(&table, &args),
        Command::Explain(args) => explain::run(&table, &args),
        Command::Schema(_) => json_text(&crate::core::spec::schema::schema()).and_then(|t| {
            out(&t)?;
            Ok(crate::core::diag::exit::OK)
        }),
    }
}

/// Print diagnostics to stderr (warnings included).
pub fn eprint_diagnostics(diags: &[Diagnostic]) {
    crate::core::diag::eprint_all(diags, &mut std::io::stderr());
}

/// Print a JSON value on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    out(&json_text(value)?)
}

/// A JSON document as printed: pretty, with a final newline.
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    let s = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::bug(format!("cannot serialise JSON: {e}")))?;
    Ok(s + "\n")
}

/// Every byte envbuild prints on stdout goes through here. A closed pipe (`| head -c1`) ends
/// the output quietly and the command keeps its exit code; any other write error (`> /dev/full`)
/// is an `IO_ERROR`, never a panic.
pub fn out(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    if !text.is_empty() {
        STDOUT_WRITTEN.store(true, Ordering::Relaxed);
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::io(std::path::Path::new("<stdout>"), &e)),
    }
}

/// Colours only for a terminal, and never when `NO_COLOR` is set (no-color.org).
pub(crate) fn stdout_color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
