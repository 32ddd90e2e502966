//! envbuild's integration tests: one binary, one module per area. They run the real binary (and,
//! for the smoke test, a real Python; torch is replaced by the stand-in that
//! `tests/fixtures/fake_torch.py` writes).

mod architecture;
mod children;
mod ci_docs;
mod cli;
mod closure;
mod conda_closure;
mod confinement;
mod doctor;
mod engine_faults;
mod import;
mod learn;
mod lock;
mod matrix;
// ARCHITECTURE.md's module index, generated from each src file's `//!` doc.
mod module_index;
mod one_validation;
mod readme;
mod render;
mod render_conda;
mod render_kill;
mod resolve_props;
mod script_gpu;
mod script_units;
mod smoke;
mod spec_props;
mod support;
mod table;
