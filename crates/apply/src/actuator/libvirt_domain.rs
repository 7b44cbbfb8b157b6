//! A scratch libvirt domain (`bench matrix`), defined from an XML file through `virsh`
//! ([`crate::libvirt`]). Values `absent`/`defined`; undone by destroying and undefining it,
//! then removing the files made for it (disk overlays, an NVRAM copy, its XML; a directory
//! among them once it is empty).

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
    /// Files made for it, removed with it. Journals written before this field have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PathBuf>,
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
        let removed = self.virsh().remove(name)?;
        let gone = self.remove_files()?;
        let files = match gone {
            0 => String::new(),
            1 => ", its file removed".into(),
            n => format!(", its {n} files removed"),
        };
        if removed {
            Ok(Outcome::Done(Some(format!(
                "{name} destroyed and undefined{files}"
            ))))
        } else if gone > 0 {
            Ok(Outcome::Done(Some(format!("{name} was gone{files}"))))
        } else {
            Ok(Outcome::Skipped(format!("{name} is already gone")))
        }
    }
}

impl LibvirtDomain {
    fn virsh(&self) -> Virsh {
        Virsh::new(self.uri.clone())
    }

    /// Remove `files` (a directory once empty); how many went.
    fn remove_files(&self) -> Result<usize> {
        let mut gone = 0;
        for f in &self.files {
            let r = if f.is_dir() {
                std::fs::remove_dir(f)
            } else {
                std::fs::remove_file(f)
            };
            match r {
                Ok(()) => gone += 1,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
                    ) => {}
                Err(e) => return Err(crate::error::ApplyError::io(f, e)),
            }
        }
        Ok(gone)
    }
}
