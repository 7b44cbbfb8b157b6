//! The actuators: one type per kind of thing vmtune changes on a host, each in its own file
//! with its apply / verify / rollback (the tuned model), and the [`Actuator`] contract they
//! fulfil. [`crate::step::Target`] holds one of them; it is what the journal stores, so a
//! rollback needs nothing but the journal (after a crash, in another process).
//!
//! Values are strings in the spelling of the file they belong to (`0-3,8` lists, `ff` masks,
//! page counts, cgroup paths).

pub mod cgroup_controller;
pub mod cgroup_dir;
pub mod cgroup_file;
pub mod cgroup_tasks;
pub mod hugepages;
pub mod irq;
pub mod libvirt_domain;
pub mod mask_file;
pub mod systemd_property;
pub mod thread;
pub mod thread_sched;

pub use self::cgroup_controller::CgroupController;
pub use self::cgroup_dir::CgroupDir;
pub use self::cgroup_file::CgroupFile;
pub use self::cgroup_tasks::{CgroupTasks, MovedTask, ThreadCpus};
pub use self::hugepages::Hugepages;
pub use self::irq::{Irq, IrqClass};
pub use self::libvirt_domain::LibvirtDomain;
pub use self::mask_file::MaskFile;
pub use self::systemd_property::SystemdProperty;
pub use self::thread::Thread;
pub use self::thread_sched::ThreadSched;

use topo::CpuSet;

use crate::error::{libc_errno, ApplyError, Result};

/// What `apply`/`rollback` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Changed (with an optional remark, e.g. hugepages got/asked).
    Done(Option<String>),
    /// Not changed, for an expected reason that does not fail the apply.
    Skipped(String),
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub ok: bool,
    pub observed: String,
}

/// apply / verify / rollback for one target (the tuned model).
pub trait Actuator {
    /// One line: what this changes.
    fn describe(&self) -> String;
    /// The value now.
    fn read_current(&self) -> Result<String>;
    /// Make the change.
    fn apply(&self, new: &str) -> Result<Outcome>;
    /// Read back and compare with what was asked.
    fn verify(&self, new: &str) -> Result<Verified>;
    /// Put the previous value back. Idempotent; a target that no longer exists is skipped.
    /// (A hugepage step that owns its pages is undone with [`Hugepages::give_back`]'s value.)
    fn rollback(&self, previous: &str) -> Result<Outcome>;
}

/// Two CPU lists name the same CPUs (compared as written when either does not parse).
pub(crate) fn same_cpus(a: &str, b: &str) -> bool {
    match (CpuSet::parse_list(a), CpuSet::parse_list(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Two hex masks name the same CPUs (compared as written when either does not parse).
pub(crate) fn same_mask(a: &str, b: &str) -> bool {
    match (CpuSet::parse_mask(a), CpuSet::parse_mask(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Done, or the error of a write.
fn done(r: Result<()>) -> Result<Outcome> {
    r.map(|()| Outcome::Done(None))
}

/// Write `previous` back to a file, skipping a file that no longer exists.
fn write_back(path: &std::path::Path, previous: &str) -> Result<Outcome> {
    if !path.exists() {
        return Ok(Outcome::Skipped(format!(
            "{} no longer exists",
            path.display()
        )));
    }
    done(crate::error::write_value(path, previous))
}

/// Set a thread's affinity; a thread that exited is skipped.
fn set_thread_cpus(tid: i32, cpus: &str) -> Result<Outcome> {
    match crate::proc::set_thread_cpus(tid, cpus) {
        Ok(()) => Ok(Outcome::Done(None)),
        Err(e) if e.errno() == Some(libc_errno::ESRCH) => {
            Ok(Outcome::Skipped(format!("thread {tid} exited")))
        }
        Err(e) => Err(e),
    }
}

/// A rollback of a thread that is gone (its id reused or free): `Some(skip)`.
fn thread_gone(proc_root: &std::path::Path, pid: i32, tid: i32, start: u64) -> Option<Outcome> {
    (!crate::proc::thread_alive(proc_root, pid, tid, start)).then(|| {
        Outcome::Skipped(format!(
            "thread {tid} of {pid} no longer exists (QEMU exited)"
        ))
    })
}

/// errno values the kernel uses to refuse an affinity change it will never accept
/// (managed IRQs, per-CPU interrupts, chips without affinity support).
fn is_refusal(e: &ApplyError) -> bool {
    matches!(e.errno(), Some(libc_errno::EIO) | Some(libc_errno::EPERM))
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc_errno::EIO => "EIO",
        libc_errno::EPERM => "EPERM",
        libc_errno::EINVAL => "EINVAL",
        libc_errno::ENOENT => "ENOENT",
        libc_errno::EBUSY => "EBUSY",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_compare_ignores_padding() {
        assert!(same_mask("00000000,00000003", "3"));
        assert!(!same_mask("1", "3"));
        assert!(same_cpus("0-1", "0,1"));
    }
}
