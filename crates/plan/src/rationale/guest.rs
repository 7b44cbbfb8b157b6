//! The sentences about what the guest gets: its memory's split, its NUMA cells and CPU
//! topology, and where its devices' interrupts go.

use super::{Decisions, NumaShape, SmtFit};
use crate::memory::{human_bytes, list, page_name, MemoryDecision};
use crate::topology;

/// The memory's size, its split over the nodes and its page size.
pub fn memory(mem: &MemoryDecision) -> String {
    let split: Vec<String> = mem
        .host_nodes
        .iter()
        .zip(&mem.bytes_per_node)
        .map(|(n, b)| format!("{} on node {n}", human_bytes(*b)))
        .collect();
    format!(
        "memory {}: {} ({} pages)",
        human_bytes(mem.bytes_per_node.iter().sum()),
        split.join(", "),
        page_name(mem.size_kb)
    )
}

/// The guest's NUMA cells and why so many.
/// With several guest cells: which cell each device sits in, and how the guest learns it.
pub fn device_cells(d: &Decisions) -> Option<String> {
    let placed: Vec<String> = d
        .devices
        .iter()
        .filter_map(|dev| {
            let cell = dev.guest_cell?;
            let host = dev
                .numa
                .as_ref()
                .map(|n| format!("host node {}", list(n)))
                .unwrap_or_else(|| "host node unknown".into());
            Some(format!("{} in cell {cell} ({host})", dev.bdf))
        })
        .collect();
    if placed.is_empty() {
        return None;
    }
    Some(format!(
        "devices by guest cell: {}; each behind a PCIe expander bus bound to its cell (libvirt pcie-expander-bus <node>, QEMU pxb-pcie numa_node), so the guest reads the cell as the device's numa_node and CUDA, NCCL or numactl in the guest bind to it — on q35's root bus every device reads -1 and is bound to node 0",
        placed.join(", ")
    ))
}

pub fn numa(d: &Decisions) -> String {
    let mem = d.memory;
    match &d.numa.shape {
        NumaShape::Mirrored => {
            let each: Vec<String> = d
                .numa
                .cells
                .iter()
                .map(|c| {
                    let node = c.host_nodes.first().copied().unwrap_or(0);
                    if c.vcpus.is_empty() {
                        format!(
                            "cell {}: no vCPUs, {} on node {node}",
                            c.cell,
                            human_bytes(c.memory_bytes)
                        )
                    } else {
                        format!(
                            "cell {}: vCPUs {} and {} on node {node}",
                            c.cell,
                            c.vcpus,
                            human_bytes(c.memory_bytes)
                        )
                    }
                })
                .collect();
            format!(
                "guest NUMA: {} cells mirroring host nodes {} ({}), each cell's memory on the node its vCPUs run on (in proportion to them where the node has room), so the guest's own NUMA policy keeps memory local: the VM spans nodes and the membw profile gains CPU-side memory bandwidth from it (r/VFIO pinning benchmark: STREAM 2-7x){}",
                d.numa.cells.len(),
                list(&mem.host_nodes),
                each.join("; "),
                topology::distances(d.ctx, &mem.host_nodes)
                    .map(|dist| format!("; host {dist} between them"))
                    .unwrap_or_default()
            )
        }
        NumaShape::Spanning { cpu_nodes } => format!(
            "guest NUMA: one cell although the VM spans host nodes {}: the r/VFIO pinning benchmark found guest NUMA no help to GPU compute and harmful to collectives through host memory; use --profile membw to expose the nodes",
            list(cpu_nodes)
        ),
        NumaShape::MemoryElsewhere {
            cpu_nodes,
            memory_only,
        } => format!(
            "guest NUMA: one cell: the vCPUs sit on host node {} and the memory that did not fit there is on node(s) {} (r/VFIO pinning benchmark: start single-NUMA)",
            list(cpu_nodes),
            list(memory_only)
        ),
        NumaShape::OneNode => {
            "guest NUMA: one cell, as the VM sits on one host node (r/VFIO pinning benchmark: start single-NUMA)"
                .into()
        }
    }
}

/// The guest's threads per core and sockets, where there is something to say.
pub fn topology(d: &Decisions) -> Vec<String> {
    let n = d.ctx.vcpus;
    let mut out = Vec::new();
    match d.smt {
        SmtFit::Siblings(t) => out.push(format!(
            "guest sees {t} threads per core: vCPUs are pinned in groups of {t} to the SMT siblings of one host core, so the guest scheduler's idea of siblings is true"
        )),
        SmtFit::NotMultiple(t) => out.push(format!(
            "guest sees 1 thread per core: {n} vCPUs is not a multiple of the host's {t} threads per core"
        )),
        SmtFit::Mixed => out.push(
            "guest sees 1 thread per core: the chosen host cores have different thread counts"
                .into(),
        ),
        SmtFit::NoSmt => {}
    }
    let cells = &d.numa.cells;
    if d.topology.sockets > 1 {
        out.push(format!(
            "guest sees {} sockets, one per NUMA cell, as each cell has {} vCPUs",
            d.topology.sockets,
            cells[0].vcpus.len()
        ));
    } else if cells.len() > 1 {
        out.push(format!(
            "guest sees 1 socket with {} NUMA cells: the cells' vCPU counts ({}) are not equal whole cores, so no socket layout matches them",
            cells.len(),
            cells
                .iter()
                .map(|c| c.vcpus.len().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// Where the devices' interrupts go, and every other interrupt.
pub fn irq(d: &Decisions) -> String {
    if d.irq.vfio_cpus != *d.guest_cpus {
        format!(
            "device interrupts to guest CPUs {}: the vCPUs on the devices' node(s) {}",
            d.irq.vfio_cpus,
            list(&d.ctx.device_nodes())
        )
    } else {
        format!(
            "device (VFIO) interrupts to the guest's CPUs {}; all other interrupts to the host side {} (VFIO gaming-host write-up: interrupt masking)",
            d.guest_cpus, d.irq.host_cpus
        )
    }
}
