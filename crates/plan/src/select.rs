//! Choosing the guest's nodes and cores, then its emulator core.
//!
//! The search is exact for the cost function in [`crate::cost`]: node sets are tried by
//! whether they leave every node its host reserve and then by increasing size (the first two
//! cost terms), every node set of that size is scored, and within a
//! node set the cores come from a knapsack over L3 groups whose per-group options are
//! themselves knapsacks over L2 groups and then over classes of interchangeable cores (same
//! node, kind, number of PUs). Every cost term within a node set is additive over cores or L3
//! groups, and the tie-break (Σ 2^core) is additive too, so the knapsack's optimum is the
//! exhaustive optimum; the number of core kinds mixed is not additive, so on hybrid parts the
//! knapsack runs once per set of kinds allowed and the best run wins. `tests/oracle.rs` checks
//! all of it on every small host. The emulator core is chosen afterwards
//! ([`crate::emulator`]): it is the VM's own and does not change the guest's cost.

use std::collections::BTreeMap;

use crate::context::{Context, Shares};
use crate::cost::{CoreBits, Cost};
use crate::emulator::{self, Emulator};
use crate::Threads;

/// Above this many node sets of one size the search takes the nearest-node sets only
/// (hosts with dozens of NUMA nodes and a VM spanning many of them); never on small hosts.
pub const MAX_NODE_SETS: usize = 4096;

/// How a plan came to pack sibling pairs or give each vCPU a core; the rationale says
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadChoice {
    /// `--threads pack` or `spread` as asked.
    Asked(Threads),
    /// The host's cores have one thread each: nothing to choose.
    NoSmt,
    /// Auto, a container: N CPUs asked are N threads on whole cores (the kubelet's meaning).
    Container,
    /// Auto, the gaming profile: sibling pairs, the guest told the truth about them and the
    /// host keeps more cores whole.
    Gaming,
    /// Auto: one vCPU per core fits as near the devices, on as few nodes, as pairs do.
    SpreadFits,
    /// Auto: pairs would span `pack_nodes` nodes anyway, so each vCPU gets a core, over
    /// `nodes` nodes.
    SpreadSpans { pack_nodes: usize, nodes: usize },
    /// Auto: a core per vCPU would leave its node only `left` free cores, fewer than the VM
    /// takes: sibling pairs keep room for the host's next VMs.
    SpreadCrowds { left: u32 },
    /// Auto: one vCPU per core needs `free_cores` more than the host has free.
    TooFewCores { free_cores: u32 },
    /// Auto: one vCPU per core would take more nodes, or nodes farther from the devices,
    /// than pairs on whole cores.
    SpreadFarther {
        pack_nodes: usize,
        spread_nodes: usize,
    },
}

impl ThreadChoice {
    pub fn chosen(self) -> Threads {
        match self {
            ThreadChoice::Asked(t) => t,
            ThreadChoice::SpreadFits | ThreadChoice::SpreadSpans { .. } => Threads::Spread,
            _ => Threads::Pack,
        }
    }
}

/// The chosen placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub nodes: Vec<u32>,
    /// Guest cores, ascending.
    pub cores: Vec<u32>,
    /// Where the emulator and iothreads go.
    pub emulator: Emulator,
    pub cost: Cost,
    /// Whether every node set of the winning size was scored.
    pub exhaustive: bool,
}

/// Value of a partial selection within a node set: the additive cost terms and the core set.
/// Field order = the cost's order (kinds, fixed per knapsack run, and idle PUs, the same for
/// every selection of one size, are compared around them).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Val {
    device_distance: u64,
    no_l3_pus: u32,
    efficiency: u32,
    balance: u64,
    shared_l2: u32,
    shared_l3: u32,
    l3_groups: u32,
    bits: CoreBits,
}

impl Val {
    fn empty() -> Val {
        Val {
            device_distance: 0,
            no_l3_pus: 0,
            efficiency: 0,
            balance: 0,
            shared_l2: 0,
            shared_l3: 0,
            l3_groups: 0,
            bits: CoreBits::default(),
        }
    }

    fn add(&self, o: &Val) -> Val {
        Val {
            device_distance: self.device_distance + o.device_distance,
            no_l3_pus: self.no_l3_pus + o.no_l3_pus,
            efficiency: self.efficiency + o.efficiency,
            balance: self.balance + o.balance,
            shared_l2: self.shared_l2 + o.shared_l2,
            shared_l3: self.shared_l3 + o.shared_l3,
            l3_groups: self.l3_groups + o.l3_groups,
            bits: self.bits.union(&o.bits),
        }
    }
}

fn keep_min(slot: &mut Option<Val>, cand: Val) {
    match slot {
        Some(v) if *v <= cand => {}
        _ => *slot = Some(cand),
    }
}

/// Best value for each number of PUs taken (index), `None` where unreachable.
type Options = Vec<Option<Val>>;

fn start(cap: usize) -> Options {
    let mut v = vec![None; cap + 1];
    v[0] = Some(Val::empty());
    v
}

/// Options of one class of interchangeable cores (same node, kind, PU count, L2 and L3
/// group): the lowest-numbered k cores for every k.
fn class_options(ctx: &Context, cores: &[u32], ppc: usize, cap: usize) -> Options {
    let mut opt = start(cap);
    let per_core = cores
        .first()
        .map(|&c| ctx.core_terms(c))
        .unwrap_or((0, 0, 0));
    let mut v = Val::empty();
    for (k, &core) in cores.iter().enumerate() {
        let t = (k + 1) * ppc;
        if t > cap {
            break;
        }
        v.device_distance += per_core.0;
        v.no_l3_pus += per_core.1;
        v.efficiency += per_core.2;
        v.bits.insert(core);
        opt[t] = Some(v.clone());
    }
    opt
}

/// Knapsack step: every way of adding one of `group`'s non-empty options to `acc`.
fn combine(acc: &Options, group: Options, cap: usize) -> Options {
    let options: Vec<(usize, Val)> = group
        .into_iter()
        .enumerate()
        .skip(1)
        .filter_map(|(u, o)| o.map(|o| (u, o)))
        .collect();
    let mut next = acc.clone();
    for (t, base) in acc.iter().enumerate() {
        let Some(base) = base else { continue };
        for (u, o) in &options {
            if t + u > cap {
                break;
            }
            keep_min(&mut next[t + u], base.add(o));
        }
    }
    next
}

/// Add a group's flag costs to every non-empty option.
fn flag(mut opt: Options, f: impl Fn(&mut Val)) -> Options {
    for v in opt.iter_mut().skip(1).flatten() {
        f(v);
    }
    opt
}

/// A class of interchangeable cores: node, kind, slots per core.
type Class = (u32, u32, usize);
/// A cache group by id, or (without one) a class standing for it.
type Group = (Option<u32>, Option<Class>);
/// An L3 group's L2 groups (with whether each is busy) → classes → cores.
type L2s = BTreeMap<(Group, bool), BTreeMap<Class, Vec<u32>>>;
/// L3 groups (with whether each is busy) → their L2 groups.
type Tree = BTreeMap<(Group, bool), L2s>;

/// The options of one L3 group (or, without an L3, one class): its L2 groups' options
/// combined, flagged used and shared. `free` is, for a container spanning groups, the
/// group's free PUs: a clean group left part-used counts as shared (see `container_cores`).
fn l3_unit(
    ctx: &Context,
    l2s: &L2s,
    is_l3: bool,
    busy: bool,
    free: Option<usize>,
    cap: usize,
) -> Options {
    let mut unit = start(cap);
    for (((l2, _), l2_busy), classes) in l2s {
        let mut sub = start(cap);
        for (&(_, _, ppc), cores) in classes {
            sub = combine(&sub, class_options(ctx, cores, ppc, cap), cap);
        }
        if l2.is_some() && *l2_busy {
            sub = flag(sub, |v| v.shared_l2 += 1);
        }
        unit = combine(&unit, sub, cap);
    }
    if !is_l3 {
        return unit;
    }
    if let (Some(free), false) = (free, busy) {
        for (taken, v) in unit.iter_mut().enumerate().skip(1) {
            if let Some(v) = v {
                if taken < free {
                    v.shared_l3 += 1;
                }
            }
        }
    }
    flag(unit, |v| {
        v.l3_groups += 1;
        if busy {
            v.shared_l3 += 1;
        }
    })
}

/// Best guest cores among `cand`: (value, PUs taken).
///
/// Three nested knapsacks, each exact because every term is additive: L3 groups (flags:
/// used, shared) made of L2 groups (flag: shared) made of classes of interchangeable cores.
fn knapsack(
    ctx: &Context,
    cand: &[u32],
    l3_free: Option<&BTreeMap<u32, usize>>,
    shares: &Shares,
) -> Option<(Val, u32)> {
    let n = ctx.vcpus as usize;
    let maxppc = cand
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .map(|c| ctx.slots(c) as usize)
        .max()?;
    let cap = n + maxppc - 1;

    // balance domain → L3 group (or, without L3, the core's class) → L2 group (or class) →
    // class → cores
    let mut domains: BTreeMap<u32, Tree> = BTreeMap::new();
    for &c in cand {
        let Some(info) = ctx.cores.get(c as usize) else {
            continue;
        };
        let class = (info.node, info.kind, ctx.slots(info) as usize);
        let l3_key = match info.l3 {
            Some(l) => ((Some(l), None), info.l3_busy),
            None => ((None, Some(class)), false),
        };
        // a core's own L2 can never be shared: group by class instead (keeps per-core-L2
        // hosts at one sub-knapsack per class)
        let l2_key = match info.l2 {
            Some(l) => ((Some(l), None), info.l2_busy),
            None => ((None, Some(class)), false),
        };
        domains
            .entry(ctx.domain_of(info.node))
            .or_default()
            .entry(l3_key)
            .or_default()
            .entry(l2_key)
            .or_default()
            .entry(class)
            .or_default()
            .push(c);
    }

    let mut dp = start(cap);
    for (&domain, tree) in &domains {
        let mut part = start(cap);
        for (((l3, _), l3_busy), l2s) in tree {
            let unit = l3_unit(
                ctx,
                l2s,
                l3.is_some(),
                *l3_busy,
                l3.and_then(|l| l3_free.map(|f| f.get(&l).copied().unwrap_or(0))),
                cap,
            );
            part = combine(&part, unit, cap);
        }
        for (used, v) in part.iter_mut().enumerate().skip(1) {
            if let Some(v) = v {
                v.balance += shares.penalty(domain, used as u64);
            }
        }
        dp = combine(&dp, part, cap);
    }
    let mut best: Option<(Val, u32)> = None;
    for (t, v) in dp.iter().enumerate().skip(n) {
        let Some(v) = v else { continue };
        let better = match &best {
            None => true,
            Some((b, bt)) => rank(v, t as u32) < rank(b, *bt),
        };
        if better {
            best = Some((v.clone(), t as u32));
        }
    }
    best
}

/// A knapsack result's rank (the cost's order within a node set, then the lowest cores).
fn rank(v: &Val, t: u32) -> (u64, u32, u32, u32, u64, u32, u32, u32, &CoreBits) {
    (
        v.device_distance,
        v.no_l3_pus,
        v.efficiency,
        t,
        v.balance,
        v.shared_l2,
        v.shared_l3,
        v.l3_groups,
        &v.bits,
    )
}

/// A container's cores among `cand`. A container that fits in one L3 group (with any cores
/// without an L3) is placed as a VM's guest is; one that must span L3 groups also counts, as
/// shared, each clean group it leaves part-used: the next container would share it, so the
/// remainder goes where the cache is shared already (the kubelet's uncore-cache packing does
/// the same; a VM's emulator core fills such a remainder instead). Exact: the best selection
/// within one group under the plain cost, against the best of all under the counted cost,
/// which is a multi-group selection's true cost.
fn container_cores(
    ctx: &Context,
    cand: &[u32],
    l3_free: &BTreeMap<u32, usize>,
    shares: &Shares,
) -> Option<(Val, u32)> {
    let l3_of = |c: &u32| ctx.cores.get(*c as usize).and_then(|i| i.l3);
    let mut groups: Vec<Option<u32>> = cand.iter().map(l3_of).collect();
    groups.sort_unstable();
    groups.dedup();
    let mut best: Option<(Val, u32)> = None;
    let mut consider = |cand_v: Option<(Val, u32)>| {
        if let Some((v, t)) = cand_v {
            if best
                .as_ref()
                .is_none_or(|(b, bt)| rank(&v, t) < rank(b, *bt))
            {
                best = Some((v, t));
            }
        }
    };
    // within one L3 group (and cores without one), or without any
    for g in &groups {
        let sub: Vec<u32> = cand
            .iter()
            .copied()
            .filter(|c| l3_of(c).is_none() || l3_of(c) == *g)
            .collect();
        consider(knapsack(ctx, &sub, None, shares));
    }
    if let Some((v, t)) = knapsack(ctx, cand, Some(l3_free), shares) {
        if v.l3_groups >= 2 {
            consider(Some((v, t)));
        }
    }
    best
}

/// The best guest cores within `nodes` (value, PUs taken, kinds mixed beyond the first). On
/// hybrid parts one knapsack per set of kinds allowed: the best over all of them is the
/// exact optimum with `kinds` in its place in the order (a run's cores use at most the kinds
/// it allows, and the optimum's own kinds are one of the runs).
fn best_cores(ctx: &Context, nodes: &[u32], shares: &Shares) -> Option<(Val, u32, u32)> {
    let cand = ctx.candidate_cores(nodes);
    // free PUs per L3 group on these nodes (whatever kinds a run allows): what a container
    // leaves part-used is measured against all of them
    let mut l3_free: BTreeMap<u32, usize> = BTreeMap::new();
    for info in cand.iter().filter_map(|&c| ctx.cores.get(c as usize)) {
        if let Some(l) = info.l3 {
            *l3_free.entry(l).or_default() += ctx.slots(info) as usize;
        }
    }
    let mut kinds: Vec<u32> = cand
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize).map(|i| i.kind))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.len() <= 1 {
        return cores_for(ctx, &cand, &l3_free, shares).map(|(v, t)| (v, t, 0));
    }
    let mut best: Option<(Val, u32, u32)> = None;
    let key = |v: &Val, t: u32, k: u32| {
        (
            v.device_distance,
            v.no_l3_pus,
            k,
            v.efficiency,
            t,
            v.balance,
            v.shared_l2,
            v.shared_l3,
            v.l3_groups,
            v.bits.clone(),
        )
    };
    for mask in 1u32..(1 << kinds.len()) {
        let allowed: Vec<u32> = kinds
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, &k)| k)
            .collect();
        let sub: Vec<u32> = cand
            .iter()
            .copied()
            .filter(|&c| {
                ctx.cores
                    .get(c as usize)
                    .is_some_and(|i| allowed.contains(&i.kind))
            })
            .collect();
        let Some((v, t)) = cores_for(ctx, &sub, &l3_free, shares) else {
            continue;
        };
        let mut used: Vec<u32> = v
            .bits
            .iter()
            .filter_map(|c| ctx.cores.get(c as usize).map(|i| i.kind))
            .collect();
        used.sort_unstable();
        used.dedup();
        let k = used.len().saturating_sub(1) as u32;
        let better = match &best {
            None => true,
            Some((b, bt, bk)) => key(&v, t, k) < key(b, *bt, *bk),
        };
        if better {
            best = Some((v, t, k));
        }
    }
    best
}

/// The best cores among `cand` for the context's workload.
fn cores_for(
    ctx: &Context,
    cand: &[u32],
    l3_free: &BTreeMap<u32, usize>,
    shares: &Shares,
) -> Option<(Val, u32)> {
    match ctx.workload {
        crate::Workload::Vm => knapsack(ctx, cand, None, shares),
        crate::Workload::Container => container_cores(ctx, cand, l3_free, shares),
    }
}

fn combinations(items: &[u32], k: usize) -> Vec<Vec<u32>> {
    let n = items.len();
    let mut out = Vec::new();
    if k == 0 || k > n {
        return out;
    }
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        out.push(idx.iter().map(|&i| items[i]).collect());
        let Some(i) = (0..k).rev().find(|&i| idx[i] < i + n - k) else {
            return out;
        };
        idx[i] += 1;
        for j in i + 1..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

fn binomial_exceeds(n: usize, k: usize, limit: usize) -> bool {
    if k > n {
        return false;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * (n - i) as u128 / (i + 1) as u128;
        if c > limit as u128 {
            return true;
        }
    }
    false
}

/// Node sets of size `k`: all of them, or (above [`MAX_NODE_SETS`]) for each node the `k`
/// nodes nearest to it.
fn node_sets(ctx: &Context, k: usize) -> (Vec<Vec<u32>>, bool) {
    if let Some(only) = &ctx.only_nodes {
        let sets = if only.len() == k {
            vec![only.clone()]
        } else {
            Vec::new()
        };
        return (sets, true);
    }
    if !binomial_exceeds(ctx.nodes.len(), k, MAX_NODE_SETS) {
        return (combinations(&ctx.nodes, k), true);
    }
    let mut sets: Vec<Vec<u32>> = ctx
        .nodes
        .iter()
        .map(|&start| {
            let mut by: Vec<u32> = ctx.nodes.clone();
            by.sort_by_key(|&n| (ctx.distance(start, n), ctx.node_device_distance(n), n));
            let mut s: Vec<u32> = by.into_iter().take(k).collect();
            s.sort_unstable();
            s
        })
        .collect();
    sets.sort();
    sets.dedup();
    (sets, false)
}

/// The best placement, or `None` when nothing fits.
///
/// The first cost term, whether the memory takes some of a node's host reserve, is the outer
/// loop: node sets that leave every node its reserve by increasing size, then (only if none
/// fits) those that do not.
pub fn best_placement(ctx: &Context) -> Option<Placement> {
    (0..=1).find_map(|host_reserve| best_with_reserve(ctx, host_reserve))
}

fn best_with_reserve(ctx: &Context, host_reserve: u32) -> Option<Placement> {
    for k in 1..=ctx.nodes.len() {
        let (sets, exhaustive) = node_sets(ctx, k);
        let mut best: Option<(Cost, CoreBits, Vec<u32>)> = None;
        for nodes in sets {
            if ctx.free_pus_in(&nodes) < ctx.vcpus {
                continue;
            }
            let Some(terms) = ctx
                .node_terms(&nodes)
                .filter(|t| t.host_reserve == host_reserve)
            else {
                continue;
            };
            let shares = ctx.shares(&nodes);
            let Some((v, total, kinds)) = best_cores(ctx, &nodes, &shares) else {
                continue;
            };
            let cost = Cost {
                host_reserve: terms.host_reserve,
                nodes: terms.nodes,
                device_distance: v.device_distance,
                node_distance: terms.node_distance,
                page_rank: terms.page_rank,
                no_l3_pus: v.no_l3_pus,
                kinds,
                efficiency: v.efficiency,
                idle_pus: total - ctx.vcpus,
                balance: v.balance.saturating_sub(shares.base(u64::from(total))),
                shared_l2: v.shared_l2,
                shared_l3: v.shared_l3,
                l3_groups: v.l3_groups,
            };
            let better = match &best {
                None => true,
                Some((c, b, _)) => (cost, &v.bits) < (*c, b),
            };
            if better {
                best = Some((cost, v.bits, nodes));
            }
        }
        if let Some((cost, bits, nodes)) = best {
            let mut cores: Vec<u32> = bits.iter().collect();
            let mut emulator = emulator::choose(ctx, &nodes, &cores);
            if ctx.workload == crate::Workload::Vm {
                emulator::settle(ctx, &mut cores, &mut emulator);
            }
            return Some(Placement {
                nodes,
                cores,
                emulator,
                cost,
                exhaustive,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_in_order() {
        assert_eq!(
            combinations(&[1, 2, 3], 2),
            vec![vec![1, 2], vec![1, 3], vec![2, 3]]
        );
        assert_eq!(combinations(&[5], 1), vec![vec![5]]);
        assert!(combinations(&[1, 2], 3).is_empty());
        assert_eq!(combinations(&[0, 1, 2, 3, 4], 3).len(), 10);
    }

    #[test]
    fn binomial_limit() {
        assert!(!binomial_exceeds(24, 2, 4096));
        assert!(binomial_exceeds(24, 12, 4096));
        assert!(!binomial_exceeds(3, 3, 1));
    }
}
