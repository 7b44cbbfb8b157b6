//! What the guest sees: vCPU → PU pins, the guest CPU topology, guest NUMA cells.

use topo::CpuSet;

use crate::context::Context;
use crate::memory::{human_bytes, MemoryDecision};
use crate::select::Placement;
use crate::{GuestNumaCell, GuestTopology, Profile, VcpuPin};

/// Guest cores in pinning order: by node (in the placement's node order), then core id.
pub fn ordered_cores(ctx: &Context, p: &Placement) -> Vec<u32> {
    let mut cores = p.cores.clone();
    cores.sort_by_key(|&c| {
        let node = ctx.cores.get(c as usize).map(|i| i.node).unwrap_or(0);
        (
            p.nodes
                .iter()
                .position(|&n| n == node)
                .unwrap_or(usize::MAX),
            c,
        )
    });
    cores
}

/// vCPU 0, 1, … onto the PUs of the cores in order, siblings consecutively (vCPU 2k and
/// 2k+1 on the two threads of one core with SMT).
pub fn pins(ctx: &Context, cores: &[u32]) -> Vec<VcpuPin> {
    let mut out = Vec::new();
    for &c in cores {
        let Some(info) = ctx.cores.get(c as usize) else {
            continue;
        };
        for &pu in &info.pus {
            if out.len() as u32 == ctx.vcpus {
                return out;
            }
            out.push(VcpuPin {
                vcpu: out.len() as u32,
                cpu: pu,
            });
        }
    }
    out
}

/// Guest cells: one per host node when the VM spans nodes and the profile gains from it
/// (`membw`: the r/VFIO pinning benchmark measured STREAM 2–7x with guest NUMA), else one cell.
pub fn guest_numa(
    ctx: &Context,
    profile: Profile,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    rationale: &mut Vec<String>,
) -> Vec<GuestNumaCell> {
    let node_of = |cpu: u32| ctx.node_of(cpu);
    let mut cpu_nodes: Vec<u32> = pins.iter().map(|p| node_of(p.cpu)).collect();
    cpu_nodes.sort_unstable();
    cpu_nodes.dedup();
    let total: u64 = mem.bytes_per_node.iter().sum();
    let spans = cpu_nodes.len() > 1 && ctx.numa_known;
    if spans && profile == Profile::Membw {
        let cells: Vec<GuestNumaCell> = mem
            .host_nodes
            .iter()
            .zip(&mem.bytes_per_node)
            .filter(|(n, b)| **b > 0 || cpu_nodes.contains(n))
            .enumerate()
            .map(|(i, (&node, &bytes))| GuestNumaCell {
                cell: i as u32,
                vcpus: pins
                    .iter()
                    .filter(|p| node_of(p.cpu) == node)
                    .map(|p| p.vcpu)
                    .collect(),
                memory_bytes: bytes,
                host_nodes: vec![node],
            })
            .collect();
        rationale.push(format!(
            "guest NUMA: {} cells mirroring host nodes {}: the VM spans nodes and the membw profile gains CPU-side memory bandwidth from it (r/VFIO pinning benchmark: STREAM 2-7x)",
            cells.len(),
            crate::memory::list(&mem.host_nodes)
        ));
        return cells;
    }
    if spans {
        rationale.push(format!(
            "guest NUMA: one cell although the VM spans host nodes {}: the r/VFIO pinning benchmark found guest NUMA no help to GPU compute and harmful to collectives through host memory; use --profile membw to expose the nodes",
            crate::memory::list(&cpu_nodes)
        ));
    } else {
        rationale.push(
            "guest NUMA: one cell, as the VM sits on one host node (r/VFIO pinning benchmark: start single-NUMA)"
                .into(),
        );
    }
    vec![GuestNumaCell {
        cell: 0,
        vcpus: (0..ctx.vcpus).collect::<CpuSet>(),
        memory_bytes: total,
        host_nodes: mem.host_nodes.clone(),
    }]
}

/// Sockets/dies/cores/threads matching the pins: threads = PUs per core when every guest
/// core has that many and the count divides; one socket per guest NUMA cell when they are
/// even.
pub fn guest_topology(
    ctx: &Context,
    cores: &[u32],
    cells: &[GuestNumaCell],
    rationale: &mut Vec<String>,
) -> GuestTopology {
    let n = ctx.vcpus;
    let ppcs: Vec<u32> = cores
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .map(|c| c.pus.len() as u32)
        .collect();
    let uniform = ppcs
        .first()
        .copied()
        .filter(|&f| ppcs.iter().all(|&p| p == f));
    let threads = match uniform {
        Some(t) if t > 1 && n.is_multiple_of(t) => {
            rationale.push(format!(
                "guest sees {t} threads per core: vCPUs are pinned in groups of {t} to the SMT siblings of one host core, so the guest scheduler's idea of siblings is true"
            ));
            t
        }
        Some(t) if t > 1 => {
            rationale.push(format!(
                "guest sees 1 thread per core: {n} vCPUs is not a multiple of the host's {t} threads per core"
            ));
            1
        }
        None => {
            rationale.push(
                "guest sees 1 thread per core: the chosen host cores have different thread counts"
                    .into(),
            );
            1
        }
        _ => 1,
    };
    let mut sockets = 1;
    let with_cpus: Vec<u64> = cells.iter().map(|c| c.vcpus.len() as u64).collect();
    if cells.len() > 1
        && with_cpus
            .iter()
            .all(|&c| c > 0 && c == with_cpus[0] && c % threads as u64 == 0)
    {
        sockets = cells.len() as u32;
    }
    GuestTopology {
        sockets,
        dies: 1,
        cores: n / (sockets * threads),
        threads,
    }
}

/// A line describing the memory split, for the rationale.
pub fn memory_line(mem: &MemoryDecision) -> String {
    let parts: Vec<String> = mem
        .host_nodes
        .iter()
        .zip(&mem.bytes_per_node)
        .map(|(n, b)| format!("{} on node {n}", human_bytes(*b)))
        .collect();
    parts.join(", ")
}
