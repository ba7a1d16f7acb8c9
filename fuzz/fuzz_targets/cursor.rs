//! The `cursor` target: see `tocsin_fuzz::cursor` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| tocsin_fuzz::cursor::check(input));
