//! Fuzz target `image_ref`: [`envbuild_fuzz::image_ref`] under libFuzzer (what it asserts is there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| envbuild_fuzz::image_ref(data));
