//! Everything fixed before the search, computed once: the host's cores as the planner sees
//! them (node, L3/L2 group, kind rank, free or not, whether their caches are busy), the
//! housekeeping CPUs, the tenants' CPUs, the devices, the memory model, NUMA distances.
//!
//! The cost function, the search, the emulator rule and the oracle read these facts; none of
//! them recomputes them per node set.
//!
//! `Context.rationale` holds the "Why" sentences born while gathering them, which head the
//! plan's list (see `crate::rationale`): the tenants' (`tenant::account`), the housekeeping's
//! (`housekeeping::choose`), the missing NUMA distance matrix's (here), the devices'
//! (`devices::resolve`).

use std::collections::{BTreeMap, BTreeSet};

use topo::{CpuSet, Host};

use crate::memory::MemoryModel;
use crate::model::{CoreInfo, DeviceInfo};
use crate::{PlanError, Request, Tenant, Workload};

/// The cost terms fixed by a node set (see [`crate::cost::Cost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTerms {
    pub host_reserve: u32,
    pub nodes: u32,
    pub node_distance: u64,
    pub page_rank: u32,
}

/// The free slots of each balance domain on one node set. A selection's balance term
/// ([`crate::cost::Cost::balance`]) is Σ over domains of u² · 2^16 / f (u: slots taken in the
/// domain, f: its free slots), less the same for the whole set taken as one domain: 0 for a
/// VM within one domain, least when a VM across domains takes them in proportion to their
/// free cores. 0 for a container, whose cores follow the kubelet's packing, and for a VM
/// whose guest sees one cell ([`Context::balanced`]).
#[derive(Debug, Clone)]
pub struct Shares {
    free: BTreeMap<u32, u64>,
    total: u64,
    on: bool,
}

impl Shares {
    /// One domain's part of the term for `used` slots taken there.
    pub fn penalty(&self, domain: u32, used: u64) -> u64 {
        match self.free.get(&domain) {
            Some(&f) if self.on && f > 0 => ((used * used) << 16) / f,
            _ => 0,
        }
    }

    /// What is subtracted for `used` slots in all: the term's floor.
    pub fn base(&self, used: u64) -> u64 {
        if self.on && self.total > 0 {
            ((used * used) << 16) / self.total
        } else {
            0
        }
    }
}

/// Distance used where the host has no distance matrix.
pub const LOCAL_DISTANCE: u64 = 10;
pub const REMOTE_DISTANCE: u64 = 20;

/// The planner's view of one request on one host with its tenants. Built by
/// [`Context::new`]; the oracle uses the same one.
#[derive(Debug, Clone)]
pub struct Context {
    pub vcpus: u32,
    pub memory_bytes: u64,
    /// Cores indexed by core id.
    pub cores: Vec<CoreInfo>,
    /// Node keys that exist (with CPUs or memory), sorted.
    pub nodes: Vec<u32>,
    /// Whether the host model has NUMA nodes at all.
    pub numa_known: bool,
    /// Host housekeeping CPUs (whole cores).
    pub host_cpus: CpuSet,
    /// CPUs the tenants hold (their emulator CPUs that are the host's are not theirs).
    pub tenant_cpus: CpuSet,
    /// PUs of each L3 group (by cache id).
    pub l3_cpus: BTreeMap<u32, CpuSet>,
    /// PUs of each L2 group (by cache id).
    pub l2_cpus: BTreeMap<u32, CpuSet>,
    /// L3 groups that hold housekeeping CPUs.
    pub host_l3: BTreeSet<u32>,
    /// L3 groups that hold tenant CPUs.
    pub tenant_l3: BTreeSet<u32>,
    /// L3 groups that hold tenants' vCPUs (not just their emulators).
    pub tenant_vcpu_l3: BTreeSet<u32>,
    /// Whether any core has an L3 (hosts whose model lists no L3 at all rank no core last).
    pub has_l3: bool,
    /// Labels of the CPU kinds, fastest first (empty on non-hybrid parts).
    pub kind_labels: Vec<String>,
    pub devices: Vec<DeviceInfo>,
    pub memory: MemoryModel,
    /// Distances between node keys: `distance[i * nodes.len() + j]` for `nodes[i]`, `nodes[j]`.
    distance: Vec<u64>,
    /// Per node key (in `nodes` order): Σ over devices with known locality of the distance
    /// to the device's nearest node.
    node_device: Vec<u64>,
    /// The least of `node_device`: what a PU on the nodes nearest the devices costs.
    device_floor: u64,
    /// Core id of each PU, indexed by os_index (`u32::MAX` for holes).
    pu_core: Vec<u32>,
    /// Messages gathered while building (rationale, warnings).
    pub rationale: Vec<String>,
    pub warnings: Vec<String>,
    /// What is placed: a VM gets an emulator core, a container does not.
    pub workload: Workload,
    /// One vCPU per core ([`crate::Threads::Spread`]): each core offers one slot, not one per
    /// PU. Set by the planner before the search.
    pub spread: bool,
    /// The guest gets a NUMA cell per host node it spans (the membw profile): only then is
    /// a VM across nodes split in proportion to their free cores. With one guest cell a
    /// split only makes more of the memory remote (each vCPU reads every node's share), so
    /// the VM fills the nearest node first.
    pub balanced: bool,
    /// Only this node set is searched ([`crate::plan_on`]: the benchmark matrix's layouts);
    /// `None`: every node set.
    pub only_nodes: Option<Vec<u32>>,
    /// Balance domains: per node key (in `nodes` order), the domain it belongs to. Nodes
    /// that share an L3 group (sub-NUMA clusters) are one domain; the vCPUs are balanced
    /// between domains ([`crate::cost::Cost::balance`]).
    domain: Vec<u32>,
}

impl Context {
    /// Build the planner's view of the host. Refuses requests that cannot be planned at all
    /// (zero vCPUs, less than [`crate::MIN_MEMORY_BYTES`] of memory, unknown or taken
    /// devices, a housekeeping move not accepted, bad host CPU override).
    pub fn new(req: &Request, host: &Host, tenants: &[Tenant]) -> Result<Context, PlanError> {
        refuse_unplannable(req)?;
        let mut rationale = Vec::new();
        let mut warnings = Vec::new();
        let held = crate::tenant::account(tenants, host)?;
        rationale.extend(held.rationale.iter().cloned());
        warnings.extend(held.warnings.iter().cloned());
        // a kernel without NUMA support gets one inferred node from the loader: it has no
        // memory policy to bind with, so the plan binds nothing there either
        let numa_known = !host.numa_nodes.is_empty() && !host.numa_inferred;
        if host.numa_inferred {
            warnings.push(format!(
                "the host ({}) runs a kernel without NUMA support (no /sys/devices/system/node): planning as one node, memory not bound",
                host.source
            ));
        } else if !numa_known {
            warnings.push(format!(
                "the host model ({}) has no NUMA information: planning as one node, memory not bound",
                host.source
            ));
        }
        warnings.extend(host.notes.iter().map(|n| format!("host model: {n}")));
        let caches = Caches::of(host);
        let mut cores = core_infos(host, &caches);
        let pu_core = pu_core_index(&cores);
        let core_of = |cpu: u32| {
            pu_core
                .get(cpu as usize)
                .copied()
                .filter(|&c| c != u32::MAX)
        };
        let host_cpus = crate::housekeeping::choose(
            req,
            host,
            &cores,
            core_of,
            tenants,
            &mut rationale,
            &mut warnings,
        )?;
        let tenant_cpus = crate::housekeeping::taken(tenants, &host_cpus);
        let busy = BusyGroups::of(&caches, tenants, &host_cpus, &tenant_cpus);
        busy.mark(&mut cores);

        let nodes = node_keys(host, numa_known);
        let distance = distance_matrix(host, &nodes);
        if numa_known && nodes.len() > 1 && host.distances.is_none() {
            rationale.push(format!(
                "the host model has no NUMA distance matrix: local counts {LOCAL_DISTANCE}, remote {REMOTE_DISTANCE}"
            ));
        }
        let devices = crate::devices::resolve(req, host, tenants, &mut rationale, &mut warnings)?;
        let node_device = device_distances(&nodes, &distance, &devices);
        let device_floor = node_device.iter().copied().min().unwrap_or(0);
        let memory = MemoryModel::new(req, host, &held, numa_known, &mut warnings);
        let has_l3 = cores.iter().any(|c| c.l3.is_some());
        let domain = balance_domains(&nodes, &cores);

        Ok(Context {
            pu_core,
            vcpus: req.vcpus,
            memory_bytes: req.memory_bytes,
            cores,
            nodes,
            numa_known,
            host_cpus,
            tenant_cpus,
            l3_cpus: caches.l3,
            l2_cpus: caches.l2,
            host_l3: busy.host_l3,
            tenant_l3: busy.tenant_l3,
            tenant_vcpu_l3: busy.tenant_vcpu_l3,
            has_l3,
            kind_labels: kind_labels(host),
            devices,
            memory,
            distance,
            node_device,
            device_floor,
            rationale,
            warnings,
            workload: Workload::Vm,
            spread: false,
            balanced: req.profile == crate::Profile::Membw,
            only_nodes: None,
            domain,
        })
    }

    /// vCPUs a core can take: one under [`crate::Threads::Spread`], else one per PU.
    pub fn slots(&self, c: &CoreInfo) -> u32 {
        if self.spread {
            1
        } else {
            c.pus.len() as u32
        }
    }

    /// The balance domain of a node key (nodes sharing an L3 are one); the node itself where
    /// unknown.
    pub fn domain_of(&self, node: u32) -> u32 {
        self.nodes
            .binary_search(&node)
            .ok()
            .and_then(|i| self.domain.get(i))
            .copied()
            .unwrap_or(node)
    }

    /// The free slots of each balance domain on a node set: what the balance term weighs a
    /// selection against ([`Shares`]).
    pub fn shares(&self, nodes: &[u32]) -> Shares {
        let mut free: BTreeMap<u32, u64> = BTreeMap::new();
        for c in self
            .cores
            .iter()
            .filter(|c| c.free && nodes.contains(&c.node))
        {
            *free.entry(self.domain_of(c.node)).or_default() += u64::from(self.slots(c));
        }
        Shares {
            total: free.values().sum(),
            free,
            on: self.workload == Workload::Vm && self.balanced,
        }
    }

    /// The core a PU belongs to.
    pub fn core_of(&self, cpu: u32) -> Option<&CoreInfo> {
        let id = *self.pu_core.get(cpu as usize)?;
        self.cores.get(id as usize)
    }

    /// The node (key) of a PU; 0 where unknown.
    pub fn node_of(&self, cpu: u32) -> u32 {
        self.core_of(cpu).map(|c| c.node).unwrap_or(0)
    }

    pub fn distance(&self, a: u32, b: u32) -> u64 {
        let n = self.nodes.len();
        match (self.nodes.binary_search(&a), self.nodes.binary_search(&b)) {
            (Ok(i), Ok(j)) => self.distance[i * n + j],
            _ if a == b => LOCAL_DISTANCE,
            _ => REMOTE_DISTANCE,
        }
    }

    /// Σ over devices with known locality of the distance from `node` to the device's
    /// nearest node. 0 when no device has a known node.
    pub fn node_device_distance(&self, node: u32) -> u64 {
        self.nodes
            .binary_search(&node)
            .ok()
            .and_then(|i| self.node_device.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Nodes of the devices (those with known locality), sorted, deduplicated.
    pub fn device_nodes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .devices
            .iter()
            .filter_map(|d| d.nodes.as_ref())
            .flatten()
            .copied()
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Free PUs of the given nodes.
    pub fn free_pus_in(&self, nodes: &[u32]) -> u32 {
        self.cores
            .iter()
            .filter(|c| c.free && nodes.contains(&c.node))
            .map(|c| self.slots(c))
            .sum()
    }

    /// All free PUs on the host.
    pub fn free_pus(&self) -> u32 {
        self.cores
            .iter()
            .filter(|c| c.free)
            .map(|c| self.slots(c))
            .sum()
    }

    /// Everything the guest must not share a cache with: housekeeping and tenant CPUs.
    pub fn busy_cpus(&self) -> CpuSet {
        self.host_cpus.union(&self.tenant_cpus)
    }

    /// Cores the guest may use within `nodes`: free and on those nodes.
    pub fn candidate_cores(&self, nodes: &[u32]) -> Vec<u32> {
        self.cores
            .iter()
            .filter(|c| c.free && nodes.contains(&c.node))
            .map(|c| c.id)
            .collect()
    }

    /// PUs of a core that count as "without an L3" (only on hosts where other cores have one).
    pub fn no_l3_pus(&self, c: &CoreInfo) -> u32 {
        if self.has_l3 && c.l3.is_none() {
            self.slots(c)
        } else {
            0
        }
    }

    /// The per-core part of the cost: (device distance, PUs without an L3, Σ kind rank).
    pub fn core_terms(&self, core: u32) -> (u64, u32, u32) {
        match self.cores.get(core as usize) {
            Some(c) => {
                let n = self.slots(c);
                (
                    // how much farther than the nearest node: a PU beside the devices costs
                    // nothing, so a whole SMT core there (one PU idle) is not outweighed by a
                    // lone PU a node away; idle PUs are a term of their own
                    u64::from(n)
                        * self
                            .node_device_distance(c.node)
                            .saturating_sub(self.device_floor),
                    self.no_l3_pus(c),
                    n * c.kind,
                )
            }
            None => (0, 0, 0),
        }
    }

    /// The per-node-set part of the cost; `None` when the memory does not fit on those nodes.
    pub fn node_terms(&self, nodes: &[u32]) -> Option<NodeTerms> {
        let (host_reserve, page_rank) = self.memory.terms(nodes, self.memory_bytes)?;
        Some(NodeTerms {
            host_reserve,
            nodes: nodes.len() as u32,
            node_distance: self.node_distance(nodes),
            page_rank,
        })
    }

    /// Σ of the NUMA distances between the nodes of a set, over ordered pairs of different
    /// nodes (both directions: a SLIT need not be symmetric); 0 for one node.
    pub fn node_distance(&self, nodes: &[u32]) -> u64 {
        nodes
            .iter()
            .flat_map(|&a| nodes.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
            .map(|(a, b)| self.distance(a, b))
            .sum()
    }

    /// The label of a kind rank ("performance", "efficiency", "kind2"), if the host is hybrid.
    pub fn kind_label(&self, rank: u32) -> Option<&str> {
        self.kind_labels.get(rank as usize).map(String::as_str)
    }
}

/// Requests no host can plan: no vCPUs, or less memory than a guest boots in.
fn refuse_unplannable(req: &Request) -> Result<(), PlanError> {
    if req.vcpus == 0 {
        return Err(PlanError::Refused("a VM needs at least 1 vCPU".into()));
    }
    if req.memory_bytes < crate::MIN_MEMORY_BYTES {
        return Err(PlanError::Refused(format!(
            "--memory {}: a VM needs at least {} (firmware and a kernel do not boot in less)",
            crate::memory::exact_bytes(req.memory_bytes),
            crate::memory::exact_bytes(crate::MIN_MEMORY_BYTES)
        )));
    }
    Ok(())
}

/// The labels of the host's CPU kinds, fastest first, with their names where known.
fn kind_labels(host: &Host) -> Vec<String> {
    host.cpu_kinds
        .iter()
        .map(|k| match &k.name {
            Some(n) => format!("{} ({n})", k.label),
            None => k.label.clone(),
        })
        .collect()
}

/// The host's L3 and L2 groups: the PUs of each, by cache id.
struct Caches {
    l3: BTreeMap<u32, CpuSet>,
    l2: BTreeMap<u32, CpuSet>,
    /// PUs of each L2 group, indexed by cache id (0 where there is no such group).
    l2_len: Vec<usize>,
}

impl Caches {
    fn of(host: &Host) -> Caches {
        // cache ids are small and dense: gather in vectors, keep the groups that exist
        let mut l3_v: Vec<CpuSet> = Vec::new();
        let mut l2_v: Vec<CpuSet> = Vec::new();
        let add = |v: &mut Vec<CpuSet>, id: u32, cpu: u32| {
            if v.len() <= id as usize {
                v.resize(id as usize + 1, CpuSet::new());
            }
            v[id as usize].insert(cpu);
        };
        for pu in &host.pus {
            if let Some(l2) = pu.l2 {
                add(&mut l2_v, l2, pu.os_index);
            }
            if let Some(l3) = pu.l3 {
                add(&mut l3_v, l3, pu.os_index);
            }
        }
        let l2_len: Vec<usize> = l2_v.iter().map(CpuSet::len).collect();
        let groups = |v: Vec<CpuSet>| -> BTreeMap<u32, CpuSet> {
            v.into_iter()
                .enumerate()
                .filter(|(_, s)| !s.is_empty())
                .map(|(i, s)| (i as u32, s))
                .collect()
        };
        Caches {
            l3: groups(l3_v),
            l2: groups(l2_v),
            l2_len,
        }
    }
}

/// The host's cores as the planner sees them, all free until [`BusyGroups::mark`]; a core's
/// id is its index (kept true even if a model numbers them otherwise).
fn core_infos(host: &Host, caches: &Caches) -> Vec<CoreInfo> {
    let mut host_cores: Vec<&topo::Core> = host.cores.iter().collect();
    host_cores.sort_by_key(|c| c.id);
    host_cores
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let first = c.pus.first().and_then(|p| host.pu(p));
            let pus = c.pus.to_vec();
            let l2 = first.and_then(|p| p.l2).filter(|&l| {
                caches
                    .l2_len
                    .get(l as usize)
                    .is_some_and(|&n| n > pus.len())
            });
            CoreInfo {
                id: i as u32,
                node: first.and_then(|p| p.numa).unwrap_or(0),
                l3: first.and_then(|p| p.l3),
                l2,
                kind: first
                    .and_then(|p| p.kind.as_ref())
                    .and_then(|k| host.cpu_kinds.iter().position(|c| &c.label == k))
                    .unwrap_or(0) as u32,
                pus,
                free: true,
                l3_busy: false,
                l2_busy: false,
            }
        })
        .collect()
}

/// Core id of each PU, indexed by os_index (`u32::MAX` for holes).
fn pu_core_index(cores: &[CoreInfo]) -> Vec<u32> {
    let max_pu = cores
        .iter()
        .flat_map(|c| c.pus.iter().copied())
        .max()
        .unwrap_or(0);
    let mut pu_core = vec![u32::MAX; max_pu as usize + 1];
    for c in cores {
        for &p in &c.pus {
            pu_core[p as usize] = c.id;
        }
    }
    pu_core
}

/// The cache groups the housekeeping and the tenants use.
struct BusyGroups {
    host_l3: BTreeSet<u32>,
    tenant_l3: BTreeSet<u32>,
    tenant_vcpu_l3: BTreeSet<u32>,
    /// The L2 groups holding housekeeping or tenant CPUs.
    l2: BTreeSet<u32>,
    /// Housekeeping and tenant CPUs.
    cpus: CpuSet,
}

impl BusyGroups {
    fn of(caches: &Caches, tenants: &[Tenant], host_cpus: &CpuSet, tenant_cpus: &CpuSet) -> Self {
        let busy = host_cpus.union(tenant_cpus);
        let groups_with = |groups: &BTreeMap<u32, CpuSet>, cpus: &CpuSet| -> BTreeSet<u32> {
            groups
                .iter()
                .filter(|(_, s)| s.intersects(cpus))
                .map(|(&id, _)| id)
                .collect()
        };
        let tenant_vcpus = tenants.iter().fold(CpuSet::new(), |acc, t| {
            acc.union(&t.cpus.difference(&t.emulator_cpus))
        });
        BusyGroups {
            host_l3: groups_with(&caches.l3, host_cpus),
            tenant_l3: groups_with(&caches.l3, tenant_cpus),
            tenant_vcpu_l3: groups_with(&caches.l3, &tenant_vcpus),
            l2: groups_with(&caches.l2, &busy),
            cpus: busy,
        }
    }

    /// Mark each core free or not, and whether its L3 and L2 groups are busy.
    fn mark(&self, cores: &mut [CoreInfo]) {
        for c in cores {
            c.free = !c.pus.iter().any(|&p| self.cpus.contains(p));
            c.l3_busy =
                c.l3.is_some_and(|l| self.host_l3.contains(&l) || self.tenant_l3.contains(&l));
            c.l2_busy = c.l2.is_some_and(|l| self.l2.contains(&l));
        }
    }
}

/// Per node key (in `nodes` order): the lowest node key it shares an L3 group with,
/// transitively — nodes joined by a cache are one balance domain.
fn balance_domains(nodes: &[u32], cores: &[CoreInfo]) -> Vec<u32> {
    let mut domain: Vec<u32> = nodes.to_vec();
    let find = |d: &Vec<u32>, n: u32| -> usize {
        let mut i = nodes.binary_search(&n).unwrap_or(0);
        while d[i] != nodes[i] {
            i = nodes.binary_search(&d[i]).unwrap_or(0);
        }
        i
    };
    let mut first_node: BTreeMap<u32, u32> = BTreeMap::new();
    for c in cores {
        let Some(l3) = c.l3 else { continue };
        let other = *first_node.entry(l3).or_insert(c.node);
        if other == c.node || nodes.binary_search(&c.node).is_err() {
            continue;
        }
        let (a, b) = (find(&domain, other), find(&domain, c.node));
        if a != b {
            let root = nodes[a].min(nodes[b]);
            domain[a] = root;
            domain[b] = root;
        }
    }
    (0..nodes.len())
        .map(|i| nodes[find(&domain, nodes[i])])
        .collect()
}

/// The node keys, sorted: the host's NUMA nodes, or node 0 where it has none.
fn node_keys(host: &Host, numa_known: bool) -> Vec<u32> {
    let mut nodes: Vec<u32> = if numa_known {
        host.numa_nodes.iter().map(|n| n.os_index).collect()
    } else {
        vec![0]
    };
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// A dense matrix over the node keys, filled from the host's matrix in one pass; local and
/// remote defaults where the host has none.
fn distance_matrix(host: &Host, nodes: &[u32]) -> Vec<u64> {
    let n = nodes.len();
    let mut distance: Vec<u64> = (0..n * n)
        .map(|i| {
            if i / n == i % n {
                LOCAL_DISTANCE
            } else {
                REMOTE_DISTANCE
            }
        })
        .collect();
    if let Some(d) = &host.distances {
        let at: Vec<Option<usize>> = d
            .nodes
            .iter()
            .map(|x| nodes.binary_search(x).ok())
            .collect();
        for (i, row) in d.matrix.iter().enumerate() {
            let Some(Some(a)) = at.get(i) else { continue };
            for (j, &v) in row.iter().enumerate() {
                if let Some(Some(b)) = at.get(j) {
                    distance[a * n + b] = u64::from(v);
                }
            }
        }
    }
    distance
}

/// Per node key: Σ over devices with known locality of the distance to the device's nearest
/// node.
fn device_distances(nodes: &[u32], distance: &[u64], devices: &[DeviceInfo]) -> Vec<u64> {
    let n = nodes.len();
    let dist = |a: u32, b: u32| match (nodes.binary_search(&a), nodes.binary_search(&b)) {
        (Ok(i), Ok(j)) => distance[i * n + j],
        _ if a == b => LOCAL_DISTANCE,
        _ => REMOTE_DISTANCE,
    };
    nodes
        .iter()
        .map(|&node| {
            devices
                .iter()
                .filter_map(|d| d.nodes.as_ref())
                .filter_map(|ns| ns.iter().map(|&dn| dist(node, dn)).min())
                .sum()
        })
        .collect()
}
