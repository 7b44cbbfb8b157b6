//! From parsed events to a boot timeline: clocks aligned on the host axis, named phases with
//! their source lines, the critical path, and findings with the fix each points to.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::agent::{devpath_bdf, AgentKind};
use crate::bpftrace::BpfLine;
use crate::dmesg::{is_gpu_class, KernelKind};
use crate::ftrace::FtraceLine;
use crate::ingest::{Body, Event, Ingest, SrcRef, Stats};
use crate::kubectl::KubectlLine;
use crate::time::{format_rfc3339, Nanos, NS_PER_S};

/// The Kata agent's CDI retry limit printed in its messages is the default when none is seen.
pub const DEFAULT_CDI_MAX_TRIES: u32 = 100;
/// VFIO type1 `dma_entry_limit` default (drivers/vfio/vfio_iommu_type1.c).
pub const DMA_ENTRY_LIMIT: u64 = 65_535;
/// Pin calls shorter than this are counted but not drawn as phases.
pub const PIN_PHASE_MIN_S: f64 = 0.010;

/// A named interval on the host time axis.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `vm_create`, `kernel_boot`, `pci_enumeration`, `gpu_driver_init`, `dma_pinning`,
    /// `cdi_wait`, `memory_hotplug`, `container_start`.
    pub name: &'static str,
    /// Short label: the GPU for per-GPU phases, the size for pin calls.
    pub label: String,
    pub gpu: Option<String>,
    /// Seconds from the timeline origin (`t0`).
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    #[serde(skip)]
    pub start_ns: Nanos,
    #[serde(skip)]
    pub end_ns: Nanos,
    /// `file:line` of the lines that open and close the phase.
    pub start_line: Option<String>,
    pub end_line: Option<String>,
    #[serde(skip)]
    pub start_src: Option<SrcRef>,
    #[serde(skip)]
    pub end_src: Option<SrcRef>,
    /// The end is inferred (no closing line was seen), not read.
    pub estimated: bool,
    pub detail: String,
}

/// One host-side `vfio_pin_pages_remote` call (bpftrace) or function_graph record.
#[derive(Debug, Clone, Serialize)]
pub struct PinCall {
    pub start_s: Option<f64>,
    pub duration_s: f64,
    pub bytes: Option<u64>,
    pub npage: Option<u64>,
    /// bytes / npage: the host page size the pin walked.
    pub page_size: Option<u64>,
    /// The GPU whose driver was enabling when the call started.
    pub gpu: Option<String>,
    /// `bar` (size equals a GPU BAR), `ram`, or `unknown`.
    pub kind: &'static str,
    pub source: &'static str,
    pub line: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    pub bdf: String,
    pub vendor_id: String,
    pub device_id: String,
    /// Largest BAR seen (bytes).
    pub largest_bar: Option<u64>,
    pub found_s: Option<f64>,
    pub driver_init_s: Option<f64>,
    /// Sum of the pin calls joined to this GPU.
    pub pin_s: f64,
}

/// How the clocks were put on one axis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Clocks {
    /// Guest boot instant (host axis), RFC 3339.
    pub guest_boot: Option<String>,
    /// `host` (console lines carry host times), `agent-order` (kernel/agent interleaving),
    /// or `none` (kernel times shown relative to guest boot).
    pub guest_boot_from: &'static str,
    /// host − agent clock, seconds (minimum over paired lines; negative: agent ahead).
    pub agent_offset_s: Option<f64>,
    /// Largest delay between the guest printing a console line and the host logging it.
    pub max_console_delay_s: Option<f64>,
    /// Lines whose own clock disagreed with the host by more than 1 s (host time used).
    pub disagreements: u64,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriticalStep {
    pub phase: &'static str,
    pub label: String,
    pub start_s: f64,
    pub duration_s: f64,
    /// Gap from the previous step's end (idle or unexplained time).
    pub gap_before_s: f64,
    /// Phases nested inside this one (name, label, seconds).
    pub contains: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub phase: &'static str,
    pub measured_s: f64,
    pub text: String,
    pub fix: String,
    /// Seconds the fix would take off this phase, by the estimator's constants.
    pub saving_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PinSummary {
    pub calls: u64,
    pub total_s: f64,
    pub heavy_calls: u64,
    pub bytes: u64,
    /// bpftrace `@hist` buckets as printed (ms), summed over hist blocks.
    pub hist: Vec<(u64, u64, u64)>,
    pub ftrace_calls: u64,
    pub ftrace_heavy: Vec<f64>,
    pub map_ioctls: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub sandbox: Option<String>,
    pub other_sandboxes: Vec<String>,
    pub files: Vec<String>,
    /// Timeline origin, RFC 3339 (or `guest boot` when only guest-relative times exist).
    pub t0: String,
    pub total_s: f64,
    /// `kubectl` (Start Time → Started) or `timeline` (first to last phase).
    pub total_from: &'static str,
    pub gpus: Vec<Gpu>,
    pub phases: Vec<Phase>,
    pub pins: Vec<PinCall>,
    pub pin_summary: PinSummary,
    pub cdi: Option<CdiSummary>,
    pub critical_path: Vec<CriticalStep>,
    pub findings: Vec<Finding>,
    /// The findings' savings added up (`null` when none names one): the most the fixes
    /// together take off `total_s` (all of it where the phases they shorten are critical).
    pub fixes_save_s: Option<f64>,
    pub clocks: Clocks,
    pub stats: Stats,
}

#[derive(Debug, Clone, Serialize)]
pub struct CdiSummary {
    pub tries: u32,
    pub max_tries: u32,
    pub interval_s: Option<f64>,
    /// max_tries × interval: when the agent would give up at this pace.
    pub limit_s: Option<f64>,
    pub devices: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("no boot events found ({lines} lines read, {bad} bad)")]
    NoEvents { lines: u64, bad: u64 },
    #[error("sandbox {0:?} not found in the journal (seen: {1})")]
    NoSandbox(String, String),
}

fn src_str(files: &[String], s: &SrcRef) -> String {
    format!(
        "{}:{}",
        files.get(s.file as usize).map_or("?", String::as_str),
        s.line
    )
}

/// Pick the sandbox to report: the requested one, else the one with most events.
fn choose_sandbox(ing: &Ingest, want: Option<&str>) -> Result<Option<u32>, TimelineError> {
    if ing.sandboxes.is_empty() {
        return Ok(None);
    }
    if let Some(w) = want {
        let hits: Vec<u32> = ing
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.starts_with(w))
            .map(|(i, _)| i as u32)
            .collect();
        return match hits.as_slice() {
            [i] => Ok(Some(*i)),
            _ => Err(TimelineError::NoSandbox(
                w.to_string(),
                ing.sandboxes.join(", "),
            )),
        };
    }
    let mut counts: HashMap<u32, u64> = HashMap::new();
    for e in &ing.events {
        if let Some(s) = e.sandbox {
            *counts.entry(s).or_default() += 1;
        }
    }
    Ok(counts
        .into_iter()
        .max_by_key(|(i, c)| (*c, u32::MAX - i))
        .map(|(i, _)| i))
}

struct Aligner {
    boot: Option<Nanos>,
    agent_offset: i64,
}

impl Aligner {
    fn kernel(&self, t: f64) -> Option<Nanos> {
        self.boot.map(|b| b.saturating_add(secs_ns(t)))
    }
    fn agent(&self, ts: Nanos) -> Nanos {
        ts + self.agent_offset
    }
}

fn align(events: &[&Event], clocks: &mut Clocks) -> Aligner {
    // agent clock vs host: min(host - ts) over paired lines
    let mut agent_off: Option<i64> = None;
    let mut boot_host: Option<Nanos> = None;
    for e in events {
        match (&e.body, e.host) {
            (Body::Agent(a), Some(h)) => {
                let d = h.saturating_sub(a.ts);
                agent_off = Some(agent_off.map_or(d, |o: i64| o.min(d)));
            }
            (Body::Kernel(k), Some(h)) => {
                let b = h.saturating_sub(secs_ns(k.t));
                boot_host = Some(boot_host.map_or(b, |o: i64| o.min(b)));
            }
            _ => {}
        }
    }
    clocks.agent_offset_s = agent_off.map(|o| o as f64 / 1e9);
    if let Some(o) = agent_off {
        if o < -NS_PER_S / 1000 {
            clocks.notes.push(format!(
                "the kata-agent clock ran {:.3} s ahead of the host; agent times were moved onto the host clock",
                -o as f64 / 1e9
            ));
        } else if o > NS_PER_S / 10 {
            clocks.notes.push(format!(
                "kata-agent records reached the host at least {:.3} s after their own timestamps (clock behind or console delay); host time used",
                o as f64 / 1e9
            ));
        }
    }
    let agent_offset = agent_off.unwrap_or(0);
    let mut boot = boot_host;
    clocks.guest_boot_from = if boot.is_some() { "host" } else { "none" };
    if boot.is_none() {
        // order constraints between kernel and agent lines of the same file
        let mut upper: Option<Nanos> = None;
        let mut lower: Option<Nanos> = None;
        let mut max_t: HashMap<u32, f64> = HashMap::new();
        for e in events {
            match &e.body {
                Body::Kernel(k) => {
                    let m = max_t.entry(e.src.file).or_insert(k.t);
                    *m = m.max(k.t);
                }
                Body::Agent(a) => {
                    if let Some(t) = max_t.get(&e.src.file) {
                        let u =
                            a.ts.saturating_add(agent_offset)
                                .saturating_sub(secs_ns(*t));
                        upper = Some(upper.map_or(u, |x: i64| x.min(u)));
                    }
                }
                _ => {}
            }
        }
        let mut min_t: HashMap<u32, f64> = HashMap::new();
        for e in events.iter().rev() {
            match &e.body {
                Body::Kernel(k) => {
                    let m = min_t.entry(e.src.file).or_insert(k.t);
                    *m = m.min(k.t);
                }
                Body::Agent(a) => {
                    if let Some(t) = min_t.get(&e.src.file) {
                        let l =
                            a.ts.saturating_add(agent_offset)
                                .saturating_sub(secs_ns(*t));
                        lower = Some(lower.map_or(l, |x: i64| x.max(l)));
                    }
                }
                _ => {}
            }
        }
        boot = match (lower, upper) {
            (Some(l), Some(u)) if l > u => {
                clocks.notes.push(format!(
                    "kernel and agent lines interleave inconsistently by {:.3} s; guest boot placed by the tighter bound",
                    (l - u) as f64 / 1e9
                ));
                Some(u)
            }
            (_, Some(u)) => Some(u),
            (Some(l), None) => Some(l),
            (None, None) => None,
        };
        if boot.is_some() {
            clocks.guest_boot_from = "agent-order";
        }
    }
    // console delays: host time vs the line's own (aligned) time
    let al = Aligner { boot, agent_offset };
    let mut max_delay: Option<f64> = None;
    for e in events {
        let own = match &e.body {
            Body::Kernel(k) => al.kernel(k.t),
            Body::Agent(a) => Some(al.agent(a.ts)),
            _ => None,
        };
        if let (Some(h), Some(o)) = (e.host, own) {
            let d = secs(h, o);
            max_delay = Some(max_delay.map_or(d, |m: f64| m.max(d)));
            if d > 1.0 {
                clocks.disagreements += 1;
            }
        }
    }
    clocks.max_console_delay_s = max_delay;
    if clocks.disagreements > 0 {
        clocks.notes.push(format!(
            "{} console lines reached the host more than 1 s after the guest printed them (up to {:.3} s); host time wins for the phase boundaries",
            clocks.disagreements,
            max_delay.unwrap_or(0.0)
        ));
    }
    let has_kernel = events.iter().any(|e| matches!(e.body, Body::Kernel(_)));
    let mut al = al;
    if al.boot.is_none() && has_kernel {
        let absolute = events.iter().any(|e| {
            e.host.is_some()
                || matches!(
                    &e.body,
                    Body::Agent(_)
                        | Body::Kube(_)
                        | Body::Bpf(
                            BpfLine::PinCall { ts: Some(_), .. }
                                | BpfLine::PinTook { ts: Some(_), .. }
                        )
                )
        });
        if absolute {
            clocks.notes.push(
                "guest kernel lines could not be placed on the host clock (no console lines with host times, no agent records): they are left out; add the containerd journal".into(),
            );
        } else {
            // kernel lines only: a guest-relative axis
            al.boot = Some(0);
        }
    } else {
        clocks.guest_boot = al.boot.map(format_rfc3339);
    }
    al
}

/// (start, seconds, npage, bytes, call line, source, return line)
type RawPin = (
    Option<Nanos>,
    f64,
    Option<u64>,
    Option<u64>,
    SrcRef,
    &'static str,
    SrcRef,
);

/// A point on the host axis with where it came from.
#[derive(Debug, Clone, Copy)]
struct Mark {
    t: Nanos,
    src: SrcRef,
}

struct PhaseBuilder<'a> {
    files: &'a [String],
    phases: Vec<Phase>,
}

impl PhaseBuilder<'_> {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        name: &'static str,
        label: String,
        gpu: Option<String>,
        a: Mark,
        b_t: Nanos,
        b_src: Option<SrcRef>,
        estimated: bool,
        detail: String,
    ) {
        let end = b_t.max(a.t);
        self.phases.push(Phase {
            name,
            label,
            gpu,
            start_s: 0.0,
            end_s: 0.0,
            duration_s: secs(end, a.t),
            start_ns: a.t,
            end_ns: end,
            start_line: Some(src_str(self.files, &a.src)),
            end_line: b_src.map(|s| src_str(self.files, &s)),
            start_src: Some(a.src),
            end_src: b_src,
            estimated,
            detail,
        });
    }
}

/// Seconds → nanoseconds, saturating (input-derived values may be huge).
fn secs_ns(s: f64) -> i64 {
    (s * 1e9) as i64
}

/// (a − b) in seconds without overflow.
fn secs(a: Nanos, b: Nanos) -> f64 {
    (i128::from(a) - i128::from(b)) as f64 / 1e9
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// Build the report for one sandbox (the requested one, or the busiest).
pub fn build(ing: &Ingest, sandbox: Option<&str>) -> Result<Report, TimelineError> {
    let chosen = choose_sandbox(ing, sandbox)?;
    let events: Vec<&Event> = ing
        .events
        .iter()
        .filter(|e| e.sandbox.is_none() || e.sandbox == chosen)
        .collect();
    if events.is_empty() {
        return Err(TimelineError::NoEvents {
            lines: ing.stats.lines,
            bad: ing.stats.bad.total(),
        });
    }
    let files = &ing.files;
    let mut clocks = Clocks::default();
    let al = align(&events, &mut clocks);

    // ---- collect marks -------------------------------------------------------------
    let mut first_kernel: Option<Mark> = None;
    let mut run_init: Option<Mark> = None;
    let mut first_agent: Option<Mark> = None;
    let mut first_host: Option<Mark> = None;
    let mut last_any: Option<Mark> = None;
    let mut first_any: Option<Mark> = None;
    let mut gpus: BTreeMap<String, (u16, u16, Option<Mark>)> = BTreeMap::new();
    let mut gpu_order: Vec<String> = Vec::new();
    let mut bars: HashMap<String, u64> = HashMap::new();
    let mut pci_last: Option<Mark> = None;
    let mut enables: Vec<(String, Mark)> = Vec::new();
    let mut binds: HashMap<String, Mark> = HashMap::new();
    let mut cdi_waits: Vec<(u32, u32, u32, Mark)> = Vec::new();
    let mut cdi_done: Option<Mark> = None;
    let mut mem_uevents: Vec<Mark> = Vec::new();
    let mut rpcs: Vec<(String, Mark)> = Vec::new();
    let mut nvrm_fbhub: Vec<Mark> = Vec::new();
    let mut kube_start: Option<Mark> = None;
    let mut kube_started: Option<Mark> = None;
    let mut pin_open: Vec<(Option<Nanos>, u64, u64, SrcRef)> = Vec::new();
    let mut raw_pins: Vec<RawPin> = Vec::new();
    let mut hist: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut ftrace_calls = 0u64;
    let mut ftrace_heavy = Vec::new();
    let mut ftrace_stack: HashMap<u32, Vec<String>> = HashMap::new();
    let mut map_ioctls = 0u64;

    let note = |m: Mark, slot: &mut Option<Mark>| {
        if slot.is_none_or(|s| m.t < s.t) {
            *slot = Some(m);
        }
    };
    for e in &events {
        let at: Option<Nanos> = match &e.body {
            Body::Kernel(k) => al.kernel(k.t).or(e.host),
            Body::Agent(a) => Some(al.agent(a.ts)),
            Body::Host { .. } => e.host,
            Body::Bpf(
                BpfLine::PinCall { ts, .. }
                | BpfLine::PinTook { ts, .. }
                | BpfLine::MapIoctl { ts, .. },
            ) => *ts,
            Body::Kube(KubectlLine::StartTime(t) | KubectlLine::Started(t)) => Some(*t),
            _ => None,
        };
        let mark = at.map(|t| Mark { t, src: e.src });
        if let Some(m) = mark {
            if !matches!(e.body, Body::Kube(_)) {
                if last_any.is_none_or(|l| m.t > l.t) {
                    last_any = Some(m);
                }
                if first_any.is_none_or(|f| m.t < f.t) {
                    first_any = Some(m);
                }
            }
        }
        match &e.body {
            Body::Host { .. } => {
                if let Some(m) = mark {
                    note(m, &mut first_host);
                }
            }
            Body::Kernel(k) => {
                let Some(m) = mark else { continue };
                note(m, &mut first_kernel);
                match &k.kind {
                    KernelKind::RunInit => note(m, &mut run_init),
                    KernelKind::PciFound {
                        bdf,
                        vendor,
                        device,
                        class,
                    } if is_gpu_class(*class) => {
                        if !gpus.contains_key(bdf) {
                            gpu_order.push(bdf.clone());
                        }
                        gpus.entry(bdf.clone())
                            .or_insert((*vendor, *device, Some(m)));
                        pci_last = Some(m);
                    }
                    KernelKind::Bar {
                        bdf,
                        size,
                        assigned,
                        ..
                    } if gpus.contains_key(bdf) => {
                        let b = bars.entry(bdf.clone()).or_insert(0);
                        *b = (*b).max(*size);
                        if *assigned && pci_last.is_none_or(|p| m.t >= p.t) {
                            pci_last = Some(m);
                        }
                    }
                    KernelKind::DriverEnable { bdf, .. } => enables.push((bdf.clone(), m)),
                    KernelKind::Nvrm(msg) if msg.contains("FBHUB") => nvrm_fbhub.push(m),
                    _ => {}
                }
            }
            Body::Agent(a) => {
                let Some(m) = mark else { continue };
                note(m, &mut first_agent);
                match &a.kind {
                    AgentKind::Rpc(name) => rpcs.push((name.clone(), m)),
                    AgentKind::CdiWait {
                        attempt,
                        max,
                        devices,
                    } => cdi_waits.push((*attempt, *max, *devices, m)),
                    AgentKind::CdiDone => note(m, &mut cdi_done),
                    AgentKind::Uevent {
                        action,
                        devpath,
                        subsystem,
                    } => {
                        if subsystem == "memory" || devpath.starts_with("/devices/system/memory/") {
                            mem_uevents.push(m);
                        } else if action == "bind" {
                            if let Some(b) = devpath_bdf(devpath) {
                                binds.entry(b.to_string()).or_insert(m);
                            }
                        }
                    }
                    AgentKind::Other => {}
                }
            }
            Body::Bpf(b) => match b {
                BpfLine::PinCall {
                    ts, npage, size, ..
                } => pin_open.push((*ts, *npage, *size, e.src)),
                BpfLine::PinTook { ts, ms } => {
                    // bpftrace prints no thread id: pair the return with the open call
                    // whose start is closest to (return time − duration); FIFO without times
                    let idx = match ts {
                        Some(t) => {
                            let want = t.saturating_sub(secs_ns(*ms / 1e3));
                            pin_open
                                .iter()
                                .enumerate()
                                .min_by_key(|(_, c)| {
                                    c.0.map_or(i128::MAX, |s| {
                                        (i128::from(s) - i128::from(want)).abs()
                                    })
                                })
                                .map(|(i, _)| i)
                        }
                        None => (!pin_open.is_empty()).then_some(0),
                    };
                    let (start, npage, size, src) = match idx.map(|i| pin_open.remove(i)) {
                        Some((st, n, s, src)) => (
                            st.or(ts.map(|t| t.saturating_sub(secs_ns(*ms / 1e3)))),
                            Some(n),
                            Some(s),
                            src,
                        ),
                        None => (
                            ts.map(|t| t.saturating_sub(secs_ns(*ms / 1e3))),
                            None,
                            None,
                            e.src,
                        ),
                    };
                    if let (Some(st), Some(end)) = (start, *ts) {
                        let printed = secs(end, st) * 1e3;
                        if (printed - ms).abs() > 1000.0 {
                            clocks.disagreements += 1;
                        }
                    }
                    raw_pins.push((start, *ms / 1e3, npage, size, src, "bpftrace", e.src));
                }
                BpfLine::MapIoctl { .. } => map_ioctls += 1,
                BpfLine::HistBucket { lo, hi, count } => {
                    *hist.entry((*lo, *hi)).or_default() += count
                }
                BpfLine::HistHeader(_) | BpfLine::Banner => {}
            },
            Body::Ftrace(f) => match f {
                FtraceLine::Leaf(c) => {
                    if c.func.as_deref() == Some("vfio_pin_pages_remote") {
                        ftrace_calls += 1;
                        if c.duration_us >= 1e6 {
                            ftrace_heavy.push(c.duration_us / 1e6);
                        }
                    }
                }
                FtraceLine::Enter { cpu, func, .. } => {
                    ftrace_stack.entry(*cpu).or_default().push(func.clone())
                }
                FtraceLine::Exit(c) => {
                    let f = ftrace_stack
                        .get_mut(&c.cpu)
                        .and_then(Vec::pop)
                        .or(c.func.clone());
                    if f.as_deref() == Some("vfio_pin_pages_remote") {
                        ftrace_calls += 1;
                        if c.duration_us >= 1e6 {
                            ftrace_heavy.push(c.duration_us / 1e6);
                        }
                    }
                }
                FtraceLine::Meta => {}
            },
            Body::Kube(k) => match k {
                KubectlLine::StartTime(_) => {
                    if let Some(m) = mark {
                        note(m, &mut kube_start);
                    }
                }
                KubectlLine::Started(_) => {
                    if let Some(m) = mark {
                        if kube_started.is_none_or(|s| m.t > s.t) {
                            kube_started = Some(m);
                        }
                    }
                }
                _ => {}
            },
        }
    }
    // `kubectl describe pod` of another boot (a different pod or day) must not stretch this
    // one: its Start Time → Started must overlap the logs' span, give or take the time a pod
    // can spend before its VM starts (image pull) or after its last logged line.
    if let (Some(f), Some(l)) = (first_any, last_any) {
        const SLACK_NS: Nanos = 15 * 60 * NS_PER_S;
        let s = kube_start.map_or(f.t, |m| m.t);
        let e = kube_started.map_or(l.t, |m| m.t);
        if (kube_start.is_some() || kube_started.is_some())
            && (s > l.t.saturating_add(SLACK_NS) || e < f.t.saturating_sub(SLACK_NS))
        {
            let which = kube_start.or(kube_started).map(|m| m.src);
            clocks.notes.push(format!(
                "kubectl times ({} → {}) are not this boot's (logs span {} → {}); ignored{}",
                kube_start.map_or("?".into(), |m| format_rfc3339(m.t)),
                kube_started.map_or("?".into(), |m| format_rfc3339(m.t)),
                format_rfc3339(f.t),
                format_rfc3339(l.t),
                which.map_or(String::new(), |src| format!(
                    " ({}:{})",
                    files.get(src.file as usize).map_or("?", String::as_str),
                    src.line
                ))
            ));
            kube_start = None;
            kube_started = None;
        }
    }
    // unclosed pin calls (trace stopped mid-call) are dropped: nothing measured
    let mut pb = PhaseBuilder {
        files,
        phases: Vec::new(),
    };

    // ---- vm_create: pod accepted / first shim line → guest boot ----------------------
    let guest_boot = al
        .boot
        .zip(first_kernel)
        .map(|(b, k)| Mark { t: b, src: k.src });
    let vm_start = [kube_start, first_host]
        .into_iter()
        .flatten()
        .min_by_key(|m| m.t);
    if let (Some(a), Some(gb)) = (vm_start, guest_boot) {
        if gb.t > a.t {
            pb.add("vm_create", "sandbox → guest boot".into(), None, a, gb.t, Some(gb.src), false,
                "pod accepted / shim start until the guest kernel's clock starts (QEMU start, RAM allocation and pinning, device attach)".into());
        }
    }
    // ---- kernel_boot --------------------------------------------------------------------
    if let Some(gb) = guest_boot {
        let end = run_init.or(first_agent).filter(|e| e.t >= gb.t);
        if let Some(e) = end {
            pb.add(
                "kernel_boot",
                "guest kernel".into(),
                None,
                gb,
                e.t,
                Some(e.src),
                false,
                if run_init.is_some() {
                    "guest boot until init runs"
                } else {
                    "guest boot until the first kata-agent record"
                }
                .into(),
            );
        }
    }
    // ---- pci_enumeration ----------------------------------------------------------------
    let first_gpu = gpu_order
        .first()
        .and_then(|b| gpus.get(b))
        .and_then(|g| g.2);
    if let (Some(a), Some(b)) = (first_gpu, pci_last) {
        pb.add(
            "pci_enumeration",
            format!("{} GPUs", gpus.len()),
            None,
            a,
            b.t,
            Some(b.src),
            false,
            format!(
                "first GPU found until the last GPU BAR assigned ({} GPUs)",
                gpus.len()
            ),
        );
    }
    // ---- gpu_driver_init per GPU ----------------------------------------------------------
    enables.sort_by_key(|(_, m)| m.t);
    let mut enable_spans: Vec<(String, Nanos, Nanos)> = Vec::new();
    let mut durations = Vec::new();
    for (i, (bdf, m)) in enables.iter().enumerate() {
        let next = enables.get(i + 1).map(|(_, n)| *n);
        let bind = binds.get(bdf).copied().filter(|b| b.t >= m.t);
        let end = bind.or(next);
        if let Some(e) = end {
            durations.push(secs(e.t, m.t));
        }
        enable_spans.push((bdf.clone(), m.t, end.map_or(i64::MAX, |e| e.t)));
    }
    let med = median(&mut durations.clone()).unwrap_or(0.0);
    for (i, (bdf, m)) in enables.iter().enumerate() {
        let next = enables.get(i + 1).map(|(_, n)| *n);
        let bind = binds.get(bdf).copied().filter(|b| b.t >= m.t);
        let (end_t, end_src, est, how) = match (bind, next) {
            (Some(b), _) => (
                b.t,
                Some(b.src),
                false,
                "until the agent saw the driver bind",
            ),
            (None, Some(n)) => (
                n.t,
                Some(n.src),
                false,
                "until the next GPU started enabling",
            ),
            (None, None) => (
                m.t.saturating_add(secs_ns(med)),
                None,
                true,
                "end estimated from the other GPUs",
            ),
        };
        if let Some(s) = enable_spans.get_mut(i) {
            s.2 = end_t;
        }
        pb.add(
            "gpu_driver_init",
            bdf.clone(),
            Some(bdf.clone()),
            *m,
            end_t,
            end_src,
            est,
            format!("nvidia driver enabling the device, {how}"),
        );
    }

    // ---- dma_pinning: join each call to the GPU enabling at the time ----------------------
    let bar_sizes: Vec<u64> = bars.values().copied().collect();
    let mut pins: Vec<PinCall> = Vec::new();
    let heavy_ftrace_total: usize = ftrace_heavy.len();
    let mut pin_total_s = 0.0;
    let mut pin_bytes = 0u64;
    let mut gpu_pin: HashMap<String, f64> = HashMap::new();
    for (start, dur, npage, size, src, source, end_src) in &raw_pins {
        pin_total_s += dur;
        pin_bytes += size.unwrap_or(0);
        let gpu = start.and_then(|st| {
            // the GPU that most recently started enabling and had not finished
            enable_spans
                .iter()
                .filter(|(_, a, b)| st.saturating_add(NS_PER_S / 2) >= *a && st <= *b)
                .max_by_key(|(_, a, _)| *a)
                .map(|(g, _, _)| g.clone())
        });
        let kind = match (size, &gpu) {
            (Some(s), _) if bar_sizes.contains(s) => "bar",
            (Some(_), None) => "ram",
            (Some(_), Some(_)) => "unknown",
            (None, _) => "unknown",
        };
        if let Some(g) = &gpu {
            *gpu_pin.entry(g.clone()).or_default() += dur;
        }
        let page_size = match (size, npage) {
            (Some(s), Some(n)) if *n > 0 => Some(s / n),
            _ => None,
        };
        if *dur >= PIN_PHASE_MIN_S {
            if let Some(st) = start {
                let m = Mark { t: *st, src: *src };
                let label = size.map_or("pin".to_string(), |s| format!("{:.0} GiB", gib(s)));
                pb.add(
                    "dma_pinning",
                    label,
                    gpu.clone(),
                    m,
                    st.saturating_add(secs_ns(*dur)),
                    Some(*end_src),
                    false,
                    format!(
                        "vfio_pin_pages_remote, {} pages of {} B ({kind})",
                        npage.unwrap_or(0),
                        page_size.unwrap_or(0)
                    ),
                );
            }
        }
        pins.push(PinCall {
            start_s: None,
            duration_s: *dur,
            bytes: *size,
            npage: *npage,
            page_size,
            gpu,
            kind,
            source,
            line: src_str(files, src),
        });
    }
    // ---- cdi_wait ---------------------------------------------------------------------------
    let mut cdi = None;
    if let Some(&(_, max, devices, first)) = cdi_waits.first() {
        let tries = cdi_waits.iter().map(|c| c.0).max().unwrap_or(0);
        let intervals: Vec<f64> = cdi_waits
            .windows(2)
            .filter_map(|w| match w {
                [a, b] if b.0 > a.0 => Some(secs(b.3.t, a.3.t) / f64::from(b.0 - a.0)),
                _ => None,
            })
            .collect();
        let interval = median(&mut intervals.clone());
        let last = cdi_waits.last().map(|c| c.3).unwrap_or(first);
        let (end_t, end_src, est) = match cdi_done.filter(|d| d.t >= first.t) {
            Some(d) => (d.t, Some(d.src), false),
            None => (
                last.t.saturating_add(secs_ns(interval.unwrap_or(1.0))),
                None,
                true,
            ),
        };
        pb.add(
            "cdi_wait",
            format!("{tries} tries"),
            None,
            first,
            end_t,
            end_src,
            est,
            format!(
                "kata-agent waiting for CDI specs of {devices} devices ({tries} of {max} tries{})",
                interval.map_or(String::new(), |i| format!(", one every {i:.2} s"))
            ),
        );
        cdi = Some(CdiSummary {
            tries,
            max_tries: if max == 0 { DEFAULT_CDI_MAX_TRIES } else { max },
            interval_s: interval,
            limit_s: interval
                .map(|i| i * f64::from(if max == 0 { DEFAULT_CDI_MAX_TRIES } else { max })),
            devices,
        });
    }
    // ---- memory_hotplug: RAM pins after the GPUs, and memory uevents ----------------------
    let gpus_done = enable_spans
        .iter()
        .map(|s| s.2)
        .filter(|t| *t != i64::MAX)
        .max();
    let mut mem_start: Option<Mark> = None;
    let mut mem_end: Option<(Nanos, SrcRef)> = None;
    let mut mem_bytes = 0u64;
    let mut mem_pin_s = 0.0;
    for (p, (start, dur, _, size, src, _, _)) in pins.iter().zip(&raw_pins) {
        let (Some(st), "ram") = (start, p.kind) else {
            continue;
        };
        if gpus_done.is_some_and(|g| *st >= g) {
            note(Mark { t: *st, src: *src }, &mut mem_start);
            let e = st.saturating_add(secs_ns(*dur));
            if mem_end.is_none_or(|m| e > m.0) {
                mem_end = Some((e, *src));
            }
            mem_bytes += size.unwrap_or(0);
            mem_pin_s += dur;
        }
    }
    let online = rpcs
        .iter()
        .find(|(n, _)| n == "online_cpu_mem")
        .map(|(_, m)| *m);
    for m in mem_uevents.iter().chain(online.iter()) {
        note(*m, &mut mem_start);
        if mem_end.is_none_or(|e| m.t > e.0) {
            mem_end = Some((m.t, m.src));
        }
    }
    if let (Some(a), Some((e, esrc))) = (mem_start, mem_end) {
        pb.add(
            "memory_hotplug",
            format!("{} blocks", mem_uevents.len()),
            None,
            a,
            e,
            Some(esrc),
            false,
            format!(
                "{} memory blocks onlined in the guest; {:.0} GiB pinned on the host in {:.1} s",
                mem_uevents.len(),
                gib(mem_bytes),
                mem_pin_s
            ),
        );
    }
    // ---- container_start --------------------------------------------------------------------
    let create = rpcs
        .iter()
        .find(|(n, _)| n == "create_container")
        .map(|(_, m)| *m);
    let start_rpc = rpcs
        .iter()
        .find(|(n, _)| n == "start_container")
        .map(|(_, m)| *m);
    let before = pb
        .phases
        .iter()
        .filter(|p| matches!(p.name, "cdi_wait" | "memory_hotplug"))
        .max_by_key(|p| p.end_ns)
        .map(|p| Mark {
            t: p.end_ns,
            src: p.end_src.or(p.start_src).unwrap_or(SrcRef {
                file: 0,
                line: 0,
                offset: 0,
            }),
        });
    let cs_start = create.or(before);
    let cs_end = [kube_started, start_rpc]
        .into_iter()
        .flatten()
        .max_by_key(|m| m.t);
    if let (Some(a), Some(b)) = (cs_start, cs_end) {
        if b.t > a.t {
            pb.add(
                "container_start",
                "container".into(),
                None,
                a,
                b.t,
                Some(b.src),
                false,
                if create.is_some() {
                    "create_container until the container started"
                } else {
                    "after CDI and memory until the container started"
                }
                .into(),
            );
        }
    }

    // ---- origin, totals -----------------------------------------------------------------------
    let mut phases = pb.phases;
    let t0 = phases
        .iter()
        .map(|p| p.start_ns)
        .chain(kube_start.map(|m| m.t))
        .min()
        .or(last_any.map(|m| m.t))
        .unwrap_or(0);
    for p in &mut phases {
        p.start_s = secs(p.start_ns, t0);
        p.end_s = secs(p.end_ns, t0);
    }
    phases.sort_by(|a, b| a.start_ns.cmp(&b.start_ns).then(b.end_ns.cmp(&a.end_ns)));
    for (p, (start, ..)) in pins.iter_mut().zip(&raw_pins) {
        p.start_s = start.map(|s| secs(s, t0));
    }
    let (total_s, total_from) = match (kube_start, kube_started) {
        (Some(a), Some(b)) if b.t > a.t => (secs(b.t, a.t), "kubectl"),
        _ => {
            let end = phases.iter().map(|p| p.end_ns).max().unwrap_or(t0);
            (secs(end, t0), "timeline")
        }
    };

    let gpu_list: Vec<Gpu> = gpu_order
        .iter()
        .filter_map(|b| gpus.get(b).map(|g| (b, g)))
        .map(|(bdf, (v, d, found))| Gpu {
            bdf: bdf.clone(),
            vendor_id: format!("{v:04x}"),
            device_id: format!("{d:04x}"),
            largest_bar: bars.get(bdf).copied(),
            found_s: found.map(|m| secs(m.t, t0)),
            driver_init_s: phases
                .iter()
                .find(|p| p.name == "gpu_driver_init" && p.gpu.as_deref() == Some(bdf))
                .map(|p| p.duration_s),
            pin_s: gpu_pin.get(bdf).copied().unwrap_or(0.0),
        })
        .collect();

    let critical_path = critical_path(&phases);
    let pin_summary = PinSummary {
        calls: raw_pins.len() as u64,
        total_s: pin_total_s,
        heavy_calls: raw_pins.iter().filter(|p| p.1 >= 1.0).count() as u64,
        bytes: pin_bytes,
        hist: hist.into_iter().map(|((a, b), c)| (a, b, c)).collect(),
        ftrace_calls,
        ftrace_heavy,
        map_ioctls,
    };
    let _ = heavy_ftrace_total;
    let mut report = Report {
        sandbox: chosen.and_then(|i| ing.sandboxes.get(i as usize).cloned()),
        other_sandboxes: ing
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i as u32) != chosen)
            .map(|(_, s)| s.clone())
            .collect(),
        files: files.clone(),
        t0: if al.boot == Some(0) && report_clock_none(&events) {
            "guest boot".to_string()
        } else {
            format_rfc3339(t0)
        },
        total_s,
        total_from,
        gpus: gpu_list,
        phases,
        pins,
        pin_summary,
        cdi,
        critical_path,
        findings: Vec::new(),
        fixes_save_s: None,
        clocks,
        stats: ing.stats.clone(),
    };
    report.findings = crate::findings::findings(&report);
    report.fixes_save_s = report
        .findings
        .iter()
        .filter_map(|f| f.saving_s)
        .reduce(|a, b| a + b);
    Ok(report)
}

fn report_clock_none(events: &[&Event]) -> bool {
    events.iter().all(|e| {
        e.host.is_none()
            && matches!(
                e.body,
                Body::Kernel(_)
                    | Body::Ftrace(_)
                    | Body::Bpf(
                        BpfLine::HistBucket { .. } | BpfLine::HistHeader(_) | BpfLine::Banner
                    )
            )
    })
}

/// Walk back from the phase that ends last, each time to the phase that ends latest at or
/// before the current one starts (with 0.5 s slack). Phases inside a step are listed in it.
pub fn critical_path(phases: &[Phase]) -> Vec<CriticalStep> {
    const SLACK: i64 = NS_PER_S / 2;
    let mut steps: Vec<usize> = Vec::new();
    let Some(mut cur) = phases
        .iter()
        .enumerate()
        .max_by(|a, b| {
            a.1.end_ns
                .cmp(&b.1.end_ns)
                .then(b.1.start_ns.cmp(&a.1.start_ns))
        })
        .map(|(i, _)| i)
    else {
        return Vec::new();
    };
    loop {
        steps.push(cur);
        let Some(c) = phases.get(cur) else { break };
        // the phase that was running (or ended) latest before this one started
        let reach = |p: &Phase| p.end_ns.min(c.start_ns.saturating_add(SLACK));
        let pred = phases
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !steps.contains(i) && p.start_ns < c.start_ns && p.name != "dma_pinning"
            })
            .max_by(|a, b| {
                reach(a.1)
                    .cmp(&reach(b.1))
                    .then(b.1.start_ns.cmp(&a.1.start_ns))
            })
            .map(|(i, _)| i);
        match pred {
            Some(p) if steps.len() < phases.len() => cur = p,
            _ => break,
        }
    }
    steps.reverse();
    let mut out = Vec::new();
    let mut prev_end: Option<Nanos> = None;
    for i in steps {
        let Some(p) = phases.get(i) else { continue };
        let contains = phases
            .iter()
            .enumerate()
            .filter(|(j, q)| {
                *j != i
                    && q.start_ns >= p.start_ns
                    && q.end_ns <= p.end_ns
                    && q.name != p.name
                    && q.name != "dma_pinning"
            })
            .fold(BTreeMap::<&str, (usize, f64)>::new(), |mut m, (_, q)| {
                let e = m.entry(q.name).or_default();
                e.0 += 1;
                e.1 += q.duration_s;
                m
            })
            .into_iter()
            .map(|(n, (c, s))| {
                if c > 1 {
                    format!("{c}× {n} {s:.1} s")
                } else {
                    format!("{n} {s:.1} s")
                }
            })
            .collect();
        out.push(CriticalStep {
            phase: p.name,
            label: p.label.clone(),
            start_s: p.start_s,
            duration_s: p.duration_s,
            gap_before_s: prev_end.map_or(0.0, |e| secs(p.start_ns, e).max(0.0)),
            contains,
        });
        prev_end = Some(prev_end.map_or(p.end_ns, |e: Nanos| e.max(p.end_ns)));
    }
    out
}
