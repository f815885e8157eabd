//! A raw HTTP request in the SQS JSON or Query protocol (first byte: verify signatures or not).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::sqs_api(data));
