#![no_main]
//! The apply crate's readers: the journal (a crashed apply may leave any bytes), the plan
//! embedded in a libvirt domain's <metadata> (the hook's stdin), and QMP replies.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = apply::journal::parse(std::path::Path::new("journal"), &text);
    let _ = apply::hook::plan_from_domain_xml(&text);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = apply::qemu::parse_cpus_fast(&v);
        let _ = apply::qemu::parse_iothreads(&v);
    }
});
