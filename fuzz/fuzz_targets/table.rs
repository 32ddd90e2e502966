//! Fuzz target `table`: [`envbuild_fuzz::table`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::table(data));
