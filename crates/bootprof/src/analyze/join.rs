//! Step 4 of the analysis: join the host's pin calls to this VM and to its GPUs, by
//! causality and time rather than by one sample's order.
//!
//! * **This VM's pins.** Calls outside the boot's time window (another boot in the same
//!   trace) are left out; when several processes pin inside it, the one whose heavy pins
//!   start as GPUs are enabled is this VM's QEMU.
//! * **Which GPU.** The guest driver's `enabling device` turns on the BAR's memory
//!   decoding, and QEMU maps (so the host pins) the BAR then: a call belongs to the GPU that
//!   most recently started enabling, until the next one does; a call outside every GPU's
//!   window joins the GPU an earlier call at the same address joined.
//! * **BAR or RAM.** By size relative to the GPU's BARs (from any kernel's BAR lines; the
//!   other GPUs' when this one's were not logged), and by timing.
//! * **Driver init.** A GPU is ready when its driver has bound and the host has finished
//!   pinning its BAR: from its enable to the later of the two, bounded by the next GPU's
//!   enable (the driver probes one GPU at a time). With neither, the next enable closes it;
//!   for the last GPU the driver's first FBHUB clear, else the other GPUs' median.

use std::collections::BTreeMap;

use crate::analyze::clocks::{secs, secs_ns};
use crate::analyze::facts::{Facts, Mark, RawPin};
use crate::analyze::model::PIN_PHASE_MIN_S;
use crate::parse::ingest::SrcRef;
use crate::parse::time::{Nanos, NS_PER_S};

/// How far before the first journal line a pin can be this boot's (QEMU pins the boot RAM
/// before the guest prints anything), and after the last.
const WINDOW_BEFORE_NS: Nanos = 120 * NS_PER_S;
const WINDOW_AFTER_NS: Nanos = 60 * NS_PER_S;

/// The span of the host axis where a pin can be this boot's, when its lines date it.
pub fn window(f: &Facts) -> Option<(Nanos, Nanos)> {
    f.window().map(|(a, b)| {
        (
            a.saturating_sub(WINDOW_BEFORE_NS),
            b.saturating_add(WINDOW_AFTER_NS),
        )
    })
}

/// The host trace's pin calls as [`join`] reads them: the calls inside the boot's
/// [`window`] and those without a start (every call when there is no window), on the host
/// axis, in the order they were read; and of the whole trace, how many calls it holds and
/// the processes they name in order of first call.
#[derive(Debug, Clone)]
pub struct TracePins<'a> {
    pub near: Vec<RawPin>,
    pub total: u64,
    pub pids: &'a [u32],
}
/// A pin may start this much before its GPU's enable line (console delay, clock skew; a
/// BAR pin follows its enable by 20–300 ms, and a 16 GiB BAR pins in ~0.4 s).
const ENABLE_SLACK_NS: Nanos = NS_PER_S / 10;
/// The last GPU's window when nothing closes it earlier.
const LAST_GPU_HORIZON_NS: Nanos = 120 * NS_PER_S;
/// RAM pins closer than this are one hotplug.
const HOTPLUG_GAP_NS: Nanos = 5 * NS_PER_S;
/// A GPU's VRAM (frame buffer) BAR is at least this large (256 MiB: BAR 1 of a GPU without
/// resizable BAR); its register BARs are smaller (16–32 MiB).
const VRAM_BAR_MIN: u64 = 256 << 20;

/// A pin call of this VM, placed and classified.
#[derive(Debug, Clone)]
pub struct JoinedPin {
    pub pin: RawPin,
    /// Start and end on the host axis.
    pub start: Option<Nanos>,
    pub end: Option<Nanos>,
    pub gpu: Option<String>,
    /// `bar`, `ram`, `unknown`.
    pub kind: &'static str,
}

/// One GPU's driver init.
#[derive(Debug, Clone)]
pub struct Init {
    pub bdf: String,
    pub enable: Mark,
    /// `None` when nothing in the inputs closes it.
    pub end: Option<Nanos>,
    pub end_src: Option<SrcRef>,
    pub estimated: bool,
    pub how: String,
}

#[derive(Debug, Clone, Default)]
pub struct Join {
    pub pins: Vec<JoinedPin>,
    pub foreign_calls: u64,
    pub foreign_pids: Vec<u32>,
    pub inits: Vec<Init>,
    /// Indices into `pins` of the guest RAM hotplug's pin calls.
    pub hotplug: Vec<usize>,
    pub notes: Vec<String>,
}

impl Join {
    /// How well this VM's pin calls fit its own boot, as (explained, unexplained) calls. A
    /// call is explained where a QEMU pins: a GPU's BAR (sized as one of its BARs) right
    /// after the guest enables that GPU, or a register-sized region (under 256 MiB) of no
    /// known GPU right after an enable (the GPU's small BARs, whose lines a log that starts
    /// late lacks), guest RAM before the guest kernel starts (QEMU allocating it), or the
    /// RAM of a hotplug the guest onlined memory after. Another VM's calls that a clock
    /// shift puts inside this boot's window fit none of these.
    pub fn fit(&self, f: &Facts, guest_boot: Option<Nanos>) -> (u64, u64) {
        let onlined = !f.mem_uevents.is_empty() || f.rpc("online_cpu_mem").is_some();
        let after_enable = |s: Nanos, gpu: Option<&str>| {
            f.enables.iter().any(|(b, e)| {
                gpu.is_none_or(|g| b == g)
                    && s >= e.t.saturating_sub(ENABLE_SLACK_NS)
                    && s <= e.t.saturating_add(2 * NS_PER_S)
            })
        };
        let mut explained = 0u64;
        for (i, p) in self.pins.iter().enumerate() {
            let Some(s) = p.start else { continue };
            let at_enable = p.kind == "bar"
                && p.gpu.as_deref().is_some_and(|g| {
                    sized_as_a_bar_of(f, g, p.pin.size) && after_enable(s, Some(g))
                });
            let registers = p.kind == "unknown"
                && p.pin.size.is_some_and(|z| z < VRAM_BAR_MIN)
                && after_enable(s, None);
            let ram = p.kind == "ram"
                && (guest_boot.is_some_and(|b| s <= b) || (onlined && self.hotplug.contains(&i)));
            if at_enable || registers || ram {
                explained += 1;
            }
        }
        (explained, self.pins.len() as u64 - explained)
    }
}

/// Whether a pin of `size` bytes is sized as one of GPU `bdf`'s BARs, as far as the log
/// tells: one of their sizes when the GPU's VRAM BAR was logged (a QEMU pins each BAR
/// whole as the guest enables the GPU; another VM's RAM chunk that a clock shift puts at
/// an enable is not one), anything when it was not or the size is unknown.
fn sized_as_a_bar_of(f: &Facts, bdf: &str, size: Option<u64>) -> bool {
    let own: Vec<u64> = f
        .gpus
        .iter()
        .filter(|g| g.bdf == bdf)
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .collect();
    match size {
        Some(z) if own.iter().any(|s| *s >= VRAM_BAR_MIN) => matches_bar(z, &own),
        _ => true,
    }
}

fn matches_bar(size: u64, bars: &[u64]) -> bool {
    bars.iter()
        .any(|b| (size as f64 - *b as f64).abs() <= 0.01 * *b as f64)
}

/// Join the host trace's pins (on the host axis) to this VM and its GPUs. A call outside
/// the boot's [`window`] is never this VM's: `pins` holds those inside it, and the count of
/// the others.
pub fn join(f: &Facts, pins: &TracePins<'_>, guest_boot: Option<Nanos>) -> Join {
    let cx = Ctx::new(f, guest_boot);
    let mut out = Join::default();
    let mine = cx.this_vms_pins(pins, &mut out);
    out.pins = cx.classify(mine, &mut out.notes);
    out.inits = cx.driver_inits(&out.pins, &mut out.notes);
    out.hotplug = cx.hotplug(&out.pins, &out.inits);
    out
}

/// What the join's steps share: the facts, each GPU's first enable and window, and the
/// boot's time window and span.
struct Ctx<'a> {
    f: &'a Facts,
    guest_boot: Option<Nanos>,
    /// The first enable of each GPU, in order.
    enables: Vec<(String, Mark)>,
    /// Where the last GPU's window closes.
    last_close: Option<Nanos>,
    /// Where a pin can be this boot's ([`window`]).
    window: Option<(Nanos, Nanos)>,
    /// The span of the boot's own lines.
    span: Option<(Nanos, Nanos)>,
    /// The BAR sizes of every GPU the kernels logged.
    all_bars: Vec<u64>,
}

/// A process's score as this VM's QEMU: (enables it pinned a BAR right after, its pins
/// right after enables, its pins in the window).
type Score = (usize, usize, usize);

/// Where the pins inside the GPUs' windows were placed, and what they tell of the others.
struct InWindows {
    /// Per pin: its GPU and kind, `None` for a pin outside every window.
    placed: Vec<Option<(Option<String>, &'static str)>>,
    /// The GPU of each BAR address pinned.
    by_vaddr: BTreeMap<u64, String>,
    /// BAR sizes logged or pinned.
    seen_bars: Vec<u64>,
}

/// The pin starts from a little before enable `e` to 0.5 s after it.
fn at_enable(p: &RawPin, e: &Mark) -> bool {
    p.start.is_some_and(|s| {
        s >= e.t.saturating_sub(ENABLE_SLACK_NS) && s <= e.t.saturating_add(NS_PER_S / 2)
    })
}

/// A pin of `size` bytes is like one of `bars`: one of their sizes, or no larger than the
/// largest and at least 1/64 of it.
fn bar_like(size: u64, bars: &[u64]) -> bool {
    bars.iter().copied().max().is_some_and(|max| {
        matches_bar(size, bars) || (size as f64 <= max as f64 * 1.01 && size >= max / 64)
    })
}

impl<'a> Ctx<'a> {
    /// The first enable of each GPU, and where the last GPU's window closes.
    fn new(f: &'a Facts, guest_boot: Option<Nanos>) -> Self {
        let mut enables: Vec<(String, Mark)> = Vec::new();
        for (bdf, m) in &f.enables {
            if !enables.iter().any(|(b, _)| b == bdf) {
                enables.push((bdf.clone(), *m));
            }
        }
        let after_last = enables.last().map(|(_, e)| e.t);
        let last_close = after_last.map(|e| {
            [
                f.cdi_done.map(|m| m.t),
                f.rpc("online_cpu_mem").map(|m| m.t),
                f.mem_uevents.first().map(|m| m.t),
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t > e)
            .min()
            .unwrap_or(e.saturating_add(LAST_GPU_HORIZON_NS))
        });
        Ctx {
            f,
            guest_boot,
            enables,
            last_close,
            window: window(f),
            span: f.window(),
            all_bars: f
                .gpus
                .iter()
                .flat_map(|g| g.bars.iter().map(|b| b.1))
                .collect(),
        }
    }

    /// The GPU (index into `enables`) whose window holds start `s`.
    fn gpu_window(&self, s: Nanos) -> Option<usize> {
        let enables = &self.enables;
        enables.iter().enumerate().rev().find_map(|(i, (_, e))| {
            let lo = e.t.saturating_sub(ENABLE_SLACK_NS);
            let hi = match enables.get(i + 1) {
                Some((_, n)) => n.t.saturating_sub(ENABLE_SLACK_NS),
                None => self.last_close.unwrap_or(Nanos::MAX),
            };
            (s >= lo && s < hi).then_some(i)
        })
    }

    fn in_window(&self, p: &RawPin) -> bool {
        match (self.window, p.start) {
            (Some((lo, hi)), Some(s)) => (lo..=hi).contains(&s),
            (Some(_), None) => true,
            (None, _) => true,
        }
    }

    fn in_span(&self, p: &RawPin) -> bool {
        match (self.span, p.start) {
            (Some((lo, hi)), Some(s)) => (lo..=hi).contains(&s),
            _ => true,
        }
    }

    /// A BAR-sized pin (any heavy pin when no BAR is known).
    fn barish(&self, p: &RawPin) -> bool {
        match p.size {
            Some(sz) if !self.all_bars.is_empty() => matches_bar(sz, &self.all_bars),
            _ => p.dur_s >= 0.1,
        }
    }

    /// How well a process's pins line up with the GPUs' enables: QEMU maps all of a GPU's
    /// BARs as the guest enables it.
    fn score(&self, pins: &[&RawPin]) -> Score {
        let covered = self
            .enables
            .iter()
            .filter(|(_, e)| pins.iter().any(|p| at_enable(p, e) && self.barish(p)))
            .count();
        let at_enables = pins
            .iter()
            .filter(|p| self.enables.iter().any(|(_, e)| at_enable(p, e)))
            .count();
        (
            covered,
            at_enables,
            pins.iter().filter(|p| self.in_window(p)).count(),
        )
    }

    /// This VM's pins: by time window, then by process. Counts and notes the others in `out`.
    fn this_vms_pins(&self, pins: &TracePins<'_>, out: &mut Join) -> Vec<RawPin> {
        // (a process none of whose calls is inside the window scores nothing, as it would
        // with them all: a call near an enable is inside the window)
        let mut by_pid: BTreeMap<Option<u32>, Vec<&RawPin>> = BTreeMap::new();
        for p in &pins.near {
            by_pid.entry(p.pid).or_default().push(p);
        }
        let keep = self.processes_kept(&by_pid, &mut out.notes);
        let mine: Vec<RawPin> = pins
            .near
            .iter()
            .filter(|p| match p.pid {
                Some(_) => keep.contains(&p.pid) && self.in_window(p),
                // a call of unknown process (a return without its call line) is this boot's
                // inside its own span; in the slack it may as well close another VM's call
                None => self.in_span(p),
            })
            .copied()
            .collect();
        // every call of a process not kept is another VM's
        out.foreign_calls = pins.total.saturating_sub(mine.len() as u64);
        out.foreign_pids = pins
            .pids
            .iter()
            .copied()
            .filter(|pid| !keep.contains(&Some(*pid)))
            .collect();
        if out.foreign_calls > 0 {
            out.notes.push(format!(
                "{} pin calls are not this boot's and were left out ({}): another VM or another boot in the same trace",
                out.foreign_calls,
                if out.foreign_pids.is_empty() {
                    "outside its time window".to_string()
                } else {
                    format!(
                        "pids {}",
                        out.foreign_pids
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
        mine
    }

    /// The processes taken for this VM's QEMU: those whose pins best line up with the GPUs'
    /// enables (all of them when there is no window to tell), with a note when that is not
    /// one process.
    fn processes_kept(
        &self,
        by_pid: &BTreeMap<Option<u32>, Vec<&RawPin>>,
        notes: &mut Vec<String>,
    ) -> Vec<Option<u32>> {
        // the slack around the boot's own lines (QEMU pins RAM before the guest prints; a log
        // cut short) extends a process that pins during them, it brings in no other: a process
        // none of whose calls falls inside the boot's own span is another VM's (an already
        // running VM's one console line took the next VM's BAR pins 60 s after it)
        let scored: Vec<(Option<u32>, Score)> = by_pid
            .iter()
            .filter(|(pid, v)| pid.is_some() && v.iter().any(|p| self.in_span(p)))
            .map(|(pid, v)| (*pid, self.score(v)))
            .collect();
        let best = scored.iter().map(|(_, s)| *s).max().unwrap_or((0, 0, 0));
        if self.window.is_none() {
            if scored.len() > 1 {
                notes.push(format!(
                    "pin calls of {} processes and no journal to tell which is this VM: all are counted",
                    scored.len()
                ));
            }
            return by_pid.keys().copied().collect();
        }
        let inside: Vec<Option<u32>> = scored
            .iter()
            .filter(|(_, s)| s.2 > 0)
            .map(|(p, _)| *p)
            .collect();
        let tied: Vec<Option<u32>> = scored
            .iter()
            .filter(|(_, s)| *s == best && s.2 > 0)
            .map(|(p, _)| *p)
            .collect();
        if inside.len() > 1 && best.0 == 0 {
            notes.push(format!(
                "pin calls of {} processes fall inside this boot and none pins a BAR as its GPUs are enabled: which is this VM is not known, so none of them is counted",
                inside.len()
            ));
            Vec::new()
        } else if tied.len() > 1 {
            notes.push(format!(
                "pin calls of {} processes fall inside this boot and line up equally with its GPUs: all are counted",
                tied.len()
            ));
            tied
        } else {
            tied
        }
    }

    /// Something of the guest's side was seen (a GPU enabled, BAR sizes, the guest's boot):
    /// without it a pin's size tells a GPU's BAR from guest RAM no better than a guess.
    fn guest_seen(&self) -> bool {
        !self.enables.is_empty() || !self.all_bars.is_empty() || self.guest_boot.is_some()
    }

    /// Classify this VM's pins (BAR, RAM, unknown) and assign them to GPUs.
    fn classify(&self, mine: Vec<RawPin>, notes: &mut Vec<String>) -> Vec<JoinedPin> {
        let mut known = self.place_in_windows(&mine);
        let guest_seen = self.guest_seen();
        if !guest_seen && !mine.is_empty() {
            notes.push(
                "no guest-side log (GPU enables, BAR sizes, the guest's boot): which pin calls are GPU BARs and which guest RAM is not known, so no RAM pinning pace, page size or memory hotplug is given".into(),
            );
        }
        let mut out = Vec::with_capacity(mine.len());
        for (k, p) in mine.into_iter().enumerate() {
            let (gpu, kind) = match known.placed.get_mut(k).and_then(Option::take) {
                Some(x) => x,
                None => self.place_outside(&p, &known, guest_seen),
            };
            out.push(JoinedPin {
                start: p.start,
                end: p.end(),
                pin: p,
                gpu,
                kind,
            });
        }
        out
    }

    /// Place the pins inside a GPU's window first: the BAR sizes and addresses they show let
    /// the pins outside every window (a GPU whose enable the log missed, a BAR pinned again)
    /// be told.
    fn place_in_windows(&self, mine: &[RawPin]) -> InWindows {
        let mut w = InWindows {
            placed: vec![None; mine.len()],
            by_vaddr: BTreeMap::new(),
            seen_bars: self.all_bars.clone(),
        };
        for (k, p) in mine.iter().enumerate() {
            let Some(i) = p.start.and_then(|s| self.gpu_window(s)) else {
                continue;
            };
            let bdf = self.enables.get(i).map(|e| e.0.clone());
            let Some(size) = p.size else {
                w.placed[k] = Some((bdf, "unknown"));
                continue;
            };
            if self.is_bar_of(bdf.as_deref(), p, size) {
                if let (Some(v), Some(g)) = (p.vaddr, &bdf) {
                    w.by_vaddr.entry(v).or_insert_with(|| g.clone());
                }
                if size >= 1 << 20 && !w.seen_bars.contains(&size) {
                    w.seen_bars.push(size);
                }
                w.placed[k] = Some((bdf, "bar"));
            } else {
                w.placed[k] = Some((None, "unknown"));
            }
        }
        w
    }

    /// A pin of `size` bytes inside GPU `bdf`'s window is a BAR of it.
    fn is_bar_of(&self, bdf: Option<&str>, p: &RawPin, size: u64) -> bool {
        let own: Vec<u64> = bdf.map_or_else(Vec::new, |bdf| {
            self.f
                .gpus
                .iter()
                .filter(|g| g.bdf == bdf)
                .flat_map(|g| g.bars.iter().map(|b| b.1))
                .collect()
        });
        if own.iter().any(|s| *s >= VRAM_BAR_MIN) {
            bar_like(size, &own)
        } else {
            // this GPU's VRAM BAR line was not seen (the log starts inside or after its
            // enumeration, or has none): a pin like one of its own or another GPU's BARs,
            // or a heavy pin while it enables, is its BAR — its register BARs alone would
            // make its VRAM BAR look like RAM
            bar_like(size, &own)
                || bar_like(size, &self.all_bars)
                || p.dur_s >= 0.5
                || size >= 1 << 30
        }
    }

    /// The GPU and kind of a pin outside every GPU's window: a BAR pinned again (its address
    /// was a BAR's), a BAR-sized region after the guest booted, or guest RAM.
    fn place_outside(
        &self,
        p: &RawPin,
        known: &InWindows,
        guest_seen: bool,
    ) -> (Option<String>, &'static str) {
        match (
            p.size,
            p.vaddr.and_then(|v| known.by_vaddr.get(&v).cloned()),
        ) {
            (None, _) => (None, "unknown"),
            (Some(_), Some(g)) => (Some(g), "bar"),
            (Some(_), None) if !guest_seen => (None, "unclassified"),
            (Some(size), None) => {
                let after_boot = self.guest_boot.zip(p.start).is_some_and(|(b, s)| s >= b);
                if after_boot && size >= 1 << 20 && matches_bar(size, &known.seen_bars) {
                    (None, "bar")
                } else {
                    (None, "ram")
                }
            }
        }
    }

    /// The driver init of each GPU; one that nothing closes gets the other GPUs' median, or
    /// a note.
    fn driver_inits(&self, pins: &[JoinedPin], notes: &mut Vec<String>) -> Vec<Init> {
        let mut inits: Vec<Init> = self
            .enables
            .iter()
            .enumerate()
            .map(|(i, (bdf, e))| {
                // the driver goes on to the next GPU: its enable, or its failed probe (a GPU
                // whose BAR the guest could not assign is never enabled)
                let next = self
                    .enables
                    .get(i + 1)
                    .map(|(_, n)| *n)
                    .into_iter()
                    .chain(
                        self.f
                            .probe_failed
                            .iter()
                            .map(|p| p.3)
                            .filter(|m| m.t > e.t),
                    )
                    .min_by_key(|m| m.t);
                self.driver_init(bdf, e, next, pins)
            })
            .collect();
        let mut durations: Vec<f64> = inits
            .iter()
            .filter_map(|i| Some(secs(i.end?, i.enable.t)))
            .collect();
        durations.sort_by(f64::total_cmp);
        let median = durations.get(durations.len() / 2).copied();
        for init in &mut inits {
            if init.end.is_none() {
                if let Some(m) = median {
                    init.end = Some(init.enable.t.saturating_add(secs_ns(m)));
                    init.how = "nothing closes it: estimated as the other GPUs' median".into();
                } else {
                    notes.push(format!(
                        "the driver init of {} has no end in the inputs (no bind uevent, no host pin, no later GPU): its length is unknown",
                        init.bdf
                    ));
                }
            }
        }
        inits
    }

    /// The driver init of GPU `bdf`, enabled at `e`: until the later of its bind and the end
    /// of its BAR pins, cut at the `next` GPU's enable; else until that enable or the
    /// driver's first FBHUB clear; else open (to be estimated).
    fn driver_init(&self, bdf: &str, e: &Mark, next: Option<Mark>, pins: &[JoinedPin]) -> Init {
        let end: Option<(Nanos, SrcRef, String)> = match (self.bound_or_pinned(bdf, e, pins), next)
        {
            (Some((t, _, how)), Some(n)) if t > n.t => {
                Some((n.t, n.src, format!("{how}, cut at the next GPU's enable")))
            }
            (Some((t, src, how)), _) => Some((t.max(e.t), src, how.to_string())),
            (None, Some(n)) => Some((
                n.t,
                n.src,
                "until the next GPU started enabling (no bind or pin seen)".into(),
            )),
            (None, None) => self.f.nvrm_fbhub.iter().find(|m| m.t > e.t).map(|m| {
                (
                    m.t,
                    m.src,
                    "until the driver's first FBHUB clear (no bind or pin seen)".into(),
                )
            }),
        };
        Init {
            bdf: bdf.to_string(),
            enable: *e,
            end: end.as_ref().map(|x| x.0),
            end_src: end.as_ref().map(|x| x.1),
            estimated: end.is_none(),
            how: end.map(|x| x.2).unwrap_or_default(),
        }
    }

    /// The later of GPU `bdf`'s driver bind (after its enable `e`) and the end of its BAR
    /// pins, with its line and how it ends the init.
    fn bound_or_pinned(
        &self,
        bdf: &str,
        e: &Mark,
        pins: &[JoinedPin],
    ) -> Option<(Nanos, SrcRef, &'static str)> {
        let bind = self
            .f
            .binds
            .iter()
            .find(|(b, m)| b == bdf && m.t >= e.t.saturating_sub(NS_PER_S / 20))
            .map(|(_, m)| *m);
        let pin_end = pins
            .iter()
            .filter(|p| p.kind == "bar" && p.gpu.as_deref() == Some(bdf))
            .filter_map(|p| Some((p.end?, p.pin.end_src)))
            .max_by_key(|(t, _)| *t);
        match (bind, pin_end) {
            (Some(b), Some((p, ps))) if p > b.t => Some((
                p,
                ps,
                "until the host finished pinning its BAR (the driver bound earlier)",
            )),
            (Some(b), Some(_)) => Some((
                b.t,
                b.src,
                "until the driver bound (its BAR was pinned by then)",
            )),
            (Some(b), None) => Some((b.t, b.src, "until the agent saw the driver bind")),
            (None, Some((p, ps))) => Some((p, ps, "until the host finished pinning its BAR")),
            (None, None) => None,
        }
    }

    /// Indices into `pins` of the guest RAM hotplug's pin calls: of the clusters of RAM
    /// chunks after the guest booted and its GPUs were ready, the last that starts before
    /// the guest's last memory uevent.
    fn hotplug(&self, pins: &[JoinedPin], inits: &[Init]) -> Vec<usize> {
        let gpus_done = inits.iter().filter_map(|i| i.end).max();
        let after = [self.guest_boot, gpus_done].into_iter().flatten().max();
        let clusters = ram_clusters(pins, after);
        let chosen = match self.f.mem_uevents.latest().map(|m| m.t) {
            Some(u) => clusters
                .iter()
                .rev()
                .find(|c| {
                    c.first()
                        .and_then(|&i| pins.get(i))
                        .and_then(|p| p.start)
                        .is_some_and(|s| s <= u)
                })
                .cloned(),
            None => clusters.last().cloned(),
        };
        chosen.unwrap_or_default()
    }
}

/// The RAM chunks starting at or after `after`, in clusters of pins less than
/// [`HOTPLUG_GAP_NS`] apart (indices into `pins`).
fn ram_clusters(pins: &[JoinedPin], after: Option<Nanos>) -> Vec<Vec<usize>> {
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    let mut last_end: Option<Nanos> = None;
    for (i, p) in pins.iter().enumerate() {
        let (Some(s), Some(e)) = (p.start, p.end) else {
            continue;
        };
        // RAM chunks, however fast (hugetlbfs pins 4 GiB in ~12 ms), not stray small maps
        let chunk = p.pin.size.is_some_and(|z| z >= 64 << 20) || p.pin.dur_s >= PIN_PHASE_MIN_S;
        if p.kind != "ram" || !chunk || after.is_some_and(|a| s < a) {
            continue;
        }
        match (clusters.last_mut(), last_end) {
            (Some(c), Some(le)) if s <= le.saturating_add(HOTPLUG_GAP_NS) => c.push(i),
            _ => clusters.push(vec![i]),
        }
        last_end = Some(last_end.map_or(e, |l| l.max(e)));
    }
    clusters
}
