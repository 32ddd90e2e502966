//! Fuzz target `spec_yaml`: [`envbuild_fuzz::spec_yaml`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::spec_yaml(data));
