//! The plan's "Why" list (`Plan.rationale`): one sentence per decision, in the order a reader
//! follows the host through the plan. [`write()`] renders it once, from the finished decisions
//! ([`Decisions`]); `plan_for` only decides.
//!
//! Where each sentence is born, in the list's order:
//!
//! 1. what each tenant holds, and where its hugepages were assumed to be:
//!    `tenant::account` (`Holdings.rationale`);
//! 2. the housekeeping CPUs (kept, requested, moved or chosen): `housekeeping::choose`;
//! 3. a host model without a NUMA distance matrix: `Context::new` (context.rs);
//! 4. devices that go with a requested one (same slot, same IOMMU group): `devices::resolve`;
//!
//!    (1–4 are bound to the checks that refuse a request, and reach here as
//!    `Context.rationale`)
//! 5. the node(s), then the L3 and L2 groups, the guest's cores, their kinds on a hybrid
//!    part, cores without an L3 and idle siblings: [`placement`], from the [`Placement`];
//! 6. the emulator and iothread CPUs (or none, for a container): [`placement`];
//! 7. the memory's split over the nodes: [`guest`]; then its page size, rounding and the
//!    host reserve: `MemoryModel::decide` (memory.rs, `MemoryDecision.rationale`), which
//!    writes them beside the page-size and reserve checks they explain;
//! 8. the guest's NUMA cells, the cell of each device, threads per core and sockets:
//!    [`guest`], from [`NumaShape`] and [`SmtFit`], the records `topology` keeps of why;
//! 9. where the interrupts go: [`guest`];
//! 10. the CPU features and timers: `features::choose` (features.rs), bound to each
//!     feature's choice and rewritten by `adopt_domain` when a libvirt domain is given.

mod guest;
mod placement;

use topo::CpuSet;

use crate::context::Context;
use crate::memory::MemoryDecision;
use crate::select::{Placement, ThreadChoice};
use crate::topology::{GuestNuma, NumaShape, SmtFit};
use crate::{GuestTopology, IrqPlan, PlannedDevice};

/// Every decision of a plan the "Why" list speaks of.
pub struct Decisions<'a> {
    /// The facts, with the sentences born while gathering them.
    pub ctx: &'a Context,
    pub placement: &'a Placement,
    /// The host CPUs of `pins`.
    pub guest_cpus: &'a CpuSet,
    /// Empty for a container.
    pub emulator_cpus: &'a CpuSet,
    pub memory: &'a MemoryDecision,
    pub numa: &'a GuestNuma,
    pub topology: &'a GuestTopology,
    pub smt: SmtFit,
    /// Sibling pairs or a core per vCPU, and why.
    pub threads: &'a ThreadChoice,
    pub irq: &'a IrqPlan,
    /// The devices as planned, with their guest cells.
    pub devices: &'a [PlannedDevice],
    /// The sentences `features::choose` wrote.
    pub features: &'a [String],
}

/// The "Why" list of a plan.
pub fn write(d: &Decisions) -> Vec<String> {
    let mut out = d.ctx.rationale.clone();
    out.push(placement::nodes(d.ctx, d.placement));
    placement::cores(d, &mut out);
    out.push(placement::emulator(d));
    out.push(guest::memory(d.memory));
    out.extend(d.memory.rationale.iter().cloned());
    out.push(guest::numa(d));
    out.extend(guest::device_cells(d));
    out.extend(guest::topology(d));
    out.push(guest::irq(d));
    out.extend(d.features.iter().cloned());
    out
}
