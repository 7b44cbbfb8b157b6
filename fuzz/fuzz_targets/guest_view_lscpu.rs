#![no_main]
//! `lscpu` as a guest view (bench::readers::view::lscpu): a view or a one-line error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::view::lscpu(text) {
        Ok(v) => {
            let _ = v.clone().merge(v).summary();
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
