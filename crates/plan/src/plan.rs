//! `plan()`: build the context, search, then derive everything else from the placement.

use std::collections::BTreeMap;

use topo::{CpuSet, Host};

use crate::context::Context;
use crate::emulator::{self, Place};
use crate::memory::{human_bytes, list};
use crate::select::{best_placement, Placement};
use crate::{features, topology};
use crate::{IrqPlan, MemoryPlan, Plan, PlanError, PlannedDevice, Request, Tenant, Workload};

/// Plan a VM: a pure function of the request, the host model and the tenants already on it.
pub fn plan(req: &Request, host: &Host, tenants: &[Tenant]) -> Result<Plan, PlanError> {
    plan_for(req, host, tenants, Workload::Vm)
}

/// [`plan`] for a VM or a container: a container's plan has no emulator or iothread CPUs
/// (`emulator_cpus` and `iothread_cpus` empty), the rest is decided as for a VM.
pub fn plan_for(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    workload: Workload,
) -> Result<Plan, PlanError> {
    let mut ctx = Context::new(req, host, tenants)?;
    ctx.workload = workload;
    let Some(p) = best_placement(&ctx) else {
        return Err(refusal(&ctx, req));
    };
    let mut rationale = ctx.rationale.clone();
    let mut warnings = ctx.warnings.clone();
    if !p.exhaustive {
        warnings.push(format!(
            "{} NUMA nodes: only the nearest-node sets of size {} were scored, not all of them",
            ctx.nodes.len(),
            p.nodes.len()
        ));
    }

    node_rationale(&ctx, &p, &mut rationale);
    let cores = topology::ordered_cores(&ctx, &p);
    let pins = topology::pins(&ctx, &cores);
    let guest_cpus: CpuSet = pins.iter().map(|v| v.cpu).collect();
    core_rationale(&ctx, host, &p, &guest_cpus, &mut rationale);

    // emulator and iothreads
    let emulator_cpus = match workload {
        Workload::Vm => {
            let cpus = emulator::cpus(&ctx, &p.emulator);
            rationale.push(emulator_rationale(&ctx, &p, &cpus));
            cpus
        }
        Workload::Container => {
            rationale.push("a container: no emulator or iothreads of its own".into());
            CpuSet::new()
        }
    };

    // memory
    let node_of = |cpu: u32| ctx.node_of(cpu);
    let weights: Vec<u64> = p
        .nodes
        .iter()
        .map(|&n| pins.iter().filter(|v| node_of(v.cpu) == n).count() as u64)
        .collect();
    let mem = ctx.memory.decide(&p.nodes, &weights, req.memory_bytes);
    rationale.push(format!(
        "memory {}: {} ({} pages)",
        human_bytes(mem.bytes_per_node.iter().sum()),
        topology::memory_line(&mem),
        crate::memory::page_name(mem.size_kb)
    ));
    rationale.extend(mem.rationale.iter().cloned());
    warnings.extend(mem.warnings.iter().cloned());
    let page_bytes = mem.size_kb * 1024;
    let hugepages = mem.size_kb > crate::memory::KB_4K;
    let memory = MemoryPlan {
        host_nodes: if ctx.numa_known {
            mem.host_nodes.clone()
        } else {
            vec![]
        },
        hugepage_size_kb: mem.size_kb,
        pages: if hugepages {
            mem.bytes_per_node.iter().sum::<u64>() / page_bytes
        } else {
            0
        },
        pages_per_node: if !ctx.numa_known {
            vec![]
        } else if hugepages {
            mem.bytes_per_node.iter().map(|b| b / page_bytes).collect()
        } else {
            vec![0; mem.host_nodes.len()]
        },
    };

    let guest_numa = topology::guest_numa(
        &ctx,
        req.profile,
        &pins,
        &mem,
        &mut rationale,
        &mut warnings,
    );
    let guest_topology = topology::guest_topology(&ctx, &cores, &guest_numa, &mut rationale);

    // interrupts
    let dev_nodes = ctx.device_nodes();
    let near: CpuSet = pins
        .iter()
        .filter(|v| dev_nodes.contains(&node_of(v.cpu)))
        .map(|v| v.cpu)
        .collect();
    let vfio_cpus = if !near.is_empty() && near != guest_cpus {
        rationale.push(format!(
            "device interrupts to guest CPUs {near}: the vCPUs on the devices' node(s) {}",
            list(&dev_nodes)
        ));
        near
    } else {
        rationale.push(format!(
            "device (VFIO) interrupts to the guest's CPUs {guest_cpus}; all other interrupts to the host side {} (VFIO gaming-host write-up: interrupt masking)",
            ctx.host_cpus.union(&emulator_cpus)
        ));
        guest_cpus.clone()
    };
    let irq = IrqPlan {
        vfio_cpus,
        host_cpus: ctx.host_cpus.union(&emulator_cpus),
    };

    let cpu_features = features::choose(req.os, host, &ctx.devices, &mut rationale, &mut warnings);

    let devices = ctx
        .devices
        .iter()
        .map(|d| {
            let h = host.pci(&d.bdf);
            PlannedDevice {
                bdf: d.bdf.clone(),
                kind: h.map(|h| h.kind).unwrap_or(topo::DeviceKind::Other),
                numa: d.nodes.clone(),
                iommu_group: h.and_then(|h| h.iommu_group),
            }
        })
        .collect();

    let mut request = req.clone();
    request.devices = ctx.devices.iter().map(|d| d.bdf.clone()).collect();
    // whole pages: what the emitters give the VM (a hugepage backend of 1001 MiB is refused)
    request.memory_bytes = mem.bytes_per_node.iter().sum();
    Ok(Plan {
        request,
        host_source: host.source.clone(),
        vcpus: pins,
        emulator_cpus: emulator_cpus.clone(),
        iothread_cpus: emulator_cpus,
        host_cpus: ctx.host_cpus.clone(),
        guest_topology,
        guest_numa,
        memory,
        devices,
        irq,
        cpu_features,
        vcpu_sched: None,
        rationale,
        warnings,
    })
}

/// Why nothing fits: the vCPUs, the memory, or (rarely) both only together.
fn refusal(ctx: &Context, req: &Request) -> PlanError {
    let free = ctx.free_pus();
    let free_cores = ctx.cores.iter().filter(|c| c.free).count();
    if free < req.vcpus {
        let tenants = if ctx.tenant_cpus.is_empty() {
            String::new()
        } else {
            format!(", tenants pin {}", ctx.tenant_cpus)
        };
        return PlanError::Refused(format!(
            "{} vCPUs do not fit: {free} free CPUs on {free_cores} whole free cores (host keeps {}{tenants}); at most {free} vCPUs fit",
            req.vcpus, ctx.host_cpus
        ));
    }
    if let Some(cap) = ctx.memory.capacity(&ctx.nodes) {
        if cap < req.memory_bytes {
            return PlanError::Refused(format!(
                "{} of memory does not fit: the host's nodes hold {} (after tenants' hugepages)",
                human_bytes(req.memory_bytes),
                human_bytes(cap)
            ));
        }
    }
    PlanError::Refused(format!(
        "{} vCPUs with {} do not fit on any set of nodes",
        req.vcpus,
        human_bytes(req.memory_bytes)
    ))
}

fn node_rationale(ctx: &Context, p: &Placement, out: &mut Vec<String>) {
    let n = ctx.vcpus;
    let mem = human_bytes(ctx.memory_bytes);
    let dev_nodes = ctx.device_nodes();
    if !ctx.numa_known {
        out.push("one node (no NUMA information in the host model)".into());
        return;
    }
    let fits = |nodes: &[u32]| -> Result<(), String> {
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
    };
    let chosen = list(&p.nodes);
    if p.nodes.len() == 1 {
        let node = p.nodes[0];
        let why = if dev_nodes.contains(&node) {
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
                .map(|&d| match fits(&[d]) {
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
        };
        out.push(format!(
            "node {chosen}: {why}; {} free CPUs there for {n} vCPUs and room for {mem}",
            ctx.free_pus_in(&p.nodes)
        ));
    } else {
        let single: Vec<String> = ctx
            .nodes
            .iter()
            .filter_map(|&d| fits(&[d]).err().map(|e| format!("node {d} {e}")))
            .take(4)
            .collect();
        let between = format!(
            "{} between them",
            topology::distances(ctx, &p.nodes).unwrap_or_default()
        );
        out.push(format!(
            "nodes {chosen}: no single node holds {n} vCPUs and {mem} ({}{}); the smallest set of nodes that does, nearest the devices and then nearest each other ({between}), as remote memory costs every access",
            single.join("; "),
            if ctx.nodes.len() > 4 { "; …" } else { "" }
        ));
    }
}

fn core_rationale(
    ctx: &Context,
    host: &Host,
    p: &Placement,
    guest: &CpuSet,
    out: &mut Vec<String>,
) {
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
    if !parts.is_empty() {
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
        out.push(format!("L3: {lead}: {}", parts.join("; ")));
    }
    let clusters = ctx
        .l2_cpus
        .values()
        .filter(|s| {
            let first = s.first().and_then(|p| ctx.core_of(p));
            first.is_some_and(|c| s.len() > c.pus.len())
        })
        .count();
    if clusters > 0 {
        out.push(if p.cost.shared_l2 == 0 {
            format!("L2: this host has {clusters} L2 group(s) shared by several cores (core clusters); the guest shares none with the host or tenants")
        } else {
            format!("L2: {} of the guest's L2 groups (core clusters) also serve the host or tenants: no free cluster was left", p.cost.shared_l2)
        });
    }
    let smt = p
        .cores
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .any(|c| c.pus.len() > 1);
    out.push(format!(
        "guest CPUs {guest}: {} whole cores{}; no core is split between guest and host",
        p.cores.len(),
        if smt { " with their SMT siblings" } else { "" }
    ));
    if !host.cpu_kinds.is_empty() {
        out.push(kind_rationale(ctx, p));
    }
    if p.cost.no_l3_pus > 0 {
        out.push(format!(
            "{} CPU(s) on cores without an L3 (a low-power island): every core with an L3 was taken",
            p.cost.no_l3_pus
        ));
    }
    if p.cost.idle_pus > 0 {
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

/// Which kinds the guest's cores are, and why (hybrid parts).
fn kind_rationale(ctx: &Context, p: &Placement) -> String {
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

/// Where the emulator went, and why.
fn emulator_rationale(ctx: &Context, p: &Placement, cpus: &CpuSet) -> String {
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
        Place::HostCpus => {
            let on_vm_node = ctx
                .host_cpus
                .iter()
                .any(|c| p.nodes.contains(&ctx.node_of(c)));
            let elsewhere = if on_vm_node { "" } else { " (on another node than the VM's)" };
            if !ctx.has_l3 {
                // the host model has no L3 groups to speak of
                format!(
                    "the host housekeeping CPUs {}{elsewhere}: the VM's node(s) have no spare whole core",
                    ctx.host_cpus
                )
            } else {
            // the host's L3 groups' spare cores the rule passed over, and why
            let guest: Vec<u32> = p.cores.clone();
            let spare = |on_vm: bool, tenant_vcpus: bool| -> CpuSet {
                ctx.cores
                    .iter()
                    .filter(|c| c.free && !guest.contains(&c.id))
                    .filter(|c| p.nodes.contains(&c.node) == on_vm)
                    .filter(|c| {
                        c.l3.is_some_and(|l| {
                            ctx.host_l3.contains(&l)
                                && ctx.tenant_vcpu_l3.contains(&l) == tenant_vcpus
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
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GuestOs, HugepagePolicy, Profile, TenantHugepages};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn req(vcpus: u32, gib: u64) -> Request {
        Request {
            name: Some("vm".into()),
            vcpus,
            memory_bytes: gib << 30,
            devices: vec![],
            profile: Profile::Gaming,
            os: GuestOs::Linux,
            hugepages: HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
        }
    }

    #[test]
    fn seed_000_gaming_layout() {
        let host = topo::builtin::default_host();
        let mut r = req(12, 16);
        r.devices = vec!["01:00.0".into()];
        r.os = GuestOs::Windows;
        let p = plan(&r, &host, &[]).unwrap();
        assert_eq!(p.guest_cpus(), set("2-7,10-15"));
        assert_eq!(p.host_cpus, set("0,8"));
        assert_eq!(p.emulator_cpus, set("1,9"));
        assert_eq!(p.irq.host_cpus, set("0-1,8-9"));
        assert_eq!(p.irq.vfio_cpus, set("2-7,10-15"));
        // vCPU 2k, 2k+1 on the siblings of one core
        assert_eq!((p.vcpus[0].cpu, p.vcpus[1].cpu), (2, 10));
        assert_eq!((p.vcpus[10].cpu, p.vcpus[11].cpu), (7, 15));
        let t = p.guest_topology;
        assert_eq!((t.sockets, t.dies, t.cores, t.threads), (1, 1, 6, 2));
        // the GPU's audio function goes with it
        assert_eq!(p.request.devices, vec!["0000:01:00.0", "0000:01:00.1"]);
        // 16 GiB in 2 MiB pages (no 1 GiB pages free on the desktop)
        assert_eq!(p.memory.hugepage_size_kb, 2048);
        assert_eq!(p.memory.pages, 8192);
        assert_eq!(p.memory.host_nodes, vec![0]);
        assert!(p.cpu_features.hyperv.contains(&"stimer".to_string()));
        assert!(!p.cpu_features.hide_hypervisor);
        assert!(p.cpu_features.invtsc);
        assert!(p.cpu_features.kvm_hidden);
        assert_eq!(p.guest_numa.len(), 1);
    }

    #[test]
    fn windows7_hides_the_hypervisor_bit() {
        let host = topo::builtin::default_host();
        let mut r = req(4, 8);
        r.os = GuestOs::Windows7;
        let p = plan(&r, &host, &[]).unwrap();
        assert!(p.cpu_features.hide_hypervisor);
        assert!(p.cpu_features.hyperv.is_empty());
        r.os = GuestOs::Linux;
        let p = plan(&r, &host, &[]).unwrap();
        assert!(!p.cpu_features.hide_hypervisor);
    }

    #[test]
    fn odd_vcpus_keep_cores_whole() {
        let host = topo::builtin::default_host();
        let p = plan(&req(5, 4), &host, &[]).unwrap();
        assert_eq!(p.vcpus.len(), 5);
        let t = p.guest_topology;
        assert_eq!(t.sockets * t.dies * t.cores * t.threads, 5);
        assert_eq!(t.threads, 1);
        // three whole cores; the sixth PU idle, not given to the host or emulator
        let used: CpuSet = p.guest_cpus();
        for cpu in used.iter() {
            let sib = if cpu < 8 { cpu + 8 } else { cpu - 8 };
            assert!(!p.host_cpus.contains(sib) && !p.emulator_cpus.contains(sib));
        }
    }

    #[test]
    fn refusals_are_one_clear_line() {
        let host = topo::builtin::default_host();
        let e = plan(&req(15, 4), &host, &[]).unwrap_err().to_string();
        assert!(e.contains("at most 14 vCPUs fit"), "{e}");
        let e = plan(&req(4, 64), &host, &[]).unwrap_err().to_string();
        assert!(e.contains("does not fit") && e.contains("32 GiB"), "{e}");
        let mut r = req(4, 4);
        r.devices = vec!["01:00.0".into()];
        let first = plan(&r, &host, &[]).unwrap();
        let tenant = Tenant::from_plan(&first);
        let e = plan(&r, &host, &[tenant]).unwrap_err().to_string();
        assert!(e.contains("already assigned"), "{e}");
        r.devices = vec!["05:00.0".into()];
        let e = plan(&r, &host, &[]).unwrap_err().to_string();
        assert!(e.contains("no PCI device 0000:05:00.0"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn tenants_cpus_and_hugepages_are_taken() {
        let host = topo::builtin::default_host();
        let a = plan(&req(4, 8), &host, &[]).unwrap();
        let ta = Tenant::from_plan(&a);
        assert_eq!(
            ta.hugepages,
            vec![TenantHugepages {
                node: Some(0),
                size_kb: 2048,
                pages: 4096
            }]
        );
        let b = plan(&req(4, 8), &host, std::slice::from_ref(&ta)).unwrap();
        assert!(!b.pinned_cpus().intersects(&a.pinned_cpus()));
        // the 16 GiB of 2 MiB pages are all held now: a third VM falls back to 4 KiB pages
        let tb = Tenant::from_plan(&b);
        let c = plan(&req(2, 12), &host, &[ta, tb]).unwrap();
        assert_eq!(c.memory.hugepage_size_kb, 4);
        assert!(
            c.warnings.iter().any(|w| w.contains("3:03")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn host_cpu_override_widens_to_whole_cores() {
        let host = topo::builtin::default_host();
        let mut r = req(8, 4);
        r.host_cpus = Some(set("0-2"));
        let p = plan(&r, &host, &[]).unwrap();
        assert_eq!(p.host_cpus, set("0-2,8-10"));
        assert!(!p.guest_cpus().intersects(&p.host_cpus));
        r.host_cpus = Some(set("99"));
        assert!(plan(&r, &host, &[]).is_err());
    }

    /// Two nodes of 4 two-thread cores in 2 L3 groups each, a GPU on node 1.
    fn two_node_host() -> Host {
        use topo::{CacheType, HugePages, MemoryKind, NumaNode, RawCache, RawGroup, RawTopology};
        let mut raw = RawTopology {
            source: "test:two-node".into(),
            pus: CpuSet::range(0, 16),
            ..Default::default()
        };
        for c in 0..8 {
            raw.cores.push(RawGroup {
                os_index: Some(c),
                cpus: [c, c + 8].into_iter().collect(),
            });
        }
        for l in 0..4u32 {
            raw.caches.push(RawCache {
                level: 3,
                cache_type: CacheType::Unified,
                size_bytes: None,
                line_bytes: None,
                ways: None,
                cpus: [2 * l, 2 * l + 1, 2 * l + 8, 2 * l + 9]
                    .into_iter()
                    .collect(),
            });
        }
        for n in 0..2u32 {
            raw.numa_nodes.push(NumaNode {
                os_index: n,
                cpus: (4 * n..4 * n + 4).chain(4 * n + 8..4 * n + 12).collect(),
                memory_bytes: Some(64 << 30),
                hugepages: vec![HugePages {
                    size_kb: 1048576,
                    total: Some(32),
                    free: Some(32),
                }],
                memory_kind: MemoryKind::Dram,
                free_bytes: None,
            });
        }
        let mut gpu = topo::builtin::default_host().pci_devices[6].clone();
        gpu.bdf = "0000:81:00.0".into();
        gpu.numa = Some(vec![1]);
        gpu.iommu_group = Some(40);
        raw.pci_devices.push(gpu);
        raw.assemble().unwrap()
    }

    #[test]
    fn device_node_and_whole_l3_groups() {
        let host = two_node_host();
        let mut r = req(4, 16);
        r.devices = vec!["81:00.0".into()];
        let p = plan(&r, &host, &[]).unwrap();
        // node 1 (cores 4-7) holds the GPU; the guest takes one whole L3 group (cores 4-5);
        // its own group has no spare core, and rather than spoil node 1's other, clean group
        // the emulator takes the spare core of the host's group on node 0, where the
        // housekeeping CPUs it would otherwise share are too
        assert_eq!(p.memory.host_nodes, vec![1]);
        assert_eq!(p.guest_cpus(), set("4-5,12-13"));
        assert_eq!(p.emulator_cpus, set("1,9"));
        assert!(
            p.rationale
                .iter()
                .any(|r| r.contains("no farther from the VM")),
            "{:?}",
            p.rationale
        );
        assert_eq!(p.memory.hugepage_size_kb, 1048576);
        assert_eq!(p.memory.pages, 16);
    }

    #[test]
    fn membw_spanning_nodes_exposes_guest_numa() {
        let host = two_node_host();
        let mut r = req(12, 32);
        r.profile = Profile::Membw;
        let p = plan(&r, &host, &[]).unwrap();
        assert_eq!(p.memory.host_nodes, vec![0, 1]);
        assert_eq!(p.guest_numa.len(), 2);
        assert_eq!(
            p.guest_numa.iter().map(|c| c.memory_bytes).sum::<u64>(),
            32 << 30
        );
        let t = p.guest_topology;
        assert_eq!(t.sockets * t.cores * t.threads, 12);
        // the same VM for GPU compute keeps one guest cell (r/VFIO pinning benchmark)
        r.profile = Profile::Compute;
        let p = plan(&r, &host, &[]).unwrap();
        assert_eq!(p.guest_numa.len(), 1);
        assert_eq!(p.memory.host_nodes, vec![0, 1]);
    }
}
