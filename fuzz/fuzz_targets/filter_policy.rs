//! An SNS filter policy and a message (first byte: the scope) to match it against.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::filter_policy(data));
