//! envbuild's integration tests: one binary, one module per area. They run the real binary and
//! a real Python; torch is replaced by the stand-in that `tests/fixtures/fake_torch.py` writes.

mod doctor;
mod script_units;
mod smoke;
mod support;
