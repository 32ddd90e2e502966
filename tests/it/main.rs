//! The integration test binary: one module per area (other engineers add theirs here).

mod render;
