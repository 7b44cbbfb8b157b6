//! vmtune actuators with a crash-safe journal: thread pinning, IRQ affinity, cpusets,
//! hugepages.
//!
//! ```text
//! Plan ──► engine::plan_steps (observe + validate, nothing changed)
//!              │ ordered steps: hugepages, QEMU threads, IRQs, default IRQ affinity,
//!              ▼                workqueue mask, cpuset shielding
//!          engine::apply ── for each step: journal.intend (fsync) → actuator.apply → verify
//!                                          → journal.outcome
//!          engine::restore ── journal walked backwards: actuator.rollback(previous)
//! ```
//!
//! Every actuator (`actuator/`, one file each) implements [`actuator::Actuator`] (describe,
//! read_current, apply, verify, rollback); a [`step::Target`] holds one and is stored in the
//! journal, so a restore needs nothing but the journal:
//! also after a crash or `kill -9` in the middle of an apply. One `flock` (`lock` next to the
//! journal) keeps applies and restores from interleaving.

pub mod actuator;
pub mod engine;
pub mod error;
pub mod hook;
pub mod hugepages;
pub mod irq;
pub mod journal;
pub mod libvirt;
pub mod proc;
pub mod qemu;
pub mod sched;
pub mod shield;
pub mod step;

pub use engine::{
    apply, restore, restore_dry_run, watch, ApplyOptions, ApplyReport, HostPaths, Phases, QemuRef,
    RestoreReport, StepReport,
};
pub use error::ApplyError;
pub use journal::DEFAULT_JOURNAL;

/// Environment variable of the crash-injection test hook: `VMTUNE_CRASH_AFTER_STEP=N` makes
/// `vmtune apply` SIGKILL itself right after step N's change, before recording its outcome.
pub const CRASH_ENV: &str = "VMTUNE_CRASH_AFTER_STEP";
