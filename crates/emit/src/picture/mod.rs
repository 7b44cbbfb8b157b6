//! A picture of the host and of a plan on it, as lstopo draws a host: nested boxes of
//! packages, dies, NUMA nodes (with their memory and hugepage pools), L3 groups, cores and
//! PUs, with PCI devices under their node — and on it this VM's vCPUs (numbered), emulator and
//! iothreads, the host's housekeeping CPUs, each tenant's CPUs, where the interrupts go, and a
//! legend. [`svg`] draws it; [`html`] puts it in a self-contained page with the plan's table
//! and its "Why".
//!
//! Every box is an SVG group carrying what it stands for (`data-kind`, `data-id`,
//! `data-cpus`, and for PUs `data-roles`), so a test or a script can read the drawing back.
//! On large hosts the parts nothing of the plan touches are folded into one summary box each
//! (their core and PU counts kept as `data-cores` / `data-pus`), as lstopo folds what does not
//! fit.

mod draw;
mod page;
pub mod tree;

use std::collections::BTreeMap;

use plan::{Plan, Tenant};
use topo::{CpuSet, Host};

pub use page::html;

/// What one PU does in the picture.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Runs this vCPU of the VM.
    Vcpu(u32),
    Emulator,
    Iothread,
    /// The host's housekeeping CPUs.
    Housekeeping,
    /// A VM already on the host.
    Tenant(String),
}

impl Role {
    /// The role as written in `data-roles` and on the PU's second line.
    pub fn word(&self) -> String {
        match self {
            Role::Vcpu(v) => format!("vcpu:{v}"),
            Role::Emulator => "emulator".into(),
            Role::Iothread => "iothread".into(),
            Role::Housekeeping => "housekeeping".into(),
            Role::Tenant(n) => format!("tenant:{n}"),
        }
    }
}

/// Everything the picture marks: roles per PU, interrupt routing, the VM's memory per node
/// and its devices.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    /// The title line.
    pub title: String,
    pub roles: BTreeMap<u32, Vec<Role>>,
    /// CPUs the VM's device interrupts (VFIO vectors) go to.
    pub vfio_irq_cpus: CpuSet,
    /// CPUs every other movable interrupt goes to.
    pub host_irq_cpus: CpuSet,
    /// Node → (bytes, page size in KiB, pages) of the VM's memory.
    pub memory: BTreeMap<u32, (u64, u64, u64)>,
    /// BDFs passed through to the VM.
    pub devices: Vec<String>,
    /// BDFs of tenants' devices, with the tenant's name.
    pub tenant_devices: BTreeMap<String, String>,
}

impl Marks {
    /// The host alone.
    pub fn host(host: &Host) -> Marks {
        Marks {
            title: format!("Host {}", host.name.as_deref().unwrap_or(&host.source)),
            ..Marks::default()
        }
    }

    /// A plan on its host, with the tenants it was planned among.
    pub fn plan(plan: &Plan, host: &Host, tenants: &[Tenant]) -> Marks {
        let mut m = Marks::host(host);
        let name = plan.request.name.as_deref().unwrap_or("vm");
        m.title = format!(
            "vmtune plan: {name} on {} — {} vCPUs, {}",
            host.name.as_deref().unwrap_or(&host.source),
            plan.vcpus.len(),
            plan::memory::human_bytes(plan.request.memory_bytes)
        );
        for t in tenants {
            for c in t.cpus.iter() {
                m.add(c, Role::Tenant(t.name.clone()));
            }
            for d in &t.devices {
                m.tenant_devices.insert(d.clone(), t.name.clone());
            }
        }
        for c in plan.host_cpus.iter() {
            m.add(c, Role::Housekeeping);
        }
        for c in plan.emulator_cpus.iter() {
            m.add(c, Role::Emulator);
        }
        for c in plan.iothread_cpus.iter() {
            m.add(c, Role::Iothread);
        }
        for p in &plan.vcpus {
            m.add(p.cpu, Role::Vcpu(p.vcpu));
        }
        m.vfio_irq_cpus = plan.irq.vfio_cpus.clone();
        m.host_irq_cpus = plan.irq.host_cpus.clone();
        let mem = &plan.memory;
        let page_bytes = mem.hugepage_size_kb * 1024;
        for (i, node) in mem.host_nodes.iter().enumerate() {
            let pages = mem.pages_per_node.get(i).copied().unwrap_or(0);
            let bytes = if mem.hugepage_size_kb > 4 && pages > 0 {
                pages * page_bytes
            } else {
                plan.request.memory_bytes / mem.host_nodes.len().max(1) as u64
            };
            m.memory.insert(*node, (bytes, mem.hugepage_size_kb, pages));
        }
        m.devices = plan.devices.iter().map(|d| d.bdf.clone()).collect();
        m
    }

    fn add(&mut self, cpu: u32, role: Role) {
        let v = self.roles.entry(cpu).or_default();
        if !v.contains(&role) {
            v.push(role);
            v.sort();
        }
    }

    /// Whether anything of the plan touches these CPUs.
    fn touches(&self, cpus: &CpuSet) -> bool {
        cpus.iter().any(|c| {
            self.roles.contains_key(&c)
                || self.vfio_irq_cpus.contains(c)
                || self.host_irq_cpus.contains(c)
        })
    }
}

/// The picture as a standalone SVG document.
pub fn svg(host: &Host, marks: &Marks) -> String {
    draw::svg(host, marks)
}
