//! Fuzz target `marker`: [`envbuild_fuzz::marker`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::marker(data));
