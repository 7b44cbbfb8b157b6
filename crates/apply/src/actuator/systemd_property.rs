//! A systemd unit property set with `systemctl set-property --runtime` (CPU shielding on a
//! systemd host: `AllowedCPUs=`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Actuator, Outcome, Verified};
use crate::error::{ApplyError, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SystemdProperty {
    pub unit: String,
    pub property: String,
}

impl Actuator for SystemdProperty {
    fn describe(&self) -> String {
        format!("systemd {} {}=", self.unit, self.property)
    }

    fn read_current(&self) -> Result<String> {
        systemctl_show(&self.unit, &self.property)
    }

    fn apply(&self, new: &str) -> Result<Outcome> {
        systemctl_set(&self.unit, &self.property, new).map(|()| Outcome::Done(None))
    }

    fn verify(&self, new: &str) -> Result<Verified> {
        let observed = self.read_current()?;
        let ok = observed == new;
        Ok(Verified { ok, observed })
    }

    fn rollback(&self, previous: &str) -> Result<Outcome> {
        systemctl_set(&self.unit, &self.property, previous).map(|()| Outcome::Done(None))
    }
}

fn run_bounded(cmd: &mut Command, what: &str, timeout: Duration) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ApplyError::Other(format!("{what}: {e}")))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ApplyError::Other(format!(
                    "{what}: timed out after {timeout:?}"
                )));
            }
            Err(e) => return Err(ApplyError::Other(format!("{what}: {e}"))),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| ApplyError::Other(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(ApplyError::Other(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `systemctl show -p PROPERTY --value UNIT`.
pub fn systemctl_show(unit: &str, property: &str) -> Result<String> {
    run_bounded(
        Command::new("systemctl").args(["show", "-p", property, "--value", unit]),
        &format!("systemctl show {unit}"),
        Duration::from_secs(5),
    )
}

/// `systemctl set-property --runtime UNIT PROPERTY=VALUE`.
pub fn systemctl_set(unit: &str, property: &str, value: &str) -> Result<()> {
    run_bounded(
        Command::new("systemctl").args([
            "--no-ask-password",
            "set-property",
            "--runtime",
            unit,
            &format!("{property}={value}"),
        ]),
        &format!("systemctl set-property {unit}"),
        Duration::from_secs(5),
    )
    .map(|_| ())
}
