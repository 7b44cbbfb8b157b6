//! Guest CPU features and timers for the guest OS.

use topo::Host;

use crate::model::DeviceInfo;
use crate::{CpuFeatures, GuestOs, Timer};

/// Hyper-V enlightenments for Windows 8+/10/11 guests (libvirt `<hyperv>` element names).
pub const HYPERV_WINDOWS: &[&str] = &[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "synic",
    "stimer",
    "reset",
    "frequencies",
    "tlbflush",
    "ipi",
];

fn timer(name: &str, present: bool, tickpolicy: Option<&str>) -> Timer {
    Timer {
        name: name.into(),
        present,
        tickpolicy: tickpolicy.map(str::to_string),
    }
}

pub fn choose(
    os: GuestOs,
    host: &Host,
    devices: &[DeviceInfo],
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> CpuFeatures {
    let mut f = CpuFeatures::default();
    match host.tsc_stable {
        Some(true) => {
            f.invtsc = true;
            rationale.push("invtsc exposed: the host TSC is stable (constant and nonstop), so the guest can use the TSC as its clocksource".into());
        }
        Some(false) => rationale.push(
            "invtsc not exposed: the host TSC is not stable, the guest must not trust it".into(),
        ),
        None => rationale.push(
            "invtsc not exposed: the host model does not say whether the TSC is stable".into(),
        ),
    }
    let nvidia_gpu = devices.iter().any(|d| {
        host.pci(&d.bdf)
            .is_some_and(|p| p.vendor_id == 0x10de && p.kind == topo::DeviceKind::Gpu)
    });
    match os {
        GuestOs::Linux => {
            f.timers = vec![timer("kvmclock", true, None)];
            rationale.push("Linux guest: kvmclock, no Hyper-V enlightenments".into());
        }
        GuestOs::Windows => {
            f.hyperv = HYPERV_WINDOWS.iter().map(|s| s.to_string()).collect();
            f.timers = vec![
                timer("rtc", true, Some("catchup")),
                timer("pit", true, Some("delay")),
                timer("hpet", false, None),
                timer("hypervclock", true, None),
            ];
            rationale.push("Windows guest: Hyper-V enlightenments and the Hyper-V reference clock (hypervclock); HPET off; the hypervisor CPUID bit stays visible (hiding it only helps Windows 7, the Windows 7 timer note)".into());
            if nvidia_gpu {
                f.kvm_hidden = true;
                rationale.push("KVM signature hidden: NVIDIA GeForce drivers before 465 stop with Code 43 when they see KVM".into());
            }
        }
        GuestOs::Windows7 => {
            f.hide_hypervisor = true;
            f.timers = vec![
                timer("rtc", true, Some("catchup")),
                timer("pit", true, Some("delay")),
                timer("hpet", false, None),
            ];
            rationale.push("Windows 7 guest: hypervisor CPUID bit hidden so Windows 7 uses the TSC for QueryPerformanceCounter instead of the emulated ACPI PM timer (Windows 7 timer note: 12.52 ns vs 3,605 ns per read); no Hyper-V enlightenments, which Windows 7 cannot find with the bit hidden".into());
            if host.tsc_stable != Some(true) {
                warnings.push("Windows 7 with the hypervisor bit hidden relies on the TSC, but the host TSC is not known to be stable (Windows 7 timer note: may not work on `clocksource tsc unstable` systems)".into());
            }
            if nvidia_gpu {
                f.kvm_hidden = true;
                rationale.push("KVM signature hidden: NVIDIA GeForce drivers before 465 stop with Code 43 when they see KVM".into());
            }
        }
    }
    f
}
