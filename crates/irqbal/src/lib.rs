//! vBalance-style interrupt balancing for KVM guests and hosts.
//!
//! ```text
//! /proc/stat ──► procstat ─┐                     ┌──► /proc/irq/N/smp_affinity_list
//! /proc/interrupts ────────┼─► observe ─► policy ┤
//! steal, preempted flag ───┘   (load)    (pure)  └──► decisions (log, JSON)
//! ```
//!
//! - [`policy`]: Algorithm 1 of the vBalance paper and its many-to-many extension, a pure
//!   function of per-vCPU status/load and the IRQ map. The `sim` crate drives the same code.
//! - [`procstat`]: the `/proc/stat` parser (per-CPU time fields, including steal).
//! - [`load`]: turning cumulative counters into windowed rates.
//! - [`daemon`]: the guest-mode and host-mode I/O shells around the policy.

pub mod avail;
pub mod daemon;
pub mod ebpf;
pub mod host;
pub mod load;
pub mod moves;
pub mod policy;
pub mod procstat;
pub mod wait;

pub use policy::{
    algorithm1, Decision, IrqView, Mapping, MoveKind, Placement, Policy, PolicyConfig, Reason,
    Snapshot, Vcpu, VcpuView,
};

/// Errors of this crate; each names the file or thing and the problem.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad policy configuration: {0}")]
    Config(String),
    #[error("{path}: {msg}")]
    Parse { path: String, msg: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
