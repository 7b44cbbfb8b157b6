//! Streaming ingest: read any mix of the supported formats line by line (as bytes, so bad
//! encodings are counted, not fatal), detect each line's format, and collect parsed events.
//! Memory use grows with the number of *events*, not the size of the input.

use std::collections::HashMap;
use std::io::BufRead;

use memchr::memmem;
use serde::Serialize;

use crate::agent::{self, AgentRecord};
use crate::bpftrace::{self, BpfLine};
use crate::dmesg::{self, KernelLine};
use crate::ftrace::{self, FtraceLine};
use crate::journal;
use crate::kubectl::{self, KubectlLine};
use crate::time::{civil_from_nanos, Nanos, NS_PER_S};

/// Where an event came from: file index, 1-based line number, byte offset of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SrcRef {
    pub file: u32,
    pub line: u64,
    #[serde(skip)]
    pub offset: u64,
}

/// A parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Kernel(KernelLine),
    Agent(AgentRecord),
    Bpf(BpfLine),
    Ftrace(FtraceLine),
    Kube(KubectlLine),
    /// A containerd line for a sandbox without a console payload (shim activity).
    Host {
        msg: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub src: SrcRef,
    /// Index into [`Ingest::sandboxes`] for journal lines that name a sandbox.
    pub sandbox: Option<u32>,
    /// Host clock of the line (journal `time=`/prefix), if it has one.
    pub host: Option<Nanos>,
    pub body: Body,
}

/// Counts of lines that were skipped, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BadCounts {
    /// Not valid UTF-8.
    pub encoding: u64,
    /// A JSON record (kata-agent) that does not parse: truncated, broken.
    pub json: u64,
    /// A timestamp that does not parse.
    pub time: u64,
    /// A line of a known format with a malformed field.
    pub format: u64,
    /// A time earlier than the same stream's latest by more than 1 s.
    pub out_of_order: u64,
}

impl BadCounts {
    pub fn total(&self) -> u64 {
        self.encoding + self.json + self.time + self.format + self.out_of_order
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub lines: u64,
    pub bytes: u64,
    pub events: u64,
    /// Lines of no format we read (prose, other units, `[...]`).
    pub unrecognized: u64,
    /// Journal lines for sandboxes other than `--sandbox`.
    pub other_sandbox: u64,
    pub bad: BadCounts,
    /// The first few bad lines: `file:line: reason`.
    pub bad_examples: Vec<String>,
}

/// Everything read from the inputs.
#[derive(Debug, Clone, Default)]
pub struct Ingest {
    pub files: Vec<String>,
    pub sandboxes: Vec<String>,
    pub events: Vec<Event>,
    pub stats: Stats,
}

/// Options for reading.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Keep only journal lines of this sandbox (full id or a unique prefix of ≥ 6 chars is
    /// matched by `sandbox=PREFIX`).
    pub sandbox: Option<String>,
    /// Year for journald short-format prefixes (`Nov 20 16:25:32`) when no `time=` field
    /// gives one; default: the year of the latest full timestamp seen.
    pub year: Option<i64>,
    /// Zone of journald short-format prefixes, seconds east of UTC (default 0).
    pub utc_offset_s: i64,
}

const MAX_EXAMPLES: usize = 8;
const OOO_TOLERANCE_NS: i64 = NS_PER_S;

/// Streaming reader over any number of files.
pub struct Ingester {
    opts: Options,
    out: Ingest,
    sandbox_ids: HashMap<String, u32>,
    last_year: Option<i64>,
    /// latest host time per file; latest guest time and agent ts per (file, sandbox)
    max_host: HashMap<(u32, Option<u32>), Nanos>,
    max_guest: HashMap<(u32, Option<u32>), f64>,
    max_agent: HashMap<(u32, Option<u32>), Nanos>,
    last_pin_call: HashMap<u32, Nanos>,
}

enum Bad {
    Encoding,
    Json(String),
    Time(String),
    Format(String),
    OutOfOrder(String),
}

impl Ingester {
    pub fn new(opts: Options) -> Self {
        Ingester {
            opts,
            out: Ingest::default(),
            sandbox_ids: HashMap::new(),
            last_year: None,
            max_host: HashMap::new(),
            max_guest: HashMap::new(),
            max_agent: HashMap::new(),
            last_pin_call: HashMap::new(),
        }
    }

    /// Register an input; returns its index for [`Ingester::feed_line`].
    pub fn add_file(&mut self, name: &str) -> u32 {
        self.out.files.push(name.to_string());
        (self.out.files.len() - 1) as u32
    }

    /// Read a whole stream line by line. Lines are split in the reader's buffer with
    /// `memchr` (copied only when they straddle two buffer fills), and the cheap byte-level
    /// checks below skip other units' and other sandboxes' lines before any parsing.
    pub fn read<R: BufRead>(&mut self, name: &str, mut r: R) -> std::io::Result<()> {
        let file = self.add_file(name);
        let mut carry: Vec<u8> = Vec::new();
        let mut line_no = 0u64;
        let mut offset = 0u64;
        let any_sandbox = memmem::Finder::new(b" sandbox=");
        let want = self.opts.sandbox.clone().map(String::into_bytes);
        loop {
            let buf = r.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let len = buf.len();
            let mut start = 0usize;
            for nl in memchr::memchr_iter(b'\n', buf) {
                let piece = buf.get(start..=nl).unwrap_or(&[]);
                start = nl + 1;
                line_no += 1;
                let src = SrcRef {
                    file,
                    line: line_no,
                    offset,
                };
                if carry.is_empty() {
                    offset += piece.len() as u64;
                    self.line(src, piece, &any_sandbox, want.as_deref());
                } else {
                    carry.extend_from_slice(piece);
                    offset += carry.len() as u64;
                    let l = std::mem::take(&mut carry);
                    self.line(src, &l, &any_sandbox, want.as_deref());
                }
            }
            carry.extend_from_slice(buf.get(start..).unwrap_or(&[]));
            r.consume(len);
        }
        if !carry.is_empty() {
            line_no += 1;
            let src = SrcRef {
                file,
                line: line_no,
                offset,
            };
            self.line(src, &carry, &any_sandbox, want.as_deref());
        }
        Ok(())
    }

    fn line(
        &mut self,
        src: SrcRef,
        bytes: &[u8],
        any_sandbox: &memmem::Finder,
        want: Option<&[u8]>,
    ) {
        self.out.stats.lines += 1;
        self.out.stats.bytes += bytes.len() as u64;
        // fast paths, on bytes, before any parsing (most of a host journal is noise)
        match any_sandbox.find(bytes) {
            Some(pos) => {
                if let Some(w) = want {
                    let hit = bytes.get(pos + 9..).is_some_and(|rest| rest.starts_with(w))
                        || any_sandbox
                            .find_iter(bytes)
                            .skip(1)
                            .any(|p| bytes.get(p + 9..).is_some_and(|rest| rest.starts_with(w)));
                    if !hit {
                        self.out.stats.other_sandbox += 1;
                        return;
                    }
                }
            }
            None if journald_prefix(bytes) => {
                // another unit's journal line, or containerd without a sandbox: noise
                self.out.stats.unrecognized += 1;
                return;
            }
            None => {}
        }
        self.feed_bytes(src, bytes);
    }

    /// Feed one line (without or with its trailing newline).
    pub fn feed_bytes(&mut self, src: SrcRef, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                if let Err(b) = self.feed_str(src, s) {
                    self.bad(src, b);
                }
            }
            Err(_) => self.bad(src, Bad::Encoding),
        }
    }

    fn bad(&mut self, src: SrcRef, b: Bad) {
        let st = &mut self.out.stats;
        let reason = match b {
            Bad::Encoding => {
                st.bad.encoding += 1;
                "not valid UTF-8".to_string()
            }
            Bad::Json(e) => {
                st.bad.json += 1;
                format!("bad JSON: {e}")
            }
            Bad::Time(e) => {
                st.bad.time += 1;
                format!("bad time: {e}")
            }
            Bad::Format(e) => {
                st.bad.format += 1;
                e
            }
            Bad::OutOfOrder(e) => {
                st.bad.out_of_order += 1;
                format!("out of order: {e}")
            }
        };
        if st.bad_examples.len() < MAX_EXAMPLES {
            let f = self
                .out
                .files
                .get(src.file as usize)
                .map_or("?", String::as_str);
            st.bad_examples.push(format!("{f}:{}: {reason}", src.line));
        }
    }

    fn intern(&mut self, id: &str) -> u32 {
        if let Some(&i) = self.sandbox_ids.get(id) {
            return i;
        }
        let i = self.out.sandboxes.len() as u32;
        self.out.sandboxes.push(id.to_string());
        self.sandbox_ids.insert(id.to_string(), i);
        i
    }

    fn push(&mut self, src: SrcRef, sandbox: Option<u32>, host: Option<Nanos>, body: Body) {
        self.out.stats.events += 1;
        self.out.events.push(Event {
            src,
            sandbox,
            host,
            body,
        });
    }

    fn check_host(&mut self, key: (u32, Option<u32>), t: Nanos) -> Result<(), Bad> {
        let m = self.max_host.entry(key).or_insert(t);
        if t.saturating_add(OOO_TOLERANCE_NS) < *m {
            return Err(Bad::OutOfOrder(format!(
                "host time {:.3} s before the latest",
                (i128::from(*m) - i128::from(t)) as f64 / 1e9
            )));
        }
        *m = (*m).max(t);
        self.last_year = Some(civil_from_nanos(t).0);
        Ok(())
    }

    /// Console payload (kernel line or agent JSON) of a sandbox/file stream.
    fn console(
        &mut self,
        src: SrcRef,
        sandbox: Option<u32>,
        host: Option<Nanos>,
        s: &str,
    ) -> Result<bool, Bad> {
        if agent::looks_like(s) {
            let rec = agent::parse_line(s).map_err(|e| Bad::Json(e.to_string()))?;
            let m = self.max_agent.entry((src.file, sandbox)).or_insert(rec.ts);
            if rec.ts.saturating_add(OOO_TOLERANCE_NS) < *m {
                return Err(Bad::OutOfOrder(format!(
                    "agent ts {:.3} s before the latest",
                    (i128::from(*m) - i128::from(rec.ts)) as f64 / 1e9
                )));
            }
            *m = (*m).max(rec.ts);
            self.push(src, sandbox, host, Body::Agent(rec));
            return Ok(true);
        }
        if let Some(k) = dmesg::parse_line(s) {
            let m = self.max_guest.entry((src.file, sandbox)).or_insert(k.t);
            if k.t + 1.0 < *m {
                return Err(Bad::OutOfOrder(format!(
                    "guest time {:.6} s after {:.6} s",
                    k.t, m
                )));
            }
            *m = m.max(k.t);
            self.push(src, sandbox, host, Body::Kernel(k));
            return Ok(true);
        }
        Ok(false)
    }

    fn feed_str(&mut self, src: SrcRef, s: &str) -> Result<(), Bad> {
        let trimmed = s.trim();
        if trimmed.is_empty() {
            self.out.stats.unrecognized += 1;
            return Ok(());
        }
        // 1. containerd journal (logfmt)
        if s.contains("time=") || s.contains("msg=") {
            match journal::parse_line(s) {
                Ok(Some(j)) => return self.journal(src, j),
                Ok(None) => {}
                Err(e @ journal::JournalError::BadTime) => return Err(Bad::Time(e.to_string())),
                Err(e) => return Err(Bad::Format(format!("journal: {e}"))),
            }
        }
        // 2. console payload: agent JSON or kernel line
        if self.console(src, None, None, trimmed)? {
            return Ok(());
        }
        // 3. bpftrace
        if bpftrace::looks_like(trimmed) {
            match bpftrace::parse_line(trimmed) {
                Ok(Some(b)) => return self.bpf(src, b),
                Ok(None) => {}
                Err(bpftrace::BpfError::BadTs(t)) => return Err(Bad::Time(t)),
                Err(e) => return Err(Bad::Format(format!("bpftrace: {e}"))),
            }
        }
        // 4. ftrace function_graph
        if ftrace::looks_like(s) {
            match ftrace::parse_line(s) {
                Ok(Some(FtraceLine::Meta)) => {
                    self.out.stats.unrecognized += 1;
                    return Ok(());
                }
                Ok(Some(f)) => {
                    self.push(src, None, None, Body::Ftrace(f));
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => return Err(Bad::Format(format!("ftrace: {e}"))),
            }
        }
        // 5. kubectl describe
        if s.contains(':') {
            match kubectl::parse_line(s) {
                Ok(Some(k)) => {
                    self.push(src, None, None, Body::Kube(k));
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => return Err(Bad::Time(e.to_string())),
            }
        }
        self.out.stats.unrecognized += 1;
        Ok(())
    }

    fn journal(&mut self, src: SrcRef, j: journal::JournalLine) -> Result<(), Bad> {
        if let (Some(want), Some(have)) = (&self.opts.sandbox, &j.sandbox) {
            if !have.starts_with(want.as_str()) {
                self.out.stats.other_sandbox += 1;
                return Ok(());
            }
        }
        let year = self.opts.year.or(self.last_year);
        let host = j.time.or_else(|| {
            j.prefix
                .as_ref()
                .and_then(|p| p.resolve(year.unwrap_or(1970), self.opts.utc_offset_s))
        });
        let Some(sb) = j.sandbox.as_deref() else {
            // containerd line with no sandbox: noise for us
            self.out.stats.unrecognized += 1;
            return Ok(());
        };
        let sandbox = Some(self.intern(sb));
        if let Some(t) = host {
            self.check_host((src.file, sandbox), t)?;
        }
        if let Some(vc) = j.vmconsole.as_deref() {
            if !self.console(src, sandbox, host, vc.trim())? {
                // console text that is neither kernel nor agent (e.g. NVRC output)
                self.push(
                    src,
                    sandbox,
                    host,
                    Body::Host {
                        msg: vc.to_string(),
                    },
                );
            }
            return Ok(());
        }
        let msg = j.msg.unwrap_or_default();
        self.push(src, sandbox, host, Body::Host { msg });
        Ok(())
    }

    fn bpf(&mut self, src: SrcRef, b: BpfLine) -> Result<(), Bad> {
        let b = match b {
            BpfLine::PinCall { ts: Some(t), .. } => {
                self.last_pin_call.insert(src.file, t);
                b
            }
            // The seed's script prints seconds and nanoseconds from two reads of the clock,
            // so a return can print before its call. Keep the measured duration, drop the
            // impossible timestamp, count the line.
            BpfLine::PinTook { ts: Some(t), ms } => match self.last_pin_call.get(&src.file) {
                Some(&c) if t < c => {
                    self.bad(
                        src,
                        Bad::OutOfOrder(format!(
                            "return printed {:.3} s before its call; timestamp dropped, duration kept",
                            (i128::from(c) - i128::from(t)) as f64 / 1e9
                        )),
                    );
                    BpfLine::PinTook { ts: None, ms }
                }
                _ => b,
            },
            b => b,
        };
        self.push(src, None, None, Body::Bpf(b));
        Ok(())
    }

    pub fn finish(self) -> Ingest {
        self.out
    }
}

/// Does the line start with a journald short / short-iso prefix (`Nov 20 16:25:32 ` or
/// `2025-11-20T16:25:32`)? Byte-level and cheap: used to skip other units' lines.
fn journald_prefix(b: &[u8]) -> bool {
    match b {
        [m0, m1, m2, b' ', d0, d1, b' ', h0, h1, b':', ..] => {
            m0.is_ascii_uppercase()
                && m1.is_ascii_lowercase()
                && m2.is_ascii_lowercase()
                && (d0.is_ascii_digit() || *d0 == b' ')
                && d1.is_ascii_digit()
                && h0.is_ascii_digit()
                && h1.is_ascii_digit()
        }
        [y0, y1, y2, y3, b'-', _, _, b'-', _, _, b'T', rest @ ..] => {
            // `2025-11-20T16:25:32+0000 host …`, not bpftrace's `2025-11-20T…Z: vfio…`
            [y0, y1, y2, y3].iter().all(|c| c.is_ascii_digit())
                && rest
                    .iter()
                    .position(|c| *c == b' ')
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| rest.get(i))
                    .is_some_and(|c| *c != b':')
        }
        _ => false,
    }
}

/// Read in-memory text (tests, fuzzing): one pseudo-file.
pub fn ingest_str(name: &str, text: &str, opts: Options) -> Ingest {
    ingest_bytes(name, text.as_bytes(), opts)
}

/// Read in-memory bytes (tests, fuzzing): one pseudo-file.
pub fn ingest_bytes(name: &str, data: &[u8], opts: Options) -> Ingest {
    let mut ing = Ingester::new(opts);
    // reading from a slice cannot fail
    let _ = ing.read(name, data);
    ing.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_prefixes() {
        assert!(journald_prefix(b"Nov 20 16:25:32 host kubelet[1]: x"));
        assert!(journald_prefix(b"Nov  2 16:25:32 host kubelet[1]: x"));
        assert!(journald_prefix(
            b"2025-11-20T16:25:32+0000 host kubelet[1]: x"
        ));
        assert!(!journald_prefix(
            b"2025-11-20T17:56:21.688170596Z: vfio_pin_pages_remote took 3 ms"
        ));
        assert!(!journald_prefix(b"[    3.201931] pci 0000:02:00.0: x"));
        assert!(!journald_prefix(
            b"Start Time:   Mon, 24 Nov 2025 21:21:09 +0000"
        ));
    }

    #[test]
    fn mixed_and_bad() {
        let text =
            "[    3.201931] pci 0000:02:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint\n\
{\"msg\":\"truncated\n\
[...]\n\
[    1.000000] earlier than 3.2 by more than 1 s\n\
223) $ 3389981 us  |  vfio_pin_pages_remote [vfio_iommu_type1]();\n\
Start Time:          Mon, 24 Nov 2025 21:21:09 +0000\n";
        let mut bytes = text.as_bytes().to_vec();
        bytes.extend_from_slice(b"[    4.0] bad \xff\xfe bytes\n");
        let ing = ingest_bytes("t", &bytes, Options::default());
        assert_eq!(ing.stats.lines, 7);
        assert_eq!(ing.stats.events, 3);
        assert_eq!(ing.stats.bad.json, 1);
        assert_eq!(ing.stats.bad.out_of_order, 1);
        assert_eq!(ing.stats.bad.encoding, 1);
        assert_eq!(ing.stats.unrecognized, 1);
        assert_eq!(ing.stats.bad_examples.len(), 3);
    }
}
