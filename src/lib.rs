//! envbuild: a declarative, pinned PyTorch/CUDA environment spec, resolved against an embedded
//! compatibility table into a reproducible lock, rendered into environment.yml and Dockerfiles,
//! built through the Docker Engine API and proven to use the GPU by an embedded smoke test.
//!
//! Layers, arrows down only (ARCHITECTURE.md): `core` (spec, compat, resolve, lock, render,
//! `doctor`'s judgement; performs no I/O), `infra` (the effects: files, the Docker engine, host
//! probes, child processes, indexes and channels), `app` (the use cases), `cli` (argument
//! parsing) and `commands` (printing and exit codes).

// Diagnostics are returned by value on cold error paths; boxing them buys nothing here.
#![allow(clippy::result_large_err)]

pub mod app;
pub mod cli;
pub mod commands;
pub mod core;
pub mod infra;
