//! Fuzz target `report_learn`: [`envbuild_fuzz::report_learn`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::report_learn(data));
