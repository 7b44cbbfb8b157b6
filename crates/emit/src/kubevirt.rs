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

use crate::libvirt::{enlightenments, is_windows, plan_timers};
use crate::{guest_numa_exposed, hugepage_quantity};

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The `spec.domain` fragment (YAML) for the plan: paste under a VMI's or a VM template's
/// `spec:`.
pub fn vmi_fragment_yaml(plan: &Plan) -> String {
    let t = &plan.guest_topology;
    let n = if plan.vcpus.is_empty() {
        plan.request.vcpus as usize
    } else {
        plan.vcpus.len()
    };
    let mem_mib = plan.request.memory_bytes.div_ceil(1 << 20);
    let hp = hugepage_quantity(plan.memory.hugepage_size_kb);
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# vmtune: KubeVirt spec.domain for {} ({n} vCPUs, {mem_mib} MiB)",
        plan.request.name.as_deref().unwrap_or("this plan")
    );
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

    // features: Hyper-V enlightenments (KubeVirt names), KVM hidden
    let (hv, _) = enlightenments(&plan.cpu_features.hyperv);
    if !hv.is_empty() || plan.cpu_features.kvm_hidden {
        y.push_str("  features:\n    acpi: {}\n    apic: {}\n");
        if !hv.is_empty() {
            y.push_str("    hyperv:\n");
            for e in &hv {
                match e.name {
                    "spinlocks" => {
                        let _ = writeln!(y, "      spinlocks:\n        spinlocks: {}", e.retries());
                    }
                    "vendor_id" => {
                        let _ = writeln!(y, "      vendorid:\n        vendorid: {}", q(e.vendor()));
                    }
                    // KubeVirt calls the synthetic timers synictimer
                    "stimer" => y.push_str("      synictimer: {}\n"),
                    // no KubeVirt field (AMD AVIC enlightenment)
                    "avic" => {}
                    name => {
                        let _ = writeln!(y, "      {name}: {{}}");
                    }
                }
            }
        }
        if plan.cpu_features.kvm_hidden {
            y.push_str("    kvm:\n      hidden: true\n");
        }
    }
    let timers = plan_timers(plan);
    if !timers.is_empty() {
        y.push_str("  clock:\n");
        if is_windows(plan) {
            // KubeVirt has no "localtime": name the host's zone here instead of utc, or set
            // RealTimeIsUniversal=1 in the Windows guest
            y.push_str("    # Windows keeps the RTC in local time: replace utc with timezone: \"Zone/Name\"\n");
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
                if matches!(tp.as_str(), "delay" | "catchup" | "merge" | "discard") {
                    let _ = writeln!(y, "        tickPolicy: {}", q(tp));
                }
            }
            let _ = writeln!(y, "        present: {}", t.present);
        }
    }
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

/// Another function of a passed-through GPU (its HDMI audio, USB-C controller): the device
/// plugin hands it out with the GPU, so it gets no entry of its own.
fn is_companion(d: &plan::PlannedDevice, gpus: &[&str]) -> bool {
    let slot = |b: &str| b.rsplit_once('.').map(|(s, _)| s.to_string());
    gpus.iter().any(|g| slot(g) == slot(&d.bdf) && *g != d.bdf)
}
