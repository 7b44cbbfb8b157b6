//! What the guest sees: vCPU → PU pins, the guest CPU topology, guest NUMA cells. Why the
//! cells and threads are what they are is kept as a record ([`NumaShape`], [`SmtFit`]) that
//! [`crate::rationale`] puts into words; the remote-memory warning is written here.

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
/// 2k+1 on the two threads of one core with SMT); one vCPU per core, on its first PU, under
/// [`crate::Threads::Spread`].
pub fn pins(ctx: &Context, cores: &[u32]) -> Vec<VcpuPin> {
    let mut out = Vec::new();
    for &c in cores {
        let Some(info) = ctx.cores.get(c as usize) else {
            continue;
        };
        for &pu in info.pus.iter().take(ctx.slots(info) as usize) {
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

/// The threads of the guest's cores that no vCPU runs on.
pub fn idle(ctx: &Context, cores: &[u32], guest: &CpuSet) -> CpuSet {
    cores
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .flat_map(|c| c.pus.iter().copied())
        .filter(|&pu| !guest.contains(pu))
        .collect()
}

/// More than this share of the guest's memory remote to the vCPUs that use it is warned
/// about (percent).
pub const REMOTE_MEMORY_WARN_PERCENT: u64 = 25;

/// Why the guest has the NUMA cells it has; [`crate::rationale`] says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumaShape {
    /// One cell per host node holding the guest: the VM spans nodes and the profile gains
    /// from it.
    Mirrored,
    /// One cell although the vCPUs span these host nodes (the profile does not gain).
    Spanning { cpu_nodes: Vec<u32> },
    /// One cell: the vCPUs on `cpu_nodes`, some memory only on `memory_only`.
    MemoryElsewhere {
        cpu_nodes: Vec<u32>,
        memory_only: Vec<u32>,
    },
    /// One cell, as the VM sits on one host node.
    OneNode,
}

/// The guest's NUMA cells and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestNuma {
    pub cells: Vec<GuestNumaCell>,
    pub shape: NumaShape,
}

/// Guest cells: one per host node when the VM spans nodes and the profile gains from it
/// (`membw`: the r/VFIO pinning benchmark measured STREAM 2–7x with guest NUMA), else one cell.
/// More than [`REMOTE_MEMORY_WARN_PERCENT`] % of the memory remote to the vCPUs that use it
/// is warned about.
pub fn guest_numa(
    ctx: &Context,
    profile: Profile,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    warnings: &mut Vec<String>,
) -> GuestNuma {
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
    let (cells, shape) = if spans && profile == Profile::Membw {
        (
            mirrored_cells(ctx, pins, mem, &cpu_nodes),
            NumaShape::Mirrored,
        )
    } else {
        let shape = if spans {
            NumaShape::Spanning {
                cpu_nodes: cpu_nodes.clone(),
            }
        } else if !memory_only.is_empty() && ctx.numa_known {
            NumaShape::MemoryElsewhere {
                cpu_nodes: cpu_nodes.clone(),
                memory_only: memory_only.clone(),
            }
        } else {
            NumaShape::OneNode
        };
        let cell = GuestNumaCell {
            cell: 0,
            vcpus: (0..ctx.vcpus).collect::<CpuSet>(),
            memory_bytes: total,
            host_nodes: mem.host_nodes.clone(),
        };
        (vec![cell], shape)
    };
    if ctx.numa_known {
        remote_warning(ctx, pins, mem, &cells, &memory_only, warnings);
    }
    GuestNuma { cells, shape }
}

/// One guest cell per host node holding vCPUs, with that node's memory; a node holding
/// memory but no vCPUs (its cores taken, or memory-only) adds its memory to the cell of the
/// nearest node with vCPUs, so no cell is without vCPUs (a guest kernel gives such a cell's
/// memory to no CPU of its own, and the study's guest-NUMA layout had none).
fn mirrored_cells(
    ctx: &Context,
    pins: &[VcpuPin],
    mem: &MemoryDecision,
    cpu_nodes: &[u32],
) -> Vec<GuestNumaCell> {
    let mut cells: Vec<GuestNumaCell> = mem
        .host_nodes
        .iter()
        .zip(&mem.bytes_per_node)
        .filter(|(n, _)| cpu_nodes.contains(n))
        .enumerate()
        .map(|(i, (&node, &bytes))| GuestNumaCell {
            cell: i as u32,
            vcpus: pins
                .iter()
                .filter(|p| ctx.node_of(p.cpu) == node)
                .map(|p| p.vcpu)
                .collect(),
            memory_bytes: bytes,
            host_nodes: vec![node],
        })
        .collect();
    for (&node, &bytes) in mem.host_nodes.iter().zip(&mem.bytes_per_node) {
        if bytes == 0 || cpu_nodes.contains(&node) {
            continue;
        }
        let nearest = cells
            .iter_mut()
            .min_by_key(|c| (ctx.distance(c.host_nodes[0], node), c.host_nodes[0]));
        if let Some(c) = nearest {
            c.memory_bytes += bytes;
            c.host_nodes.push(node);
        }
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

/// How the host cores' threads fit the vCPU count: what the guest's threads per core follow;
/// [`crate::rationale`] says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtFit {
    /// Every guest core has `t` > 1 PUs and `t` divides the vCPUs: the guest sees `t`.
    Siblings(u32),
    /// Every guest core has `t` > 1 PUs, but `t` does not divide the vCPUs.
    NotMultiple(u32),
    /// The guest cores have different PU counts.
    Mixed,
    /// One PU per core.
    NoSmt,
}

/// Sockets/dies/cores/threads matching the pins: threads = PUs per core when every guest
/// core has that many and the count divides; one socket per guest NUMA cell when they are
/// even.
pub fn guest_topology(
    ctx: &Context,
    cores: &[u32],
    cells: &[GuestNumaCell],
) -> (GuestTopology, SmtFit) {
    let n = ctx.vcpus;
    let ppcs: Vec<u32> = cores
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .map(|c| ctx.slots(c))
        .collect();
    let uniform = ppcs
        .first()
        .copied()
        .filter(|&f| ppcs.iter().all(|&p| p == f));
    let (threads, fit) = match uniform {
        Some(t) if t > 1 && n.is_multiple_of(t) => (t, SmtFit::Siblings(t)),
        Some(t) if t > 1 => (1, SmtFit::NotMultiple(t)),
        None => (1, SmtFit::Mixed),
        _ => (1, SmtFit::NoSmt),
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
    let topology = GuestTopology {
        sockets,
        dies: 1,
        cores: n / (sockets * threads),
        threads,
    };
    (topology, fit)
}
