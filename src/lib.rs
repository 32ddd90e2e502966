//! envbuild: a declarative, pinned PyTorch/CUDA environment spec, resolved against an embedded
//! compatibility table into a reproducible lock, rendered into environment.yml and Dockerfiles,
//! built through the Docker Engine API and proven to use the GPU by an embedded smoke test.
//!
//! The pipeline's pure core (spec, compat, resolve, lock, render, `doctor`'s judgement) performs
//! no I/O; the modules that touch the world are `fsutil` (files), `docker` (the engine), `host`
//! (driver/GPU probes), `proc` (child processes with a time limit), `smoke` (runs Python, in
//! `run_script` only) and `commands` (wiring).

// Diagnostics are returned by value on cold error paths; boxing them buys nothing here.
#![allow(clippy::result_large_err)]

pub mod app;
pub mod cli;
pub mod commands;
pub mod core;
pub mod infra;
