//! Thin entry point: parse arguments, run the command, map the outcome to an exit code.

use clap::Parser;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match envbuild::cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // Help and version: stdout, exit 0; a refused command line: exit 2, with `--json`'s
        // error document and `--junit`'s file as for any other failure.
        Err(e) => std::process::exit(envbuild::commands::refused_arguments(&args, &e)),
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
