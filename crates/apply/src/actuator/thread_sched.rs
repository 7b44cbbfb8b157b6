//! Scheduling attributes of one thread (`sched_setattr`): policy, nice, real-time priority
//! and EEVDF slice, in [`crate::sched::SchedState`]'s spelling.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{thread_gone, Actuator, Outcome, Verified};
use crate::error::{libc_errno, ApplyError, Result};
use crate::sched::{self, SchedState};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadSched {
    pub pid: i32,
    pub tid: i32,
    pub start_time: u64,
    pub role: String,
    pub proc_root: PathBuf,
}

impl Actuator for ThreadSched {
    fn describe(&self) -> String {
        format!(
            "scheduling of QEMU {} thread {} ({})",
            self.pid, self.tid, self.role
        )
    }

    fn read_current(&self) -> Result<String> {
        let tid = self.tid;
        sched::get(tid, sched::base_slice_ns())
            .map(|s| s.to_value())
            .map_err(|e| ApplyError::io(format!("sched_getattr(thread {tid})"), e))
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        set_sched(self.tid, new)
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = SchedState::parse(&observed).ok() == SchedState::parse(new).ok();
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        if let Some(skip) = thread_gone(&self.proc_root, self.pid, self.tid, self.start_time) {
            return Ok(skip);
        }
        set_sched(self.tid, previous)
    }
}

/// `sched_setattr` of a journal value; a thread that exited is skipped.
fn set_sched(tid: i32, value: &str) -> Result<Outcome> {
    let st =
        SchedState::parse(value).map_err(|m| ApplyError::parse(Path::new("thread_sched"), m))?;
    match sched::set(tid, &st) {
        Ok(()) => Ok(Outcome::Done(None)),
        Err(e) if e.raw_os_error() == Some(libc_errno::ESRCH) => {
            Ok(Outcome::Skipped(format!("thread {tid} exited")))
        }
        Err(e) => Err(ApplyError::io(
            format!("sched_setattr(thread {tid}, {value})"),
            e,
        )),
    }
}
