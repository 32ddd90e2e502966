//! Command wiring: each subcommand connects the pure pipeline to files, the engine and the host.

pub mod image;
pub mod smoke_run;
pub mod test;
pub mod verdict;

use crate::cli::{Cli, Command};
use crate::diag::Failure;

/// Run one command; `Ok(code)` is the exit code of a command that ran to completion.
pub fn run(cli: Cli) -> Result<i32, Failure> {
    match cli.command {
        Command::Image(args) => image::run(args),
        Command::Test(args) => test::run(args),
        other => Err(Failure::bug(format!(
            "command {other:?} is not wired up in this build"
        ))),
    }
}
