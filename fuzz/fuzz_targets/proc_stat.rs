//! Fuzz the /proc/stat parser: Ok or an error message, never a panic; parsed values are
//! consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(s) = irqbal::procstat::parse_proc_stat(text) {
        for (_, t) in &s.cpus {
            let _ = t.irq_time();
            let _ = t.total();
        }
        assert!(s.total.is_some() || !s.cpus.is_empty());
    }
});
