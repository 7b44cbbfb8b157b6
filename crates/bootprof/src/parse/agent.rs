//! kata-agent JSON log records (slog JSON: `msg`, `level`, `ts`, `subsystem`, extra keys).

use std::borrow::Cow;
use std::sync::LazyLock;

use serde::Deserialize;

use crate::parse::time::{parse_rfc3339, Nanos};

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
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Raw<'a> {
    #[serde(borrow)]
    pub(crate) msg: Cow<'a, str>,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    pub(crate) level: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) ts: Cow<'a, str>,
    #[serde(default, borrow)]
    #[allow(dead_code)]
    pub(crate) subsystem: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) event: Option<Cow<'a, str>>,
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
    let line = line.trim();
    let raw: Raw<'_> = match flat(line) {
        Some(raw) => raw,
        None => serde_json::from_str(line).map_err(|e| AgentError::Json(e.to_string()))?,
    };
    record(&raw)
}

/// The record of the fields read.
pub(crate) fn record(raw: &Raw<'_>) -> Result<AgentRecord, AgentError> {
    let ts = parse_rfc3339(&raw.ts).ok_or_else(|| AgentError::BadTs(raw.ts.to_string()))?;
    let kind = classify(&raw.msg, raw.event.as_deref());
    Ok(AgentRecord { ts, kind })
}

/// A kata-agent record as containerd logs it — the `vmconsole=` value, Go-quoted, holding
/// the flat object [`flat`] reads — read in one pass over the quoted text, without
/// unquoting it first. `s` is the text after the value's opening quote. Returns what
/// unquoting the value and reading it with [`flat`] gives, and the index of the value's
/// closing quote; `None` for anything else (a Go escape other than `\"` and `\\`, space
/// or text around the object, anything [`flat`] refuses), which the caller reads the long
/// way. Checked against that way by a differential property test in `journal.rs`.
pub(crate) fn flat_go_quoted(s: &str) -> Option<(Raw<'_>, usize)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut i = 1usize;
    let mut fields = Fields::default();
    let end = loop {
        // a JSON string opens with `\"` in the quoted text
        if b.get(i..i + 2) != Some(b"\\\"") {
            return None;
        }
        let (key, next) = go_json_str(s, i + 2)?;
        if b.get(next..next + 3) != Some(b":\\\"") {
            return None;
        }
        let (value, next) = go_json_str(s, next + 3)?;
        fields.set(&key, value)?;
        match b.get(next) {
            Some(b',') => i = next + 1,
            // the object is the whole value: its closing quote follows
            Some(b'}') if b.get(next + 1) == Some(&b'"') => break next + 1,
            _ => return None,
        }
    };
    Some((fields.into_raw()?, end))
}

/// A JSON string inside Go-quoted text, its opening `\"` before `start`: its value and the
/// index after its closing `\"` — what [`json_str`] reads in the unquoted text; `None`
/// where it refuses, and for a Go escape other than `\"` and `\\` or a bare quote (the
/// end of the Go value).
fn go_json_str(s: &str, start: usize) -> Option<(Cow<'_, str>, usize)> {
    let b = s.as_bytes();
    let mut owned: Option<String> = None;
    let mut from = start;
    let mut i = start;
    loop {
        i += special(b.get(i..)?);
        match *b.get(i)? {
            b'\\' => match *b.get(i + 1)? {
                // `\"`: a quote, which ends the JSON string
                b'"' => {
                    let run = s.get(from..i)?;
                    let v = match owned {
                        Some(mut o) => {
                            o.push_str(run);
                            Cow::Owned(o)
                        }
                        None => Cow::Borrowed(run),
                    };
                    return Some((v, i + 2));
                }
                // `\\`: a backslash, which starts a JSON escape; its letter follows,
                // itself Go-quoted when it is a quote or a backslash
                b'\\' => {
                    let (c, len) = match *b.get(i + 2)? {
                        b'\\' => match *b.get(i + 3)? {
                            b'"' => ('"', 4),
                            b'\\' => ('\\', 4),
                            _ => return None,
                        },
                        b'/' => ('/', 3),
                        b'n' => ('\n', 3),
                        b't' => ('\t', 3),
                        b'r' => ('\r', 3),
                        b'b' => ('\u{8}', 3),
                        b'f' => ('\u{c}', 3),
                        _ => return None,
                    };
                    // room for the rest of a typical value at once (a uevent is ~200 bytes)
                    let o = owned.get_or_insert_with(|| String::with_capacity(256));
                    o.push_str(s.get(from..i)?);
                    o.push(c);
                    i += len;
                    from = i;
                }
                _ => return None,
            },
            b'"' | 0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// The record as the kata-agent's slog writes it — one flat object of string values, no
/// whitespace — read without a general JSON parser: the fields [`Raw`] takes, or `None` for
/// anything else (another value type, whitespace, a `\\u` escape, a control character, a
/// field twice, a missing `msg` or `ts`, text after the object), which `serde_json` then
/// reads (or refuses) as before. Whatever this accepts, `serde_json` reads the same
/// (checked by a differential property test).
pub(crate) fn flat(s: &str) -> Option<Raw<'_>> {
    let b = s.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut i = 1usize;
    let mut fields = Fields::default();
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (key, next) = json_str(s, i + 1)?;
        if b.get(next) != Some(&b':') || b.get(next + 1) != Some(&b'"') {
            return None;
        }
        let (value, next) = json_str(s, next + 2)?;
        fields.set(&key, value)?;
        match b.get(next) {
            Some(b',') => i = next + 1,
            Some(b'}') if next + 1 == b.len() => break,
            _ => return None,
        }
    }
    fields.into_raw()
}

/// The fields [`Raw`] takes, as the fast paths ([`flat`], [`flat_go_quoted`]) meet them.
#[derive(Default)]
struct Fields<'a> {
    msg: Option<Cow<'a, str>>,
    level: Option<Cow<'a, str>>,
    ts: Option<Cow<'a, str>>,
    subsystem: Option<Cow<'a, str>>,
    event: Option<Cow<'a, str>>,
}

impl<'a> Fields<'a> {
    /// Keep `value` if `key` is one of ours; `None` for a field seen twice (which the fast
    /// paths leave to `serde_json`).
    fn set(&mut self, key: &str, value: Cow<'a, str>) -> Option<()> {
        let f = match key {
            "msg" => &mut self.msg,
            "level" => &mut self.level,
            "ts" => &mut self.ts,
            "subsystem" => &mut self.subsystem,
            "event" => &mut self.event,
            _ => return Some(()),
        };
        if f.is_some() {
            return None;
        }
        *f = Some(value);
        Some(())
    }

    /// The record, or `None` without `msg` or `ts`.
    fn into_raw(self) -> Option<Raw<'a>> {
        Some(Raw {
            msg: self.msg?,
            level: self.level.unwrap_or_default(),
            ts: self.ts?,
            subsystem: self.subsystem.unwrap_or_default(),
            event: self.event,
        })
    }
}

/// A JSON string whose opening quote is before `start`: its value and the index after its
/// closing quote; `None` for a control character, a `\\u` escape or an unknown one.
fn json_str(s: &str, start: usize) -> Option<(Cow<'_, str>, usize)> {
    let b = s.as_bytes();
    let mut owned: Option<String> = None;
    let mut from = start;
    let mut i = start;
    loop {
        let c = *b.get(i)?;
        match c {
            b'"' => {
                let run = s.get(from..i)?;
                let v = match owned {
                    Some(mut o) => {
                        o.push_str(run);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(run),
                };
                return Some((v, i + 1));
            }
            b'\\' => {
                let o = owned.get_or_insert_with(String::new);
                o.push_str(s.get(from..i)?);
                o.push(match *b.get(i + 1)? {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'n' => '\n',
                    b't' => '\t',
                    b'r' => '\r',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    _ => return None,
                });
                i += 2;
                from = i;
            }
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// Where the first `\\`, `"` or control character of `b` is (`b.len()` if none): eight
/// bytes at a time (SWAR), as the runs between a payload's escapes are short.
fn special(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = b.chunks_exact(8);
    let mut at = 0usize;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w);
        let q = x ^ (ONES * u64::from(b'"'));
        let s = x ^ (ONES * u64::from(b'\\'));
        // a zero byte of q or s, or a byte of x below 0x20, is a match; a borrow only
        // flags bytes above a true match, so the lowest flagged byte is always one
        let m = (q.wrapping_sub(ONES) & !q & HIGH)
            | (s.wrapping_sub(ONES) & !s & HIGH)
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + chunks
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(chunks.remainder().len())
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
            let devpath = debug_field(ev, &DEVPATH).unwrap_or_default();
            let subsystem = debug_field(ev, &SUBSYSTEM).unwrap_or_default();
            return AgentKind::Uevent {
                action: UeventAction::parse(debug_field(ev, &ACTION).unwrap_or_default()),
                memory: subsystem == "memory" || devpath.starts_with("/devices/system/memory/"),
                bdf: devpath_bdf(devpath).map(str::to_string),
            };
        }
    }
    AgentKind::Other
}

type Finder = LazyLock<memchr::memmem::Finder<'static>>;
static ACTION: Finder = LazyLock::new(|| memchr::memmem::Finder::new("action: \""));
static DEVPATH: Finder = LazyLock::new(|| memchr::memmem::Finder::new("devpath: \""));
static SUBSYSTEM: Finder = LazyLock::new(|| memchr::memmem::Finder::new("subsystem: \""));

/// Field of a Rust `Debug` struct rendering: `Uevent { action: "add", devpath: "/x", … }`;
/// `pat` finds the field's name followed by `: "`.
fn debug_field<'a>(s: &'a str, pat: &memchr::memmem::Finder<'_>) -> Option<&'a str> {
    let start = pat.find(s.as_bytes())? + pat.needle().len();
    let rest = s.get(start..)?;
    let end = memchr::memchr(b'"', rest.as_bytes())?;
    rest.get(..end)
}

/// PCI BDF at the end of a sysfs devpath (`/devices/pci0000:00/0000:00:0a.0/0000:07:00.0`).
pub fn devpath_bdf(devpath: &str) -> Option<&str> {
    let last = devpath.rsplit('/').next()?;
    crate::parse::dmesg::is_bdf(last).then_some(last)
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

    /// Whatever the fast path reads, serde_json reads the same; what it does not, serde_json
    /// decides. Records built from the agent's fields and pieces that break the fast path.
    #[test]
    fn flat_records_read_as_serde_reads_them() {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just(r#""msg":"got uevent message""#.to_string()),
            Just(r#""msg":"a \"quoted\" \\ \/ \n\t\r\b\f word""#.to_string()),
            Just(r#""msg":"\u00e9t\u00e9""#.to_string()),
            Just(r#""level":"INFO""#.to_string()),
            Just(r#""level":3"#.to_string()),
            Just(r#""ts":"2025-11-20T17:58:13.5Z""#.to_string()),
            Just(r#""ts":"2025-11-20T17:58:13.5Z ""#.to_string()),
            Just(r#""subsystem":"uevent""#.to_string()),
            Just(r#""subsystem":null"#.to_string()),
            Just(r#""event":"Uevent { action: \"add\", devpath: \"/devices/system/memory/memory9\", subsystem: \"memory\" }""#.to_string()),
            Just(r#""pid":"1""#.to_string()),
            Just(r#""pid":1"#.to_string()),
            Just(r#""version":{"a":["b"]}"#.to_string()),
            Just(r#" "name" : "kata-agent" "#.to_string()),
            Just("\"ctl\":\"a\u{1}b\"".to_string()),
            Just(r#""bad":"\q""#.to_string()),
            Just(r#""m\u0073g":"x""#.to_string()),
            "[a-z\\\\\":,{} ]{0,12}",
        ];
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(4000));
        runner
            .run(
                &(
                    prop::collection::vec(piece, 0..9),
                    any::<bool>(),
                    "[ x}]{0,2}",
                ),
                |(pieces, brace, tail)| {
                    let mut s = String::from("{");
                    s.push_str(&pieces.join(","));
                    if brace {
                        s.push('}');
                    }
                    s.push_str(&tail);
                    let serde: Result<Raw<'_>, _> = serde_json::from_str(s.trim());
                    if let Some(f) = flat(s.trim()) {
                        let Ok(r) = serde else {
                            panic!("fast path read what serde refuses: {s}");
                        };
                        prop_assert_eq!(
                            (&f.msg, &f.level, &f.ts, &f.subsystem, &f.event),
                            (&r.msg, &r.level, &r.ts, &r.subsystem, &r.event),
                            "{}",
                            s
                        );
                    }
                    Ok(())
                },
            )
            .unwrap();
        // and it reads the agent's own records
        let rec = r#"{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T16:05:15.71233274Z","subsystem":"uevent","pid":"1","version":"0.1.0","source":"agent","name":"kata-agent","event":"Uevent { action: \"add\", devpath: \"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\", devname: \"\", subsystem: \"pci\", seqnum: \"1379\", interface: \"\" }"}"#;
        assert!(flat(rec).is_some());
    }

    #[test]
    fn swar_finds_the_first_special_byte() {
        let naive = |b: &[u8]| {
            b.iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(b.len())
        };
        let mut cases: Vec<Vec<u8>> = vec![b"".to_vec(), b"abc".to_vec()];
        for len in 0..24 {
            for at in 0..=len {
                for c in [b'"', b'\\', 0, 0x1f, b'\n'] {
                    // bytes one bit or one step from a match before it
                    let mut v: Vec<u8> = (0..len)
                        .map(|i| [b'#', b']', 0x22 ^ 0x80, 0x20, 0x9f, 0xa0, b'a'][i % 7])
                        .collect();
                    if at < len {
                        v[at] = c;
                    }
                    cases.push(v);
                }
            }
        }
        cases.push("é\"ü".as_bytes().to_vec());
        for c in &cases {
            assert_eq!(special(c), naive(c), "{c:?}");
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
