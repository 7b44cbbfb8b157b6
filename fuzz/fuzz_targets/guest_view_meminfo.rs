#![no_main]
//! `/proc/meminfo`'s hugepage lines as a guest view (bench::readers::view::meminfo): a view with HugePages_Total, or a one-line error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bench::readers::view::meminfo(text) {
        Ok(v) => assert!(v.hugepages_total.is_some()),
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
