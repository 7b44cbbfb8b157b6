#![no_main]
//! Fuzz the hwloc XML loader: any bytes (lossily decoded as UTF-8) must give a `Host` or a
//! one-line error naming the source, never a panic, a hang or a huge allocation.
use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match topo::hwloc::parse_str(&text, Path::new("fuzz.xml")) {
        Ok(host) => {
            // a loaded host is consistent: every PU is in the core it names
            for pu in &host.pus {
                let core = &host.cores[pu.core as usize];
                assert!(core.pus.contains(pu.os_index));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fuzz.xml"), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }
});
