//! Integration tests against the real `envbuild` binary: one test binary, one module per area.

mod import;
mod lock;
mod readme;
mod spec_props;
mod support;
mod table;

/// Base images and engine access for the Docker tests (tests/support/).
#[path = "../support/mod.rs"]
mod engine_support;

mod bench;
mod docker;
