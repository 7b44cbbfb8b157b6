//! KubeVirt VirtualMachineInstance `spec.domain` fragment (YAML).
//!
//! Written by hand rather than through a YAML library: the fragment has a fixed shape, every
//! value is a number, a boolean or a string written as a JSON string (which YAML reads as a
//! double-quoted scalar), so escaping is exact; the maintained serde YAML crates are either
//! deprecated (`serde_yaml`) or unsettled forks, and one is not needed for this.
//!
//! KubeVirt spelling (kubevirt.io/v1): `cpu.dedicatedCpuPlacement` asks the kubelet's static
//! CPU manager for exclusive CPUs and pins vCPUs to them; `isolateEmulatorThread` adds one
//! more exclusive CPU for the QEMU emulator thread; `cpu.numa.guestMappingPassthrough` mirrors
//! the host NUMA placement of those CPUs into the guest (it needs dedicated CPUs and
//! hugepages); `memory.hugepages.pageSize` is `2Mi` or `1Gi`. As with Kata, the exact host
//! CPUs are the kubelet's choice; `vmtune apply --pid` can move them to the plan's.

use std::fmt::Write as _;

use plan::Plan;

use crate::features::{enlightenments, is_windows, plan_timers, vcpu_count};
use crate::{guest_numa_exposed, hugepage_quantity};

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The `spec.domain` fragment (YAML) for the plan: paste under a VMI's or a VM template's
/// `spec:`.
pub fn vmi_fragment_yaml(plan: &Plan) -> String {
    let t = &plan.guest_topology;
    let n = vcpu_count(plan);
    let mem_mib = plan.request.memory_bytes.div_ceil(1 << 20);
    let hp = hugepage_quantity(plan.memory.hugepage_size_kb);
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# vmtune: KubeVirt spec.domain for {} ({n} vCPUs, {mem_mib} MiB)",
        plan.request.name.as_deref().unwrap_or("this plan")
    );
    if let Some(note) = crate::locality::unexpressed(plan, "a KubeVirt VMI") {
        let _ = writeln!(y, "# vmtune: {note}");
    }
    y.push_str("domain:\n  cpu:\n");
    let _ = writeln!(y, "    sockets: {}", t.sockets.max(1));
    let _ = writeln!(y, "    cores: {}", t.cores.max(1) * t.dies.max(1));
    let _ = writeln!(y, "    threads: {}", t.threads.max(1));
    y.push_str("    model: host-passthrough\n");
    y.push_str("    dedicatedCpuPlacement: true\n");
    if !plan.emulator_cpus.is_empty() {
        y.push_str("    isolateEmulatorThread: true\n");
    }
    if guest_numa_exposed(plan) && hp.is_some() {
        y.push_str("    numa:\n      guestMappingPassthrough: {}\n");
    }
    let mut feats: Vec<(&str, &str)> = Vec::new();
    if plan.cpu_features.invtsc {
        feats.push(("invtsc", "require"));
    } else if plan.cpu_features.invtsc_disabled {
        feats.push(("invtsc", "disable"));
    }
    if plan.cpu_features.hide_hypervisor {
        feats.push(("hypervisor", "disable"));
    }
    if !feats.is_empty() {
        y.push_str("    features:\n");
        for (name, policy) in feats {
            let _ = writeln!(y, "    - name: {}\n      policy: {}", q(name), q(policy));
        }
    }
    y.push_str("  memory:\n");
    let _ = writeln!(y, "    guest: {mem_mib}Mi");
    if let Some(size) = &hp {
        let _ = writeln!(y, "    hugepages:\n      pageSize: {}", q(size));
    }
    y.push_str("  resources:\n    requests:\n");
    let _ = writeln!(y, "      memory: {mem_mib}Mi");

    features(plan, &mut y);
    clock(plan, &mut y);
    if !plan.devices.is_empty() {
        y.push_str("  devices:\n");
        y.push_str(
            "    # deviceName is the resource name the cluster's device plugin advertises for\n    \
             # this model (e.g. nvidia.com/GA102GL_A10); KubeVirt cannot name a host BDF.\n",
        );
        let gpus: Vec<_> = plan
            .devices
            .iter()
            .filter(|d| matches!(d.kind, topo::DeviceKind::Gpu))
            .collect();
        let others: Vec<_> = plan
            .devices
            .iter()
            .filter(|d| {
                !matches!(d.kind, topo::DeviceKind::Gpu)
                    && !is_companion(d, &gpus.iter().map(|g| g.bdf.as_str()).collect::<Vec<_>>())
            })
            .collect();
        if !gpus.is_empty() {
            y.push_str("    gpus:\n");
            for (i, g) in gpus.iter().enumerate() {
                let _ = writeln!(
                    y,
                    "    - name: {}\n      deviceName: {}  # host {}",
                    q(&format!("gpu{i}")),
                    q("REPLACE-WITH-RESOURCE-NAME"),
                    g.bdf
                );
            }
        }
        if !others.is_empty() {
            y.push_str("    hostDevices:\n");
            for (i, d) in others.iter().enumerate() {
                let _ = writeln!(
                    y,
                    "    - name: {}\n      deviceName: {}  # host {}",
                    q(&format!("hostdev{i}")),
                    q("REPLACE-WITH-RESOURCE-NAME"),
                    d.bdf
                );
            }
        }
    }
    y
}

/// Tick policies KubeVirt accepts per timer (kubevirt.io/v1 `RTCTickPolicy`,
/// `PITTickPolicy`, `HPETTickPolicy`); the Hyper-V and KVM clocks take none.
pub const TICK_POLICIES: &[(&str, &[&str])] = &[
    ("rtc", &["delay", "catchup"]),
    ("pit", &["delay", "catchup", "discard"]),
    ("hpet", &["delay", "catchup", "merge", "discard"]),
    ("hyperv", &[]),
    ("kvm", &[]),
];

/// `features:` — Hyper-V enlightenments in KubeVirt's names (`hypervPassthrough` for a kept
/// `<hyperv mode='passthrough'>`, which KubeVirt forbids combining with explicit ones), the
/// hidden KVM signature.
fn features(plan: &Plan, y: &mut String) {
    let f = &plan.cpu_features;
    let (on, _) = enlightenments(&f.hyperv);
    let (off, _) = enlightenments(&f.hyperv_off);
    if on.is_empty() && off.is_empty() && !f.hyperv_passthrough && !f.kvm_hidden {
        return;
    }
    y.push_str("  features:\n    acpi: {}\n    apic: {}\n");
    let mut missing: Vec<&str> = Vec::new();
    if f.hyperv_passthrough {
        y.push_str("    hypervPassthrough:\n      enabled: true\n");
        if !on.is_empty() || !off.is_empty() {
            let _ = writeln!(
                y,
                "    # KubeVirt refuses explicit Hyper-V settings beside hypervPassthrough: the domain's {} are not spelled",
                on.iter().chain(&off).map(|e| e.name).collect::<Vec<_>>().join(", ")
            );
        }
    } else if !on.is_empty() || !off.is_empty() {
        y.push_str("    hyperv:\n");
        let has = |name: &str| on.iter().any(|e| e.name == name);
        let mut entries: Vec<(&str, bool, &crate::features::Enlightenment)> = on
            .iter()
            .map(|e| (e.name, true, e))
            .chain(off.iter().map(|e| (e.name, false, e)))
            .collect();
        entries.retain(|(_, _, e)| e.sub().is_none());
        for (name, enabled, e) in entries {
            let state = if enabled {
                String::new()
            } else {
                "        enabled: false\n".into()
            };
            let key = match name {
                "stimer" => "synictimer",
                "vendor_id" => "vendorid",
                "relaxed" | "vapic" | "spinlocks" | "vpindex" | "runtime" | "synic" | "reset"
                | "frequencies" | "reenlightenment" | "tlbflush" | "ipi" | "evmcs" => name,
                other => {
                    missing.push(other);
                    continue;
                }
            };
            let mut body = state;
            match name {
                "spinlocks" if enabled => {
                    let _ = writeln!(body, "        spinlocks: {}", e.retries());
                }
                "vendor_id" if enabled => {
                    let _ = writeln!(body, "        vendorid: {}", q(e.vendor()));
                }
                "stimer" if has("stimer_direct") => body.push_str("        direct: {}\n"),
                "tlbflush" => {
                    if has("tlbflush_direct") {
                        body.push_str("        direct: {}\n");
                    }
                    if has("tlbflush_extended") {
                        body.push_str("        extended: {}\n");
                    }
                }
                _ => {}
            }
            if body.is_empty() {
                let _ = writeln!(y, "      {key}: {{}}");
            } else {
                let _ = write!(y, "      {key}:\n{body}");
            }
        }
    }
    if !missing.is_empty() {
        let _ = writeln!(
            y,
            "    # no KubeVirt field for Hyper-V {}: left to KubeVirt's defaults",
            missing.join(", ")
        );
    }
    if f.kvm_hidden {
        y.push_str("    kvm:\n      hidden: true\n");
    }
}

/// `clock:` — the plan's timers with the tick policies KubeVirt takes for each.
fn clock(plan: &Plan, y: &mut String) {
    let timers = plan_timers(plan);
    if timers.is_empty() {
        return;
    }
    y.push_str("  clock:\n");
    if is_windows(plan) {
        // KubeVirt has no "localtime": name the host's zone here instead of utc, or set
        // RealTimeIsUniversal=1 in the Windows guest
        y.push_str(
            "    # Windows keeps the RTC in local time: replace utc with timezone: \"Zone/Name\"\n",
        );
    }
    y.push_str("    utc: {}\n    timer:\n");
    for t in &timers {
        let key = match t.name.as_str() {
            "rtc" => "rtc",
            "pit" => "pit",
            "hpet" => "hpet",
            "hypervclock" => "hyperv",
            "kvmclock" => "kvm",
            _ => continue,
        };
        let _ = writeln!(y, "      {key}:");
        if let Some(tp) = &t.tickpolicy {
            let allowed = TICK_POLICIES
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, p)| *p)
                .unwrap_or(&[]);
            if allowed.contains(&tp.as_str()) {
                let _ = writeln!(y, "        tickPolicy: {}", q(tp));
            } else {
                let _ = writeln!(
                    y,
                    "        # tick policy {tp:?} left out: KubeVirt's {key} timer takes {}",
                    if allowed.is_empty() {
                        "none".to_string()
                    } else {
                        allowed.join(", ")
                    }
                );
            }
        }
        let _ = writeln!(y, "        present: {}", t.present);
    }
}

/// Another function of a passed-through GPU (its HDMI audio, USB-C controller): the device
/// plugin hands it out with the GPU, so it gets no entry of its own.
fn is_companion(d: &plan::PlannedDevice, gpus: &[&str]) -> bool {
    let slot = |b: &str| b.rsplit_once('.').map(|(s, _)| s.to_string());
    gpus.iter().any(|g| slot(g) == slot(&d.bdf) && *g != d.bdf)
}
