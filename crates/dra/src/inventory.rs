//! Host model → what the node offers through DRA: its VFIO GPUs and its CPU groups. The
//! decisions are the rest of vmtune's: a GPU is one `vmtune cdi` puts in its spec (so the
//! node half can hand it to a container by its CDI name), the housekeeping CPUs are the NRI
//! agent's (`nri::policy::housekeeping`: the kubelet's `--reserved-cpus`, else the planner's),
//! and a group offers only whole cores that neither housekeeping nor a container placed
//! outside DRA holds.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use topo::{CpuSet, DeviceKind, Host, PciDevice};

use crate::DraError;

/// Which GPUs are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuSelect {
    /// The GPUs `vmtune cdi` would put in its spec: a VFIO driver owns them, in a viable
    /// IOMMU group. What a node's agent publishes.
    Vfio,
    /// Every GPU the host model lists, whatever its driver: for review of a host described
    /// by hwloc XML (which says nothing of drivers) or not yet bound to vfio-pci. The node
    /// half can prepare only the VFIO ones.
    All,
}

/// What one CPU device stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuGroups {
    /// One device per NUMA node with CPUs (dra-driver-cpu's "grouped" shape).
    Numa,
    /// One device per L3 group (AMD CCX/CCD: several per NUMA node), so a claim can keep
    /// its CPUs in one last-level cache; a request larger than a group cannot be met.
    L3,
}

/// What the slices are made from.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Kubernetes node's name: the pool's name and the slices' `nodeName`.
    pub node_name: String,
    pub gpus: GpuSelect,
    pub cpu_groups: CpuGroups,
    /// The kubelet's `--reserved-cpus`; `None`: the planner's housekeeping choice (as
    /// `vmtune nri` without `reserved_cpus`).
    pub reserved_cpus: Option<CpuSet>,
    /// What is held outside DRA: CPUs of exclusive containers without a claim and Kata
    /// emulator cores the NRI agent placed, and the devices they hold
    /// ([`crate::taken_outside_dra`]).
    pub taken: Taken,
    /// The pool generation to write (the publisher bumps it on every change).
    pub generation: i64,
}

impl Options {
    pub fn new(node_name: &str) -> Options {
        Options {
            node_name: node_name.to_string(),
            gpus: GpuSelect::Vfio,
            cpu_groups: CpuGroups::Numa,
            reserved_cpus: None,
            taken: Taken::default(),
            generation: 1,
        }
    }
}

/// What containers placed outside DRA hold on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Taken {
    pub cpus: CpuSet,
    /// PCI addresses (`0000:18:00.0`).
    pub devices: BTreeSet<String>,
}

/// A GPU as published.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    pub bdf: String,
    /// The one NUMA node the device is local to; `None` where it is unknown or several.
    pub numa: Option<u32>,
    /// `pci<domain>:<bus>` of the root bus above it, as sysfs names it (and as NVIDIA's DRA
    /// driver publishes it); `None` where the model does not know the path up.
    pub pcie_root: Option<String>,
    pub iommu_group: Option<u32>,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    pub driver: Option<String>,
    /// Link speed (GT/s) and width as trained, where the source says.
    pub link_speed_gts: Option<f32>,
    pub link_width: Option<u32>,
    /// No link between it and the root complex runs below what both ends can do; `None`
    /// where the source has no link data (hwloc XML).
    pub link_healthy: Option<bool>,
}

/// A CPU group as published.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuGroup {
    /// The device name: `numa0`, or `numa0-l3-5`.
    pub name: String,
    pub numa: Option<u32>,
    /// The L3 group (topo's machine-unique id) with [`CpuGroups::L3`].
    pub l3: Option<u32>,
    pub package: Option<u32>,
    /// Every CPU of the group.
    pub cpus: CpuSet,
    /// What it offers: its whole cores off housekeeping and off CPUs taken outside DRA.
    pub offered: CpuSet,
    /// Hardware threads of its widest offered core (the request granule: whole cores).
    pub threads_per_core: u32,
    /// L3 groups its cores sit in.
    pub l3_groups: u32,
}

/// What a node offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    pub node_name: String,
    pub gpus: Vec<Gpu>,
    pub cpu_groups: Vec<CpuGroup>,
    pub housekeeping: CpuSet,
    pub taken: Taken,
    /// What was left out and why (GPUs not on VFIO, groups with no whole core to offer).
    pub notes: Vec<String>,
}

/// The node's GPUs and CPU groups.
pub fn inventory(host: &Host, opts: &Options) -> Result<Inventory, DraError> {
    check_node_name(&opts.node_name)?;
    let housekeeping = nri::policy::housekeeping(host, opts.reserved_cpus.as_ref())
        .map_err(|e| DraError::Host(format!("cannot decide the housekeeping CPUs: {e}")))?;
    let mut notes = Vec::new();
    let gpus = gpus(host, opts, &mut notes);
    let cpu_groups = cpu_groups(host, opts, &housekeeping, &mut notes)?;
    Ok(Inventory {
        node_name: opts.node_name.clone(),
        gpus,
        cpu_groups,
        housekeeping,
        taken: opts.taken.clone(),
        notes,
    })
}

/// A node name is a DNS-1123 subdomain (Kubernetes' rule for Node names), which also makes
/// it a valid pool name and slice name prefix.
fn check_node_name(name: &str) -> Result<(), DraError> {
    // room for the longest slice name suffix ("-cpu.vmtune.io-NN")
    if name.len() > 253 - 20 || !cdi::names::is_dns1123_subdomain(name) {
        return Err(DraError::NodeName(name.to_string()));
    }
    Ok(())
}

fn gpus(host: &Host, opts: &Options, notes: &mut Vec<String>) -> Vec<Gpu> {
    let select = opts.gpus;
    let vfio: Vec<String> = match select {
        GpuSelect::All => Vec::new(),
        GpuSelect::Vfio => vfio_gpus(host, notes),
    };
    host.pci_devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .filter(|d| select == GpuSelect::All || vfio.contains(&d.bdf))
        .filter(|d| {
            let held = opts.taken.devices.contains(&d.bdf);
            if held {
                notes.push(format!(
                    "GPU {} not published: a container placed outside DRA holds it",
                    d.bdf
                ));
            }
            !held
        })
        .map(|d| gpu(host, d))
        .collect()
}

/// The GPUs of `vmtune cdi --class gpu`'s spec; the others are noted.
fn vfio_gpus(host: &Host, notes: &mut Vec<String>) -> Vec<String> {
    let opts = cdi::Options {
        classes: vec![DeviceKind::Gpu],
        ..cdi::Options::default()
    };
    match cdi::generate(host, &opts) {
        Ok(g) => {
            for r in g.refused.iter().chain(&g.not_vfio) {
                notes.push(format!("GPU {} not published: {}", r.bdf, r.reason));
            }
            g.entries.into_iter().map(|e| e.bdf).collect()
        }
        Err(e) => {
            if host.gpus().next().is_some() {
                notes.push(format!("no GPU published: {e}"));
            }
            Vec::new()
        }
    }
}

fn gpu(host: &Host, d: &PciDevice) -> Gpu {
    let numa = match d.numa.as_deref() {
        Some([n]) => Some(*n),
        // a host with one NUMA node: every device is local to it (sysfs says -1 there)
        None | Some([]) if cpu_nodes(host).len() == 1 => cpu_nodes(host).first().copied(),
        _ => None,
    };
    Gpu {
        bdf: d.bdf.clone(),
        numa,
        pcie_root: pcie_root(host, d),
        iommu_group: d.iommu_group,
        vendor_id: d.vendor_id,
        device_id: d.device_id,
        driver: d.driver.clone(),
        link_speed_gts: d.link.as_ref().and_then(|l| l.speed_gts),
        link_width: d.link.as_ref().and_then(|l| l.width),
        link_healthy: d
            .link
            .as_ref()
            .map(|_| host.downgraded_links(&d.bdf).is_empty()),
    }
}

/// NUMA nodes that have CPUs.
fn cpu_nodes(host: &Host) -> Vec<u32> {
    host.numa_nodes
        .iter()
        .filter(|n| !n.is_cpuless())
        .map(|n| n.os_index)
        .collect()
}

/// The root bus above `d`: the bus of the topmost function on its path up (a root port, or
/// the device itself when it sits on the root bus). Known only where the model has the path:
/// the device has a parent, or is on bus 00 itself.
fn pcie_root(host: &Host, d: &PciDevice) -> Option<String> {
    let mut top = d;
    // a parent chain is a handful of hops; the bound keeps a looped source finite
    for _ in 0..64 {
        let Some(up) = top.parent.as_deref() else {
            break;
        };
        // the path up leaves the model: the root is not known
        top = host.pci(up)?;
    }
    if top.parent.is_some() {
        return None;
    }
    let (domain, rest) = top.bdf.split_once(':')?;
    let (bus, _) = rest.split_once(':')?;
    if std::ptr::eq(top, d) && bus != "00" {
        return None;
    }
    Some(format!("pci{domain}:{bus}"))
}

fn cpu_groups(
    host: &Host,
    opts: &Options,
    housekeeping: &CpuSet,
    notes: &mut Vec<String>,
) -> Result<Vec<CpuGroup>, DraError> {
    let held = housekeeping.union(&opts.taken.cpus);
    let l3s: Vec<&topo::Cache> = host.caches_at(3).collect();
    if opts.cpu_groups == CpuGroups::L3 && l3s.is_empty() {
        return Err(DraError::Host(format!(
            "{} lists no L3 cache: use CPU groups per NUMA node",
            host.source
        )));
    }
    // group key: (numa, l3) per core, by the core's first PU
    let mut groups: BTreeMap<(Option<u32>, Option<u32>), CpuGroup> = BTreeMap::new();
    for core in &host.cores {
        let Some(first) = core.pus.first() else {
            continue;
        };
        let numa = host.pu(first).and_then(|p| p.numa);
        let l3 = l3s.iter().find(|c| c.cpus.contains(first)).map(|c| c.id);
        let key = match opts.cpu_groups {
            CpuGroups::Numa => (numa, None),
            CpuGroups::L3 => match l3 {
                Some(id) => (numa, Some(id)),
                None => {
                    notes.push(format!(
                        "core of CPUs {} has no L3: not published",
                        core.pus
                    ));
                    continue;
                }
            },
        };
        let g = groups.entry(key).or_insert_with(|| CpuGroup {
            name: group_name(key),
            numa,
            l3: key.1,
            package: core.package,
            cpus: CpuSet::new(),
            offered: CpuSet::new(),
            threads_per_core: 0,
            l3_groups: 0,
        });
        g.cpus = g.cpus.union(&core.pus);
        if !core.pus.intersects(&held) {
            g.offered = g.offered.union(&core.pus);
            g.threads_per_core = g.threads_per_core.max(core.pus.len() as u32);
        }
    }
    let mut out = Vec::new();
    for mut g in groups.into_values() {
        g.l3_groups = l3s.iter().filter(|c| c.cpus.intersects(&g.cpus)).count() as u32;
        if g.offered.is_empty() {
            notes.push(format!(
                "CPU group {} (CPUs {}) has no whole core off housekeeping and exclusive containers: not published",
                g.name, g.cpus
            ));
            continue;
        }
        out.push(g);
    }
    Ok(out)
}

fn group_name(key: (Option<u32>, Option<u32>)) -> String {
    match key {
        // an L3 that spans NUMA nodes (Intel SNC) is one group per node
        (Some(n), Some(l3)) => format!("numa{n}-l3-{l3}"),
        (None, Some(l3)) => format!("l3-{l3}"),
        (Some(n), None) => format!("numa{n}"),
        (None, None) => "cpus".to_string(),
    }
}
