//! The Rust Kata shim (runtime-rs) in the host journal.
//!
//! From Kata 3.20 (kata-containers#11590, August 2025) runtime-rs logs through journald
//! under the identifier `kata`, the shim's pid in brackets, and the message alone: no
//! `time=`, no `level=`, no `sandbox=` (the fields go to the journal's own fields, which
//! `journalctl`'s short formats do not print). Three kinds of message matter here:
//!
//! * the guest console, one line each: `vm console: "…"`, the line as Rust's `{:?}` writes a
//!   string (`\"`, `\\`, `\u{1b}` escapes);
//! * the kata-agent's records forwarded as they are: `{"msg":…,"source":"agent",…}`;
//! * the shim's own messages: `Starting QEMU VM`, `qemu cmd: Command { … }`, `qemu process
//!   started`, `QMP initialized: …`, `start vm`, `begin to connect agent …`, `QMP not ready
//!   yet: …`, `begin stop sandbox`, …
//!
//! None names its sandbox by a key. The shim's pid does: one shim serves one sandbox, and
//! some of its messages name the sandbox in passing (the QEMU command line's
//! `/run/kata/ID/` paths and `-name sandbox-ID`); [`sandbox_named`] finds those, and the
//! reader gives the pid's other lines that sandbox. The Go shim also logs under `kata[PID]`,
//! in logfmt (`time="…" level=… msg=…`): those lines are not this reader's.
//!
//! A journal exported as JSON (`journalctl -o json`) keeps what the short formats drop: the
//! shim's fields, among them `SOURCE` (the sandbox id: runtime-rs names its logger's source
//! after it) and `PRIORITY` (its level); the reader takes both from there.

use std::sync::LazyLock;

/// A runtime-rs line: journald's prefix, the shim's pid, what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct RsLine<'a> {
    pub prefix: Option<super::journal::PrefixTime>,
    pub host: Option<&'a str>,
    pub pid: u32,
    pub payload: Payload<'a>,
}

/// What a runtime-rs line carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A guest console line, unescaped.
    Console(String),
    /// A kata-agent record (JSON), as logged.
    Agent(&'a str),
    /// The shim's own message.
    Message(&'a str),
}

/// The identifier runtime-rs logs under.
const IDENT: &str = "kata";
static KATA: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b" kata["));
static CONTAINERD: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b" containerd["));
/// How the shim logs a guest console line.
const CONSOLE: &str = "vm console: ";

/// Reads `line` if it is a runtime-rs line: a journald prefix (any of the short formats),
/// the `kata[PID]` identifier, and a message that is not the Go shim's logfmt. `None` for
/// every other line (cheaply for lines without ` kata[` near their start).
pub fn parse(line: &str) -> Option<RsLine<'_>> {
    let at = after_ident(line, &KATA)?;
    if line.get(at..)?.starts_with("time=") {
        return None; // the Go shim's logfmt
    }
    let (prefix, host, unit, msg) = super::journal::split_prefix(line);
    if unit != Some(IDENT) || prefix.is_none() {
        return None;
    }
    // the pid between `kata[` and `]: `
    let ident = line.get(..at - 3)?;
    let pid: u32 = ident.get(ident.rfind('[')? + 1..)?.parse().ok()?;
    Some(RsLine {
        prefix,
        host,
        pid,
        payload: payload(msg)?,
    })
}

/// A runtime-rs record as Kata 3.0–3.19 wrote them: slog's JSON into containerd's log
/// pipe, which containerd copies to its own journal (`containerd[PID]: {"msg":…,"level":
/// "INFO","ts":…,"pid":SHIM,"subsystem":…,"name":"kata-runtime","source":SANDBOX,…}`,
/// kata-containers#11496, #8442). The logger's `source` is the sandbox id.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonRecord<'a> {
    pub prefix: Option<super::journal::PrefixTime>,
    pub host: Option<&'a str>,
    pub msg: String,
    /// `ts`, on the host's clock, and its zone offset (seconds).
    pub ts: Option<(crate::parse::time::Nanos, Option<i64>)>,
    pub pid: Option<u32>,
    pub source: Option<String>,
    /// slog's level names: `ERRO` and `CRIT` are errors.
    pub is_error: bool,
}

#[derive(serde::Deserialize)]
struct JsonFields {
    msg: String,
    #[serde(default)]
    level: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    pid: Option<serde_json::Value>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// Reads `line` if it is a runtime-rs JSON record in containerd's journal (see
/// [`JsonRecord`]); `None` for every other line, `Some(Err)` for one that claims to be
/// (`"name":"kata-runtime"` after a `containerd[PID]: {` prefix) and does not parse.
pub fn json_record(line: &str) -> Option<Result<JsonRecord<'_>, String>> {
    let at = after_ident(line, &CONTAINERD)?;
    if !line.get(at..)?.starts_with('{') {
        return None; // containerd's own logfmt: most lines of its journal, looked at no further
    }
    let (prefix, host, unit, msg) = super::journal::split_prefix(line);
    if unit != Some("containerd") {
        return None;
    }
    json_message(msg).map(|r| r.map(|r| JsonRecord { prefix, host, ..r }))
}

/// A runtime-rs JSON record without journald's prefix: containerd's `MESSAGE` in `-o json`,
/// a line of `-o cat`. `None` for anything else.
pub fn json_message(msg: &str) -> Option<Result<JsonRecord<'static>, String>> {
    let msg = msg.trim();
    if !msg.starts_with('{') || !msg.contains("\"kata-runtime\"") {
        return None;
    }
    let f: JsonFields = match serde_json::from_str(msg) {
        Ok(f) => f,
        Err(e) => return Some(Err(format!("runtime-rs record: {e}"))),
    };
    if f.name.as_deref() != Some("kata-runtime") {
        return None;
    }
    let ts = match f.ts.as_deref() {
        None => None,
        Some(t) => match crate::parse::time::parse_rfc3339_zoned(t) {
            Some(v) => Some(v),
            None => return Some(Err(format!("runtime-rs record: bad ts {t:?}"))),
        },
    };
    let pid = match f.pid {
        Some(serde_json::Value::String(p)) => p.parse().ok(),
        Some(serde_json::Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        _ => None,
    };
    Some(Ok(JsonRecord {
        prefix: None,
        host: None,
        msg: f.msg,
        ts,
        pid,
        source: f.source.filter(|s| is_sandbox_id(s)),
        is_error: matches!(f.level.as_deref(), Some("ERRO" | "CRIT")),
    }))
}

/// Where the message starts after the journald identifier `ident` (` kata[`, with its
/// pid and `]: `) in the first 120 bytes of `line`: the cheap look every line gets.
fn after_ident(line: &str, ident: &memchr::memmem::Finder<'_>) -> Option<usize> {
    let b = line.as_bytes();
    let head = b.get(..b.len().min(120)).unwrap_or(b);
    let at = ident.find(head)? + ident.needle().len();
    let digits = b
        .get(at..)?
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let end = at + digits;
    (digits > 0 && b.get(end..end + 3) == Some(b"]: ")).then_some(end + 3)
}

/// What a runtime-rs message carries; `None` for the Go shim's logfmt (`time="…" …`).
pub fn payload(msg: &str) -> Option<Payload<'_>> {
    if msg.starts_with("time=") {
        return None;
    }
    Some(if let Some(q) = msg.strip_prefix(CONSOLE) {
        Payload::Console(unescape_debug(q.trim_end()).unwrap_or_else(|| q.to_string()))
    } else if msg.starts_with('{') && crate::parse::agent::looks_like(msg) {
        Payload::Agent(msg)
    } else {
        Payload::Message(msg)
    })
}

/// Whether `s` is a sandbox id as Kata makes them: 64 hex digits.
pub fn is_sandbox_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The shim's messages of a boot that failed, which runtime-rs logs at error level (a level
/// journald's short formats do not print): QEMU's monitor never answering (`couldn't
/// initialise QMP: …`, kata-containers#13084) and the shim itself failing (`failed run shim
/// …`).
pub fn is_failure(msg: &str) -> bool {
    ["couldn't initialise QMP", "failed run shim"]
        .iter()
        .any(|w| msg.starts_with(w))
}

/// The sandbox a runtime-rs message names in passing: a `/run/kata/ID/` or `/run/vc/vm/ID/`
/// path, or QEMU's `-name sandbox-ID` (`"sandbox-ID"` in the command's `{:?}`), the id 64
/// hex digits.
pub fn sandbox_named(msg: &str) -> Option<&str> {
    for key in ["/run/kata/", "/run/vc/vm/", "sandbox-"] {
        let mut from = 0;
        while let Some(i) = msg.get(from..).and_then(|r| r.find(key)) {
            let start = from + i + key.len();
            let id = msg.get(start..start + 64);
            let after = msg.as_bytes().get(start + 64).copied();
            if let Some(id) = id.filter(|id| is_sandbox_id(id)) {
                if !after.is_some_and(|b| b.is_ascii_alphanumeric()) {
                    return Some(id);
                }
            }
            from = start;
        }
    }
    None
}

/// A string as Rust's `{:?}` writes it (`"…"`, with `\"`, `\\`, `\n`, `\r`, `\t`, `\0`, `\'`
/// and `\u{…}` escapes) back to its text; `None` when `s` is not one.
pub fn unescape_debug(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '"' {
            return None; // an unescaped quote inside
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            '0' => out.push('\0'),
            e @ ('\\' | '"' | '\'') => out.push(e),
            'u' => {
                if chars.next()? != '{' {
                    return None;
                }
                let hex: String = chars.by_ref().take_while(|&h| h != '}').collect();
                if hex.is_empty() || hex.len() > 6 {
                    return None;
                }
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SID: &str = "9f3c1d2e4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

    #[test]
    fn the_three_kinds_of_line() {
        let l = parse(r#"Mar 03 10:14:09 gpu-node-7 kata[88213]: vm console: "[    1.503221] Run /init as init process""#).unwrap();
        assert_eq!(l.pid, 88213);
        assert_eq!(l.host, Some("gpu-node-7"));
        assert_eq!(
            l.payload,
            Payload::Console("[    1.503221] Run /init as init process".into())
        );
        let agent = r#"{"msg":"rpc call from shim to agent: \"create_sandbox\"","level":"INFO","ts":"2026-03-03T10:14:12.204411Z","source":"agent","name":"kata-agent"}"#;
        let line = format!("Mar 03 10:14:12 n kata[7]: {agent}");
        assert_eq!(parse(&line).unwrap().payload, Payload::Agent(agent));
        let l = parse("2026-03-03T10:14:09.120000+00:00 n kata[7]: start vm").unwrap();
        assert_eq!(l.payload, Payload::Message("start vm"));
        // the Go shim's logfmt, other units, no prefix: not this reader's
        assert!(parse(
            r#"Mar 03 10:14:09 n kata[7]: time="2026-03-03T10:14:09Z" level=info msg="Starting VM""#
        )
        .is_none());
        assert!(parse("Mar 03 10:14:09 n containerd[7]: start vm").is_none());
        assert!(parse("Mar 03 10:14:09 n kata-proxy[7]: start vm").is_none());
        assert!(parse("kata[7]: start vm").is_none());
    }

    #[test]
    fn a_console_line_keeps_its_escapes_meaning() {
        let l = parse(r#"Dec 15 19:55:11 h kata[3]: vm console: "\u{1b}[90m[\u{1b}[0m2025-12-15T11:55:11Z \u{1b}[33mWARN \u{1b}[0m kms\u{1b}[90m]\u{1b}[0m Os { message: \"No such file\" }""#).unwrap();
        assert_eq!(
            l.payload,
            Payload::Console(
                "\u{1b}[90m[\u{1b}[0m2025-12-15T11:55:11Z \u{1b}[33mWARN \u{1b}[0m kms\u{1b}[90m]\u{1b}[0m Os { message: \"No such file\" }".into()
            )
        );
    }

    #[test]
    fn sandboxes_named_in_passing() {
        let cmd = format!(
            r#"qemu cmd: Command {{ std: "/opt/kata/bin/qemu-system-x86_64" "-name" "sandbox-{SID}" "-chardev" "socket,path=/run/kata/{SID}/console.sock" }}"#
        );
        assert_eq!(sandbox_named(&cmd), Some(SID));
        assert_eq!(
            sandbox_named(&format!("path=/run/vc/vm/{SID}/qmp.sock")),
            Some(SID)
        );
        assert_eq!(sandbox_named("start vm"), None);
        // too short, too long, not hex
        assert_eq!(sandbox_named(&format!("/run/kata/{}/", &SID[..63])), None);
        assert_eq!(sandbox_named(&format!("/run/kata/{SID}a/")), None);
        assert_eq!(
            sandbox_named(&format!("sandbox-{}", SID.replace('f', "g"))),
            None
        );
    }

    proptest! {
        /// `{:?}` of any string reads back as the string.
        #[test]
        fn debug_strings_read_back(s in ".{0,80}") {
            prop_assert_eq!(unescape_debug(&format!("{s:?}")), Some(s));
        }

        /// No input panics; a line that is read keeps its pid.
        #[test]
        fn any_line_is_safe(pid in 1u32..4_000_000, msg in ".{0,60}") {
            let line = format!("Mar 03 10:14:09 n kata[{pid}]: {msg}");
            let _ = unescape_debug(&msg);
            let _ = sandbox_named(&msg);
            if let Some(l) = parse(&line) {
                prop_assert_eq!(l.pid, pid);
            }
        }
    }
}
