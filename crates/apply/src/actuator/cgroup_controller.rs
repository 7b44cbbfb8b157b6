//! A controller enabled in a cgroup v2 `cgroup.subtree_control`. Values `on`/`off`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{done, Actuator, Outcome, Verified};
use crate::error::{read_trim, write_value, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupController {
    pub path: PathBuf,
    pub controller: String,
}

impl Actuator for CgroupController {
    fn describe(&self) -> String {
        format!("controller {} in {}", self.controller, self.path.display())
    }

    fn read_current(&self) -> Result<String> {
        let v = read_trim(&self.path)?;
        Ok(if v.split_whitespace().any(|c| c == self.controller) {
            "on"
        } else {
            "off"
        }
        .into())
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        let sign = if new == "on" { '+' } else { '-' };
        done(write_value(
            &self.path,
            &format!("{sign}{}", self.controller),
        ))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = observed == new;
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        if !matches!(self.read_current(), Ok(ref v) if v == previous) {
            self.apply(previous)?;
        }
        Ok(Outcome::Done(None))
    }
}
