//! Host mode: keep each VFIO device's host IRQs on the physical CPU where the vCPU thread
//! that the interrupt targets is running now.
//!
//! Without posted interrupts, a device interrupt first lands on a host CPU, which then kicks
//! the target vCPU; if that is the CPU the vCPU thread runs on, the injection is local (the
//! VFIO gaming-host write-up's rule "VFIO IRQs to the guest's cores", made dynamic). vCPU thread placement comes
//! from `/proc/PID/task/TID/comm` (`CPU N/KVM`) and field 39 of `/proc/PID/task/TID/stat`.
//! The guest's MSI target is not visible on the host, so vector `k` of a device is assumed to
//! target vCPU `k mod vcpus` (Linux guests spread MSI-X vectors that way) unless the user
//! gives an explicit `IRQ=VCPU` map.

use std::collections::BTreeMap;

use serde::Serialize;
use topo::InterruptTable;

use crate::daemon::{parse_pid_stat_processor, ProcFs};
use crate::Error;

/// One VFIO vector from `/proc/interrupts`: `vfio-msix[3](0000:01:00.0)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VfioIrq {
    pub irq: u32,
    pub bdf: String,
    /// Vector index (0 for INTx).
    pub vector: u32,
    /// The CPU it is delivered to now, if known.
    pub cpu: Option<u32>,
}

/// Parse a VFIO action name; `None` for anything else.
pub fn parse_vfio_action(action: &str) -> Option<(u32, String)> {
    let a = action.trim();
    let rest = a.strip_prefix("vfio-")?;
    let (kind, rest) = rest.split_at(rest.find(['[', '('])?);
    if !matches!(kind, "msi" | "msix" | "intx") {
        return None;
    }
    let (vector, rest) = if let Some(r) = rest.strip_prefix('[') {
        let end = r.find(']')?;
        (r[..end].parse().ok()?, &r[end + 1..])
    } else {
        (0, rest)
    };
    let bdf = rest.strip_prefix('(')?.strip_suffix(')')?;
    if bdf.is_empty() {
        return None;
    }
    Some((vector, bdf.to_string()))
}

/// The VFIO vectors of an interrupt table.
pub fn vfio_irqs(table: &InterruptTable) -> Vec<VfioIrq> {
    table
        .irqs
        .iter()
        .filter_map(|r| {
            let irq = r.number?;
            let (vector, bdf) = parse_vfio_action(&r.actions)?;
            let cpu = r
                .effective_affinity
                .as_ref()
                .or(r.affinity.as_ref())
                .and_then(|s| (s.len() == 1).then(|| s.first()).flatten());
            Some(VfioIrq {
                irq,
                bdf,
                vector,
                cpu,
            })
        })
        .collect()
}

/// Where each vCPU thread of a QEMU process last ran: `vcpu → host CPU`.
pub fn vcpu_placement(fs: &ProcFs, pid: u32) -> Result<BTreeMap<u32, u32>, Error> {
    let dir = fs.root.join(format!("{pid}/task"));
    let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let mut out = BTreeMap::new();
    for e in rd.flatten() {
        let p = e.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        let Some(vcpu) = parse_vcpu_comm(&comm) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        if let Some(cpu) = parse_pid_stat_processor(&stat) {
            out.insert(vcpu, cpu);
        }
    }
    if out.is_empty() {
        return Err(Error::Other(format!(
            "{}: no `CPU N/KVM` threads (is {pid} a QEMU/KVM process?)",
            dir.display()
        )));
    }
    Ok(out)
}

/// `CPU 3/KVM` → 3 (QEMU's vCPU thread names; `CPU 3/TCG` under TCG).
pub fn parse_vcpu_comm(comm: &str) -> Option<u32> {
    let rest = comm.trim().strip_prefix("CPU ")?;
    let n = rest
        .strip_suffix("/KVM")
        .or_else(|| rest.strip_suffix("/TCG"))?;
    n.parse().ok()
}

/// One host-mode move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostMove {
    pub irq: u32,
    pub bdf: String,
    pub vcpu: u32,
    pub from: Option<u32>,
    pub to: u32,
}

/// Pure: for each VFIO vector, the host CPU its target vCPU runs on, where that differs from
/// where the vector goes now. `targets` overrides the `vector mod vcpus` rule per IRQ.
pub fn host_plan(
    irqs: &[VfioIrq],
    placement: &BTreeMap<u32, u32>,
    targets: &BTreeMap<u32, u32>,
) -> Vec<HostMove> {
    let vcpus: Vec<u32> = placement.keys().copied().collect();
    if vcpus.is_empty() {
        return Vec::new();
    }
    irqs.iter()
        .filter_map(|i| {
            let vcpu = targets
                .get(&i.irq)
                .copied()
                .unwrap_or_else(|| vcpus[i.vector as usize % vcpus.len()]);
            let to = *placement.get(&vcpu)?;
            (i.cpu != Some(to)).then(|| HostMove {
                irq: i.irq,
                bdf: i.bdf.clone(),
                vcpu,
                from: i.cpu,
                to,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vfio_actions() {
        assert_eq!(
            parse_vfio_action("vfio-msix[3](0000:01:00.0)"),
            Some((3, "0000:01:00.0".into()))
        );
        assert_eq!(
            parse_vfio_action("vfio-msi[0](0000:65:00.1)"),
            Some((0, "0000:65:00.1".into()))
        );
        assert_eq!(
            parse_vfio_action("vfio-intx(0000:02:00.0)"),
            Some((0, "0000:02:00.0".into()))
        );
        assert_eq!(parse_vfio_action("virtio0-input.0"), None);
        assert_eq!(parse_vfio_action("vfio-msix[x](0000:01:00.0)"), None);
        assert_eq!(parse_vfio_action("vfio-msix[1]()"), None);
        assert_eq!(parse_vfio_action("vfio-foo[1](a)"), None);
    }

    #[test]
    fn vcpu_comm() {
        assert_eq!(parse_vcpu_comm("CPU 12/KVM\n"), Some(12));
        assert_eq!(parse_vcpu_comm("CPU 1/TCG"), Some(1));
        assert_eq!(parse_vcpu_comm("CPU x/KVM"), None);
        assert_eq!(parse_vcpu_comm("qemu-system-x86"), None);
    }

    #[test]
    fn plan_follows_the_vcpu_threads() {
        let t = topo::interrupts::parse_proc_interrupts(
            "      CPU0 CPU1 CPU2 CPU3\n 150: 1 0 0 0 IR-PCI-MSIX-0000:01:00.0 0-edge vfio-msix[0](0000:01:00.0)\n 151: 0 1 0 0 IR-PCI-MSIX-0000:01:00.0 1-edge vfio-msix[1](0000:01:00.0)\n 152: 0 1 0 0 IR-PCI-MSIX-0000:01:00.0 2-edge vfio-msix[2](0000:01:00.0)\n 20: 0 0 0 0 IO-APIC 2-edge timer\n",
        )
        .unwrap();
        let mut irqs = vfio_irqs(&t);
        assert_eq!(irqs.len(), 3);
        irqs[0].cpu = Some(2);
        irqs[1].cpu = Some(3);
        // vCPU0 runs on host CPU 2, vCPU1 on 1
        let placement: BTreeMap<u32, u32> = [(0, 2), (1, 1)].into();
        let plan = host_plan(&irqs, &placement, &BTreeMap::new());
        // vector 0 → vCPU0 (already on 2), vector 1 → vCPU1 (3 → 1), vector 2 → vCPU0 (? → 2)
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[0].irq, plan[0].from, plan[0].to), (151, Some(3), 1));
        assert_eq!((plan[1].irq, plan[1].vcpu, plan[1].to), (152, 0, 2));
        let explicit: BTreeMap<u32, u32> = [(150, 1)].into();
        let plan = host_plan(&irqs, &placement, &explicit);
        assert!(plan.iter().any(|m| m.irq == 150 && m.to == 1));
    }

    #[test]
    fn live_placement_errors_for_a_non_qemu_pid() {
        let fs = ProcFs::default();
        let e = vcpu_placement(&fs, std::process::id())
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU N/KVM"), "{e}");
    }
}
