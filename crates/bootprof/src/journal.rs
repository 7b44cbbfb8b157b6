//! containerd journal lines: journald short format (`Nov 20 16:25:32 host containerd[pid]: `)
//! or short-iso / short-precise, followed by logrus logfmt fields (`time="…" level=debug
//! msg="…" sandbox=… vmconsole="…"`). The `vmconsole` value is one line of the guest console:
//! a guest kernel line or a kata-agent JSON record, Go-quoted inside the field.

use crate::time::{parse_rfc3339, parse_syslog_stamp, Nanos};

/// The fields of one containerd journal line that the boot timeline uses.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalLine {
    /// journald prefix time (short format has no year or zone; see [`PrefixTime`]).
    pub prefix: Option<PrefixTime>,
    /// Syslog identifier (`containerd`), when the journald prefix is present.
    pub unit: Option<String>,
    /// logrus `time=` (UTC, nanoseconds) — the host clock of record.
    pub time: Option<Nanos>,
    pub level: Option<String>,
    pub msg: Option<String>,
    pub sandbox: Option<String>,
    /// Unquoted `vmconsole=` value: one guest console line.
    pub vmconsole: Option<String>,
}

/// journald prefix time as written; completed with a year and zone by the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum PrefixTime {
    /// short-iso: complete instant.
    Absolute(Nanos),
    /// short / short-precise: month abbreviation, day, `HH:MM:SS[.frac]`.
    Syslog {
        month: String,
        day: String,
        hms: String,
    },
}

impl PrefixTime {
    /// Complete to an instant with `year` and a zone offset (seconds east of UTC).
    pub fn resolve(&self, year: i64, utc_offset_s: i64) -> Option<Nanos> {
        match self {
            PrefixTime::Absolute(n) => Some(*n),
            PrefixTime::Syslog { month, day, hms } => {
                parse_syslog_stamp(month, day, hms, year, utc_offset_s)
            }
        }
    }
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
    let (prefix, unit, body) = split_prefix(line);
    // logfmt body must start with a key=; containerd's start with time=
    let body = body.trim_start();
    if !(body.starts_with("time=") || body.starts_with("level=") || body.starts_with("msg=")) {
        return Ok(None);
    }
    let mut out = JournalLine {
        prefix,
        unit,
        time: None,
        level: None,
        msg: None,
        sandbox: None,
        vmconsole: None,
    };
    for kv in LogfmtIter::new(body) {
        let (k, v) = kv?;
        match k {
            "time" => out.time = Some(parse_rfc3339(&v).ok_or(JournalError::BadTime)?),
            "level" => out.level = Some(v),
            "msg" => out.msg = Some(v),
            "sandbox" => out.sandbox = Some(v),
            "vmconsole" => out.vmconsole = Some(v),
            _ => {}
        }
    }
    Ok(Some(out))
}

/// Split `Nov 20 16:25:32 host containerd[2771108]: rest` (or short-iso) into prefix time,
/// identifier and the message. Lines without a recognisable prefix return the whole line.
fn split_prefix(line: &str) -> (Option<PrefixTime>, Option<String>, &str) {
    let mut parts = line.splitn(2, ' ');
    let first = parts.next().unwrap_or("");
    let after_first = parts.next().unwrap_or("");
    let (prefix, rest) = if let Some(ns) = parse_rfc3339(first) {
        (PrefixTime::Absolute(ns), after_first)
    } else if crate::time::month_from_abbr(first).is_some() && first.len() == 3 {
        let mut p = after_first.trim_start().splitn(3, ' ');
        let (Some(day), Some(hms), Some(rest)) = (p.next(), p.next(), p.next()) else {
            return (None, None, line);
        };
        if day.parse::<u32>().is_err() || !hms.contains(':') {
            return (None, None, line);
        }
        (
            PrefixTime::Syslog {
                month: first.to_string(),
                day: day.to_string(),
                hms: hms.to_string(),
            },
            rest,
        )
    } else {
        return (None, None, line);
    };
    // host then `ident[pid]: message`
    let Some((_host, ident_msg)) = rest.split_once(' ') else {
        return (None, None, line);
    };
    let Some((ident, msg)) = ident_msg.split_once(": ") else {
        return (None, None, line);
    };
    let unit = ident.split('[').next().unwrap_or(ident).to_string();
    (Some(prefix), Some(unit), msg)
}

/// Iterator over logfmt `key=value` pairs; values may be Go-quoted.
pub struct LogfmtIter<'a> {
    rest: &'a str,
}

impl<'a> LogfmtIter<'a> {
    pub fn new(s: &'a str) -> Self {
        LogfmtIter { rest: s }
    }
}

impl Iterator for LogfmtIter<'_> {
    type Item = Result<(&'static str, String), JournalError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.rest = self.rest.trim_start();
            if self.rest.is_empty() {
                return None;
            }
            // key: up to '=' or space
            let kend = self.rest.find(['=', ' ']).unwrap_or(self.rest.len());
            let key = self.rest.get(..kend).unwrap_or("");
            let after = self.rest.get(kend..).unwrap_or("");
            let Some(val_start) = after.strip_prefix('=') else {
                // bare word: skip
                self.rest = after;
                continue;
            };
            let (value, rest) = if let Some(q) = val_start.strip_prefix('"') {
                match unquote_go(q) {
                    Ok((v, rest)) => (v, rest),
                    Err(e) => {
                        self.rest = "";
                        return Some(Err(match e {
                            Unq::Unterminated => JournalError::Unterminated(key.to_string()),
                            Unq::BadEscape => JournalError::BadEscape(key.to_string()),
                        }));
                    }
                }
            } else {
                let vend = val_start.find(' ').unwrap_or(val_start.len());
                (
                    val_start.get(..vend).unwrap_or("").to_string(),
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
                _ => "",
            };
            if k.is_empty() {
                continue;
            }
            return Some(Ok((k, value)));
        }
    }
}

enum Unq {
    Unterminated,
    BadEscape,
}

/// Unquote a Go `%q` string whose opening quote is already consumed; returns the value and
/// the text after the closing quote.
fn unquote_go(s: &str) -> Result<(String, &str), Unq> {
    let mut out = String::with_capacity(s.len().min(512));
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, s.get(i + 1..).unwrap_or(""))),
            '\\' => {
                let (_, e) = chars.next().ok_or(Unq::Unterminated)?;
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '\'' => out.push('\''),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut v: u32 = 0;
                        for _ in 0..n {
                            let (_, h) = chars.next().ok_or(Unq::Unterminated)?;
                            v = v * 16 + h.to_digit(16).ok_or(Unq::BadEscape)?;
                        }
                        // \xNN is a byte; keep ASCII, replace others
                        out.push(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    _ => return Err(Unq::BadEscape),
                }
            }
            c => out.push(c),
        }
    }
    Err(Unq::Unterminated)
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
        assert!(matches!(j.prefix, Some(PrefixTime::Syslog { .. })));
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
}
