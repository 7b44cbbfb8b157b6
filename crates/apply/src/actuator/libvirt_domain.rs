//! A scratch libvirt domain (`bench matrix`), defined from an XML file through `virsh`
//! ([`crate::libvirt`]). Values `absent`/`defined`; undone by destroying and undefining it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Actuator, Outcome, Verified};
use crate::error::Result;
use crate::libvirt::Virsh;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LibvirtDomain {
    /// The connection (`virsh -c`), `None` for virsh's default.
    pub uri: Option<String>,
    pub name: String,
    pub xml: PathBuf,
}

impl Actuator for LibvirtDomain {
    fn describe(&self) -> String {
        format!(
            "libvirt domain {} (scratch copy){}",
            self.name,
            self.uri
                .as_deref()
                .map(|u| format!(" on {u}"))
                .unwrap_or_default()
        )
    }

    fn read_current(&self) -> Result<String> {
        let present = self.virsh().state(&self.name)?.is_some();
        Ok(if present { "defined" } else { "absent" }.into())
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        if new == "defined" {
            self.virsh().define(&self.xml)?;
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
        let name = &self.name;
        if previous != "absent" {
            return Ok(Outcome::Skipped(format!(
                "{name} was {previous} before: left as it is"
            )));
        }
        if self.virsh().remove(name)? {
            Ok(Outcome::Done(Some(format!(
                "{name} destroyed and undefined"
            ))))
        } else {
            Ok(Outcome::Skipped(format!("{name} is already gone")))
        }
    }
}

impl LibvirtDomain {
    fn virsh(&self) -> Virsh {
        Virsh::new(self.uri.clone())
    }
}
