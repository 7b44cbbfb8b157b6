//! The planner's view of the host's cores, devices and what the tenants hold: plain data that
//! every stage reads and none owns. It sits at the bottom of the crate so that housekeeping,
//! devices, tenants, memory, the context, the cost function and the search each depend on it
//! and on nothing above them.

use std::collections::BTreeMap;

use topo::CpuSet;

/// What the planner knows about one core, computed once per plan.
#[derive(Debug, Clone)]
pub struct CoreInfo {
    /// Index into the context's core list (= the host model's core id).
    pub id: u32,
    pub pus: Vec<u32>,
    /// Node key (the Linux node id; 0 where the host has no NUMA information).
    pub node: u32,
    pub l3: Option<u32>,
    /// The L2 group, only where several cores share it (an E-core cluster, a module); a
    /// core's own L2 can never be shared and is `None` here.
    pub l2: Option<u32>,
    /// Rank of the core's kind on a hybrid part: 0 the fastest kind (and every core of a
    /// non-hybrid part), 1 the next, …
    pub kind: u32,
    /// Neither the host's housekeeping nor any tenant's exclusive CPUs are on this core.
    pub free: bool,
    /// Its L3 group holds housekeeping or tenant CPUs.
    pub l3_busy: bool,
    /// Its (shared) L2 group holds housekeeping or tenant CPUs.
    pub l2_busy: bool,
}

/// A passed-through device as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub bdf: String,
    /// Nodes local to the device; `None` where unknown.
    pub nodes: Option<Vec<u32>>,
}

/// What the tenants hold, as the planner counts it.
#[derive(Debug, Clone, Default)]
pub struct Holdings {
    /// Every CPU some tenant pins.
    pub cpus: CpuSet,
    /// node → page size (KiB) → pages held there. Hosts without NUMA information key
    /// everything to node 0.
    pub pages: BTreeMap<u32, BTreeMap<u64, u64>>,
    pub rationale: Vec<String>,
    pub warnings: Vec<String>,
}

impl Holdings {
    /// Pages of `size_kb` tenants hold on `node`.
    pub fn pages_on(&self, node: u32, size_kb: u64) -> u64 {
        self.pages
            .get(&node)
            .and_then(|m| m.get(&size_kb))
            .copied()
            .unwrap_or(0)
    }

    /// Bytes of hugepages tenants hold on `node`.
    pub fn bytes_on(&self, node: u32) -> u64 {
        self.pages.get(&node).map_or(0, |m| {
            m.iter()
                .map(|(kb, n)| n.saturating_mul(kb.saturating_mul(1024)))
                .fold(0u64, u64::saturating_add)
        })
    }
}
