//! Command-line interface (clap derive). The doc comments here are the `--help` text; `parse`
//! holds the value parsers. This module performs no I/O.
//!
//! Flag names are shared: `--expect-file FILE` for an expectations file, `--lock LOCK` for a
//! lock, `--gpus all|none` for the smoke test's mode. Old spellings stay as hidden aliases for
//! one release (`test --expect FILE`, `smoke --expect gpu|cpu`).

pub mod parse;

/// What a command line asked for beyond the command itself, read from its words when the
/// parser refused them (so that `--json` still gets its one document and `--junit` its file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// The subcommand's name (`lock`, `image`, `table`), when one was given.
    pub command: Option<String>,
    pub json: bool,
    pub junit: Option<PathBuf>,
}

/// [`Requested`] from the raw arguments (the program name first). Global options that take a
/// value (`--table FILE`) are skipped with their value; nothing after `--` counts.
pub fn requested(args: &[std::ffi::OsString]) -> Requested {
    let mut out = Requested::default();
    let mut words = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned());
    while let Some(w) = words.next() {
        match w.as_str() {
            "--" => break,
            "--json" => out.json = true,
            "--table" if out.command.is_none() => {
                words.next();
            }
            "--junit" => out.junit = words.next().map(PathBuf::from),
            _ if w.starts_with("--junit=") => out.junit = Some(PathBuf::from(&w[8..])),
            _ if !w.starts_with('-') && out.command.is_none() => out.command = Some(w),
            _ => {}
        }
    }
    out
}

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The exit-code section of a `--help`: every command that lists its exit codes uses this one
/// layout and the same line for 2 (`before:`/`after:` add text around the section).
macro_rules! exit_codes {
    ($ok:literal, $fail:literal $(, after: $after:literal)?) => {
        concat!(
            "Exit codes:\n  0  ", $ok, "\n  1  ", $fail,
            "\n  2  usage error, or an envbuild bug" $(, "\n\n", $after)?
        )
    };
    (before: $before:literal, $ok:literal, $fail:literal) => {
        concat!($before, "\n\n", exit_codes!($ok, $fail))
    };
}

const AFTER_HELP: &str = exit_codes!(
    "success (warnings allowed)",
    "a user-facing failure: bad spec, incompatible combination, stale lock under --locked,\n     \
     failed build or smoke check",
    after: "Docs: docs/spec.md lists every spec key, docs/commands.md every command, docs/diagnostics.md every code, docs/environment.md every environment variable."
);

/// Declarative, pinned PyTorch/CUDA environments and images that are proven to use the GPU.
#[derive(Debug, Parser)]
#[command(name = "envbuild", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// Use this compatibility table instead of the embedded one (a TOML file of the same shape).
    #[arg(long, global = true, value_name = "FILE", env = "ENVBUILD_TABLE")]
    pub table: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Resolve a spec against the compatibility table and write `envbuild.lock`.
    Lock(LockArgs),
    /// Render environment.yml, the Dockerfile and run snippets from a spec or lock.
    Render(RenderArgs),
    /// Work with the embedded templates.
    #[command(subcommand)]
    Templates(TemplatesCommand),
    /// Build the image(s) through the Docker Engine API and smoke-test them in a container.
    Image(ImageArgs),
    /// Run the smoke test against an existing image, without building.
    Test(TestArgs),
    /// Print a CI matrix: one entry per spec, variant and platform, with its image tag.
    Matrix(MatrixArgs),
    /// Run the smoke test in a Python environment of yours.
    Smoke(SmokeArgs),
    /// Check this host (driver, GPUs, container GPU runtime) against a lock, or alone.
    Doctor(DoctorArgs),
    /// Show the compatibility table in force, or correct it from real builds (`table learn`).
    #[command(name = "table")]
    ShowTable(TableArgs),
    /// Turn a conda environment.yml into an envbuild spec.
    Import(ImportArgs),
    /// Print the spec's JSON Schema (draft 2020-12), for editors and validators.
    Schema(SchemaArgs),
    /// Show the candidates the resolver weighed for a spec's ranges, and the one it chose.
    Explain(ExplainArgs),
}

/// `explain --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    /// Aligned columns for a terminal.
    Table,
    /// A Markdown table, e.g. for a CI job summary.
    Markdown,
    /// The candidates and every verdict as one JSON document.
    Json,
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    before: "\
Each row is a candidate (torch release x build x Python) that satisfies the spec's ranges and
source, best first by the order docs/choosing.md gives; each column is a constraint: Python
support, the build the source publishes for the platform, the target driver, each target GPU,
and whether the whole spec locks with it. `ok` passes, `~` passes with a caveat the order
weighs, `no` fails, `-` was not reached. The chosen one is marked `*`.",
    "a candidate locks (the table shows the chosen one)",
    "the spec is invalid, or nothing locks (NO_MATCHING_BUILD)"
))]
pub struct ExplainArgs {
    /// The spec file (TOML, or YAML with the same keys).
    pub spec: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Table)]
    pub format: ExplainFormat,
    /// Show every candidate weighed (default: the best `--top` and the chosen one).
    #[arg(long)]
    pub all: bool,
    /// How many of the best candidates to show without `--all`.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Editors: `envbuild schema > envbuild.schema.json`, then `#:schema ./envbuild.schema.json` as the
first line of envbuild.toml (taplo / Even Better TOML), or
`# yaml-language-server: $schema=./envbuild.schema.json` in a YAML spec. The README shows more.")]
pub struct SchemaArgs {}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// The spec file (TOML, or YAML with the same keys).
    pub spec: PathBuf,
    /// Write the lock into this directory instead of beside the spec.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Do not write: exit 1, naming what would change, when the lock on disk is stale.
    #[arg(long)]
    pub locked: bool,
    /// Re-resolve the closure (and ask for the base image's digest again) even when nothing
    /// changed.
    #[arg(long, conflicts_with_all = ["locked", "offline"])]
    pub upgrade: bool,
    /// Re-resolve the closure letting only NAME move (repeatable); every other package keeps
    /// the lock's version.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["locked", "offline", "upgrade", "no_closure"])]
    pub upgrade_package: Vec<String>,
    /// No network: reuse the closure on disk, or solve a conda closure (no pip part) from the
    /// repodata cache; else fail.
    #[arg(long)]
    pub offline: bool,
    /// The table-level lock only (python, torch and its companions, the extras; no closure,
    /// no base digest unless `[lock] base-digest = true`): no network, milliseconds.
    #[arg(long)]
    pub no_closure: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// A spec (it is resolved first) or an `envbuild.lock`.
    pub input: PathBuf,
    /// Directory to write into (default: `render/` beside the input).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace files there that envbuild did not write (its own earlier output is replaced
    /// without it).
    #[arg(long)]
    pub force: bool,
    /// Templates that override the embedded ones (user file first, embedded copy as fallback).
    #[arg(long, value_name = "DIR", env = "ENVBUILD_TEMPLATES")]
    pub templates: Option<PathBuf>,
    /// Install the lock's pip part from this mirror of its main index (a simple index URL);
    /// the lock is unchanged, and its hashes check every file the mirror serves.
    // Checked by `parse::pip_mirror` in the command, not by clap, whose message would echo a
    // URL's credentials.
    #[arg(long, value_name = "URL", env = "ENVBUILD_PIP_MIRROR")]
    pub pip_mirror: Option<String>,
    /// Install the lock's conda packages from this mirror of their channels (a channel alias:
    /// `URL/CHANNEL/SUBDIR/FILE`); the lock is unchanged, and each file is checked against the
    /// lock's md5.
    // Checked by `parse::mirrors` in the command, as --pip-mirror is.
    #[arg(long, value_name = "URL", env = "ENVBUILD_CONDA_MIRROR")]
    pub conda_mirror: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Write the embedded templates into DIR as a starting point for `--templates`.
    Dump {
        dir: PathBuf,
        /// Write into DIR even when it is not empty (files of the same name are overwritten).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VariantArg {
    Runtime,
    Dev,
    All,
}

/// The smoke test's mode, on every command that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GpusArg {
    /// A GPU must be usable: every GPU check runs (a container requests every GPU).
    All,
    /// No GPU (GPU-less CI): run every check that needs no device.
    None,
}

/// `smoke --expect gpu|cpu`, the hidden old spelling of `--gpus all|none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpectArg {
    /// Same as `--gpus all`.
    Gpu,
    /// Same as `--gpus none`.
    Cpu,
}

impl ExpectArg {
    /// The `--gpus` value this old spelling stands for.
    pub fn gpus(self) -> GpusArg {
        match self {
            ExpectArg::Gpu => GpusArg::All,
            ExpectArg::Cpu => GpusArg::None,
        }
    }
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    "every image built and every required smoke check passed",
    "a build failed, a required smoke check failed, or the smoke test could not run\n     \
     (with several specs: in any of them; the others still ran unless --fail-fast)"
))]
pub struct ImageArgs {
    /// The spec file; or several, or folders (every `*/envbuild.toml` directly under a folder,
    /// sorted): each spec is built and tested, then one summary table, JUnit file or JSON
    /// document reports them all.
    #[arg(required = true, value_name = "SPEC|DIR")]
    pub specs: Vec<PathBuf>,
    /// With several specs: how many are built and tested at once (builds are heavy: 1 keeps
    /// one build's CPU, disk and memory at a time; raise it on a large machine).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// With several specs: after the first failure, stop the runs under way (their smoke
    /// containers are removed) and start no other.
    #[arg(long)]
    pub fail_fast: bool,
    /// Which variant(s) to build.
    #[arg(long, value_enum, default_value = "runtime")]
    pub variant: VariantArg,
    /// Re-resolve and rewrite the lock instead of failing when it is stale.
    #[arg(long)]
    pub update_lock: bool,
    /// Extra tag(s) for the built image.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Build even when the image envbuild built for this lock and content exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Run the smoke test even when this image already passed it on this engine.
    #[arg(long)]
    pub retest: bool,
    /// Shared memory for the smoke container (bytes, or with k/m/g), at least the lock's need.
    #[arg(long, default_value = "1g", value_name = "SIZE", value_parser = parse::size)]
    pub shm_size: u64,
    /// GPU request for the smoke-test container.
    #[arg(long, value_enum, default_value = "all")]
    pub gpus: GpusArg,
    /// Smoke-test time limit in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Templates that override the embedded ones.
    #[arg(long, value_name = "DIR", env = "ENVBUILD_TEMPLATES")]
    pub templates: Option<PathBuf>,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Show the full build log.
    #[arg(short, long)]
    pub verbose: bool,
    /// When to pull the base image: only when the engine lacks it, every time, or never
    /// (offline machines). By digest when the lock pins one.
    #[arg(long, value_enum, default_value = "missing")]
    pub pull: PullArg,
    /// Push each image that passed to REGISTRY/REPO:VARIANT-<lock hash12>, with its verdict
    /// beside it (tag `...verdict`); skip build and test when the registry already holds both.
    /// A fleet lock: pushed only when every platform passed, then one multi-platform index.
    #[arg(long, value_name = "REGISTRY/REPO", value_parser = parse::repository)]
    pub push: Option<crate::core::image_ref::Repository>,
    /// With BuildKit: reuse the layers of IMAGE (`REGISTRY/REPO:TAG`, pushed with an inline
    /// cache) as a build cache; repeatable. With --push, REGISTRY/REPO:VARIANT-cache is used too.
    #[arg(long = "cache-from", value_name = "IMAGE", value_parser = parse::cache_source)]
    pub cache_from: Vec<String>,
    /// Build only these platforms of a fleet lock (repeat the flag or give a comma list, e.g.
    /// `linux-aarch64`); default: every platform the lock holds.
    #[arg(long = "platform", value_name = "PLATFORM", value_delimiter = ',', value_parser = parse::image_platform)]
    pub platforms: Vec<crate::core::spec::Platform>,
    /// Build with pip installing the lock's pip part from this mirror of its main index (a
    /// simple index URL): a closure locked against PyPI builds behind a corporate mirror
    /// without a relock, every file checked against the lock's sha256.
    // Checked by `parse::pip_mirror` in the command, not by clap, whose message would echo a
    // URL's credentials.
    #[arg(long, value_name = "URL", env = "ENVBUILD_PIP_MIRROR")]
    pub pip_mirror: Option<String>,
    /// Install the lock's conda packages from this mirror of their channels (a channel alias:
    /// `URL/CHANNEL/SUBDIR/FILE`); the lock is unchanged, and each file is checked against the
    /// lock's md5.
    // Checked by `parse::mirrors` in the command, as --pip-mirror is.
    #[arg(long, value_name = "URL", env = "ENVBUILD_CONDA_MIRROR")]
    pub conda_mirror: Option<String>,
}

/// `matrix --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MatrixFormat {
    /// The `strategy.matrix` object (`{"include":[...]}`) on one line, for `fromJSON`.
    Github,
    /// A `parallel: matrix:` block (variables `ENVBUILD_SPEC`, `ENVBUILD_VARIANT`, ...).
    Gitlab,
    /// A pretty JSON document `{"matrix": [...]}`.
    Json,
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    before: "\
Every entry has: name, spec, variant, platform, gpus (`yes` when the smoke test needs a GPU
runner), image (the content-addressed tag `envbuild image` builds). Locks must be current (as
`lock --locked`); nothing is written. docs/ci.md shows GitHub Actions and GitLab CI workflows.",
    "the matrix was printed",
    "a spec or its lock is missing, invalid or stale"
))]
pub struct MatrixArgs {
    /// Spec files, or folders (every `*/envbuild.toml` directly under a folder, sorted).
    #[arg(required = true, value_name = "SPEC|DIR")]
    pub specs: Vec<PathBuf>,
    /// The CI system the matrix is for (default: JSON, for scripts and any other CI).
    #[arg(long, value_enum, default_value_t = MatrixFormat::Json)]
    pub format: MatrixFormat,
    /// Only this variant (default: every variant each lock declares).
    #[arg(long, value_enum)]
    pub variant: Option<MatrixVariant>,
    /// Add `pushed`: the name `image --push REGISTRY/REPO` gives each image in the registry
    /// (and for a fleet, `index`: the image index of its platforms).
    #[arg(long, value_name = "REGISTRY/REPO", value_parser = parse::repository)]
    pub repo: Option<crate::core::image_ref::Repository>,
    /// The templates `image` builds with (they are part of each image's tag), as `image
    /// --templates`.
    #[arg(long, value_name = "DIR", env = "ENVBUILD_TEMPLATES")]
    pub templates: Option<PathBuf>,
}

/// `matrix --variant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MatrixVariant {
    Runtime,
    Dev,
}

/// `--pull`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PullArg {
    Missing,
    Always,
    Never,
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    "every required smoke check passed (warnings allowed)",
    "a required smoke check failed, or the smoke test could not run"
))]
pub struct TestArgs {
    /// The image to test (name:tag or id).
    pub image: String,
    /// Check the image against this lock's expectations.
    #[arg(long, value_name = "LOCK", conflicts_with = "expect_file")]
    pub lock: Option<PathBuf>,
    /// Check the image against an expectations JSON file (the same one `envbuild smoke` reads).
    // `--expect FILE` was this flag's name before every command said `--expect-file`.
    #[arg(long, value_name = "FILE", alias = "expect")]
    pub expect_file: Option<PathBuf>,
    /// GPU request for the smoke-test container.
    #[arg(long, value_enum, default_value = "all")]
    pub gpus: GpusArg,
    /// Smoke-test time limit in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Shared memory for the smoke container (bytes, or with k/m/g), at least the lock's need.
    #[arg(long, default_value = "1g", value_name = "SIZE", value_parser = parse::size)]
    pub shm_size: u64,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run nothing: read IMAGE's verdict (`REGISTRY/REPO:TAG`, pushed by `image --push`) from
    /// the registry and print it, saying for which digest and mode it holds.
    #[arg(long, conflicts_with_all = ["lock", "expect_file", "junit"])]
    pub show_verdict: bool,
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    "every required check passed (warnings allowed)",
    "a required check failed, or the smoke test could not run",
    after: "Every check, code and the expectations file are described in docs/smoke.md."
))]
pub struct SmokeArgs {
    /// Check against this lock's expectations.
    #[arg(long, value_name = "LOCK", conflicts_with = "expect_file")]
    pub lock: Option<PathBuf>,
    /// Check against an expectations JSON file (torch, cuda, cudnn, nccl, arch_list, python,
    /// packages, min_shm_bytes; see docs/smoke.md).
    #[arg(long, value_name = "FILE")]
    pub expect_file: Option<PathBuf>,
    /// The Python interpreter of the environment to test.
    #[arg(long, default_value = "python3", value_name = "PATH")]
    pub python: String,
    /// Whether a GPU must be usable (`all`) or the run is GPU-less CI (`none`).
    #[arg(long, value_enum, default_value = "all")]
    pub gpus: GpusArg,
    /// The old spelling of `--gpus`: `gpu` is `all`, `cpu` is `none`.
    #[arg(long, value_enum, hide = true, conflicts_with = "gpus")]
    pub expect: Option<ExpectArg>,
    /// Print the JSON report on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the embedded smoke-test script and exit.
    #[arg(long)]
    pub print_script: bool,
    /// Time limit in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    before: "\
Probe overrides (environment):
  ENVBUILD_DRIVER_VERSION       the driver version, or `none`
  ENVBUILD_CUDA_DRIVER_VERSION  the highest CUDA the driver supports
  ENVBUILD_GPUS                 GPU models or compute capabilities, e.g. `A100,8.9`, or `none`
  ENVBUILD_NO_NVML=1            do not load libnvidia-ml.so.1
  ENVBUILD_NVIDIA_SMI           the nvidia-smi to run, or `none`
  ENVBUILD_PROC_DRIVER_VERSION  read this file instead of /proc/driver/nvidia/version",
    "the host passes (warnings allowed)",
    "a check failed (for example no driver)"
))]
pub struct DoctorArgs {
    /// Start a container from this image with a GPU request to prove the engine gives GPUs
    /// (default: the newest image envbuild built on the engine, if any).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Check whether this lock's build runs here.
    #[arg(long, value_name = "LOCK", conflicts_with = "expect_file")]
    pub lock: Option<PathBuf>,
    /// Check against an expectations JSON file (the same one `envbuild smoke` reads).
    #[arg(long, value_name = "FILE")]
    pub expect_file: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TableSection {
    Torch,
    Cuda,
    Gpu,
    Python,
    Channels,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TableArgs {
    #[command(subcommand)]
    pub command: Option<TableCommand>,
    /// Which part to show (default: a summary of every part).
    #[arg(value_enum)]
    pub section: Option<TableSection>,
    /// Print as JSON on stdout.
    #[arg(long, conflicts_with = "toml")]
    pub json: bool,
    /// Print the whole table as TOML (a starting point for `--table FILE`).
    #[arg(long, conflicts_with = "section")]
    pub toml: bool,
}

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Turn passing smoke reports into a corrected table for `--table FILE`.
    Learn(LearnArgs),
}

#[derive(Debug, Args)]
#[command(after_help = exit_codes!(
    before: "\
Writes the whole table in force (the embedded one, or `--table FILE`) with the rows the reports
describe corrected and marked `observed`: the wheel's GPU architectures, PTX, cuDNN and NCCL,
the release's Pythons and glibc floor. Learns from PyPI and PyTorch-index wheels on Linux x86_64.",
    "the table was written",
    "a report did not pass, lacks a fact, or contradicts another"
))]
pub struct LearnArgs {
    /// `--json` output of `envbuild smoke`, `envbuild test` or `envbuild image`.
    #[arg(required = true, value_name = "REPORT.json")]
    pub reports: Vec<PathBuf>,
    /// Write the table here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The day of reports that carry no date (YYYY-MM-DD).
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = parse::date)]
    pub date: Option<String>,
    /// The image of reports that do not name one (`envbuild smoke --json` ran outside an image).
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A conda environment.yml (hand-written or from `conda env export`), or a pip
    /// requirements file (a name ending in `.txt`).
    pub file: PathBuf,
    /// Write the spec here instead of stdout (refuses to overwrite without --force).
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite the output file.
    #[arg(long)]
    pub force: bool,
    /// Lowest NVIDIA driver on the target machines (`[target] driver`).
    #[arg(long)]
    pub driver: Option<String>,
    /// Target GPU (repeatable; `[target] gpus`).
    #[arg(long = "gpu", value_name = "GPU")]
    pub gpus: Vec<String>,
    /// The Python of a requirements.txt, which cannot name one (e.g. `3.11`).
    #[arg(long, value_name = "X.Y")]
    pub python: Option<String>,
}
