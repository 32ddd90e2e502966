//! Fuzz target `smoke_output`: [`envbuild_fuzz::smoke_output`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::smoke_output(data));
