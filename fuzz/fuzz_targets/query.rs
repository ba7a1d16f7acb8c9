//! The `query` target: see `tocsin_fuzz::query` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| tocsin_fuzz::query::check(input));
