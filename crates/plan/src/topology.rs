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

/// More than this share of the guest's memory remote to the vCPUs that use it is warned
/// about (percent).
pub const REMOTE_MEMORY_WARN_PERCENT: u64 = 25;

/// Guest cells: one per host node when the VM spans nodes and the profile gains from it
/// (`membw`: the r/VFIO pinning benchmark measured STREAM 2–7x with guest NUMA), else one cell.
/// Either way the rationale says why, and more than [`REMOTE_MEMORY_WARN_PERCENT`] % of the
/// memory remote to the vCPUs that use it is warned about.
pub fn guest_numa(
    ctx: &Context,
    profile: Profile,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Vec<GuestNumaCell> {
    let node_of = |cpu: u32| ctx.node_of(cpu);
    let mut cpu_nodes: Vec<u32> = pins.iter().map(|p| node_of(p.cpu)).collect();
    cpu_nodes.sort_unstable();
    cpu_nodes.dedup();
    let total: u64 = mem.bytes_per_node.iter().sum();
    let spans = cpu_nodes.len() > 1 && ctx.numa_known;
    // nodes holding guest memory but none of its vCPUs
    let memory_only: Vec<u32> = mem
        .host_nodes
        .iter()
        .zip(&mem.bytes_per_node)
        .filter(|(n, b)| **b > 0 && !cpu_nodes.contains(n))
        .map(|(&n, _)| n)
        .collect();
    let cells: Vec<GuestNumaCell> = if spans && profile == Profile::Membw {
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
        let each: Vec<String> = cells
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
        rationale.push(format!(
            "guest NUMA: {} cells mirroring host nodes {} ({}), each cell's memory on the node its vCPUs run on (in proportion to them where the node has room), so the guest's own NUMA policy keeps memory local: the VM spans nodes and the membw profile gains CPU-side memory bandwidth from it (r/VFIO pinning benchmark: STREAM 2-7x){}",
            cells.len(),
            crate::memory::list(&mem.host_nodes),
            each.join("; "),
            distances(ctx, &mem.host_nodes)
                .map(|d| format!("; host {d} between them"))
                .unwrap_or_default()
        ));
        cells
    } else {
        if spans {
            rationale.push(format!(
                "guest NUMA: one cell although the VM spans host nodes {}: the r/VFIO pinning benchmark found guest NUMA no help to GPU compute and harmful to collectives through host memory; use --profile membw to expose the nodes",
                crate::memory::list(&cpu_nodes)
            ));
        } else if !memory_only.is_empty() && ctx.numa_known {
            rationale.push(format!(
                "guest NUMA: one cell: the vCPUs sit on host node {} and the memory that did not fit there is on node(s) {} (r/VFIO pinning benchmark: start single-NUMA)",
                crate::memory::list(&cpu_nodes),
                crate::memory::list(&memory_only)
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
    };
    if ctx.numa_known {
        remote_warning(ctx, pins, mem, &cells, &memory_only, warnings);
    }
    cells
}

/// "NUMA distance 12" / "NUMA distances 12-32": the host's distances between `nodes`, `None`
/// for one node.
pub fn distances(ctx: &Context, nodes: &[u32]) -> Option<String> {
    let d: Vec<u64> = nodes
        .iter()
        .flat_map(|&a| nodes.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .map(|(a, b)| ctx.distance(a, b))
        .collect();
    match (d.iter().min(), d.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => Some(format!("NUMA distance {lo}")),
        (Some(lo), Some(hi)) => Some(format!("NUMA distances {lo}-{hi}")),
        _ => None,
    }
}

/// Bytes of each cell's memory on a host node, times the share of the cell's vCPUs that run
/// elsewhere (all of it for a cell without vCPUs): the guest's memory remote to the vCPUs
/// that use it, as the guest sees each cell's memory as local to all of the cell's vCPUs.
pub fn remote_bytes(
    ctx: &Context,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    cells: &[GuestNumaCell],
) -> u64 {
    let mut remote: u128 = 0;
    for c in cells {
        let cpus: Vec<u32> = pins
            .iter()
            .filter(|p| c.vcpus.contains(p.vcpu))
            .map(|p| ctx.node_of(p.cpu))
            .collect();
        for (&node, &bytes) in mem.host_nodes.iter().zip(&mem.bytes_per_node) {
            if !c.host_nodes.contains(&node) {
                continue;
            }
            // a cell of one node holds its share; a cell over several holds the decision's
            let bytes = if c.host_nodes.len() == 1 {
                c.memory_bytes
            } else {
                bytes
            };
            if cpus.is_empty() {
                remote += u128::from(bytes);
                continue;
            }
            let away = cpus.iter().filter(|&&n| n != node).count() as u128;
            remote += u128::from(bytes) * away / cpus.len() as u128;
        }
    }
    remote.min(u128::from(u64::MAX)) as u64
}

fn remote_warning(
    ctx: &Context,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    cells: &[GuestNumaCell],
    memory_only: &[u32],
    warnings: &mut Vec<String>,
) {
    let total: u64 = cells.iter().map(|c| c.memory_bytes).sum();
    let remote = remote_bytes(ctx, pins, mem, cells);
    if total == 0
        || u128::from(remote) * 100 <= u128::from(total) * u128::from(REMOTE_MEMORY_WARN_PERCENT)
    {
        return;
    }
    let pct = u128::from(remote) * 100 / u128::from(total);
    let mut why = Vec::new();
    let spanning = cells
        .iter()
        .filter(|c| {
            let mut n: Vec<u32> = pins
                .iter()
                .filter(|p| c.vcpus.contains(p.vcpu))
                .map(|p| ctx.node_of(p.cpu))
                .collect();
            n.sort_unstable();
            n.dedup();
            n.len() > 1
        })
        .count();
    if spanning > 0 {
        why.push(format!(
            "the guest sees its vCPUs on host nodes {} as one NUMA node, so each reaches the other nodes' share of the memory{}; --profile membw exposes the nodes to the guest",
            crate::memory::list(
                &pins
                    .iter()
                    .map(|p| ctx.node_of(p.cpu))
                    .collect::<std::collections::BTreeSet<u32>>()
                    .into_iter()
                    .collect::<Vec<u32>>()
            ),
            distances(ctx, &mem.host_nodes)
                .map(|d| format!(" (host {d})"))
                .unwrap_or_default()
        ));
    }
    if !memory_only.is_empty() {
        let bytes: u64 = mem
            .host_nodes
            .iter()
            .zip(&mem.bytes_per_node)
            .filter(|(n, _)| memory_only.contains(n))
            .map(|(_, b)| *b)
            .sum();
        why.push(format!(
            "node(s) {} hold {} of it and none of its vCPUs, as the vCPUs' node(s) had no room for all of it: less memory, or room freed on the vCPUs' node(s), keeps it local",
            crate::memory::list(memory_only),
            human_bytes(bytes)
        ));
    }
    warnings.push(format!(
        "{pct} % of the guest's memory ({} of {}) is remote to the vCPUs that use it (more than {REMOTE_MEMORY_WARN_PERCENT} %): {}; every such access crosses the host's interconnect",
        human_bytes(remote),
        human_bytes(total),
        why.join("; ")
    ));
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
        rationale.push(format!(
            "guest sees {sockets} sockets, one per NUMA cell, as each cell has {} vCPUs",
            with_cpus[0]
        ));
    } else if cells.len() > 1 {
        rationale.push(format!(
            "guest sees 1 socket with {} NUMA cells: the cells' vCPU counts ({}) are not equal whole cores, so no socket layout matches them",
            cells.len(),
            with_cpus
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
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
