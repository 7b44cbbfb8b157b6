#![no_main]
//! The benchmark output readers (bench::readers): whatever a `--run` command printed,
//! read_any and every tool's reader return measures or a one-line error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::read_any(text) {
        Ok((tool, measures)) => {
            assert!(!measures.is_empty(), "{tool}: no measures");
            assert!(measures.iter().all(|m| m.value.is_finite()));
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
    for tool in bench::readers::Tool::ALL {
        if let Err(e) = tool.read(text) {
            assert!(!e.to_string().contains('\n'));
        }
    }
});
