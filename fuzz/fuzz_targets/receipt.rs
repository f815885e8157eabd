//! A receipt handle, as clients send it back.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::receipt(data));
