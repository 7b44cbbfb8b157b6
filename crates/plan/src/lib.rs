//! The placement planner: a pure function of (request, host model, tenants) → [`Plan`].
//!
//! Nothing here touches the filesystem; the CLI reads files and hands the planner values.
//! The types in this file are the `plan --json` contract (see DESIGN.md) that `emit`, `apply`
//! and users' scripts read.
//!
//! ```text
//! Request, Host, [Tenant]
//!   └─ context::Context::new   the facts every stage reads, computed once: cores (model),
//!                              housekeeping CPUs kept from the tenants (housekeeping),
//!                              devices (devices), memory (memory), tenants' CPUs (tenant)
//!                              — refusals start here
//!   └─ select::best_placement  node set + whole cores minimizing cost::Cost, exactly; then
//!                              the emulator core (emulator)
//!   └─ plan::plan              pins and guest topology/NUMA (topology), pages per node
//!                              (memory), IRQ routing, CPU features and timers (features)
//!   └─ rationale::write        the "Why" list, from the finished decisions (where each
//!                              sentence is born: the `rationale` module's doc)
//! ```
//!
//! Modules depend downwards only: `model` (plain data) ← `housekeeping`, `devices`, `memory`
//! ← `tenant` ← `context` ← `cost`, `emulator` ← `select` ← `topology` ← `rationale` ←
//! `plan` (`features` beside them, on `memory` and `model`).
//!
//! The cost function ([`cost::Cost`], [`cost::score`]) and the emulator rule
//! ([`emulator::choose`]) are public so the exhaustive oracle in `tests/oracle.rs` minimizes
//! the very same function the planner does and checks the emulator against the rule.

pub mod context;
pub mod cost;
pub mod definition;
mod devices;
pub mod emulator;
mod features;
mod fold;
pub mod housekeeping;
pub mod layouts;
pub mod memory;
pub mod model;
mod plan;
mod rationale;
pub mod select;
mod tenant;
mod topology;

use serde::{Deserialize, Serialize};
use topo::CpuSet;

pub use crate::features::{
    adopt_domain, DomainChoices, DomainEnlightenment, DomainTimer, VENDOR_ID,
};
pub use crate::fold::{
    fold_target, folded_cell_attrs, guest_cell_ids, same_cells, DomainCell, DomainMemoryDevice,
    DomainNumatune, DomainPage,
};
pub use crate::plan::{plan, plan_for, plan_on};
pub use crate::tenant::taken_cpus;

/// The least guest memory a plan accepts: firmware and a kernel do not boot in less (the
/// boot estimator's floor too).
pub const MIN_MEMORY_BYTES: u64 = 64 << 20;

/// What is being placed. A VM has QEMU's emulator and iothreads beside its vCPUs and gets a
/// core for them; a container (the NRI node agent's exclusive-CPU containers) is only its
/// CPUs. Everything else — nodes, whole cores, L3 groups, housekeeping, devices, memory — is
/// decided the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    #[default]
    Vm,
    Container,
}

/// What the VM is for: shapes NUMA and SMT decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Desktop VFIO gaming: low latency, single node, whole cores, host cores kept away.
    #[default]
    Gaming,
    /// GPU compute: single node near the GPUs.
    Compute,
    /// CPU-side memory bandwidth: span nodes and expose guest NUMA (r/VFIO pinning benchmark: STREAM 2–7x).
    Membw,
    /// Multi-GPU collectives through host memory: keep GPUs and memory on one node where
    /// possible; guest NUMA hurt NCCL in the r/VFIO pinning benchmark.
    Collective,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuestOs {
    #[default]
    Linux,
    Windows,
    Windows7,
}

/// Hugepage policy of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HugepagePolicy {
    /// 1G where enough free 1G pages, else 2M, else 4K with a warning.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "none")]
    None,
    #[serde(rename = "2M")]
    Size2M,
    #[serde(rename = "1G")]
    Size1G,
}

/// How vCPUs share SMT cores (`plan --threads`): the choice Nova exposes as
/// `hw:cpu_thread_policy` and the kubelet as `full-pcpus-only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadPolicy {
    /// The planner decides ([`Threads`] in the plan says what): one vCPU per core when the
    /// profile gains from it and the host has the free cores, else sibling pairs.
    #[default]
    Auto,
    /// vCPUs on every thread of their cores (vCPU 2k, 2k+1 on one core's siblings).
    Pack,
    /// One vCPU per core, the siblings left idle; refused when the free cores are too few.
    Spread,
}

/// What a plan decided about SMT siblings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Threads {
    /// Every thread of a guest core runs a vCPU.
    #[default]
    Pack,
    /// One vCPU per core; the other threads of its cores stay idle (`Plan::idle_cpus`).
    Spread,
}

/// What the user asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// VM name, if known (used in emitted XML and reports).
    pub name: Option<String>,
    pub vcpus: u32,
    pub memory_bytes: u64,
    /// Passed-through devices as given (BDFs); the planner adds the other functions of
    /// multi-function devices.
    pub devices: Vec<String>,
    pub profile: Profile,
    pub os: GuestOs,
    pub hugepages: HugepagePolicy,
    /// Override of the host housekeeping CPUs.
    pub host_cpus: Option<CpuSet>,
    /// Accept moving the host housekeeping CPUs away from those the tenants were planned
    /// with (or off the default first core a tenant pins); refused otherwise.
    #[serde(default)]
    pub move_host_cpus: bool,
    /// SMT siblings: auto (the planner decides), pack, spread.
    #[serde(default)]
    pub threads: ThreadPolicy,
}

/// Another VM already on the host: its pinned CPUs, hugepages and devices are taken.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    pub name: String,
    /// Host CPUs the tenant pins (vCPUs, emulator, iothreads).
    pub cpus: CpuSet,
    /// Of `cpus`, those only its emulator and iothreads use: where they are the host's
    /// housekeeping CPUs they are shared with the host, not taken.
    #[serde(default)]
    pub emulator_cpus: CpuSet,
    /// The housekeeping CPUs the tenant was planned with (plan JSON); `None` where unknown
    /// (a libvirt domain). Later plans keep them.
    #[serde(default)]
    pub host_cpus: Option<CpuSet>,
    /// Devices it has (normalized BDFs).
    pub devices: Vec<String>,
    /// Hugepages it holds.
    pub hugepages: Vec<TenantHugepages>,
    /// What the reader had to assume (a nodeset of several nodes split evenly, …); the
    /// planner repeats these in its rationale.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantHugepages {
    /// Host node, or `None` when the tenant did not say: the planner then counts the pages
    /// once, on the nodes of the tenant's CPUs, else spread evenly over the host's nodes, and
    /// says which it assumed.
    pub node: Option<u32>,
    pub size_kb: u64,
    pub pages: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPin {
    pub vcpu: u32,
    /// Host PU os_index.
    pub cpu: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestTopology {
    pub sockets: u32,
    pub dies: u32,
    pub cores: u32,
    pub threads: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestNumaCell {
    pub cell: u32,
    /// vCPU numbers in this cell.
    pub vcpus: CpuSet,
    pub memory_bytes: u64,
    pub host_nodes: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    pub host_nodes: Vec<u32>,
    /// 4 (no hugepages), 2048 or 1048576.
    pub hugepage_size_kb: u64,
    /// Pages of `hugepage_size_kb` (0 with 4K pages).
    pub pages: u64,
    /// Pages per host node, in `host_nodes` order.
    pub pages_per_node: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqPlan {
    /// Where the passed-through devices' interrupts go (guest CPUs).
    pub vfio_cpus: CpuSet,
    /// Where every other movable interrupt goes.
    pub host_cpus: CpuSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedDevice {
    pub bdf: String,
    pub kind: topo::DeviceKind,
    pub numa: Option<Vec<u32>>,
    pub iommu_group: Option<u32>,
    /// With several guest NUMA cells: the cell the device sits in, behind a PCIe expander
    /// bus bound to it (libvirt `pcie-expander-bus` `<node>`, QEMU `pxb-pcie,numa_node=`),
    /// so the guest reads it as the device's `numa_node`: the cell holding the device's host
    /// node, else the nearest. `None` with one cell (every device is local to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_cell: Option<u32>,
}

/// Guest CPU features and timers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFeatures {
    /// Hyper-V enlightenments to enable (libvirt `<hyperv>` element names; `spinlocks=N`,
    /// `vendor_id=VALUE` carry a value; `stimer_direct`, `tlbflush_direct`,
    /// `tlbflush_extended` are libvirt's `<direct>`/`<extended>` sub-elements).
    pub hyperv: Vec<String>,
    /// Enlightenments an existing domain turns off and the plan keeps off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hyperv_off: Vec<String>,
    /// The domain's `<hyperv mode='passthrough'>` is kept: the guest gets every enlightenment
    /// the host supports (QEMU `hv-passthrough`), a superset of `hyperv`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hyperv_passthrough: bool,
    /// Expose invariant TSC (host TSC is stable).
    pub invtsc: bool,
    /// An existing domain disables invtsc (`<feature policy='disable' name='invtsc'/>`) and
    /// the plan keeps it so: emitted as disabled, not merely left out (host-passthrough with
    /// `migratable='off'` would pass it through).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invtsc_disabled: bool,
    /// Hide the hypervisor CPUID bit (Windows 7 timer note; Windows 7 only).
    pub hide_hypervisor: bool,
    /// Hide the KVM signature (`<kvm><hidden state='on'/>`).
    pub kvm_hidden: bool,
    /// Guest timers (libvirt `<clock><timer name present tickpolicy/>`).
    #[serde(default)]
    pub timers: Vec<Timer>,
}

/// One guest timer (`rtc`, `pit`, `hpet`, `hypervclock`, `kvmclock`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer {
    pub name: String,
    pub present: bool,
    pub tickpolicy: Option<String>,
}

/// The placement decision. See DESIGN.md for the JSON contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub request: Request,
    /// Where the host model came from.
    pub host_source: String,
    pub vcpus: Vec<VcpuPin>,
    /// Sibling pairs or one vCPU per core (what `Request::threads` came to).
    #[serde(default)]
    pub threads: Threads,
    /// Threads of the guest's cores that no vCPU runs on (`Threads::Spread`): kept idle, the
    /// VM's as much as its vCPUs' threads are; no host or tenant work goes there.
    #[serde(default, skip_serializing_if = "CpuSet::is_empty")]
    pub idle_cpus: CpuSet,
    pub emulator_cpus: CpuSet,
    pub iothread_cpus: CpuSet,
    pub host_cpus: CpuSet,
    pub guest_topology: GuestTopology,
    pub guest_numa: Vec<GuestNumaCell>,
    pub memory: MemoryPlan,
    pub devices: Vec<PlannedDevice>,
    pub irq: IrqPlan,
    pub cpu_features: CpuFeatures,
    /// How the host schedules the vCPU threads beyond where they run; absent: as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_sched: Option<VcpuSched>,
    pub rationale: Vec<String>,
    pub warnings: Vec<String>,
}

/// Scheduling of the vCPU threads on the host (`vmtune plan --vcpu-slice-us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuSched {
    /// EEVDF slice of each vCPU thread (`sched_attr.sched_runtime`, Linux 6.12+), µs.
    pub slice_us: u32,
}

impl Plan {
    /// Host CPUs the guest's vCPUs run on.
    pub fn guest_cpus(&self) -> CpuSet {
        self.vcpus.iter().map(|v| v.cpu).collect()
    }

    /// Every host CPU this plan pins something to (vCPUs, emulator, iothreads): what a later
    /// plan must treat as taken when this one is a tenant.
    pub fn pinned_cpus(&self) -> CpuSet {
        self.guest_cpus()
            .union(&self.emulator_cpus)
            .union(&self.iothread_cpus)
    }

    /// Every host CPU the VM holds: what it pins and the idle siblings of its cores.
    pub fn held_cpus(&self) -> CpuSet {
        self.pinned_cpus().union(&self.idle_cpus)
    }
}

/// Why no plan could be made. One sentence each, saying what would fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Refused(String),
}
