//! kata-agent JSON log records (slog JSON: `msg`, `level`, `ts`, `subsystem`, extra keys).

use std::borrow::Cow;

use serde::Deserialize;

use crate::time::{parse_rfc3339, Nanos};

/// What a kata-agent record means for the boot timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentKind {
    /// `rpc call from shim to agent: "create_sandbox"`.
    Rpc(String),
    /// One try of the agent's CDI wait. Kata ≥ 3.14: `waiting for CDI spec(s) to be
    /// generated (N of M max tries) "unresolvable CDI devices …"`, numbered from 0; older
    /// agents: `error injecting devices: "unresolvable CDI devices …"`, unnumbered.
    CdiWait {
        attempt: Option<u32>,
        max: Option<u32>,
        /// GPUs the request names (`nvidia.com/gpu=N`, `nvidia.com/pgpu=…`).
        devices: u32,
    },
    /// `all devices injected successfully…`.
    CdiDone,
    /// The agent gave up on CDI: `failed to inject devices after CDI timeout of N seconds`,
    /// or the spec exists but lacks the devices.
    CdiFailed(String),
    /// `got uevent message` with the kernel uevent it carries (`Uevent { action: "add",
    /// devpath: "/devices/system/memory/memory80", subsystem: "memory", … }`).
    Uevent {
        /// `add`, `bind`, …
        action: UeventAction,
        /// A memory block (subsystem `memory`, or a devpath under `/devices/system/memory/`).
        memory: bool,
        /// The PCI device at the end of the devpath, if it ends in one.
        bdf: Option<String>,
    },
    /// Anything else.
    Other,
}

/// A kernel uevent's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UeventAction {
    Add,
    Remove,
    Bind,
    Unbind,
    Change,
    Move,
    Online,
    Offline,
    /// Missing or another word.
    Other,
}

impl UeventAction {
    fn parse(s: &str) -> Self {
        match s {
            "add" => Self::Add,
            "remove" => Self::Remove,
            "bind" => Self::Bind,
            "unbind" => Self::Unbind,
            "change" => Self::Change,
            "move" => Self::Move,
            "online" => Self::Online,
            "offline" => Self::Offline,
            _ => Self::Other,
        }
    }
}

/// One parsed kata-agent record: the guest's clock and what the record means (the rest of
/// the record — level, subsystem, the message of records that mean nothing to the
/// timeline — is checked and dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// `ts`: the guest's wall clock (UTC).
    pub ts: Nanos,
    pub kind: AgentKind,
}

/// The fields read; the text fields are borrowed from the line unless they hold escapes.
/// `level` and `subsystem` are read (a record where they are not strings is bad) but not
/// kept.
#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow)]
    msg: Cow<'a, str>,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    level: Cow<'a, str>,
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    subsystem: Cow<'a, str>,
    #[serde(default, borrow)]
    event: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("bad ts {0:?}")]
    BadTs(String),
}

/// Is this line meant to be a kata-agent record (a JSON object)?
pub fn looks_like(line: &str) -> bool {
    line.trim_start().starts_with('{')
}

/// Parse one kata-agent JSON line.
pub fn parse_line(line: &str) -> Result<AgentRecord, AgentError> {
    let raw: Raw<'_> =
        serde_json::from_str(line.trim()).map_err(|e| AgentError::Json(e.to_string()))?;
    let ts = parse_rfc3339(&raw.ts).ok_or_else(|| AgentError::BadTs(raw.ts.to_string()))?;
    let kind = classify(&raw.msg, raw.event.as_deref());
    Ok(AgentRecord { ts, kind })
}

/// GPUs named by an `unresolvable CDI devices a=1, b=2` list: entries of a `…gpu` kind
/// (`nvidia.com/gpu`, `nvidia.com/pgpu`), or every entry when none is.
fn cdi_devices(text: &str) -> u32 {
    let Some(at) = text.find("unresolvable CDI devices ") else {
        return 0;
    };
    let list = text
        .get(at + "unresolvable CDI devices ".len()..)
        .unwrap_or("")
        .trim_end_matches(['"', '\\', ' ']);
    let entries: Vec<&str> = list
        .split([',', ' '])
        .map(|e| e.trim_matches(['"', '\\']))
        .filter(|e| e.contains('='))
        .collect();
    let gpus = entries
        .iter()
        .filter(|e| e.split('=').next().is_some_and(|k| k.ends_with("gpu")))
        .count();
    (if gpus > 0 { gpus } else { entries.len() }) as u32
}

fn classify(msg: &str, event: Option<&str>) -> AgentKind {
    if let Some(rest) = msg.strip_prefix("rpc call from shim to agent: ") {
        return AgentKind::Rpc(rest.trim_matches('"').to_string());
    }
    if let Some(rest) = msg.strip_prefix("waiting for CDI spec(s) to be generated (") {
        let mut it = rest.split_whitespace();
        let attempt = it.next().and_then(|s| s.parse().ok());
        let of = it.next();
        let max = it.next().and_then(|s| s.parse().ok());
        if let (Some(attempt), Some("of"), Some(max)) = (attempt, of, max) {
            return AgentKind::CdiWait {
                attempt: Some(attempt),
                max: Some(max),
                devices: cdi_devices(rest),
            };
        }
    }
    if let Some(rest) = msg.strip_prefix("error injecting devices: ") {
        if rest.contains("unresolvable CDI devices") {
            return AgentKind::CdiWait {
                attempt: None,
                max: None,
                devices: cdi_devices(rest),
            };
        }
    }
    if msg.starts_with("all devices injected successfully") {
        return AgentKind::CdiDone;
    }
    if msg.starts_with("failed to inject devices after CDI timeout")
        || (msg.starts_with("CDI device(s)") && msg.contains("do not exist"))
    {
        return AgentKind::CdiFailed(msg.to_string());
    }
    if msg == "got uevent message" {
        if let Some(ev) = event {
            let devpath = debug_field(ev, "devpath: \"").unwrap_or_default();
            let subsystem = debug_field(ev, "subsystem: \"").unwrap_or_default();
            return AgentKind::Uevent {
                action: UeventAction::parse(debug_field(ev, "action: \"").unwrap_or_default()),
                memory: subsystem == "memory" || devpath.starts_with("/devices/system/memory/"),
                bdf: devpath_bdf(devpath).map(str::to_string),
            };
        }
    }
    AgentKind::Other
}

/// Field of a Rust `Debug` struct rendering: `Uevent { action: "add", devpath: "/x", … }`;
/// `pat` is the field's name followed by `: "`.
fn debug_field<'a>(s: &'a str, pat: &str) -> Option<&'a str> {
    let start = memchr::memmem::find(s.as_bytes(), pat.as_bytes())? + pat.len();
    let rest = s.get(start..)?;
    let end = memchr::memchr(b'"', rest.as_bytes())?;
    rest.get(..end)
}

/// PCI BDF at the end of a sysfs devpath (`/devices/pci0000:00/0000:00:0a.0/0000:07:00.0`).
pub fn devpath_bdf(devpath: &str) -> Option<&str> {
    let last = devpath.rsplit('/').next()?;
    crate::dmesg::is_bdf(last).then_some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_records() {
        let r = parse_line(r#"{"msg":"rpc call from shim to agent: \"create_sandbox\"","level":"INFO","ts":"2025-11-20T16:05:09.374408769Z","source":"agent","subsystem":"rpc","version":"0.1.0","name":"kata-agent","pid":"1"}"#).unwrap();
        assert_eq!(r.kind, AgentKind::Rpc("create_sandbox".into()));
        let r = parse_line(r#"{"msg":"waiting for CDI spec(s) to be generated (39 of 100 max tries) \"unresolvable CDI devices nvidia.com/gpu=3, nvidia.com/gpu=1, nvidia.com/gpu=4, nvidia.com/gpu=6, nvidia.com/gpu=5, nvidia.com/gpu=2, nvidia.com/gpu=0\"","level":"INFO","ts":"2025-11-20T16:06:37.462492776Z","name":"kata-agent","subsystem":"rpc","pid":"1","version":"0.1.0","source":"agent"}"#).unwrap();
        assert_eq!(
            r.kind,
            AgentKind::CdiWait {
                attempt: Some(39),
                max: Some(100),
                devices: 7
            }
        );
        let r = parse_line(r#"{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T16:05:15.71233274Z","subsystem":"uevent","pid":"1","version":"0.1.0","source":"agent","name":"kata-agent","event":"Uevent { action: \"add\", devpath: \"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\", devname: \"\", subsystem: \"pci\", seqnum: \"1379\", interface: \"\" }"}"#).unwrap();
        assert_eq!(
            r.kind,
            AgentKind::Uevent {
                action: UeventAction::Add,
                memory: false,
                bdf: Some("0000:07:00.0".into()),
            }
        );
        let r = parse_line(r#"{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T17:58:13.5Z","subsystem":"uevent","event":"Uevent { action: \"add\", devpath: \"/devices/system/memory/memory176\", devname: \"\", subsystem: \"memory\", seqnum: \"2001\", interface: \"\" }"}"#).unwrap();
        assert!(matches!(
            r.kind,
            AgentKind::Uevent {
                action: UeventAction::Add,
                memory: true,
                bdf: None
            }
        ));
    }

    #[test]
    fn bad() {
        assert!(parse_line(
            r#"{"msg":"all devices injected successfully, modified CDI container spec:"#
        )
        .is_err());
        assert!(parse_line(r#"{"msg":"x","ts":"yesterday"}"#).is_err());
        assert!(parse_line("[]").is_err());
    }

    /// Shapes of public Kata issue threads, written here: the pre-3.14 wording (no try
    /// numbers), a pgpu device, the agent giving up.
    #[test]
    fn cdi_wordings() {
        let r = parse_line(r#"{"msg":"error injecting devices: \"unresolvable CDI devices nvidia.com/gpu=0\"","level":"INFO","ts":"2025-02-17T05:44:29.654738876Z","subsystem":"rpc","name":"kata-agent","pid":"100","version":"0.1.0","source":"agent"}"#).unwrap();
        assert_eq!(
            r.kind,
            AgentKind::CdiWait {
                attempt: None,
                max: None,
                devices: 1
            }
        );
        let r = parse_line(r#"{"msg":"waiting for CDI spec(s) to be generated (0 of 100 max tries) \"unresolvable CDI devices nvidia.com/pgpu=vfio1, nvidia.com/pgpu=vfio2, nvidia.com/nvswitch=0\"","level":"INFO","ts":"2025-08-12T01:53:16.067309467Z","subsystem":"rpc","pid":"1","name":"kata-agent","source":"agent"}"#).unwrap();
        assert_eq!(
            r.kind,
            AgentKind::CdiWait {
                attempt: Some(0),
                max: Some(100),
                devices: 2
            }
        );
        let r = parse_line(r#"{"msg":"failed to inject devices after CDI timeout of 100 seconds","level":"ERRO","ts":"2025-08-12T01:56:44.1Z","subsystem":"rpc","name":"kata-agent","source":"agent"}"#).unwrap();
        assert!(matches!(r.kind, AgentKind::CdiFailed(_)));
    }
}
