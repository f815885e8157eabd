//! A raw HTTP request to the native API, through the real router and handlers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::native_api(data));
