#![no_main]
//! The PyTorch matmul reader (bench::readers::pytorch::read_matmul): each figure with a size and a dtype, or a one-line error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::pytorch::read_matmul(text) {
        Ok(ms) => assert!(ms
            .iter()
            .all(|m| m.value.is_finite() && m.param("n").is_some() && m.param("dtype").is_some())),
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
