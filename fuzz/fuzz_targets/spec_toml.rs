//! Fuzz target `spec_toml`: [`envbuild_fuzz::spec_toml`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::spec_toml(data));
