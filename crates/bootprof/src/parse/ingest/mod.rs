//! Ingest: read any mix of the supported formats line by line (as bytes, so bad encodings
//! are counted, not fatal), detect each line's format, and collect parsed events.
//!
//! Reading a line has three steps: the byte-level prefilter (module `scan`: is this line
//! another unit's or another sandbox's?), parsing (pure: `parse_bytes`), and applying the
//! result to the reader's state (`Ingester::apply`: out-of-order checks, sandbox ids,
//! pin-call bookkeeping, counts), which needs the lines in file order. Two drivers:
//! * [`Ingester::read`] streams any `BufRead` (stdin, pipes): one buffer fill at a time,
//!   memory bounded by the buffer and the longest line plus the events;
//! * [`Ingester::read_slice`] / [`Ingester::read_path`] (a memory-mapped regular file) run
//!   the prefilter and the parsing on newline-aligned blocks on all CPUs, and apply the
//!   results block by block in file order — the same `Ingest`, bit for bit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, LazyLock, Mutex, PoisonError};

use serde::Serialize;

use crate::parse::agent::{self, AgentRecord};
use crate::parse::bpftrace::{self, BpfLine};
use crate::parse::dmesg::{self, KernelLine};
use crate::parse::ftrace::{self, FtraceLine};
use crate::parse::journal::{self, PrefixTime};
use crate::parse::kubectl::{self, KubectlLine};
use crate::parse::runtime_rs;
use crate::parse::scan::{line_blocks, Counts, Kept, Prefilter};
use crate::parse::time::{LocalStamp, Nanos, NS_PER_S};

/// Where an event came from: file index, 1-based line number, byte offset of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SrcRef {
    pub file: u32,
    pub line: u64,
    #[serde(skip)]
    pub offset: u64,
}

impl SrcRef {
    /// `file:line`, with the file's name from `files`.
    pub fn at(&self, files: &[String]) -> String {
        format!(
            "{}:{}",
            files.get(self.file as usize).map_or("?", String::as_str),
            self.line
        )
    }
}

/// A parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Kernel(KernelLine),
    Agent(AgentRecord),
    Bpf(BpfLine),
    Ftrace(FtraceLine),
    Kube(KubectlLine),
    /// A containerd line for a sandbox without a console payload (shim activity, errors).
    Host(HostLine),
    /// Consecutive agent records of one stream reporting memory blocks: see [`AgentRun`].
    AgentRun(Box<AgentRun>),
}

/// Consecutive lines of one stream (file, node, sandbox, shim pid), each with a complete
/// host time, that carry kata-agent records of one kind reporting a memory block — a
/// memory hotplug logs one uevent per 128 MiB block, 675 k of the 760 k events of the
/// 1 GB generated journal — kept as one event that holds what differs line by line. The
/// event's `src` and `host` are its first line's. Each reader handles its lines one by
/// one as it would handle them as events of their own (`Body::Agent` with this kind), so
/// the results are the same; the run saves the events' size and the work per event.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    pub kind: agent::AgentKind,
    /// Every line, the first included, in file order.
    pub lines: Vec<RunLine>,
}

/// One line of an [`AgentRun`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLine {
    pub line: u64,
    pub offset: u64,
    /// Host time (`time=`).
    pub host: Nanos,
    /// The agent record's `ts`.
    pub ts: Nanos,
}

impl AgentRun {
    /// Each line: where it is (in `file`), its host time and its agent ts.
    pub fn each(&self, file: u32) -> impl DoubleEndedIterator<Item = (SrcRef, Nanos, Nanos)> + '_ {
        self.lines.iter().map(move |l| {
            (
                SrcRef {
                    file,
                    line: l.line,
                    offset: l.offset,
                },
                l.host,
                l.ts,
            )
        })
    }
}

impl Event {
    /// How many lines this event stands for (those of an [`AgentRun`], else 1).
    pub fn lines(&self) -> u64 {
        match &self.body {
            Body::AgentRun(r) => r.lines.len() as u64,
            _ => 1,
        }
    }

    /// A guest console line (kernel or agent record), or a run of them.
    pub fn is_console(&self) -> bool {
        matches!(
            self.body,
            Body::Kernel(_) | Body::Agent(_) | Body::AgentRun(_)
        )
    }

    /// The least and greatest host time of its lines (`host` for a single line).
    pub fn host_range(&self) -> Option<(Nanos, Nanos)> {
        match &self.body {
            Body::AgentRun(r) => {
                let hosts = r.lines.iter().map(|l| l.host);
                Some((hosts.clone().min()?, hosts.max()?))
            }
            _ => self.host.map(|t| (t, t)),
        }
    }
}

/// A containerd / shim line of a sandbox that carries no guest console payload.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLine {
    pub msg: String,
    /// `level=error` (or fatal / panic).
    pub is_error: bool,
    /// `error=`: why an operation failed.
    pub error: Option<String>,
    /// `vfio-device-BDF=`: the host device a VFIO hot-plug line is about.
    pub device: Option<String>,
    /// QEMU's own output relayed by the shim: a line of its stderr (`qemuPid=`, the Go
    /// shim 2.x on; Kata 1.x's `subsystem=qmp` error after `Unable to launch …`).
    pub qemu: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub src: SrcRef,
    /// Index into [`Ingest::sandboxes`] for journal lines that name a sandbox.
    pub sandbox: Option<u32>,
    /// The shim process that wrote a journal line (`pid=`): boots of one sandbox id are
    /// told apart by it.
    pub pid: Option<u32>,
    /// Index into [`Ingest::nodes`]: the host a journal line names (journald's host
    /// field, `_HOSTNAME`).
    pub node: Option<u32>,
    /// Host clock of the line (journal `time=` or a complete prefix), if it has one.
    pub host: Option<Nanos>,
    /// A journald prefix without year or zone, for lines that have no `time=`: placed on
    /// the host clock by the analysis, which infers the year and zone from all the inputs.
    pub local: Option<LocalStamp>,
    pub body: Body,
}

/// What the inputs say about their clocks, for the analysis to infer year and zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClockSamples {
    /// Zone of the journald prefix (seconds east of UTC) → lines where the prefix and the
    /// line's own `time=` agree on it.
    pub prefix_zones: std::collections::BTreeMap<i64, u64>,
    /// Zones `time=` values were written in → lines.
    pub time_zones: std::collections::BTreeMap<i64, u64>,
    /// Earliest and latest complete timestamp in any input (journal `time=`, agent `ts`,
    /// bpftrace stamps, kubectl times).
    pub first_full: Option<Nanos>,
    pub last_full: Option<Nanos>,
    /// The latest journal `time=`: the year of prefix-only lines is read near it first.
    pub last_journal: Option<Nanos>,
}

impl ClockSamples {
    fn full(&mut self, t: Nanos) {
        self.first_full = Some(self.first_full.map_or(t, |f| f.min(t)));
        self.last_full = Some(self.last_full.map_or(t, |l| l.max(t)));
    }

    fn journal_time(&mut self, t: Nanos) {
        self.full(t);
        self.last_journal = Some(self.last_journal.map_or(t, |l| l.max(t)));
    }

    /// Add another set of samples (of the same host's other inputs) to these.
    pub fn merge(&mut self, o: &ClockSamples) {
        for (z, n) in &o.prefix_zones {
            *self.prefix_zones.entry(*z).or_default() += n;
        }
        for (z, n) in &o.time_zones {
            *self.time_zones.entry(*z).or_default() += n;
        }
        for t in [o.first_full, o.last_full].into_iter().flatten() {
            self.full(t);
        }
        if let Some(t) = o.last_journal {
            self.last_journal = Some(self.last_journal.map_or(t, |l| l.max(t)));
        }
    }
}

/// Whose clock samples a line adds to, besides the inputs' own: its node's (a journal line
/// that names its host), else its file's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClockOf {
    Node(u32),
    File(u32),
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

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
    /// Guest kernel lines whose stamps are wall-clock times (`dmesg -T`, `--time-format
    /// iso`, `-e`): not placed on a boot, which needs seconds since boot.
    pub wall_clock_kernel: u64,
    /// Their shapes (`dmesg -T (--ctime)`, …), each once.
    pub wall_clock_shapes: Vec<&'static str>,
    /// Shim records read a second time and dropped: the same `time=`, `pid=` and message
    /// under another syslog identifier (`kata[SHIM]` and `containerd[PID]`), or in another
    /// input.
    #[serde(skip_serializing_if = "is_zero")]
    pub duplicates: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Stats {
    /// What to tell a user whose inputs gave no event, beyond the line counts: the lines
    /// that were recognised as a shape that cannot be used, and how to get one that can.
    pub fn why_no_events(&self) -> String {
        let mut why = String::new();
        if self.wall_clock_kernel > 0 {
            why.push_str(&format!(
                "; {} guest kernel lines have wall-clock stamps ({}): the boot timeline needs the seconds since boot that `dmesg` prints without -T/-e/--time-format (or `journalctl -k -o short-monotonic`)",
                self.wall_clock_kernel,
                self.wall_clock_shapes.join(", ")
            ));
        }
        if self.unrecognized > 0 {
            why.push_str(&format!(
                "; {} lines in no format read here (other units' journal lines, `journalctl -k` without `-o short-monotonic`, prose)",
                self.unrecognized
            ));
        }
        why
    }

    /// The input summary's line for guest kernel lines with wall-clock stamps, if any.
    pub fn wall_clock_line(&self) -> Option<String> {
        (self.wall_clock_kernel > 0).then(|| {
            format!(
                "{} guest kernel lines not used: wall-clock stamps ({}), not seconds since boot",
                self.wall_clock_kernel,
                self.wall_clock_shapes.join(", ")
            )
        })
    }

    /// The input summary's line for shim records read twice, if any.
    pub fn duplicates_line(&self) -> Option<String> {
        (self.duplicates > 0).then(|| {
            format!(
                "{} duplicate records dropped: shim lines read again with the same time=, pid= and message (the shim logs each record as kata[PID] and, through containerd, as containerd[PID])",
                self.duplicates
            )
        })
    }

    /// Add a block's prefilter counts.
    fn add(&mut self, c: &Counts) {
        self.lines += c.lines;
        self.bytes += c.bytes;
        self.unrecognized += c.unrecognized;
        self.other_sandbox += c.other_sandbox;
    }
}

/// Everything read from the inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ingest {
    pub files: Vec<String>,
    pub sandboxes: Vec<String>,
    /// The hosts journal lines name (journald's host field), in order of first appearance.
    pub nodes: Vec<String>,
    pub events: Vec<Event>,
    pub stats: Stats,
    /// What all the inputs say about their clocks.
    pub clocks: ClockSamples,
    /// The same per node (index into `nodes`): one host's lines, for a fleet whose hosts
    /// run in different zones.
    pub node_clocks: Vec<ClockSamples>,
    /// The same per file (index into `files`), over the lines that name no host (traces,
    /// kubectl, journals without a host field).
    pub file_clocks: Vec<ClockSamples>,
}

/// Options for reading.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Keep only journal lines of sandboxes whose id starts with this (a full id or a
    /// prefix; `ID@N` picks a boot and is cut at the `@` here).
    pub sandbox: Option<String>,
}

impl Options {
    /// The id prefix the line filter matches.
    fn want(&self) -> Option<&str> {
        self.sandbox
            .as_deref()
            .map(|s| s.split_once('@').map_or(s, |(id, _)| id))
    }
}

/// How [`Ingester::read_slice_with`] splits its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    /// Scanning threads (besides the one feeding the parsers); 1 scans on the calling thread.
    pub threads: usize,
    /// Target block size; blocks end after a line end.
    pub block_bytes: usize,
}

impl Default for Parallel {
    /// One thread per CPU, 8 MiB blocks.
    fn default() -> Self {
        Parallel {
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            block_bytes: 8 << 20,
        }
    }
}

/// Files smaller than this are streamed, not mapped (mapping and threads cost more than they
/// save; `/proc` files report size 0).
const MMAP_MIN_BYTES: u64 = 1 << 20;
/// Buffer of the streaming path.
const STREAM_BUF_BYTES: usize = 1 << 20;

/// Lines and bytes read so far from the current input: where the next block starts.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    line: u64,
    offset: u64,
}

impl Position {
    fn advance(&mut self, c: &Counts) {
        self.line += c.lines;
        self.offset += c.bytes;
    }

    /// Where a kept line of the block that starts here is.
    fn src(&self, file: u32, k: &Kept) -> SrcRef {
        SrcRef {
            file,
            line: self.line + k.index + 1,
            offset: self.offset + k.start as u64,
        }
    }
}

/// A counter that threads wait on until it reaches a value.
#[derive(Default)]
struct Gate {
    count: Mutex<usize>,
    moved: Condvar,
}

impl Gate {
    fn set(&self, n: usize) {
        // a poisoned lock only means a thread panicked; the count is still a number
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) = n;
        self.moved.notify_all();
    }

    /// Block until the count is at least `n`.
    fn wait_for(&self, n: usize) {
        let mut c = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *c < n {
            c = self.moved.wait(c).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A guard that opens the gate for good when dropped.
    fn opener(&self) -> GateOpener<'_> {
        GateOpener(self)
    }
}

struct GateOpener<'a>(&'a Gate);

impl Drop for GateOpener<'_> {
    fn drop(&mut self) {
        self.0.set(usize::MAX);
    }
}

mod template;
#[doc(hidden)]
pub use template::agrees as template_agrees;

/// A block's prefilter counts and its kept lines, parsed (borrowing from the block).
type Scanned<'a> = (Counts, Vec<(Kept, Item<'a>)>);

/// A kept line of a scanned block, parsed; or lines a template read one after another.
/// (`Line` is nearly every item: boxing it would cost an allocation a kept line.)
#[allow(clippy::large_enum_variant)]
enum Item<'a> {
    Line(Parsed<'a>),
    Templated(Box<TemplatedRun<'a>>),
}

/// What a scanning thread does with a block: prefilter it and parse the lines it keeps
/// (a memory hotplug's uevent lines by their differences from one read the long way:
/// [`template`]).
fn scan_and_parse<'a>(pre: &Prefilter, want: Option<&str>, block: &'a [u8]) -> Scanned<'a> {
    scan_and_parse_into(pre, want, block, Vec::new())
}

/// [`scan_and_parse`] into `lines` (emptied first): a list a block before this one was
/// applied from, whose memory is already the process's (with a fresh one per block, the
/// kernel zeroing new pages was 2.2 % of `--all`'s CPU on the 1 GB journal; 0.7 % after).
fn scan_and_parse_into<'a>(
    pre: &Prefilter,
    want: Option<&str>,
    block: &'a [u8],
    mut lines: Vec<(Kept, Item<'a>)>,
) -> Scanned<'a> {
    lines.clear();
    // a containerd console line is ~800 bytes: room for most blocks' kept lines at once
    lines.reserve(block.len() / 1024);
    let mut buf = String::new();
    let mut last = Repeats::default();
    let mut templates = template::Templates::default();
    let c = pre.scan(block, |k| {
        let raw = block.get(k.start..k.end).unwrap_or(&[]);
        let line = strip_line_end(raw);
        if let Some((id, v)) = templates.read(line) {
            // the line after one the same template read: kept by what differs (it names
            // the host and sandbox of the line before it: `Repeats` stays as it is)
            if let Some((_, Item::Templated(run))) = lines.last_mut() {
                if run.id == id && v.attempt.is_none() {
                    run.rest.push((k, v));
                    return;
                }
            }
            if let Some(mut j) = templates.journal(id, &v) {
                last.mark(&mut j, want);
                let run = TemplatedRun {
                    id,
                    first: j,
                    rest: Vec::new(),
                };
                lines.push((k, Item::Templated(Box::new(run))));
                return;
            }
        }
        let mut p = parse_bytes(raw, want, &mut buf);
        templates.learn(line, &p);
        if let Parsed::Journal(j) = &mut p {
            last.mark(j, want);
        }
        lines.push((k, Item::Line(p)));
    });
    (c, lines)
}

/// Consecutive kept lines of a block that one template read (see [`template`]), kept as
/// the first line parsed and, for the others, what differs: 88 bytes a line in the list
/// where a parsed line takes 192.
#[derive(Debug)]
struct TemplatedRun<'a> {
    /// The template's identity.
    id: usize,
    first: JournalParsed<'a>,
    rest: Vec<(Kept, Varying)>,
}

/// What differs between the lines one template reads.
#[derive(Debug, Clone, Copy)]
struct Varying {
    prefix: Option<PrefixTime>,
    time: Option<Nanos>,
    time_zone: Option<i64>,
    ts: Nanos,
    /// A CDI wait's try (the record's kind differs with it: such lines are not kept in runs).
    attempt: Option<u32>,
    /// The line's [`record_key`].
    dup: Option<u64>,
}

/// The host and the sandbox id that the reader last looked up, as far as one block tells:
/// a line that names the same ones is marked, so that the thread applying the lines in
/// file order (which would otherwise compare them again, reading bytes of the block that
/// have long left its CPU's caches) reuses the last lookup.
#[derive(Default)]
struct Repeats<'a> {
    host: Option<&'a str>,
    sandbox: Option<Cow<'a, str>>,
}

impl<'a> Repeats<'a> {
    /// Mark `j` against the lines before it in its block, as [`Ingester::journal`] will
    /// look them up: the host of every line `want` does not filter out, the sandbox of
    /// those that name one.
    fn mark(&mut self, j: &mut JournalParsed<'a>, want: Option<&str>) {
        if !passes_want(want, j.sandbox.as_deref()) {
            return;
        }
        if let Some(h) = j.host {
            j.same_host = self.host == Some(h);
            self.host = Some(h);
        }
        if let Some(s) = &j.sandbox {
            j.same_sandbox = self.sandbox.as_deref() == Some(s.as_ref());
            if !j.same_sandbox {
                self.sandbox = Some(s.clone());
            }
        }
    }
}

/// Whether a journal line naming `sandbox` is read under `--sandbox want` (a line that
/// names none is).
fn passes_want(want: Option<&str>, sandbox: Option<&str>) -> bool {
    match (want, sandbox) {
        (Some(w), Some(have)) => have.starts_with(w),
        _ => true,
    }
}

const MAX_EXAMPLES: usize = 8;
const OOO_TOLERANCE_NS: i64 = NS_PER_S;

/// Streaming reader over any number of files.
pub struct Ingester {
    opts: Options,
    out: Ingest,
    sandbox_ids: HashMap<String, u32>,
    node_ids: HashMap<String, u32>,
    /// The node looked up last.
    last_node: Option<u32>,
    /// Where the clock samples of the line being applied go (besides the inputs' own).
    clock_of: ClockOf,
    /// The sandbox id interned last (a journal's lines of one sandbox come in runs).
    last_sandbox: Option<(String, u32)>,
    /// Latest host time, guest time and agent ts per (file, sandbox, shim pid); the
    /// stream of the last line is kept out of the map (lines of one stream come in runs).
    streams: HashMap<Stream, StreamMax>,
    current: Option<(Stream, StreamMax)>,
    last_pin_call: HashMap<u32, Nanos>,
    /// A line's console payload, unquoted (the streaming path's; scanning threads have their
    /// own).
    buf: String,
    /// Zone counts not yet added to the clock samples, [prefix zones, `time=` zones]: a
    /// journal's lines come in runs of one node and zone, so they are counted here and
    /// added when either changes, and at the end.
    tallies: [Option<(ClockOf, i64, u64)>; 2],
    /// The shim records read so far ([`record_key`]): a copy is dropped.
    seen: Seen,
    /// Every naming of each runtime-rs shim (file, pid), at the event position it came at:
    /// the shim's lines before a naming are that sandbox's (a pid reused by a later shim
    /// names another), its lines after the last naming the last one's.
    shim_names: HashMap<(u32, u32), Vec<(usize, String)>>,
    /// The sandboxes (indexes into [`Ingest::sandboxes`]) each Go shim or Kata 1.x runtime
    /// process (file, pid) names by `sandbox=`: what its lines that name none join.
    pid_names: HashMap<(u32, u32), Vec<u32>>,
    /// The (file, pid, sandbox) recorded last in `pid_names` (a shim's lines come in runs).
    last_named: Option<(u32, u32, u32)>,
    /// Events of lines that join their pid's sandbox ([`PidJoin`]) read before the pid
    /// named it: (event index, the container id the line names), placed by `finish`.
    pending: Vec<(usize, Option<String>)>,
}

/// A journald prefix's time: a complete instant, or a local one (no year, no zone).
fn prefix_times(p: Option<PrefixTime>) -> (Option<Nanos>, Option<LocalStamp>) {
    match p {
        Some(PrefixTime::Absolute(n)) => (Some(n), None),
        Some(PrefixTime::Local(l)) => (None, Some(l)),
        None => (None, None),
    }
}

/// Advance a stream's latest time `latest` to `t`, unless `t` is more than the tolerance
/// before it (then the line is out of order and `latest` stays).
fn advance(latest: &mut Option<Nanos>, t: Nanos, what: &str) -> Result<(), Bad> {
    let m = latest.get_or_insert(t);
    if t.saturating_add(OOO_TOLERANCE_NS) < *m {
        return Err(Bad::OutOfOrder(format!(
            "{what} {:.3} s before the latest",
            (i128::from(*m) - i128::from(t)) as f64 / 1e9
        )));
    }
    *m = (*m).max(t);
    Ok(())
}

/// Which zone count a [`Ingester::tally`] adds to.
const PREFIX_ZONES: usize = 0;
const TIME_ZONES: usize = 1;

/// The latest clocks of one [`Stream`].
#[derive(Debug, Clone, Copy, Default)]
struct StreamMax {
    host: Option<Nanos>,
    guest: Option<f64>,
    agent: Option<Nanos>,
}

/// One stream of lines whose clocks must move forward: (file, sandbox, shim pid).
type Stream = (u32, Option<u32>, Option<u32>);

#[derive(Debug)]
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
            node_ids: HashMap::new(),
            last_node: None,
            clock_of: ClockOf::File(0),
            last_sandbox: None,
            streams: HashMap::new(),
            current: None,
            last_pin_call: HashMap::new(),
            buf: String::new(),
            tallies: [None; 2],
            seen: Seen::default(),
            shim_names: HashMap::new(),
            pid_names: HashMap::new(),
            last_named: None,
            pending: Vec::new(),
        }
    }

    /// Register an input; returns its index for the [`SrcRef`]s of [`Ingester::feed_bytes`].
    pub fn add_file(&mut self, name: &str) -> u32 {
        self.out.files.push(name.to_string());
        self.out.file_clocks.push(ClockSamples::default());
        (self.out.files.len() - 1) as u32
    }

    /// Read a whole stream. Each buffer fill is scanned as one block of whole lines by the
    /// byte-level prefilter (a line is copied only when it straddles two fills), and only
    /// the lines it keeps reach the parsers. Memory stays bounded by the reader's buffer and
    /// the longest line (plus the events): this is the path for stdin and pipes.
    pub fn read<R: BufRead>(&mut self, name: &str, r: R) -> std::io::Result<()> {
        let file = self.add_file(name);
        let pre = Prefilter::new(self.opts.want());
        let mut at = Position::default();
        line_blocks_of(r, |lines| self.block(&pre, file, &mut at, lines))
    }

    /// Read an input held in memory in full (a memory-mapped file, a buffer), scanning
    /// blocks of it on all CPUs; see [`Ingester::read_slice_with`].
    pub fn read_slice(&mut self, name: &str, data: &[u8]) {
        self.read_slice_with(name, data, Parallel::default());
    }

    /// Read an input held in memory in full: `par.threads` threads prefilter newline-aligned
    /// blocks of about `par.block_bytes` and parse the lines they keep (the stateless half
    /// of reading a line), and this thread applies the parsed lines in file order as the
    /// blocks come in (out-of-order checks, sandbox ids, pin bookkeeping), with their exact
    /// line numbers and offsets (sums of the earlier blocks' counts). The result is
    /// identical to [`Ingester::read`] over the same bytes.
    pub fn read_slice_with(&mut self, name: &str, data: &[u8], par: Parallel) {
        let file = self.add_file(name);
        let pre = Prefilter::new(self.opts.want());
        let bounds = line_blocks(data, par.block_bytes);
        let blocks: Vec<&[u8]> = bounds
            .windows(2)
            .filter_map(|w| data.get(w.first().copied()?..w.get(1).copied()?))
            .collect();
        let mut at = Position::default();
        let threads = par.threads.clamp(1, blocks.len().max(1));
        if threads == 1 {
            for b in blocks {
                self.block(&pre, file, &mut at, b);
            }
            return;
        }
        let want = self.opts.want().map(str::to_string);
        let want = want.as_deref();
        let next = AtomicUsize::new(0);
        // Blocks applied so far. A thread may claim a block at most `ahead` blocks past it,
        // so parsed lines waiting for their turn stay a few blocks' worth.
        let applied = Gate::default();
        let ahead = threads * 2;
        let (tx, rx) = mpsc::channel::<(usize, Scanned<'_>)>();
        // the lists of parsed lines, handed back once applied
        let spare: Mutex<Vec<Vec<(Kept, Item<'_>)>>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            // opens the gate for good when this thread leaves the scope, even by a panic
            let _open = applied.opener();
            for _ in 0..threads {
                let tx = tx.clone();
                let (pre, blocks, next, applied, spare) = (&pre, &blocks, &next, &applied, &spare);
                let worker = move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = blocks.get(i) else { break };
                    applied.wait_for(i.saturating_sub(ahead));
                    let lines = spare
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop()
                        .unwrap_or_default();
                    if tx
                        .send((i, scan_and_parse_into(pre, want, b, lines)))
                        .is_err()
                    {
                        break;
                    }
                };
                // if no thread can be started, the blocks are scanned below on this one
                if std::thread::Builder::new()
                    .name("bootprof-scan".into())
                    .spawn_scoped(s, worker)
                    .is_err()
                {
                    break;
                }
            }
            drop(tx);
            let mut pending: Vec<Option<Scanned<'_>>> = Vec::new();
            pending.resize_with(blocks.len(), || None);
            let mut fed = 0usize;
            while fed < blocks.len() {
                match rx.recv() {
                    Ok((i, scanned)) => {
                        if let Some(slot) = pending.get_mut(i) {
                            *slot = Some(scanned);
                        }
                    }
                    // every worker is gone: scan what is still missing on this thread
                    Err(_) => {
                        for (b, slot) in blocks.iter().zip(pending.iter_mut()).skip(fed) {
                            if slot.is_none() {
                                *slot = Some(scan_and_parse(&pre, want, b));
                            }
                        }
                    }
                }
                while let Some(Some((c, mut lines))) = pending.get_mut(fed).map(Option::take) {
                    let before = self.out.events.len();
                    for (k, p) in lines.drain(..) {
                        self.apply_kept(at, file, k, p);
                    }
                    spare
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(lines);
                    self.out.stats.add(&c);
                    at.advance(&c);
                    if fed == 0 {
                        // the events of the whole input, projected from its first block:
                        // the list grows once instead of doubling (and copying) its way up
                        let per_byte =
                            (self.out.events.len() - before) as f64 / c.bytes.max(1) as f64;
                        let rest = data.len().saturating_sub(at.offset as usize) as f64;
                        self.out.events.reserve((per_byte * rest * 1.02) as usize);
                    }
                    fed += 1;
                    applied.set(fed);
                }
            }
        });
    }

    /// Read a file by path: a large regular file is memory-mapped and read with
    /// [`Ingester::read_slice`]; anything else (a pipe, a FIFO, a character device, `/proc`
    /// files, small files, compressed input) is streamed with [`Ingester::read`]. `name` is
    /// how the file is reported.
    pub fn read_path(&mut self, name: &str, path: &Path) -> std::io::Result<()> {
        match open_input(path)? {
            Opened::Mapped(map) => {
                self.read_slice(name, &map);
                Ok(())
            }
            Opened::Stream(r) => self.read(name, r),
        }
    }

    /// Scan and parse one block of whole lines, and apply its kept lines now.
    fn block(&mut self, pre: &Prefilter, file: u32, at: &mut Position, block: &[u8]) {
        let (c, lines) = scan_and_parse(pre, self.opts.want(), block);
        for (k, p) in lines {
            self.apply_kept(*at, file, k, p);
        }
        self.out.stats.add(&c);
        at.advance(&c);
    }

    /// Feed one line (without or with its trailing newline).
    pub fn feed_bytes(&mut self, src: SrcRef, bytes: &[u8]) {
        let mut buf = std::mem::take(&mut self.buf);
        let p = parse_bytes(bytes, self.opts.want(), &mut buf);
        self.buf = buf;
        self.apply(src, p);
    }

    /// Apply a kept line of a block that starts at `at` (each line of a templated run).
    fn apply_kept(&mut self, at: Position, file: u32, k: Kept, item: Item<'_>) {
        match item {
            Item::Templated(run) => {
                let TemplatedRun { first, rest, .. } = *run;
                let kind = match &first.body {
                    JournalBody::Console(Console::Agent(rec)) => Some(rec.kind.clone()),
                    _ => None,
                };
                let (host, sandbox, pid) = (first.host, first.sandbox.clone(), first.pid);
                self.apply(at.src(file, &k), Parsed::Journal(first));
                let Some(kind) = kind else { return };
                self.templated_rest(at, file, (host, sandbox.as_deref(), pid), &kind, rest);
            }
            Item::Line(p) => self.apply(at.src(file, &k), p),
        }
    }

    /// The stateful half of reading a line: out-of-order checks, sandbox interning, pin-call
    /// bookkeeping, counting. Lines must come in file order.
    fn apply(&mut self, src: SrcRef, p: Parsed<'_>) {
        self.clock_of = ClockOf::File(src.file);
        let r = match p {
            Parsed::Unrecognized => {
                self.out.stats.unrecognized += 1;
                Ok(())
            }
            Parsed::Journal(j) => self.journal(src, j),
            Parsed::Console(c) => self.console(src, None, None, None, c).map(|_| ()),
            Parsed::Bpf(b) => self.bpf(src, b),
            Parsed::Ftrace(f) => {
                self.push(src, None, None, (None, None), Body::Ftrace(f));
                Ok(())
            }
            Parsed::Kube(k) => {
                match k {
                    KubectlLine::StartTime(t)
                    | KubectlLine::Started(t)
                    | KubectlLine::Finished(t) => self.clocks(|c| c.full(t)),
                    KubectlLine::Name(_) | KubectlLine::Node(_) => {}
                }
                self.push(src, None, None, (None, None), Body::Kube(k));
                Ok(())
            }
            Parsed::WallClockKernel(shape) => {
                let st = &mut self.out.stats;
                st.wall_clock_kernel += 1;
                if !st.wall_clock_shapes.contains(&shape) {
                    st.wall_clock_shapes.push(shape);
                }
                Ok(())
            }
            Parsed::Bad(b) => Err(b),
        };
        if let Err(b) = r {
            self.bad(src, b);
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
        if let Some((last, i)) = &self.last_sandbox {
            if last == id {
                return *i;
            }
        }
        let i = self.intern_new(id);
        match &mut self.last_sandbox {
            Some((last, k)) => {
                last.clear();
                last.push_str(id);
                *k = i;
            }
            None => self.last_sandbox = Some((id.to_string(), i)),
        }
        i
    }

    /// Add to the clock samples of the inputs and of the line's node (or file).
    fn clocks(&mut self, f: impl Fn(&mut ClockSamples)) {
        f(&mut self.out.clocks);
        let keyed = match self.clock_of {
            ClockOf::Node(n) => self.out.node_clocks.get_mut(n as usize),
            ClockOf::File(i) => self.out.file_clocks.get_mut(i as usize),
        };
        if let Some(c) = keyed {
            f(c);
        }
    }

    /// Count the zones a line shows: its prefix's against its `time=` (a prefix without
    /// zone), and the one `time=` is written in.
    fn tally_zones(&mut self, local: Option<LocalStamp>, time: Option<Nanos>, zone: Option<i64>) {
        if let (Some(l), Some(t)) = (local, time) {
            if let Some(z) = l.zone_against(t) {
                self.tally(PREFIX_ZONES, z);
            }
        }
        if let Some(z) = zone {
            self.tally(TIME_ZONES, z);
        }
    }

    /// Count a line of zone `z` (seconds east of UTC) into zone count `which`.
    fn tally(&mut self, which: usize, z: i64) {
        let of = self.clock_of;
        let Some(slot) = self.tallies.get_mut(which) else {
            return;
        };
        match slot {
            Some((o, zone, n)) if *o == of && *zone == z => *n += 1,
            _ => {
                if let Some(done) = slot.replace((of, z, 1)) {
                    self.add_tally(which, done);
                }
            }
        }
    }

    /// Add `n` lines of zone `z` to zone count `which` of the inputs and of `of`.
    fn add_tally(&mut self, which: usize, (of, z, n): (ClockOf, i64, u64)) {
        let keyed = match of {
            ClockOf::Node(i) => self.out.node_clocks.get_mut(i as usize),
            ClockOf::File(i) => self.out.file_clocks.get_mut(i as usize),
        };
        for c in std::iter::once(&mut self.out.clocks).chain(keyed) {
            let zones = if which == PREFIX_ZONES {
                &mut c.prefix_zones
            } else {
                &mut c.time_zones
            };
            *zones.entry(z).or_default() += n;
        }
    }

    /// The index of host `name` in [`Ingest::nodes`].
    fn node(&mut self, name: &str) -> u32 {
        // a journal's lines name one host, or a few in runs
        if let Some(i) = self
            .last_node
            .filter(|&i| self.out.nodes.get(i as usize).is_some_and(|n| n == name))
        {
            return i;
        }
        let i = self.node_new(name);
        self.last_node = Some(i);
        i
    }

    fn node_new(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.node_ids.get(name) {
            return i;
        }
        let i = self.out.nodes.len() as u32;
        self.out.nodes.push(name.to_string());
        self.out.node_clocks.push(ClockSamples::default());
        self.node_ids.insert(name.to_string(), i);
        i
    }

    fn intern_new(&mut self, id: &str) -> u32 {
        if let Some(&i) = self.sandbox_ids.get(id) {
            return i;
        }
        let i = self.out.sandboxes.len() as u32;
        self.out.sandboxes.push(id.to_string());
        self.sandbox_ids.insert(id.to_string(), i);
        i
    }

    fn push(
        &mut self,
        src: SrcRef,
        sandbox: Option<u32>,
        pid: Option<u32>,
        host: (Option<Nanos>, Option<LocalStamp>),
        body: Body,
    ) {
        self.out.stats.events += 1;
        let node = match self.clock_of {
            ClockOf::Node(n) => Some(n),
            ClockOf::File(_) => None,
        };
        self.out.events.push(Event {
            src,
            sandbox,
            pid,
            node,
            host: host.0,
            local: host.1,
            body,
        });
    }

    /// Add an agent record that reports a memory block to the [`AgentRun`] the last event
    /// is (or starts one with it) when that event is a line of the same stream with the
    /// same kind; `false` (nothing done) otherwise.
    fn extend_run(
        &mut self,
        src: SrcRef,
        sandbox: Option<u32>,
        pid: Option<u32>,
        host: (Option<Nanos>, Option<LocalStamp>),
        ts: Nanos,
        kind: &agent::AgentKind,
    ) -> bool {
        let (Some(h), None) = host else { return false };
        if sandbox.is_none()
            || pid.is_none()
            || !matches!(
                kind,
                agent::AgentKind::Uevent {
                    memory: true,
                    bdf: None,
                    ..
                }
            )
        {
            return false;
        }
        let node = match self.clock_of {
            ClockOf::Node(n) => Some(n),
            ClockOf::File(_) => None,
        };
        let Some(last) = self.out.events.last_mut() else {
            return false;
        };
        if last.src.file != src.file
            || last.sandbox != sandbox
            || last.pid != pid
            || last.node != node
            || last.local.is_some()
        {
            return false;
        }
        let line = RunLine {
            line: src.line,
            offset: src.offset,
            host: h,
            ts,
        };
        match &mut last.body {
            Body::AgentRun(run) if run.kind == *kind => run.lines.push(line),
            Body::Agent(first) if first.kind == *kind => {
                let Some(first_host) = last.host else {
                    return false;
                };
                let head = RunLine {
                    line: last.src.line,
                    offset: last.src.offset,
                    host: first_host,
                    ts: first.ts,
                };
                last.body = Body::AgentRun(Box::new(AgentRun {
                    kind: kind.clone(),
                    lines: vec![head, line],
                }));
            }
            _ => return false,
        }
        self.out.stats.events += 1;
        true
    }

    /// The latest clocks of stream `key`.
    fn stream(&mut self, key: Stream) -> &mut StreamMax {
        match self.current {
            Some((k, _)) if k == key => {}
            _ => {
                let now = self.streams.remove(&key).unwrap_or_default();
                if let Some((k, v)) = self.current.replace((key, now)) {
                    self.streams.insert(k, v);
                }
            }
        }
        let (_, v) = self.current.get_or_insert((key, StreamMax::default()));
        v
    }

    fn check_host(&mut self, key: Stream, t: Nanos) -> Result<(), Bad> {
        advance(&mut self.stream(key).host, t, "host time")?;
        self.clocks(|c| c.journal_time(t));
        Ok(())
    }

    /// An agent record's `ts` in its stream: in order (within the tolerance), and a
    /// clock sample.
    fn agent_ts(&mut self, key: Stream, ts: Nanos) -> Result<(), Bad> {
        advance(&mut self.stream(key).agent, ts, "agent ts")?;
        self.clocks(|c| c.full(ts));
        Ok(())
    }

    /// The lines of a templated run after its first (which was just applied), each read
    /// as [`Ingester::templated`] reads it, with what is the same for all of them looked
    /// up once: the node and sandbox id (the first line's), the stream's latest clocks
    /// (advanced line by line here and stored at the end: nothing else reads them in
    /// between) and the clock samples (least and greatest, added at the end).
    fn templated_rest(
        &mut self,
        at: Position,
        file: u32,
        (host, sandbox, pid): (Option<&str>, Option<&str>, Option<u32>),
        kind: &agent::AgentKind,
        rest: Vec<(Kept, Varying)>,
    ) {
        let looked_up = match (host, self.last_node) {
            (Some(_), Some(n)) => Some(ClockOf::Node(n)),
            (None, _) => Some(ClockOf::File(file)),
            (Some(_), None) => None,
        };
        // each names the host and sandbox of the line before it: as `Repeats::mark` marks
        // such a line, when `--sandbox` reads it
        let passes = passes_want(self.opts.want(), sandbox);
        let timed = rest.iter().all(|(_, v)| v.time.is_some());
        let (Some(clock_of), Some((_, sid)), true, true) = (
            looked_up,
            self.last_sandbox.as_ref(),
            timed,
            passes && sandbox.is_some(),
        ) else {
            for (k, v) in rest {
                let head = Head {
                    prefix: v.prefix,
                    host,
                    time: v.time,
                    time_zone: v.time_zone,
                    sandbox,
                    pid,
                    same_host: passes && host.is_some(),
                    same_sandbox: passes,
                    loose: false,
                    shim: false,
                    join: None,
                };
                self.templated(at.src(file, &k), &head, (v.ts, v.dup), kind);
            }
            return;
        };
        let sandbox = Some(*sid);
        let key = (file, sandbox, pid);
        let mut latest = *self.stream(key);
        // (least, greatest) of the complete times, greatest host time
        let mut full: Option<(Nanos, Nanos)> = None;
        let mut last_journal: Option<Nanos> = None;
        let mut sample = |t: Nanos| {
            full = Some(full.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
        };
        for (k, v) in rest {
            let src = at.src(file, &k);
            self.clock_of = clock_of;
            let (abs, local) = prefix_times(v.prefix);
            self.tally_zones(local, v.time, v.time_zone);
            let host_t = v.time.or(abs);
            if let Some(t) = host_t {
                if let Err(b) = advance(&mut latest.host, t, "host time") {
                    self.bad(src, b);
                    continue;
                }
                sample(t);
                last_journal = Some(last_journal.map_or(t, |j: Nanos| j.max(t)));
            }
            // a copy is dropped where `journal` drops one: after its host time is read
            if self.is_copy(v.dup) {
                continue;
            }
            let stamp = (host_t, if host_t.is_none() { local } else { None });
            if let Err(b) = advance(&mut latest.agent, v.ts, "agent ts") {
                self.bad(src, b);
                continue;
            }
            sample(v.ts);
            if !self.extend_run(src, sandbox, pid, stamp, v.ts, kind) {
                let rec = AgentRecord {
                    ts: v.ts,
                    kind: kind.clone(),
                };
                self.push(src, sandbox, pid, stamp, Body::Agent(rec));
            }
        }
        *self.stream(key) = latest;
        self.clock_of = clock_of;
        self.clocks(|c| {
            if let Some((lo, hi)) = full {
                c.full(lo);
                c.full(hi);
            }
            if let Some(j) = last_journal {
                c.journal_time(j);
            }
        });
    }

    /// A line of a templated run after its first, as [`Ingester::journal`] reads the
    /// line that run's first line is with these values (its body an agent record of
    /// `kind`), without building it.
    fn templated(
        &mut self,
        src: SrcRef,
        head: &Head<'_>,
        (ts, dup): (Nanos, Option<u64>),
        kind: &agent::AgentKind,
    ) {
        self.clock_of = ClockOf::File(src.file);
        let r = match self.journal_head(src, head) {
            Ok(Some(_)) if self.is_copy(dup) => Ok(()),
            Ok(Some((sandbox, pid, stamp))) => {
                self.agent_ts((src.file, sandbox, pid), ts).map(|()| {
                    if !self.extend_run(src, sandbox, pid, stamp, ts, kind) {
                        let rec = AgentRecord {
                            ts,
                            kind: kind.clone(),
                        };
                        self.push(src, sandbox, pid, stamp, Body::Agent(rec));
                    }
                })
            }
            Ok(None) => Ok(()),
            Err(b) => Err(b),
        };
        if let Err(b) = r {
            self.bad(src, b);
        }
    }

    /// Console payload (kernel line or agent JSON) of a sandbox/file stream: `Ok(false)` if
    /// it is neither.
    fn console(
        &mut self,
        src: SrcRef,
        sandbox: Option<u32>,
        pid: Option<u32>,
        host: Option<(Option<Nanos>, Option<LocalStamp>)>,
        c: Console,
    ) -> Result<bool, Bad> {
        let host = host.unwrap_or((None, None));
        match c {
            Console::BadAgent(e) => Err(Bad::Json(e)),
            Console::Agent(rec) => {
                self.agent_ts((src.file, sandbox, pid), rec.ts)?;
                if !self.extend_run(src, sandbox, pid, host, rec.ts, &rec.kind) {
                    self.push(src, sandbox, pid, host, Body::Agent(rec));
                }
                Ok(true)
            }
            Console::Kernel(k) => {
                let m = self
                    .stream((src.file, sandbox, pid))
                    .guest
                    .get_or_insert(k.t);
                if k.t + 1.0 < *m {
                    return Err(Bad::OutOfOrder(format!(
                        "guest time {:.6} s after {:.6} s",
                        k.t, m
                    )));
                }
                *m = m.max(k.t);
                self.push(src, sandbox, pid, host, Body::Kernel(k));
                Ok(true)
            }
            Console::Continuation(kind) => {
                match self.stream((src.file, sandbox, pid)).guest {
                    Some(t) => self.push(
                        src,
                        sandbox,
                        pid,
                        host,
                        Body::Kernel(KernelLine { t, kind }),
                    ),
                    // nothing before it to place it after
                    None => self.out.stats.unrecognized += 1,
                }
                Ok(true)
            }
            Console::Other => Ok(false),
        }
    }

    /// A containerd line, parsed by [`parse_str`] as far as it can be without the reader's
    /// state.
    fn journal(&mut self, src: SrcRef, j: JournalParsed<'_>) -> Result<(), Bad> {
        let head = Head {
            prefix: j.prefix,
            host: j.host,
            time: j.time,
            time_zone: j.time_zone,
            sandbox: j.sandbox.as_deref(),
            pid: j.pid,
            same_host: j.same_host,
            same_sandbox: j.same_sandbox,
            loose: j.loose,
            shim: j.shim,
            join: j.join.as_deref(),
        };
        let Some((sandbox, pid, stamp)) = self.journal_head(src, &head)? else {
            return Ok(());
        };
        // a copy is dropped once its host and sandbox are looked up: the lines after it in
        // its block reuse those lookups (`Repeats`)
        if self.is_copy(j.dup) {
            return Ok(());
        }
        if let (None, Some(join)) = (sandbox, j.join.as_deref()) {
            // its pid names no sandbox yet: placed once the whole input is read
            let container = match join {
                PidJoin::Any => None,
                PidJoin::Container(c) => Some(c.to_string()),
            };
            self.pending.push((self.out.events.len(), container));
        }
        let line = match j.body {
            JournalBody::Console(c) => {
                self.console(src, sandbox, pid, Some(stamp), c)?;
                return Ok(());
            }
            // console text that is neither kernel nor agent (e.g. NVRC output)
            JournalBody::ConsoleText(msg) => HostLine {
                msg,
                is_error: false,
                error: None,
                device: None,
                qemu: false,
            },
            JournalBody::Host(h) => h,
            // `parse_str` skips only lines of no sandbox or of another one, seen above
            JournalBody::Skipped => {
                self.out.stats.unrecognized += 1;
                return Ok(());
            }
        };
        self.push(src, sandbox, pid, stamp, Body::Host(line));
        Ok(())
    }

    /// Whether the record of key `dup` was read before (then it is counted, as a copy).
    fn is_copy(&mut self, dup: Option<u64>) -> bool {
        let copy = dup.is_some_and(|k| !self.seen.insert(k));
        self.out.stats.duplicates += u64::from(copy);
        copy
    }

    /// The part of reading a containerd line that comes before its body: the `--sandbox`
    /// filter, the node, zone counts, the sandbox id, the host clock's order. `None` when
    /// the line is done with (another sandbox's, or one that names none); else its
    /// sandbox id, shim pid and stamp.
    fn journal_head(&mut self, src: SrcRef, j: &Head<'_>) -> Result<Option<Applied>, Bad> {
        // a Rust shim naming its sandbox: its other lines are that sandbox's, wanted or not
        if let (true, Some(sb), Some(p)) = (j.shim, j.sandbox, j.pid) {
            let at = self.out.events.len();
            let names = self.shim_names.entry((src.file, p)).or_default();
            if names.last().is_none_or(|(_, s)| s != sb) {
                names.push((at, sb.to_string()));
            }
        }
        // a line naming only its container is filtered by that id: the sandbox it may join
        let named = j.sandbox.or(match j.join {
            Some(PidJoin::Container(c)) => Some(c.as_ref()),
            _ => None,
        });
        if !passes_want(self.opts.want(), named) {
            self.out.stats.other_sandbox += 1;
            return Ok(None);
        }
        let (abs, local) = prefix_times(j.prefix);
        let node = j.host.map(|h| match self.last_node {
            // the line before it in its block named this host: looked up then
            Some(n) if j.same_host => n,
            _ => self.node(h),
        });
        if let Some(n) = node {
            self.clock_of = ClockOf::Node(n);
        }
        self.tally_zones(local, j.time, j.time_zone);
        let host = j.time.or(abs);
        if let (None, Some(join), Some(p)) = (j.sandbox, j.join, j.pid) {
            return self.joined(src, p, join, (host, local));
        }
        // a runtime-rs line naming no sandbox: its shim's, once the shim named it (looked
        // up aside from `last_sandbox`, which the next line's `same_sandbox` refers to)
        if let (None, true, Some(p)) = (j.sandbox, j.shim, j.pid) {
            if let Some(sandbox) = self.learned(src.file, p) {
                let Some(i) = sandbox else {
                    self.out.stats.other_sandbox += 1;
                    return Ok(None);
                };
                if let Some(t) = host {
                    self.check_host((src.file, Some(i), Some(p)), t)?;
                }
                let stamp = (host, if host.is_none() { local } else { None });
                return Ok(Some((Some(i), Some(p), stamp)));
            }
        }
        let Some(sb) = j.sandbox else {
            if j.loose {
                // a console line of no named sandbox: the boot it falls in takes it; a Rust
                // shim's keeps its pid, for its sandbox once the shim names it (`finish`)
                let pid = j.pid.filter(|_| j.shim);
                if let Some(t) = host {
                    self.check_host((src.file, None, pid), t)?;
                }
                return Ok(Some((
                    None,
                    pid,
                    (host, if host.is_none() { local } else { None }),
                )));
            }
            // containerd line with no sandbox: noise for us
            self.out.stats.unrecognized += 1;
            return Ok(None);
        };
        let sandbox = Some(match &self.last_sandbox {
            // the line before it in its block named this sandbox: interned then
            Some((_, i)) if j.same_sandbox => *i,
            _ => self.intern(sb),
        });
        let pid = j.pid;
        if let (Some(i), Some(p), false) = (sandbox, pid, j.shim || j.loose) {
            self.name_pid(src.file, p, i);
        }
        if let Some(t) = host {
            self.check_host((src.file, sandbox, pid), t)?;
        }
        // a line with a complete time needs no prefix; one without keeps it for the analysis
        let stamp = (host, if host.is_none() { local } else { None });
        Ok(Some((sandbox, pid, stamp)))
    }

    /// Record that process `pid` of `file` named sandbox `sandbox` (an index).
    fn name_pid(&mut self, file: u32, pid: u32, sandbox: u32) {
        if self.last_named == Some((file, pid, sandbox)) {
            return;
        }
        self.last_named = Some((file, pid, sandbox));
        let list = self.pid_names.entry((file, pid)).or_default();
        if !list.contains(&sandbox) {
            list.push(sandbox);
        }
    }

    /// The sandbox process `pid` of `file` named by key that a line joining it
    /// ([`PidJoin`]) joins, if it named it yet.
    fn pid_sandbox(&self, file: u32, pid: u32, join: &PidJoin<'_>) -> Option<u32> {
        let list = self.pid_names.get(&(file, pid))?;
        match join {
            PidJoin::Any => list.first().copied(),
            PidJoin::Container(c) => list.iter().copied().find(|&i| {
                self.out
                    .sandboxes
                    .get(i as usize)
                    .is_some_and(|s| s == c.as_ref())
            }),
        }
    }

    /// A line that names no sandbox and joins its process's ([`PidJoin`]): that sandbox's
    /// when the pid named it already, else one without a sandbox yet (`finish` places it).
    fn joined(
        &mut self,
        src: SrcRef,
        pid: u32,
        join: &PidJoin<'_>,
        (host, local): (Option<Nanos>, Option<LocalStamp>),
    ) -> Result<Option<Applied>, Bad> {
        let sandbox = self.pid_sandbox(src.file, pid, join);
        if let Some(t) = host {
            self.check_host((src.file, sandbox, Some(pid)), t)?;
        }
        let stamp = (host, if host.is_none() { local } else { None });
        Ok(Some((sandbox, Some(pid), stamp)))
    }

    /// The sandbox shim `pid` of `file` named last: `Some(Some(index))` when it is wanted,
    /// `Some(None)` when it is another than `--sandbox`'s, `None` before any naming.
    fn learned(&mut self, file: u32, pid: u32) -> Option<Option<u32>> {
        let (_, sb) = self.shim_names.get(&(file, pid))?.last()?;
        if !passes_want(self.opts.want(), Some(sb)) {
            return Some(None);
        }
        let sb = sb.clone();
        Some(Some(self.intern_new(&sb)))
    }

    fn bpf(&mut self, src: SrcRef, b: BpfLine) -> Result<(), Bad> {
        if let BpfLine::PinCall { ts: Some(t), .. }
        | BpfLine::PinTook { ts: Some(t), .. }
        | BpfLine::MapIoctl { ts: Some(t), .. } = &b
        {
            let t = *t;
            self.clocks(|c| c.full(t));
        }
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
        self.push(src, None, None, (None, None), Body::Bpf(b));
        Ok(())
    }

    pub fn finish(mut self) -> Ingest {
        for which in [PREFIX_ZONES, TIME_ZONES] {
            if let Some(done) = self.tallies.get_mut(which).and_then(Option::take) {
                self.add_tally(which, done);
            }
        }
        self.joined_lines();
        self.shims_lines();
        self.out
    }

    /// The lines read before their process named the sandbox they join ([`PidJoin`]): that
    /// sandbox's, once it is named anywhere in the input; without one (a workload
    /// container's line, a process that named none), they are unrecognised.
    fn joined_lines(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut unplaced = Vec::new();
        for (at, container) in pending {
            let Some(e) = self.out.events.get(at) else {
                continue;
            };
            let join = match &container {
                None => PidJoin::Any,
                Some(c) => PidJoin::Container(Cow::Borrowed(c)),
            };
            let found = e.pid.and_then(|p| self.pid_sandbox(e.src.file, p, &join));
            match (found, self.out.events.get_mut(at)) {
                (Some(i), Some(e)) => e.sandbox = Some(i),
                _ => unplaced.push(at),
            }
        }
        if unplaced.is_empty() {
            return;
        }
        let mut next = unplaced.iter().copied().peekable();
        let mut at = 0usize;
        self.out.events.retain(|_| {
            let i = at;
            at += 1;
            let drop = next.peek() == Some(&i);
            if drop {
                next.next();
            }
            !drop
        });
        let n = unplaced.len() as u64;
        self.out.stats.events -= n;
        self.out.stats.unrecognized += n;
    }

    /// A Rust shim's lines read before it named its sandbox (only they have a pid and no
    /// sandbox) are the sandbox of its next naming (its last, after every naming): another
    /// one's are dropped under `--sandbox`.
    fn shims_lines(&mut self) {
        if self.shim_names.is_empty() {
            return;
        }
        let names = std::mem::take(&mut self.shim_names);
        let mut events = std::mem::take(&mut self.out.events);
        let before = events.len();
        let mut at = 0usize;
        events.retain_mut(|e| {
            let i = at;
            at += 1;
            let (None, Some(p)) = (e.sandbox, e.pid) else {
                return true;
            };
            let Some(list) = names.get(&(e.src.file, p)) else {
                return true;
            };
            let Some((_, sb)) = list.iter().find(|(pos, _)| *pos >= i).or(list.last()) else {
                return true;
            };
            if !passes_want(self.opts.want(), Some(sb)) {
                return false;
            }
            e.sandbox = Some(self.intern_new(sb));
            true
        });
        let dropped = (before - events.len()) as u64;
        self.out.stats.other_sandbox += dropped;
        self.out.stats.events -= dropped;
        self.out.events = events;
    }
}

/// A line parsed without the reader's state: the part of reading a line that the scanning
/// threads do. [`Ingester::apply`] does the rest, in file order.
#[derive(Debug)]
enum Parsed<'a> {
    Unrecognized,
    /// A containerd line.
    Journal(JournalParsed<'a>),
    /// A console line outside a journal (kernel line or agent JSON).
    Console(Console),
    Bpf(BpfLine),
    Ftrace(FtraceLine),
    Kube(KubectlLine),
    /// A guest kernel line stamped with a wall-clock time (its shape).
    WallClockKernel(&'static str),
    Bad(Bad),
}

/// A containerd line: what the reader needs of it, borrowed from the line where it can be.
#[derive(Debug)]
struct JournalParsed<'a> {
    prefix: Option<PrefixTime>,
    host: Option<&'a str>,
    time: Option<Nanos>,
    time_zone: Option<i64>,
    sandbox: Option<Cow<'a, str>>,
    pid: Option<u32>,
    body: JournalBody,
    /// The reader's last host lookup was of this host (see [`Repeats`]).
    same_host: bool,
    /// The reader's last sandbox id lookup was of this id.
    same_sandbox: bool,
    /// A shim record's identity, for dropping its copies ([`record_key`]).
    dup: Option<u64>,
    /// A line that is read though it names no sandbox: a Kata 1.x proxy's console line,
    /// the console of whichever boot it falls in (as a dmesg file's lines are).
    loose: bool,
    /// A runtime-rs line: `pid` is its shim's, whose sandbox is its sandbox.
    shim: bool,
    /// A Go shim (or Kata 1.x runtime) line that names no sandbox but joins the one its
    /// `pid` names on its other lines (boxed: rare, and a parsed line stays small).
    join: Option<Box<PidJoin<'a>>>,
}

/// How a line that names no sandbox joins the sandbox its process names on other lines.
#[derive(Debug, Clone)]
enum PidJoin<'a> {
    /// The Go shim's agent client (`name=agent-client pid=SHIM`, Cloud Hypervisor's hybrid
    /// vsock dialer among them): one shim, one sandbox.
    Any,
    /// A line naming only `container=ID` (Kata 1.x's `kata-runtime create|run`, whose
    /// sandbox= lines come from the same pid): the sandbox's own container, when the pid
    /// names a sandbox of that id.
    Container(Cow<'a, str>),
}

/// The fields of a containerd line that [`Ingester::journal_head`] reads.
struct Head<'b> {
    prefix: Option<PrefixTime>,
    host: Option<&'b str>,
    time: Option<Nanos>,
    time_zone: Option<i64>,
    sandbox: Option<&'b str>,
    pid: Option<u32>,
    same_host: bool,
    same_sandbox: bool,
    /// See [`JournalParsed::loose`].
    loose: bool,
    /// See [`JournalParsed::shim`].
    shim: bool,
    /// See [`JournalParsed::join`].
    join: Option<&'b PidJoin<'b>>,
}

/// A containerd line's sandbox id, shim pid and stamp (host time, or its prefix).
type Applied = (
    Option<u32>,
    Option<u32>,
    (Option<Nanos>, Option<LocalStamp>),
);

/// What a containerd line of a wanted sandbox carries.
#[derive(Debug)]
enum JournalBody {
    /// A `vmconsole=` payload, parsed (a kernel line, an agent record, a bad agent record).
    Console(Console),
    /// A `vmconsole=` payload that is neither, as logged.
    ConsoleText(String),
    /// Shim or CRI activity (no payload).
    Host(HostLine),
    /// Not read further: the line names no sandbox, or another one than `--sandbox`.
    Skipped,
}

/// A console payload, parsed.
#[derive(Debug)]
enum Console {
    Agent(AgentRecord),
    /// Looked like an agent record and did not parse.
    BadAgent(String),
    Kernel(KernelLine),
    /// The stampless second line of a two-line kernel message ([`dmesg::continuation`]):
    /// placed at the latest guest time of its stream.
    Continuation(dmesg::KernelKind),
    /// Neither (NVRC output, prose).
    Other,
}

fn parse_console(s: &str) -> Console {
    if agent::looks_like(s) {
        return match agent::parse_line(s) {
            Ok(rec) => Console::Agent(rec),
            Err(e) => Console::BadAgent(e.to_string()),
        };
    }
    match dmesg::parse_line(s) {
        Some(k) => Console::Kernel(k),
        None => Console::Other,
    }
}

/// The identity of a shim record, for dropping its copies: its `time=`, `pid=` and what
/// it says (its message and error, or the console payload it carries, as parsed — a copy
/// read the long way and one a template read give the same), for lines that have both a
/// `time=` and a `pid=`. The Kata shim logs each record through its syslog hook
/// (`kata[SHIM]`) and its log FIFO, which containerd copies to its own journal
/// (`containerd[PID]`): the same message under two identifiers. `None` for a line not read
/// further (another sandbox's).
fn record_key(time: Option<Nanos>, pid: Option<u32>, body: &JournalBody) -> Option<u64> {
    let (Some(t), Some(p)) = (time, pid) else {
        return None;
    };
    let h = mix(mix(0x5EED, t as u64), u64::from(p));
    Some(match body {
        JournalBody::Console(Console::Agent(r)) => return agent_key(t, p, r.ts, &r.kind, None),
        JournalBody::Console(Console::Kernel(k)) => mix(
            mix(h, k.t.to_bits()),
            message_hash(format!("{:?}", k.kind).as_bytes()),
        ),
        JournalBody::Console(Console::BadAgent(e)) => mix(mix(h, 2), message_hash(e.as_bytes())),
        JournalBody::Console(Console::Other) => mix(h, 3),
        JournalBody::Console(Console::Continuation(k)) => {
            mix(mix(h, 6), message_hash(format!("{k:?}").as_bytes()))
        }
        JournalBody::ConsoleText(text) => mix(mix(h, 4), message_hash(text.as_bytes())),
        JournalBody::Host(l) => mix(
            mix(mix(h, 5), message_hash(l.msg.as_bytes())),
            l.error.as_deref().map_or(0, |e| message_hash(e.as_bytes())),
        ),
        JournalBody::Skipped => return None,
    })
}

/// [`record_key`] of a line carrying kata-agent record (`ts`, `kind`; `attempt`: a CDI
/// try's number a template read, which `kind` holds when read the long way).
fn agent_key(
    time: Nanos,
    pid: u32,
    ts: Nanos,
    kind: &agent::AgentKind,
    attempt: Option<u32>,
) -> Option<u64> {
    use agent::AgentKind as K;
    let h = mix(
        mix(mix(mix(0x5EED, time as u64), u64::from(pid)), 1),
        ts as u64,
    );
    let text = |s: &str| message_hash(s.as_bytes());
    let k = match kind {
        K::Rpc(name) => mix(1, text(name)),
        K::CdiWait {
            attempt: a,
            max,
            devices,
        } => mix(
            mix(
                mix(2, u64::from(attempt.or(*a).unwrap_or(u32::MAX))),
                u64::from(max.unwrap_or(u32::MAX)),
            ),
            u64::from(*devices),
        ),
        K::CdiDone => 3,
        K::CdiFailed(m) => mix(4, text(m)),
        K::Uevent {
            action,
            memory,
            bdf,
        } => mix(
            mix(mix(5, *action as u64), u64::from(*memory)),
            bdf.as_deref().map_or(0, text),
        ),
        K::Other => 6,
    };
    Some(mix(h, k))
}

/// `h` and `x` mixed (splitmix64's finish: every input bit reaches every output bit).
fn mix(h: u64, x: u64) -> u64 {
    let mut z = (h ^ x).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit hash of `b`, eight bytes at a time.
fn message_hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (b.len() as u64).wrapping_mul(K);
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(x)).wrapping_mul(K).rotate_left(29);
    }
    let mut x = [0u8; 8];
    let rest = words.remainder();
    x[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(x)).wrapping_mul(K);
    // splitmix64's finish: every input bit reaches every output bit
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The records read so far, by [`record_key`].
type Seen = std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>;

/// A line without its line end (`\n`, then `\r`).
fn strip_line_end(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// Parse one line (without or with its line end); `want` is `--sandbox`; `buf` is scratch
/// space for a console payload.
fn parse_bytes<'a>(bytes: &'a [u8], want: Option<&str>, buf: &mut String) -> Parsed<'a> {
    match std::str::from_utf8(strip_line_end(bytes)) {
        Ok(s) => parse_str(s, want, buf),
        Err(_) => Parsed::Bad(Bad::Encoding),
    }
}

/// A guest console line (unquoted): a kernel line (or a two-line message's stampless
/// second), an agent record, or text that is neither.
fn console_body(console: &str) -> JournalBody {
    if let Some(kind) = dmesg::continuation(console) {
        return JournalBody::Console(Console::Continuation(kind));
    }
    match parse_console(console.trim()) {
        Console::Other => JournalBody::ConsoleText(console.to_string()),
        c => JournalBody::Console(c),
    }
}

/// A containerd line of a wanted sandbox: its payload (`console`, already unquoted)
/// parsed, or its message kept.
fn journal_body(j: &journal::JournalRef<'_>, console: &str) -> JournalBody {
    if j.vmconsole.is_some() {
        if let Some(raw) = &j.vmconsole_agent {
            // read from the quoted text: what `parse_console` gives for the unquoted one
            return JournalBody::Console(match agent::record(raw) {
                Ok(rec) => Console::Agent(rec),
                Err(e) => Console::BadAgent(e.to_string()),
            });
        }
        return console_body(console);
    }
    let is_error = j
        .level
        .is_some_and(|l| l.is("error") || l.is("fatal") || l.is("panic"));
    let msg = j.msg.map(|m| m.get().into_owned()).unwrap_or_default();
    // Kata 1.x's QEMU launcher logs `Unable to launch PATH: exit status N`, then QEMU's
    // stderr, both at level=error under `subsystem=qmp`
    let qemu = j.qemu_pid.is_some()
        || (is_error
            && j.subsystem.is_some_and(|s| s.is("qmp"))
            && !msg.starts_with("Unable to launch "));
    JournalBody::Host(HostLine {
        msg,
        is_error,
        error: j.error.map(|e| e.get().into_owned()),
        device: j.device.map(|d| d.get().into_owned()),
        qemu,
    })
}

static TIME_KEY: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new("time="));
static MSG_KEY: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new("msg="));

fn contains(s: &str, f: &memchr::memmem::Finder<'_>) -> bool {
    f.find(s.as_bytes()).is_some()
}

/// Detect the line's format and parse it: the first format that claims the line wins.
fn parse_str<'a>(s: &'a str, want: Option<&str>, buf: &mut String) -> Parsed<'a> {
    let trimmed = s.trim();
    if trimmed.is_empty() {
        return Parsed::Unrecognized;
    }
    // 0. a journal exported as JSON: its MESSAGE is read as a line of its own
    if matches!(trimmed.as_bytes().first(), Some(b'{' | 0x1e)) {
        if let Some(e) = journal::export_entry(trimmed) {
            return match e {
                Ok(e) => from_export(e, want, buf),
                Err(why) => Parsed::Bad(Bad::Json(why)),
            };
        }
    }
    // 1. the Rust shim through journald (`kata[PID]: message`, no logfmt)
    if let Some(r) = runtime_rs::parse(s) {
        return runtime_rs_line(r, None, None, want);
    }
    if let Some(rec) = runtime_rs::json_record(s).or_else(|| {
        // `-o cat`: the record alone
        matches!(trimmed.as_bytes().first(), Some(b'{'))
            .then(|| runtime_rs::json_message(trimmed))
            .flatten()
    }) {
        return match rec {
            Ok(rec) => runtime_rs_record(rec, want),
            Err(why) => Parsed::Bad(Bad::Json(why)),
        };
    }
    // 2. containerd journal (logfmt)
    if contains(s, &TIME_KEY) || contains(s, &MSG_KEY) {
        match journal::parse_ref_into(s, buf) {
            Ok(Some(j)) => {
                // Kata 1.x: the proxy's lines carry the console in `msg=`, and its pid is
                // not a shim's (its lines join their sandbox's boot)
                let proxy = j.proxy_console();
                let loose = proxy.is_some() && j.sandbox.is_none();
                let join = pid_join(&j, proxy.is_some());
                // the payload is read only for a line of a wanted sandbox
                let wanted = loose
                    || match join.as_deref() {
                        Some(PidJoin::Any) => true,
                        Some(PidJoin::Container(c)) => passes_want(want, Some(c)),
                        None => j.sandbox.is_some() && passes_want(want, j.sandbox.as_deref()),
                    };
                let body = match (&proxy, wanted) {
                    (_, false) => JournalBody::Skipped,
                    (Some(text), true) => console_body(text),
                    (None, true) => journal_body(&j, buf.as_str()),
                };
                let pid = if proxy.is_some() { None } else { j.pid };
                let dup = record_key(j.time, pid, &body);
                return Parsed::Journal(JournalParsed {
                    prefix: j.prefix,
                    host: j.host,
                    time: j.time,
                    time_zone: j.time_zone,
                    sandbox: j.sandbox,
                    pid,
                    body,
                    same_host: false,
                    same_sandbox: false,
                    dup,
                    loose,
                    shim: false,
                    join,
                });
            }
            Ok(None) => {}
            Err(e @ journal::JournalError::BadTime) => {
                return Parsed::Bad(Bad::Time(e.to_string()))
            }
            Err(e) => return Parsed::Bad(Bad::Format(format!("journal: {e}"))),
        }
    }
    // 3. console payload: agent JSON or kernel line (or a kernel line's stampless second)
    if let Some(kind) = dmesg::continuation(s) {
        return Parsed::Console(Console::Continuation(kind));
    }
    match parse_console(trimmed) {
        Console::Other => {}
        c => return Parsed::Console(c),
    }
    if let Some(shape) = dmesg::wall_clock_shape(trimmed) {
        return Parsed::WallClockKernel(shape);
    }
    // 4. bpftrace
    if bpftrace::looks_like(trimmed) {
        match bpftrace::parse_line(trimmed) {
            Ok(Some(b)) => return Parsed::Bpf(b),
            Ok(None) => {}
            Err(bpftrace::BpfError::BadTs(t)) => return Parsed::Bad(Bad::Time(t)),
            Err(e) => return Parsed::Bad(Bad::Format(format!("bpftrace: {e}"))),
        }
    }
    // 5. ftrace function_graph
    if ftrace::looks_like(s) {
        match ftrace::parse_line(s) {
            Ok(Some(FtraceLine::Meta)) => return Parsed::Unrecognized,
            Ok(Some(f)) => return Parsed::Ftrace(f),
            Ok(None) => {}
            Err(e) => return Parsed::Bad(Bad::Format(format!("ftrace: {e}"))),
        }
    }
    // 6. kubectl describe
    if s.contains(':') {
        match kubectl::parse_line(s) {
            Ok(Some(k)) => return Parsed::Kube(k),
            Ok(None) => {}
            Err(e) => return Parsed::Bad(Bad::Time(e.to_string())),
        }
    }
    Parsed::Unrecognized
}

/// How a logfmt line that names no sandbox joins its process's ([`PidJoin`]): a shim line
/// (not a console payload, not a proxy's) with a `pid=`, of the Go shim's agent client or
/// naming only `container=`.
fn pid_join<'a>(j: &journal::JournalRef<'a>, proxy: bool) -> Option<Box<PidJoin<'a>>> {
    if j.sandbox.is_some() || j.pid.is_none() || j.vmconsole.is_some() || proxy {
        return None;
    }
    if j.name.is_some_and(|n| n.is("agent-client")) {
        return Some(Box::new(PidJoin::Any));
    }
    let c = j.container?.get();
    (!c.is_empty()).then(|| Box::new(PidJoin::Container(c)))
}

/// A runtime-rs line ([`runtime_rs`]): its console line or agent record read as a
/// `vmconsole=` payload is, its own message as a shim line. A line that names its sandbox
/// teaches the reader its shim's pid; one that does not is the pid's sandbox's, or, before
/// any line named it, of the boot it falls in.
fn runtime_rs_line<'a>(
    r: runtime_rs::RsLine<'a>,
    source: Option<&str>,
    priority: Option<u8>,
    want: Option<&str>,
) -> Parsed<'a> {
    use runtime_rs::Payload;
    let named = match &r.payload {
        _ if source.is_some() => source,
        Payload::Message(m) => runtime_rs::sandbox_named(m),
        _ => None,
    };
    let body = if !named.is_none_or(|id| passes_want(want, Some(id))) {
        JournalBody::Skipped
    } else {
        match r.payload {
            Payload::Console(text) => console_body(&text),
            Payload::Agent(rec) => JournalBody::Console(parse_console(rec)),
            Payload::Message(m) => JournalBody::Host(HostLine {
                msg: m.to_string(),
                // syslog's err, crit, alert, emerg
                is_error: priority.map_or_else(|| runtime_rs::is_failure(m), |p| p <= 3),
                error: None,
                device: None,
                qemu: false,
            }),
        }
    };
    Parsed::Journal(JournalParsed {
        prefix: r.prefix,
        host: r.host,
        time: None,
        time_zone: None,
        loose: named.is_none(),
        sandbox: named.map(|n| Cow::Owned(n.to_string())),
        pid: Some(r.pid),
        body,
        same_host: false,
        same_sandbox: false,
        dup: None,
        shim: true,
        join: None,
    })
}

/// A runtime-rs JSON record ([`runtime_rs::JsonRecord`]): read as its message would be in
/// journald, with the record's own time, level, shim pid and sandbox.
fn runtime_rs_record<'a>(rec: runtime_rs::JsonRecord<'a>, want: Option<&str>) -> Parsed<'a> {
    let (Some(pid), Some(payload)) = (rec.pid, runtime_rs::payload(&rec.msg)) else {
        return Parsed::Unrecognized;
    };
    let r = runtime_rs::RsLine {
        prefix: rec.prefix,
        host: None,
        pid,
        payload,
    };
    let priority = Some(if rec.is_error { 3 } else { 6 });
    let parsed = runtime_rs_line(r, rec.source.as_deref(), priority, want);
    rehosted(parsed, rec.host, rec.ts)
}

/// A line read from text the caller owns (`rebuilt` owned), with the host and time (and
/// its zone) that came with it.
fn rehosted<'a>(
    p: Parsed<'_>,
    host: Option<&'a str>,
    time: Option<(Nanos, Option<i64>)>,
) -> Parsed<'a> {
    match p {
        Parsed::Journal(j) => Parsed::Journal(JournalParsed {
            prefix: j.prefix,
            host,
            time: time.map(|t| t.0).or(j.time),
            time_zone: time.map_or(j.time_zone, |t| t.1),
            sandbox: j.sandbox.map(|s| Cow::Owned(s.into_owned())),
            pid: j.pid,
            body: j.body,
            same_host: false,
            same_sandbox: false,
            dup: j.dup,
            loose: j.loose,
            shim: j.shim,
            join: j.join.map(|p| {
                Box::new(match *p {
                    PidJoin::Any => PidJoin::Any,
                    PidJoin::Container(c) => PidJoin::Container(Cow::Owned(c.into_owned())),
                })
            }),
        }),
        _ => Parsed::Unrecognized,
    }
}

/// A journald JSON export entry: its `MESSAGE` parsed as any line is, with the host and
/// the receive time taken from the entry's own fields (the message has no journald prefix).
fn from_export<'a>(
    e: journal::ExportEntry<'a>,
    want: Option<&str>,
    buf: &mut String,
) -> Parsed<'a> {
    if journal::export_entry(&e.message).is_some() {
        // an export inside an export's message is not a log line
        return Parsed::Unrecognized;
    }
    // Kata 3.0–3.19's Rust shim relayed by containerd: the record names its time and shim
    if let Some(rec) = runtime_rs::json_message(&e.message) {
        let prefix = e.realtime.map(PrefixTime::Absolute);
        return match rec {
            Ok(rec) => rehosted(
                runtime_rs_record(runtime_rs::JsonRecord { prefix, ..rec }, want),
                e.host,
                None,
            ),
            Err(why) => Parsed::Bad(Bad::Json(why)),
        };
    }
    // the Rust shim: its fields name the sandbox and the level the message does not
    if let (Some("kata"), Some(pid)) = (e.ident.as_deref(), e.pid) {
        if let Some(payload) = runtime_rs::payload(&e.message) {
            let r = runtime_rs::RsLine {
                prefix: e.realtime.map(PrefixTime::Absolute),
                host: None,
                pid,
                payload,
            };
            let source = e.source.as_deref().filter(|s| runtime_rs::is_sandbox_id(s));
            return rehosted(runtime_rs_line(r, source, e.priority, want), e.host, None);
        }
    }
    match parse_str(&e.message, want, buf) {
        Parsed::Journal(j) => rehosted(
            Parsed::Journal(JournalParsed {
                prefix: e.realtime.map(PrefixTime::Absolute).or(j.prefix),
                ..j
            }),
            e.host,
            None,
        ),
        Parsed::Unrecognized => Parsed::Unrecognized,
        Parsed::Console(c) => Parsed::Console(c),
        Parsed::Bpf(b) => Parsed::Bpf(b),
        Parsed::Ftrace(f) => Parsed::Ftrace(f),
        Parsed::Kube(k) => Parsed::Kube(k),
        Parsed::WallClockKernel(w) => Parsed::WallClockKernel(w),
        Parsed::Bad(b) => Parsed::Bad(b),
    }
}

/// Guest console lines per sandbox id over some inputs, counted at the byte level without
/// parsing: what picks the sandbox to report when none is named, so that only its lines
/// need parsing (a 1 GB journal of 885 boots: ~0.2 s instead of parsing every boot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// (sandbox id, console lines), in order of first appearance.
    pub sandboxes: Vec<(String, u64)>,
}

impl Census {
    /// Count the lines of `data`.
    pub fn add(&mut self, data: &[u8]) {
        let mut raw: Vec<(Vec<u8>, u64)> = self
            .sandboxes
            .iter()
            .map(|(s, n)| (s.as_bytes().to_vec(), *n))
            .collect();
        crate::parse::scan::console_census(data, &mut raw);
        self.sandboxes = raw
            .into_iter()
            .map(|(s, n)| (String::from_utf8_lossy(&s).into_owned(), n))
            .collect();
    }

    /// Count the lines of a file: memory-mapped when it is a large regular file, else (small,
    /// a pipe, compressed) a buffer of whole lines at a time.
    pub fn add_path(&mut self, path: &Path) -> std::io::Result<()> {
        match open_input(path)? {
            Opened::Mapped(map) => {
                self.add(&map);
                Ok(())
            }
            Opened::Stream(r) => line_blocks_of(r, |b| self.add(b)),
        }
    }

    /// The sandbox with the most guest console lines (the first of equals), if any has one.
    pub fn busiest(&self) -> Option<&str> {
        self.sandboxes
            .iter()
            .rev()
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
            .map(|(s, _)| s.as_str())
    }
}

/// Hand `f` a stream's text a block of whole lines at a time (the last block may lack its
/// line end): each buffer fill as it is, except a line that straddles two fills, which is
/// copied once and handed over alone.
fn line_blocks_of<R: BufRead>(mut r: R, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let len = buf.len();
        let mut rest = buf;
        if !carry.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', buf) else {
                carry.extend_from_slice(buf);
                r.consume(len);
                continue;
            };
            let (head, tail) = buf.split_at(nl + 1);
            carry.extend_from_slice(head);
            f(&std::mem::take(&mut carry));
            rest = tail;
        }
        let whole = memchr::memrchr(b'\n', rest).map_or(0, |i| i + 1);
        let (lines, partial) = rest.split_at(whole);
        f(lines);
        carry.extend_from_slice(partial);
        r.consume(len);
    }
    if !carry.is_empty() {
        f(&carry);
    }
    Ok(())
}

/// A file opened for reading: memory-mapped (a large regular file), or streamed (small
/// files, pipes, FIFOs, `/proc` files, and compressed input, unpacked as it is read).
enum Opened {
    Mapped(memmap2::Mmap),
    Stream(Box<dyn BufRead>),
}

fn open_input(path: &Path) -> std::io::Result<Opened> {
    let f = File::open(path)?;
    let meta = f.metadata()?;
    let r = match unpack(BufReader::with_capacity(STREAM_BUF_BYTES, f))? {
        // a rotated journal or a log bundle (`.gz`, `.bz2`)
        Unpacked::Text(text) => return Ok(Opened::Stream(text)),
        // its first buffer is read: a stream goes on from there, a map from the start
        Unpacked::Plain(r) => r,
    };
    if meta.is_file() && meta.len() >= MMAP_MIN_BYTES {
        // SAFETY: the map is only read, as bytes, while the caller holds it. If another
        // process truncates the file meanwhile, reading the lost pages raises SIGBUS (as for
        // ripgrep and other tools that map their input); appending to a journal while it is
        // read is harmless (the map covers the length at open time).
        if let Ok(map) = unsafe { memmap2::Mmap::map(r.get_ref()) } {
            // a hint only: the scan reads each block once, front to back
            let _ = map.advise(memmap2::Advice::Sequential);
            return Ok(Opened::Mapped(map));
        }
    }
    Ok(Opened::Stream(Box::new(r)))
}

/// An input as read: as it is, or the text of a compressed one.
pub enum Unpacked<'a, R> {
    Plain(R),
    Text(Box<dyn BufRead + 'a>),
}

/// The text of a compressed input, unpacked as it is read: gzip (every member, as
/// `cat a.gz b.gz` and some rotations write them) or bzip2, told by their first bytes;
/// anything else is handed back with nothing consumed.
pub fn unpack<'a, R: BufRead + 'a>(mut r: R) -> std::io::Result<Unpacked<'a, R>> {
    let head = r.fill_buf()?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let bzip2 = head.starts_with(b"BZh") && head.get(3).is_some_and(|c| (b'1'..=b'9').contains(c));
    Ok(if gzip {
        Unpacked::Text(Box::new(BufReader::with_capacity(
            STREAM_BUF_BYTES,
            flate2::bufread::MultiGzDecoder::new(r),
        )))
    } else if bzip2 {
        Unpacked::Text(Box::new(BufReader::with_capacity(
            STREAM_BUF_BYTES,
            bzip2::bufread::MultiBzDecoder::new(r),
        )))
    } else {
        Unpacked::Plain(r)
    })
}

/// A stream's text: [`unpack`]ed when compressed, else the stream itself (stdin).
pub fn text_of<'a, R: BufRead + 'a>(r: R) -> std::io::Result<Box<dyn BufRead + 'a>> {
    Ok(match unpack(r)? {
        Unpacked::Text(text) => text,
        Unpacked::Plain(r) => Box::new(r),
    })
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
    use crate::parse::scan::Class;
    use proptest::prelude::*;

    /// The reader as first written, one line at a time with the per-line rules: the
    /// definition the block and parallel paths must match exactly.
    fn per_line(name: &str, data: &[u8], opts: Options) -> Ingest {
        let pre = Prefilter::new(opts.want());
        let mut ing = Ingester::new(opts);
        let file = ing.add_file(name);
        let mut offset = 0u64;
        for (i, piece) in data.split_inclusive(|b| *b == b'\n').enumerate() {
            let src = SrcRef {
                file,
                line: i as u64 + 1,
                offset,
            };
            offset += piece.len() as u64;
            ing.out.stats.lines += 1;
            ing.out.stats.bytes += piece.len() as u64;
            match pre.classify_line(piece) {
                Class::Keep => ing.feed_bytes(src, piece),
                Class::OtherSandbox => ing.out.stats.other_sandbox += 1,
                Class::Unrecognized => ing.out.stats.unrecognized += 1,
            }
        }
        ing.finish()
    }

    const FIXTURES: &[&[u8]] = &[
        include_bytes!("../../../tests/fixtures/run2-containerd.journal"),
        include_bytes!("../../../tests/fixtures/run1-vmconsole.txt"),
        include_bytes!("../../../tests/fixtures/run2-bpftrace.txt"),
        include_bytes!("../../../tests/fixtures/bad-lines.txt"),
        include_bytes!("../../../tests/fixtures/seed-ftrace.txt"),
        include_bytes!("../../../tests/fixtures/ftrace-abstime.txt"),
        include_bytes!("../../../tests/fixtures/dmesg-initcall.txt"),
        include_bytes!("../../../tests/fixtures/kubectl-hugepages.txt"),
    ];

    fn all_lines() -> Vec<&'static [u8]> {
        FIXTURES
            .iter()
            .flat_map(|f| f.split(|b| *b == b'\n'))
            .collect()
    }

    fn sandbox_choice(k: u8) -> Option<String> {
        match k % 4 {
            0 => None,
            1 => Some(crate::synth::gen::TEMPLATE_SANDBOX.to_string()),
            // a prefix of the fixture's other sandbox
            2 => Some("38f55c4a".to_string()),
            _ => Some(String::new()),
        }
    }

    /// Every way to read `data` gives the same `Ingest` as the per-line reader.
    fn check_paths(data: &[u8], opts: &Options, cap: usize, block: usize, threads: usize) {
        let want = per_line("t", data, opts.clone());
        let streamed = ingest_bytes("t", data, opts.clone());
        assert_eq!(streamed, want, "one-buffer stream");
        let mut ing = Ingester::new(opts.clone());
        ing.read("t", std::io::BufReader::with_capacity(cap, data))
            .unwrap();
        assert_eq!(ing.finish(), want, "stream with a {cap}-byte buffer");
        let mut ing = Ingester::new(opts.clone());
        ing.read_slice_with(
            "t",
            data,
            Parallel {
                threads,
                block_bytes: block,
            },
        );
        assert_eq!(ing.finish(), want, "{threads} threads, {block}-byte blocks");
    }

    #[test]
    fn fixtures_read_alike_every_way() {
        for f in FIXTURES {
            for k in 0..4 {
                let opts = Options {
                    sandbox: sandbox_choice(k),
                };
                for (cap, block, threads) in [
                    (1, 1, 4),
                    (7, 64, 2),
                    (4096, 1000, 3),
                    (1 << 20, 1 << 20, 1),
                ] {
                    check_paths(f, &opts, cap, block, threads);
                }
            }
        }
        // and they are not empty
        let j = per_line("t", FIXTURES[0], Options::default());
        assert!(j.events.len() > 100 && j.stats.unrecognized > 0);
    }

    /// Generated journals in every journal format, with memory hotplugs whose uevent
    /// lines the scanning threads read by templates and keep in runs, and interleaved
    /// boots: every way reads them as the per-line reader does.
    #[test]
    fn generated_journals_read_alike_every_way() {
        use crate::synth::{fleet, JournalFormat, Spec};
        let formats = JournalFormat::ALL;
        let start = crate::parse::time::parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
        for (i, format) in formats.into_iter().enumerate() {
            let boots: Vec<Spec> = (0..3)
                .map(|b| {
                    let mut s = Spec::study(i as u64 * 10 + b);
                    s.gpus = 2;
                    s.enable_order = vec![1, 0];
                    s.hot_ram_gib = 16;
                    s.journal_format = format;
                    s.prefix_only_pct = if b == 1 { 30 } else { 0 };
                    s.zone_min = [0, 480, -240][b as usize];
                    s
                })
                .collect();
            // boots 10 s apart: their lines interleave
            let nodes = fleet(&[("gpu-01".to_string(), boots)], start, 10);
            let data = nodes[0].journal.as_bytes();
            let whole = ingest_bytes("t", data, Options::default());
            let runs = whole
                .events
                .iter()
                .filter(|e| matches!(e.body, Body::AgentRun(_)))
                .count();
            assert!(runs > 0 || format == JournalFormat::Json, "{format:?}");
            for k in 0..4 {
                let opts = Options {
                    sandbox: sandbox_choice(k),
                };
                check_paths(data, &opts, 4096, 20_000, 3);
            }
        }
    }

    proptest! {
        // PROPTEST_CASES=N runs more (a soak); 24 by default
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
        ))]

        /// Generated journals with digits overwritten here and there — times that go back
        /// (lines out of order inside a burst the templates read), other hosts, sandboxes
        /// and shim pids, numbers that no longer read: every way reads them as the
        /// per-line reader does.
        #[test]
        fn edited_generated_journals_read_alike_every_way(
            seed in any::<u64>(),
            zone_min in prop_oneof![Just(0i64), Just(480)],
            prefix_only in prop_oneof![Just(0u8), Just(30)],
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..10), 1..60),
            k in 0u8..4,
        ) {
            use crate::synth::{fleet, Spec};
            let boots: Vec<Spec> = (0..2)
                .map(|b| {
                    let mut s = Spec::study(seed.wrapping_add(b));
                    s.gpus = 1;
                    s.enable_order = vec![0];
                    s.hot_ram_gib = 8;
                    s.zone_min = zone_min;
                    s.prefix_only_pct = prefix_only;
                    s
                })
                .collect();
            let start = crate::parse::time::parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
            let nodes = fleet(&[("gpu-01".to_string(), boots)], start, 10);
            let mut data = nodes[0].journal.clone().into_bytes();
            let digits: Vec<usize> = data
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(i, _)| i)
                .collect();
            for (at, d) in edits {
                if let Some(&i) = digits.get(at.index(digits.len())) {
                    data[i] = b'0' + d;
                }
            }
            let opts = Options { sandbox: sandbox_choice(k) };
            check_paths(&data, &opts, 4096, 30_000, 3);
        }
    }

    /// A rotated journal as gzip (two members, as `cat a.gz b.gz` leaves it) and as bzip2
    /// reads exactly as the plain text, by path (small and mapped-size files) and for the
    /// census; a cut gzip stream is an error naming it, not a silent half.
    #[test]
    fn compressed_inputs_read_as_their_text() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        for (i, f) in FIXTURES.iter().enumerate() {
            // small, and past the size at which plain files are mapped
            for text in [
                f.to_vec(),
                f.repeat((MMAP_MIN_BYTES as usize / f.len().max(1)) + 1),
            ] {
                let plain = d.path().join(format!("{i}.log"));
                std::fs::write(&plain, &text).unwrap();
                let cut = memchr::memchr(b'\n', &text[text.len() / 2..])
                    .map_or(text.len(), |k| text.len() / 2 + k + 1);
                let mut gz = Vec::new();
                for part in [&text[..cut], &text[cut..]] {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    e.write_all(part).unwrap();
                    gz.extend(e.finish().unwrap());
                }
                let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                bz.write_all(&text).unwrap();
                let bz = bz.finish().unwrap();
                let read = |p: &Path| {
                    let mut ing = Ingester::new(Options::default());
                    ing.read_path("x", p).unwrap();
                    let mut c = Census::default();
                    c.add_path(p).unwrap();
                    (ing.finish(), c)
                };
                let want = read(&plain);
                for (ext, bytes) in [("gz", &gz), ("bz2", &bz)] {
                    let p = d.path().join(format!("{i}.log.{ext}"));
                    std::fs::write(&p, bytes).unwrap();
                    let got = read(&p);
                    assert!(got.0 == want.0, "{ext}: events differ");
                    assert_eq!(got.1, want.1, "{ext}: census differs");
                }
                let p = d.path().join(format!("{i}.cut.gz"));
                std::fs::write(&p, &gz[..gz.len() * 2 / 3]).unwrap();
                let mut ing = Ingester::new(Options::default());
                assert!(
                    ing.read_path("x", &p).is_err(),
                    "a cut gzip read as if whole"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random mixes of fixture lines, with CRLF, invalid UTF-8, cut lines and a missing
        /// final line end, read through random buffer sizes, block sizes and thread counts.
        #[test]
        fn block_and_parallel_paths_match_per_line(
            picks in proptest::collection::vec((any::<usize>(), 0u8..8, any::<u16>()), 0..120),
            last_newline in any::<bool>(),
            sandbox in any::<u8>(),
            cap in 1usize..300,
            block in 1usize..2000,
            threads in 1usize..5,
        ) {
            let lines = all_lines();
            let mut data = Vec::new();
            for (i, op, n) in picks {
                let l = lines.get(i % lines.len().max(1)).copied().unwrap_or(b"");
                let cut = usize::from(n) % (l.len() + 1);
                match op {
                    0 => data.extend_from_slice(l),
                    1 => { data.extend_from_slice(l); data.push(b'\r'); }
                    2 => data.extend_from_slice(l.get(..cut).unwrap_or(l)),
                    3 => {
                        data.extend_from_slice(l.get(..cut).unwrap_or(l));
                        data.extend_from_slice(&[0xff, 0xc3]);
                        data.extend_from_slice(l.get(cut..).unwrap_or(&[]));
                    }
                    4 => {} // an empty line
                    5 => data.extend_from_slice(b" sandbox=38f55c4a sandbox=c9f7bf13"),
                    // a CRI error naming its sandbox in its text, after a journald prefix
                    6 => data.extend_from_slice(b"Nov 20 16:25:32 h containerd[1]: time=\"2025-11-20T16:25:32Z\" level=error msg=\"RunPodSandbox failed\" error=\"failed to start sandbox \\\"c9f7bf13\\\": x\""),
                    _ => data.extend_from_slice(b"Nov 20 16:25:32 h containerd[1]: level=error msg=\"CreateContainer within sandbox \\\"38f55c4a\\\" failed\" sandbox\\\" sandbox"),
                }
                data.push(b'\n');
            }
            if !last_newline {
                data.pop();
            }
            let opts = Options { sandbox: sandbox_choice(sandbox) };
            check_paths(&data, &opts, cap, block, threads);
        }
    }

    /// Lines naming no sandbox join the one their pid names by key, before or after it
    /// does: the Go shim's agent client's, and a runtime's naming only the sandbox's own
    /// container; a workload container's line, and an agent client of a pid that names
    /// none, stay unrecognised; `--sandbox` keeps them with their sandbox; every way of
    /// reading agrees.
    #[test]
    fn unnamed_lines_join_the_sandbox_their_pid_names() {
        let l = |t: &str, rest: &str| {
            format!("Nov 20 16:25:{t} h kata-runtime[5]: time=\"2025-11-20T16:25:{t}Z\" level=info {rest}\n")
        };
        let data = [
            l("01", "msg=\"loaded configuration\" command=create container=sb1 name=kata-runtime pid=5 source=katautils"),
            l("02", "msg=\"new request\" name=agent-client pid=5 source=agent-client"),
            l("03", "msg=\"new request\" name=agent-client pid=9 source=agent-client"),
            l("04", "msg=\"Starting VM\" command=create container=sb1 name=kata-runtime pid=5 sandbox=sb1 source=virtcontainers"),
            l("05", "msg=\"created\" command=create container=wk2 name=kata-runtime pid=5 source=katautils"),
            l("06", "msg=\"exit\" command=create container=sb1 name=kata-runtime pid=5 source=runtime"),
        ]
        .concat();
        let ing = ingest_str("t", &data, Options::default());
        let sb: Vec<Option<&str>> = ing
            .events
            .iter()
            .map(|e| {
                e.sandbox
                    .and_then(|i| ing.sandboxes.get(i as usize))
                    .map(String::as_str)
            })
            .collect();
        assert_eq!(sb, vec![Some("sb1"); 4]);
        assert_eq!(
            ing.events.iter().map(|e| e.src.line).collect::<Vec<_>>(),
            vec![1, 2, 4, 6]
        );
        assert_eq!((ing.stats.unrecognized, ing.stats.events), (2, 4));
        let other = ingest_str(
            "t",
            &data,
            Options {
                sandbox: Some("zz".into()),
            },
        );
        assert!(other.events.is_empty(), "{:?}", other.events);
        for k in 0..4 {
            let opts = Options {
                sandbox: [None, Some("sb1"), Some("zz"), Some("wk")][k].map(str::to_string),
            };
            for (cap, block, threads) in [(1, 1, 4), (7, 64, 2), (4096, 100, 3)] {
                check_paths(data.as_bytes(), &opts, cap, block, threads);
            }
        }
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
