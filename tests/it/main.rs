//! The integration test binary.

#[path = "../support/mod.rs"]
mod support;

mod bench;
mod docker;
