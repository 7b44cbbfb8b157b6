//! Choosing the host side (housekeeping CPUs) and the guest's nodes and cores.
//!
//! The search is exact for the cost function in [`crate::cost`]: node sets are tried by
//! increasing size (the first cost term), every node set of that size is scored, and within a
//! node set the cores come from a knapsack over L3 groups whose per-group options are
//! themselves knapsacks over L2 groups and then over classes of interchangeable cores (same
//! node, kind, number of PUs). Every cost term within a node set is additive over cores or L3
//! groups, and the tie-break (Σ 2^core) is additive too, so the knapsack's optimum is the
//! exhaustive optimum; `tests/oracle.rs` checks that on every small host.

use std::collections::BTreeMap;

use topo::{CpuSet, Host};

use crate::cost::{Context, CoreBits, CoreInfo, Cost};
use crate::{PlanError, Request};

/// Above this many node sets of one size the search takes the nearest-node sets only
/// (hosts with dozens of NUMA nodes and a VM spanning many of them); never on small hosts.
pub const MAX_NODE_SETS: usize = 4096;

/// The chosen placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub nodes: Vec<u32>,
    /// Guest cores, ascending.
    pub cores: Vec<u32>,
    /// Core reserved for the emulator and iothreads, if any was spare.
    pub emulator: Option<u32>,
    pub cost: Cost,
    /// Whether every node set of the winning size was scored.
    pub exhaustive: bool,
}

/// The host's housekeeping CPUs: `req.host_cpus` widened to whole cores, or by default the
/// first core (the one with CPU 0) and its siblings, one more core per 32 on big hosts.
pub fn housekeeping(
    req: &Request,
    host: &Host,
    cores: &[CoreInfo],
    tenant_cpus: &CpuSet,
    rationale: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<CpuSet, PlanError> {
    let core_of = |cpu: u32| cores.iter().find(|c| c.pus.contains(&cpu));
    if let Some(given) = &req.host_cpus {
        if given.is_empty() {
            return Err(PlanError::Refused(
                "--host-cpus is empty: the host needs at least one core".into(),
            ));
        }
        let mut out = CpuSet::new();
        for cpu in given.iter() {
            if host.pu(cpu).is_none() {
                return Err(PlanError::Refused(format!(
                    "--host-cpus names CPU {cpu}, which this host does not have (CPUs {})",
                    host.all_cpus()
                )));
            }
            if let Some(c) = core_of(cpu) {
                for &p in &c.pus {
                    out.insert(p);
                }
            }
        }
        if &out != given {
            rationale.push(format!(
                "host CPUs {given} widened to whole cores {out}: a core is never split between host and guest"
            ));
        } else {
            rationale.push(format!("host CPUs {out} as requested"));
        }
        if out.intersects(tenant_cpus) {
            warnings.push(format!(
                "host CPUs {out} overlap CPUs pinned by tenants ({})",
                out.intersection(tenant_cpus)
            ));
        }
        return Ok(out);
    }
    let want = (cores.len() / 32).max(1);
    let picked: Vec<&CoreInfo> = cores
        .iter()
        .filter(|c| !c.pus.iter().any(|&p| tenant_cpus.contains(p)))
        .take(want)
        .collect();
    if picked.is_empty() {
        return Err(PlanError::Refused(format!(
            "tenants pin every core ({}): no core is left for the host",
            tenant_cpus
        )));
    }
    let out: CpuSet = picked.iter().flat_map(|c| c.pus.iter().copied()).collect();
    if picked.first().map(|c| c.id) != Some(0) {
        warnings.push(format!(
            "a tenant pins CPUs of the first core: host housekeeping moved to {out}"
        ));
    }
    rationale.push(format!(
        "host housekeeping CPUs {out}: {} whole core{} ({}), SMT siblings included, kept for the host kernel, interrupts and daemons (VFIO gaming-host write-up)",
        picked.len(),
        if picked.len() == 1 { "" } else { "s" },
        if want == 1 {
            "the first core".to_string()
        } else {
            format!("the first cores, one per 32 cores of this {}-core host", cores.len())
        }
    ));
    Ok(out)
}

/// Value of a partial selection within a node set: the additive cost terms and the core set.
/// Field order = the cost's order (idle PUs, which sits between efficiency and shared L2, is
/// the same for every selection of one size and is compared at the end).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Val {
    device_distance: u64,
    efficiency_pus: u32,
    shared_l2: u32,
    shared_l3: u32,
    l3_groups: u32,
    bits: CoreBits,
}

impl Val {
    fn empty() -> Val {
        Val {
            device_distance: 0,
            efficiency_pus: 0,
            shared_l2: 0,
            shared_l3: 0,
            l3_groups: 0,
            bits: CoreBits::default(),
        }
    }

    fn add(&self, o: &Val) -> Val {
        Val {
            device_distance: self.device_distance + o.device_distance,
            efficiency_pus: self.efficiency_pus + o.efficiency_pus,
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
    let per_core = cores.first().map(|&c| ctx.core_terms(c)).unwrap_or((0, 0));
    let mut v = Val::empty();
    for (k, &core) in cores.iter().enumerate() {
        let t = (k + 1) * ppc;
        if t > cap {
            break;
        }
        v.device_distance += per_core.0;
        v.efficiency_pus += per_core.1;
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

/// Best guest cores within `nodes` (emulator core excluded): (value, PUs taken).
///
/// Three nested knapsacks, each exact because every term is additive: L3 groups (flags:
/// used, shared) made of L2 groups (flag: shared) made of classes of interchangeable cores.
fn knapsack(ctx: &Context, nodes: &[u32], emulator: Option<u32>) -> Option<(Val, u32)> {
    let n = ctx.vcpus as usize;
    let cand = ctx.candidate_cores(nodes, emulator);
    let maxppc = cand
        .iter()
        .filter_map(|&c| ctx.cores.get(c as usize))
        .map(|c| c.pus.len())
        .max()?;
    let cap = n + maxppc - 1;
    let busy_l3 = ctx.busy_l3(emulator);
    let busy_l2 = ctx.busy_l2(emulator);

    // L3 group (or, without L3, the core's class) → L2 group (or class) → class → cores
    type Class = (u32, bool, usize);
    type Tree = BTreeMap<
        (Option<u32>, Option<Class>),
        BTreeMap<(Option<u32>, Option<Class>), BTreeMap<Class, Vec<u32>>>,
    >;
    let mut tree: Tree = BTreeMap::new();
    for &c in &cand {
        let Some(info) = ctx.cores.get(c as usize) else {
            continue;
        };
        let class = (info.node, info.efficiency, info.pus.len());
        let l3_key = match info.l3 {
            Some(l) => (Some(l), None),
            None => (None, Some(class)),
        };
        // an L2 of this core alone can never be shared: group by class instead (keeps
        // per-core-L2 hosts at one sub-knapsack per class)
        let l2 = info
            .l2
            .filter(|l| ctx.l2_cpus.get(l).is_some_and(|s| s.len() > info.pus.len()));
        let l2_key = match l2 {
            Some(l) => (Some(l), None),
            None => (None, Some(class)),
        };
        tree.entry(l3_key)
            .or_default()
            .entry(l2_key)
            .or_default()
            .entry(class)
            .or_default()
            .push(c);
    }

    let mut dp = start(cap);
    for ((l3, _), l2s) in &tree {
        let mut unit = start(cap);
        for ((l2, _), classes) in l2s {
            let mut sub = start(cap);
            for (&(_, _, ppc), cores) in classes {
                sub = combine(&sub, class_options(ctx, cores, ppc, cap), cap);
            }
            if let Some(l2) = l2 {
                if busy_l2.contains(l2) {
                    sub = flag(sub, |v| v.shared_l2 += 1);
                }
            }
            unit = combine(&unit, sub, cap);
        }
        if let Some(l3) = l3 {
            let busy = busy_l3.contains(l3);
            unit = flag(unit, |v| {
                v.l3_groups += 1;
                if busy {
                    v.shared_l3 += 1;
                }
            });
        }
        dp = combine(&dp, unit, cap);
    }
    let mut best: Option<(Val, u32)> = None;
    let key = |v: &Val, t: usize| {
        (
            v.device_distance,
            v.efficiency_pus,
            t - n,
            v.shared_l2,
            v.shared_l3,
            v.l3_groups,
            v.bits.clone(),
        )
    };
    for (t, v) in dp.iter().enumerate().skip(n) {
        let Some(v) = v else { continue };
        let better = match &best {
            None => true,
            Some((b, bt)) => key(v, t) < key(b, *bt as usize),
        };
        if better {
            best = Some((v.clone(), t as u32));
        }
    }
    best
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
pub fn best_placement(ctx: &Context) -> Option<Placement> {
    for k in 1..=ctx.nodes.len() {
        let (sets, exhaustive) = node_sets(ctx, k);
        let mut best: Option<(Cost, CoreBits, Placement)> = None;
        for nodes in sets {
            if ctx.free_pus_in(&nodes) < ctx.vcpus {
                continue;
            }
            let Some((n_nodes, page_rank)) = ctx.node_terms(&nodes) else {
                continue;
            };
            let emulator = ctx.emulator_core(&nodes);
            let Some((v, total)) = knapsack(ctx, &nodes, emulator) else {
                continue;
            };
            let cost = Cost {
                nodes: n_nodes,
                device_distance: v.device_distance,
                page_rank,
                efficiency_pus: v.efficiency_pus,
                idle_pus: total - ctx.vcpus,
                shared_l2: v.shared_l2,
                shared_l3: v.shared_l3,
                l3_groups: v.l3_groups,
            };
            let better = match &best {
                None => true,
                Some((c, b, _)) => (cost, &v.bits) < (*c, b),
            };
            if better {
                let cores: Vec<u32> = v.bits.iter().collect();
                best = Some((
                    cost,
                    v.bits,
                    Placement {
                        nodes,
                        cores,
                        emulator,
                        cost,
                        exhaustive,
                    },
                ));
            }
        }
        if let Some((_, _, p)) = best {
            return Some(p);
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
