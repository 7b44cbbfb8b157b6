//! Fuzz what the eBPF reader parses: ring-buffer events and kernel BTF (the per-CPU offsets
//! of steal_time and runqueues): a value or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(e) = irqbal::ebpf::PreemptEvent::parse(data) {
        let _ = e.episode_start_ns();
    }
    if let Ok(o) = irqbal::ebpf::percpu_offsets_from_bytes(data) {
        let _ = o.st_minus_rq();
    }
});
