//! The cost function, shared by the planner ([`crate::select`]) and the exhaustive oracle
//! (`tests/oracle.rs`).
//!
//! A *placement* is a set `N` of host NUMA nodes (where the guest's memory lives and within
//! which its CPUs are chosen) and a set `S` of whole free cores (never a split core). Its cost
//! is compared lexicographically, most important first:
//!
//! 1. `nodes` — how many host nodes the VM spans (single node first: the r/VFIO pinning benchmark);
//! 2. `device_distance` — Σ over the PUs of `S` of the NUMA distance from the PU's node to
//!    each passed-through device's node (ACPI SLIT / hwloc latency; 10 local, 20 remote where
//!    the host has no matrix);
//! 3. `page_rank` — 0: enough free pages of the planned size, 1: 2 MiB instead of 1 GiB,
//!    2: free counts unknown, 3: no hugepages (4 KiB, the Kata GPU boot study's boot cost);
//! 4. `efficiency_pus` — PUs on efficiency cores of hybrid parts;
//! 5. `idle_pus` — PUs of the chosen cores no vCPU runs on (odd counts on SMT cores);
//! 6. `shared_l2` — L2 groups used that also hold host, emulator or tenant PUs (clusters of
//!    efficiency cores, modules that share an L2; per-core L2s are never shared);
//! 7. `shared_l3` — L3 groups used that also hold host, emulator or tenant PUs;
//! 8. `l3_groups` — L3 groups (CCX/CCD) used at all;
//!
//! and then, among equal costs, the placement with the lowest CPU numbers: the set whose
//! highest differing core is lower (compare Σ 2^core as numbers), then the lower node list.
//! Every term but `nodes`, `page_rank` and `idle_pus` is a sum over cores or L3 groups, which
//! is what lets [`crate::select`] find the optimum exactly with a knapsack over L3 groups.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;
use topo::{CpuSet, Host};

use crate::memory::MemoryModel;
use crate::{PlanError, Request};

/// Distance used where the host has no distance matrix.
pub const LOCAL_DISTANCE: u64 = 10;
pub const REMOTE_DISTANCE: u64 = 20;

/// The cost of one placement; smaller is better (lexicographic, in field order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cost {
    pub nodes: u32,
    pub device_distance: u64,
    pub page_rank: u32,
    pub efficiency_pus: u32,
    pub idle_pus: u32,
    pub shared_l2: u32,
    pub shared_l3: u32,
    pub l3_groups: u32,
}

/// Words kept inline (512 cores) before a set moves to the heap.
const INLINE_WORDS: usize = 8;

/// A set of core ids compared "lowest CPU numbers first": the set whose largest element not
/// in the other is smaller wins (Σ 2^id as numbers). Union of disjoint sets = addition, so
/// the order is kept by the knapsack. Inline up to 512 cores: the knapsack copies many.
#[derive(Debug, Clone)]
pub enum CoreBits {
    Inline([u64; INLINE_WORDS]),
    Heap(Vec<u64>),
}

impl Default for CoreBits {
    fn default() -> Self {
        CoreBits::Inline([0; INLINE_WORDS])
    }
}

impl PartialEq for CoreBits {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for CoreBits {}

impl CoreBits {
    fn words(&self) -> &[u64] {
        match self {
            CoreBits::Inline(w) => w,
            CoreBits::Heap(v) => v,
        }
    }

    pub fn insert(&mut self, core: u32) {
        let w = (core / 64) as usize;
        let bit = 1u64 << (core % 64);
        match self {
            CoreBits::Inline(words) if w < INLINE_WORDS => words[w] |= bit,
            CoreBits::Inline(words) => {
                let mut v = words.to_vec();
                v.resize(w + 1, 0);
                v[w] |= bit;
                *self = CoreBits::Heap(v);
            }
            CoreBits::Heap(v) => {
                if v.len() <= w {
                    v.resize(w + 1, 0);
                }
                v[w] |= bit;
            }
        }
    }

    pub fn union(&self, other: &CoreBits) -> CoreBits {
        match (self, other) {
            (CoreBits::Inline(a), CoreBits::Inline(b)) => {
                let mut out = *a;
                for (o, x) in out.iter_mut().zip(b) {
                    *o |= x;
                }
                CoreBits::Inline(out)
            }
            _ => {
                let (a, b) = (self.words(), other.words());
                let n = a.len().max(b.len());
                CoreBits::Heap(
                    (0..n)
                        .map(|i| a.get(i).copied().unwrap_or(0) | b.get(i).copied().unwrap_or(0))
                        .collect(),
                )
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words().iter().enumerate().flat_map(|(w, &bits)| {
            (0..64u32)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w as u32 * 64 + b)
        })
    }

    pub fn from_cores(cores: &[u32]) -> CoreBits {
        let mut b = CoreBits::default();
        for &c in cores {
            b.insert(c);
        }
        b
    }
}

impl Ord for CoreBits {
    fn cmp(&self, other: &Self) -> Ordering {
        let (x, y) = (self.words(), other.words());
        let n = x.len().max(y.len());
        for i in (0..n).rev() {
            let a = x.get(i).copied().unwrap_or(0);
            let b = y.get(i).copied().unwrap_or(0);
            if a != b {
                return a.cmp(&b);
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for CoreBits {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What the planner knows about one core.
#[derive(Debug, Clone)]
pub struct CoreInfo {
    pub id: u32,
    pub pus: Vec<u32>,
    /// Node key (the Linux node id; 0 where the host has no NUMA information).
    pub node: u32,
    pub l3: Option<u32>,
    pub l2: Option<u32>,
    /// On an efficiency (non-fastest) kind of a hybrid part.
    pub efficiency: bool,
    /// None of its PUs is taken by the host housekeeping set or a tenant.
    pub free: bool,
}

/// A passed-through device after expansion (all functions, IOMMU group).
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub bdf: String,
    /// Nodes local to the device; `None` where unknown.
    pub nodes: Option<Vec<u32>>,
}

/// Everything fixed before the search: the host as the planner sees it, housekeeping CPUs,
/// tenants' CPUs, devices, memory. Built by [`Context::new`]; the oracle uses the same one.
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
    /// CPUs pinned by tenants.
    pub tenant_cpus: CpuSet,
    /// PUs of each L3 group (by cache id), to tell whether a group is shared.
    pub l3_cpus: BTreeMap<u32, CpuSet>,
    /// PUs of each L2 group (by cache id).
    pub l2_cpus: BTreeMap<u32, CpuSet>,
    pub devices: Vec<DeviceInfo>,
    pub memory: MemoryModel,
    /// distance[(a, b)] for node keys.
    distance: BTreeMap<(u32, u32), u64>,
    /// Core id of each PU, indexed by os_index (`u32::MAX` for holes).
    pu_core: Vec<u32>,
    /// Messages gathered while building (rationale, warnings).
    pub rationale: Vec<String>,
    pub warnings: Vec<String>,
}

impl Context {
    /// Build the planner's view of the host. Refuses requests that cannot be planned at all
    /// (zero vCPUs, unknown or taken devices, bad host CPU override).
    pub fn new(
        req: &Request,
        host: &Host,
        tenants: &[crate::Tenant],
    ) -> Result<Context, PlanError> {
        if req.vcpus == 0 {
            return Err(PlanError::Refused("a VM needs at least 1 vCPU".into()));
        }
        if req.memory_bytes == 0 {
            return Err(PlanError::Refused(
                "a VM needs memory (--memory SIZE)".into(),
            ));
        }
        let mut rationale = Vec::new();
        let mut warnings = Vec::new();
        let held = crate::tenant::account(tenants, host)?;
        rationale.extend(held.rationale.iter().cloned());
        warnings.extend(held.warnings.iter().cloned());
        let tenant_cpus = held.cpus.clone();
        let numa_known = !host.numa_nodes.is_empty();
        if !numa_known {
            warnings.push(format!(
                "the host model ({}) has no NUMA information: planning as one node, memory not bound",
                host.source
            ));
        }
        let kinds_fast = host.cpu_kinds.first().map(|k| k.label.clone());
        let mut l3_cpus: BTreeMap<u32, CpuSet> = BTreeMap::new();
        let mut l2_cpus: BTreeMap<u32, CpuSet> = BTreeMap::new();
        for pu in &host.pus {
            if let Some(l2) = pu.l2 {
                l2_cpus.entry(l2).or_default().insert(pu.os_index);
            }
            if let Some(l3) = pu.l3 {
                l3_cpus.entry(l3).or_default().insert(pu.os_index);
            }
        }
        let mut cores: Vec<CoreInfo> = host
            .cores
            .iter()
            .map(|c| {
                let first = c.pus.first().and_then(|p| host.pu(p));
                CoreInfo {
                    id: c.id,
                    pus: c.pus.to_vec(),
                    node: first.and_then(|p| p.numa).unwrap_or(0),
                    l3: first.and_then(|p| p.l3),
                    l2: first.and_then(|p| p.l2),
                    efficiency: match (&kinds_fast, first.and_then(|p| p.kind.as_ref())) {
                        (Some(fast), Some(k)) => k != fast,
                        _ => false,
                    },
                    free: true,
                }
            })
            .collect();
        // core ids are indexes; keep that true even if a model numbers them otherwise
        cores.sort_by_key(|c| c.id);
        for (i, c) in cores.iter_mut().enumerate() {
            c.id = i as u32;
        }

        let host_cpus = crate::select::housekeeping(
            req,
            host,
            &cores,
            &tenant_cpus,
            &mut rationale,
            &mut warnings,
        )?;
        for c in &mut cores {
            c.free = !c
                .pus
                .iter()
                .any(|&p| host_cpus.contains(p) || tenant_cpus.contains(p));
        }

        let mut nodes: Vec<u32> = if numa_known {
            host.numa_nodes.iter().map(|n| n.os_index).collect()
        } else {
            vec![0]
        };
        nodes.sort_unstable();
        nodes.dedup();
        let mut distance = BTreeMap::new();
        for &a in &nodes {
            for &b in &nodes {
                let d = host.distance(a, b).map(u64::from).unwrap_or(if a == b {
                    LOCAL_DISTANCE
                } else {
                    REMOTE_DISTANCE
                });
                distance.insert((a, b), d);
            }
        }
        if numa_known && nodes.len() > 1 && host.distances.is_none() {
            rationale.push(format!(
                "the host model has no NUMA distance matrix: local counts {LOCAL_DISTANCE}, remote {REMOTE_DISTANCE}"
            ));
        }

        let devices = crate::devices::resolve(req, host, tenants, &mut rationale, &mut warnings)?;
        let memory = MemoryModel::new(req, host, &held, numa_known, &mut warnings);

        let max_pu = cores
            .iter()
            .flat_map(|c| c.pus.iter().copied())
            .max()
            .unwrap_or(0);
        let mut pu_core = vec![u32::MAX; max_pu as usize + 1];
        for c in &cores {
            for &p in &c.pus {
                pu_core[p as usize] = c.id;
            }
        }
        Ok(Context {
            pu_core,
            vcpus: req.vcpus,
            memory_bytes: req.memory_bytes,
            cores,
            nodes,
            numa_known,
            host_cpus,
            tenant_cpus,
            l3_cpus,
            l2_cpus,
            devices,
            memory,
            distance,
            rationale,
            warnings,
        })
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
        self.distance.get(&(a, b)).copied().unwrap_or(if a == b {
            LOCAL_DISTANCE
        } else {
            REMOTE_DISTANCE
        })
    }

    /// Σ over devices with known locality of the distance from `node` to the device's
    /// nearest node. 0 when no device has a known node.
    pub fn node_device_distance(&self, node: u32) -> u64 {
        self.devices
            .iter()
            .filter_map(|d| d.nodes.as_ref())
            .filter_map(|ns| ns.iter().map(|&dn| self.distance(node, dn)).min())
            .sum()
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

    /// Free PUs of the given nodes (no emulator reservation).
    pub fn free_pus_in(&self, nodes: &[u32]) -> u32 {
        self.cores
            .iter()
            .filter(|c| c.free && nodes.contains(&c.node))
            .map(|c| c.pus.len() as u32)
            .sum()
    }

    /// All free PUs on the host.
    pub fn free_pus(&self) -> u32 {
        self.cores
            .iter()
            .filter(|c| c.free)
            .map(|c| c.pus.len() as u32)
            .sum()
    }

    /// Busy PUs for node set `nodes`: everything not on a free core, plus the emulator core
    /// chosen for that node set.
    pub fn busy_cpus(&self, emulator: Option<u32>) -> CpuSet {
        let mut busy = CpuSet::new();
        for c in &self.cores {
            if !c.free || Some(c.id) == emulator {
                for &p in &c.pus {
                    busy.insert(p);
                }
            }
        }
        busy
    }

    /// The L3 groups (ids) that hold busy PUs.
    pub fn busy_l3(&self, emulator: Option<u32>) -> Vec<u32> {
        let busy = self.busy_cpus(emulator);
        self.l3_cpus
            .iter()
            .filter(|(_, cpus)| cpus.intersects(&busy))
            .map(|(&id, _)| id)
            .collect()
    }

    /// The L2 groups (ids) that hold busy PUs.
    pub fn busy_l2(&self, emulator: Option<u32>) -> Vec<u32> {
        let busy = self.busy_cpus(emulator);
        self.l2_cpus
            .iter()
            .filter(|(_, cpus)| cpus.intersects(&busy))
            .map(|(&id, _)| id)
            .collect()
    }

    /// The node of `nodes` the emulator and iothreads go to: nearest to the devices, else the
    /// first node with free cores. Ties: lowest node.
    pub fn emulator_node(&self, nodes: &[u32]) -> Option<u32> {
        nodes
            .iter()
            .copied()
            .filter(|&n| self.cores.iter().any(|c| c.free && c.node == n))
            .min_by_key(|&n| (self.node_device_distance(n), n))
    }

    /// The core reserved for the emulator and iothreads when the VM's nodes have a spare core:
    /// on [`Context::emulator_node`], preferring efficiency cores, then the L3 group holding
    /// the most busy PUs (so the guest keeps whole groups), then the lowest core. `None` when
    /// no core is spare (the emulator then shares the housekeeping CPUs).
    pub fn emulator_core(&self, nodes: &[u32]) -> Option<u32> {
        let node = self.emulator_node(nodes)?;
        let free = self.free_pus_in(nodes);
        let busy = self.busy_cpus(None);
        self.cores
            .iter()
            .filter(|c| c.free && c.node == node)
            .filter(|c| free >= self.vcpus + c.pus.len() as u32)
            .min_by_key(|c| {
                let busy_in_l3 =
                    c.l3.and_then(|l| self.l3_cpus.get(&l))
                        .map(|s| s.intersection(&busy).len())
                        .unwrap_or(0);
                (!c.efficiency, std::cmp::Reverse(busy_in_l3), c.id)
            })
            .map(|c| c.id)
    }

    /// Cores the guest may use within `nodes` (free, on those nodes, not the emulator core).
    pub fn candidate_cores(&self, nodes: &[u32], emulator: Option<u32>) -> Vec<u32> {
        self.cores
            .iter()
            .filter(|c| c.free && nodes.contains(&c.node) && Some(c.id) != emulator)
            .map(|c| c.id)
            .collect()
    }

    /// The per-core part of the cost: (device distance, efficiency PUs).
    pub fn core_terms(&self, core: u32) -> (u64, u32) {
        match self.cores.get(core as usize) {
            Some(c) => {
                let n = c.pus.len() as u64;
                (
                    n * self.node_device_distance(c.node),
                    if c.efficiency { n as u32 } else { 0 },
                )
            }
            None => (0, 0),
        }
    }

    /// The per-node-set part of the cost: (nodes, page rank); `None` when the memory does not
    /// fit on those nodes.
    pub fn node_terms(&self, nodes: &[u32]) -> Option<(u32, u32)> {
        let rank = self.memory.page_rank(nodes, self.memory_bytes)?;
        Some((nodes.len() as u32, rank))
    }
}

/// Score a placement directly (no search): `None` if it is not allowed (a core that is not a
/// candidate for `nodes`, too few PUs, memory that does not fit). This is the function the
/// oracle minimizes; the planner's knapsack adds up the same terms.
pub fn score(ctx: &Context, nodes: &[u32], cores: &[u32]) -> Option<Cost> {
    Scorer::new(ctx, nodes)?.score(cores)
}

/// (PUs, device distance, efficiency PUs, L3 group busy, L3 id, L2 group busy, L2 id) of
/// one allowed core.
type CoreTerms = (u32, u64, u32, bool, Option<u32>, bool, Option<u32>);

/// [`score`] for many core sets on one node set (what is fixed per node set computed once).
pub struct Scorer<'a> {
    ctx: &'a Context,
    node_terms: (u32, u32),
    /// Cores allowed for the guest on this node set (free, not the emulator's).
    pub allowed: Vec<u32>,
    pub emulator: Option<u32>,
    /// Per core id: (PUs, device distance, efficiency PUs, L3 group is busy, L3 id) for
    /// allowed cores.
    terms: Vec<Option<CoreTerms>>,
}

impl<'a> Scorer<'a> {
    /// `None` when the memory does not fit on `nodes`.
    pub fn new(ctx: &'a Context, nodes: &[u32]) -> Option<Scorer<'a>> {
        let node_terms = ctx.node_terms(nodes)?;
        let emulator = ctx.emulator_core(nodes);
        let allowed = ctx.candidate_cores(nodes, emulator);
        let busy_l3 = ctx.busy_l3(emulator);
        let busy_l2 = ctx.busy_l2(emulator);
        let mut terms = vec![None; ctx.cores.len()];
        for &c in &allowed {
            if let (Some(info), Some(slot)) = (ctx.cores.get(c as usize), terms.get_mut(c as usize))
            {
                let (d, e) = ctx.core_terms(c);
                *slot = Some((
                    info.pus.len() as u32,
                    d,
                    e,
                    info.l3.is_some_and(|l| busy_l3.contains(&l)),
                    info.l3,
                    info.l2.is_some_and(|l| busy_l2.contains(&l)),
                    info.l2,
                ));
            }
        }
        Some(Scorer {
            ctx,
            node_terms,
            allowed,
            emulator,
            terms,
        })
    }

    pub fn score(&self, cores: &[u32]) -> Option<Cost> {
        let mut total = 0u32;
        let mut device_distance = 0;
        let mut efficiency_pus = 0;
        let mut l3s: Vec<(u32, bool)> = Vec::new();
        let mut l2s: Vec<(u32, bool)> = Vec::new();
        for (i, &c) in cores.iter().enumerate() {
            let (ppc, d, e, busy, l3, busy2, l2) = (*self.terms.get(c as usize)?)?;
            if let Some(l) = l2 {
                if !l2s.iter().any(|&(x, _)| x == l) {
                    l2s.push((l, busy2));
                }
            }
            if cores[..i].contains(&c) {
                return None;
            }
            total += ppc;
            device_distance += d;
            efficiency_pus += e;
            if let Some(l) = l3 {
                if !l3s.iter().any(|&(x, _)| x == l) {
                    l3s.push((l, busy));
                }
            }
        }
        if total < self.ctx.vcpus {
            return None;
        }
        Some(Cost {
            nodes: self.node_terms.0,
            device_distance,
            page_rank: self.node_terms.1,
            efficiency_pus,
            idle_pus: total - self.ctx.vcpus,
            shared_l2: l2s.iter().filter(|(_, b)| *b).count() as u32,
            shared_l3: l3s.iter().filter(|(_, b)| *b).count() as u32,
            l3_groups: l3s.len() as u32,
        })
    }
}
