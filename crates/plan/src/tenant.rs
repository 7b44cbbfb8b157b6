//! Tenants: other VMs on the host whose pinned CPUs, devices and hugepages are taken.
//!
//! A tenant comes from a plan JSON ([`Tenant::from_plan`]) or a libvirt domain XML (the
//! `emit` crate converts those; the CLI decides which by content).

use topo::CpuSet;

use crate::{Plan, Tenant, TenantHugepages};

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
            cpus: plan.pinned_cpus(),
            emulator_cpus: plan
                .emulator_cpus
                .union(&plan.iothread_cpus)
                .difference(&plan.guest_cpus()),
            host_cpus: Some(plan.host_cpus.clone()),
            devices: plan.devices.iter().map(|d| d.bdf.clone()).collect(),
            hugepages,
        }
    }
}

/// Every CPU some tenant pins.
pub fn taken_cpus(tenants: &[Tenant]) -> CpuSet {
    tenants
        .iter()
        .fold(CpuSet::new(), |acc, t| acc.union(&t.cpus))
}
