//! Step 3, the host's side: the lines of host traces (bpftrace pin calls and their returns,
//! `@hist`, ioctls; ftrace function_graph) and of `kubectl describe`, read once into what
//! every boot they may be about needs — the pin calls paired with their returns, indexed by
//! start time, and the trace's totals. A boot then looks up the calls near its own time
//! window instead of reading the whole trace again: in a fleet, a node's trace holds the
//! calls of all its boots, and reading it once per boot made the work grow with the square
//! of the boots per node.

use std::collections::{BTreeMap, HashMap};

use crate::analyze::clocks::{secs, secs_ns, CallTimes};
use crate::analyze::facts::{Mark, Pod, RawPin};
use crate::parse::bpftrace::BpfLine;
use crate::parse::ftrace::FtraceLine;
use crate::parse::ingest::{Body, Event, SrcRef};
use crate::parse::kubectl::KubectlLine;
use crate::parse::time::Nanos;

/// Whether a line is read here (not by [`crate::analyze::facts::collect`]).
pub fn is_trace(e: &Event) -> bool {
    matches!(e.body, Body::Bpf(_) | Body::Ftrace(_) | Body::Kube(_))
}

/// A pin call line waiting for its return.
#[derive(Debug, Clone, Copy)]
struct OpenCall {
    ts: Option<Nanos>,
    vaddr: u64,
    npage: u64,
    size: u64,
    pid: Option<u32>,
    src: SrcRef,
}

/// The traces and `kubectl describe` output of some inputs.
#[derive(Debug, Clone, Default)]
pub struct Traces {
    /// Every pin call paired with its return, in the order the returns were read.
    pub pins: Vec<RawPin>,
    /// (start, index into `pins`) of the calls with a start, by start.
    by_start: Vec<(Nanos, u32)>,
    /// Starts of the calls of 0.5 s or more, sorted.
    heavy_starts: Vec<Nanos>,
    /// Indices of the calls without a start, in `pins` order.
    undated: Vec<u32>,
    /// The processes the calls name, in order of their first call in `pins`.
    pub pids: Vec<u32>,
    /// Pin calls whose return was never seen (trace stopped mid-call).
    pub unreturned: u64,
    /// Returns whose printed duration disagrees with their stamps by over 1 s.
    pub pin_disagreements: u64,
    pub hist: BTreeMap<(u64, u64), u64>,
    pub ftrace_calls: u64,
    pub ftrace_heavy: Vec<f64>,
    pub map_ioctls: u64,
    pub iommufd_maps: u64,
    pub(crate) pods: Vec<Pod>,
    /// `kubectl describe` lines are among them.
    pub kubectl: bool,
    /// Every line is one a guest-relative timeline can show alone (ftrace, a histogram, a
    /// banner): no pin call, no ioctl, no kubectl.
    pub relative_only: bool,
}

impl Traces {
    /// Read the trace and kubectl lines of `events` (the others are skipped), in order.
    pub fn read<'a>(events: impl IntoIterator<Item = &'a Event>) -> Traces {
        let mut t = Traces {
            relative_only: true,
            ..Traces::default()
        };
        let mut pin_open: Vec<OpenCall> = Vec::new();
        let mut ftrace_stack: HashMap<u32, Vec<String>> = HashMap::new();
        for e in events {
            match &e.body {
                Body::Bpf(b) => {
                    if !matches!(
                        b,
                        BpfLine::HistBucket { .. } | BpfLine::HistHeader(_) | BpfLine::Banner
                    ) {
                        t.relative_only = false;
                    }
                    t.bpf(e, b, &mut pin_open);
                }
                Body::Ftrace(ft) => t.ftrace(ft, &mut ftrace_stack),
                Body::Kube(k) => {
                    t.relative_only = false;
                    t.kubectl = true;
                    t.kube(e, k);
                }
                _ => {}
            }
        }
        t.unreturned = pin_open.len() as u64;
        t.index();
        t
    }

    /// Index `pins` by start, and list their processes.
    fn index(&mut self) {
        for (i, p) in self.pins.iter().enumerate() {
            match p.start {
                Some(s) => self.by_start.push((s, i as u32)),
                None => self.undated.push(i as u32),
            }
            if p.start.is_some() && p.dur_s >= 0.5 {
                self.heavy_starts.extend(p.start);
            }
            if let Some(pid) = p.pid {
                if !self.pids.contains(&pid) {
                    self.pids.push(pid);
                }
            }
        }
        self.by_start.sort_unstable();
        self.heavy_starts.sort_unstable();
    }

    fn bpf(&mut self, e: &Event, b: &BpfLine, pin_open: &mut Vec<OpenCall>) {
        match b {
            BpfLine::PinCall {
                ts,
                vaddr,
                npage,
                size,
                pid,
            } => pin_open.push(OpenCall {
                ts: *ts,
                vaddr: *vaddr,
                npage: *npage,
                size: *size,
                pid: *pid,
                src: e.src,
            }),
            BpfLine::PinTook { ts, ms } => {
                // bpftrace prints no thread id: pair the return with the open call whose
                // start is closest to (return time − duration); FIFO without times
                let idx = match ts {
                    Some(t) => {
                        let want = t.saturating_sub(secs_ns(*ms / 1e3));
                        pin_open
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, c)| {
                                c.ts.map_or(i128::MAX, |s| (i128::from(s) - i128::from(want)).abs())
                            })
                            .map(|(i, _)| i)
                    }
                    None => (!pin_open.is_empty()).then_some(0),
                };
                let back = ts.map(|t| t.saturating_sub(secs_ns(*ms / 1e3)));
                let pin = match idx.map(|i| pin_open.remove(i)) {
                    Some(c) => RawPin {
                        start: c.ts.or(back),
                        dur_s: *ms / 1e3,
                        npage: Some(c.npage),
                        size: Some(c.size),
                        vaddr: (c.vaddr != 0).then_some(c.vaddr),
                        pid: c.pid,
                        src: c.src,
                        end_src: e.src,
                        source: "bpftrace",
                    },
                    None => RawPin {
                        start: back,
                        dur_s: *ms / 1e3,
                        npage: None,
                        size: None,
                        vaddr: None,
                        pid: None,
                        src: e.src,
                        end_src: e.src,
                        source: "bpftrace",
                    },
                };
                if let (Some(st), Some(end)) = (pin.start, *ts) {
                    if (secs(end, st) * 1e3 - ms).abs() > 1000.0 {
                        self.pin_disagreements += 1;
                    }
                }
                self.pins.push(pin);
            }
            BpfLine::MapIoctl { ioctl, .. } => {
                self.map_ioctls += 1;
                if ioctl == "IOMMU_IOAS_MAP" {
                    self.iommufd_maps += 1;
                }
            }
            BpfLine::HistBucket { lo, hi, count } => {
                *self.hist.entry((*lo, *hi)).or_default() += count
            }
            BpfLine::HistHeader(_) | BpfLine::Banner => {}
        }
    }

    fn ftrace(&mut self, ft: &FtraceLine, stack: &mut HashMap<u32, Vec<String>>) {
        match ft {
            FtraceLine::Leaf(c) => {
                if c.func.as_deref() == Some("vfio_pin_pages_remote") {
                    self.ftrace_calls += 1;
                    if c.duration_us >= 1e6 {
                        self.ftrace_heavy.push(c.duration_us / 1e6);
                    }
                }
            }
            FtraceLine::Enter { cpu, func, .. } => {
                stack.entry(*cpu).or_default().push(func.clone())
            }
            FtraceLine::Exit(c) => {
                let name = stack.get_mut(&c.cpu).and_then(Vec::pop).or(c.func.clone());
                if name.as_deref() == Some("vfio_pin_pages_remote") {
                    self.ftrace_calls += 1;
                    if c.duration_us >= 1e6 {
                        self.ftrace_heavy.push(c.duration_us / 1e6);
                    }
                }
            }
            FtraceLine::Meta => {}
        }
    }

    fn kube(&mut self, e: &Event, k: &KubectlLine) {
        // a pod's lines: from its `Name:` (or the start of its file) to the next
        let new_pod = matches!(k, KubectlLine::Name(_))
            || self.pods.last().is_none_or(|p| p.file != e.src.file);
        if new_pod {
            self.pods.push(Pod {
                file: e.src.file,
                start: None,
                started: None,
            });
        }
        let mark = match k {
            KubectlLine::StartTime(t) | KubectlLine::Started(t) => Some(Mark { t: *t, src: e.src }),
            _ => None,
        };
        let (Some(pod), Some(m)) = (self.pods.last_mut(), mark) else {
            return;
        };
        match k {
            KubectlLine::StartTime(_) if pod.start.is_none_or(|s| m.t < s.t) => {
                pod.start = Some(m);
            }
            KubectlLine::Started(_) if pod.started.is_none_or(|s| m.t > s.t) => {
                pod.started = Some(m);
            }
            _ => {}
        }
    }

    /// Calls with a start.
    pub fn dated(&self) -> usize {
        self.by_start.len()
    }

    /// How many of the sorted `starts`, moved by `shift`, fall in `lo..=hi` (exactly as
    /// `(lo..=hi).contains(&s.saturating_add(shift))`: that map keeps the order).
    fn count_in(starts: &[Nanos], shift: Nanos, lo: Nanos, hi: Nanos) -> usize {
        let a = starts.partition_point(|s| s.saturating_add(shift) < lo);
        let b = starts.partition_point(|s| s.saturating_add(shift) <= hi);
        b.saturating_sub(a)
    }

    /// Calls with a start that fall in `lo..=hi` moved by `shift`.
    pub fn dated_in(&self, shift: Nanos, lo: Nanos, hi: Nanos) -> usize {
        let a = self
            .by_start
            .partition_point(|(s, _)| s.saturating_add(shift) < lo);
        let b = self
            .by_start
            .partition_point(|(s, _)| s.saturating_add(shift) <= hi);
        b.saturating_sub(a)
    }

    /// Calls of 0.5 s or more whose start, moved by `shift`, lies within `before` ns before
    /// to `after` ns after one of `enables` (each counted once).
    pub fn heavy_near(
        &self,
        shift: Nanos,
        enables: &[Nanos],
        before: Nanos,
        after: Nanos,
    ) -> usize {
        let mut spans: Vec<(Nanos, Nanos)> = enables
            .iter()
            .map(|e| (e.saturating_sub(before), e.saturating_add(after)))
            .collect();
        spans.sort_unstable();
        let mut n = 0;
        let mut cur: Option<(Nanos, Nanos)> = None;
        for (lo, hi) in spans {
            match &mut cur {
                Some((_, h)) if lo <= *h => *h = (*h).max(hi),
                _ => {
                    if let Some((a, b)) = cur {
                        n += Self::count_in(&self.heavy_starts, shift, a, b);
                    }
                    cur = Some((lo, hi));
                }
            }
        }
        if let Some((a, b)) = cur {
            n += Self::count_in(&self.heavy_starts, shift, a, b);
        }
        n
    }

    /// The calls a boot whose pins fall in `window` (on its clock: the trace's stamps moved
    /// by `shift`) reads — those inside it and those without a start, every call when there
    /// is no window — moved onto its clock, in the order they were read.
    pub fn near(&self, window: Option<(Nanos, Nanos)>, shift: Nanos) -> Vec<RawPin> {
        let moved = |p: &RawPin| RawPin {
            start: p.start.map(|s| s.saturating_add(shift)),
            ..*p
        };
        let Some((lo, hi)) = window else {
            return self.pins.iter().map(moved).collect();
        };
        let a = self
            .by_start
            .partition_point(|(s, _)| s.saturating_add(shift) < lo);
        let b = self
            .by_start
            .partition_point(|(s, _)| s.saturating_add(shift) <= hi);
        let mut idx: Vec<u32> = self
            .by_start
            .get(a..b)
            .unwrap_or(&[])
            .iter()
            .map(|(_, i)| *i)
            .chain(self.undated.iter().copied())
            .collect();
        idx.sort_unstable();
        idx.iter()
            .filter_map(|&i| self.pins.get(i as usize))
            .map(moved)
            .collect()
    }
}

impl CallTimes for Traces {
    fn count(&self) -> usize {
        self.dated()
    }

    fn inside(&self, shift: Nanos, lo: Nanos, hi: Nanos) -> usize {
        self.dated_in(shift, lo, hi)
    }

    fn heavy_near(&self, shift: Nanos, enables: &[Nanos], before: Nanos, after: Nanos) -> usize {
        Traces::heavy_near(self, shift, enables, before, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::clocks::{trace_shift, TracedCall};
    use crate::analyze::model::Clocks;
    use crate::parse::time::NS_PER_S;
    use proptest::prelude::*;

    const H: Nanos = 3600 * NS_PER_S;

    fn pin(start: Option<Nanos>, dur_s: f64, pid: Option<u32>, i: u64) -> RawPin {
        let src = SrcRef {
            file: 0,
            line: i + 1,
            offset: i,
        };
        RawPin {
            start,
            dur_s,
            npage: None,
            size: None,
            vaddr: None,
            pid,
            src,
            end_src: src,
            source: "bpftrace",
        }
    }

    /// Calls of several boots hours apart, some shifted, some heavy, some undated.
    fn calls() -> impl Strategy<Value = Vec<RawPin>> {
        prop::collection::vec(
            (
                prop::option::weighted(0.9, (0i64..6, -14i64..=14, 0i64..400)),
                prop_oneof![Just(0.01), Just(0.5), Just(3.4)],
                prop::option::of(1u32..4),
            ),
            0..60,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (t, dur, pid))| {
                    let start = t.map(|(boot, shift, s)| {
                        1_700_000_000 * NS_PER_S + boot * 5 * H + shift * H + s * NS_PER_S
                    });
                    pin(start, dur, pid, i as u64)
                })
                .collect()
        })
    }

    fn traces(pins: &[RawPin]) -> Traces {
        let mut t = Traces {
            pins: pins.to_vec(),
            ..Traces::default()
        };
        t.index();
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// The shift read from the index is the shift read call by call, notes and all.
        #[test]
        fn shift_by_index_is_shift_call_by_call(
            pins in calls(),
            boot in 0i64..6,
            len_s in 1i64..2_000,
            enables in prop::collection::vec(0i64..400, 0..8),
            zone in prop::option::of(prop_oneof![Just(0i64), Just(8 * 3600), Just(-5 * 3600), Just(19_800)]),
        ) {
            let lo = 1_700_000_000 * NS_PER_S + boot * 5 * H;
            let window = Some((lo, lo + len_s * NS_PER_S));
            let enables: Vec<Nanos> = enables.iter().map(|s| lo + s * NS_PER_S).collect();
            let naive: Vec<TracedCall> = pins
                .iter()
                .filter_map(|p| Some(TracedCall { start: p.start?, dur_s: p.dur_s }))
                .collect();
            let (mut a, mut b) = (Clocks::default(), Clocks::default());
            let by_call = trace_shift(&naive[..], window, &enables, zone, &mut a);
            let by_index = trace_shift(&traces(&pins), window, &enables, zone, &mut b);
            prop_assert_eq!(by_call, by_index);
            prop_assert_eq!(a.notes, b.notes);
            prop_assert_eq!(a.trace_shift_h, b.trace_shift_h);
        }

        /// The calls near a window are those a filter over every call keeps, in read order.
        #[test]
        fn calls_near_a_window_are_those_inside_it(
            pins in calls(),
            boot in 0i64..6,
            len_s in 1i64..2_000,
            shift_h in -14i64..=14,
            windowed in prop::bool::weighted(0.9),
        ) {
            let lo = 1_700_000_000 * NS_PER_S + boot * 5 * H;
            let window = windowed.then_some((lo, lo + len_s * NS_PER_S));
            let shift = shift_h * H;
            let want: Vec<u64> = pins
                .iter()
                .filter(|p| match (window, p.start) {
                    (Some((lo, hi)), Some(s)) => (lo..=hi).contains(&s.saturating_add(shift)),
                    _ => true,
                })
                .map(|p| p.src.line)
                .collect();
            let near = traces(&pins).near(window, shift);
            prop_assert_eq!(near.iter().map(|p| p.src.line).collect::<Vec<_>>(), want);
            for (p, q) in near.iter().zip(pins.iter().filter(|p| near.iter().any(|n| n.src == p.src))) {
                prop_assert_eq!(p.start, q.start.map(|s| s.saturating_add(shift)));
            }
        }
    }
}
