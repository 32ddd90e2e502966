//! Fuzz target `import_requirements`: [`envbuild_fuzz::import_requirements`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::import_requirements(data));
