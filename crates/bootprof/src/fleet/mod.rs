//! The fleet view: every boot of every node in the inputs, analyzed in one pass, and what
//! they say together — one row per boot, percentiles per phase, the slowest boots and the
//! phase that made each slow, and groupings by node, GPU count and page size.
//!
//! The inputs are read once ([`crate::Ingester`]); [`crate::analyze::select::boots`] splits the
//! lines into boots (node × sandbox × shim pid) in one pass over the events, and each boot
//! gets its own lines plus the lines of its node that name no sandbox (traces, dmesg,
//! `kubectl describe`), then [`crate::analyze::analyze`] — the single-boot analysis, so a
//! row is exactly what `vmtune boot analyze --sandbox ID@N` reports — on all CPUs. A node's
//! host traces and kubectl output are read once for all its boots ([`crate::analyze::traces`]): each
//! boot looks up the pin calls near its own time window by binary search, so a node's
//! boots cost in proportion to their number, not its square.
//!
//! Which node a file belongs to: the host its journal lines name (journald's host field);
//! a file whose lines name no host but name sandboxes (a journal without host field) is a
//! node of its own, named after the file; a `kubectl describe pod` goes with the node its
//! `Node:` line names when a journal names that host; any other file (a bpftrace or ftrace
//! trace, dmesg) goes with the node of the file given before it.
//!
//! What enters the percentiles is decided per phase and per boot ([`counted`]): a phase
//! that is missing from a boot, estimated, cut by the start or the end of the log, or the
//! step the boot failed in is left out and counted by reason, never taken as zero; totals
//! are over complete boots only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use crate::analyze::clocks::ClockOptions;
use crate::analyze::model::Report;
use crate::analyze::select;
use crate::analyze::traces::{is_trace, Traces};
use crate::parse::ingest::{Body, ClockSamples, Ingest};
use crate::parse::kubectl::KubectlLine;

/// The phases of a boot, in boot order: the columns of the fleet view.
pub const PHASES: [&str; 8] = [
    "vm_create",
    "kernel_boot",
    "pci_enumeration",
    "gpu_driver_init",
    "dma_pinning",
    "cdi_wait",
    "memory_hotplug",
    "container_start",
];

/// The percentiles reported (nearest rank).
pub const PERCENTILES: [u32; 3] = [50, 90, 99];

/// How the fleet is analyzed.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    pub clocks: ClockOptions,
    /// Threads for the per-boot analyses (`None`: one per CPU).
    pub threads: Option<usize>,
    /// How many of the slowest boots to list (and draw, in HTML).
    pub top: usize,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            clocks: ClockOptions::default(),
            threads: None,
            top: 10,
        }
    }
}

/// Why a phase of a boot is not in the percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Excluded {
    /// The boot has no such phase (or the inputs do not show it).
    Missing,
    /// Its end is inferred, not read (the closing line is not in the log).
    Estimated,
    /// The log starts after the boot began, and this phase came before or was cut.
    StartedLate,
    /// The log ends before the boot did, and this phase may have gone on.
    EndedEarly,
    /// Fewer GPUs have a driver init than the boot has GPUs.
    Partial,
    /// The agent's CDI wait did not resolve: the step the boot failed in, or was in when
    /// the log ends.
    Unresolved,
    /// No later line shows it was over (a boot that failed or whose log ends first).
    NotClosed,
    /// A memory hotplug whose host side is not traced: only the guest onlining its blocks
    /// is seen, not the host pinning the memory before it (a lower bound).
    Untraced,
    /// Totals: the boot did not complete, or started before its log.
    NotComplete,
}

impl Excluded {
    pub fn as_str(self) -> &'static str {
        match self {
            Excluded::Missing => "missing",
            Excluded::Estimated => "estimated",
            Excluded::StartedLate => "started_late",
            Excluded::EndedEarly => "ended_early",
            Excluded::Partial => "partial",
            Excluded::Unresolved => "unresolved",
            Excluded::NotClosed => "not_closed",
            Excluded::Untraced => "untraced",
            Excluded::NotComplete => "not_complete",
        }
    }
}

/// One phase kind of one boot: its seconds (the sum of its instances: one per GPU for
/// `gpu_driver_init`, one per pin call for `dma_pinning`) and whether it is counted.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseCell {
    /// `null` when the boot has no such phase.
    pub s: Option<f64>,
    /// Instances of the phase in the boot.
    pub n: usize,
    /// In the fleet's percentiles.
    pub counted: bool,
    /// Why not, when not.
    pub excluded: Option<Excluded>,
}

/// The phase that made a boot slow: the one furthest above the fleet's median.
#[derive(Debug, Clone, Serialize)]
pub struct SlowPhase {
    pub phase: &'static str,
    pub s: f64,
    /// The fleet's median of this phase.
    pub median_s: f64,
    pub over_median_s: f64,
}

/// One boot: a row of the fleet view.
#[derive(Debug, Clone, Serialize)]
pub struct BootRow {
    pub node: Option<String>,
    pub sandbox: Option<String>,
    pub shim_pid: Option<u32>,
    /// This boot is the N-th of its sandbox id (`--sandbox ID@N`).
    pub boot: usize,
    /// The timeline's origin, RFC 3339; `null` when no input dates the boot.
    pub start: Option<String>,
    /// `null` when no input shows the guest's PCI enumeration, a GPU driver's enable or a
    /// CDI request.
    pub gpus: Option<usize>,
    /// Host pages backing guest RAM: `4K`, `hugepages`, or `null` when no input tells.
    pub page_size: Option<&'static str>,
    pub page_size_from: Option<String>,
    /// `complete`, `failed`, `unfinished` or `unknown`.
    pub state: &'static str,
    /// The step a failed boot failed at.
    pub failure_step: Option<&'static str>,
    pub started_late: bool,
    /// Seconds, first to last phase (or kubectl Start Time → Started); `null` unless the boot
    /// is complete and its log starts before it did.
    pub total_s: Option<f64>,
    /// First to last phase of what the log shows, whatever the state; `null` without a
    /// phase.
    pub span_s: Option<f64>,
    pub total_from: &'static str,
    pub phases: BTreeMap<&'static str, PhaseCell>,
    pub slow_phase: Option<SlowPhase>,
    /// The report's first finding (how the boot went comes first), and its fix.
    pub finding: Option<String>,
    pub finding_phase: Option<&'static str>,
    pub fix: Option<String>,
    /// The findings' savings added up.
    pub fixes_save_s: Option<f64>,
}

/// Percentiles of one phase (or the total) over the boots where it is counted.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseStats {
    pub phase: &'static str,
    /// Boots counted.
    pub n: usize,
    /// Boots left out, by reason (`missing`: the boot has no such phase).
    pub excluded: BTreeMap<&'static str, usize>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

/// The boots of one node, one GPU count or one page size.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// `node`, `gpus` or `page_size`.
    pub by: &'static str,
    /// The group's value (`null`: not known).
    pub key: Option<String>,
    pub boots: usize,
    pub states: BTreeMap<&'static str, usize>,
    pub started_late: usize,
    /// Totals of the group's complete boots.
    pub total: PhaseStats,
    /// Medians of each phase over the group's boots where it is counted.
    pub phase_p50: BTreeMap<&'static str, Option<f64>>,
    /// The phase with the largest median share of the group's boots.
    pub largest_phase: Option<&'static str>,
}

/// A sandbox whose lines show no boot: no phase of its own lines, no failure (a VM already
/// running when the log starts, a line of another sandbox's teardown), whatever its node's
/// traces or `kubectl describe` hold ([`shows_boot`]).
#[derive(Debug, Clone, Serialize)]
pub struct NoBoot {
    pub node: Option<String>,
    pub sandbox: Option<String>,
    pub shim_pid: Option<u32>,
    pub lines: u64,
}

/// The whole fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub files: Vec<String>,
    /// Nodes with at least one boot row, in order of first appearance.
    pub nodes: Vec<String>,
    pub rows: Vec<BootRow>,
    /// The single-boot reports of the rows the HTML page charts (the slowest, and the first
    /// boots that did not complete), by row index.
    #[serde(skip)]
    pub charts: BTreeMap<usize, Report>,
    pub phases: Vec<PhaseStats>,
    pub total: PhaseStats,
    /// Indices into `rows`: the slowest complete boots, slowest first.
    pub slowest: Vec<usize>,
    /// Indices into `rows`: boots that failed, are unfinished or unknown, or started late.
    pub incomplete: Vec<usize>,
    pub groups: Vec<Group>,
    pub without_boot: Vec<NoBoot>,
    /// Where a file's node came from, for files that name none.
    pub notes: Vec<String>,
    /// Nodes with a host trace: the whole hours added to its stamps (0: on the journal's
    /// clock), for every boot of the node, as the boots whose pins it holds agree.
    pub trace_shift_h: BTreeMap<String, i64>,
    pub states: BTreeMap<&'static str, usize>,
    pub started_late: usize,
    pub stats: crate::parse::ingest::Stats,
}

/// What a file is, for the node it belongs to.
#[derive(Debug, Clone, PartialEq)]
enum FileNode {
    /// The host its lines name most.
    Host(u32),
    /// A journal without host field: a node named after the file.
    Named(String),
    /// Neither: goes with the file before it.
    Follow,
}

/// A node of the fleet: a journal host, or a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum NodeId {
    Host(u32),
    Named(String),
}

impl NodeId {
    fn name(&self, ing: &Ingest) -> String {
        match self {
            NodeId::Host(n) => ing.nodes.get(*n as usize).cloned().unwrap_or_default(),
            NodeId::Named(s) => s.clone(),
        }
    }
}

/// Something of each node (`None`: of the lines that name no node and follow no file).
type ByNode<T> = HashMap<Option<NodeId>, T>;

/// The node of every file, and notes on the files that name none.
fn nodes_of_files(ing: &Ingest) -> (Vec<Option<NodeId>>, Vec<String>) {
    let hosts = select::file_nodes(ing);
    let n = ing.files.len();
    // how many hosts the file whose main host is h names
    let mut named: Vec<std::collections::BTreeSet<u32>> = vec![Default::default(); n];
    for e in &ing.events {
        if let (Some(h), Some(set)) = (e.node, named.get_mut(e.src.file as usize)) {
            set.insert(h);
        }
    }
    let hosts_in: HashMap<u32, usize> = hosts
        .iter()
        .zip(&named)
        .filter_map(|(h, set)| Some(((*h)?, set.len())))
        .collect();
    let mut sandboxes = vec![false; n];
    let mut kube_node: Vec<Option<String>> = vec![None; n];
    for e in &ing.events {
        let f = e.src.file as usize;
        if e.sandbox.is_some() {
            if let Some(s) = sandboxes.get_mut(f) {
                *s = true;
            }
        }
        if let Body::Kube(KubectlLine::Node(name)) = &e.body {
            if let Some(k) = kube_node.get_mut(f) {
                k.get_or_insert_with(|| name.clone());
            }
        }
    }
    let kind: Vec<FileNode> = (0..n)
        .map(|f| {
            if let Some(h) = hosts.get(f).copied().flatten() {
                FileNode::Host(h)
            } else if let Some(h) = kube_node
                .get(f)
                .cloned()
                .flatten()
                .and_then(|k| ing.nodes.iter().position(|x| *x == k))
            {
                // a pod on a node a journal names; else it goes with the file before it
                FileNode::Host(h as u32)
            } else if sandboxes.get(f).copied().unwrap_or(false) {
                FileNode::Named(ing.files.get(f).cloned().unwrap_or_default())
            } else {
                FileNode::Follow
            }
        })
        .collect();
    let id = |k: &FileNode| match k {
        FileNode::Host(h) => Some(NodeId::Host(*h)),
        FileNode::Named(s) => Some(NodeId::Named(s.clone())),
        FileNode::Follow => None,
    };
    let mut notes = Vec::new();
    let mut out = Vec::with_capacity(n);
    for f in 0..n {
        let me = kind.get(f).and_then(id);
        let node = me.or_else(|| {
            let before = (0..f).rev().find_map(|g| kind.get(g).and_then(id));
            let after = || (f + 1..n).find_map(|g| kind.get(g).and_then(id));
            let (node, how) = match before {
                Some(b) => (Some(b), "the file before it"),
                None => (after(), "the file after it (none is before it)"),
            };
            // a journal of several hosts (`journalctl -m`) cannot tell which one a trace is of
            let how = match &node {
                Some(NodeId::Host(h)) if hosts_in.get(h).copied().unwrap_or(0) > 1 => format!(
                    "{how}, the host it names most of {}: give each host's trace after its own journal",
                    hosts_in.get(h).copied().unwrap_or(0)
                ),
                _ => how.to_string(),
            };
            let name = ing.files.get(f).map_or("?", String::as_str);
            match &node {
                Some(nd) => notes.push(format!(
                    "{name} names no node: it goes with node {} ({how})",
                    nd.name(ing)
                )),
                None => notes.push(format!(
                    "{name} names no node and no file names one: its lines go with every boot"
                )),
            }
            node
        });
        out.push(node);
    }
    (out, notes)
}

/// Analyze every boot in `ing`.
pub fn analyze(ing: &Ingest, opts: &FleetOptions) -> Fleet {
    let (file_node, notes) = nodes_of_files(ing);
    let plan = Plan::new(ing, opts, &file_node);
    // the analyses, on all CPUs; each report is reduced to its row in the worker (a fleet's
    // reports need not all be held at once); the few boots the HTML page charts are
    // analyzed again at the end
    let all: Vec<(usize, Option<i64>)> = (0..plan.boots.len()).map(|k| (k, None)).collect();
    let mut done = parallel(&all, opts.threads, &|k, shift| plan.row(k, shift));
    let node_shift = plan.settle_trace_shifts(&mut done);
    let trace_shift_h: BTreeMap<String, i64> = node_shift
        .iter()
        .filter_map(|(n, k)| Some((n.as_ref()?.name(ing), *k)))
        .collect();

    let mut fleet = Fleet {
        files: ing.files.clone(),
        nodes: Vec::new(),
        rows: Vec::new(),
        charts: BTreeMap::new(),
        phases: Vec::new(),
        total: empty_stats("total"),
        slowest: Vec::new(),
        incomplete: Vec::new(),
        groups: Vec::new(),
        without_boot: Vec::new(),
        notes,
        trace_shift_h,
        states: BTreeMap::new(),
        started_late: 0,
        stats: ing.stats.clone(),
    };
    let mut boot_of_row = Vec::new();
    for (k, a) in done.into_iter().enumerate() {
        match a.shown {
            Ok(r) => {
                fleet.rows.push(r);
                boot_of_row.push(k);
            }
            Err(nb) => fleet.without_boot.push(nb),
        }
    }
    summarize(&mut fleet, opts.top);
    fleet.charts = plan.charts(&fleet, &boot_of_row, &node_shift);
    fleet
}

/// The node of a file's lines.
fn node_of_file(file_node: &[Option<NodeId>], f: u32) -> Option<NodeId> {
    file_node.get(f as usize).cloned().flatten()
}

/// One pass over the events: each boot's own lines, and each node's lines that name no
/// sandbox.
fn split_lines(
    ing: &Ingest,
    boots: &select::Boots,
    file_node: &[Option<NodeId>],
) -> (Vec<Vec<u32>>, ByNode<Vec<u32>>) {
    let mut own: Vec<Vec<u32>> = vec![Vec::new(); boots.len()];
    let mut shared: ByNode<Vec<u32>> = HashMap::new();
    for (i, b) in boots.of_events().enumerate() {
        match b {
            Some(k) => {
                if let Some(v) = own.get_mut(k) {
                    v.push(i as u32);
                }
            }
            None => {
                let f = ing.events.get(i).map_or(0, |e| e.src.file);
                shared
                    .entry(node_of_file(file_node, f))
                    .or_default()
                    .push(i as u32);
            }
        }
    }
    (own, shared)
}

/// The node of each boot: its journal host, else its file's.
fn boot_nodes(
    ing: &Ingest,
    boots: &select::Boots,
    own: &[Vec<u32>],
    file_node: &[Option<NodeId>],
) -> Vec<Option<NodeId>> {
    (0..boots.len())
        .map(|k| match boots.node(k) {
            Some(h) => Some(NodeId::Host(h)),
            None => own
                .get(k)
                .and_then(|v| v.first())
                .and_then(|&i| ing.events.get(i as usize))
                .and_then(|e| node_of_file(file_node, e.src.file)),
        })
        .collect()
}

/// Each node's clock samples: its journal lines and the lines of its files that name no
/// node.
fn node_clocks(
    ing: &Ingest,
    boot_node: &[Option<NodeId>],
    file_node: &[Option<NodeId>],
) -> ByNode<ClockSamples> {
    let mut clocks: ByNode<ClockSamples> = HashMap::new();
    for node in boot_node.iter().cloned() {
        clocks.entry(node).or_insert_with_key(|node| match node {
            None => ing.clocks.clone(),
            Some(n) => {
                let mut c = match n {
                    NodeId::Host(h) => ing
                        .node_clocks
                        .get(*h as usize)
                        .cloned()
                        .unwrap_or_default(),
                    NodeId::Named(_) => ClockSamples::default(),
                };
                for (f, fc) in ing.file_clocks.iter().enumerate() {
                    if file_node.get(f).and_then(Option::as_ref) == Some(n) {
                        c.merge(fc);
                    }
                }
                c
            }
        });
    }
    clocks
}

/// A node's traces and kubectl output, read once for all its boots (each boot looks up the
/// pin calls near its own window), and its other lines that name no sandbox (guest console
/// text given as a file of its own), which go with each boot. Lines that name no node and
/// follow no file go with every node.
fn node_shared(
    ing: &Ingest,
    boot_node: &[Option<NodeId>],
    shared: &ByNode<Vec<u32>>,
) -> ByNode<(Vec<u32>, Traces)> {
    let empty_shared: Vec<u32> = Vec::new();
    let unplaced = shared.get(&None).cloned().unwrap_or_default();
    let shared_of = |node: &Option<NodeId>| -> Vec<u32> {
        let mine = shared.get(node).unwrap_or(&empty_shared);
        if node.is_none() || unplaced.is_empty() {
            return mine.clone();
        }
        let mut v: Vec<u32> = mine.iter().chain(unplaced.iter()).copied().collect();
        v.sort_unstable();
        v
    };
    boot_node
        .iter()
        .collect::<std::collections::HashSet<_>>()
        .into_iter()
        .map(|n| {
            let all = shared_of(n);
            let events = || all.iter().filter_map(|&i| ing.events.get(i as usize));
            let traces = Traces::read(events());
            let guest: Vec<u32> = all
                .iter()
                .copied()
                .filter(|&i| ing.events.get(i as usize).is_some_and(|e| !is_trace(e)))
                .collect();
            (n.clone(), (guest, traces))
        })
        .collect()
}

/// What every boot's analysis reads: the boots, each one's own lines and node, and each
/// node's clock samples, shared lines and traces.
struct Plan<'a> {
    ing: &'a Ingest,
    opts: &'a FleetOptions,
    boots: select::Boots,
    /// Each boot's own lines (indices into the events).
    own: Vec<Vec<u32>>,
    boot_node: Vec<Option<NodeId>>,
    clocks: ByNode<ClockSamples>,
    /// Each node's lines that name no sandbox but for its traces, and its traces read.
    shared: ByNode<(Vec<u32>, Traces)>,
    no_traces: Traces,
    no_clocks: ClockSamples,
}

impl<'a> Plan<'a> {
    fn new(ing: &'a Ingest, opts: &'a FleetOptions, file_node: &[Option<NodeId>]) -> Plan<'a> {
        let boots = select::boots(ing);
        let (own, shared) = split_lines(ing, &boots, file_node);
        let boot_node = boot_nodes(ing, &boots, &own, file_node);
        let clocks = node_clocks(ing, &boot_node, file_node);
        let shared = node_shared(ing, &boot_node, &shared);
        Plan {
            ing,
            opts,
            boots,
            own,
            boot_node,
            clocks,
            shared,
            no_traces: Traces::read(std::iter::empty()),
            no_clocks: ClockSamples::default(),
        }
    }

    fn node_of(&self, k: usize) -> Option<NodeId> {
        self.boot_node.get(k).cloned().flatten()
    }

    /// The single-boot report of boot `k`, its trace read with `trace_shift_h` (`None`:
    /// the options', else inferred).
    fn report(&self, k: usize, trace_shift_h: Option<i64>) -> Report {
        let ing = self.ing;
        let node = self.node_of(k);
        let (guest, traces) = self
            .shared
            .get(&node)
            .map_or((&[][..], &self.no_traces), |(g, t)| (g.as_slice(), t));
        let sel = self.boots.fleet_records(
            ing,
            k,
            self.own.get(k).map_or(&[][..], Vec::as_slice),
            guest,
            traces,
            self.clocks.get(&node).unwrap_or(&self.no_clocks),
        );
        let mut r = crate::analyze::analyze(
            &sel,
            &ClockOptions {
                trace_shift_h: trace_shift_h.or(self.opts.clocks.trace_shift_h),
                ..self.opts.clocks
            },
        );
        if let (Some(b), Some(nd)) = (r.boot.as_mut(), &node) {
            b.node = Some(nd.name(ing));
        }
        r
    }

    /// Boot `k` analyzed and reduced to its row (or why it shows no boot) and what its
    /// trace said.
    fn row(&self, k: usize, shift: Option<i64>) -> Analyzed {
        let r = self.report(k, shift);
        let mine = self.own_events(k);
        let shown = if !shows_boot(&r, |s| is_among(&mine, s)) {
            let b = r.boot.as_ref();
            Err(NoBoot {
                node: b.and_then(|b| b.node.clone()),
                sandbox: r.sandbox.clone(),
                shim_pid: b.and_then(|b| b.shim_pid),
                lines: b.map_or(0, |b| b.lines),
            })
        } else {
            Ok(row(&r))
        };
        Analyzed {
            shown,
            calls: r.pin_summary.calls,
            aligned: r.clocks.trace_shift_aligned,
            expected: r.clocks.trace_shift_expected,
            fit: r.clocks.trace_fit,
            shift: r.clocks.trace_shift_h,
        }
    }

    /// Boot `k`'s own events, in file order.
    fn own_events(&self, k: usize) -> Vec<&'a crate::parse::ingest::Event> {
        self.own
            .get(k)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.ing.events.get(i as usize))
            .collect()
    }

    /// Decides each node's trace shift ([`Vote`]) and gives every boot read with another
    /// its reading with the node's.
    ///
    /// A node's host trace has one clock. A boot whose own pins are not in the trace (it was
    /// not traced) may find another VM's pins hours away that a whole-hour shift puts inside
    /// its time window. Every boot of a node is also read with each shift the node's boots
    /// with calls read the trace with, and the node takes the one under which all its boots
    /// together have the most evidence.
    fn settle_trace_shifts(&self, done: &mut [Analyzed]) -> ByNode<i64> {
        let candidates = self.shift_candidates(done);
        let others: Vec<(usize, Option<i64>)> = done
            .iter()
            .enumerate()
            .flat_map(|(k, a)| {
                let own = a.read_with();
                candidates
                    .get(&self.node_of(k))
                    .into_iter()
                    .flatten()
                    .filter(move |&&c| c != own)
                    .map(move |&c| (k, Some(c)))
            })
            .collect();
        let mut at_other: HashMap<(usize, i64), Analyzed> = others
            .iter()
            .map(|&(k, c)| (k, c.unwrap_or(0)))
            .zip(parallel(&others, self.opts.threads, &|k, shift| {
                self.row(k, shift)
            }))
            .collect();
        let node_shift = self.vote(&candidates, done, &at_other);
        let forced = |k: usize| node_shift.get(&self.node_of(k)).copied();
        let again: Vec<(usize, Option<i64>)> = done
            .iter()
            .enumerate()
            .filter_map(|(k, a)| {
                let want = forced(k)?;
                (a.read_with() != want).then_some((k, Some(want)))
            })
            .collect();
        // every boot was read with each of its node's candidates, the winner among them
        for (k, c) in again {
            if let (Some(slot), Some(a)) = (done.get_mut(k), at_other.remove(&(k, c.unwrap_or(0))))
            {
                *slot = a;
            }
        }
        node_shift
    }

    /// Per node, the shifts its boots with pin calls read the trace with, and no shift (none
    /// when the options set the shift). No shift is always a candidate: a node whose only
    /// boot with calls found them hours away (its own boot, traced, showed no GPU enable to
    /// line its pins up with) keeps the trace's clock unless that shift explains more.
    fn shift_candidates(&self, done: &[Analyzed]) -> ByNode<BTreeSet<i64>> {
        let mut candidates: ByNode<BTreeSet<i64>> = HashMap::new();
        if self.opts.clocks.trace_shift_h.is_none() {
            for (k, a) in done.iter().enumerate() {
                if a.calls > 0 {
                    let c = candidates.entry(self.node_of(k)).or_default();
                    c.insert(a.read_with());
                    c.insert(0);
                }
            }
        }
        candidates
    }

    /// Each node's shift: the candidate with the most evidence over all the node's boots,
    /// as first read (`done`) and read with the other candidates (`at_other`).
    fn vote(
        &self,
        candidates: &ByNode<BTreeSet<i64>>,
        done: &[Analyzed],
        at_other: &HashMap<(usize, i64), Analyzed>,
    ) -> ByNode<i64> {
        let mut votes: ByNode<BTreeMap<i64, Vote>> = HashMap::new();
        let read = done
            .iter()
            .enumerate()
            .map(|(k, a)| (k, a.read_with(), a))
            .chain(at_other.iter().map(|(&(k, c), a)| (k, c, a)));
        for (k, shift, a) in read {
            let node = self.node_of(k);
            if candidates.get(&node).is_some_and(|c| c.contains(&shift)) {
                let v = votes.entry(node).or_default().entry(shift).or_default();
                v.aligned += a.aligned;
                v.expected |= a.expected;
                v.fit += a.fit.0;
                v.misfit += a.fit.1;
            }
        }
        votes
            .into_iter()
            .filter_map(|(n, v)| Some((n, v.into_iter().max_by_key(|(k, v)| v.key(*k))?.0)))
            .collect()
    }

    /// The reports of the boots the HTML page charts: the slowest, and the first
    /// incomplete, each read with its node's trace shift.
    fn charts(
        &self,
        fleet: &Fleet,
        boot_of_row: &[usize],
        node_shift: &ByNode<i64>,
    ) -> BTreeMap<usize, Report> {
        let charted: Vec<usize> = fleet
            .slowest
            .iter()
            .chain(fleet.incomplete.iter().take(CHARTED_INCOMPLETE))
            .copied()
            .collect();
        let jobs: Vec<(usize, Option<i64>)> = charted
            .iter()
            .filter_map(|&i| {
                boot_of_row
                    .get(i)
                    .map(|&k| (k, node_shift.get(&self.node_of(k)).copied()))
            })
            .collect();
        charted
            .iter()
            .copied()
            .zip(parallel(&jobs, self.opts.threads, &|k, shift| {
                self.report(k, shift)
            }))
            .collect()
    }
}

/// Whether line `s` is one of `own`, a boot's own events in file order. A boot is shown by
/// its own lines: its node's pin trace or `kubectl describe` alone would turn any sandbox
/// whose time window they fall in into a boot. The lines of a run are in file order too
/// (nothing comes between them): a line is found by bisection.
fn is_among(own: &[&crate::parse::ingest::Event], s: crate::parse::ingest::SrcRef) -> bool {
    let at = own.partition_point(|e| (e.src.file, e.src.line) <= (s.file, s.line));
    let Some(e) = at.checked_sub(1).and_then(|i| own.get(i)) else {
        return false;
    };
    e.src.file == s.file
        && (e.src.line == s.line
            || matches!(&e.body, crate::parse::ingest::Body::AgentRun(r)
                if r.lines.binary_search_by_key(&s.line, |l| l.line).is_ok()))
}

/// How many boots that did not complete the HTML page charts.
pub const CHARTED_INCOMPLETE: usize = 10;

/// One boot analyzed: its row (or why it shows no boot), and what its trace said.
struct Analyzed {
    shown: Result<BootRow, NoBoot>,
    /// This VM's pin calls found in the trace.
    calls: u64,
    /// Heavy pins its inferred trace shift lines up with its GPU enables.
    aligned: usize,
    /// That shift is 0 or undoes the journal's zone (expected without evidence).
    expected: bool,
    /// Its VM's calls that fit its boot, and those that do not.
    fit: (u64, u64),
    /// The whole-hour shift its trace was read with.
    shift: Option<i64>,
}

impl Analyzed {
    /// The whole-hour shift its trace was read with (0: none).
    fn read_with(&self) -> i64 {
        self.shift.unwrap_or(0)
    }
}

/// The evidence for one whole-hour trace shift of a node, summed over its boots read with
/// it.
#[derive(Default)]
struct Vote {
    /// Heavy pins the shift lines up with the boots' GPU enables (a QEMU pins a GPU's BARs
    /// as the guest enables it: calls that merely fall inside a window are weak evidence).
    aligned: usize,
    /// The shift is none, or the one that undoes the journal's zone (expected without
    /// evidence).
    expected: bool,
    /// Calls that fit where a QEMU pins (RAM before the guest kernel, a hotplug the guest
    /// onlined, BARs at enables) and those that fit nowhere.
    fit: u64,
    misfit: u64,
}

impl Vote {
    /// Greater is better: the calls the shift explains less those it leaves unexplained,
    /// over all the node's boots (under the true clock a traced boot's calls all fit, and
    /// the foreign calls a wrong shift brings into an untraced boot's window mostly fit
    /// nothing; summing over every boot read with every candidate keeps one boot's lucky
    /// alignment from outvoting the others' evidence), then the heavy pins at enables,
    /// then an expected shift, then the smaller one.
    fn key(&self, k: i64) -> impl Ord {
        (
            self.fit as i64 - self.misfit as i64,
            self.aligned,
            self.expected,
            std::cmp::Reverse(k.abs()),
        )
    }
}

/// Run `f` on each job on `threads` threads (`None`: one per CPU); results in job order.
fn parallel<T, F>(jobs: &[(usize, Option<i64>)], threads: Option<usize>, f: &F) -> Vec<T>
where
    T: Send,
    F: Fn(usize, Option<i64>) -> T + Sync,
{
    let n = jobs.len();
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, n.max(1));
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done: Vec<(usize, T)> = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(k, shift)) = jobs.get(i) else {
                break;
            };
            done.push((i, f(k, shift)));
        }
        done
    };
    let mut out: Vec<(usize, T)> = if threads == 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    // a thread that panicked left its jobs out: run them here
    if out.len() < n {
        let have: std::collections::HashSet<usize> = out.iter().map(|(i, _)| *i).collect();
        for (i, &(k, shift)) in jobs.iter().enumerate() {
            if !have.contains(&i) {
                out.push((i, f(k, shift)));
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Seconds of phase `kind` in `r`, and whether it is counted in the fleet's percentiles.
pub fn counted(r: &Report, kind: &str) -> PhaseCell {
    let inst: Vec<&crate::analyze::model::Phase> =
        r.phases.iter().filter(|p| p.name == kind).collect();
    if inst.is_empty() {
        return PhaseCell {
            s: None,
            n: 0,
            counted: false,
            excluded: Some(Excluded::Missing),
        };
    }
    let s: f64 = inst.iter().map(|p| p.duration_s).sum();
    let late = !r.state.started_late.is_empty();
    let status = r.state.status;
    let end = inst.iter().map(|p| p.end_ns).max().unwrap_or(0);
    let closed = r.phases.iter().any(|p| p.name != kind && p.start_ns >= end);
    let why = if inst.iter().any(|p| p.estimated) {
        Some(Excluded::Estimated)
    } else {
        let cut = crate::analyze::state::cut_by_late_start(kind, late, r.cdi.as_ref());
        match kind {
            // the single-boot report says "at least" of these (`Phase::at_least`)
            "vm_create" | "kernel_boot" | "pci_enumeration" | "dma_pinning" if cut => {
                Some(Excluded::StartedLate)
            }
            // (a boot stopped before its container started ended early too)
            "dma_pinning" if status == "unfinished" || status == "stopped" => {
                Some(Excluded::EndedEarly)
            }
            "gpu_driver_init" if inst.len() < r.gpu_count.unwrap_or(0) => Some(Excluded::Partial),
            // a log that ends early may end while the last GPU's BAR is still being pinned
            // (its bind already logged): only the CDI specs appearing, which waits for
            // every GPU, shows the driver was done
            "gpu_driver_init"
                if (status == "unfinished" || status == "stopped")
                    && !r.cdi.as_ref().is_some_and(|c| c.resolved) =>
            {
                Some(Excluded::EndedEarly)
            }
            "cdi_wait" if !r.cdi.as_ref().is_some_and(|c| c.resolved) => Some(Excluded::Unresolved),
            "cdi_wait" if cut => Some(Excluded::StartedLate),
            // untraced, a memory hotplug is its guest side only (`Phase::at_least`)
            "memory_hotplug" if inst.iter().any(|p| p.at_least) => Some(Excluded::Untraced),
            "pci_enumeration" | "memory_hotplug" if status != "complete" && !closed => {
                Some(Excluded::NotClosed)
            }
            _ => None,
        }
    };
    PhaseCell {
        s: Some(round3(s)),
        n: inst.len(),
        counted: why.is_none(),
        excluded: why,
    }
}

/// Whether a report shows a boot of its own: a failure, or a phase that one of the boot's
/// own lines (`own`: the lines that name its sandbox) opens or closes. Phases read from its
/// node's host traces, `kubectl describe` or other lines that name no sandbox do not count:
/// they would make a boot of every sandbox whose time window they fall in (a VM already
/// running when the log starts). A report that shows none is a sandbox without a boot
/// (`no_boot`), not a row.
pub fn shows_boot(r: &Report, own: impl Fn(crate::parse::ingest::SrcRef) -> bool) -> bool {
    r.state.failure.is_some()
        || r.phases
            .iter()
            .any(|p| p.start_src.into_iter().chain(p.end_src).any(&own))
}

/// What a RAM pinning pace says about page size.
fn page_size(r: &Report) -> (Option<&'static str>, Option<String>) {
    let ps = &r.pin_summary;
    match (ps.ram_backing, ps.ram_s_per_gib) {
        (Some(b), Some(rate)) => {
            let size = if b.starts_with("small pages") {
                "4K"
            } else {
                "hugepages"
            };
            (
                Some(size),
                Some(format!("RAM pinned at {rate:.4} s/GiB ({b})")),
            )
        }
        _ => (None, None),
    }
}

/// The row of one boot's report (its slow phase is filled in once the fleet's medians are
/// known).
pub fn row(r: &Report) -> BootRow {
    let b = r.boot.as_ref();
    let complete = r.state.status == "complete" && r.state.started_late.is_empty();
    let (page_size, page_size_from) = page_size(r);
    let first = r.findings.first();
    BootRow {
        node: b.and_then(|b| b.node.clone()),
        sandbox: r.sandbox.clone(),
        shim_pid: b.and_then(|b| b.shim_pid),
        boot: b.map_or(1, |b| b.boot),
        start: r.t0.clone(),
        gpus: r.gpu_count,
        page_size,
        page_size_from,
        state: r.state.status,
        failure_step: r.state.failure.as_ref().map(|f| f.step),
        started_late: !r.state.started_late.is_empty(),
        total_s: r.total_s.filter(|_| complete).map(round3),
        span_s: r.total_s.map(round3),
        total_from: r.total_from,
        phases: PHASES.iter().map(|k| (*k, counted(r, k))).collect(),
        slow_phase: None,
        finding: first.map(|f| f.text.clone()),
        finding_phase: first.map(|f| f.phase),
        fix: first.map(|f| f.fix.clone()),
        fixes_save_s: r.fixes_save_s.map(round3),
    }
}

/// The value at percentile `p` of sorted `v` (nearest rank: the smallest value with at
/// least `p`% of the values at or below it).
pub fn nearest_rank(v: &[f64], p: u32) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = (f64::from(p) / 100.0 * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len()) - 1).copied()
}

fn empty_stats(phase: &'static str) -> PhaseStats {
    PhaseStats {
        phase,
        n: 0,
        excluded: BTreeMap::new(),
        min: None,
        p50: None,
        p90: None,
        p99: None,
        max: None,
        mean: None,
    }
}

/// Percentiles of the counted values, and the others counted by reason.
pub fn stats<'a>(
    phase: &'static str,
    cells: impl Iterator<Item = (Option<f64>, Option<Excluded>)> + 'a,
) -> PhaseStats {
    let mut st = empty_stats(phase);
    let mut v: Vec<f64> = Vec::new();
    for (s, why) in cells {
        match (s, why) {
            (Some(s), None) => v.push(s),
            (_, Some(w)) => *st.excluded.entry(w.as_str()).or_default() += 1,
            (None, None) => *st.excluded.entry(Excluded::Missing.as_str()).or_default() += 1,
        }
    }
    v.sort_by(f64::total_cmp);
    st.n = v.len();
    st.min = v.first().copied();
    st.max = v.last().copied();
    st.p50 = nearest_rank(&v, 50);
    st.p90 = nearest_rank(&v, 90);
    st.p99 = nearest_rank(&v, 99);
    st.mean = (!v.is_empty()).then(|| round3(v.iter().sum::<f64>() / v.len() as f64));
    st
}

fn total_cell(r: &BootRow) -> (Option<f64>, Option<Excluded>) {
    match r.total_s {
        Some(t) => (Some(t), None),
        None => (None, Some(Excluded::NotComplete)),
    }
}

fn phase_cell(r: &BootRow, kind: &str) -> (Option<f64>, Option<Excluded>) {
    match r.phases.get(kind) {
        Some(c) => (c.s, c.excluded),
        None => (None, Some(Excluded::Missing)),
    }
}

fn summarize(f: &mut Fleet, top: usize) {
    f.phases = PHASES
        .iter()
        .map(|k| stats(k, f.rows.iter().map(|r| phase_cell(r, k))))
        .collect();
    f.total = stats("total", f.rows.iter().map(total_cell));
    let medians: HashMap<&str, f64> = f
        .phases
        .iter()
        .filter_map(|s| Some((s.phase, s.p50?)))
        .collect();
    for r in &mut f.rows {
        r.slow_phase = r
            .phases
            .iter()
            .filter(|(_, c)| c.counted)
            .filter_map(|(k, c)| {
                let (s, m) = (c.s?, *medians.get(k)?);
                Some(SlowPhase {
                    phase: k,
                    s,
                    median_s: m,
                    over_median_s: round3(s - m),
                })
            })
            .filter(|sp| sp.over_median_s > 0.0)
            .max_by(|a, b| a.over_median_s.total_cmp(&b.over_median_s));
    }
    let mut complete: Vec<usize> = (0..f.rows.len())
        .filter(|&i| f.rows.get(i).is_some_and(|r| r.total_s.is_some()))
        .collect();
    complete.sort_by(|&a, &b| {
        let t = |i: usize| f.rows.get(i).and_then(|r| r.total_s).unwrap_or(0.0);
        t(b).total_cmp(&t(a)).then(a.cmp(&b))
    });
    complete.truncate(top);
    f.slowest = complete;
    f.incomplete = (0..f.rows.len())
        .filter(|&i| f.rows.get(i).is_some_and(|r| r.total_s.is_none()))
        .collect();
    for r in &f.rows {
        *f.states.entry(r.state).or_default() += 1;
        f.started_late += usize::from(r.started_late);
        if let Some(n) = &r.node {
            if !f.nodes.contains(n) {
                f.nodes.push(n.clone());
            }
        }
    }
    f.groups = ["node", "gpus", "page_size"]
        .iter()
        .flat_map(|by| groups(&f.rows, by))
        .collect();
}

fn group_key(r: &BootRow, by: &str) -> Option<String> {
    match by {
        "node" => r.node.clone(),
        "gpus" => r.gpus.map(|g| g.to_string()),
        _ => r.page_size.map(str::to_string),
    }
}

fn groups(rows: &[BootRow], by: &'static str) -> Vec<Group> {
    let mut keys: Vec<Option<String>> = Vec::new();
    for r in rows {
        let k = group_key(r, by);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if by == "gpus" {
        keys.sort_by_key(|k| k.as_deref().and_then(|s| s.parse::<usize>().ok()));
    }
    keys.into_iter()
        .map(|key| {
            let mine: Vec<&BootRow> = rows.iter().filter(|r| group_key(r, by) == key).collect();
            let mut states = BTreeMap::new();
            for r in &mine {
                *states.entry(r.state).or_default() += 1;
            }
            let phase_p50: BTreeMap<&'static str, Option<f64>> = PHASES
                .iter()
                .map(|k| (*k, stats(k, mine.iter().map(|r| phase_cell(r, k))).p50))
                .collect();
            let largest_phase = phase_p50
                .iter()
                .filter(|(k, _)| **k != "dma_pinning")
                .filter_map(|(k, v)| Some((*k, (*v)?)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, _)| k);
            Group {
                by,
                key,
                boots: mine.len(),
                states,
                started_late: mine.iter().filter(|r| r.started_late).count(),
                total: stats("total", mine.iter().map(|r| total_cell(r))),
                phase_p50,
                largest_phase,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 50), Some(5.0));
        assert_eq!(nearest_rank(&v, 90), Some(9.0));
        assert_eq!(nearest_rank(&v, 99), Some(10.0));
        assert_eq!(nearest_rank(&[3.0], 50), Some(3.0));
        assert_eq!(nearest_rank(&[], 50), None);
        let s = stats(
            "x",
            [
                (Some(2.0), None),
                (None, Some(Excluded::Missing)),
                (Some(9.0), Some(Excluded::Estimated)),
                (Some(1.0), None),
            ]
            .into_iter(),
        );
        assert_eq!((s.n, s.min, s.max), (2, Some(1.0), Some(2.0)));
        assert_eq!(s.excluded.get("missing"), Some(&1));
        assert_eq!(s.excluded.get("estimated"), Some(&1));
    }
}
