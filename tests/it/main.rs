//! Integration tests against the real `envbuild` binary: one test binary, one module per area.

mod import;
mod lock;
mod readme;
mod spec_props;
mod support;
mod table;
