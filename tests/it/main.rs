//! envbuild's integration tests: one binary, one module per area. They run the real binary (and,
//! for the smoke test, a real Python; torch is replaced by the stand-in that
//! `tests/fixtures/fake_torch.py` writes). The tests that need a Docker engine are the `docker`
//! target's (tests/docker); the support both targets share is the tests/support crate.

// The source's shape: layers, a pure core, function length, sibling loops, module docs.
mod architecture;
// A hostile checkout: planted code, journals and links run nothing and write nowhere.
mod checkout;
// Bounds and signals: proxies, FIFO outputs, temporary folders after a signal.
mod bounds;
// Child processes: time limits and interrupts kill the whole process group.
mod children;
// Ranges on the core keys: the founding example, `--locked`/`--upgrade`, `explain`, docs/spec.md's range examples.
mod choose;
// docs/ci.md's workflows parse, and their envbuild command lines with them.
mod ci_docs;
// Flags and help texts every command shares (`--expect-file`, `--gpus`, `--shm-size`, exit codes).
mod cli;
// The pip closure lock, offline, against a made-up `file://` wheel index.
mod closure;
// The conda closure, offline, against conda channels served on 127.0.0.1.
mod conda_closure;
// `--templates` cannot reach outside its folder (symlinks, `{% include %}`).
mod confinement;
// `envbuild doctor` with every probe overridden or fed recorded NVIDIA output.
mod doctor;
// A fake engine that stops answering: `test` and `image` end with `ENGINE_TIMEOUT`.
mod engine_faults;
// The first hour's messages, each with its way forward (doctor, smoke, image offline, lock).
mod first_hour;
// A hostile user's findings: FIFOs, linked parents, /dev/shm, CA bundles, NVML, ~/.netrc, .venv.
mod hostile;
// The fuzz corpus (fuzz/corpus) replayed through the fuzz targets' checks, crashes included.
mod fuzz_corpus;
// `envbuild import`: environment.yml in, a spec that locks out.
mod import;
// `TABLE_MISMATCH` after a smoke test with a lock, and `table learn`.
mod learn;
// `envbuild lock`: example specs, error snapshots, `--locked`, `--json`, bad input.
mod lock;
// A lock proves it is envbuild's own (its seal, its spec), and outputs never replace others' files.
mod lock_trust;
// `envbuild matrix` output, and `image SPEC...|DIR` argument handling without an engine.
mod matrix;
// ARCHITECTURE.md's module index, generated from each src file's `//!` doc.
mod module_index;
// The smoke script's NOMINAL_PEAKS, generated from the table's [[gpu_peak]] rows.
mod nominal_peaks;
// Every string a spec or table carries into a lock passes the rules `render` checks it with.
mod one_validation;
// The README: its example locks, its commands exist, every code and cited test exists.
mod readme;
// `envbuild render`: snapshots of every rendered file, structure, hostile values, determinism.
mod render;
// `render` of a conda closure: explicit file, pins, the throwaway install stage.
mod render_conda;
// `render` killed at random moments: the next command recovers the folder.
mod render_kill;
// Property tests of resolution against the real table: facts hold, every hint locks.
mod resolve_props;
// The smoke script's GPU verdicts against stand-in torches simulating GPUs.
mod script_gpu;
// The smoke script's pure helpers, called from Python.
mod script_units;
// `envbuild smoke` and the embedded script against every stand-in torch.
mod smoke;
// `envbuild schema`: the spec's JSON Schema, checked with check-jsonschema on every example.
mod schema;
// Property tests of spec parsing: no panic, only safe values validate.
mod spec_props;
// This target's helpers: the shared tests/support crate plus typed smoke-report helpers.
mod support;
// `envbuild table` and `--table FILE`.
mod table;
// Locks, secrets, budgets, CLI edges, writes and JUnit under attack (issue 20).
mod trust;
// Source and fact classes of issue 38: PEP 508 names, repeated table rows, impossible dates,
// channel alias tricks, yanked releases, index layouts that serve files elsewhere.
mod trust_sources;
