//! A cgroup directory vmtune creates. Values `absent`/`present`; undone by moving its
//! members back to the parent and removing it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Actuator, Outcome, Verified};
use crate::error::{libc_errno, write_value, ApplyError, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupDir {
    pub path: PathBuf,
    /// `tasks` (v1) or `cgroup.procs` (v2): how to empty it on rollback.
    pub procs_file: String,
}

impl Actuator for CgroupDir {
    fn describe(&self) -> String {
        format!("cgroup directory {}", self.path.display())
    }

    fn read_current(&self) -> Result<String> {
        Ok(if self.path.is_dir() {
            "present"
        } else {
            "absent"
        }
        .into())
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        if new == "present" {
            std::fs::create_dir(&self.path).map_err(|e| ApplyError::io(&self.path, e))?;
            Ok(Outcome::Done(None))
        } else {
            self.rollback("absent")
        }
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = observed == new;
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        if previous == "present" {
            return Ok(Outcome::Done(None));
        }
        remove_cgroup(&self.path, &self.procs_file).map(|()| Outcome::Done(None))
    }
}

/// Empty a cgroup into its parent and remove it. Idempotent.
pub fn remove_cgroup(path: &Path, procs_file: &str) -> Result<()> {
    let Some(parent) = path.parent() else {
        return Err(ApplyError::Other(format!(
            "{} has no parent cgroup",
            path.display()
        )));
    };
    for _ in 0..50 {
        if !path.exists() {
            return Ok(());
        }
        let members = std::fs::read_to_string(path.join(procs_file)).unwrap_or_default();
        for id in members.lines().filter(|l| !l.trim().is_empty()) {
            match write_value(&parent.join(procs_file), id.trim()) {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.errno(),
                        Some(libc_errno::ESRCH) | Some(libc_errno::EINVAL)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc_errno::ENOENT) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc_errno::EBUSY) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(ApplyError::io(path, e)),
        }
    }
    Err(ApplyError::Other(format!(
        "{}: still busy after moving its tasks out",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_dir_create_and_remove() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vmtune-host");
        let t = CgroupDir {
            path: p.clone(),
            procs_file: "tasks".into(),
        };
        assert_eq!(t.read_current().unwrap(), "absent");
        t.apply("present").unwrap();
        assert!(p.is_dir());
        t.rollback("absent").unwrap();
        assert!(!p.exists());
        t.rollback("absent").unwrap();
    }

    #[test]
    fn remove_cgroup_on_plain_dirs() {
        let d = tempfile::tempdir().unwrap();
        let cg = d.path().join("vmtune-host");
        std::fs::create_dir(&cg).unwrap();
        remove_cgroup(&cg, "tasks").unwrap();
        assert!(!cg.exists());
        remove_cgroup(&cg, "tasks").unwrap();
    }
}
