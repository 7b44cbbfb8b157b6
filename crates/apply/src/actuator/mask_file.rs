//! A file holding a hex CPU mask (`/proc/irq/default_smp_affinity`,
//! `/sys/devices/virtual/workqueue/cpumask`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{done, same_mask, write_back, Actuator, Outcome, Verified};
use crate::error::{read_trim, write_value, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MaskFile {
    pub path: PathBuf,
    pub what: String,
}

impl Actuator for MaskFile {
    fn describe(&self) -> String {
        format!("{} ({})", self.what, self.path.display())
    }

    fn read_current(&self) -> Result<String> {
        read_trim(&self.path)
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        done(write_value(&self.path, new))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = same_mask(&observed, new);
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        write_back(&self.path, previous)
    }
}
