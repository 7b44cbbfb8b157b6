//! libvirt domains vmtune defines for a while (`bench matrix`'s scratch copies), driven
//! through `virsh` — the client every libvirt host has, speaking to whichever daemon
//! (`libvirtd`, `virtqemud`) the URI names. A scratch domain is a journal step
//! ([`crate::step::Target::LibvirtDomain`], values `absent`/`defined`), so `vmtune restore`
//! destroys and undefines whatever a killed run left.

use std::path::Path;
use std::process::Command;

use crate::error::{ApplyError, Result};

/// `virsh`, optionally with `-c URI`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Virsh {
    pub uri: Option<String>,
}

/// A domain's state as `virsh domstate` says it (`running`, `shut off`, `paused`, …).
pub type DomState = String;

impl Virsh {
    pub fn new(uri: Option<String>) -> Virsh {
        Virsh { uri }
    }

    fn command(&self) -> Command {
        let mut c = Command::new("virsh");
        if let Some(u) = &self.uri {
            c.args(["-c", u]);
        }
        c.env("LC_ALL", "C");
        c
    }

    /// Run `virsh ARGS`; its stdout, or its last error line.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = self.command().args(args).output().map_err(|e| {
            ApplyError::Other(format!(
                "running virsh {}: {e}",
                args.first().unwrap_or(&"")
            ))
        })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| l.trim_start_matches("error: "))
            .next_back()
            .unwrap_or("no message")
            .to_string();
        Err(ApplyError::Other(format!(
            "virsh {}: {last}",
            args.first().unwrap_or(&"")
        )))
    }

    /// The domain's state, `None` when libvirt has no such domain.
    pub fn state(&self, name: &str) -> Result<Option<DomState>> {
        match self.run(&["domstate", "--", name]) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(e) if no_domain(&e.to_string()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn define(&self, xml: &Path) -> Result<()> {
        let p = xml.to_string_lossy();
        self.run(&["define", "--file", &p]).map(drop)
    }

    pub fn start(&self, name: &str) -> Result<()> {
        self.run(&["start", "--", name]).map(drop)
    }

    /// Stop the domain now; a domain already stopped is fine.
    pub fn destroy(&self, name: &str) -> Result<()> {
        match self.run(&["destroy", "--", name]) {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().contains("not running") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Remove the domain's definition (and the NVRAM libvirt made for it).
    pub fn undefine(&self, name: &str) -> Result<()> {
        match self.run(&["undefine", "--nvram", "--", name]) {
            Ok(_) => Ok(()),
            // older libvirt, or a driver without NVRAM support
            Err(e) if e.to_string().contains("nvram") => {
                self.run(&["undefine", "--", name]).map(drop)
            }
            Err(e) => Err(e),
        }
    }

    /// The domain's XML (`--inactive`: its persistent definition).
    pub fn dumpxml(&self, name: &str, inactive: bool) -> Result<String> {
        let mut args = vec!["dumpxml"];
        if inactive {
            args.push("--inactive");
        }
        args.extend(["--", name]);
        self.run(&args)
    }

    /// Names of every domain, running or not.
    pub fn list_all(&self) -> Result<Vec<String>> {
        Ok(self
            .run(&["list", "--all", "--name"])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Destroy (if running) and undefine; `false` when there was no such domain.
    pub fn remove(&self, name: &str) -> Result<bool> {
        let Some(state) = self.state(name)? else {
            return Ok(false);
        };
        if state != "shut off" {
            self.destroy(name)?;
        }
        self.undefine(name)?;
        Ok(true)
    }
}

/// Whether a virsh error says the domain does not exist.
fn no_domain(msg: &str) -> bool {
    msg.contains("failed to get domain") || msg.contains("Domain not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_domain_wordings() {
        // libvirt 6-10 (virsh: "failed to get domain 'x'"), and the driver's own
        assert!(no_domain("virsh domstate: failed to get domain 'x'"));
        assert!(no_domain(
            "virsh domstate: Domain not found: no domain with matching name 'x'"
        ));
        assert!(!no_domain(
            "virsh domstate: failed to connect to the hypervisor"
        ));
    }

    #[test]
    fn the_test_driver_answers() {
        // libvirt's built-in test driver: one running domain named `test`
        if Command::new("virsh").arg("--version").output().is_err() {
            eprintln!("skipped: no virsh");
            return;
        }
        let v = Virsh::new(Some("test:///default".into()));
        assert_eq!(v.list_all().unwrap(), ["test"]);
        assert_eq!(v.state("test").unwrap().as_deref(), Some("running"));
        assert_eq!(v.state("vmtune-no-such-domain").unwrap(), None);
        assert!(!v.remove("vmtune-no-such-domain").unwrap());
        assert!(v
            .dumpxml("test", true)
            .unwrap()
            .contains("<name>test</name>"));
        let e = v.start("vmtune-no-such-domain").unwrap_err();
        assert!(e.to_string().starts_with("virsh start: "), "{e}");
    }
}
