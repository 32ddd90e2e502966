//! Fuzz target `lock`: [`envbuild_fuzz::lock`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::lock(data));
