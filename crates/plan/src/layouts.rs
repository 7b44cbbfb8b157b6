//! The layouts of the r/VFIO pinning benchmark, built for one request on one host:
//! `default` (the domain as given), `pin` (vCPUs pinned one per physical core, one node,
//! no guest NUMA), `pin-numa` (one per core, spread over host nodes, a guest NUMA cell per
//! node with its memory bound there) and `pin-numa-smt` (the same vCPUs on whole cores,
//! both hyperthreads, the guest told `threads=2`); beside them `plan`, the planner's own
//! plan for the request, and the study's two controls: `pin-span` (exactly `pin-numa`'s
//! host CPUs and memory nodes, the guest told one node: the study's config A, one variable
//! against `pin-numa`) and `smt-double` (twice the vCPUs on `pin-numa`'s cores, both threads
//! of each, the guest told `threads=2`: the study's config C, where "+2–3 %, the guest just
//! looks bigger" comes from).
//!
//! Each layout is the planner's own placement on the layout's nodes (`plan_on`: one vCPU per
//! core for `pin` and `pin-numa`, sibling pairs for `pin-numa-smt`, vCPUs split over the
//! nodes by their free cores, a guest cell per node) wherever the planner makes one; the
//! code below it builds the layout only on hosts too small for that, and says so.
//!
//! The planner's own plan for the request supplies what the layouts share — housekeeping and
//! emulator CPUs, devices, CPU features, the node to start from — so that what differs
//! between layouts is the placement the study varied and nothing else. Pages are 4 KiB in
//! every layout: a hugepage reservation is the plan's own choice, not one of the study's
//! variables, and would need the host's pools changed for each run.
//!
//! Hosts too small for a layout still get it, labelled: vCPUs share CPUs round-robin
//! ("overcommitted"), a one-node host's guest cells share that node, a host without SMT
//! puts a vCPU pair on one CPU. Each such fallback is a note the matrix prints with its
//! figures, since the figures then measure the tool, not the layout.

use serde::{Deserialize, Serialize};
use topo::{CpuSet, Host};

use crate::{
    plan, taken_cpus, GuestNumaCell, GuestTopology, MemoryPlan, Plan, PlanError, Profile, Request,
    Tenant, ThreadPolicy, VcpuPin,
};

/// One of the study's layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LayoutKind {
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "pin")]
    Pin,
    #[serde(rename = "pin-numa")]
    PinNuma,
    #[serde(rename = "pin-numa-smt")]
    PinNumaSmt,
    /// The planner's own plan for the request.
    #[serde(rename = "plan")]
    Plan,
    /// `pin-numa`'s host CPUs and memory nodes, the guest told one node.
    #[serde(rename = "pin-span")]
    PinSpan,
    /// Twice the vCPUs on `pin-numa`'s cores, both threads, the guest told `threads=2`.
    #[serde(rename = "smt-double")]
    SmtDouble,
}

impl LayoutKind {
    /// The study's four layouts.
    pub const STUDY: [LayoutKind; 4] = [
        LayoutKind::Default,
        LayoutKind::Pin,
        LayoutKind::PinNuma,
        LayoutKind::PinNumaSmt,
    ];

    /// Every layout, in the matrix's default order.
    pub const ALL: [LayoutKind; 7] = [
        LayoutKind::Default,
        LayoutKind::Pin,
        LayoutKind::PinNuma,
        LayoutKind::PinNumaSmt,
        LayoutKind::Plan,
        LayoutKind::PinSpan,
        LayoutKind::SmtDouble,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Default => "default",
            LayoutKind::Pin => "pin",
            LayoutKind::PinNuma => "pin-numa",
            LayoutKind::PinNumaSmt => "pin-numa-smt",
            LayoutKind::Plan => "plan",
            LayoutKind::PinSpan => "pin-span",
            LayoutKind::SmtDouble => "smt-double",
        }
    }

    /// Every name, for error messages and `--help`.
    pub fn names() -> String {
        LayoutKind::ALL.map(LayoutKind::name).join(", ")
    }

    pub fn parse(s: &str) -> Option<LayoutKind> {
        LayoutKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// What the layout is, in the study's words.
    pub fn describe(self) -> &'static str {
        match self {
            LayoutKind::Default => "libvirt's default: the domain as given",
            LayoutKind::Pin => "vCPU pinning only",
            LayoutKind::PinNuma => "vCPU pinning + guest NUMA",
            LayoutKind::PinNumaSmt => "vCPU pinning + guest NUMA + SMT siblings",
            LayoutKind::Plan => "the planner's own plan for this VM",
            LayoutKind::PinSpan => {
                "pin-numa's host CPUs and memory, the guest told one node (the study's control A)"
            }
            LayoutKind::SmtDouble => {
                "twice the vCPUs on pin-numa's cores, both threads (the study's control C)"
            }
        }
    }
}

/// One layout: its plan (`None` for `default`, which runs the domain as given) and what had
/// to be assumed or shared to build it on this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub kind: LayoutKind,
    pub plan: Option<Plan>,
    pub notes: Vec<String>,
}

/// The layouts of one request and the one the planner chooses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    pub layouts: Vec<Layout>,
    /// The planner's own plan for the request, when it makes one on this host.
    pub chosen: Option<Plan>,
    /// The layout closest to the planner's plan.
    pub chosen_kind: Option<LayoutKind>,
    /// Why the planner's plan is that layout, or why there is none.
    pub chosen_note: String,
}

/// The layout a plan is: guest NUMA cells and guest threads per core decide it.
pub fn kind_of(p: &Plan) -> LayoutKind {
    match (p.guest_numa.len() > 1, p.guest_topology.threads > 1) {
        (true, true) => LayoutKind::PinNumaSmt,
        (true, false) => LayoutKind::PinNuma,
        _ => LayoutKind::Pin,
    }
}

/// The free cores of one host node, in core order: each core's PUs in PU order.
#[derive(Debug, Clone)]
struct NodeCores {
    node: u32,
    cores: Vec<Vec<u32>>,
}

/// What the layouts are built from.
struct Ground {
    nodes: Vec<NodeCores>,
    base: Plan,
    notes: Vec<String>,
}

/// Build the layouts `kinds` (in that order) for `req` on `host` beside `tenants`.
pub fn matrix(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    kinds: &[LayoutKind],
) -> Result<Matrix, PlanError> {
    if req.vcpus == 0 {
        return Err(PlanError::Refused("the request has no vCPUs".into()));
    }
    let numa = kinds.iter().any(|k| {
        matches!(
            k,
            LayoutKind::PinNuma
                | LayoutKind::PinNumaSmt
                | LayoutKind::PinSpan
                | LayoutKind::SmtDouble
        )
    });
    if numa && req.vcpus < 2 {
        return Err(PlanError::Refused(format!(
            "the guest NUMA layouts need at least 2 vCPUs, one per guest cell; the domain has {}",
            req.vcpus
        )));
    }
    let chosen = plan(req, host, tenants);
    let measured = kinds.contains(&LayoutKind::Plan);
    let (chosen_kind, chosen_note) = match &chosen {
        Ok(p) if measured => (
            Some(LayoutKind::Plan),
            format!(
                "the planner's own plan is measured as the layout plan ({} vCPUs on host node(s) {}, guest {}; closest study layout: {})",
                p.vcpus.len(),
                join(&p.memory.host_nodes),
                guest_line(p),
                kind_of(p).name()
            ),
        ),
        Ok(p) => {
            let k = kind_of(p);
            let note = if k == LayoutKind::Pin && p.guest_topology.threads > 1 {
                format!(
                    "the planner's plan pins the {} vCPUs to whole cores with their siblings (threads={}) on one node: closest to pin",
                    p.vcpus.len(),
                    p.guest_topology.threads
                )
            } else {
                format!(
                    "the planner's plan is {} ({} vCPUs on host node(s) {})",
                    k.name(),
                    p.vcpus.len(),
                    join(&p.memory.host_nodes)
                )
            };
            (Some(k), note)
        }
        Err(e) => (None, format!("the planner makes no plan on this host: {e}")),
    };
    let ground = ground(req, host, tenants, chosen.as_ref().ok())?;
    let membw = plan(
        &Request {
            profile: Profile::Membw,
            ..req.clone()
        },
        host,
        tenants,
    )
    .ok();
    let on = (host, tenants);
    let derived = kinds
        .iter()
        .any(|k| matches!(k, LayoutKind::PinSpan | LayoutKind::SmtDouble));
    let pin_numa = derived.then(|| build(LayoutKind::PinNuma, req, &ground, membw.as_ref(), on));
    let layouts = kinds
        .iter()
        .map(|&kind| match (kind, &pin_numa) {
            (LayoutKind::Plan, _) => own_plan(chosen.as_ref(), &ground),
            (LayoutKind::PinSpan | LayoutKind::SmtDouble, Some(from)) => {
                control(kind, from, &ground, host)
            }
            _ => build(kind, req, &ground, membw.as_ref(), on),
        })
        .collect();
    Ok(Matrix {
        layouts,
        chosen: chosen.ok(),
        chosen_kind,
        chosen_note,
    })
}

/// The guest's shape in one phrase: `1×4×2, 2 cells`.
fn guest_line(p: &Plan) -> String {
    let t = &p.guest_topology;
    let cells = if p.guest_numa.len() > 1 {
        format!(", {} cells", p.guest_numa.len())
    } else {
        String::new()
    };
    format!(
        "{} socket(s) × {} core(s) × {} thread(s){cells}",
        t.sockets, t.cores, t.threads
    )
}

/// The `plan` layout: the planner's own plan as it would apply it, pages aside (every
/// layout runs the same memory backing, chosen by the caller).
fn own_plan(chosen: Result<&Plan, &PlanError>, g: &Ground) -> Layout {
    let kind = LayoutKind::Plan;
    match chosen {
        Ok(p) => {
            let mut p = p.clone();
            p.memory = four_k(&p.memory.host_nodes);
            let notes = g.notes.clone();
            let mut rationale = vec![format!(
                "plan: {} (measured by vmtune bench matrix beside the r/VFIO pinning benchmark's layouts)",
                kind.describe()
            )];
            rationale.append(&mut p.rationale);
            p.rationale = rationale;
            Layout {
                kind,
                plan: Some(p),
                notes,
            }
        }
        Err(e) => Layout {
            kind,
            plan: None,
            notes: vec![format!("the planner makes no plan on this host: {e}")],
        },
    }
}

/// The study's controls, built from `pin-numa` (`from`): `pin-span` keeps its pins and
/// memory nodes and tells the guest one node; `smt-double` puts two vCPUs on each of its
/// cores (the core's two threads), doubling the guest's vCPUs and cells' vCPUs.
fn control(kind: LayoutKind, from: &Layout, g: &Ground, host: &Host) -> Layout {
    let mut notes = from.notes.clone();
    let Some(base) = &from.plan else {
        return Layout {
            kind,
            plan: None,
            notes,
        };
    };
    let mut p = base.clone();
    let n = base.vcpus.len() as u32;
    let mut said = Vec::new();
    match kind {
        LayoutKind::PinSpan => {
            p.guest_numa = Vec::new();
            p.guest_topology = GuestTopology {
                sockets: 1,
                dies: 1,
                cores: n,
                threads: 1,
            };
            if base.memory.host_nodes.len() > 1 {
                said.push(format!(
                    "the guest is told one node; its memory stays bound to host nodes {} as in pin-numa",
                    join(&base.memory.host_nodes)
                ));
            }
        }
        _ => {
            let mut shared = false;
            let mut used: CpuSet = base.vcpus.iter().map(|v| v.cpu).collect();
            p.vcpus = base
                .vcpus
                .iter()
                .flat_map(|v| {
                    let second = sibling(g, host, v.cpu, &used);
                    if let Some(s) = second {
                        used.insert(s);
                    }
                    shared |= second.is_none();
                    [v.cpu, second.unwrap_or(v.cpu)]
                })
                .enumerate()
                .map(|(i, cpu)| VcpuPin {
                    vcpu: i as u32,
                    cpu,
                })
                .collect();
            if shared {
                notes.push(
                    "some of pin-numa's cores have no free second thread: both vCPUs of a pair share one host CPU there"
                        .into(),
                );
            }
            for c in &mut p.guest_numa {
                c.vcpus = c.vcpus.iter().flat_map(|v| [2 * v, 2 * v + 1]).collect();
            }
            let cells = p.guest_numa.len().max(1) as u32;
            p.guest_topology = guest_topology(2 * n, cells, 2);
        }
    }
    p.rationale = vec![format!(
        "{}: {} (built by vmtune bench matrix)",
        kind.name(),
        kind.describe()
    )];
    p.rationale.extend(said);
    p.rationale.extend(notes.iter().cloned());
    Layout {
        kind,
        plan: Some(p),
        notes,
    }
}

/// A free PU of `cpu`'s core that is not in `used`.
fn sibling(g: &Ground, host: &Host, cpu: u32, used: &CpuSet) -> Option<u32> {
    let core = host.pu(cpu)?.core;
    g.nodes
        .iter()
        .flat_map(|n| &n.cores)
        .find(|c| c.contains(&cpu))
        .and_then(|c| c.iter().copied().find(|&c| !used.contains(c)))
        .filter(|&s| host.pu(s).is_some_and(|p| p.core == core))
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Free cores per node, ordered from the planner's node outwards; the plan the layouts share.
fn ground(
    req: &Request,
    host: &Host,
    tenants: &[Tenant],
    chosen: Option<&Plan>,
) -> Result<Ground, PlanError> {
    let mut notes = Vec::new();
    let reserved = match chosen {
        Some(p) => p.host_cpus.union(&p.emulator_cpus).union(&p.iothread_cpus),
        None => CpuSet::new(),
    };
    let taken = taken_cpus(tenants).union(&reserved);
    let mut nodes = node_cores(host, &taken);
    if nodes.iter().all(|n| n.cores.is_empty()) {
        nodes = node_cores(host, &taken_cpus(tenants));
        notes.push(
            "no core is left beside the host's housekeeping CPUs: the vCPUs share them".into(),
        );
    }
    nodes.retain(|n| !n.cores.is_empty());
    if nodes.is_empty() {
        return Err(PlanError::Refused(
            "the host model has no CPU left for the VM".into(),
        ));
    }
    let start = chosen
        .and_then(|p| p.vcpus.first())
        .and_then(|v| host.pu(v.cpu))
        .and_then(|pu| pu.numa)
        .unwrap_or(nodes[0].node);
    nodes.sort_by_key(|n| {
        (
            host.distance(start, n.node)
                .unwrap_or(if n.node == start { 0 } else { u32::MAX }),
            n.node != start,
            n.node,
        )
    });
    let base = match chosen {
        Some(p) => p.clone(),
        None => bare_plan(req, host),
    };
    if chosen.is_none() {
        notes.push(format!(
            "the planner makes no plan for {} vCPUs on this host: the layouts are built from its cores alone, the emulator unpinned",
            req.vcpus
        ));
    }
    Ok(Ground { nodes, base, notes })
}

fn node_cores(host: &Host, taken: &CpuSet) -> Vec<NodeCores> {
    let mut nodes: Vec<NodeCores> = Vec::new();
    for core in &host.cores {
        let pus: Vec<u32> = core.pus.iter().filter(|c| !taken.contains(*c)).collect();
        let Some(first) = pus.first() else { continue };
        let node = host.pu(*first).and_then(|p| p.numa).unwrap_or(0);
        match nodes.iter_mut().find(|n| n.node == node) {
            Some(n) => n.cores.push(pus),
            None => nodes.push(NodeCores {
                node,
                cores: vec![pus],
            }),
        }
    }
    nodes.sort_by_key(|n| n.node);
    nodes
}

/// A plan with nothing decided but the request: what the layouts fill in when the planner
/// refuses the host.
fn bare_plan(req: &Request, host: &Host) -> Plan {
    Plan {
        request: req.clone(),
        host_source: host.source.clone(),
        vcpus: Vec::new(),
        threads: crate::Threads::Pack,
        idle_cpus: CpuSet::new(),
        emulator_cpus: CpuSet::new(),
        iothread_cpus: CpuSet::new(),
        host_cpus: CpuSet::new(),
        guest_topology: GuestTopology {
            sockets: 1,
            dies: 1,
            cores: req.vcpus,
            threads: 1,
        },
        guest_numa: Vec::new(),
        memory: MemoryPlan {
            host_nodes: Vec::new(),
            hugepage_size_kb: 4,
            pages: 0,
            pages_per_node: Vec::new(),
        },
        devices: Vec::new(),
        irq: crate::IrqPlan {
            vfio_cpus: CpuSet::new(),
            host_cpus: CpuSet::new(),
        },
        cpu_features: Default::default(),
        vcpu_sched: None,
        rationale: Vec::new(),
        warnings: Vec::new(),
    }
}

fn build(
    kind: LayoutKind,
    req: &Request,
    g: &Ground,
    membw: Option<&Plan>,
    on: (&Host, &[Tenant]),
) -> Layout {
    // the domain as given uses nothing the layouts were built from
    let mut notes = if kind == LayoutKind::Default {
        Vec::new()
    } else {
        g.notes.clone()
    };
    let plan = match kind {
        LayoutKind::Default | LayoutKind::Plan | LayoutKind::PinSpan | LayoutKind::SmtDouble => {
            None
        }
        LayoutKind::Pin => {
            let nodes: Vec<u32> = pin_nodes(req, g).iter().map(|n| n.node).collect();
            let by_planner = planned(req, g, on, &nodes, Profile::Compute, ThreadPolicy::Spread);
            Some(by_planner.unwrap_or_else(|| pin(req, g, &mut notes)))
        }
        LayoutKind::PinNuma | LayoutKind::PinNumaSmt => {
            let nodes = numa_nodes(req, g, membw, &mut notes);
            let smt = kind == LayoutKind::PinNumaSmt;
            let ids: Vec<u32> = nodes.iter().map(|n| n.node).collect();
            let threads = if smt {
                ThreadPolicy::Pack
            } else {
                ThreadPolicy::Spread
            };
            let by_planner = planned(req, g, on, &ids, Profile::Membw, threads)
                .filter(|p| !smt || p.guest_topology.threads > 1);
            Some(by_planner.unwrap_or_else(|| pin_numa(req, g, &nodes, smt, &mut notes)))
        }
    };
    Layout {
        kind,
        plan: plan.map(|mut p| {
            p.rationale = vec![format!(
                "{}: {} (the r/VFIO pinning benchmark's layout, built by vmtune bench matrix)",
                kind.name(),
                kind.describe()
            )];
            p.rationale.extend(notes.iter().cloned());
            p
        }),
        notes,
    }
}

/// The layout as the planner makes it on exactly `nodes` ([`crate::plan_on`]): a core per
/// vCPU or sibling pairs, vCPUs split over the nodes by their free cores, a guest cell per
/// node for `membw` — the same code as every plan — with the base plan's housekeeping,
/// emulator CPUs, devices and CPU features, and 4 KiB pages. `None` where the planner makes
/// no such plan (a host too small for it, a one-node host asked for two cells): the
/// fallbacks build those, and say so.
fn planned(
    req: &Request,
    g: &Ground,
    (host, tenants): (&Host, &[Tenant]),
    nodes: &[u32],
    profile: Profile,
    threads: ThreadPolicy,
) -> Option<Plan> {
    let base = &g.base;
    if base.vcpus.is_empty() || nodes.is_empty() {
        return None;
    }
    let mut distinct = nodes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != nodes.len() {
        return None;
    }
    // the base plan's emulator core stays the emulator's in every layout
    let mut held = tenants.to_vec();
    if !base.emulator_cpus.is_subset(&base.host_cpus) {
        held.push(Tenant {
            name: "the plan's emulator".into(),
            cpus: base.emulator_cpus.clone(),
            host_cpus: Some(base.host_cpus.clone()),
            ..Tenant::default()
        });
    }
    let r = Request {
        profile,
        threads,
        hugepages: crate::HugepagePolicy::None,
        host_cpus: Some(base.host_cpus.clone()),
        ..req.clone()
    };
    let p = crate::plan_on(&r, host, &held, &distinct).ok()?;
    if profile == Profile::Membw && p.guest_numa.len() != distinct.len() {
        return None;
    }
    let mut out = base.clone();
    out.vcpus = p.vcpus;
    out.threads = p.threads;
    out.idle_cpus = p.idle_cpus;
    out.guest_topology = p.guest_topology;
    out.guest_numa = if p.guest_numa.len() > 1 {
        p.guest_numa
    } else {
        Vec::new()
    };
    out.devices = p.devices;
    out.memory = four_k(&p.memory.host_nodes);
    Some(out)
}

/// The fewest nodes, nearest first, whose free cores hold one vCPU each.
fn pin_nodes<'a>(req: &Request, g: &'a Ground) -> Vec<&'a NodeCores> {
    let want = req.vcpus as usize;
    let mut use_nodes: Vec<&NodeCores> = Vec::new();
    let mut cores = 0;
    for n in &g.nodes {
        if cores >= want {
            break;
        }
        use_nodes.push(n);
        cores += n.cores.len();
    }
    use_nodes
}

/// `want` CPUs, one per core (the first free PU), over `nodes` in order; past the cores,
/// the cores' other PUs, then round-robin over what was taken.
fn one_per_core(nodes: &[&NodeCores], want: usize, notes: &mut Vec<String>) -> Vec<u32> {
    let mut cpus: Vec<u32> = nodes
        .iter()
        .flat_map(|n| n.cores.iter().filter_map(|c| c.first().copied()))
        .take(want)
        .collect();
    if cpus.len() < want {
        let have = cpus.len();
        let more: Vec<u32> = nodes
            .iter()
            .flat_map(|n| n.cores.iter().flat_map(|c| c.iter().skip(1).copied()))
            .take(want - have)
            .collect();
        cpus.extend(more);
        if cpus.len() < want {
            overcommit(&mut cpus, want, notes);
        } else {
            notes.push(format!(
                "{want} vCPUs but {have} free cores: {} vCPUs are on the cores' second threads",
                want - have
            ));
        }
    }
    cpus
}

/// Fill `cpus` up to `want` by reusing its CPUs in order.
fn overcommit(cpus: &mut Vec<u32>, want: usize, notes: &mut Vec<String>) {
    let distinct = cpus.len();
    if distinct == 0 {
        return;
    }
    for i in 0..want - distinct {
        cpus.push(cpus[i % distinct]);
    }
    notes.push(format!(
        "overcommitted: {want} vCPUs on {distinct} host CPUs (vCPUs share CPUs round-robin); the figures measure the tool, not the layout"
    ));
}

fn pins(cpus: &[u32]) -> Vec<VcpuPin> {
    cpus.iter()
        .enumerate()
        .map(|(i, &cpu)| VcpuPin {
            vcpu: i as u32,
            cpu,
        })
        .collect()
}

fn pin(req: &Request, g: &Ground, notes: &mut Vec<String>) -> Plan {
    let want = req.vcpus as usize;
    let use_nodes = pin_nodes(req, g);
    let cpus = one_per_core(&use_nodes, want, notes);
    let host_nodes: Vec<u32> = use_nodes.iter().map(|n| n.node).collect();
    if host_nodes.len() > 1 {
        notes.push(format!(
            "{want} vCPUs need the cores of {} nodes; the guest is still told one node",
            host_nodes.len()
        ));
    }
    let mut p = g.base.clone();
    p.vcpus = pins(&cpus);
    p.guest_topology = GuestTopology {
        sockets: 1,
        dies: 1,
        cores: req.vcpus,
        threads: 1,
    };
    p.guest_numa = Vec::new();
    p.memory = four_k(&host_nodes);
    p
}

fn four_k(host_nodes: &[u32]) -> MemoryPlan {
    MemoryPlan {
        host_nodes: host_nodes.to_vec(),
        hugepage_size_kb: 4,
        pages: 0,
        pages_per_node: vec![0; host_nodes.len()],
    }
}

/// The host nodes the NUMA layouts spread over: the membw plan's when it spans several,
/// else the two nearest with free cores; a one-node host is used twice.
fn numa_nodes<'a>(
    req: &Request,
    g: &'a Ground,
    membw: Option<&Plan>,
    notes: &mut Vec<String>,
) -> Vec<&'a NodeCores> {
    let want = (req.vcpus as usize).max(1);
    let from_membw: Vec<&NodeCores> = membw
        .filter(|p| p.guest_numa.len() > 1)
        .map(|p| {
            g.nodes
                .iter()
                .filter(|n| p.memory.host_nodes.contains(&n.node))
                .collect()
        })
        .unwrap_or_default();
    let mut nodes = if from_membw.len() > 1 {
        from_membw
    } else {
        g.nodes.iter().take(2).collect::<Vec<_>>()
    };
    nodes.truncate(want.max(2));
    if nodes.len() == 1 {
        notes.push(format!(
            "the host has one NUMA node with free cores: the guest's two cells are both on node {}",
            nodes[0].node
        ));
        nodes.push(nodes[0]);
    }
    nodes
}

/// vCPUs spread evenly over `nodes`, one guest cell per node; `smt`: each core's threads
/// together, the guest told the host's threads per core.
fn pin_numa(
    req: &Request,
    g: &Ground,
    nodes: &[&NodeCores],
    smt: bool,
    notes: &mut Vec<String>,
) -> Plan {
    let want = req.vcpus as usize;
    let k = nodes.len().min(want).max(1);
    let mut threads = if smt { smt_width(nodes) } else { 1 };
    if threads > 1 && (!want.is_multiple_of(threads) || want / threads < k) {
        notes.push(format!(
            "{want} vCPUs do not make whole {threads}-thread cores in each of {k} cells: the guest is told 1 thread per core"
        ));
        threads = 1;
    }
    // whole guest cores per cell, each cell up to its node's free cores first
    let cores = want / threads;
    let shares = cell_shares(nodes, k, cores);
    let share = |i: usize| shares[i] * threads;
    // the CPUs of every cell on one host node are taken in one go (a one-node host used
    // twice gives its second cell the cores after the first's)
    let mut per_cell: Vec<Vec<u32>> = vec![Vec::new(); k];
    let mut done = vec![false; k];
    for i in 0..k {
        if done[i] {
            continue;
        }
        let same: Vec<usize> = (i..k).filter(|&j| nodes[j].node == nodes[i].node).collect();
        let count: usize = same.iter().map(|&j| share(j)).sum();
        let mut got = if smt {
            whole_cores(nodes[i], count, threads, notes)
        } else {
            one_per_core(&[nodes[i]], count, notes)
        }
        .into_iter();
        for &j in &same {
            per_cell[j] = got.by_ref().take(share(j)).collect();
            done[j] = true;
        }
    }
    let mut cpus: Vec<u32> = Vec::new();
    let mut cells = Vec::new();
    for (i, here) in per_cell.into_iter().enumerate() {
        let first = cpus.len() as u32;
        cpus.extend(&here);
        cells.push(GuestNumaCell {
            cell: i as u32,
            vcpus: (first..first + here.len() as u32).collect(),
            memory_bytes: 0,
            host_nodes: vec![nodes[i].node],
        });
    }
    split_memory(&mut cells, req.memory_bytes, want);
    let mut p = g.base.clone();
    p.vcpus = pins(&cpus);
    p.guest_topology = guest_topology(want as u32, k as u32, threads as u32);
    let mut host_nodes: Vec<u32> = cells.iter().map(|c| c.host_nodes[0]).collect();
    host_nodes.dedup();
    p.memory = four_k(&host_nodes);
    p.guest_numa = cells;
    p
}

/// `cores` guest cores over the first `k` of `nodes`: one at a time to the cell with the
/// fewest that still has a free core on its node (cells sharing a node share its cores), and
/// only past every node's free cores to the cell with the fewest.
fn cell_shares(nodes: &[&NodeCores], k: usize, cores: usize) -> Vec<usize> {
    let cap: Vec<usize> = (0..k)
        .map(|i| {
            let same: Vec<usize> = (0..k).filter(|&j| nodes[j].node == nodes[i].node).collect();
            let free = nodes[i].cores.len();
            let pos = same.iter().position(|&j| j == i).unwrap_or(0);
            free / same.len() + usize::from(pos < free % same.len())
        })
        .collect();
    let mut shares = vec![0usize; k];
    for _ in 0..cores {
        let pick = (0..k)
            .filter(|&i| shares[i] < cap[i])
            .min_by_key(|&i| (shares[i], i))
            .or_else(|| (0..k).min_by_key(|&i| (shares[i], i)));
        if let Some(i) = pick {
            shares[i] += 1;
        }
    }
    shares
}

/// Threads per core of the nodes' cores (the most common width); 2 on a host without SMT,
/// where a vCPU pair then shares one CPU.
fn smt_width(nodes: &[&NodeCores]) -> usize {
    let widest = nodes
        .iter()
        .flat_map(|n| n.cores.iter().map(Vec::len))
        .max()
        .unwrap_or(1);
    widest.max(2)
}

/// `count` CPUs taking whole cores of `n`, `threads` per core; cores
/// with fewer free threads than that repeat their last CPU (noted), and past the node's
/// cores the CPUs taken are reused.
fn whole_cores(n: &NodeCores, count: usize, threads: usize, notes: &mut Vec<String>) -> Vec<u32> {
    let mut cpus = Vec::new();
    let mut shared = false;
    for core in &n.cores {
        if cpus.len() >= count {
            break;
        }
        for t in 0..threads {
            if cpus.len() >= count {
                break;
            }
            match core.get(t) {
                Some(&c) => cpus.push(c),
                None => {
                    shared = true;
                    cpus.push(core[core.len() - 1]);
                }
            }
        }
    }
    if shared {
        let note = format!(
            "node {}'s cores have fewer than {threads} free threads: vCPU siblings share one host CPU there",
            n.node
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    if cpus.len() < count {
        overcommit(&mut cpus, count, notes);
    }
    cpus
}

/// Each cell's memory in proportion to its vCPUs, whole MiB, the last cell taking the rest.
fn split_memory(cells: &mut [GuestNumaCell], total: u64, vcpus: usize) {
    const MIB: u64 = 1 << 20;
    let mut left = total;
    let n = cells.len();
    for (i, c) in cells.iter_mut().enumerate() {
        let m = if i + 1 == n {
            left
        } else {
            (total / MIB * c.vcpus.len() as u64 / vcpus.max(1) as u64) * MIB
        };
        c.memory_bytes = m.min(left);
        left -= c.memory_bytes;
    }
}

/// `sockets` = one per cell where the vCPUs divide evenly (QEMU wants a socket's CPUs in
/// one node), else one socket; `threads` divides `vcpus`.
fn guest_topology(vcpus: u32, cells: u32, threads: u32) -> GuestTopology {
    let per_cell = vcpus / cells.max(1);
    if vcpus.is_multiple_of(cells.max(1)) && per_cell.is_multiple_of(threads) {
        GuestTopology {
            sockets: cells,
            dies: 1,
            cores: per_cell / threads,
            threads,
        }
    } else {
        GuestTopology {
            sockets: 1,
            dies: 1,
            cores: vcpus / threads,
            threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in LayoutKind::ALL {
            assert_eq!(LayoutKind::parse(k.name()), Some(k));
        }
        assert!(LayoutKind::names().contains("smt-double"));
        assert_eq!(LayoutKind::parse("numa"), None);
    }

    #[test]
    fn cells_take_free_cores_before_doubling_up() {
        let node = |node, n: u32| NodeCores {
            node,
            cores: (0..n).map(|c| vec![node * 100 + c]).collect(),
        };
        let (small, big) = (node(0, 1), node(1, 5));
        // an even split would put 2 vCPUs on node 0's single core while node 1 idles
        assert_eq!(cell_shares(&[&small, &big], 2, 4), [1, 3]);
        assert_eq!(cell_shares(&[&big, &big], 2, 5), [3, 2]);
        // past every free core, the cell with the fewest takes the next
        assert_eq!(cell_shares(&[&small, &small], 2, 3), [2, 1]);
    }

    #[test]
    fn memory_split_sums_to_the_total() {
        let mut cells: Vec<GuestNumaCell> = (0..3)
            .map(|i| GuestNumaCell {
                cell: i,
                vcpus: [i].into_iter().collect(),
                memory_bytes: 0,
                host_nodes: vec![i],
            })
            .collect();
        split_memory(&mut cells, 1000 << 20, 3);
        assert_eq!(
            cells.iter().map(|c| c.memory_bytes).sum::<u64>(),
            1000 << 20
        );
        assert_eq!(cells[0].memory_bytes, 333 << 20);
    }

    #[test]
    fn topology_follows_cells_and_threads() {
        let t = guest_topology(8, 2, 2);
        assert_eq!((t.sockets, t.cores, t.threads), (2, 2, 2));
        let t = guest_topology(6, 4, 2);
        assert_eq!((t.sockets, t.cores, t.threads), (1, 3, 2));
        let t = guest_topology(5, 2, 1);
        assert_eq!((t.sockets, t.cores, t.threads), (1, 5, 1));
    }
}
