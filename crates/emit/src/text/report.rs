//! The plan as the report `vmtune plan` prints without `--json`: what goes where and why,
//! checkable against `lstopo` (PU P#n is the Linux CPU number; core and L3 columns are hwloc
//! logical indexes, L#).

use std::fmt::Write as _;

use plan::Plan;
use topo::{CpuSet, Host};

use super::human_bytes;

/// The plain-text report of `plan` on `host`.
pub fn plan_report(plan: &Plan, host: &Host) -> String {
    let mut o = String::new();
    heading(plan, host, &mut o);
    cpus(plan, host, &mut o);
    memory(plan, &mut o);
    let _ = writeln!(
        o,
        "Interrupts: device (VFIO) -> CPUs {}; all others -> CPUs {}",
        cpus_or_none(&plan.irq.vfio_cpus),
        cpus_or_none(&plan.irq.host_cpus)
    );
    let _ = writeln!(o, "CPU features: {}", features(plan));
    let _ = writeln!(o);
    let _ = writeln!(o, "Why");
    for r in &plan.rationale {
        let _ = writeln!(o, "  - {r}");
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(o, "Warnings");
        for w in &plan.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Check against `lstopo-no-graphics` (default: Core L#, L3 L#, PU P# = Linux CPU number); --json prints the plan, --emit libvirt|qemu|kata|kata-config|kata-pod|kubevirt the configuration."
    );
    o
}

/// The JSON spelling of a unit enum (`gaming`, `windows7`).
pub fn plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn cpus_or_none(s: &CpuSet) -> String {
    if s.is_empty() {
        "none".into()
    } else {
        s.to_string()
    }
}

/// The VM asked for and the host it is planned on.
fn heading(plan: &Plan, host: &Host, o: &mut String) {
    let req = &plan.request;
    let name = req.name.as_deref().unwrap_or("(unnamed VM)");
    let devices = if plan.devices.is_empty() {
        "no devices".to_string()
    } else {
        plan.devices
            .iter()
            .map(|d| match d.guest_cell {
                Some(c) => format!("{} (guest cell {c})", d.bdf),
                None => d.bdf.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        o,
        "Plan for {name}: {} vCPUs, {}, {devices}; profile {}, guest {}",
        req.vcpus,
        human_bytes(req.memory_bytes),
        plain(&req.profile),
        plain(&req.os)
    );
    let _ = writeln!(
        o,
        "Host: {} ({}, {}): {} PUs, {} cores, {}, {} NUMA node(s)",
        host.name.as_deref().unwrap_or("unnamed"),
        host.source,
        host.arch.as_deref().unwrap_or("architecture unknown"),
        host.pus.len(),
        host.cores.len(),
        host.l3_summary(),
        host.numa_nodes.len()
    );
    let _ = writeln!(o);
}

/// The host's CPUs, the guest's topology and one row per vCPU.
fn cpus(plan: &Plan, host: &Host, o: &mut String) {
    let _ = writeln!(o, "Host side");
    let _ = writeln!(o, "  housekeeping CPUs  {}", cpus_or_none(&plan.host_cpus));
    let _ = writeln!(
        o,
        "  emulator CPUs      {}",
        cpus_or_none(&plan.emulator_cpus)
    );
    let _ = writeln!(
        o,
        "  iothread CPUs      {}",
        cpus_or_none(&plan.iothread_cpus)
    );
    let t = plan.guest_topology;
    let _ = writeln!(
        o,
        "Guest CPUs {}  (guest sees {} socket(s) x {} die(s) x {} core(s) x {} thread(s))",
        plan.guest_cpus(),
        t.sockets,
        t.dies,
        t.cores,
        t.threads
    );
    if !plan.idle_cpus.is_empty() {
        let _ = writeln!(
            o,
            "  idle threads {}  (siblings of the vCPUs' cores: no vCPU, host or other VM runs there)",
            plan.idle_cpus
        );
    }
    let _ = writeln!(o, "  vCPU  PU P#  core L#  L3 L#  node  kind");
    for v in &plan.vcpus {
        let pu = host.pu(v.cpu);
        let opt = |x: Option<u32>| x.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "  {:>4}  {:>4}  {:>7}  {:>5}  {:>4}  {}",
            v.vcpu,
            v.cpu,
            opt(pu.map(|p| p.core)),
            opt(pu.and_then(|p| p.l3)),
            opt(pu.and_then(|p| p.numa)),
            pu.and_then(|p| p.kind.as_deref()).unwrap_or("-")
        );
    }
}

/// The host nodes and pages of the guest's memory, and its guest NUMA cells.
fn memory(plan: &Plan, o: &mut String) {
    let m = &plan.memory;
    let nodes = if m.host_nodes.is_empty() {
        "unbound (no NUMA information)".to_string()
    } else {
        m.host_nodes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    if m.hugepage_size_kb > 4 {
        let per: Vec<String> = m
            .host_nodes
            .iter()
            .zip(&m.pages_per_node)
            .map(|(n, p)| format!("{p} on node {n}"))
            .collect();
        let _ = writeln!(
            o,
            "Memory: node(s) {nodes}, {} pages of {}{}",
            m.pages,
            plan::memory::page_name(m.hugepage_size_kb),
            if per.len() > 1 {
                format!(" ({})", per.join(", "))
            } else {
                String::new()
            }
        );
    } else {
        let _ = writeln!(o, "Memory: node(s) {nodes}, 4 KiB pages (no hugepages)");
    }
    for c in &plan.guest_numa {
        let _ = writeln!(
            o,
            "Guest NUMA cell {}: vCPUs {}, {}, host node(s) {}",
            c.cell,
            cpus_or_none(&c.vcpus),
            human_bytes(c.memory_bytes),
            c.host_nodes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
}

/// The guest's CPU features and timers in one line, or `defaults`.
fn features(plan: &Plan) -> String {
    let f = &plan.cpu_features;
    let mut feats = Vec::new();
    if f.invtsc {
        feats.push("invtsc".to_string());
    }
    if !f.hyperv.is_empty() {
        feats.push(format!("Hyper-V {}", f.hyperv.join(",")));
    }
    if f.hide_hypervisor {
        feats.push("hypervisor CPUID bit hidden".into());
    }
    if f.kvm_hidden {
        feats.push("KVM signature hidden".into());
    }
    if !f.timers.is_empty() {
        feats.push(format!(
            "timers {}",
            f.timers
                .iter()
                .map(|t| {
                    let mut s = format!("{}={}", t.name, if t.present { "on" } else { "off" });
                    if let Some(p) = &t.tickpolicy {
                        let _ = write!(s, "({p})");
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    if feats.is_empty() {
        "defaults".to_string()
    } else {
        feats.join("; ")
    }
}
