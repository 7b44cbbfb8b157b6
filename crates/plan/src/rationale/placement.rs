//! The sentences about the placement: the nodes, the caches and cores the guest gets, and
//! where the emulator goes.

use std::collections::BTreeMap;

use topo::CpuSet;

use super::Decisions;
use crate::context::Context;
use crate::emulator::Place;
use crate::memory::{human_bytes, list};
use crate::select::Placement;
use crate::select::ThreadChoice;
use crate::topology;
use crate::Threads;
use crate::Workload;

/// Why these nodes: the devices' node, else the nearest with room, else the cheapest; for
/// several nodes, why no single one holds the VM.
pub fn nodes(ctx: &Context, p: &Placement) -> String {
    let n = ctx.vcpus;
    let mem = human_bytes(ctx.memory_bytes);
    if !ctx.numa_known {
        return "one node (no NUMA information in the host model)".into();
    }
    let chosen = list(&p.nodes);
    if p.nodes.len() == 1 {
        let why = single_node_why(ctx, p, p.nodes[0]);
        format!(
            "node {chosen}: {why}; {} free CPUs there for {n} vCPUs and room for {mem}",
            ctx.free_pus_in(&p.nodes)
        )
    } else {
        let single: Vec<String> = ctx
            .nodes
            .iter()
            .filter_map(|&d| fits(ctx, p, &[d]).err().map(|e| format!("node {d} {e}")))
            .take(4)
            .collect();
        let between = format!(
            "{} between them",
            topology::distances(ctx, &p.nodes).unwrap_or_default()
        );
        format!(
            "nodes {chosen}: no single node holds {n} vCPUs and {mem} ({}{}); the smallest set of nodes that does, nearest the devices and then nearest each other ({between}), as remote memory costs every access",
            single.join("; "),
            if ctx.nodes.len() > 4 { "; …" } else { "" }
        )
    }
}

/// Why the one chosen node: local to the devices, the nearest to them with room (and what
/// the devices' own nodes lacked), or the cheapest when no device steers.
fn single_node_why(ctx: &Context, p: &Placement, node: u32) -> String {
    let dev_nodes = ctx.device_nodes();
    if dev_nodes.contains(&node) {
        format!(
            "local to the passed-through device(s) ({} on node(s) {})",
            ctx.devices
                .iter()
                .map(|d| d.bdf.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            list(&dev_nodes)
        )
    } else if !dev_nodes.is_empty() {
        let why_not: Vec<String> = dev_nodes
            .iter()
            .map(|&d| match fits(ctx, p, &[d]) {
                Err(e) => format!("device node {d} {e}"),
                Ok(()) => format!("device node {d} scored worse"),
            })
            .collect();
        format!(
            "the nearest node to the devices with room (distance {}): {}",
            ctx.node_device_distance(node),
            why_not.join("; ")
        )
    } else if ctx.has_l3 {
        "no passed-through device steers placement; the single node with room and the lowest cost (hugepages free, fewest shared L3 groups, lowest CPUs)".into()
    } else {
        "no passed-through device steers placement; the single node with room and the lowest cost (hugepages free, lowest CPUs)".into()
    }
}

/// Whether `nodes` could hold the VM as well as the placement does; the error says what
/// they lack (CPUs, memory, or the host's reserve).
fn fits(ctx: &Context, p: &Placement, nodes: &[u32]) -> Result<(), String> {
    let n = ctx.vcpus;
    let mem = human_bytes(ctx.memory_bytes);
    let free = ctx.free_pus_in(nodes);
    if free < n {
        return Err(format!("has {free} free CPUs for {n} vCPUs"));
    }
    let cap = || {
        ctx.memory
            .capacity(nodes)
            .map(human_bytes)
            .unwrap_or_else(|| "unknown".into())
    };
    match ctx.node_terms(nodes) {
        None => Err(format!("cannot hold {mem} ({} after tenants)", cap())),
        Some(t) if t.host_reserve > p.cost.host_reserve => {
            let reserve: u64 = nodes.iter().filter_map(|&n| ctx.memory.reserve(n)).sum();
            Err(format!(
                "cannot hold {mem} and keep the host its reserve ({} after tenants, {} of it kept for the host)",
                cap(),
                human_bytes(reserve)
            ))
        }
        Some(_) => Ok(()),
    }
}

/// The guest's caches and cores: its L3 groups, shared L2 groups, whole cores, core kinds,
/// cores without an L3, and siblings left idle.
pub fn cores(d: &Decisions, out: &mut Vec<String>) {
    let (ctx, p, guest) = (d.ctx, d.placement, d.guest_cpus);
    out.extend(l3(ctx, p, guest));
    out.extend(l2(ctx, p));
    let smt = p
        .cores
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .any(|c| c.pus.len() > 1);
    let spread = d.threads.chosen() == Threads::Spread;
    out.push(format!(
        "guest CPUs {guest}: {} whole cores{}; no core is split between guest and host",
        p.cores.len(),
        match (smt, spread) {
            (true, true) => " with one vCPU each",
            (true, false) => " with their SMT siblings",
            _ => "",
        }
    ));
    out.extend(threads(d));
    if !ctx.kind_labels.is_empty() {
        out.push(kinds(ctx, p));
    }
    if p.cost.no_l3_pus > 0 {
        out.push(format!(
            "{} CPU(s) on cores without an L3 (a low-power island): every core with an L3 was taken",
            p.cost.no_l3_pus
        ));
    }
    if p.cost.idle_pus > 0 && !spread {
        let used: CpuSet = p
            .cores
            .iter()
            .filter_map(|&c| ctx.cores.get(c as usize))
            .flat_map(|c| c.pus.iter().copied())
            .collect();
        out.push(format!(
            "CPU(s) {} stay idle: {} vCPUs do not fill the last core, and its sibling goes to neither host nor another VM",
            used.difference(guest),
            ctx.vcpus
        ));
    }
}

/// The r/VFIO pinning benchmark's figure for SMT siblings, which every thread choice cites.
const SMT_GAIN: &str = "the r/VFIO pinning benchmark measured SMT siblings at +2–3 % CPU throughput, so two vCPUs on one core's threads run about as fast as one vCPU on that core";

/// Why the vCPUs pair up on sibling threads or get a core each.
fn threads(d: &Decisions) -> Option<String> {
    let n = d.ctx.vcpus;
    let idle = || {
        let used: CpuSet = d
            .placement
            .cores
            .iter()
            .filter_map(|&c| d.ctx.cores.get(c as usize))
            .flat_map(|c| c.pus.iter().copied())
            .collect();
        used.difference(d.guest_cpus)
    };
    let spread = |why: String| {
        format!(
            "one vCPU per core ({why}): {SMT_GAIN}; their sibling threads {} stay idle, neither the host's nor another VM's, and the guest sees 1 thread per core",
            idle()
        )
    };
    let pack = |why: String| format!("vCPUs in sibling pairs ({why}); {SMT_GAIN}");
    Some(match *d.threads {
        ThreadChoice::NoSmt => return None,
        ThreadChoice::Asked(Threads::Spread) => spread("--threads spread".into()),
        ThreadChoice::Asked(Threads::Pack) => pack("--threads pack".into()),
        ThreadChoice::Container => {
            "a container's CPUs are threads of whole cores, sibling pairs together, as the kubelet's full-pcpus-only counts them".into()
        }
        ThreadChoice::Gaming => pack(format!(
            "the gaming profile: {n} vCPUs on {} cores, the guest told the truth about its siblings and the host left more whole cores; --threads spread gives each vCPU a core where they are free",
            d.placement.cores.len()
        )),
        ThreadChoice::SpreadFits => spread(format!(
            "--threads auto: {n} free cores as near the devices, on as few nodes, as {} cores of sibling pairs, and as many left free for the host's next VMs",
            n.div_ceil(2)
        )),
        ThreadChoice::SpreadSpans { pack_nodes, nodes } => spread(format!(
            "--threads auto: sibling pairs would span {pack_nodes} nodes anyway, and one vCPU per core fits on {nodes}"
        )),
        ThreadChoice::SpreadCrowds { left } => pack(format!(
            "--threads auto: a core per vCPU would leave its node {left} free core(s), fewer than the VM's {n} vCPUs, and pairs keep room for the host's next VMs; --threads spread asks for it anyway"
        )),
        ThreadChoice::TooFewCores { free_cores } => pack(format!(
            "--threads auto: {n} vCPUs need more than the {free_cores} free cores for one each"
        )),
        ThreadChoice::SpreadFarther {
            pack_nodes,
            spread_nodes,
        } => pack(format!(
            "--threads auto: one vCPU per core would need {spread_nodes} node(s), or nodes farther from the devices, where pairs fit on {pack_nodes}; --threads spread asks for it anyway"
        )),
    })
}

/// The guest's L3 groups: how many of each group's cores it has, and who else uses the group.
fn l3(ctx: &Context, p: &Placement, guest: &CpuSet) -> Option<String> {
    let mut by_l3: BTreeMap<Option<u32>, Vec<u32>> = BTreeMap::new();
    for &c in &p.cores {
        if let Some(info) = ctx.cores.get(c as usize) {
            by_l3.entry(info.l3).or_default().push(c);
        }
    }
    let busy = ctx.busy_cpus();
    let l3_count = ctx.l3_cpus.len();
    let mut parts = Vec::new();
    for (l3, cores) in &by_l3 {
        let Some(l3) = l3 else { continue };
        let cpus = ctx.l3_cpus.get(l3).cloned().unwrap_or_default();
        let total_cores = ctx.cores.iter().filter(|c| c.l3 == Some(*l3)).count();
        let own_emulator = ctx.workload == Workload::Vm
            && p.emulator
                .core
                .and_then(|e| ctx.cores.get(e as usize))
                .is_some_and(|e| e.l3 == Some(*l3));
        let state = if cpus.is_subset(guest) || !cpus.difference(guest).intersects(&busy) {
            match (cores.len() == total_cores, own_emulator) {
                (true, _) => "whole".to_string(),
                (false, true) => {
                    "not shared with host or tenants (its own emulator core beside it)".to_string()
                }
                (false, false) => "not shared with host or tenants".to_string(),
            }
        } else {
            let mut who = Vec::new();
            if cpus.intersects(&ctx.host_cpus) {
                who.push("host");
            }
            if cpus.intersects(&ctx.tenant_cpus) {
                who.push("tenants");
            }
            format!("shared with {}", who.join(", "))
        };
        parts.push(format!(
            "L3 #{l3} (CPUs {cpus}): {} of {total_cores} cores, {state}",
            cores.len()
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let lead = if l3_count == 1 {
        "this CPU has one L3 for all cores, so the host shares it unavoidably".to_string()
    } else {
        let later = if ctx.workload == Workload::Container {
            " now or later (a container that spans groups leaves its remainder where the cache is shared already)"
        } else {
            ""
        };
        format!(
            "{} of {l3_count} L3 groups, whole groups first and the fewest shared with the host or tenants{later}",
            by_l3.keys().filter(|k| k.is_some()).count()
        )
    };
    Some(format!("L3: {lead}: {}", parts.join("; ")))
}

/// The L2 groups several cores share (core clusters), where the host has any.
fn l2(ctx: &Context, p: &Placement) -> Option<String> {
    let clusters = ctx
        .l2_cpus
        .values()
        .filter(|s| {
            let first = s.first().and_then(|p| ctx.core_of(p));
            first.is_some_and(|c| s.len() > c.pus.len())
        })
        .count();
    if clusters == 0 {
        return None;
    }
    Some(if p.cost.shared_l2 == 0 {
        format!("L2: this host has {clusters} L2 group(s) shared by several cores (core clusters); the guest shares none with the host or tenants")
    } else {
        format!("L2: {} of the guest's L2 groups (core clusters) also serve the host or tenants: no free cluster was left", p.cost.shared_l2)
    })
}

/// Which kinds the guest's cores are, and why (hybrid parts).
fn kinds(ctx: &Context, p: &Placement) -> String {
    let mut per_kind: BTreeMap<u32, usize> = BTreeMap::new();
    for c in p.cores.iter().filter_map(|&c| ctx.cores.get(c as usize)) {
        *per_kind.entry(c.kind).or_default() += c.pus.len();
    }
    let label = |k: u32| ctx.kind_label(k).unwrap_or("unlabelled").to_string();
    let parts: Vec<String> = per_kind
        .iter()
        .map(|(&k, &n)| format!("{n} CPUs on {} cores", label(k)))
        .collect();
    let why = match (p.cost.kinds, per_kind.keys().next()) {
        (0, Some(0)) => "the fastest kind".to_string(),
        (0, _) => format!(
            "one kind rather than mixing kinds: the {} cores had no room for the whole VM",
            label(0)
        ),
        _ => "mixing kinds, as no single kind had room for the whole VM".to_string(),
    };
    format!("hybrid CPU: {}: {why}", parts.join(", "))
}

/// Where the emulator went, and why (a container has none).
pub fn emulator(d: &Decisions) -> String {
    let (ctx, p, cpus) = (d.ctx, d.placement, d.emulator_cpus);
    if ctx.workload == Workload::Container {
        return "a container: no emulator or iothreads of its own".into();
    }
    let core = p.emulator.core.and_then(|e| ctx.cores.get(e as usize));
    let l3 = core
        .and_then(|c| c.l3)
        .map(|l| format!("L3 #{l}"))
        .unwrap_or_else(|| "no L3".into());
    let node = core.map(|c| c.node).unwrap_or(0);
    let what = match p.emulator.place {
        Place::OwnL3 if ctx.has_l3 => format!(
            "a spare whole core in the VM's own {l3} on node {node}, so QEMU's I/O threads neither preempt vCPUs nor share a cache with another VM"
        ),
        Place::OwnL3 => format!(
            "a spare whole core on the VM's node {node}, so QEMU's I/O threads do not preempt vCPUs"
        ),
        Place::HostL3 if !p.nodes.contains(&node) => format!(
            "a spare whole core in the host's {l3} on node {node}, which the housekeeping already shares: the VM's own L3 groups have no spare core, and its node(s) {} hold no housekeeping CPUs, so the housekeeping CPUs {} would be on node {node} too; a core of its own there is no farther from the VM and keeps QEMU's threads off the housekeeping CPUs",
            list(&p.nodes),
            ctx.host_cpus
        ),
        Place::HostL3 => format!(
            "a spare whole core in the host's {l3} on node {node}, which the housekeeping already shares (the VM's own L3 groups have no spare core)"
        ),
        Place::HostCpus => on_host_cpus(ctx, p),
    };
    let never = if ctx.has_l3 {
        "; never a core in another VM's L3 group"
    } else {
        "; never a core of another VM"
    };
    format!(
        "emulator and iothread CPUs {cpus}: {what} (VFIO gaming-host write-up: emulatorpin){never}"
    )
}

/// Why the emulator shares the housekeeping CPUs: no spare core of the VM's own, and what the
/// host's L3 groups' spare cores the rule passed over were.
fn on_host_cpus(ctx: &Context, p: &Placement) -> String {
    let on_vm_node = ctx
        .host_cpus
        .iter()
        .any(|c| p.nodes.contains(&ctx.node_of(c)));
    let elsewhere = if on_vm_node {
        ""
    } else {
        " (on another node than the VM's)"
    };
    if !ctx.has_l3 {
        // the host model has no L3 groups to speak of
        return format!(
            "the host housekeeping CPUs {}{elsewhere}: the VM's node(s) have no spare whole core",
            ctx.host_cpus
        );
    }
    // the host's L3 groups' spare cores the rule passed over, and why
    let guest: Vec<u32> = p.cores.clone();
    let spare = |on_vm: bool, tenant_vcpus: bool| -> CpuSet {
        ctx.cores
            .iter()
            .filter(|c| c.free && !guest.contains(&c.id))
            .filter(|c| p.nodes.contains(&c.node) == on_vm)
            .filter(|c| {
                c.l3.is_some_and(|l| {
                    ctx.host_l3.contains(&l) && ctx.tenant_vcpu_l3.contains(&l) == tenant_vcpus
                })
            })
            .flat_map(|c| c.pus.iter().copied())
            .collect()
    };
    let off_node = spare(false, false);
    let beside_vm = spare(true, true);
    let mut host = Vec::new();
    if !off_node.is_empty() {
        let mut nodes: Vec<u32> = off_node.iter().map(|c| ctx.node_of(c)).collect();
        nodes.sort_unstable();
        nodes.dedup();
        host.push(format!(
            "the host's L3 group has spare cores (CPUs {off_node}) only on node(s) {}, farther from the VM than the housekeeping CPUs on its own node(s)",
            list(&nodes)
        ));
    }
    if !beside_vm.is_empty() {
        host.push(format!(
            "the host's L3 group's spare cores on the VM's node(s) (CPUs {beside_vm}) share it with another VM's vCPUs"
        ));
    }
    if host.is_empty() {
        host.push("neither have the host's L3 groups".into());
    }
    format!(
        "the host housekeeping CPUs {}{elsewhere}: the VM's own L3 groups have no spare core; {}; and a core of an unused L3 group would spoil it for the next VM",
        ctx.host_cpus,
        host.join("; ")
    )
}
