//! The integration test binary.

#[path = "../support/mod.rs"]
mod support;

mod docker;
