//! `/proc/irq/N/smp_affinity_list` of one interrupt. A change the kernel refuses (managed or
//! per-CPU interrupts) is skipped, not failed; a rollback puts the vector back on the CPU it
//! was on, and leaves alone a number that now serves another device.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use topo::CpuSet;

use super::{errno_name, is_refusal, same_cpus, Actuator, Outcome, Verified};
use crate::error::{read_trim, write_value, Result};
use crate::proc;

/// Which side of the plan an IRQ belongs to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IrqClass {
    /// An interrupt of one of the plan's passed-through devices: goes to the guest CPUs.
    Vfio,
    /// Any other movable interrupt: goes to the host CPUs.
    Host,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Irq {
    pub irq: u32,
    pub path: PathBuf,
    /// The action name (`vfio-msix[0](0000:01:00.0)`, `virtio2-input.0`).
    pub name: String,
    pub class: IrqClass,
    /// `effective_affinity_list` before the change, to put the vector back on the same
    /// CPU on rollback.
    pub previous_effective: Option<String>,
}

impl Actuator for Irq {
    fn describe(&self) -> String {
        let c = match self.class {
            IrqClass::Vfio => "vfio",
            IrqClass::Host => "host",
        };
        format!("IRQ {} {} [{c}] smp_affinity_list", self.irq, self.name)
    }

    fn read_current(&self) -> Result<String> {
        read_trim(&self.path)
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        match write_value(&self.path, new) {
            Ok(()) => Ok(Outcome::Done(None)),
            Err(e) if is_refusal(&e) => Ok(Outcome::Skipped(format!(
                "IRQ {} refused the change (managed or per-CPU interrupt: {})",
                self.irq,
                e.errno().map(errno_name).unwrap_or("error")
            ))),
            Err(e) => Err(e),
        }
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = same_cpus(&observed, new);
        let eff = self.path.with_file_name("effective_affinity_list");
        let observed = match read_trim(&eff) {
            Ok(e) => format!("{observed} (effective {e})"),
            Err(_) => observed,
        };
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        let (irq, path, name) = (self.irq, &self.path, &self.name);
        let dir = path.parent().unwrap_or(Path::new("/"));
        if !path.exists() {
            return Ok(Outcome::Skipped(format!("IRQ {irq} no longer exists")));
        }
        // /proc/irq/N/<action>/ exists while a handler is registered: if the number
        // now serves another device, leave it alone
        let actions = proc::irq_actions(dir);
        let ours = name
            .split(',')
            .map(str::trim)
            .any(|n| actions.iter().any(|a| a == n));
        if !actions.is_empty() && !ours {
            return Ok(Outcome::Skipped(format!(
                "IRQ {irq} now belongs to {}, not {name}",
                actions.join(",")
            )));
        }
        self.back_to_previous_cpu(previous);
        match write_value(path, previous) {
            Ok(()) => Ok(Outcome::Done(None)),
            Err(e) if is_refusal(&e) => Ok(Outcome::Skipped(format!("IRQ {irq} refuses changes"))),
            Err(e) => Err(e),
        }
    }
}

impl Irq {
    /// Put the vector back on the CPU it was on before `previous` is written: x86 keeps the
    /// current target CPU when it is still in the new mask. Best effort.
    fn back_to_previous_cpu(&self, previous: &str) {
        let Some(eff) = &self.previous_effective else {
            return;
        };
        let effp = self.path.with_file_name("effective_affinity_list");
        let now = read_trim(&effp).ok();
        if let (Ok(e), Ok(prev)) = (CpuSet::parse_list(eff), CpuSet::parse_list(previous)) {
            if e.len() == 1
                && e.is_subset(&prev)
                && now.as_deref().map(|n| !same_cpus(n, eff)).unwrap_or(false)
            {
                let _ = write_value(&self.path, eff);
            }
        }
    }
}
