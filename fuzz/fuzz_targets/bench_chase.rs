#![no_main]
//! The pointer-chase curve reader (bench::readers::chase): points with a size and a finite ns, or a one-line error; never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::chase::read(text) {
        Ok(ms) => assert!(ms
            .iter()
            .all(|m| m.value.is_finite() && m.value >= 0.0 && m.size_bytes.is_some())),
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
