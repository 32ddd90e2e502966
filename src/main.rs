//! Thin entry point: parse arguments, run the command, map the outcome to an exit code.

use clap::Parser;

fn main() {
    let cli = match envbuild::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0 and usage errors with exit 2.
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                envbuild::core::diag::exit::USAGE
            } else {
                envbuild::core::diag::exit::OK
            });
        }
    };
    let code = match envbuild::commands::run(cli) {
        Ok(code) => code,
        Err(failure) => {
            failure.eprint(&mut std::io::stderr());
            failure.exit_code
        }
    };
    std::process::exit(code);
}
