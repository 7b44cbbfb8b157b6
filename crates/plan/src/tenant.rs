//! Tenants: other VMs on the host whose pinned CPUs, devices and hugepages are taken.
//!
//! A tenant comes from a plan JSON ([`Tenant::from_plan`]) or a libvirt domain XML (the
//! `emit` crate converts those; the CLI decides which by content). [`account`] checks each
//! against the host and counts its hugepages once, per node:
//! - on the node the tenant names (its plan, or the domain's `<numatune>`/`<memnode>`);
//! - else on the nodes of the CPUs it pins, in proportion to them;
//! - else spread evenly over the host's nodes with memory — an assumption, said as one.
//!
//! The tenants' "Why" sentences (what each holds, what was assumed) are born in [`account`]
//! and reach `crate::rationale` first, through `Holdings.rationale` and `Context.rationale`.

use std::collections::BTreeMap;

use topo::{CpuSet, Host};

use crate::memory::{human_bytes, page_name};
use crate::model::Holdings;
use crate::{Plan, PlanError, Tenant, TenantHugepages};

impl Tenant {
    /// The tenant a plan becomes once applied: its vCPU, emulator and iothread CPUs, its
    /// devices and its hugepages per node.
    pub fn from_plan(plan: &Plan) -> Tenant {
        let name = plan
            .request
            .name
            .clone()
            .unwrap_or_else(|| format!("plan on {}", plan.guest_cpus()));
        let mut hugepages = Vec::new();
        if plan.memory.hugepage_size_kb > crate::memory::KB_4K {
            if plan.memory.host_nodes.is_empty() {
                hugepages.push(TenantHugepages {
                    node: None,
                    size_kb: plan.memory.hugepage_size_kb,
                    pages: plan.memory.pages,
                });
            }
            for (node, pages) in plan
                .memory
                .host_nodes
                .iter()
                .zip(&plan.memory.pages_per_node)
            {
                if *pages > 0 {
                    hugepages.push(TenantHugepages {
                        node: Some(*node),
                        size_kb: plan.memory.hugepage_size_kb,
                        pages: *pages,
                    });
                }
            }
        }
        Tenant {
            name,
            cpus: plan.held_cpus(),
            emulator_cpus: plan
                .emulator_cpus
                .union(&plan.iothread_cpus)
                .difference(&plan.guest_cpus()),
            host_cpus: Some(plan.host_cpus.clone()),
            devices: plan.devices.iter().map(|d| d.bdf.clone()).collect(),
            hugepages,
            notes: Vec::new(),
        }
    }
}

/// Every CPU some tenant pins.
pub fn taken_cpus(tenants: &[Tenant]) -> CpuSet {
    tenants
        .iter()
        .fold(CpuSet::new(), |acc, t| acc.union(&t.cpus))
}

/// Counting: only `account` adds to what the tenants hold.
impl Holdings {
    fn add(&mut self, node: u32, size_kb: u64, pages: u64) {
        if pages > 0 {
            let e = self
                .pages
                .entry(node)
                .or_default()
                .entry(size_kb)
                .or_insert(0);
            *e = e.saturating_add(pages);
        }
    }
}

/// Split `total` over `weights` (largest remainder, ties to the earlier entry).
fn split(total: u64, weights: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let sum: u128 = weights.iter().map(|(_, w)| *w as u128).sum();
    if sum == 0 {
        return Vec::new();
    }
    let mut out: Vec<(u32, u64)> = weights
        .iter()
        .map(|(n, w)| (*n, (total as u128 * *w as u128 / sum) as u64))
        .collect();
    let mut left = total - out.iter().map(|(_, p)| p).sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(total as u128 * weights[i].1 as u128 % sum));
    for i in order {
        if left == 0 {
            break;
        }
        out[i].1 += 1;
        left -= 1;
    }
    out
}

fn pages_words(pages: u64, size_kb: u64) -> String {
    format!(
        "{} ({pages} × {})",
        human_bytes(pages.saturating_mul(size_kb).saturating_mul(1024)),
        page_name(size_kb)
    )
}

/// Check every tenant against the host and count what it holds. A tenant that pins CPUs the
/// host does not have, or binds memory to nodes it does not have, describes another machine
/// (or a domain that cannot start here): refused, naming them. Devices the host does not list
/// are warned about (hwloc XML leaves some devices out).
pub fn account(tenants: &[Tenant], host: &Host) -> Result<Holdings, PlanError> {
    let mut h = Holdings::default();
    let host_pus: CpuSet = host.pus.iter().map(|p| p.os_index).collect();
    let numa = !host.numa_nodes.is_empty();
    let node_ids: Vec<u32> = host.numa_nodes.iter().map(|n| n.os_index).collect();
    // nodes that can hold memory (CPU-less nodes with memory included)
    let mem_nodes: Vec<u32> = host
        .numa_nodes
        .iter()
        .filter(|n| n.memory_bytes.is_none_or(|b| b > 0))
        .map(|n| n.os_index)
        .collect();
    for t in tenants {
        let unknown = t.cpus.difference(&host_pus);
        if !unknown.is_empty() {
            return Err(PlanError::Refused(format!(
                "tenant {:?} pins CPUs {unknown}, which this host does not have (it has {}): is it from another host?",
                t.name,
                host_pus
            )));
        }
        if numa {
            if let Some(n) = t
                .hugepages
                .iter()
                .filter_map(|p| p.node)
                .find(|n| !node_ids.contains(n))
            {
                return Err(PlanError::Refused(format!(
                    "tenant {:?} holds hugepages on NUMA node {n}, which this host does not have (nodes {})",
                    t.name,
                    crate::memory::list(&node_ids)
                )));
            }
        }
        h.cpus = h.cpus.union(&t.cpus);
        let mut held: Vec<String> = Vec::new();
        let mut note = |h: &mut Holdings, node: u32, size_kb: u64, pages: u64| {
            h.add(node, size_kb, pages);
            if numa {
                held.push(format!("{} on node {node}", pages_words(pages, size_kb)));
            } else {
                held.push(pages_words(pages, size_kb));
            }
        };
        for p in &t.hugepages {
            match (p.node, numa) {
                (_, false) => note(&mut h, 0, p.size_kb, p.pages),
                (Some(n), true) => note(&mut h, n, p.size_kb, p.pages),
                (None, true) => {
                    // where its CPUs are, else evenly
                    let mut per_node: BTreeMap<u32, u64> = BTreeMap::new();
                    for c in t.cpus.iter() {
                        if let Some(n) = host.pu(c).and_then(|pu| pu.numa) {
                            *per_node.entry(n).or_insert(0) += 1;
                        }
                    }
                    let (weights, why): (Vec<(u32, u64)>, String) = if per_node.is_empty() {
                        (
                            mem_nodes.iter().map(|&n| (n, 1)).collect(),
                            format!(
                                "names no host node and pins no CPUs: assumed spread evenly over nodes {}",
                                crate::memory::list(&mem_nodes)
                            ),
                        )
                    } else if per_node.len() == 1 {
                        let n = per_node.keys().next().copied().unwrap_or(0);
                        (
                            vec![(n, 1)],
                            format!("names no host node: counted on node {n}, where its CPUs are"),
                        )
                    } else {
                        let w: Vec<(u32, u64)> = per_node.into_iter().collect();
                        let nodes: Vec<u32> = w.iter().map(|(n, _)| *n).collect();
                        (
                            w,
                            format!(
                                "names no host node: counted on nodes {} in proportion to its CPUs there",
                                crate::memory::list(&nodes)
                            ),
                        )
                    };
                    h.rationale.push(format!(
                        "tenant {:?}: {} of hugepages {why}",
                        t.name,
                        pages_words(p.pages, p.size_kb)
                    ));
                    for (n, pages) in split(p.pages, &weights) {
                        if pages > 0 {
                            note(&mut h, n, p.size_kb, pages);
                        }
                    }
                }
            }
        }
        for n in &t.notes {
            h.rationale.push(format!("tenant {:?}: {n}", t.name));
        }
        let devices: Vec<String> = t
            .devices
            .iter()
            .map(|d| topo::normalize_bdf(d).unwrap_or_else(|| d.clone()))
            .collect();
        if !host.pci_devices.is_empty() {
            let missing: Vec<&String> = devices.iter().filter(|d| host.pci(d).is_none()).collect();
            if !missing.is_empty() {
                h.warnings.push(format!(
                    "tenant {:?} has device(s) {} that this host does not list (is the tenant from another host, or does the host model leave devices out?)",
                    t.name,
                    missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let mut parts = Vec::new();
        if !t.cpus.is_empty() {
            parts.push(format!("CPUs {}", t.cpus));
        }
        if !devices.is_empty() {
            parts.push(format!("devices {}", devices.join(", ")));
        }
        if !held.is_empty() {
            parts.push(format!("hugepages {}", held.join(", ")));
        }
        if parts.is_empty() {
            parts.push("nothing pinned, no devices, no hugepages".into());
        }
        h.rationale
            .push(format!("tenant {:?} holds {}", t.name, parts.join("; ")));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact() {
        assert_eq!(split(7, &[(0, 1), (1, 1)]), vec![(0, 4), (1, 3)]);
        assert_eq!(split(10, &[(3, 3), (5, 1)]), vec![(3, 8), (5, 2)]);
        assert!(split(5, &[]).is_empty());
        assert_eq!(split(0, &[(0, 1)]), vec![(0, 0)]);
    }

    #[test]
    fn unknown_cpus_are_refused() {
        let host = topo::builtin::default_host();
        let t = Tenant {
            name: "far".into(),
            cpus: CpuSet::parse_list("0-23").unwrap(),
            ..Default::default()
        };
        let e = account(&[t], &host).unwrap_err().to_string();
        assert!(e.contains("16-23") && e.contains("another host"), "{e}");
    }
}
