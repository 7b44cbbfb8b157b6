//! The host's bpftrace pin trace: this VM's `vfio_pin_pages_remote` calls the trace holds,
//! other QEMUs' calls beside them, stamped on the trace's own clock.

use super::guest::Pin;
use super::spec::Spec;
use super::{ns, rfc3339, Ids, Rng};
use crate::parse::time::{Nanos, NS_PER_S};

/// Seconds of this VM's pin calls of 10 ms or more that returned by `last_logged`.
pub(super) fn pins_s(pins: &[Pin], qemu_pid: u32, last_logged: Nanos) -> f64 {
    pins.iter()
        .filter(|p| p.pid == qemu_pid && p.ms >= 10)
        .filter(|p| p.end() <= last_logged)
        .map(|p| p.ms as f64 / 1e3)
        .sum()
}

/// The trace's text: the calls of `pins` that returned by `last_logged`, an earlier boot's
/// and a concurrent QEMU's calls when `spec` asks for them (`end_of_boot`: the boot's
/// last line), every call as its entry and return lines in time order.
pub(super) fn bpftrace(
    spec: &Spec,
    rng: &mut Rng,
    ids: &Ids,
    pins: &[Pin],
    last_logged: Nanos,
    end_of_boot: Nanos,
) -> String {
    let mut pins: Vec<Pin> = pins
        .iter()
        .copied()
        .filter(|p| p.end() <= last_logged)
        .collect();
    let foreign = ids.qemu_pid + 1000;
    if spec.foreign_pins {
        earlier_pins(spec, rng, ids.t0, foreign, &mut pins);
    }
    if spec.concurrent_pins {
        let span = ((end_of_boot - ids.t0) as f64 / 1e9).max(10.0);
        for k in 0..12u64 {
            let at = ids.t0 + ns(rng.f(0.0, span));
            pins.push(Pin {
                start: at,
                ms: 480 + k,
                vaddr: 0x7200_0000_0000 + k * (4 << 30),
                size: 4 << 30,
                pid: foreign + 1,
            });
        }
    }
    trace_text(&pins, spec.trace_shift_h * 3600 * NS_PER_S)
}

/// An earlier boot's pins by QEMU `pid`, 10 to 50 minutes before `t0`: its GPUs' BARs,
/// then its RAM.
fn earlier_pins(spec: &Spec, rng: &mut Rng, t0: Nanos, pid: u32, pins: &mut Vec<Pin>) {
    let gpus = spec.gpus.min(16);
    let t = t0 - ns(rng.f(600.0, 3000.0));
    for k in 0..gpus.max(1) {
        pins.push(Pin {
            start: t + ns(4.0 * k as f64),
            ms: super::pin_ms(spec.bar_gib as f64 * 0.026),
            vaddr: 0x7000_0000_0000 + (k as u64) * 0x40_0000_0000,
            size: spec.bar_gib << 30,
            pid,
        });
    }
    for k in 0..6u64 {
        pins.push(Pin {
            start: t + ns(60.0 + 0.6 * k as f64),
            ms: 500,
            vaddr: 0x7100_0000_0000 + k * (4 << 30),
            size: 4 << 30,
            pid,
        });
    }
}

/// bpftrace's output for `pins`, stamped `shift` off the host's clock.
fn trace_text(pins: &[Pin], shift: Nanos) -> String {
    let mut lines: Vec<(Nanos, String)> = Vec::new();
    for p in pins {
        let npage = p.size / 4096;
        lines.push((
            p.start,
            format!(
                "{}: vfio_pin_pages_remote(): vaddr=0x{:x} npage={npage} size={}B limit=2048 pid={}",
                rfc3339(p.start + shift, None),
                p.vaddr,
                npage * 4096,
                p.pid
            ),
        ));
        let end = p.end();
        lines.push((
            end,
            format!(
                "{}: vfio_pin_pages_remote took {} ms",
                rfc3339(end + shift, None),
                p.ms
            ),
        ));
    }
    lines.sort_by_key(|l| l.0);
    let mut text = String::from("Attaching 2 probes...\n");
    for (_, l) in lines {
        text.push_str(&l);
        text.push('\n');
    }
    text
}
