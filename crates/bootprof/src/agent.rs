//! kata-agent JSON log records (slog JSON: `msg`, `level`, `ts`, `subsystem`, extra keys).

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
    /// `got uevent message` with the kernel uevent it carries.
    Uevent {
        action: String,
        devpath: String,
        subsystem: String,
    },
    /// Anything else.
    Other,
}

/// One parsed kata-agent record.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// `ts`: the guest's wall clock (UTC).
    pub ts: Nanos,
    pub level: String,
    pub subsystem: String,
    pub msg: String,
    pub kind: AgentKind,
}

#[derive(Deserialize)]
struct Raw {
    msg: String,
    #[serde(default)]
    level: String,
    ts: String,
    #[serde(default)]
    subsystem: String,
    #[serde(default)]
    event: Option<String>,
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
    let raw: Raw =
        serde_json::from_str(line.trim()).map_err(|e| AgentError::Json(e.to_string()))?;
    let ts = parse_rfc3339(&raw.ts).ok_or_else(|| AgentError::BadTs(raw.ts.clone()))?;
    let kind = classify(&raw.msg, raw.event.as_deref());
    Ok(AgentRecord {
        ts,
        level: raw.level,
        subsystem: raw.subsystem,
        msg: raw.msg,
        kind,
    })
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
            return AgentKind::Uevent {
                action: debug_field(ev, "action").unwrap_or_default(),
                devpath: debug_field(ev, "devpath").unwrap_or_default(),
                subsystem: debug_field(ev, "subsystem").unwrap_or_default(),
            };
        }
    }
    AgentKind::Other
}

/// Field of a Rust `Debug` struct rendering: `Uevent { action: "add", devpath: "/x", … }`.
fn debug_field(s: &str, name: &str) -> Option<String> {
    let pat = format!("{name}: \"");
    let start = s.find(&pat)? + pat.len();
    let rest = s.get(start..)?;
    let end = rest.find('"')?;
    rest.get(..end).map(str::to_string)
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
        match r.kind {
            AgentKind::Uevent {
                action,
                devpath,
                subsystem,
            } => {
                assert_eq!(action, "add");
                assert_eq!(subsystem, "pci");
                assert_eq!(devpath_bdf(&devpath), Some("0000:07:00.0"));
            }
            k => panic!("{k:?}"),
        }
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
