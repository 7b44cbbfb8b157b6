//! IRQ routing: the plan's VFIO interrupts (`vfio-msi[N](BDF)`, `vfio-msix[N](BDF)`,
//! `vfio-intx(BDF)` in /proc/interrupts) to the guest CPUs, every other movable interrupt to
//! the host CPUs. VFIO interrupts of devices not in the plan belong to other VMs and are left
//! alone. The decision ([`route`]) is pure; [`observe`] reads the host.

use std::path::Path;

use serde::Serialize;
use topo::CpuSet;

use crate::error::{read_trim, ApplyError, Result};
use crate::step::{self, IrqClass, PlannedStep, Target};

/// One numbered IRQ as seen on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqInfo {
    pub number: u32,
    /// Action names as /proc/interrupts prints them.
    pub actions: String,
    /// `smp_affinity_list`, `None` when the file is absent (not movable).
    pub affinity: Option<String>,
    pub effective: Option<String>,
}

/// Read /proc/interrupts and each IRQ's affinity files.
pub fn observe(proc_root: &Path) -> Result<Vec<IrqInfo>> {
    let p = proc_root.join("interrupts");
    let text = std::fs::read_to_string(&p).map_err(|e| ApplyError::io(&p, e))?;
    let table =
        topo::interrupts::parse_proc_interrupts(&text).map_err(|m| ApplyError::parse(&p, m))?;
    let mut out = Vec::new();
    for irq in table.irqs {
        let Some(n) = irq.number else { continue };
        let dir = proc_root.join("irq").join(n.to_string());
        out.push(IrqInfo {
            number: n,
            actions: irq.actions,
            affinity: read_trim(&dir.join("smp_affinity_list")).ok(),
            effective: read_trim(&dir.join("effective_affinity_list")).ok(),
        });
    }
    Ok(out)
}

/// Normalize a PCI address: lower case, with the `0000:` domain.
pub fn normalize_bdf(bdf: &str) -> String {
    let b = bdf.trim().to_ascii_lowercase();
    if b.matches(':').count() == 1 {
        format!("0000:{b}")
    } else {
        b
    }
}

/// The device of a VFIO interrupt from its action names, e.g.
/// `vfio-msix[3](0000:01:00.0)` → `0000:01:00.0`. `None` for other interrupts.
pub fn vfio_device(actions: &str) -> Option<String> {
    actions.split(',').map(str::trim).find_map(|a| {
        let rest = a.strip_prefix("vfio-")?;
        let open = rest.find('(')?;
        let close = rest.rfind(')')?;
        let kind = rest.get(..open)?;
        if !(kind.starts_with("msi") || kind.starts_with("intx")) {
            return None;
        }
        rest.get(open + 1..close).map(normalize_bdf)
    })
}

/// The IRQ steps of a plan: (target, previous, new). IRQs already where they belong, and
/// IRQs without an affinity file, get no step. Pure.
pub fn route(
    irqs: &[IrqInfo],
    devices: &[String],
    vfio_cpus: &CpuSet,
    host_cpus: &CpuSet,
    proc_root: &Path,
) -> Vec<PlannedStep> {
    let devices: Vec<String> = devices.iter().map(|d| normalize_bdf(d)).collect();
    let mut out = Vec::new();
    for irq in irqs {
        let Some(cur) = &irq.affinity else { continue };
        let (class, cpus) = match vfio_device(&irq.actions) {
            Some(d) if devices.contains(&d) => (IrqClass::Vfio, vfio_cpus),
            Some(_) => continue, // another VM's device
            None => (IrqClass::Host, host_cpus),
        };
        if cpus.is_empty() {
            continue;
        }
        let new = cpus.to_list_string();
        if CpuSet::parse_list(cur).map(|c| &c == cpus).unwrap_or(false) {
            continue;
        }
        let dir = proc_root.join("irq").join(irq.number.to_string());
        out.push(PlannedStep::new(
            Target::Irq(step::Irq {
                irq: irq.number,
                path: dir.join("smp_affinity_list"),
                name: irq.actions.clone(),
                class,
                previous_effective: irq.effective.clone(),
            }),
            cur.clone(),
            new,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(n: u32, actions: &str, aff: &str) -> IrqInfo {
        IrqInfo {
            number: n,
            actions: actions.into(),
            affinity: Some(aff.into()),
            effective: Some("0".into()),
        }
    }

    #[test]
    fn vfio_names() {
        assert_eq!(
            vfio_device("vfio-msix[0](0000:01:00.0)").as_deref(),
            Some("0000:01:00.0")
        );
        assert_eq!(
            vfio_device("vfio-msi[0](0000:0A:00.1)").as_deref(),
            Some("0000:0a:00.1")
        );
        assert_eq!(
            vfio_device("vfio-intx(0000:01:00.0)").as_deref(),
            Some("0000:01:00.0")
        );
        assert_eq!(vfio_device("virtio2-input.0"), None);
        assert_eq!(vfio_device("vfio-err(0000:01:00.0)"), None);
        assert_eq!(vfio_device("vfio-msix[0"), None);
        assert_eq!(
            vfio_device("i801_smbus, vfio-intx(0000:00:1f.3)").as_deref(),
            Some("0000:00:1f.3")
        );
        assert_eq!(normalize_bdf("01:00.0"), "0000:01:00.0");
        // Intel VMD: five domain digits, as the kernel names the vfio action
        assert_eq!(normalize_bdf("10000:E1:00.0"), "10000:e1:00.0");
        assert_eq!(
            vfio_device("vfio-msix[0](10000:e1:00.0)").as_deref(),
            Some("10000:e1:00.0")
        );
    }

    #[test]
    fn routes_vfio_to_guest_others_to_host_and_leaves_other_vms_alone() {
        let irqs = vec![
            info(40, "vfio-msix[0](0000:01:00.0)", "0-7"),
            info(41, "vfio-msix[1](0000:01:00.0)", "2-3"),
            info(42, "vfio-msix[0](0000:02:00.0)", "0-7"),
            info(43, "nvme0q1", "0-7"),
            info(44, "eth0", "0-1"),
            IrqInfo {
                number: 9,
                actions: "acpi".into(),
                affinity: None,
                effective: None,
            },
        ];
        let guest = CpuSet::parse_list("2-3").unwrap();
        let host = CpuSet::parse_list("0-1").unwrap();
        let steps = route(
            &irqs,
            &["01:00.0".into()],
            &guest,
            &host,
            Path::new("/proc"),
        );
        let got: Vec<(u32, IrqClass, String)> = steps
            .iter()
            .map(|s| match &s.target {
                Target::Irq(q) => (q.irq, q.class, s.new.clone()),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (40, IrqClass::Vfio, "2-3".into()),
                (43, IrqClass::Host, "0-1".into())
            ]
        );
        assert_eq!(steps[0].previous, "0-7");
    }
}
