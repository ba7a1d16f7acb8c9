//! The `request_body` target: see `tocsin_fuzz::request_body` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| tocsin_fuzz::request_body::check(input));
