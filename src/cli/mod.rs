//! Command-line interface (clap derive). The doc comments here are the `--help` text.
//! This module performs no I/O.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Exit codes:
  0  success (warnings allowed)
  1  a user-facing failure: bad spec, incompatible combination, stale lock under --locked,
     failed build or smoke check
  2  usage error, or an envbuild bug

Docs: the README lists every spec key, command, diagnostic code and environment variable.";

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
    /// Run the smoke test in a Python environment of yours.
    Smoke(SmokeArgs),
    /// Check this host (driver, GPUs, container GPU runtime) against a lock, or alone.
    Doctor(DoctorArgs),
    /// Show the embedded compatibility table.
    #[command(name = "table")]
    ShowTable(TableArgs),
    /// Turn a conda environment.yml into an envbuild spec.
    Import(ImportArgs),
}

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
    /// Templates that override the embedded ones (user file first, embedded copy as fallback).
    #[arg(long, value_name = "DIR", env = "ENVBUILD_TEMPLATES")]
    pub templates: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Write the embedded templates into DIR as a starting point for `--templates`.
    Dump {
        dir: PathBuf,
        /// Overwrite files that already exist.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GpusArg {
    /// Request every GPU (`docker run --gpus all`).
    All,
    /// No GPU: run the GPU-less checks only.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpectArg {
    /// A GPU must be usable.
    Gpu,
    /// No GPU here: check everything that can be checked without one.
    Cpu,
}

#[derive(Debug, Args)]
pub struct ImageArgs {
    /// The spec file.
    pub spec: PathBuf,
    /// Which variant(s) to build.
    #[arg(long, value_enum, default_value = "runtime")]
    pub variant: VariantArg,
    /// Re-resolve and rewrite the lock instead of failing when it is stale.
    #[arg(long)]
    pub update_lock: bool,
    /// Extra tag(s) for the built image.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Build even when an image with the same lock hash exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Run the smoke test even when this image already passed it on this engine.
    #[arg(long)]
    pub retest: bool,
    /// Shared memory for the smoke container (bytes, or with k/m/g), at least the lock's need.
    #[arg(long, default_value = "1g", value_name = "SIZE", value_parser = parse_size)]
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
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The image to test (name:tag or id).
    pub image: String,
    /// Check the image against this lock's expectations.
    #[arg(long, value_name = "LOCK", conflicts_with = "expect")]
    pub lock: Option<PathBuf>,
    /// Check the image against these expectations (the smoke test's `expect.json` format).
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// GPU request for the smoke-test container.
    #[arg(long, value_enum, default_value = "all")]
    pub gpus: GpusArg,
    /// Smoke-test time limit in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Shared memory for the smoke container (bytes, or with k/m/g), at least the lock's need.
    #[arg(long, default_value = "1g", value_name = "SIZE", value_parser = parse_size)]
    pub shm_size: u64,
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// `1073741824`, `512m`, `2g`, `64k` (binary units, as `docker run --shm-size`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1u64 << 20),
        Some('g') => (&t[..t.len() - 1], 1u64 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size such as 1073741824, 512m or 2g"))?;
    n.checked_mul(mult)
        .filter(|v| *v > 0 && *v <= i64::MAX as u64)
        .ok_or_else(|| format!("`{s}` is not a usable size"))
}

#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes: 0 every required check passed (warnings allowed), 1 a required check failed or the
test could not run, 2 usage error.

Every check, code and the expectations file are described in docs/smoke.md.")]
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
    /// `cpu` for GPU-less CI: run every check that needs no device.
    #[arg(long, value_enum, default_value = "gpu")]
    pub expect: ExpectArg,
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
#[command(after_help = "\
Probe overrides (environment):
  ENVBUILD_DRIVER_VERSION       the driver version, or `none`
  ENVBUILD_CUDA_DRIVER_VERSION  the highest CUDA the driver supports
  ENVBUILD_GPUS                 GPU models or compute capabilities, e.g. `A100,8.9`, or `none`
  ENVBUILD_NO_NVML=1            do not load libnvidia-ml.so.1
  ENVBUILD_NVIDIA_SMI           the nvidia-smi to run, or `none`
  ENVBUILD_PROC_DRIVER_VERSION  read this file instead of /proc/driver/nvidia/version

Exit codes: 0 the host passes (warnings allowed), 1 a check failed (for example no driver),
2 usage error.")]
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
pub struct TableArgs {
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

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A conda environment.yml (for example from `conda env export`).
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
}
