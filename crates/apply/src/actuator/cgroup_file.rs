//! A cgroup file holding a list (`cpuset.cpus`, `cpuset.mems`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{done, same_cpus, write_back, Actuator, Outcome, Verified};
use crate::error::{read_trim, write_value, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupFile {
    pub path: PathBuf,
    /// In a cgroup vmtune created: undone by removing the cgroup, not by a write.
    #[serde(default)]
    pub created: bool,
}

impl Actuator for CgroupFile {
    fn describe(&self) -> String {
        format!("cgroup {}", self.path.display())
    }

    fn read_current(&self) -> Result<String> {
        read_trim(&self.path)
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        done(write_value(&self.path, new))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = same_cpus(&observed, new);
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        if self.created {
            return Ok(Outcome::Done(Some(
                "undone with the removal of its cgroup".into(),
            )));
        }
        write_back(&self.path, previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_targets_apply_verify_rollback() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cpuset.cpus");
        std::fs::write(&p, "0-3\n").unwrap();
        let t = CgroupFile {
            path: p.clone(),
            created: false,
        };
        let prev = t.read_current().unwrap();
        assert_eq!(prev, "0-3");
        assert_eq!(t.apply("0,1").unwrap(), Outcome::Done(None));
        assert!(t.verify("0-1").unwrap().ok);
        assert!(!t.verify("2").unwrap().ok);
        t.rollback(&prev).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0-3");
        // idempotent
        t.rollback(&prev).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0-3");
    }
}
