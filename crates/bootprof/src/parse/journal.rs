//! containerd journal lines: journald short format in any locale (`Nov 20 16:25:32 host
//! containerd[pid]: `, `1月 19 21:11:37 host kata[pid]: `), short-precise, short-iso or
//! short-full, followed by logrus logfmt fields (`time="…" level=debug msg="…" pid=…
//! sandbox=… vmconsole="…"`). The `vmconsole` value is one line of the guest console: a
//! guest kernel line or a kata-agent JSON record, Go-quoted inside the field. CRI errors
//! that name their sandbox only in the text (`RunPodSandbox … failed to start sandbox "ID"`,
//! `CreateContainer within sandbox "ID" …`) are attributed to that sandbox.

use std::borrow::Cow;

use crate::parse::time::{parse_rfc3339, parse_rfc3339_zoned, parse_utc_offset, LocalStamp, Nanos};

/// The fields of one containerd journal line that the boot timeline uses.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalLine {
    /// journald prefix time (short format has no year or zone; see [`PrefixTime`]).
    pub prefix: Option<PrefixTime>,
    /// The journal's host field (`_HOSTNAME`: the node), when the journald prefix is present.
    pub host: Option<String>,
    /// Syslog identifier (`containerd`, `kata`), when the journald prefix is present.
    pub unit: Option<String>,
    /// logrus `time=` (UTC, nanoseconds) — the host clock of record.
    pub time: Option<Nanos>,
    /// The zone `time=` was written in (seconds east of UTC), if it names one.
    pub time_zone: Option<i64>,
    pub level: Option<String>,
    pub msg: Option<String>,
    pub sandbox: Option<String>,
    /// `pid=`: the shim process that wrote the line (one per boot of a sandbox).
    pub pid: Option<u32>,
    /// `error=`: why an operation failed.
    pub error: Option<String>,
    /// Unquoted `vmconsole=` value: one guest console line.
    pub vmconsole: Option<String>,
    /// `vfio-device-BDF=`: the host device a VFIO hot-plug line is about.
    pub device: Option<String>,
}

/// [`JournalLine`] borrowed from the line: values are unquoted only when asked for, so a
/// reader pays for the fields it uses (the ingest reads a console payload straight into
/// its parser and never copies the message of a console line).
#[derive(Debug, Clone, PartialEq)]
pub struct JournalRef<'a> {
    pub prefix: Option<PrefixTime>,
    pub host: Option<&'a str>,
    pub unit: Option<&'a str>,
    pub time: Option<Nanos>,
    pub time_zone: Option<i64>,
    pub level: Option<RawValue<'a>>,
    pub msg: Option<RawValue<'a>>,
    /// `sandbox=`, or the sandbox a CRI error names in its text.
    pub sandbox: Option<Cow<'a, str>>,
    pub pid: Option<u32>,
    pub error: Option<RawValue<'a>>,
    pub vmconsole: Option<RawValue<'a>>,
    /// `vfio-device-BDF=`.
    pub device: Option<RawValue<'a>>,
    /// `name=` and `source=`: Kata 1.x's proxy relays the guest's console as
    /// `name=kata-proxy … source=agent` lines ([`JournalRef::proxy_console`]).
    pub name: Option<RawValue<'a>>,
    pub source: Option<RawValue<'a>>,
    /// `container=`: Kata 1.x's `kata-runtime` names only the container on some of its
    /// lines (the sandbox's own id for the sandbox's container).
    pub container: Option<RawValue<'a>>,
    /// `subsystem=`: Kata 1.x relays QEMU's stderr under `subsystem=qmp`.
    pub subsystem: Option<RawValue<'a>>,
    /// `qemuPid=`: the Go shim (2.x on) relays each line of QEMU's stderr with it.
    pub qemu_pid: Option<RawValue<'a>>,
    /// The `vmconsole=` value's kata-agent record, when [`parse_ref_into`] read it straight
    /// from the quoted text (and so left the unquoted console text empty).
    pub(crate) vmconsole_agent: Option<crate::parse::agent::Raw<'a>>,
    /// The `time=` value as written, when it holds no escape (the text `time` was read
    /// from).
    pub(crate) time_text: Option<&'a str>,
}

impl JournalRef<'_> {
    /// The guest console line a Kata 1.x `kata-proxy` line carries in its `msg=`
    /// (`msg="[    0.566334] IPVS: …\n" name=kata-proxy pid=… [sandbox=…] source=agent`):
    /// the message unquoted, without the line end the proxy appends.
    pub fn proxy_console(&self) -> Option<String> {
        let is = |v: &Option<RawValue<'_>>, s: &str| v.is_some_and(|v| v.is(s));
        if self.vmconsole.is_some() || !is(&self.name, "kata-proxy") || !is(&self.source, "agent") {
            return None;
        }
        let m = self.msg?.get();
        Some(m.strip_suffix('\n').unwrap_or(&m).to_string())
    }

    /// The owned line.
    pub fn to_owned_line(&self) -> JournalLine {
        let get = |v: &Option<RawValue<'_>>| v.map(|v| v.get().into_owned());
        JournalLine {
            prefix: self.prefix,
            host: self.host.map(str::to_string),
            unit: self.unit.map(str::to_string),
            time: self.time,
            time_zone: self.time_zone,
            level: get(&self.level),
            msg: get(&self.msg),
            sandbox: self.sandbox.as_ref().map(|s| s.to_string()),
            pid: self.pid,
            error: get(&self.error),
            vmconsole: get(&self.vmconsole),
            device: get(&self.device),
        }
    }
}

/// A logfmt value as written: bare, or the text between the quotes of a Go-quoted one,
/// its escapes still in it (they were checked when the value was read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawValue<'a> {
    text: &'a str,
    /// Holds a backslash escape.
    escaped: bool,
}

impl<'a> RawValue<'a> {
    /// The value, unquoted; borrowed when it holds no escape.
    pub fn get(&self) -> Cow<'a, str> {
        if self.escaped {
            Cow::Owned(unescape(self.text))
        } else {
            Cow::Borrowed(self.text)
        }
    }

    /// The value unquoted into `buf` (cleared first): a reader that parses it at once
    /// needs no allocation per line.
    pub fn get_into<'b>(&self, buf: &'b mut String) -> &'b str
    where
        'a: 'b,
    {
        buf.clear();
        if self.escaped {
            unescape_into(self.text, buf);
        } else {
            buf.push_str(self.text);
        }
        buf.as_str()
    }

    /// The value as written (between its quotes, escapes still in it).
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// Whether the unquoted value is `s`.
    pub fn is(&self, s: &str) -> bool {
        if self.escaped {
            unescape(self.text) == s
        } else {
            self.text == s
        }
    }
}

/// journald prefix time as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PrefixTime {
    /// short-iso / short-full: a complete instant.
    Absolute(Nanos),
    /// short / short-precise: local wall clock without year or zone.
    Local(LocalStamp),
}

/// One entry of a journal exported as JSON, one object a line (`journalctl -o json`, or
/// `-o json-seq` with its leading record separator): the message and the journal's own
/// fields the boot timeline uses. Values are strings; a binary or multi-line `MESSAGE` is
/// an array of bytes, a field given twice an array of values.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportEntry<'a> {
    /// `MESSAGE`: for containerd, the logfmt line (`time="…" level=… msg=… sandbox=…`).
    pub message: String,
    /// `__REALTIME_TIMESTAMP`: when journald received the entry (µs since the epoch, UTC).
    pub realtime: Option<Nanos>,
    /// `_HOSTNAME`: the node.
    pub host: Option<&'a str>,
    /// `SYSLOG_IDENTIFIER`, `_PID`, `PRIORITY` and `SOURCE`: what the Rust shim's entries
    /// are read by ([`crate::parse::runtime_rs`]).
    pub ident: Option<String>,
    pub pid: Option<u32>,
    pub priority: Option<u8>,
    pub source: Option<String>,
}

#[derive(serde::Deserialize)]
struct ExportFields {
    #[serde(rename = "MESSAGE", default)]
    message: Option<serde_json::Value>,
    #[serde(rename = "__REALTIME_TIMESTAMP", default)]
    realtime: Option<String>,
    #[serde(rename = "_HOSTNAME", default)]
    host: Option<String>,
    #[serde(rename = "SYSLOG_IDENTIFIER", default)]
    ident: Option<serde_json::Value>,
    #[serde(rename = "_PID", default)]
    pid: Option<serde_json::Value>,
    #[serde(rename = "PRIORITY", default)]
    priority: Option<serde_json::Value>,
    #[serde(rename = "SOURCE", default)]
    source: Option<serde_json::Value>,
}

/// A field's text: its value, or its first when given several times.
fn field_text(v: Option<serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Array(a) => match a.into_iter().next()? {
            serde_json::Value::String(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// A journald JSON export's field that every entry has: what tells its lines apart from a
/// kata-agent record, which is JSON too.
const EXPORT_MARK: &str = "\"__REALTIME_TIMESTAMP\"";

/// Read `line` as a journald JSON export entry: `None` when it is not one (not a JSON
/// object naming `__REALTIME_TIMESTAMP`), `Some(Err(why))` when it is one that does not
/// parse or whose `MESSAGE` is not text.
pub fn export_entry(line: &str) -> Option<Result<ExportEntry<'_>, String>> {
    let line = line.trim().trim_start_matches('\u{1e}');
    if !line.starts_with('{') || !line.contains(EXPORT_MARK) {
        return None;
    }
    Some(export_fields(line))
}

fn export_fields(line: &str) -> Result<ExportEntry<'_>, String> {
    let f: ExportFields =
        serde_json::from_str(line).map_err(|e| format!("journal JSON export: {e}"))?;
    let message = match f.message {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        // bytes: the message as journald stored it
        Some(serde_json::Value::Array(a)) if a.iter().all(|v| v.is_u64()) => {
            let bytes: Option<Vec<u8>> = a
                .iter()
                .map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            let bytes = bytes.ok_or("journal JSON export: MESSAGE byte out of range")?;
            String::from_utf8(bytes)
                .map_err(|_| "journal JSON export: MESSAGE is not UTF-8".to_string())?
        }
        // the field given more than once: its first value
        Some(serde_json::Value::Array(a)) => match a.first() {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => return Err("journal JSON export: MESSAGE array holds no text".into()),
        },
        Some(_) => return Err("journal JSON export: MESSAGE is not a string".into()),
    };
    let realtime = match f.realtime.as_deref() {
        None => None,
        Some(us) => {
            let us: i64 = us
                .parse()
                .map_err(|_| format!("journal JSON export: __REALTIME_TIMESTAMP {us:?}"))?;
            Some(
                us.checked_mul(1000)
                    .ok_or("journal JSON export: __REALTIME_TIMESTAMP out of range")?,
            )
        }
    };
    let host = f
        .host
        .and_then(|h| borrowed_value(line, "\"_HOSTNAME\"", &h));
    Ok(ExportEntry {
        message,
        realtime,
        host,
        ident: field_text(f.ident),
        pid: field_text(f.pid).and_then(|p| p.parse().ok()),
        priority: field_text(f.priority).and_then(|p| p.parse().ok()),
        source: field_text(f.source),
    })
}

/// The string value `value` of the JSON member `key` (quoted) in `line`, borrowed from
/// the line: found where it is written without escapes (a host name has none).
fn borrowed_value<'a>(line: &'a str, key: &str, value: &str) -> Option<&'a str> {
    if value.is_empty() {
        return None;
    }
    line.match_indices(key).find_map(|(at, _)| {
        let rest = line.get(at + key.len()..)?.trim_start();
        let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
        let v = rest.get(..value.len())?;
        (v == value && rest.get(value.len()..)?.starts_with('"')).then_some(v)
    })
}

/// Why a line that looked like a journal line could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("unterminated quoted value for `{0}`")]
    Unterminated(String),
    #[error("bad escape in quoted value for `{0}`")]
    BadEscape(String),
    #[error("bad time= value")]
    BadTime,
}

/// Parse one journal line. `Ok(None)`: not a logfmt journal line at all.
pub fn parse_line(line: &str) -> Result<Option<JournalLine>, JournalError> {
    Ok(parse_ref(line)?.map(|j| j.to_owned_line()))
}

/// Parse one journal line, borrowing from it. `Ok(None)`: not a logfmt journal line.
pub fn parse_ref(line: &str) -> Result<Option<JournalRef<'_>>, JournalError> {
    parse_ref_with(line, None)
}

/// [`parse_ref`], unquoting the `vmconsole=` payload into `console` (cleared first) as it is
/// read: one pass over the payload where [`RawValue::get_into`] would make two. A payload
/// that is a kata-agent record is read straight from the quoted text instead
/// (`JournalRef::vmconsole_agent`), and `console` is left empty.
pub fn parse_ref_into<'a>(
    line: &'a str,
    console: &mut String,
) -> Result<Option<JournalRef<'a>>, JournalError> {
    console.clear();
    parse_ref_with(line, Some(console))
}

fn parse_ref_with<'a>(
    line: &'a str,
    console: Option<&mut String>,
) -> Result<Option<JournalRef<'a>>, JournalError> {
    let (prefix, host, unit, body) = split_prefix(line);
    // logfmt body must start with a key=; containerd's start with time=
    let body = body.trim_start();
    if !(body.starts_with("time=") || body.starts_with("level=") || body.starts_with("msg=")) {
        return Ok(None);
    }
    let mut out = JournalRef {
        prefix,
        host,
        unit,
        time: None,
        time_zone: None,
        level: None,
        msg: None,
        sandbox: None,
        pid: None,
        error: None,
        vmconsole: None,
        device: None,
        name: None,
        source: None,
        container: None,
        subsystem: None,
        qemu_pid: None,
        vmconsole_agent: None,
        time_text: None,
    };
    let mut it = LogfmtIter::new(body);
    it.console = console;
    // containerd's `shim disconnected` names the shim (one per sandbox) by `id=`
    let mut id: Option<RawValue<'a>> = None;
    while let Some(kv) = it.next() {
        let (k, v) = kv?;
        match k {
            "time" => {
                let (t, z) = parse_rfc3339_zoned(&v.get()).ok_or(JournalError::BadTime)?;
                out.time = Some(t);
                out.time_zone = z;
                out.time_text = (!v.escaped).then_some(v.text);
            }
            "level" => out.level = Some(v),
            "msg" => out.msg = Some(v),
            "sandbox" => out.sandbox = Some(v.get()),
            "pid" => out.pid = v.get().parse().ok(),
            "error" => out.error = Some(v),
            "vmconsole" => {
                out.vmconsole = Some(v);
                out.vmconsole_agent = it.agent.take();
            }
            "vfio-device-BDF" => out.device = Some(v),
            "id" => id = Some(v),
            "name" => out.name = Some(v),
            "source" => out.source = Some(v),
            "container" => out.container = Some(v),
            "subsystem" => out.subsystem = Some(v),
            "qemuPid" => out.qemu_pid = Some(v),
            _ => {}
        }
    }
    if out.sandbox.is_none() && out.msg.is_some_and(|m| is_shim_disconnected(m.text())) {
        out.sandbox = id.map(|v| v.get());
    }
    if out.sandbox.is_none() {
        out.sandbox = [&out.msg, &out.error]
            .into_iter()
            .flatten()
            .find_map(|t| sandbox_in_text(&t.get()))
            .map(Cow::Owned);
    }
    Ok(Some(out))
}

/// containerd's messages of a shim gone, which name it (its sandbox) by `id=` (`cleaning up
/// dead shim` from containerd v2.1.1, kata-containers#13313).
pub fn is_shim_disconnected(msg: &str) -> bool {
    matches!(
        msg,
        "shim disconnected" | "cleaning up after shim disconnected" | "cleaning up dead shim"
    )
}

/// Whether a shim or containerd message stops the sandbox: the Kata Go shim's `Stopping
/// Sandbox` (QEMU), `Stopping sandbox in the VM`, `Stopping VM`, Cloud Hypervisor's `Stop
/// Sandbox` / `Stopping Cloud Hypervisor`, runtime-rs's `begin stop sandbox`, `sandbox
/// stopped`, `Stopping QEMU VM`; the Go shim's `sandbox stopped unexpectedly` (its watcher
/// of a VM that died, kata-containers#4880); containerd's `StopPodSandbox for "ID"`, `shim
/// disconnected`, `cleaning up after shim disconnected`.
pub fn is_stop(msg: &str) -> bool {
    matches!(
        msg,
        "Stopping Sandbox"
            | "Stopping sandbox in the VM"
            | "Stopping VM"
            | "Stop Sandbox"
            | "Stopping Cloud Hypervisor"
            | "begin stop sandbox"
            | "sandbox stopped"
            | "sandbox stopped during Init"
            | "Stopping QEMU VM"
            | "sandbox stopped unexpectedly"
    ) || (msg.starts_with("StopPodSandbox for ") && !msg.ends_with("failed"))
        || is_shim_disconnected(msg)
}

/// The sandbox a CRI message names in its text: `… sandbox "ID" …`, `StopPodSandbox for
/// "ID"`.
pub fn sandbox_in_text(t: &str) -> Option<String> {
    let at = t
        .find("sandbox \"")
        .map(|a| a + "sandbox \"".len())
        .or_else(|| t.find("Sandbox for \"").map(|a| a + "Sandbox for \"".len()))?;
    let rest = t.get(at..)?;
    let id = rest.get(..rest.find('"')?)?;
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_string())
}

fn is_hms(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 8
        && b.get(2) == Some(&b':')
        && b.get(5) == Some(&b':')
        && b.iter()
            .take(8)
            .enumerate()
            .all(|(i, c)| i == 2 || i == 5 || c.is_ascii_digit())
}

/// What [`split_prefix`] finds: prefix time, host, identifier, and the message.
pub(crate) type Prefixed<'a> = (
    Option<PrefixTime>,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
);

/// Split a journald-prefixed line into prefix time, host, identifier and message.
/// Prefixes: short / short-precise in any locale (`Nov 20 16:25:32`, `Nov  2 …`,
/// `1月 19 21:11:37`), short-iso (`2025-11-20T16:25:32+0000`) and short-full (`Thu
/// 2025-11-20 16:25:32 UTC`), then `host ident[pid]: message`. Lines without a
/// recognisable prefix return the whole line.
pub(crate) fn split_prefix(line: &str) -> Prefixed<'_> {
    if let Some(p) = split_short(line) {
        return p;
    }
    let p = split_prefix_words(line);
    if p.0.is_some() {
        return p;
    }
    // a CI runner's clock before the journald prefix: the prefix and `time=` are the truth
    match ci_clock(line) {
        Some(rest) => {
            let q = split_short(rest).unwrap_or_else(|| split_prefix_words(rest));
            if q.0.is_some() {
                q
            } else {
                p
            }
        }
        None => p,
    }
}

/// The text after a CI runner's clock that a job's log puts before each line it prints —
/// Jenkins' timestamper `HH:MM:SS ` (also `HH:MM:SS.mmm `, `[HH:MM:SS] `), GitHub Actions'
/// `2025-11-20T16:25:32.1234567Z ` — when the line starts with one (the runner's clock, not
/// the host's: its time is not read).
pub(crate) fn ci_clock(line: &str) -> Option<&str> {
    let (word, rest) = line.split_once(' ')?;
    let inner = word
        .strip_prefix('[')
        .and_then(|w| w.strip_suffix(']'))
        .unwrap_or(word);
    let (hms, frac) = inner
        .split_once(['.', ','])
        .map_or((inner, ""), |(h, f)| (h, f));
    // `10:21:47`, or `9:21:47` with a one-digit hour
    let b = hms.as_bytes();
    let short_hour = b.len() == 7
        && b.iter().enumerate().all(|(i, c)| {
            if i == 1 || i == 4 {
                *c == b':'
            } else {
                c.is_ascii_digit()
            }
        });
    let clock =
        ((b.len() == 8 && is_hms(hms)) || short_hour) && frac.bytes().all(|c| c.is_ascii_digit());
    (clock || (inner == word && parse_rfc3339(word).is_some()))
        .then(|| rest.trim_start_matches(' '))
}

/// The common case of [`split_prefix`] in one pass over the prefix's bytes: journald's
/// short or short-precise format with a three-letter month and the day in two columns
/// (`Nov 20 16:25:32 host ident[pid]: message`, `Nov  2 …`), single spaces. `None` for
/// anything else, which [`split_prefix_words`] reads (checked against it by a
/// differential property test).
fn split_short(line: &str) -> Option<Prefixed<'_>> {
    let b = line.as_bytes();
    let month = b.get(0..3)?;
    if !month.iter().all(u8::is_ascii_alphabetic) || b.get(3) != Some(&b' ') {
        return None;
    }
    let day = match (*b.get(4)?, *b.get(5)?, *b.get(6)?) {
        (b' ', d, b' ') if d.is_ascii_digit() => line.get(5..6)?,
        (d0, d1, b' ') if d0.is_ascii_digit() && d1.is_ascii_digit() => line.get(4..6)?,
        _ => return None,
    };
    let rest = line.get(7..)?;
    let end = memchr::memchr(b' ', rest.as_bytes())?;
    let hms = rest.get(..end)?;
    if !is_hms(hms) {
        return None;
    }
    let stamp = LocalStamp::parse(line.get(0..3)?, day, hms)?;
    // `host ident[pid]: message`, one space each
    let rest = rest.get(end + 1..)?;
    let end = memchr::memchr(b' ', rest.as_bytes()).filter(|&e| e > 0)?;
    let (host, ident_msg) = (rest.get(..end)?, rest.get(end + 1..)?);
    let sp = memchr::memchr(b' ', ident_msg.as_bytes())?;
    if sp == 0 || ident_msg.as_bytes().get(sp - 1) != Some(&b':') {
        return None;
    }
    let (ident, msg) = (ident_msg.get(..sp - 1)?, ident_msg.get(sp + 1..)?);
    let unit = ident.split('[').next().unwrap_or(ident);
    Some((Some(PrefixTime::Local(stamp)), Some(host), Some(unit), msg))
}

/// For fuzzing: the one-pass readers against the long way on `line` — the journald prefix
/// ([`split_short`] against [`split_prefix_words`]) and a kata-agent record in Go-quoted
/// text (`agent::flat_go_quoted` against unquoting, then `agent::flat` and
/// `agent::parse_line`), the quoted text being what follows the line's first `vmconsole="`,
/// else the whole line. `Err` names the first disagreement.
#[doc(hidden)]
pub fn fast_paths_agree(line: &str) -> Result<(), String> {
    if let Some(fast) = split_short(line) {
        let words = split_prefix_words(line);
        if fast != words {
            return Err(format!("prefix: {fast:?} != {words:?}"));
        }
    }
    let q = line
        .find("vmconsole=\"")
        .and_then(|at| line.get(at + "vmconsole=\"".len()..))
        .unwrap_or(line);
    if let Some((raw, end)) = crate::parse::agent::flat_go_quoted(q) {
        let mut buf = String::new();
        let (v, rest) = scan_quoted_into(q, &mut buf)
            .map_err(|_| "record read from a bad value".to_string())?;
        let text = buf.trim();
        let long_way = crate::parse::agent::flat(text);
        if !v.escaped
            || rest != q.get(end + 1..).unwrap_or("")
            || !crate::parse::agent::looks_like(text)
            || long_way.as_ref() != Some(&raw)
            || crate::parse::agent::record(&raw) != crate::parse::agent::parse_line(text)
        {
            return Err(format!("agent record: {raw:?} != {long_way:?}"));
        }
    }
    Ok(())
}

/// [`split_prefix`] word by word: every prefix it reads.
fn split_prefix_words(line: &str) -> Prefixed<'_> {
    let none = (None, None, None, line);
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    let Some(first) = words.next() else {
        return none;
    };
    // the text after the n-th word
    let after = |n: usize| -> Option<&str> {
        let mut rest = line;
        for _ in 0..n {
            rest = rest.trim_start_matches(' ');
            rest = rest.get(rest.find(' ')?..)?;
        }
        Some(rest.trim_start_matches(' '))
    };
    let (prefix, used) = if let Some(ns) = parse_rfc3339(first) {
        (PrefixTime::Absolute(ns), 1)
    } else {
        let (Some(second), Some(third)) = (words.next(), words.next()) else {
            return none;
        };
        if second.len() == 10 && second.as_bytes().get(4) == Some(&b'-') && is_hms(third) {
            // short-full: weekday, date, time, zone — an offset (`UTC`, `+0800`) gives the
            // instant; a zone's abbreviation (`CST`, `EDT`: ambiguous across the world) gives
            // the local wall clock, whose zone is inferred like short's
            let Some(zone) = words.next() else {
                return none;
            };
            match parse_utc_offset(zone) {
                Some(off) => match crate::parse::time::parse_rfc3339(&format!("{second}T{third}Z"))
                {
                    Some(ns) => (
                        PrefixTime::Absolute(ns - off * crate::parse::time::NS_PER_S),
                        4,
                    ),
                    None => return none,
                },
                None if (2..=6).contains(&zone.len())
                    && zone.bytes().all(|c| c.is_ascii_alphabetic()) =>
                {
                    let (Some(month), Some(day)) = (second.get(5..7), second.get(8..10)) else {
                        return none;
                    };
                    match LocalStamp::parse(month, day, third) {
                        Some(l) => (PrefixTime::Local(l), 4),
                        None => return none,
                    }
                }
                None => return none,
            }
        } else if first.len() <= 12
            && !first.contains(['=', ':', '[', '{', '"'])
            && second.len() <= 2
            && is_hms(third)
        {
            match LocalStamp::parse(first, second, third) {
                Some(l) => (PrefixTime::Local(l), 3),
                None => return none,
            }
        } else {
            return none;
        }
    };
    let Some(rest) = after(used) else {
        return none;
    };
    // host then `ident[pid]: message`
    let Some((host, ident_msg)) = rest.split_once(' ') else {
        return none;
    };
    let Some((ident, msg)) = ident_msg.split_once(": ") else {
        return none;
    };
    if ident.contains(' ') {
        return none;
    }
    let unit = ident.split('[').next().unwrap_or(ident);
    (Some(prefix), Some(host), Some(unit), msg)
}

/// Iterator over logfmt `key=value` pairs of the keys the timeline reads (`time`, `level`,
/// `msg`, `sandbox`, `pid`, `error`, `vmconsole`, `vfio-device-BDF`, `id`, `name`,
/// `source`, `container`, `subsystem`, `qemuPid`); values may be Go-quoted. Every quoted
/// value is checked (an unterminated one, or a bad escape, is an error whatever its key),
/// but none is copied.
pub struct LogfmtIter<'a, 'b> {
    rest: &'a str,
    /// Where a `vmconsole=` value goes, unquoted, as it is read.
    console: Option<&'b mut String>,
    /// With `console`: the kata-agent record of the `vmconsole=` value just returned, when
    /// it was read from the quoted text (`console` is then left empty).
    agent: Option<crate::parse::agent::Raw<'a>>,
}

impl<'a> LogfmtIter<'a, '_> {
    pub fn new(s: &'a str) -> Self {
        LogfmtIter {
            rest: s,
            console: None,
            agent: None,
        }
    }
}

impl<'a> Iterator for LogfmtIter<'a, '_> {
    type Item = Result<(&'static str, RawValue<'a>), JournalError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            // single spaces between fields: skip them by bytes, and leave anything else
            // (tabs, Unicode spaces) to `trim_start`
            let spaces = self.rest.bytes().take_while(|&c| c == b' ').count();
            self.rest = self.rest.get(spaces..).unwrap_or("");
            if self
                .rest
                .bytes()
                .next()
                .is_some_and(|c| !(b'!'..0x80).contains(&c))
            {
                self.rest = self.rest.trim_start();
            }
            if self.rest.is_empty() {
                return None;
            }
            // key: up to '=' or space (keys are short: eight bytes at a time beats a
            // vector search)
            let kend = equals_or_space(self.rest.as_bytes());
            let key = self.rest.get(..kend).unwrap_or("");
            let after = self.rest.get(kend..).unwrap_or("");
            let Some(val_start) = after.strip_prefix('=') else {
                // bare word: skip
                self.rest = after;
                continue;
            };
            let into = match (key, self.console.as_deref_mut()) {
                ("vmconsole", Some(buf)) => Some(buf),
                _ => None,
            };
            if into.is_some() {
                self.agent = None;
            }
            let (value, rest) = if let Some(q) = val_start.strip_prefix('"') {
                let scanned = match into {
                    Some(buf) => match crate::parse::agent::flat_go_quoted(q) {
                        // a kata-agent record: read as it is scanned
                        Some((rec, end)) => {
                            buf.clear();
                            self.agent = Some(rec);
                            Ok((
                                RawValue {
                                    text: q.get(..end).unwrap_or(""),
                                    escaped: true,
                                },
                                q.get(end + 1..).unwrap_or(""),
                            ))
                        }
                        None => scan_quoted_into(q, buf),
                    },
                    None => scan_quoted(q),
                };
                match scanned {
                    Ok(v) => v,
                    Err(e) => {
                        self.rest = "";
                        return Some(Err(match e {
                            Unq::Unterminated => JournalError::Unterminated(key.to_string()),
                            Unq::BadEscape => JournalError::BadEscape(key.to_string()),
                        }));
                    }
                }
            } else {
                // bare values are ids and paths, tens of bytes: a vector search
                let vend = memchr::memchr(b' ', val_start.as_bytes()).unwrap_or(val_start.len());
                if let Some(buf) = into {
                    buf.clear();
                    buf.push_str(val_start.get(..vend).unwrap_or(""));
                }
                (
                    RawValue {
                        text: val_start.get(..vend).unwrap_or(""),
                        escaped: false,
                    },
                    val_start.get(vend..).unwrap_or(""),
                )
            };
            self.rest = rest;
            let k = match key {
                "time" => "time",
                "level" => "level",
                "msg" => "msg",
                "sandbox" => "sandbox",
                "vmconsole" => "vmconsole",
                "pid" => "pid",
                "error" => "error",
                "vfio-device-BDF" => "vfio-device-BDF",
                "id" => "id",
                "name" => "name",
                "source" => "source",
                "container" => "container",
                "subsystem" => "subsystem",
                "qemuPid" => "qemuPid",
                _ => continue,
            };
            return Some(Ok((k, value)));
        }
    }
}

enum Unq {
    Unterminated,
    BadEscape,
}

/// Where the first `=` or space of `b` is (`b.len()` if none), eight bytes at a time.
fn equals_or_space(b: &[u8]) -> usize {
    first_of_two(b, b'=', b' ').unwrap_or(b.len())
}

/// The first `"` or `\\` in `b`. Escaped payloads have one every few bytes, too often for a
/// vector search to pay its start-up; eight bytes at a time (SWAR) it is.
fn quote_or_backslash(b: &[u8]) -> Option<usize> {
    first_of_two(b, b'"', b'\\')
}

/// The first byte of `b` that is `p` or `q`, eight bytes at a time (SWAR).
#[inline]
fn first_of_two(b: &[u8], p: u8, q: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = b.chunks_exact(8);
    let mut at = 0usize;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w);
        let a = x ^ (ONES * u64::from(p));
        let z = x ^ (ONES * u64::from(q));
        // a zero byte of a or z is a match; a borrow only flags bytes above a true match, so
        // the lowest flagged byte is always a true one
        let m = (a.wrapping_sub(ONES) & !a & HIGH) | (z.wrapping_sub(ONES) & !z & HIGH);
        if m != 0 {
            return Some(at + (m.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == p || c == q)
        .map(|k| at + k)
}

/// How many hex digits follow the escape letter `e`, or `None` for a bad escape.
#[inline]
fn escape_digits(e: u8) -> Option<usize> {
    // the escapes of a Go-quoted JSON payload, first, without a jump table
    if e == b'"' || e == b'\\' {
        return Some(0);
    }
    match e {
        b'"' | b'\\' | b'\'' | b'n' | b't' | b'r' | b'a' | b'b' | b'f' | b'v' => Some(0),
        b'x' => Some(2),
        b'u' => Some(4),
        b'U' => Some(8),
        _ => None,
    }
}

/// Find the end of a Go `%q` string whose opening quote is already consumed, checking its
/// escapes: the value (between the quotes) and the text after the closing quote.
fn scan_quoted(s: &str) -> Result<(RawValue<'_>, &str), Unq> {
    scan_quoted_to(s, None)
}

/// [`scan_quoted`], appending the unquoted value to `out` (cleared first) in the same pass.
fn scan_quoted_into<'s>(s: &'s str, out: &mut String) -> Result<(RawValue<'s>, &'s str), Unq> {
    out.clear();
    scan_quoted_to(s, Some(out))
}

/// The one pass of [`scan_quoted`] and [`scan_quoted_into`]: `out`, when given, gets the
/// unquoted value.
fn scan_quoted_to<'s>(
    s: &'s str,
    mut out: Option<&mut String>,
) -> Result<(RawValue<'s>, &'s str), Unq> {
    let b = s.as_bytes();
    let (mut i, mut from) = (0usize, 0usize);
    let mut escaped = false;
    loop {
        let k = quote_or_backslash(b.get(i..).unwrap_or(&[])).ok_or(Unq::Unterminated)?;
        let at = i + k;
        if let Some(o) = out.as_deref_mut() {
            o.push_str(s.get(from..at).unwrap_or(""));
        }
        if b.get(at) == Some(&b'"') {
            let value = RawValue {
                text: s.get(..at).unwrap_or(""),
                escaped,
            };
            return Ok((value, s.get(at + 1..).unwrap_or("")));
        }
        escaped = true;
        let e = *b.get(at + 1).ok_or(Unq::Unterminated)?;
        let n = escape_digits(e).ok_or(Unq::BadEscape)?;
        for j in 0..n {
            match b.get(at + 2 + j) {
                None => return Err(Unq::Unterminated),
                Some(h) if h.is_ascii_hexdigit() => {}
                Some(_) => return Err(Unq::BadEscape),
            }
        }
        if let Some(o) = out.as_deref_mut() {
            push_escape(o, e, s.get(at + 2..at + 2 + n).unwrap_or(""));
        }
        i = at + 2 + n;
        from = i;
    }
}

/// The character a checked escape `\e` (with its hex digits) stands for, appended to `out`.
#[inline]
fn push_escape(out: &mut String, e: u8, hex: &str) {
    if e == b'"' || e == b'\\' {
        out.push(char::from(e));
        return;
    }
    match e {
        b'"' => out.push('"'),
        b'\\' => out.push('\\'),
        b'\'' => out.push('\''),
        b'n' => out.push('\n'),
        b't' => out.push('\t'),
        b'r' => out.push('\r'),
        b'a' => out.push('\u{7}'),
        b'b' => out.push('\u{8}'),
        b'f' => out.push('\u{c}'),
        b'v' => out.push('\u{b}'),
        _ => {
            // \xNN is a byte (kept as the code point: ASCII stays ASCII), \uNNNN and
            // \UNNNNNNNN code points; anything else was refused by the scan
            let v = u32::from_str_radix(hex, 16).unwrap_or(0xFFFD);
            out.push(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER));
        }
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    unescape_into(s, &mut out);
    out
}

/// Append the checked text of a quoted value to `out`, its escapes resolved: runs without
/// a backslash are copied whole.
fn unescape_into(s: &str, out: &mut String) {
    let mut rest = s;
    while let Some(k) = rest.bytes().position(|c| c == b'\\') {
        out.push_str(rest.get(..k).unwrap_or(""));
        let b = rest.as_bytes();
        let e = b.get(k + 1).copied().unwrap_or(b'\\');
        let n = escape_digits(e).unwrap_or(0);
        match e {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'\'' => out.push('\''),
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'a' => out.push('\u{7}'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'v' => out.push('\u{b}'),
            _ => {
                // \xNN is a byte (kept as the code point: ASCII stays ASCII), \uNNNN and
                // \UNNNNNNNN code points; anything else was refused by the scan
                let v = rest
                    .get(k + 2..k + 2 + n)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .unwrap_or(0xFFFD);
                out.push(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
        }
        rest = rest.get(k + 2 + n..).unwrap_or("");
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = r#"Nov 20 16:25:32 dal03-sgpu-160 containerd[2771108]: time="2025-11-20T16:25:32.996810781Z" level=debug msg="reading guest console" console-protocol=unix console-url=/run/vc/vm/38f5/console.sock name=containerd-shim-v2 pid=3426175 sandbox=38f55c4a source=virtcontainers subsystem=sandbox vmconsole="{\"msg\":\"policy check: StatsContainerRequest\",\"level\":\"DEBG\",\"ts\":\"2025-11-20T16:25:33.010026353Z\",\"version\":\"0.1.0\",\"name\":\"kata-agent\",\"subsystem\":\"rpc\",\"source\":\"agent\",\"pid\":\"1\"}""#;

    #[test]
    fn seed_line() {
        let j = parse_line(SEED).unwrap().unwrap();
        assert_eq!(j.unit.as_deref(), Some("containerd"));
        assert_eq!(j.sandbox.as_deref(), Some("38f55c4a"));
        assert_eq!(j.level.as_deref(), Some("debug"));
        assert_eq!(j.msg.as_deref(), Some("reading guest console"));
        let v = j.vmconsole.unwrap();
        assert!(v.starts_with("{\"msg\":\"policy check"));
        assert!(v.ends_with("\"pid\":\"1\"}"));
        assert_eq!(j.time.unwrap() % 1_000_000_000, 996_810_781);
        assert!(matches!(j.prefix, Some(PrefixTime::Local(_))));
        assert_eq!(j.pid, Some(3_426_175));
    }

    /// Go `%q` of `s` as containerd writes a payload, with `extra` escapes Go may also
    /// write (`\t`, `\u00e9`, `\x41`, `\'`) for the characters they stand for.
    fn go_quote(s: &str, extra: bool) -> String {
        let mut o = String::new();
        for c in s.chars() {
            match c {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                '\t' if extra => o.push_str("\\t"),
                'é' if extra => o.push_str("\\u00e9"),
                'A' if extra => o.push_str("\\x41"),
                '\'' if extra => o.push_str("\\'"),
                c => o.push(c),
            }
        }
        o
    }

    /// The one-pass read of a kata-agent record inside `vmconsole="…"` gives exactly what
    /// unquoting the value and reading the record does (value end, fields, record or error),
    /// or leaves the record to that way. Records built from the agent's fields and pieces that
    /// break either way, quoted as Go quotes them and otherwise.
    #[test]
    fn agent_records_read_in_the_quoted_text_as_after_unquoting() {
        use proptest::prelude::*;
        let good = prop_oneof![
            Just(r#""msg":"got uevent message""#.to_string()),
            Just(r#""msg":"rpc call from shim to agent: \"create_sandbox\"""#.to_string()),
            Just(r#""msg":"a \"quoted\" \\ \/ \n\t\r\b\f word""#.to_string()),
            Just(r#""msg":"tab\tand Été""#.to_string()),
            Just(r#""level":"INFO""#.to_string()),
            Just(r#""ts":"2025-11-20T17:58:13.5Z""#.to_string()),
            Just(r#""ts":"yesterday""#.to_string()),
            Just(r#""subsystem":"uevent""#.to_string()),
            Just(r#""event":"Uevent { action: \"bind\", devpath: \"/devices/pci0000:00/0000:00:05.0/0000:02:00.0\", subsystem: \"pci\" }""#.to_string()),
            Just(r#""event":"Uevent { action: \"add\", devpath: \"/devices/system/memory/memory9\", subsystem: \"memory\" }""#.to_string()),
            Just(r#""pid":"1""#.to_string()),
            Just(r#""name":"kata-agent""#.to_string()),
        ];
        let bad = prop_oneof![
            Just(r#""msg":"\u00e9t\u00e9""#.to_string()),
            Just(r#""level":3"#.to_string()),
            Just(r#""version":{"a":["b"]}"#.to_string()),
            Just(r#" "name" : "kata-agent" "#.to_string()),
            Just("\"ctl\":\"a\u{1}b\"".to_string()),
            Just(r#""bad":"\q""#.to_string()),
            Just(r#""m\u0073g":"x""#.to_string()),
            "[a-zA-Z\\\\\":,{} \t'é]{0,12}",
        ];
        let piece = prop_oneof![12 => good, 1 => bad];
        let record = (
            prop::collection::vec(piece, 0..9),
            prop::bool::weighted(0.9),
            prop_oneof![8 => Just(String::new()), 1 => "[ x}]{1,2}".prop_map(|s| s)],
            prop_oneof![8 => Just(""), 1 => Just(" ")],
            prop::bool::weighted(0.2),
            prop::option::weighted(0.1, 0usize..400),
            " [a-z]{1,4}=[a-z\"]{0,3}",
        );
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(6000));
        let read = std::sync::atomic::AtomicUsize::new(0);
        runner
            .run(&record, |(pieces, brace, tail, lead, extra, cut, after)| {
                // most records carry the msg and ts a record needs, first or later
                let mut pieces = pieces;
                let k = pieces.len();
                if !pieces.iter().any(|p| p.starts_with(r#""ts""#)) {
                    pieces.insert(k / 2, r#""ts":"2025-11-20T16:05:15.71233274Z""#.to_string());
                }
                if !pieces.iter().any(|p| p.starts_with(r#""msg""#)) {
                    pieces.insert(k / 3, r#""msg":"got uevent message""#.to_string());
                }
                let mut json = format!("{lead}{{");
                json.push_str(&pieces.join(","));
                if brace {
                    json.push('}');
                }
                json.push_str(&tail);
                let mut q = go_quote(&json, extra);
                if let Some(n) = cut {
                    // a line cut short, or a raw byte where Go would escape one
                    let n = n.min(q.len());
                    if q.is_char_boundary(n) {
                        q.truncate(n);
                    }
                }
                q.push('"');
                q.push_str(&after);
                let Some((raw, end)) = crate::parse::agent::flat_go_quoted(&q) else {
                    return Ok(());
                };
                read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut buf = String::new();
                let Ok((v, rest)) = scan_quoted_into(&q, &mut buf) else {
                    panic!("read a record from a value the scan refuses: {q}");
                };
                prop_assert!(v.escaped);
                prop_assert_eq!(rest, q.get(end + 1..).unwrap_or(""), "{}", q);
                let text = buf.trim();
                prop_assert!(crate::parse::agent::looks_like(text));
                let long_way = crate::parse::agent::flat(text);
                prop_assert_eq!(Some(&raw), long_way.as_ref(), "{}", q);
                prop_assert_eq!(
                    crate::parse::agent::record(&raw),
                    crate::parse::agent::parse_line(text),
                    "{}",
                    q
                );
                Ok(())
            })
            .unwrap();
        // the one-pass read took a fair share of the cases
        let n = read.into_inner();
        assert!(n > 300, "{n} records read in one pass");
        // and the fast path takes the agent's own records, as containerd quotes them
        let rec = r#"{"msg":"got uevent message","level":"INFO","ts":"2025-11-20T16:05:15.71233274Z","subsystem":"uevent","pid":"1","event":"Uevent { action: \"bind\", devpath: \"/devices/pci0000:00/0000:00:0a.0/0000:07:00.0\", devname: \"\", subsystem: \"pci\" }"}"#;
        let q = format!("{}\" x=y", go_quote(rec, false));
        let (raw, end) = crate::parse::agent::flat_go_quoted(&q).expect("read in one pass");
        assert_eq!(q.get(end..), Some("\" x=y"));
        assert_eq!(raw.msg, "got uevent message");
        assert!(raw
            .event
            .as_deref()
            .is_some_and(|e| e.contains("action: \"bind\"")));
    }

    /// The one-pass read of the common prefix gives what reading it word by word gives, on
    /// prefixes near it in every way (month, day, time, spaces, host, identifier).
    #[test]
    fn short_prefixes_read_in_one_pass_as_word_by_word() {
        use proptest::prelude::*;
        let line = (
            prop_oneof![
                Just("Nov"),
                Just("nov"),
                Just("Xyz"),
                Just("1月"),
                Just("No"),
                Just("Nov."),
                Just("N=v")
            ],
            prop_oneof![
                Just(" 20"),
                Just("  2"),
                Just(" 2"),
                Just(" 32"),
                Just(" 00"),
                Just("   2"),
                Just(" 2x"),
                Just("")
            ],
            prop_oneof![
                Just(" 17:56:11"),
                Just(" 17:56:11.992377"),
                Just(" 17:56:11."),
                Just(" 7:56:11"),
                Just(" 25:00:00"),
                Just(" 17:56:1x"),
                Just(" 17:56:11Z"),
                Just("  17:56:11"),
                Just("")
            ],
            prop_oneof![Just(" gpu-7.example"), Just("  gpu-7"), Just(" "), Just("")],
            prop_oneof![
                Just(" containerd[2771108]: "),
                Just(" kata: "),
                Just(" a b: "),
                Just(" x[1] "),
                Just(" x[1]:"),
                Just(" :: "),
                Just("  c[1]: "),
                Just(" c[1]:  ")
            ],
            "[a-z=\" :]{0,12}",
        );
        proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(4000))
            .run(&line, |(m, d, t, h, i, rest)| {
                let l = format!("{m}{d}{t}{h}{i}{rest}");
                if let Some(fast) = split_short(&l) {
                    prop_assert_eq!(fast, split_prefix_words(&l), "{}", l);
                }
                Ok(())
            })
            .unwrap();
        let l = "Nov  2 17:56:11.5 gpu-7 containerd[1]: time=x";
        assert!(split_short(l).is_some());
        assert_eq!(split_short(l), Some(split_prefix_words(l)));
    }

    /// The fuzz target's check holds on every line of the study's journal and of a
    /// generated one, and the one-pass readers take those lines.
    #[test]
    fn fast_paths_agree_on_real_lines() {
        let mut gen = Vec::new();
        crate::synth::gen::generate(256 << 10, 4, 5, &mut gen).unwrap();
        let gen = String::from_utf8(gen).unwrap();
        let (mut prefixes, mut records) = (0, 0);
        for line in crate::synth::gen::TEMPLATE.lines().chain(gen.lines()) {
            fast_paths_agree(line).unwrap();
            prefixes += usize::from(split_short(line).is_some());
            let q = line.split_once("vmconsole=\"").map_or("", |(_, q)| q);
            records += usize::from(crate::parse::agent::flat_go_quoted(q).is_some());
        }
        assert!(prefixes > 1000 && records > 700, "{prefixes} {records}");
    }

    #[test]
    fn swar_finds_the_first_equals_or_space() {
        let naive = |b: &[u8]| {
            b.iter()
                .position(|&c| c == b'=' || c == b' ')
                .unwrap_or(b.len())
        };
        for len in 0..24 {
            for at in 0..=len {
                for c in [b'=', b' '] {
                    let mut v: Vec<u8> = (0..len)
                        .map(|i| [b'<', b'!', 0x3d ^ 0x80, 0xa0, b'a'][i % 5])
                        .collect();
                    if at < len {
                        v[at] = c;
                    }
                    assert_eq!(equals_or_space(&v), naive(&v), "{v:?}");
                }
            }
        }
    }

    #[test]
    fn swar_finds_the_first_quote_or_backslash() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\');
        let mut cases: Vec<Vec<u8>> = vec![b"".to_vec(), b"abc".to_vec()];
        for len in 0..24 {
            for at in 0..=len {
                for c in [b'"', b'\\'] {
                    // the match late, with bytes that differ from it by one bit before it
                    let mut v: Vec<u8> = (0..len)
                        .map(|i| [b'#', b']', 0x22 ^ 0x80, b'a'][i % 4])
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
            assert_eq!(quote_or_backslash(c), naive(c), "{c:?}");
        }
    }

    /// A CI runner's clock before the journald prefix (Jenkins' timestamper, with or
    /// without brackets and milliseconds; GitHub Actions' RFC 3339 stamp): the prefix and the
    /// line are read as without it; a clock before anything else is not a prefix.
    #[test]
    fn ci_runner_clocks_before_the_prefix() {
        let line = r#"Dec 02 10:41:50 ci kata-runtime[14410]: time="2019-12-02T10:41:50.114082731+01:00" level=info msg="Starting VM" name=kata-runtime pid=14410 sandbox=ab12"#;
        let want = parse_line(line).unwrap().unwrap();
        for clock in [
            "09:41:52 ",
            "9:41:52  ",
            "[09:41:52] ",
            "09:41:52.731 ",
            "[09:41:52.731] ",
            "2019-12-02T09:41:52.7310422Z ",
        ] {
            let got = parse_line(&format!("{clock}{line}")).unwrap().unwrap();
            assert_eq!(got, want, "{clock:?}");
            assert!(
                crate::parse::scan::journald_prefix(format!("{clock}{line}").as_bytes()),
                "{clock:?}"
            );
        }
        for not in [
            "09:41:52 hello",
            "09:41:5 Dec 02 10:41:50 ci k[1]: x",
            "25:99 x",
        ] {
            assert_eq!(split_prefix(not).0, None, "{not}");
        }
        assert!(!crate::parse::scan::journald_prefix(
            b"09:41:52 + sudo journalctl"
        ));
    }

    #[test]
    fn errors_and_non_journal() {
        assert_eq!(parse_line("hello world").unwrap(), None);
        assert!(parse_line(
            r#"Nov 20 16:25:32 h containerd[1]: time="2025-11-20T16:25:32Z" vmconsole="abc"#
        )
        .is_err());
        assert!(parse_line(r#"time="nope" msg=x"#).is_err());
        let j =
            parse_line(r#"time="2025-11-20T16:25:32Z" msg=bare vmconsole="[    3.201931] a\tb""#)
                .unwrap()
                .unwrap();
        assert_eq!(j.msg.as_deref(), Some("bare"));
        assert_eq!(j.vmconsole.as_deref(), Some("[    3.201931] a\tb"));
        assert!(j.prefix.is_none());
    }

    /// Prefix shapes of public Kata issue threads, written here: a zh_CN journal, an
    /// `Aug 11 … -04:00` one with sandbox `arch`, a CRI error naming its sandbox only in
    /// the text.
    #[test]
    fn prefixes_in_other_locales_and_cri_errors() {
        let zh = r#"1月 19 21:11:37 node-7.example kata[46036]: time="2022-01-19T21:11:37.961651988+08:00" level=debug msg="reading guest console" name=containerd-shim-v2 pid=46036 sandbox=b7d3 source=virtcontainers subsystem=sandbox vmconsole="[    0.100000] x""#;
        let j = parse_line(zh).unwrap().unwrap();
        assert_eq!(j.unit.as_deref(), Some("kata"));
        assert_eq!(j.time_zone, Some(8 * 3600));
        assert_eq!(j.pid, Some(46036));
        let Some(PrefixTime::Local(l)) = j.prefix else {
            panic!("{:?}", j.prefix)
        };
        assert_eq!((l.month, l.day), (Some(1), 19));
        let ny = r#"Aug 11 21:53:16 gpu-box containerd[2334]: time="2025-08-11T21:53:16.078452645-04:00" level=debug msg="reading guest console" name=containerd-shim-v2 pid=9491 sandbox=arch source=virtcontainers vmconsole="x""#;
        let j = parse_line(ny).unwrap().unwrap();
        assert_eq!(j.sandbox.as_deref(), Some("arch"));
        assert_eq!(j.time_zone, Some(-4 * 3600));
        let cri = r#"Feb 19 13:45:49 node1 containerd[14192]: time="2026-02-19T13:45:49.346103748+01:00" level=error msg="RunPodSandbox for &PodSandboxMetadata{Name:cuda-job,Uid:01cb,Namespace:default,Attempt:0,} failed, error" error="rpc error: code = Unknown desc = failed to start sandbox \"5e1f\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=vfio1""#;
        let j = parse_line(cri).unwrap().unwrap();
        assert_eq!(j.sandbox.as_deref(), Some("5e1f"));
        assert_eq!(j.level.as_deref(), Some("error"));
        assert!(j.error.unwrap().ends_with("nvidia.com/pgpu=vfio1"));
        let iso = r#"2025-11-20T16:25:32+0000 h containerd[1]: time="2025-11-20T16:25:32Z" msg=x sandbox=s"#;
        assert!(matches!(
            parse_line(iso).unwrap().unwrap().prefix,
            Some(PrefixTime::Absolute(_))
        ));
        let named =
            r#"Thu 2025-11-20 12:25:32 EST gpu-7.example.com containerd[1]: msg=x sandbox=s"#;
        let j = parse_line(named).unwrap().unwrap();
        let Some(PrefixTime::Local(l)) = j.prefix else {
            panic!("{:?}", j.prefix)
        };
        assert_eq!((l.month, l.day), (Some(11), 20));
        assert_eq!(j.host.as_deref(), Some("gpu-7.example.com"));
        let full = r#"Thu 2025-11-20 17:25:32 +01:00 h containerd[1]: msg=x sandbox=s"#;
        let j = parse_line(full).unwrap().unwrap();
        assert_eq!(
            j.prefix,
            Some(PrefixTime::Absolute(
                parse_rfc3339("2025-11-20T16:25:32Z").unwrap()
            ))
        );
        assert_eq!(j.time, None);
    }
}
