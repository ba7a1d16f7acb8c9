//! The `webpush` target: see `tocsin_fuzz::webpush` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| tocsin_fuzz::webpush::check(input));
