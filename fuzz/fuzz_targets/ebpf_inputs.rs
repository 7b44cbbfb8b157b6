//! Fuzz what the eBPF readers parse: ring-buffer events of both programs, kernel BTF (the
//! per-CPU offsets of steal_time and runqueues) and `irq wait` recordings, with the accounting
//! run on whatever parses: a value or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(e) = irqbal::ebpf::PreemptEvent::parse(data) {
        let _ = e.episode_start_ns();
    }
    if let Ok(o) = irqbal::ebpf::percpu_offsets_from_bytes(data) {
        let _ = o.st_minus_rq();
    }
    let mut book = irqbal::wait::WaitBook::new();
    for chunk in data.chunks(irqbal::wait::EVENT_SIZE) {
        if let Some(e) = irqbal::wait::WaitEvent::parse(chunk) {
            book.push(&e);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(events) = irqbal::wait::parse_recording(text) {
            for e in &events {
                book.push(e);
            }
        }
    }
    let r = book.report(None, &[]);
    let _ = irqbal::wait::render::text(&r);
    let _ = irqbal::wait::render::prometheus(&r);
});
