//! The host as lstopo draws it: a tree of boxes nested by CPU-set inclusion — machine,
//! packages, dies, NUMA nodes, L3 groups, L2 clusters, cores, PUs — built from the host
//! model alone, the same way for every source (hwloc XML, sysfs, the built-in host).

use topo::{CacheType, CpuSet, Host};

/// What a box stands for; the order is the nesting rank where two objects hold the same
/// CPUs (a package that is one NUMA node draws the package outside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Machine,
    Package,
    Die,
    Node,
    L3,
    L2,
    Core,
    Pu,
}

impl Kind {
    /// The name used in the SVG's `data-kind` attributes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Machine => "machine",
            Kind::Package => "package",
            Kind::Die => "die",
            Kind::Node => "numa",
            Kind::L3 => "l3",
            Kind::L2 => "l2",
            Kind::Core => "core",
            Kind::Pu => "pu",
        }
    }
}

/// One box of the drawing.
#[derive(Debug, Clone)]
pub struct Obj {
    pub kind: Kind,
    /// The host model's id: package, die or core id, node os_index, cache id, PU os_index.
    pub id: u32,
    pub cpus: CpuSet,
    pub children: Vec<Obj>,
}

fn obj(kind: Kind, id: u32, cpus: CpuSet) -> Obj {
    Obj {
        kind,
        id,
        cpus,
        children: Vec::new(),
    }
}

/// Every object of the host that the drawing shows, flat: dies only where a package has
/// more than one, L2 only where one is shared by several cores (E-core clusters, tiles).
fn objects(host: &Host) -> Vec<Obj> {
    let mut out = Vec::new();
    for p in &host.packages {
        out.push(obj(Kind::Package, p.id, p.cpus.clone()));
    }
    for d in &host.dies {
        let same_package = host.dies.iter().filter(|e| e.package == d.package).count();
        if same_package > 1 {
            out.push(obj(Kind::Die, d.id, d.cpus.clone()));
        }
    }
    for n in &host.numa_nodes {
        if !n.cpus.is_empty() {
            out.push(obj(Kind::Node, n.os_index, n.cpus.clone()));
        }
    }
    for c in &host.caches {
        let unified = matches!(c.cache_type, CacheType::Unified);
        let cores = host
            .cores
            .iter()
            .filter(|k| k.pus.is_subset(&c.cpus))
            .count();
        if unified && c.level == 3 || unified && c.level == 2 && cores > 1 {
            let kind = if c.level == 3 { Kind::L3 } else { Kind::L2 };
            out.push(obj(kind, c.id, c.cpus.clone()));
        }
    }
    for c in &host.cores {
        out.push(obj(Kind::Core, c.id, c.pus.clone()));
    }
    for p in &host.pus {
        let mut one = CpuSet::new();
        one.insert(p.os_index);
        out.push(obj(Kind::Pu, p.os_index, one));
    }
    out
}

/// Whether `a` may hold `b`: a superset, and of a lower rank when the sets are equal.
fn holds(a: &Obj, b: &Obj) -> bool {
    b.cpus.is_subset(&a.cpus) && (a.cpus.len() > b.cpus.len() || a.kind < b.kind)
}

/// Objects that cut across a NUMA node (hold some of its CPUs but neither all nor only
/// theirs) cannot be nested; caches and dies give way, the nodes stay.
fn drop_crossing(objs: Vec<Obj>) -> Vec<Obj> {
    let nodes: Vec<CpuSet> = objs
        .iter()
        .filter(|o| o.kind == Kind::Node)
        .map(|o| o.cpus.clone())
        .collect();
    objs.into_iter()
        .filter(|o| {
            !matches!(o.kind, Kind::Die | Kind::L3 | Kind::L2)
                || nodes
                    .iter()
                    .all(|n| !n.intersects(&o.cpus) || n.is_subset(&o.cpus) || o.cpus.is_subset(n))
        })
        .collect()
}

/// The tree: each object under the smallest object that holds it, children in order of
/// their first CPU's place in the host's PU order (hwloc's logical order).
pub fn build(host: &Host) -> Obj {
    let all: CpuSet = host.pus.iter().map(|p| p.os_index).collect();
    let mut objs = drop_crossing(objects(host));
    // larger sets first, then rank: a parent always comes before its children
    objs.sort_by(|a, b| b.cpus.len().cmp(&a.cpus.len()).then(a.kind.cmp(&b.kind)));
    let logical: std::collections::HashMap<u32, usize> = host
        .pus
        .iter()
        .enumerate()
        .map(|(i, p)| (p.os_index, i))
        .collect();
    let mut root = obj(Kind::Machine, 0, all);
    for o in objs {
        insert(&mut root, o);
    }
    sort(&mut root, &logical);
    root
}

fn insert(parent: &mut Obj, o: Obj) {
    if let Some(child) = parent.children.iter_mut().find(|c| holds(c, &o)) {
        insert(child, o);
    } else {
        parent.children.push(o);
    }
}

fn sort(o: &mut Obj, logical: &std::collections::HashMap<u32, usize>) {
    let first = |c: &Obj| {
        c.cpus
            .iter()
            .filter_map(|p| logical.get(&p).copied())
            .min()
            .unwrap_or(usize::MAX)
    };
    o.children.sort_by_key(first);
    for c in &mut o.children {
        sort(c, logical);
    }
}

/// Every object of `kind` in the tree, depth first.
pub fn all_of(o: &Obj, kind: Kind) -> Vec<&Obj> {
    let mut out = Vec::new();
    if o.kind == kind {
        out.push(o);
    }
    for c in &o.children {
        out.extend(all_of(c, kind));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_host_nests_package_l3_core_pu() {
        let host = topo::builtin::default_host();
        let t = build(&host);
        assert_eq!(all_of(&t, Kind::Pu).len(), host.pus.len());
        assert_eq!(all_of(&t, Kind::Core).len(), host.cores.len());
        for core in all_of(&t, Kind::Core) {
            assert!(core.children.iter().all(|c| c.kind == Kind::Pu));
            assert_eq!(core.children.len(), core.cpus.len());
        }
    }
}
