//! What one change touches ([`Target`]): one of the [`crate::actuator`]s, each of which owns
//! its describe / read / apply / verify / rollback, and the change to make with it
//! ([`PlannedStep`]).
//!
//! A `Target` is stored in the journal (`"actuator":"irq"` and the actuator's fields, in the
//! spelling every release has written), so rollback works from the journal alone (after a
//! crash, in another process).

use serde::{Deserialize, Serialize};

pub use crate::actuator::{
    Actuator, CgroupController, CgroupDir, CgroupFile, CgroupTasks, Hugepages, Irq, IrqClass,
    LibvirtDomain, MaskFile, MovedTask, Outcome, SystemdProperty, Thread, ThreadCpus, ThreadSched,
    Verified,
};
use crate::error::Result;
use crate::hugepages::{GiveBack, Pool};

/// One thing a step changes: which actuator, with what it needs. A thin enum: every method
/// hands the call to the actuator.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "actuator", rename_all = "snake_case")]
pub enum Target {
    /// `nr_hugepages` of one size on one NUMA node.
    Hugepages(Hugepages),
    /// CPU affinity of one QEMU thread.
    Thread(Thread),
    /// Scheduling attributes of one thread.
    ThreadSched(ThreadSched),
    /// `/proc/irq/N/smp_affinity_list`.
    Irq(Irq),
    /// A file holding a hex CPU mask.
    MaskFile(MaskFile),
    /// A cgroup file holding a list.
    CgroupFile(CgroupFile),
    /// A controller enabled in `cgroup.subtree_control` (v2).
    CgroupController(CgroupController),
    /// A cgroup directory vmtune creates.
    CgroupDir(CgroupDir),
    /// Tasks moved into a cgroup.
    CgroupTasks(CgroupTasks),
    /// A systemd unit property set for the runtime.
    SystemdProperty(SystemdProperty),
    /// A scratch libvirt domain (`bench matrix`).
    LibvirtDomain(LibvirtDomain),
}

/// `f(actuator)` for whichever actuator `t` holds.
macro_rules! each {
    ($t:expr, $a:ident => $e:expr) => {
        match $t {
            Target::Hugepages($a) => $e,
            Target::Thread($a) => $e,
            Target::ThreadSched($a) => $e,
            Target::Irq($a) => $e,
            Target::MaskFile($a) => $e,
            Target::CgroupFile($a) => $e,
            Target::CgroupController($a) => $e,
            Target::CgroupDir($a) => $e,
            Target::CgroupTasks($a) => $e,
            Target::SystemdProperty($a) => $e,
            Target::LibvirtDomain($a) => $e,
        }
    };
}

/// A change to make: the target, the value now, the value wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedStep {
    pub target: Target,
    pub previous: String,
    pub new: String,
}

impl PlannedStep {
    pub fn new(target: Target, previous: impl Into<String>, new: impl Into<String>) -> Self {
        PlannedStep {
            target,
            previous: previous.into(),
            new: new.into(),
        }
    }
}

impl Target {
    /// Short actuator name (the JSON `actuator` tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Hugepages(_) => "hugepages",
            Target::Thread(_) => "thread",
            Target::ThreadSched(_) => "thread_sched",
            Target::Irq(_) => "irq",
            Target::MaskFile(_) => "mask_file",
            Target::CgroupFile(_) => "cgroup_file",
            Target::CgroupController(_) => "cgroup_controller",
            Target::CgroupDir(_) => "cgroup_dir",
            Target::CgroupTasks(_) => "cgroup_tasks",
            Target::SystemdProperty(_) => "systemd_property",
            Target::LibvirtDomain(_) => "libvirt_domain",
        }
    }

    /// How a restore undoes this step when writing `previous` back would be wrong: for a
    /// hugepage reservation that owns its pages, the give-back computed from the pool now
    /// ([`Hugepages::give_back`]); `None` for every other step (write `previous` back).
    /// `applied` is the value read back right after the change, when the journal has it.
    pub fn give_back(
        &self,
        previous: &str,
        new: &str,
        applied: Option<&str>,
    ) -> Result<Option<GiveBack>> {
        match self {
            Target::Hugepages(h) => h.give_back(previous, new, applied),
            _ => Ok(None),
        }
    }

    /// The hugepage pool this step writes, read now (`None` for other steps).
    pub fn pool(&self) -> Option<Result<Pool>> {
        match self {
            Target::Hugepages(h) => Some(h.pool()),
            _ => None,
        }
    }
}

impl Actuator for Target {
    fn describe(&self) -> String {
        each!(self, a => a.describe())
    }

    fn read_current(&self) -> Result<String> {
        each!(self, a => a.read_current())
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        each!(self, a => a.apply(new))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        each!(self, a => a.verify(new))
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        each!(self, a => a.rollback(previous))
    }
}

macro_rules! from_actuator {
    ($($v:ident),*) => {
        $(impl From<$v> for Target {
            fn from(a: $v) -> Target {
                Target::$v(a)
            }
        })*
    };
}

from_actuator!(
    Hugepages,
    Thread,
    ThreadSched,
    Irq,
    MaskFile,
    CgroupFile,
    CgroupController,
    CgroupDir,
    CgroupTasks,
    SystemdProperty,
    LibvirtDomain
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_json() {
        let t = Target::Irq(Irq {
            irq: 38,
            path: "/proc/irq/38/smp_affinity_list".into(),
            name: "vfio-msix[0](0000:01:00.0)".into(),
            class: IrqClass::Vfio,
            previous_effective: Some("1".into()),
        });
        let s = serde_json::to_string(&t).unwrap();
        assert_eq!(
            s,
            r#"{"actuator":"irq","irq":38,"path":"/proc/irq/38/smp_affinity_list","name":"vfio-msix[0](0000:01:00.0)","class":"vfio","previous_effective":"1"}"#
        );
        assert_eq!(serde_json::from_str::<Target>(&s).unwrap(), t);
    }

    #[test]
    fn the_dispatch_reaches_each_actuator() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cpumask");
        std::fs::write(&p, "ff\n").unwrap();
        let t: Target = MaskFile {
            path: p.clone(),
            what: "workqueue cpumask".into(),
        }
        .into();
        assert_eq!(t.kind(), "mask_file");
        assert_eq!(t.describe(), format!("workqueue cpumask ({})", p.display()));
        assert_eq!(t.read_current().unwrap(), "ff");
        assert_eq!(t.apply("0f").unwrap(), Outcome::Done(None));
        assert!(t.verify("f").unwrap().ok);
        assert!(t.give_back("ff", "0f", None).unwrap().is_none());
        assert!(t.pool().is_none());
        t.rollback("ff").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "ff");
    }
}
