//! Reading the journal's most repeated console lines by their differences from one read the
//! long way.
//!
//! A memory hotplug logs one kata-agent uevent per 128 MiB block, each a containerd console
//! line of ~770 bytes: 675 k of the 760 k lines the 1 GB generated journal's boots are read
//! from, more than half its bytes; the agent's CDI wait logs a try every ~2 s (36 k more).
//! Within a burst such lines differ only in numbers: the journald prefix time, `time=`, the
//! record's `ts`, and the block number and uevent sequence number, or the try's number. A
//! line parsed the long way that is such a record becomes a [`Template`]: its bytes, and
//! the spans of those values in them. A later line of the same length whose bytes equal
//! the template's outside the spans, and inside them differ only where both hold ASCII
//! digits, has the same structure — same keys, quotes and escapes, same host, unit,
//! sandbox and shim pid, same record kind but for the try's number (the block number is
//! the digits after `/devices/system/memory/memory`, never a PCI address; the sequence
//! number is read by nothing) — so only the times and the try are read from it, by the
//! functions the long way uses; if one does not read, or the journald prefix does not
//! split where the template's did, the line is read the long way. Checked against the long
//! way by a differential property test ([`agrees`]) and a fuzz target.

use std::borrow::Cow;

use memchr::memmem;

use super::{Console, JournalBody, JournalParsed, Parsed, Varying};
use crate::parse::agent::{AgentKind, AgentRecord};
use crate::parse::journal;
use crate::parse::time::{parse_rfc3339_zoned, rfc3339_next};

/// Templates a block's reader keeps (concurrent boots interleave their bursts).
const KEPT: usize = 6;

/// A memory-uevent console line read the long way, as the pattern of the lines after it.
pub(super) struct Template<'a> {
    line: &'a [u8],
    /// Where the digits may differ, in order, not overlapping.
    spans: Vec<(usize, usize)>,
    /// Host and the journald message's start, as byte offsets (the prefix must split there).
    host: Option<(usize, usize)>,
    body: usize,
    /// `time=` value and the record's `ts` value.
    time: (usize, usize),
    ts: (usize, usize),
    /// The host and sandbox id, borrowed from the template's line (a matching line has
    /// the same bytes there).
    host_name: Option<&'a str>,
    sandbox: &'a str,
    pid: Option<u32>,
    kind: AgentKind,
    /// For a CDI wait's record: where its try's number is (the kind's `attempt`).
    attempt: Option<(usize, usize)>,
    /// The prefix bytes (up to the host) of the last line read, and the time they hold:
    /// lines a second apart share them.
    last_prefix: (&'a [u8], Option<journal::PrefixTime>),
    /// The `time=` and `ts` texts of the last line read, and what they read as: the next
    /// line's differ in the fraction of a second ([`rfc3339_next`]).
    last_time: Stamp<'a>,
    last_ts: Stamp<'a>,
}

/// A stamp's text and what [`parse_rfc3339_zoned`] reads it as.
type Stamp<'a> = (&'a [u8], (crate::parse::time::Nanos, Option<i64>));

/// Read the stamp at `span` of `c` from the last one read there.
fn stamp<'a>(c: &'a [u8], (lo, hi): (usize, usize), last: &mut Stamp<'a>) -> Option<()> {
    let text = c.get(lo..hi)?;
    let v = match rfc3339_next(last.0, last.1, text) {
        Some(v) => v,
        None => parse_rfc3339_zoned(std::str::from_utf8(text).ok()?)?,
    };
    *last = (text, v);
    Some(())
}

/// The byte range of `part` inside `whole`, if it is a slice of it.
fn range_in(whole: &str, part: &str) -> Option<(usize, usize)> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some((start, end))
}

/// The digits after the only occurrence of `key` in `b[lo..hi]`, if there is one and
/// `key` occurs nowhere else in `b`.
fn digits_after(b: &[u8], key: &[u8], lo: usize, hi: usize) -> Option<(usize, usize)> {
    let mut it = memmem::find_iter(b, key);
    let at = it.next()?;
    if it.next().is_some() {
        return None;
    }
    let start = at + key.len();
    let n = b
        .get(start..)?
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let end = start + n;
    (n > 0 && start >= lo && end <= hi).then_some((start, end))
}

impl<'a> Template<'a> {
    /// The template of `line` (its bytes without the line end, as `parse_bytes` reads
    /// them), which read the long way as `parsed`: `None` unless it is a containerd
    /// console line of a memory block's uevent or of a numbered CDI wait whose varying
    /// values are found unambiguously.
    pub(super) fn of(line: &'a [u8], parsed: &Parsed<'_>) -> Option<Template<'a>> {
        let Parsed::Journal(j) = parsed else {
            return None;
        };
        let JournalBody::Console(Console::Agent(rec)) = &j.body else {
            return None;
        };
        let cdi_attempt = match rec.kind {
            AgentKind::Uevent {
                memory: true,
                bdf: None,
                ..
            } => None,
            AgentKind::CdiWait {
                attempt: Some(a),
                max: Some(_),
                ..
            } => Some(a),
            _ => return None,
        };
        let s = std::str::from_utf8(line).ok()?;
        if matches!(s.trim().as_bytes().first(), Some(b'{' | 0x1e)) {
            return None;
        }
        let (prefix, host, _, body) = journal::split_prefix(s);
        let mut console = String::new();
        let r = journal::parse_ref_into(s, &mut console).ok()??;
        let time = range_in(s, r.time_text?)?;
        let raw = r.vmconsole_agent.as_ref()?;
        let Cow::Borrowed(ts) = &raw.ts else {
            return None;
        };
        let ts = range_in(s, ts)?;
        let Some(Cow::Borrowed(sandbox)) = &r.sandbox else {
            return None;
        };
        let sandbox_at = range_in(s, sandbox)?;
        let console_value = range_in(s, r.vmconsole.as_ref()?.text())?;
        let b = line;
        let (lo, hi) = console_value;
        // the numbers of the record that differ from line to line besides its time
        let (numbers, attempt) = match cdi_attempt {
            None => {
                let block_no = digits_after(b, b"/devices/system/memory/memory", lo, hi)?;
                let seqnum = digits_after(b, b"seqnum: \\\\\\\"", lo, hi)?;
                (vec![block_no, seqnum], None)
            }
            // the try's number, as `agent::classify` reads it: the word after the `(`
            Some(a) => {
                let at = digits_after(b, b"to be generated (", lo, hi)?;
                let text = std::str::from_utf8(b.get(at.0..at.1)?).ok()?;
                if text.parse::<u32>().ok()? != a {
                    return None;
                }
                (vec![at], Some(at))
            }
        };
        let host_name = host;
        let host = match host {
            Some(h) => Some(range_in(s, h)?),
            None => None,
        };
        let body = range_in(s, body)?.0;
        let mut spans = vec![time, ts];
        spans.extend(numbers);
        if prefix.is_some() {
            spans.push((0, host?.0));
        }
        spans.sort_unstable();
        // the spans must not overlap one another, nor the sandbox id
        let apart = spans.windows(2).all(|w| w[0].1 <= w[1].0)
            && spans
                .iter()
                .all(|&(lo, hi)| hi <= sandbox_at.0 || lo >= sandbox_at.1);
        // nor hold anything but the values: no escape before a digit that may change
        let plain = spans.iter().all(|&(lo, hi)| {
            (lo..hi).all(|i| {
                !b.get(i).is_some_and(u8::is_ascii_digit) || i == 0 || b.get(i - 1) != Some(&b'\\')
            })
        });
        if !(apart && plain) {
            return None;
        }
        let zoned = |(lo, hi): (usize, usize)| -> Option<Stamp<'a>> {
            let text = b.get(lo..hi)?;
            Some((text, parse_rfc3339_zoned(std::str::from_utf8(text).ok()?)?))
        };
        let (last_time, last_ts) = (zoned(time)?, zoned(ts)?);
        Some(Template {
            last_time,
            last_ts,
            line,
            spans,
            host,
            body,
            time,
            ts,
            host_name,
            sandbox,
            pid: j.pid,
            kind: rec.kind.clone(),
            attempt,
            last_prefix: (line.get(..host.map_or(0, |h| h.0))?, prefix),
        })
    }

    /// Whether `c` has this template's bytes but for digits inside its spans.
    fn matches(&self, c: &[u8]) -> bool {
        let p = self.line;
        if c.len() != p.len() {
            return false;
        }
        let mut at = 0usize;
        for &(lo, hi) in &self.spans {
            if c.get(at..lo) != p.get(at..lo) {
                return false;
            }
            let (Some(cs), Some(ps)) = (c.get(lo..hi), p.get(lo..hi)) else {
                return false;
            };
            // without a branch per byte (the compiler makes it vector code)
            let digit = |c: u8| c.wrapping_sub(b'0') < 10;
            if !cs
                .iter()
                .zip(ps)
                .fold(true, |ok, (&x, &y)| ok & ((x == y) | (digit(x) & digit(y))))
            {
                return false;
            }
            at = hi;
        }
        c.get(at..) == p.get(at..)
    }

    /// `c` read as the long way reads it, if it matches and its values read.
    fn read(&mut self, c: &'a [u8]) -> Option<Varying> {
        if !self.matches(c) {
            return None;
        }
        let head = c.get(..self.last_prefix.0.len())?;
        let prefix = if head == self.last_prefix.0 {
            self.last_prefix.1
        } else {
            // only ASCII digits differ from the template's valid UTF-8
            let s = std::str::from_utf8(c).ok()?;
            let (prefix, host, _, body) = journal::split_prefix(s);
            let same_host = match (host, self.host) {
                (Some(h), Some(want)) => range_in(s, h) == Some(want),
                (None, None) => true,
                _ => false,
            };
            if !same_host || range_in(s, body).map(|r| r.0) != Some(self.body) {
                return None;
            }
            self.last_prefix = (head, prefix);
            prefix
        };
        stamp(c, self.time, &mut self.last_time)?;
        stamp(c, self.ts, &mut self.last_ts)?;
        let (time, zone) = self.last_time.1;
        let (ts, _) = self.last_ts.1;
        let attempt = match self.attempt {
            Some((lo, hi)) => Some(std::str::from_utf8(c.get(lo..hi)?).ok()?.parse().ok()?),
            None => None,
        };
        Some(Varying {
            prefix,
            time: Some(time),
            time_zone: zone,
            ts,
            attempt,
            dup: self
                .pid
                .and_then(|pid| super::agent_key(time, pid, ts, &self.kind, attempt)),
        })
    }

    /// The line this template read as `v`, as parsed (its repeat marks are the reader's to set).
    fn journal(&self, v: &Varying) -> JournalParsed<'a> {
        JournalParsed {
            prefix: v.prefix,
            host: self.host_name,
            time: v.time,
            time_zone: v.time_zone,
            sandbox: Some(Cow::Borrowed(self.sandbox)),
            pid: self.pid,
            body: JournalBody::Console(Console::Agent(AgentRecord {
                ts: v.ts,
                kind: match (&self.kind, v.attempt) {
                    (AgentKind::CdiWait { max, devices, .. }, Some(a)) => AgentKind::CdiWait {
                        attempt: Some(a),
                        max: *max,
                        devices: *devices,
                    },
                    (kind, _) => kind.clone(),
                },
            })),
            same_host: false,
            same_sandbox: false,
            dup: v.dup,
            loose: false,
            shim: false,
            join: None,
        }
    }
}

/// The templates one block's reader has built, the latest first.
#[derive(Default)]
pub(super) struct Templates<'a> {
    kept: Vec<Template<'a>>,
}

impl<'a> Templates<'a> {
    /// `line` read by a template, if one matches: the template's identity (the lines one
    /// template reads share their host, sandbox, shim pid and record kind, which
    /// [`Templates::journal`] adds) and what differs.
    pub(super) fn read(&mut self, line: &'a [u8]) -> Option<(usize, Varying)> {
        let (i, id, v) = self
            .kept
            .iter_mut()
            .enumerate()
            .find_map(|(i, t)| Some((i, t.line.as_ptr() as usize, t.read(line)?)))?;
        if i > 0 {
            self.kept.swap(0, i);
        }
        Some((id, v))
    }

    /// The line template `id` read as `v`, as parsed.
    pub(super) fn journal(&self, id: usize, v: &Varying) -> Option<JournalParsed<'a>> {
        self.kept
            .iter()
            .find(|t| t.line.as_ptr() as usize == id)
            .map(|t| t.journal(v))
    }

    /// Keep the template of `line`, read the long way as `parsed`, if it makes one.
    pub(super) fn learn(&mut self, line: &'a [u8], parsed: &Parsed<'_>) {
        if let Some(t) = Template::of(line, parsed) {
            if self.kept.len() == KEPT {
                self.kept.pop();
            }
            self.kept.insert(0, t);
        }
    }
}

/// For tests and fuzzing: every line of `block` read line by line the long way and by a
/// block reader with templates (as the scanning threads read) gives the same; `Err` names
/// the first line that does not, and the count of lines the templates read otherwise.
#[doc(hidden)]
pub fn agrees(block: &[u8], want: Option<&str>) -> Result<usize, String> {
    let mut templates = Templates::default();
    let mut by_template = 0usize;
    let mut buf = String::new();
    for (n, raw) in block.split_inclusive(|&c| c == b'\n').enumerate() {
        let line = super::strip_line_end(raw);
        let long = super::parse_bytes(raw, want, &mut buf);
        let long_text = format!("{long:?}");
        let fast = templates
            .read(line)
            .and_then(|(id, v)| templates.journal(id, &v));
        match fast.map(Parsed::Journal) {
            Some(fast) => {
                by_template += 1;
                let fast_text = format!("{fast:?}");
                if fast_text != long_text {
                    return Err(format!(
                        "line {}: template {fast_text} != long way {long_text}",
                        n + 1
                    ));
                }
            }
            None => templates.learn(line, &long),
        }
    }
    Ok(by_template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{fleet, JournalFormat, Spec};
    use proptest::prelude::*;

    const FORMATS: [JournalFormat; 7] = JournalFormat::ALL;

    /// One node's journal of one boot whose guest onlines `hot_gib` of hotplugged memory.
    fn journal(seed: u64, format: JournalFormat, zone_min: i64, prefix_only: u8) -> Vec<u8> {
        let mut spec = Spec::study(seed);
        spec.gpus = 1;
        spec.enable_order = vec![0];
        spec.hot_ram_gib = 8;
        spec.journal_format = format;
        spec.zone_min = zone_min;
        spec.prefix_only_pct = prefix_only;
        let start = crate::parse::time::parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
        let mut nodes = fleet(&[("gpu-01".to_string(), vec![spec])], start, 3600);
        nodes.remove(0).journal.into_bytes()
    }

    /// The memory uevent lines of a burst are read by templates (this is where the speed
    /// comes from), in the journal formats whose lines carry their own prefix.
    #[test]
    fn templates_read_the_bursts() {
        for format in FORMATS {
            let j = journal(7, format, 0, 0);
            let uevents = memmem::find_iter(&j, b"/devices/system/memory/memory").count();
            let cdi = memmem::find_iter(&j, b"waiting for CDI spec(s)").count();
            let n = agrees(&j, None).unwrap_or_else(|e| panic!("{format:?}: {e}"));
            if format == JournalFormat::Json {
                assert_eq!(n, 0, "an export's lines are read the long way");
            } else {
                assert!(uevents >= 64 && cdi >= 4, "{format:?}: {uevents} {cdi}");
                assert!(
                    n * 10 >= (uevents + cdi) * 9,
                    "{format:?}: {n} of {uevents} uevents and {cdi} CDI waits"
                );
            }
        }
    }

    proptest! {
        // PROPTEST_CASES=N runs more (a soak); 48 by default
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
        ))]

        /// Whatever a line's bytes, a template reads it as the long way does or not at
        /// all: generated journals in every format, zone and share of prefix-only lines,
        /// with bytes overwritten — digits mostly, anywhere (inside the values a template
        /// lets differ, and outside them), sometimes other bytes.
        #[test]
        fn a_template_reads_a_line_as_the_long_way_does(
            seed in any::<u64>(),
            format in 0..FORMATS.len(),
            zone_min in prop_oneof![Just(0i64), Just(480), Just(-240), Just(330)],
            prefix_only in prop_oneof![Just(0u8), Just(30), Just(100)],
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..400),
            want in prop_oneof![Just(None), Just(Some(String::new())), Just(Some("0".to_string()))],
        ) {
            let mut j = journal(seed, FORMATS[format], zone_min, prefix_only);
            let len = j.len();
            for (at, b) in edits {
                let i = at.index(len);
                j[i] = match b {
                    0..=199 => b'0' + b % 10,
                    200..=219 => b' ',
                    220..=229 => b'"',
                    230..=239 => b'\\',
                    _ => b,
                };
            }
            if let Err(e) = agrees(&j, want.as_deref()) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}
