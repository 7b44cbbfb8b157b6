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

/// One warning for each link between `bdf` and the root complex that runs below what it can
/// do (`topo::Host::downgraded_links`): the figures, what they cost, what to check. A link
/// slower at full width may be the GPU saving power at idle, and is said to be; fewer lanes
/// never are. `warned` holds the links already named (both functions of a card report one).
fn downgraded_links(host: &Host, bdf: &str, warned: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for at in host.downgraded_links(bdf) {
        let Some(l) = at.link.as_ref() else { continue };
        if warned.iter().any(|w| w == at.slot()) {
            continue;
        }
        warned.push(at.slot().to_string());
        let whose = if at.bdf == bdf {
            format!("{bdf}'s PCIe link")
        } else {
            format!("{bdf} sits behind {}, whose PCIe link", at.bdf)
        };
        let cost = match l.bandwidths() {
            Some(b) => format!("{b} to and from the host"),
            None => "less bandwidth to and from the host".to_string(),
        };
        let check = "the slot (a full x16 slot wired to the CPU, not one wired x4 or sharing lanes with an M.2 slot), the riser or extension cable, the BIOS PCIe link-speed setting (Auto or the card's generation) and ASPM (pcie_aspm=off to test)";
        let figures = l.figures();
        out.push(if l.speed_below() && !l.width_below() {
            format!("{whose} runs at {figures} ({cost}; each PCIe generation down halves the bandwidth). A GPU lowers its link speed at idle to save power (NVIDIA GPUs often show 2.5 GT/s idle), so read current_link_speed or lspci -vv's LnkSta again under load; if it stays low, check {check}")
        } else {
            format!("{whose} runs at {figures} ({cost}; half the lanes is half the bandwidth, as each PCIe generation down halves it). Fewer lanes are not power saving: check {check}")
        });
    }
    out
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
    let mut warned_links = Vec::new();
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
        warnings.extend(downgraded_links(host, &bdf, &mut warned_links));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(name: &str) -> Host {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/vfio")
            .join(format!("{name}.tar.gz"));
        topo::load_path(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn warnings_for(host: &Host, gpus: &[&str]) -> Vec<String> {
        let req = Request {
            name: None,
            vcpus: 2,
            memory_bytes: 2 << 30,
            devices: gpus.iter().map(|g| g.to_string()).collect(),
            profile: Default::default(),
            os: Default::default(),
            hugepages: Default::default(),
            host_cpus: None,
            move_host_cpus: false,
            threads: Default::default(),
        };
        let (mut rationale, mut warnings) = (Vec::new(), Vec::new());
        resolve(&req, host, &[], &mut rationale, &mut warnings).unwrap();
        warnings
    }

    /// The RTX 5090 at 2.5 of 16 GT/s and the 4090 at x4 of x16 each get one warning naming
    /// the device, both figures, the cost and what to check; the idle note goes with the slow
    /// link only. Passing a card's two functions names its link once.
    #[test]
    fn a_downgraded_link_is_one_warning_naming_the_device() {
        let h = snapshot("desktop-pcie-downgraded");
        let w = warnings_for(&h, &["01:00.0", "01:00.1", "02:00.0"]);
        let links: Vec<&String> = w.iter().filter(|w| w.contains("PCIe link")).collect();
        assert_eq!(links.len(), 2, "{w:#?}");
        let slow = links[0];
        assert!(
            slow.starts_with(
                "0000:01:00.0's PCIe link runs at 2.5 GT/s x16 of 16 GT/s x16 (4.0 of 31.5 GB/s"
            ),
            "{slow}"
        );
        assert!(slow.contains("halves the bandwidth"), "{slow}");
        assert!(
            slow.contains("at idle") && slow.contains("2.5 GT/s idle"),
            "{slow}"
        );
        for check in ["slot", "riser", "BIOS PCIe link-speed setting", "ASPM"] {
            assert!(slow.contains(check), "{check}: {slow}");
        }
        let narrow = links[1];
        assert!(
            narrow.starts_with(
                "0000:02:00.0's PCIe link runs at 16 GT/s x4 of 16 GT/s x16 (7.9 of 31.5 GB/s"
            ),
            "{narrow}"
        );
        assert!(!narrow.contains("at idle"), "{narrow}");
        assert!(w.iter().all(|w| !w.contains('\n')));
    }

    #[test]
    fn healthy_links_and_hosts_without_link_figures_are_quiet() {
        for (name, gpu) in [
            ("desktop-pcie-healthy", "01:00.0"),
            ("desktop-pcie-healthy", "02:00.0"),
            ("desktop-5.15-legacy", "01:00.0"),
        ] {
            let w = warnings_for(&snapshot(name), &[gpu]);
            assert!(
                w.iter().all(|w| !w.contains("PCIe link")),
                "{name} {gpu}: {w:?}"
            );
        }
    }
}
