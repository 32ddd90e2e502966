//! Command wiring: each subcommand connects the pure pipeline to files, the engine and the host.

mod doctor;
mod smoke;

use crate::cli::{Cli, Command};
use crate::diag::Failure;

/// Run one command; `Ok(code)` is the exit code of a command that ran to completion.
pub fn run(cli: Cli) -> Result<i32, Failure> {
    match cli.command {
        Command::Smoke(args) => smoke::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        other => Err(Failure::bug(format!(
            "command {other:?} is not wired up in this build"
        ))),
    }
}

/// Colours only for a terminal, and never when `NO_COLOR` is set (no-color.org).
pub(crate) fn stdout_color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `--lock` lands with the lock type; until then it is a usage error that names the way round.
pub(crate) fn lock_not_yet(flag_owner: &str) -> Failure {
    Failure::usage(
        format!("`envbuild {flag_owner} --lock` is not available yet: lock support lands with the lock format"),
        Some("pass the expectations directly with `--expect-file FILE` (see docs/smoke.md)".into()),
    )
}

/// Read and parse an `--expect-file`.
pub(crate) fn read_expectations(
    path: &std::path::Path,
) -> Result<crate::smoke::Expectations, Failure> {
    let text = crate::fsutil::read_text(path)?;
    crate::smoke::Expectations::from_json(&text, &path.display().to_string())
}
