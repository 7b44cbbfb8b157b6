//! CPU affinity of one QEMU thread (`sched_setaffinity`), in list spelling. A thread that
//! exited, or whose id now names another thread, is skipped on rollback.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{same_cpus, set_thread_cpus, thread_gone, Actuator, Outcome, Verified};
use crate::error::Result;
use crate::proc;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Thread {
    pub pid: i32,
    pub tid: i32,
    pub start_time: u64,
    /// `vcpu 3`, `emulator`, `iothread iothread0`.
    pub role: String,
    /// Where /proc is (to read the thread back).
    pub proc_root: PathBuf,
}

impl Actuator for Thread {
    fn describe(&self) -> String {
        format!(
            "affinity of QEMU {} thread {} ({})",
            self.pid, self.tid, self.role
        )
    }

    fn read_current(&self) -> Result<String> {
        proc::thread_cpus(&self.proc_root, self.pid, self.tid)
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        set_thread_cpus(self.tid, new)
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = same_cpus(&observed, new);
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        if let Some(skip) = thread_gone(&self.proc_root, self.pid, self.tid, self.start_time) {
            return Ok(skip);
        }
        set_thread_cpus(self.tid, previous)
    }
}
