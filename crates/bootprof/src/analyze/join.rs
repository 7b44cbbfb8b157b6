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
    /// call is explained where a QEMU pins: a GPU's BAR right after the guest enables that
    /// GPU, guest RAM before the guest kernel starts (QEMU allocating it), or the RAM of a
    /// hotplug the guest onlined memory after. Another VM's calls that a clock shift puts
    /// inside this boot's window fit none of these.
    pub fn fit(&self, f: &Facts, guest_boot: Option<Nanos>) -> (u64, u64) {
        let onlined = !f.mem_uevents.is_empty() || f.rpc("online_cpu_mem").is_some();
        let mut explained = 0u64;
        for (i, p) in self.pins.iter().enumerate() {
            let Some(s) = p.start else { continue };
            let at_enable = p.kind == "bar"
                && p.gpu.as_deref().is_some_and(|g| {
                    f.enables.iter().any(|(b, e)| {
                        b == g
                            && s >= e.t.saturating_sub(ENABLE_SLACK_NS)
                            && s <= e.t.saturating_add(2 * NS_PER_S)
                    })
                });
            let ram = p.kind == "ram"
                && (guest_boot.is_some_and(|b| s <= b) || (onlined && self.hotplug.contains(&i)));
            if at_enable || ram {
                explained += 1;
            }
        }
        (explained, self.pins.len() as u64 - explained)
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
    let mut out = Join::default();
    let window = window(f);

    // ---- the first enable of each GPU, and its window ----------------------------------
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
    let gpu_window = |s: Nanos| -> Option<usize> {
        enables.iter().enumerate().rev().find_map(|(i, (_, e))| {
            let lo = e.t.saturating_sub(ENABLE_SLACK_NS);
            let hi = match enables.get(i + 1) {
                Some((_, n)) => n.t.saturating_sub(ENABLE_SLACK_NS),
                None => last_close.unwrap_or(Nanos::MAX),
            };
            (s >= lo && s < hi).then_some(i)
        })
    };

    // ---- this VM's pins: by time window, then by process ------------------------------
    // (a process none of whose calls is inside the window scores nothing, as it would
    // with them all: a call near an enable is inside the window)
    let mut by_pid: BTreeMap<Option<u32>, Vec<&RawPin>> = BTreeMap::new();
    for p in &pins.near {
        by_pid.entry(p.pid).or_default().push(p);
    }
    let in_window = |p: &RawPin| match (window, p.start) {
        (Some((lo, hi)), Some(s)) => (lo..=hi).contains(&s),
        (Some(_), None) => true,
        (None, _) => true,
    };
    // a QEMU's pins start as the guest enables its GPUs: score each process by how many
    // enables it pins a BAR-sized region right after (any heavy pin when no BAR is known)
    let all_bars: Vec<u64> = f
        .gpus
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .collect();
    let near = |p: &RawPin, e: &Mark| {
        p.start.is_some_and(|s| {
            s >= e.t.saturating_sub(ENABLE_SLACK_NS) && s <= e.t.saturating_add(NS_PER_S / 2)
        })
    };
    let barish = |p: &RawPin| match p.size {
        Some(sz) if !all_bars.is_empty() => matches_bar(sz, &all_bars),
        _ => p.dur_s >= 0.1,
    };
    // (enables it pinned a BAR right after, its pins right after enables, pins in window):
    // QEMU maps all of a GPU's BARs as the guest enables it
    let score = |pins: &[&RawPin]| -> (usize, usize, usize) {
        let covered = enables
            .iter()
            .filter(|(_, e)| pins.iter().any(|p| near(p, e) && barish(p)))
            .count();
        let at_enables = pins
            .iter()
            .filter(|p| enables.iter().any(|(_, e)| near(p, e)))
            .count();
        (
            covered,
            at_enables,
            pins.iter().filter(|p| in_window(p)).count(),
        )
    };
    // the slack around the boot's own lines (QEMU pins RAM before the guest prints; a log
    // cut short) extends a process that pins during them, it brings in no other: a process
    // none of whose calls falls inside the boot's own span is another VM's (an already
    // running VM's one console line took the next VM's BAR pins 60 s after it)
    let span = f.window();
    let in_span = |p: &RawPin| match (span, p.start) {
        (Some((lo, hi)), Some(s)) => (lo..=hi).contains(&s),
        _ => true,
    };
    let scored: Vec<(Option<u32>, (usize, usize, usize))> = by_pid
        .iter()
        .filter(|(pid, v)| pid.is_some() && v.iter().any(|p| in_span(p)))
        .map(|(pid, v)| (*pid, score(v)))
        .collect();
    let best = scored.iter().map(|(_, s)| *s).max().unwrap_or((0, 0, 0));
    let keep: Vec<Option<u32>> = if window.is_none() {
        if scored.len() > 1 {
            out.notes.push(format!(
                "pin calls of {} processes and no journal to tell which is this VM: all are counted",
                scored.len()
            ));
        }
        by_pid.keys().copied().collect()
    } else {
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
            out.notes.push(format!(
                "pin calls of {} processes fall inside this boot and none pins a BAR as its GPUs are enabled: which is this VM is not known, so none of them is counted",
                inside.len()
            ));
            Vec::new()
        } else if tied.len() > 1 {
            out.notes.push(format!(
                "pin calls of {} processes fall inside this boot and line up equally with its GPUs: all are counted",
                tied.len()
            ));
            tied
        } else {
            tied
        }
    };
    let mine: Vec<RawPin> = pins
        .near
        .iter()
        .filter(|p| match p.pid {
            Some(_) => keep.contains(&p.pid) && in_window(p),
            // a call of unknown process (a return without its call line) is this boot's
            // inside its own span; in the slack it may as well close another VM's call
            None => in_span(p),
        })
        .copied()
        .collect();
    // every call of a process not kept is another VM's
    out.foreign_calls = pins.total.saturating_sub(mine.len() as u64);
    let foreign_pids: Vec<u32> = pins
        .pids
        .iter()
        .copied()
        .filter(|pid| !keep.contains(&Some(*pid)))
        .collect();
    if out.foreign_calls > 0 {
        out.notes.push(format!(
            "{} pin calls are not this boot's and were left out ({}): another VM or another boot in the same trace",
            out.foreign_calls,
            if foreign_pids.is_empty() {
                "outside its time window".to_string()
            } else {
                format!(
                    "pids {}",
                    foreign_pids
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    }
    out.foreign_pids = foreign_pids;

    // ---- classify and assign ----------------------------------------------------------
    let own_bars = |bdf: &str| -> Vec<u64> {
        f.gpus
            .iter()
            .filter(|g| g.bdf == bdf)
            .flat_map(|g| g.bars.iter().map(|b| b.1))
            .collect()
    };
    // pins inside a GPU's window first: the BAR sizes and addresses they show let the pins
    // outside every window (a GPU whose enable the log missed, a BAR pinned again) be told
    let mut by_vaddr: BTreeMap<u64, String> = BTreeMap::new();
    let mut seen_bars: Vec<u64> = all_bars.clone();
    let mut placed: Vec<Option<(Option<String>, &'static str)>> = vec![None; mine.len()];
    for (k, p) in mine.iter().enumerate() {
        let Some(i) = p.start.and_then(gpu_window) else {
            continue;
        };
        let bdf = enables.get(i).map(|e| e.0.clone());
        let Some(size) = p.size else {
            placed[k] = Some((bdf, "unknown"));
            continue;
        };
        let bar_like = |bars: &[u64]| {
            bars.iter().copied().max().is_some_and(|max| {
                matches_bar(size, bars) || (size as f64 <= max as f64 * 1.01 && size >= max / 64)
            })
        };
        let own = bdf.as_deref().map(&own_bars).unwrap_or_default();
        let bar = if own.iter().any(|s| *s >= VRAM_BAR_MIN) {
            bar_like(&own)
        } else {
            // this GPU's VRAM BAR line was not seen (the log starts inside or after its
            // enumeration, or has none): a pin like one of its own or another GPU's BARs,
            // or a heavy pin while it enables, is its BAR — its register BARs alone would
            // make its VRAM BAR look like RAM
            bar_like(&own) || bar_like(&all_bars) || p.dur_s >= 0.5 || size >= 1 << 30
        };
        if bar {
            if let (Some(v), Some(g)) = (p.vaddr, &bdf) {
                by_vaddr.entry(v).or_insert_with(|| g.clone());
            }
            if size >= 1 << 20 && !seen_bars.contains(&size) {
                seen_bars.push(size);
            }
            placed[k] = Some((bdf, "bar"));
        } else {
            placed[k] = Some((None, "unknown"));
        }
    }
    // with nothing of the guest's side (no GPU enabled, no BAR sizes, no guest boot: a pin
    // trace alone), a pin's size tells a GPU's BAR from guest RAM no better than a guess
    let guest_seen = !enables.is_empty() || !all_bars.is_empty() || guest_boot.is_some();
    if !guest_seen && !mine.is_empty() {
        out.notes.push(
            "no guest-side log (GPU enables, BAR sizes, the guest's boot): which pin calls are GPU BARs and which guest RAM is not known, so no RAM pinning pace, page size or memory hotplug is given".into(),
        );
    }
    for (k, p) in mine.into_iter().enumerate() {
        let (gpu, kind) = match placed.get_mut(k).and_then(Option::take) {
            Some(x) => x,
            None => match (p.size, p.vaddr.and_then(|v| by_vaddr.get(&v).cloned())) {
                (None, _) => (None, "unknown"),
                // outside every GPU's window: a BAR pinned again (its address was a BAR's),
                // a BAR-sized region after the guest booted, or guest RAM
                (Some(_), Some(g)) => (Some(g), "bar"),
                (Some(_), None) if !guest_seen => (None, "unclassified"),
                (Some(size), None) => {
                    let after_boot = guest_boot.zip(p.start).is_some_and(|(b, s)| s >= b);
                    if after_boot && size >= 1 << 20 && matches_bar(size, &seen_bars) {
                        (None, "bar")
                    } else {
                        (None, "ram")
                    }
                }
            },
        };
        out.pins.push(JoinedPin {
            start: p.start,
            end: p.end(),
            pin: p,
            gpu,
            kind,
        });
    }

    // ---- driver init per GPU ------------------------------------------------------------
    let mut durations = Vec::new();
    let mut inits: Vec<Init> = Vec::new();
    for (i, (bdf, e)) in enables.iter().enumerate() {
        let next = enables.get(i + 1).map(|(_, n)| *n);
        let bind = f
            .binds
            .iter()
            .find(|(b, m)| b == bdf && m.t >= e.t.saturating_sub(NS_PER_S / 20))
            .map(|(_, m)| *m);
        let pin_end = out
            .pins
            .iter()
            .filter(|p| p.kind == "bar" && p.gpu.as_deref() == Some(bdf.as_str()))
            .filter_map(|p| Some((p.end?, p.pin.end_src)))
            .max_by_key(|(t, _)| *t);
        let later = match (bind, pin_end) {
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
        };
        let init = match (later, next) {
            (Some((t, _, how)), Some(n)) if t > n.t => Init {
                bdf: bdf.clone(),
                enable: *e,
                end: Some(n.t),
                end_src: Some(n.src),
                estimated: false,
                how: format!("{how}, cut at the next GPU's enable"),
            },
            (Some((t, src, how)), _) => Init {
                bdf: bdf.clone(),
                enable: *e,
                end: Some(t.max(e.t)),
                end_src: Some(src),
                estimated: false,
                how: how.to_string(),
            },
            (None, Some(n)) => Init {
                bdf: bdf.clone(),
                enable: *e,
                end: Some(n.t),
                end_src: Some(n.src),
                estimated: false,
                how: "until the next GPU started enabling (no bind or pin seen)".into(),
            },
            (None, None) => {
                let fbhub = f.nvrm_fbhub.iter().find(|m| m.t > e.t).copied();
                match fbhub {
                    Some(m) => Init {
                        bdf: bdf.clone(),
                        enable: *e,
                        end: Some(m.t),
                        end_src: Some(m.src),
                        estimated: false,
                        how: "until the driver's first FBHUB clear (no bind or pin seen)".into(),
                    },
                    None => Init {
                        bdf: bdf.clone(),
                        enable: *e,
                        end: None,
                        end_src: None,
                        estimated: true,
                        how: String::new(),
                    },
                }
            }
        };
        if let Some(t) = init.end {
            durations.push(secs(t, e.t));
        }
        inits.push(init);
    }
    durations.sort_by(f64::total_cmp);
    let median = durations.get(durations.len() / 2).copied();
    for init in &mut inits {
        if init.end.is_none() {
            if let Some(m) = median {
                init.end = Some(init.enable.t.saturating_add(secs_ns(m)));
                init.how = "nothing closes it: estimated as the other GPUs' median".into();
            } else {
                out.notes.push(format!(
                    "the driver init of {} has no end in the inputs (no bind uevent, no host pin, no later GPU): its length is unknown",
                    init.bdf
                ));
            }
        }
    }
    out.inits = inits;

    // ---- the guest RAM hotplug's pins -----------------------------------------------------
    let gpus_done = out.inits.iter().filter_map(|i| i.end).max();
    let after = [guest_boot, gpus_done].into_iter().flatten().max();
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    let mut last_end: Option<Nanos> = None;
    for (i, p) in out.pins.iter().enumerate() {
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
    let last_uevent = f.mem_uevents.latest().map(|m| m.t);
    let chosen = match last_uevent {
        Some(u) => clusters
            .iter()
            .rev()
            .find(|c| {
                c.first()
                    .and_then(|&i| out.pins.get(i))
                    .and_then(|p| p.start)
                    .is_some_and(|s| s <= u)
            })
            .cloned(),
        None => clusters.last().cloned(),
    };
    out.hotplug = chosen.unwrap_or_default();
    out
}
