//! The cost function, shared by the planner ([`crate::select`]) and the exhaustive oracle
//! (`tests/oracle.rs`).
//!
//! A *placement* is a set `N` of host NUMA nodes (where the guest's memory lives and within
//! which its CPUs are chosen) and a set `S` of whole free cores (never a split core). Its cost
//! is compared lexicographically, most important first:
//!
//! 1. `host_reserve` — 1 when the guest's memory only fits on `N` by taking some of a node's
//!    host reserve (max(2 GiB, 5 %) of each node, [`crate::memory::host_reserve`]), else 0:
//!    a VM spans another node rather than leave the host short;
//! 2. `nodes` — how many host nodes the VM spans (single node first: the r/VFIO pinning
//!    benchmark);
//! 3. `device_distance` — Σ over the PUs of `S` of how much farther the PU's node is from the
//!    passed-through devices' nodes than the nearest node is (NUMA distances: ACPI SLIT /
//!    hwloc latency; 10 local, 20 remote where the host has no matrix): PUs beside the devices
//!    cost 0, so a whole SMT core there with one PU idle (`idle_pus`) is not outweighed by a
//!    lone PU on a node at distance 12;
//! 4. `node_distance` — Σ of the NUMA distances between the nodes of `N`, over ordered pairs
//!    of different nodes (ACPI SLIT / hwloc latency, as for `device_distance`; 0 for one
//!    node): a VM that spans nodes takes the nearest ones, not the lowest-numbered;
//! 5. `page_rank` — 0: enough free pages of the planned size, 1: 2 MiB instead of 1 GiB,
//!    2: free counts unknown, 3: no hugepages (4 KiB, the Kata GPU boot study's boot cost);
//! 6. `no_l3_pus` — PUs on cores without an L3 on a host whose other cores have one (the
//!    low-power E-cores of a laptop SoC tile): those come last;
//! 7. `kinds` — core kinds mixed beyond the first (hybrid parts): one kind before mixing;
//! 8. `efficiency` — Σ over the PUs of `S` of the kind's rank below the fastest (0 on
//!    performance cores and on non-hybrid parts): faster cores first;
//! 9. `idle_pus` — PUs of the chosen cores no vCPU runs on (odd counts on SMT cores; with
//!    one vCPU per core, [`crate::Threads::Spread`], a core offers one slot and its other
//!    threads are idle by design, not counted);
//! 10. `balance` — for a guest that mirrors the host's nodes (membw), how far a VM across
//!     balance domains (NUMA nodes, or the nodes sharing one L3) is from taking each in
//!     proportion to its free cores ([`crate::context::Shares`]): 0 within one domain, so it
//!     only splits a VM that spans nodes — by free cores, not lowest numbers first (which
//!     left one guest cell a few vCPUs and another most of them). 0 for a guest of one cell,
//!     where filling the nearest node first keeps the most memory local;
//! 11. `shared_l2` — L2 groups used that also hold host or tenant PUs (clusters of
//!     efficiency cores, modules that share an L2; per-core L2s are never shared);
//! 12. `shared_l3` — L3 groups used that also hold host or tenant PUs; for a container
//!     ([`crate::Workload::Container`]) that spans L3 groups, also each clean group it leaves
//!     part-used: the next container would share it (a VM's emulator core takes such a spare
//!     core instead). A container within one group is scored as a VM's guest: on a host with
//!     clean groups to spare, containers spread over them;
//! 13. `l3_groups` — L3 groups (CCX/CCD) used at all;
//!
//! and then, among equal costs, the placement with the lowest CPU numbers: the set whose
//! highest differing core is lower (compare Σ 2^core as numbers), then the lower node list.
//!
//! The VM's own emulator core is not part of `S` and does not make the guest's caches
//! "shared": it is chosen after `S`, inside the VM's own L3 group or the host's
//! ([`crate::emulator`]). So on a host with an idle node the VM takes an L3 group there that
//! no one else uses rather than sitting beside the housekeeping cores.
//!
//! Every term but `host_reserve`, `nodes`, `node_distance`, `page_rank`, `kinds`, `idle_pus`
//! and `balance` is a sum over cores, L2 or L3 groups, which is what lets [`crate::select`]
//! find the optimum exactly with a knapsack over L3 groups; `kinds` is exact by solving once
//! per set of kinds allowed, `balance` by a knapsack per balance domain whose options carry
//! their domain's part.

use std::cmp::Ordering;

use serde::Serialize;

use std::collections::BTreeMap;

use crate::context::{Context, NodeTerms, Shares};

/// The cost of one placement; smaller is better (lexicographic, in field order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cost {
    pub host_reserve: u32,
    pub nodes: u32,
    pub device_distance: u64,
    pub node_distance: u64,
    pub page_rank: u32,
    pub no_l3_pus: u32,
    pub kinds: u32,
    pub efficiency: u32,
    pub idle_pus: u32,
    pub balance: u64,
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

/// Score a placement directly (no search): `None` if it is not allowed (a core that is not a
/// candidate for `nodes`, a core twice, too few PUs, memory that does not fit). This is the
/// function the oracle minimizes; the planner's knapsack adds up the same terms.
pub fn score(ctx: &Context, nodes: &[u32], cores: &[u32]) -> Option<Cost> {
    Scorer::new(ctx, nodes)?.score(cores)
}

/// [`score`] for many core sets on one node set (what is fixed per node set computed once).
pub struct Scorer<'a> {
    ctx: &'a Context,
    node_terms: NodeTerms,
    shares: Shares,
    /// Cores allowed for the guest on this node set (free, on these nodes).
    pub allowed: Vec<u32>,
    /// Per core id: whether it is allowed.
    ok: Vec<bool>,
}

impl<'a> Scorer<'a> {
    /// `None` when the memory does not fit on `nodes`.
    pub fn new(ctx: &'a Context, nodes: &[u32]) -> Option<Scorer<'a>> {
        let node_terms = ctx.node_terms(nodes)?;
        let allowed = ctx.candidate_cores(nodes);
        let mut ok = vec![false; ctx.cores.len()];
        for &c in &allowed {
            if let Some(slot) = ok.get_mut(c as usize) {
                *slot = true;
            }
        }
        Some(Scorer {
            ctx,
            node_terms,
            shares: ctx.shares(nodes),
            allowed,
            ok,
        })
    }

    /// For a container spanning L3 groups: the clean ones that `taken` leaves part-used.
    fn part_used(&self, l3s: &[(u32, bool)], taken: &[(u32, usize)]) -> u32 {
        if self.ctx.workload != crate::Workload::Container || l3s.len() < 2 {
            return 0;
        }
        let free_in = |l: u32| -> usize {
            self.allowed
                .iter()
                .filter_map(|&c| self.ctx.cores.get(c as usize))
                .filter(|i| i.l3 == Some(l))
                .map(|i| self.ctx.slots(i) as usize)
                .sum()
        };
        l3s.iter()
            .zip(taken)
            .filter(|((l, busy), (_, t))| !busy && *t < free_in(*l))
            .count() as u32
    }

    pub fn score(&self, cores: &[u32]) -> Option<Cost> {
        let mut total = 0u32;
        let mut device_distance = 0;
        let mut no_l3_pus = 0;
        let mut efficiency = 0;
        let mut kinds: Vec<u32> = Vec::new();
        let mut l3s: Vec<(u32, bool)> = Vec::new();
        let mut l3_taken: Vec<(u32, usize)> = Vec::new();
        let mut l2s: Vec<(u32, bool)> = Vec::new();
        let mut per_domain: BTreeMap<u32, u64> = BTreeMap::new();
        for (i, &c) in cores.iter().enumerate() {
            if !self.ok.get(c as usize).copied().unwrap_or(false) || cores[..i].contains(&c) {
                return None;
            }
            let info = self.ctx.cores.get(c as usize)?;
            let (d, n3, e) = self.ctx.core_terms(c);
            let slots = self.ctx.slots(info);
            total += slots;
            *per_domain.entry(self.ctx.domain_of(info.node)).or_default() += u64::from(slots);
            device_distance += d;
            no_l3_pus += n3;
            efficiency += e;
            if !kinds.contains(&info.kind) {
                kinds.push(info.kind);
            }
            if let Some(l) = info.l3 {
                if !l3s.iter().any(|&(x, _)| x == l) {
                    l3s.push((l, info.l3_busy));
                    l3_taken.push((l, 0));
                }
                if let Some(t) = l3_taken.iter_mut().find(|(x, _)| *x == l) {
                    t.1 += slots as usize;
                }
            }
            if let Some(l) = info.l2 {
                if !l2s.iter().any(|&(x, _)| x == l) {
                    l2s.push((l, info.l2_busy));
                }
            }
        }
        if total < self.ctx.vcpus {
            return None;
        }
        Some(Cost {
            host_reserve: self.node_terms.host_reserve,
            nodes: self.node_terms.nodes,
            device_distance,
            node_distance: self.node_terms.node_distance,
            page_rank: self.node_terms.page_rank,
            no_l3_pus,
            kinds: kinds.len().saturating_sub(1) as u32,
            efficiency,
            idle_pus: total - self.ctx.vcpus,
            balance: per_domain
                .iter()
                .map(|(&d, &u)| self.shares.penalty(d, u))
                .sum::<u64>()
                .saturating_sub(self.shares.base(u64::from(total))),
            shared_l2: l2s.iter().filter(|(_, b)| *b).count() as u32,
            shared_l3: l3s.iter().filter(|(_, b)| *b).count() as u32
                + self.part_used(&l3s, &l3_taken),
            l3_groups: l3s.len() as u32,
        })
    }
}
