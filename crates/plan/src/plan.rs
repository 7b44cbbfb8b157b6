//! `plan()`: build the context, search, then derive everything else from the placement;
//! the "Why" list is written last, from the finished decisions ([`crate::rationale`]).

use topo::{CpuSet, Host};

use crate::context::Context;
use crate::memory::{human_bytes, MemoryDecision};
use crate::rationale::{self, Decisions};
use crate::select::{best_placement, Placement, ThreadChoice};
use crate::{emulator, features, topology};
use crate::{
    GuestNumaCell, IrqPlan, MemoryPlan, Plan, PlanError, PlannedDevice, Profile, Request, Tenant,
    ThreadPolicy, Threads, VcpuPin, Workload,
};

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
    plan_within(req, host, tenants, workload, None)
}

/// [`plan`] on exactly the host nodes `nodes` (sorted node ids): the benchmark matrix's
/// layouts, which fix the nodes the study varied and take everything else — cores one per
/// vCPU or in sibling pairs, the split by free cores, guest cells — from the planner.
pub fn plan_on(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    nodes: &[u32],
) -> Result<Plan, PlanError> {
    plan_within(req, host, tenants, Workload::Vm, Some(nodes))
}

fn plan_within(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    workload: Workload,
    nodes: Option<&[u32]>,
) -> Result<Plan, PlanError> {
    let mut ctx = Context::new(req, host, tenants)?;
    ctx.workload = workload;
    if let Some(n) = nodes {
        let mut n = n.to_vec();
        n.sort_unstable();
        n.dedup();
        if let Some(bad) = n.iter().find(|x| !ctx.nodes.contains(x)) {
            return Err(PlanError::Refused(format!(
                "the host has no NUMA node {bad}"
            )));
        }
        ctx.only_nodes = Some(n);
    }
    let (p, threads) = place(&mut ctx, req)?;
    let mut warnings = ctx.warnings.clone();
    if !p.exhaustive {
        warnings.push(format!(
            "{} NUMA nodes: only the nearest-node sets of size {} were scored, not all of them",
            ctx.nodes.len(),
            p.nodes.len()
        ));
    }
    let cores = topology::ordered_cores(&ctx, &p);
    let pins = topology::pins(&ctx, &cores);
    let guest_cpus: CpuSet = pins.iter().map(|v| v.cpu).collect();
    let idle_cpus = topology::idle(&ctx, &cores, &guest_cpus);
    let emulator_cpus = match workload {
        Workload::Vm => emulator::cpus(&ctx, &p.emulator),
        Workload::Container => CpuSet::new(),
    };
    let mem = ctx
        .memory
        .decide(&p.nodes, &node_weights(&ctx, &p, &pins), req.memory_bytes);
    warnings.extend(mem.warnings.iter().cloned());
    let numa = topology::guest_numa(&ctx, req.profile, &pins, &mem, &mut warnings);
    let (guest_topology, smt) = topology::guest_topology(&ctx, &cores, &numa.cells);
    let irq = irq(&ctx, &pins, &guest_cpus, &emulator_cpus);
    let mut features_why = Vec::new();
    let cpu_features =
        features::choose(req.os, host, &ctx.devices, &mut features_why, &mut warnings);

    let devices = planned_devices(&ctx, host, &numa.cells);
    let rationale = rationale::write(&Decisions {
        ctx: &ctx,
        placement: &p,
        guest_cpus: &guest_cpus,
        emulator_cpus: &emulator_cpus,
        memory: &mem,
        numa: &numa,
        topology: &guest_topology,
        smt,
        threads: &threads,
        irq: &irq,
        devices: &devices,
        features: &features_why,
    });
    let mut request = req.clone();
    request.devices = ctx.devices.iter().map(|d| d.bdf.clone()).collect();
    // whole pages: what the emitters give the VM (a hugepage backend of 1001 MiB is refused)
    request.memory_bytes = mem.bytes_per_node.iter().sum();
    Ok(Plan {
        request,
        host_source: host.source.clone(),
        vcpus: pins,
        threads: threads.chosen(),
        idle_cpus,
        emulator_cpus: emulator_cpus.clone(),
        iothread_cpus: emulator_cpus,
        host_cpus: ctx.host_cpus.clone(),
        guest_topology,
        guest_numa: numa.cells,
        memory: memory_plan(&ctx, &mem),
        devices,
        irq,
        cpu_features,
        vcpu_sched: None,
        rationale,
        warnings,
    })
}

/// The placement and the thread policy it was searched with: pack or spread as asked, or
/// (auto) spread for profiles that gain CPU throughput from it when the host has the free
/// cores and it costs nothing the cost ranks above idle threads (nodes, device distance,
/// page size, core kinds), or when sibling pairs would span nodes anyway.
fn place(ctx: &mut Context, req: &Request) -> Result<(Placement, ThreadChoice), PlanError> {
    let smt = ctx.cores.iter().any(|c| c.free && c.pus.len() > 1);
    let search = |ctx: &mut Context, spread: bool| {
        ctx.spread = spread;
        best_placement(ctx)
    };
    let fixed = match req.threads {
        _ if !smt => Some(ThreadChoice::NoSmt),
        ThreadPolicy::Pack => Some(ThreadChoice::Asked(Threads::Pack)),
        ThreadPolicy::Spread => Some(ThreadChoice::Asked(Threads::Spread)),
        ThreadPolicy::Auto if ctx.workload == Workload::Container => Some(ThreadChoice::Container),
        ThreadPolicy::Auto if req.profile == Profile::Gaming => Some(ThreadChoice::Gaming),
        ThreadPolicy::Auto => None,
    };
    if let Some(choice) = fixed {
        let spread = choice.chosen() == Threads::Spread;
        return match search(ctx, spread) {
            Some(p) => Ok((p, choice)),
            None if spread => Err(spread_refusal(ctx, req)),
            None => Err(refusal(ctx, req)),
        };
    }
    // every term the cost ranks above idle threads: a core each must cost none of them
    let locality = |c: &crate::cost::Cost| {
        (
            c.host_reserve,
            c.nodes,
            c.device_distance,
            c.node_distance,
            c.page_rank,
            c.no_l3_pus,
            c.kinds,
            c.efficiency,
        )
    };
    let spread = search(ctx, true);
    // a core each on one node with nothing the cost ranks above idle threads: pairs cannot
    // do better there, and the second search is not needed
    if let Some(s) = spread
        .as_ref()
        .filter(|s| locality(&s.cost) == (0, 1, 0, 0, 0, 0, 0, 0))
    {
        ctx.spread = true;
        return Ok((s.clone(), ThreadChoice::SpreadFits));
    }
    let Some(pack) = search(ctx, false) else {
        return Err(refusal(ctx, req));
    };
    let Some(spread) = spread else {
        ctx.spread = false;
        let free_cores = ctx.cores.iter().filter(|c| c.free).count() as u32;
        return Ok((pack, ThreadChoice::TooFewCores { free_cores }));
    };
    let left = left_after(ctx, &spread);
    let choice = if locality(&spread.cost) <= locality(&pack.cost) && left >= ctx.vcpus {
        ThreadChoice::SpreadFits
    } else if locality(&spread.cost) <= locality(&pack.cost) && pack.nodes.len() == 1 {
        ThreadChoice::SpreadCrowds { left }
    } else if pack.nodes.len() > 1 && spread.cost.host_reserve <= pack.cost.host_reserve {
        ThreadChoice::SpreadSpans {
            pack_nodes: pack.nodes.len(),
            nodes: spread.nodes.len(),
        }
    } else {
        ThreadChoice::SpreadFarther {
            pack_nodes: pack.nodes.len(),
            spread_nodes: spread.nodes.len(),
        }
    };
    ctx.spread = choice.chosen() == Threads::Spread;
    Ok((if ctx.spread { spread } else { pack }, choice))
}

/// Free cores left on a placement's nodes once it and its emulator core are taken: what a
/// core per vCPU leaves the host's next VMs.
fn left_after(ctx: &Context, p: &Placement) -> u32 {
    ctx.cores
        .iter()
        .filter(|c| c.free && p.nodes.contains(&c.node))
        .filter(|c| !p.cores.contains(&c.id) && p.emulator.core != Some(c.id))
        .count() as u32
}

/// `--threads spread` with fewer free whole cores than vCPUs.
fn spread_refusal(ctx: &Context, req: &Request) -> PlanError {
    let free_cores = ctx.cores.iter().filter(|c| c.free).count();
    if free_cores < req.vcpus as usize {
        return PlanError::Refused(format!(
            "--threads spread gives each vCPU a core of its own, but {} vCPUs need {} free cores and the host has {free_cores} (housekeeping {}); --threads pack or auto puts vCPUs on sibling threads",
            req.vcpus, req.vcpus, ctx.host_cpus
        ));
    }
    refusal(ctx, req)
}

/// How the memory is split over the placement's nodes: by the guest CPUs on each.
fn node_weights(ctx: &Context, p: &Placement, pins: &[VcpuPin]) -> Vec<u64> {
    p.nodes
        .iter()
        .map(|&n| pins.iter().filter(|v| ctx.node_of(v.cpu) == n).count() as u64)
        .collect()
}

/// The memory decision as the plan states it: pages per node, no nodes where the host model
/// has no NUMA information.
fn memory_plan(ctx: &Context, mem: &MemoryDecision) -> MemoryPlan {
    let page_bytes = mem.size_kb * 1024;
    let hugepages = mem.size_kb > crate::memory::KB_4K;
    MemoryPlan {
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
    }
}

/// Interrupts: the devices' to the vCPUs on the devices' nodes where only some are there,
/// else to all of the guest's; every other one to the housekeeping and emulator CPUs.
fn irq(ctx: &Context, pins: &[VcpuPin], guest_cpus: &CpuSet, emulator_cpus: &CpuSet) -> IrqPlan {
    let dev_nodes = ctx.device_nodes();
    let near: CpuSet = pins
        .iter()
        .filter(|v| dev_nodes.contains(&ctx.node_of(v.cpu)))
        .map(|v| v.cpu)
        .collect();
    let vfio_cpus = if !near.is_empty() && near != *guest_cpus {
        near
    } else {
        guest_cpus.clone()
    };
    IrqPlan {
        vfio_cpus,
        host_cpus: ctx.host_cpus.union(emulator_cpus),
    }
}

/// The devices as the plan lists them: kind, nodes and IOMMU group from the host model, and
/// with several guest cells the cell each sits in ([`guest_cell`]).
fn planned_devices(ctx: &Context, host: &Host, cells: &[GuestNumaCell]) -> Vec<PlannedDevice> {
    ctx.devices
        .iter()
        .map(|d| {
            let h = host.pci(&d.bdf);
            PlannedDevice {
                bdf: d.bdf.clone(),
                kind: h.map(|h| h.kind).unwrap_or(topo::DeviceKind::Other),
                numa: d.nodes.clone(),
                iommu_group: h.and_then(|h| h.iommu_group),
                guest_cell: guest_cell(ctx, d.nodes.as_deref(), cells),
            }
        })
        .collect()
}

/// The guest cell of a device on host `nodes`: the cell holding one of them, else the cell
/// nearest them (NUMA distance), else cell 0 where the device's node is unknown; `None` with
/// fewer than two cells.
pub fn guest_cell(ctx: &Context, nodes: Option<&[u32]>, cells: &[GuestNumaCell]) -> Option<u32> {
    if cells.len() < 2 {
        return None;
    }
    let Some(nodes) = nodes.filter(|n| !n.is_empty()) else {
        return cells.first().map(|c| c.cell);
    };
    cells
        .iter()
        .min_by_key(|c| {
            let d = c
                .host_nodes
                .iter()
                .flat_map(|&h| nodes.iter().map(move |&n| ctx.distance(h, n)))
                .min()
                .unwrap_or(u64::MAX);
            (d, c.cell)
        })
        .map(|c| c.cell)
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
            threads: crate::ThreadPolicy::Auto,
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
