//! The `headers` target: see `tocsin_fuzz::headers` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| tocsin_fuzz::headers::check(input));
