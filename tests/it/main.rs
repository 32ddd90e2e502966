//! Integration tests against the real `envbuild` binary: one test binary, one module per area.

mod import;
mod lock;
mod support;
mod table;
