//! envbuild's integration tests: one binary, one module per area. They run the real binary (and,
//! for the smoke test, a real Python; torch is replaced by the stand-in that
//! `tests/fixtures/fake_torch.py` writes).

mod architecture;
mod cli;
mod closure;
mod doctor;
mod import;
mod learn;
mod lock;
mod readme;
mod render;
mod resolve_props;
mod script_gpu;
mod script_units;
mod smoke;
mod spec_props;
mod support;
mod table;

/// Base images and engine access for the Docker tests (tests/support/).
#[path = "../support/mod.rs"]
mod engine_support;

mod bench;
mod docker;
