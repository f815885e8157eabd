//! An on-disk record or key of the embedded store (first byte: which decoder).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::record(data));
