#![no_main]
//! CpuSet parsers: list, mask and hwloc spellings must never panic, and a parsed list must
//! print back to a list that parses to the same set.
use libfuzzer_sys::fuzz_target;
use topo::CpuSet;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(set) = CpuSet::parse_list(s) {
            let again = CpuSet::parse_list(&set.to_list_string()).expect("round trip");
            assert_eq!(set, again);
            let mask = CpuSet::parse_mask(&set.to_mask_string(0)).expect("mask round trip");
            assert_eq!(set, mask);
        }
        let _ = CpuSet::parse_mask(s);
        let _ = CpuSet::parse_hwloc(s);
    }
});
