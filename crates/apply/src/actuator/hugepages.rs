//! `nr_hugepages` of one size on one NUMA node: grow the pool (compacting memory when
//! fragmentation keeps it short), read it back, give back what was added. Values are
//! persistent page counts (surplus pages not counted; see [`crate::hugepages`] for the
//! kernel's pool rules).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{write_back, Actuator, Outcome, Verified};
use crate::error::{read_trim, write_value, ApplyError, Result};
use crate::hugepages::{self, GiveBack, Pool};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hugepages {
    pub node: u32,
    pub size_kb: u64,
    pub path: PathBuf,
    /// `/proc/sys/vm/compact_memory`, written when the reservation falls short.
    pub compact: PathBuf,
    /// Free pages the plan asked for on this node.
    #[serde(default)]
    pub asked: u64,
    /// The size's `resv_hugepages` (pages mappings reserved, counted in
    /// `free_hugepages`), to say how many free pages the VM can take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<PathBuf>,
    /// Restore gives back only the pages this step added, from whatever the pool holds
    /// then ([`crate::hugepages`]). Journals written before this field have `false`:
    /// their restore writes `previous` back.
    #[serde(default)]
    pub own_pages: bool,
}

impl Actuator for Hugepages {
    fn describe(&self) -> String {
        format!(
            "hugepages {} kB on node {} ({})",
            self.size_kb,
            self.node,
            self.path.display()
        )
    }

    fn read_current(&self) -> Result<String> {
        Ok(pool_of(&self.path)?.persistent().to_string())
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        let path = &self.path;
        let want: u64 = new
            .parse()
            .map_err(|_| ApplyError::parse(path, format!("bad page count {new:?}")))?;
        write_value(path, new)?;
        let mut got = pool_of(path)?.persistent();
        let mut compacted = false;
        if got < want && self.compact.exists() {
            // fragmentation: compact memory, then ask again
            write_value(&self.compact, "1")?;
            compacted = true;
            write_value(path, new)?;
            got = pool_of(path)?.persistent();
        }
        let resv = self
            .reserved
            .as_deref()
            .and_then(|r| read_count(r).ok())
            .unwrap_or(0);
        let avail = pool_of(path).map_or(got, |p| p.available(resv));
        Ok(Outcome::Done(Some(format!(
            "node {}: {} of {} pages free for the VM (nr_hugepages {got} of {want}){}",
            self.node,
            avail.min(self.asked),
            self.asked,
            if compacted {
                ", after compacting memory"
            } else {
                ""
            }
        ))))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let want: u64 = new.parse().unwrap_or(u64::MAX);
        let ok = observed.parse::<u64>().map(|g| g >= want).unwrap_or(false);
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        write_back(&self.path, previous)
    }
}

impl Hugepages {
    /// How a restore undoes this step when it owns its pages: the give-back computed from the
    /// pool now ([`crate::hugepages`]); `None` when it does not (write `previous` back) or the
    /// pool is gone. `applied` is the value read back right after the change, when the
    /// journal has it.
    pub fn give_back(
        &self,
        previous: &str,
        new: &str,
        applied: Option<&str>,
    ) -> Result<Option<GiveBack>> {
        let path = &self.path;
        if !self.own_pages || !path.exists() {
            return Ok(None);
        }
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| ApplyError::parse(path, format!("journal: bad page count {v:?}")))
        };
        let now = pool_of(path)?.persistent();
        let applied = applied.map(num).transpose()?;
        let added = hugepages::added(num(previous)?, num(new)?, applied, now);
        Ok(Some(GiveBack::new(now, added)))
    }

    /// The pool this step writes, read now.
    pub fn pool(&self) -> Result<Pool> {
        pool_of(&self.path)
    }
}

/// The pool whose `nr_hugepages` is `path`.
fn pool_of(path: &Path) -> Result<Pool> {
    Pool::read(path.parent().unwrap_or(Path::new("/")))
}

fn read_count(path: &Path) -> Result<u64> {
    let s = read_trim(path)?;
    s.parse()
        .map_err(|_| ApplyError::parse(path, format!("not a page count: {s:?}")))
}
