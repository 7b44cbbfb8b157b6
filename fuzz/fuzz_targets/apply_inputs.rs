#![no_main]
//! The apply crate's readers: the journal (a crashed apply may leave any bytes), the plan
//! embedded in a libvirt domain's <metadata> (the hook's stdin), QMP replies, and a QEMU's
//! /proc/PID/smaps and numa_maps (the hugepages it holds), and a hugepage claim file.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = apply::journal::parse(std::path::Path::new("journal"), &text);
    let _ = apply::hook::plan_from_domain_xml(&text);
    let _ = apply::hugepages::parse_claim(&text);
    for size_kb in [2048, 1_048_576] {
        let _ = apply::proc::parse_smaps_hugetlb(&text, size_kb);
        let _ = apply::proc::parse_numa_maps_hugetlb(&text, size_kb);
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = apply::qemu::parse_cpus_fast(&v);
        let _ = apply::qemu::parse_iothreads(&v);
    }
});
