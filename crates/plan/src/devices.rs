//! Passed-through devices: normalize the BDFs, add the other functions of multi-function
//! devices and the other endpoints of their IOMMU groups (VFIO hands a group over whole),
//! refuse devices a tenant already has. [`resolve`] writes the "Why" sentence of each device
//! it adds beside the one it goes with (they reach `crate::rationale` in `Context.rationale`).

use topo::{DeviceKind, Host};

use crate::model::DeviceInfo;
use crate::{PlanError, Request, Tenant};

/// First PCI domain an Intel VMD controller gives its devices (`vmd_find_free_domain` in
/// Linux's `drivers/pci/controller/vmd.c` counts up from 0x10000).
const VMD_FIRST_DOMAIN: u32 = 0x10000;

/// A warning when `bdf` sits in an Intel VMD domain: the VMD endpoint puts its own requester
/// ID on its devices' DMA (Linux `x86/PCI: Allow DMA ops specific to a PCI domain`), so the
/// IOMMU cannot tell them apart, gives them no IOMMU group, and VFIO cannot take one.
fn behind_vmd(host: &topo::Host, bdf: &str) -> Option<String> {
    let domain = u32::from_str_radix(bdf.split(':').next()?, 16).ok()?;
    if domain < VMD_FIRST_DOMAIN {
        return None;
    }
    // the VMD endpoint: the first device up the parent chain outside the VMD domain
    let mut endpoint = None;
    let mut cur = host.pci(bdf).and_then(|d| d.parent.clone());
    for _ in 0..32 {
        let Some(p) = cur else { break };
        let d = p
            .split(':')
            .next()
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        if d.is_some_and(|d| d < VMD_FIRST_DOMAIN) {
            endpoint = Some(p);
            break;
        }
        cur = host.pci(&p).and_then(|d| d.parent.clone());
    }
    let by = endpoint.map_or("an Intel VMD controller".to_string(), |e| {
        format!("the Intel VMD controller {e}")
    });
    Some(format!(
        "{bdf} is in PCI domain {domain:x}, behind {by}: VMD puts its own requester ID on its devices' DMA, so the IOMMU gives {bdf} no group of its own and VFIO cannot take it; turn VMD off for that slot in the firmware (the device then appears in domain 0000) before passing it through"
    ))
}

/// The devices the VM gets, in BDF order.
pub fn resolve(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<DeviceInfo>, PlanError> {
    let mut out: Vec<DeviceInfo> = Vec::new();
    let push = |out: &mut Vec<DeviceInfo>, bdf: &str, nodes: Option<Vec<u32>>| {
        if !out.iter().any(|d| d.bdf == bdf) {
            out.push(DeviceInfo {
                bdf: bdf.to_string(),
                nodes,
            });
        }
    };
    for given in &req.devices {
        let bdf = topo::normalize_bdf(given).ok_or_else(|| {
            PlanError::Refused(format!(
                "{given:?} is not a PCI address (expected BDF like 01:00.0 or 0000:01:00.0)"
            ))
        })?;
        let Some(dev) = host.pci_devices.iter().find(|d| d.bdf == bdf) else {
            if host.pci_devices.is_empty() {
                warnings.push(format!(
                    "the host model ({}) lists no PCI devices: {bdf}'s NUMA node is unknown, so placement ignores it",
                    host.source
                ));
                push(&mut out, &bdf, None);
                continue;
            }
            return Err(PlanError::Refused(format!(
                "no PCI device {bdf} on this host ({} devices listed; see `vmtune topo`)",
                host.pci_devices.len()
            )));
        };
        if dev.kind == DeviceKind::Bridge {
            return Err(PlanError::Refused(format!(
                "{bdf} is a PCI bridge, not a device to pass through"
            )));
        }
        if let Some(vmd) = behind_vmd(host, &bdf) {
            warnings.push(vmd);
        }
        let slot = dev.slot().to_string();
        let mut added = Vec::new();
        for d in &host.pci_devices {
            let same_slot = d.slot() == slot;
            let same_group = dev.iommu_group.is_some()
                && d.iommu_group == dev.iommu_group
                && d.kind != DeviceKind::Bridge;
            if (same_slot || same_group) && d.bdf != bdf && !out.iter().any(|o| o.bdf == d.bdf) {
                added.push((d.bdf.clone(), same_slot));
            }
        }
        push(&mut out, &bdf, dev.numa.clone());
        if dev.numa.is_none() {
            warnings.push(format!(
                "{bdf}: NUMA locality unknown in the host model; its node does not steer placement"
            ));
        }
        for (b, same_slot) in added {
            let nodes = host.pci(&b).and_then(|d| d.numa.clone());
            push(&mut out, &b, nodes);
            rationale.push(if same_slot {
                format!("{b} goes with {bdf}: functions of one multi-function device are passed through together")
            } else {
                format!(
                    "{b} goes with {bdf}: same IOMMU group {}, which VFIO assigns whole",
                    dev.iommu_group.unwrap_or_default()
                )
            });
        }
    }
    for d in &out {
        for t in tenants {
            if t.devices
                .iter()
                .any(|td| topo::normalize_bdf(td).as_deref() == Some(d.bdf.as_str()))
            {
                return Err(PlanError::Refused(format!(
                    "device {} is already assigned to tenant {:?}",
                    d.bdf, t.name
                )));
            }
        }
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}
