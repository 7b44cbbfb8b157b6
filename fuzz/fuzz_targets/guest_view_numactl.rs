#![no_main]
//! `numactl --hardware` as a guest view (bench::readers::view::numactl_hardware): a view or a one-line error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::view::numactl_hardware(text) {
        Ok(v) => {
            let _ = v.summary();
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
