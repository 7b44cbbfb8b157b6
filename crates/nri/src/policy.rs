//! Where an exclusive container's CPUs go: asked of the planner, the same `plan::plan_for`
//! that `vmtune plan` runs, with every exclusive allocation on the node as a tenant.
//!
//! A container is planned as a [`plan::Workload::Container`]: whole cores, one L3 group where
//! it fits, SMT siblings together, never the housekeeping CPUs, on the node of its devices,
//! memory nodes with room for its limit — and no emulator core. The first exclusive container
//! of a Kata pod is planned as the VM it runs in ([`plan::Workload::Vm`]): Kata sizes that VM
//! to `default_vcpus` plus the containers' CPU limits and, with `enable_vcpus_pinning`, pins
//! vCPU *i* to the *i*-th CPU of the sandbox's cpuset only when the two counts are equal, so
//! the container's cpuset holds the VM's vCPU CPUs (its own CPUs and `default_vcpus` more)
//! and the emulator core the planner chose is kept free beside them (see docs/nri.md).

use topo::{CpuSet, Host};

use plan::{GuestOs, HugepagePolicy, PlanError, Profile, Request, Tenant, Workload};

/// A placement the planner made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub cpus: CpuSet,
    /// Memory nodes (empty where the host model has no NUMA information).
    pub mems: Vec<u32>,
    /// A Kata VM's emulator core, kept from everyone else (empty for a container, or where
    /// the planner put the emulator on the housekeeping CPUs).
    pub emulator_cpus: CpuSet,
    /// The housekeeping CPUs the plan kept.
    pub host_cpus: CpuSet,
    /// The planner's reasons for the nodes and cores, in its words.
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
}

/// What to place.
#[derive(Debug, Clone)]
pub struct Want<'a> {
    pub name: &'a str,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub devices: &'a [String],
    pub workload: Workload,
}

/// The planner's reasons that concern where this container's CPUs and memory go: its node,
/// L3, core, emulator and memory sentences. Left out: what it says of the host and the tenants
/// on every plan (the housekeeping CPUs, each tenant's CPUs, a missing distance matrix: the
/// agent logs those once, and `vmtune nri status` lists the tenants), and its sentences on
/// guest NUMA, CPU features and timers, a VM's configuration that the runtime decides.
fn placement_reasons(rationale: &[String]) -> Vec<String> {
    let end = rationale
        .iter()
        .position(|r| r.starts_with("host reserve") || r.starts_with("guest NUMA"))
        .unwrap_or(rationale.len());
    rationale[..end]
        .iter()
        .filter(|r| {
            !(r.starts_with("host CPUs")
                || r.starts_with("host housekeeping")
                || r.starts_with("tenant ")
                || r.starts_with("the host model has no NUMA distance"))
        })
        .cloned()
        .collect()
}

/// Plans `want` on `host` among `tenants`, keeping `host_cpus` for the host.
pub fn place(
    host: &Host,
    want: &Want,
    tenants: &[Tenant],
    host_cpus: Option<&CpuSet>,
) -> Result<Placement, PlanError> {
    let req = Request {
        name: Some(want.name.to_string()),
        vcpus: want.cpus,
        memory_bytes: want.memory_bytes.max(plan::MIN_MEMORY_BYTES),
        devices: want.devices.to_vec(),
        profile: if want.devices.is_empty() {
            Profile::Gaming
        } else {
            Profile::Compute
        },
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::None,
        host_cpus: host_cpus.cloned(),
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let p = plan::plan_for(&req, host, tenants, want.workload)?;
    let emulator_cpus = p.emulator_cpus.difference(&p.host_cpus);
    Ok(Placement {
        cpus: p.guest_cpus(),
        mems: p.memory.host_nodes.clone(),
        emulator_cpus,
        host_cpus: p.host_cpus.clone(),
        reasons: placement_reasons(&p.rationale),
        warnings: p.warnings.clone(),
    })
}

/// The housekeeping CPUs the planner keeps on an empty host (what `vmtune plan` keeps for
/// its first VM), or the operator's choice when it is valid.
pub fn housekeeping(host: &Host, reserved: Option<&CpuSet>) -> Result<CpuSet, PlanError> {
    let want = Want {
        name: "housekeeping probe",
        cpus: 1,
        memory_bytes: plan::MIN_MEMORY_BYTES,
        devices: &[],
        workload: Workload::Container,
    };
    place(host, &want, &[], reserved).map(|p| p.host_cpus)
}
