//! [`Inventory`] → `ResourceSlice`s (one pool per node and driver) and the `DeviceClass`es.

use std::collections::BTreeMap;

use crate::inventory::{CpuGroup, Gpu, Inventory};
use crate::objects::{
    Attribute, Capacity, CapacityRange, CelSelector, Device, DeviceClass, DeviceClassSpec,
    DeviceSelector, ObjectMeta, RequestPolicy, ResourcePool, ResourceSlice, ResourceSliceSpec,
    API_VERSION,
};
use crate::{CPUS, CPU_DRIVER, GPU_DRIVER, NUMA_NODE, PCIE_ROOT, PCI_BUS_ID};

/// Devices per slice: the API server's limit for devices with consumable capacity
/// (`ResourceSliceMaxDevicesWithTaintsOrConsumableCapacity`, 64; 128 for the others).
pub const MAX_DEVICES_PER_SLICE: usize = 64;

/// The label every slice vmtune writes carries (the publisher lists by it).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "vmtune");

/// The node's slices: the GPU pool's (none when it has no GPU to offer) and the CPU pool's
/// (none when no group offers a core), each cut into slices of at most
/// [`MAX_DEVICES_PER_SLICE`] devices.
pub fn slices(inv: &Inventory, generation: i64) -> Vec<ResourceSlice> {
    let gpus: Vec<Device> = inv.gpus.iter().map(gpu_device).collect();
    let cpus: Vec<Device> = inv.cpu_groups.iter().map(cpu_device).collect();
    let mut out = pool(&inv.node_name, GPU_DRIVER, gpus, generation);
    out.extend(pool(&inv.node_name, CPU_DRIVER, cpus, generation));
    out
}

fn pool(node: &str, driver: &str, devices: Vec<Device>, generation: i64) -> Vec<ResourceSlice> {
    let chunks: Vec<&[Device]> = devices.chunks(MAX_DEVICES_PER_SLICE).collect();
    let count = chunks.len() as i64;
    chunks
        .iter()
        .enumerate()
        .map(|(i, devs)| ResourceSlice {
            api_version: API_VERSION.into(),
            kind: "ResourceSlice".into(),
            metadata: ObjectMeta {
                name: slice_name(node, driver, i),
                labels: BTreeMap::from([(MANAGED_BY.0.into(), MANAGED_BY.1.into())]),
                resource_version: None,
            },
            spec: ResourceSliceSpec {
                driver: driver.into(),
                pool: ResourcePool {
                    name: node.into(),
                    generation,
                    resource_slice_count: count,
                },
                node_name: Some(node.into()),
                devices: devs.to_vec(),
            },
        })
        .collect()
}

/// `<node>-<driver>`, then `-1`, `-2` for a pool's further slices.
pub fn slice_name(node: &str, driver: &str, index: usize) -> String {
    match index {
        0 => format!("{node}-{driver}"),
        i => format!("{node}-{driver}-{i}"),
    }
}

/// `gpu-0000-41-00-0`: a BDF as a DNS label.
pub fn gpu_name(bdf: &str) -> String {
    format!("gpu-{}", bdf.replace([':', '.'], "-"))
}

fn gpu_device(g: &Gpu) -> Device {
    let mut a = BTreeMap::new();
    a.insert(PCI_BUS_ID.into(), Attribute::String(g.bdf.clone()));
    if let Some(n) = g.numa {
        a.insert(NUMA_NODE.into(), Attribute::Int(n.into()));
    }
    if let Some(r) = &g.pcie_root {
        a.insert(PCIE_ROOT.into(), Attribute::String(r.clone()));
    }
    if let Some(i) = g.iommu_group {
        a.insert("iommuGroup".into(), Attribute::Int(i.into()));
    }
    if let Some(v) = g.vendor_id {
        a.insert("vendorID".into(), Attribute::String(format!("0x{v:04x}")));
    }
    if let Some(d) = g.device_id {
        a.insert("deviceID".into(), Attribute::String(format!("0x{d:04x}")));
    }
    if let Some(d) = &g.driver {
        a.insert("driver".into(), Attribute::String(d.clone()));
    }
    if let Some(s) = g.link_speed_gts {
        a.insert("linkSpeed".into(), Attribute::String(format!("{s} GT/s")));
    }
    if let Some(w) = g.link_width {
        a.insert("linkWidth".into(), Attribute::Int(w.into()));
    }
    if let Some(h) = g.link_healthy {
        a.insert("linkHealthy".into(), Attribute::Bool(h));
    }
    Device {
        name: gpu_name(&g.bdf),
        attributes: a,
        capacity: BTreeMap::new(),
        allow_multiple_allocations: None,
    }
}

fn cpu_device(g: &CpuGroup) -> Device {
    let mut a = BTreeMap::new();
    if let Some(n) = g.numa {
        a.insert(NUMA_NODE.into(), Attribute::Int(n.into()));
    }
    if let Some(p) = g.package {
        a.insert("socket".into(), Attribute::Int(p.into()));
    }
    if let Some(l3) = g.l3 {
        a.insert("l3".into(), Attribute::Int(l3.into()));
    }
    a.insert("l3Groups".into(), Attribute::Int(g.l3_groups.into()));
    a.insert("smt".into(), Attribute::Bool(g.threads_per_core > 1));
    a.insert(
        "threadsPerCore".into(),
        Attribute::Int(g.threads_per_core.into()),
    );
    a.insert("numCPUs".into(), Attribute::Int(g.cpus.len() as i64));
    let tpc = g.threads_per_core.max(1);
    let value = g.offered.len() as u32;
    // the API server wants room for one step above the minimum (min + step <= value); a
    // group of one core (or less than two of its widest) gets only the minimum's rounding
    let step = (value >= 2 * tpc).then(|| tpc.to_string());
    let capacity = Capacity {
        value: value.to_string(),
        request_policy: Some(RequestPolicy {
            default: Some(tpc.to_string()),
            valid_range: Some(CapacityRange {
                min: tpc.to_string(),
                max: None,
                step,
            }),
        }),
    };
    Device {
        name: g.name.clone(),
        attributes: a,
        capacity: BTreeMap::from([(CPUS.into(), capacity)]),
        allow_multiple_allocations: Some(true),
    }
}

/// The DeviceClasses claims name: `vfio.vmtune.io` (a VFIO GPU) and `cpu.vmtune.io` (CPUs
/// of one group).
pub fn classes() -> Vec<DeviceClass> {
    [GPU_DRIVER, CPU_DRIVER]
        .into_iter()
        .map(|driver| DeviceClass {
            api_version: API_VERSION.into(),
            kind: "DeviceClass".into(),
            metadata: ObjectMeta {
                name: driver.into(),
                labels: BTreeMap::from([
                    (MANAGED_BY.0.into(), MANAGED_BY.1.into()),
                    ("app.kubernetes.io/name".into(), "vmtune".into()),
                ]),
                resource_version: None,
            },
            spec: DeviceClassSpec {
                selectors: vec![DeviceSelector {
                    cel: CelSelector {
                        expression: format!("device.driver == \"{driver}\""),
                    },
                }],
            },
        })
        .collect()
}
