//! vmtune as a Kubernetes Dynamic Resource Allocation (DRA, `resource.k8s.io/v1`) driver:
//! the node's VFIO GPUs and the CPU groups the planner hands out, published as
//! ResourceSlices, so the stock kube-scheduler binds a pod that asks for "a GPU and N CPUs on
//! its NUMA node" only to a node that can give them.
//!
//! ```text
//! topo::Host ──inventory()──► Inventory ──render::slices()──► ResourceSlices ──publish::sync()──► API server
//!   (+ node name, housekeeping,  GPUs (cdi's VFIO set),          vfio.vmtune.io pool          list, create/replace,
//!    CPUs taken outside DRA)     CPU groups (whole cores)        cpu.vmtune.io pool           delete; generation + 1
//!                                                ▲
//!          nri::report::Status ──taken_outside_dra()──► Republisher::taken_changed()
//! ```
//!
//! * [`inventory()`] — what the node offers (the decisions); [`render`] — the objects;
//!   [`objects`] — the `resource.k8s.io/v1` types as serde structs.
//! * [`publish`] — the API server client (HTTPS, bearer token) and the sync of one node's
//!   slices; [`Republisher`] — when CPUs taken outside DRA change, the slices to write.
//!
//! It publishes capacity, not what is free: the scheduler subtracts what its claims consume.
//! Only CPUs taken outside DRA (exclusive containers without a claim, Kata emulator cores)
//! lower a group's capacity.

pub mod inventory;
pub mod objects;
pub mod publish;
pub mod render;

pub use inventory::{inventory, CpuGroup, CpuGroups, Gpu, GpuSelect, Inventory, Options, Taken};
pub use objects::{DeviceClass, ResourceSlice};
pub use render::{classes, slices as render_slices};

use topo::Host;

/// The driver of the GPU pool.
pub const GPU_DRIVER: &str = "vfio.vmtune.io";
/// The driver of the CPU pool.
pub const CPU_DRIVER: &str = "cpu.vmtune.io";
/// The standard attribute names (k8s.io/dynamic-resource-allocation v0.37.2,
/// `deviceattribute`): the NUMA node (an int; absent where a device has no NUMA affinity),
/// the PCIe root (a string, `pci0000:00`) and the PCI address.
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
/// The CPU groups' consumable capacity, in CPUs.
pub const CPUS: &str = "cpu.vmtune.io/cpus";

/// What stops the slices from being made or written: one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum DraError {
    #[error("node name {0:?} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 233 characters)")]
    NodeName(String),
    /// The host model cannot give what the slices need.
    #[error("{0}")]
    Host(String),
    /// The NRI agent's status file cannot be read.
    #[error("{0}")]
    Status(String),
    /// The API server could not be reached, or its answer not read.
    #[error("{0}")]
    Http(String),
    /// The API server refused a request.
    #[error("{method} {path}: {code} {message}")]
    Api {
        method: String,
        path: String,
        code: u16,
        message: String,
    },
    /// The client's configuration (token, CA, server address).
    #[error("{0}")]
    Config(String),
}

/// What a node would publish: the slices, and the inventory they were made from.
#[derive(Debug, Clone)]
pub struct Published {
    pub slices: Vec<ResourceSlice>,
    pub inventory: Inventory,
}

/// The slices `host` publishes as node `opts.node_name`.
pub fn slices(host: &Host, opts: &Options) -> Result<Published, DraError> {
    let inventory = inventory(host, opts)?;
    Ok(Published {
        slices: render::slices(&inventory, opts.generation),
        inventory,
    })
}

/// Objects as one JSON document: a `v1` `List` (what `kubectl apply -f` takes).
pub fn to_json<T: serde::Serialize>(items: &[T]) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
}

/// Objects as a YAML stream, one document each.
pub fn to_yaml<T: serde::Serialize>(items: &[T]) -> String {
    items
        .iter()
        .map(|o| serde_yaml_ng::to_string(o).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// What the NRI agent holds for containers it placed outside DRA: the CPUs of every
/// exclusive allocation and every Kata VM's emulator core, and the PCI devices those
/// containers hold. (Until the node half hands a claim's CPU group to the NRI half, the agent
/// cannot tell a claim's container from one without; so a container with a claim that the
/// agent also pins counts here too.)
pub fn taken_outside_dra(status: &nri::report::Status) -> Taken {
    let mut t = Taken::default();
    for a in &status.allocations {
        t.cpus = t.cpus.union(&a.cpus).union(&a.emulator_cpus);
        t.devices.extend(a.devices.iter().cloned());
    }
    t
}

/// [`taken_outside_dra`] of the NRI agent's status file (`status.json` in its state
/// directory); a missing file is an agent that has placed nothing yet.
pub fn taken_from_status_file(path: &std::path::Path) -> Result<Taken, DraError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Taken::default()),
        Err(e) => return Err(DraError::Status(format!("{}: {e}", path.display()))),
    };
    let status: nri::report::Status = serde_json::from_str(&text).map_err(|e| {
        DraError::Status(format!(
            "{}: not the NRI agent's status file: {e}",
            path.display()
        ))
    })?;
    Ok(taken_outside_dra(&status))
}

/// The NRI half's hook: it holds the node's model and options, and says which slices to
/// write when the CPUs taken outside DRA change (and only then), with the pool generation
/// bumped.
#[derive(Debug, Clone)]
pub struct Republisher {
    host: Host,
    opts: Options,
    current: Vec<ResourceSlice>,
}

impl Republisher {
    /// The first slices are made at once; [`Republisher::current`] returns them.
    pub fn new(host: Host, opts: Options) -> Result<Republisher, DraError> {
        let current = slices(&host, &opts)?.slices;
        Ok(Republisher {
            host,
            opts,
            current,
        })
    }

    pub fn current(&self) -> &[ResourceSlice] {
        &self.current
    }

    pub fn node_name(&self) -> &str {
        &self.opts.node_name
    }

    pub fn generation(&self) -> i64 {
        self.opts.generation
    }

    /// The slices to publish now that `taken` is held outside DRA; `None` when the slices
    /// stay what they are (nothing changed, or nothing a group or GPU offers).
    pub fn taken_changed(&mut self, taken: &Taken) -> Option<&[ResourceSlice]> {
        if *taken == self.opts.taken {
            return None;
        }
        let mut opts = self.opts.clone();
        opts.taken = taken.clone();
        let inv = inventory(&self.host, &opts).ok()?;
        let same = render::slices(&inv, opts.generation);
        self.opts.taken = taken.clone();
        if same == self.current {
            return None;
        }
        self.opts.generation += 1;
        self.current = render::slices(&inv, self.opts.generation);
        Some(&self.current)
    }

    /// Continue from the generation the API server holds (a restarted publisher): the next
    /// change is written above it.
    pub fn resume_from(&mut self, generation: i64) {
        if generation >= self.opts.generation {
            self.opts.generation = generation;
            self.current = self
                .current
                .iter()
                .cloned()
                .map(|mut s| {
                    s.spec.pool.generation = generation;
                    s
                })
                .collect();
        }
    }
}
