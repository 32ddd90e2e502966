//! Fuzz target `import_env`: [`envbuild_fuzz::import_env`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::import_env(data));
