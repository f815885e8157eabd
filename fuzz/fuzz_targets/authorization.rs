//! Authorization headers (bearer tokens, SigV4) and scopes, then a raw request to a server
//! that asks for a key.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::authorization(data));
