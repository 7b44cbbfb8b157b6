#![no_main]
//! The PyTorch host-device copy reader (bench::readers::pytorch::read_bandwidth) and its facts: a direction on every figure, or a one-line error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::pytorch::read_bandwidth(text) {
        Ok(ms) => assert!(ms
            .iter()
            .all(|m| m.value.is_finite() && m.param("direction").is_some())),
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
    let _ = bench::readers::pytorch::facts(text);
});
