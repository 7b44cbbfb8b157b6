#![no_main]
//! /proc/interrupts parser: any text, no panic; counts never exceed the CPU columns.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(t) = topo::interrupts::parse_proc_interrupts(&text) {
        for irq in &t.irqs {
            assert!(irq.counts.len() <= t.cpus.len());
        }
    }
});
