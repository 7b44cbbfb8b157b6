//! Where the passed-through devices sit in a guest with several NUMA cells: behind a PCIe
//! expander bus per cell (QEMU `pxb-pcie` with `numa_node`, libvirt `pcie-expander-bus` with
//! `<target><node>`), one root port per host slot below it, the slot's functions on that
//! port. The guest's ACPI then gives each expander bus the cell's proximity domain, and the
//! guest kernel reads the cell as each device's `numa_node`; on q35's root bus every device
//! reads -1 and CUDA, NCCL and `numactl` in the guest bind it to node 0.
//!
//! The plan decides the cells ([`plan::PlannedDevice::guest_cell`]); this only lays them out
//! for the emitters, in the plan's device order.

use plan::Plan;

/// One expander bus: its cell, the first bus number it takes, its root ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expander {
    pub cell: u32,
    /// The bus number of the expander's own bus (QEMU `bus_nr`); each root port below it
    /// takes the next ones.
    pub bus_nr: u8,
    pub ports: Vec<Port>,
}

/// A root port on an expander bus, holding one host slot's functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Its slot on the expander's bus.
    pub slot: u8,
    /// Unique among the root ports (QEMU `chassis`).
    pub chassis: u8,
    /// The devices: host BDF and the guest function number (0 first).
    pub functions: Vec<(String, u8)>,
}

/// The expander buses of a plan whose devices have guest cells, in cell order; empty when
/// no device has one (one guest cell: the root bus is local to it).
pub fn expanders(plan: &Plan) -> Vec<Expander> {
    let mut out: Vec<Expander> = Vec::new();
    for d in &plan.devices {
        let Some(cell) = d.guest_cell else { continue };
        let slot_of = |bdf: &str| bdf.rsplit_once('.').map_or(bdf, |(s, _)| s).to_string();
        let e = match out.iter_mut().position(|e| e.cell == cell) {
            Some(i) => &mut out[i],
            None => {
                out.push(Expander {
                    cell,
                    bus_nr: 0,
                    ports: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        let slot = slot_of(&d.bdf);
        match e
            .ports
            .iter_mut()
            .find(|p| p.functions.first().is_some_and(|(b, _)| slot_of(b) == slot))
        {
            Some(p) => {
                let f = p.functions.len() as u8;
                p.functions.push((d.bdf.clone(), f));
            }
            None => {
                let s = e.ports.len() as u8;
                e.ports.push(Port {
                    slot: s,
                    chassis: 0,
                    functions: vec![(d.bdf.clone(), 0)],
                });
            }
        }
    }
    out.sort_by_key(|e| e.cell);
    // bus numbers from 0x80 up, an equal share each (the root bus keeps 0..0x7f for the
    // domain's other devices); chassis numbers from 0x40, one per root port
    let n = out.len().max(1) as u32;
    let step = 0x80 / n;
    let mut chassis = 0x40u8;
    for (i, e) in out.iter_mut().enumerate() {
        e.bus_nr = (0x80 + i as u32 * step).min(0xff) as u8;
        for p in &mut e.ports {
            p.chassis = chassis;
            chassis = chassis.wrapping_add(1);
        }
    }
    out
}

/// For an emitter that cannot place a device in a guest cell: a comment line (without the
/// `# `) naming where the plan puts each device, and that this format does not say it.
pub fn unexpressed(plan: &Plan, format: &str) -> Option<String> {
    let placed: Vec<String> = plan
        .devices
        .iter()
        .filter_map(|d| d.guest_cell.map(|c| format!("{} in cell {c}", d.bdf)))
        .collect();
    if placed.is_empty() {
        return None;
    }
    Some(format!(
        "the plan puts {}, but {format} has no setting for a device's guest NUMA node: the guest may read -1 for them (libvirt and QEMU output place them behind expander buses)",
        placed.join(", ")
    ))
}
