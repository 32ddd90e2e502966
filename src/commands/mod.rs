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
mod output;
mod smoke;

pub use output::{json_text, Output};

use crate::app::load_table;
use crate::cli::{Cli, Command};
use crate::core::diag::{Diagnostic, Failure};

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
    let o = Output::new();
    let result = run_command(cli, &o);
    if let (Some((path, suite)), Err(failure)) = (&junit, &result) {
        if !o.junit_written() {
            let written = o.write_junit(path, &[verdicts::error_suite(suite, failure)]);
            // The run's own failure is what the exit code and stderr report.
            if let Err(e) = written {
                eprint_diagnostics(&e.diagnostics);
            }
        }
    }
    if let (Some(shape), Err(failure)) = (json, &result) {
        if !o.stdout_written() {
            o.print_json(&error_document(shape, &failure.diagnostics))?;
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
    let o = Output::new();
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
        let _ = o.print_json(&error_document(shape, &failure.diagnostics));
    }
    if let (Some(path), "image" | "test" | "smoke") = (&asked.junit, command) {
        let suite = format!("envbuild {command}");
        if let Err(f) = o.write_junit(path, &[verdicts::error_suite(&suite, &failure)]) {
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

fn run_command(cli: Cli, o: &Output) -> Result<i32, Failure> {
    let table = load_table(cli.table.as_deref())?;
    match cli.command {
        Command::Lock(args) => lock::run(o, &table, &args),
        Command::ShowTable(args) => table::run(o, &table, cli.table.as_deref(), &args),
        Command::Import(args) => import::run(o, &table, &args),
        Command::Smoke(args) => smoke::run(o, &table, &args),
        Command::Doctor(args) => doctor::run(o, &table, &args),
        Command::Render(args) => render::run(&table, &args),
        Command::Templates(cmd) => render::templates(&cmd),
        Command::Image(args) => image::run(o, &table, args),
        Command::Test(args) => test::run(o, &table, args),
        Command::Matrix(args) => matrix::run(o, &table, &args),
        Command::Explain(args) => explain::run(o, &table, &args),
        Command::Schema(_) => o
            .print_json(&crate::core::spec::schema::schema())
            .map(|()| crate::core::diag::exit::OK),
    }
}

/// Print diagnostics to stderr (warnings included).
pub fn eprint_diagnostics(diags: &[Diagnostic]) {
    crate::core::diag::eprint_all(diags, &mut std::io::stderr());
}

/// Colours only for a terminal, and never when `NO_COLOR` is set (no-color.org).
pub(crate) fn stdout_color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
