#![no_main]
// PLACEHOLDER: to be filled in by the owner of this parser.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = data;
});
