//! Tasks moved into a cgroup (CPU shielding). Values are `origin` and the destination path;
//! a rollback moves each task that still exists back to the cgroup it came from and puts its
//! threads' affinity back (cpuset attach rewrites it).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{same_cpus, Actuator, Outcome, Verified};
use crate::error::{libc_errno, write_value, Result};
use crate::proc;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupTasks {
    pub dest: PathBuf,
    pub procs_file: String,
    pub tasks: Vec<MovedTask>,
    pub proc_root: PathBuf,
}

/// A task moved between cgroups, with what is needed to put it back exactly.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MovedTask {
    /// Thread id (cgroup v1 `tasks`) or process id (v2 `cgroup.procs`).
    pub id: i32,
    /// `starttime` from /proc/ID/stat, to tell a reused id from the original task.
    pub start_time: u64,
    /// The cgroup directory it came from.
    pub from: PathBuf,
    /// Each thread's `Cpus_allowed_list` before the move (cpuset attach rewrites it).
    pub threads: Vec<ThreadCpus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadCpus {
    pub tid: i32,
    pub cpus: String,
}

impl Actuator for CgroupTasks {
    fn describe(&self) -> String {
        format!(
            "move {} host tasks into {}",
            self.tasks.len(),
            self.dest.display()
        )
    }

    fn read_current(&self) -> Result<String> {
        Ok("origin".into())
    }

    fn apply(&self, _new: &str) -> Result<Outcome> {
        let file = self.dest.join(&self.procs_file);
        let (mut moved, mut skipped) = (0usize, 0usize);
        for t in &self.tasks {
            if !proc::task_alive(&self.proc_root, t.id, t.start_time) {
                skipped += 1;
                continue;
            }
            match write_value(&file, &t.id.to_string()) {
                Ok(()) => moved += 1,
                // exited meanwhile, or a kernel thread bound to CPUs
                Err(e)
                    if matches!(
                        e.errno(),
                        Some(libc_errno::ESRCH) | Some(libc_errno::EINVAL)
                    ) =>
                {
                    skipped += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Outcome::Done(Some(format!(
            "moved {moved} tasks, {skipped} skipped (exited or not movable)"
        ))))
    }

    fn verify(&self, _new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        Ok(Verified { ok: true, observed })
    }

    fn rollback(&self, _previous: &str) -> Result<Outcome> {
        let proc_root = &self.proc_root;
        let (mut back, mut gone) = (0usize, 0usize);
        for t in &self.tasks {
            if !proc::task_alive(proc_root, t.id, t.start_time) {
                gone += 1;
                continue;
            }
            let file = t.from.join(&self.procs_file);
            match write_value(&file, &t.id.to_string()) {
                Ok(()) => {}
                Err(e) if matches!(e.errno(), Some(libc_errno::ESRCH)) => {
                    gone += 1;
                    continue;
                }
                Err(e) if e.errno() == Some(libc_errno::EINVAL) => {}
                Err(e) => return Err(e),
            }
            back += 1;
            t.restore_thread_cpus(proc_root);
        }
        Ok(Outcome::Done(Some(format!(
            "moved {back} tasks back, {gone} had exited"
        ))))
    }
}

impl MovedTask {
    /// The process a moved task belongs to (its Tgid), for reading its threads back.
    fn id_pid(&self, proc_root: &Path) -> i32 {
        proc::tgid(proc_root, self.id).unwrap_or(self.id)
    }

    /// cpuset attach rewrote the affinity: put each thread's own mask back. Best effort.
    fn restore_thread_cpus(&self, proc_root: &Path) {
        for th in &self.threads {
            if let Ok(now) = proc::thread_cpus(proc_root, self.id_pid(proc_root), th.tid) {
                if !same_cpus(&now, &th.cpus) {
                    let _ = proc::set_thread_cpus(th.tid, &th.cpus);
                }
            }
        }
    }
}
