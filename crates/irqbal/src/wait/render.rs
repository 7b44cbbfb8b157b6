//! The wait report as text and in Prometheus' text format.

use std::fmt::Write as _;

use super::{StateWait, VcpuState, VmWait, WaitReport};

/// What the tool cannot see, said under every text report.
pub const BLIND_SPOT: &str = "Not seen: interrupts the IOMMU posts straight to a vCPU (VT-d \
posted interrupts, AMD AVIC with IOMMU guest mode) reach it without a host CPU taking them; a \
passed-through GPU's interrupts on such a host do not show here.";

fn state_label(s: VcpuState) -> &'static str {
    match s {
        VcpuState::Preempted => "preempted (runnable, no CPU)",
        VcpuState::Blocked => "blocked (halted)",
        VcpuState::Host => "in the host (exit, QEMU)",
        VcpuState::Unknown => "state not seen yet",
        VcpuState::Guest => "in the guest",
    }
}

fn row(out: &mut String, who: &str, s: &StateWait) {
    let _ = writeln!(
        out,
        "  {who:<10} {:<30} {:>9} {:>10.1} {:>10.1} {:>10.1}",
        state_label(s.state),
        s.count,
        s.p50_us,
        s.p99_us,
        s.max_us
    );
}

fn vm_text(out: &mut String, vm: &VmWait) {
    let name = vm.name.as_deref().map_or(format!("pid {}", vm.pid), |n| {
        format!("{n} (pid {})", vm.pid)
    });
    let _ = writeln!(
        out,
        "\nVM {name}{}",
        if vm.running == Some(false) {
            ", no longer running"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  {:<10} {:<30} {:>9} {:>10} {:>10} {:>10}",
        "vCPU", "state when accepted", "count", "p50 µs", "p99 µs", "max µs"
    );
    for s in &vm.total {
        row(out, "all", s);
    }
    let in_guest: u64 = vm.vcpus.iter().map(|v| v.in_guest).sum();
    if in_guest > 0 {
        let _ = writeln!(
            out,
            "  {:<10} {:<30} {in_guest:>9}   (delivered without a wait)",
            "all",
            state_label(VcpuState::Guest)
        );
    }
    if vm.vcpus.len() > 1 {
        for v in &vm.vcpus {
            for s in &v.states {
                row(out, &v.vcpu.to_string(), s);
            }
        }
    }
    for v in &vm.vcpus {
        if let Some(w) = &v.still_waiting {
            let oldest = w
                .oldest_us
                .map_or(String::new(), |o| format!(", the oldest for {o:.0} µs"));
            let _ = writeln!(
                out,
                "  vCPU {}: {} interrupt(s) still waiting for it to enter the guest when the \
                 window closed{oldest}",
                v.vcpu, w.count
            );
        }
    }
    for a in &vm.advice {
        let _ = writeln!(out, "  → {a}");
    }
}

/// The report as text.
pub fn text(r: &WaitReport) -> String {
    let mut out = String::new();
    let window = r
        .window_s
        .map_or(String::from("a recording"), |w| format!("{w:.1} s"));
    let _ = writeln!(
        out,
        "Interrupt waits: {window}, {} interrupt(s) accepted by the host's local APICs, {} VM(s)",
        r.accepts,
        r.vms.len()
    );
    let _ = writeln!(
        out,
        "(each interrupt accepted for a vCPU not in the guest, to that vCPU's next guest entry)"
    );
    if let Some(p) = &r.partial {
        let _ = writeln!(out, "PARTIAL: {p}");
    }
    for vm in &r.vms {
        vm_text(&mut out, vm);
    }
    let mut notes = Vec::new();
    if r.unattributed > 0 {
        notes.push(format!(
            "{} accept(s) could not be tied to a VM (several VMs run and the delivering \
             context belonged to none of them)",
            r.unattributed
        ));
    }
    if r.other_delivery > 0 {
        notes.push(format!(
            "{} NMI/SMI/INIT/SIPI deliveries not counted as interrupts",
            r.other_delivery
        ));
    }
    if r.overflow > 0 {
        notes.push(format!(
            "{} accept(s) dropped: more than {} waiting for one vCPU",
            r.overflow,
            super::MAX_PENDING
        ));
    }
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    let _ = writeln!(out, "\n{BLIND_SPOT}");
    out
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The report in Prometheus' text format: a summary of waits in seconds per VM, vCPU and
/// state, the deliveries without a wait, and the counters that say what was missed.
pub fn prometheus(r: &WaitReport) -> String {
    let mut out = String::new();
    out.push_str(
        "# HELP vmtune_irq_wait_seconds How long an interrupt accepted for a vCPU waited until \
         the vCPU entered the guest, by the vCPU's state when it was accepted.\n\
         # TYPE vmtune_irq_wait_seconds summary\n",
    );
    let mut max = String::from(
        "# HELP vmtune_irq_wait_max_seconds The longest wait in the window.\n\
         # TYPE vmtune_irq_wait_max_seconds gauge\n",
    );
    let mut guest = String::from(
        "# HELP vmtune_irq_in_guest_total Interrupts accepted while the vCPU ran in the guest \
         (no wait).\n# TYPE vmtune_irq_in_guest_total counter\n",
    );
    for vm in &r.vms {
        let name = label(vm.name.as_deref().unwrap_or(""));
        for v in &vm.vcpus {
            let base = format!("vm=\"{name}\",pid=\"{}\",vcpu=\"{}\"", vm.pid, v.vcpu);
            for s in &v.states {
                let l = format!("{base},state=\"{}\"", s.state.name());
                for (q, val) in [("0.5", s.p50_us), ("0.99", s.p99_us)] {
                    let _ = writeln!(
                        out,
                        "vmtune_irq_wait_seconds{{{l},quantile=\"{q}\"}} {}",
                        val / 1e6
                    );
                }
                let _ = writeln!(
                    out,
                    "vmtune_irq_wait_seconds_sum{{{l}}} {}",
                    s.mean_us * s.count as f64 / 1e6
                );
                let _ = writeln!(out, "vmtune_irq_wait_seconds_count{{{l}}} {}", s.count);
                let _ = writeln!(max, "vmtune_irq_wait_max_seconds{{{l}}} {}", s.max_us / 1e6);
            }
            let _ = writeln!(guest, "vmtune_irq_in_guest_total{{{base}}} {}", v.in_guest);
        }
    }
    out.push_str(&max);
    out.push_str(&guest);
    for (name, help, v) in [
        (
            "vmtune_irq_accepted_total",
            "Interrupts accepted by the host's local APICs in the window.",
            Some(r.accepts),
        ),
        (
            "vmtune_irq_unattributed_total",
            "Accepts that could not be tied to a VM.",
            Some(r.unattributed),
        ),
        (
            "vmtune_irq_wait_lost_events_total",
            "Events the ring buffer had no room for.",
            r.lost,
        ),
    ] {
        if let Some(v) = v {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
    }
    out
}
