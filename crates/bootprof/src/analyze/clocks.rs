//! Step 2 of the analysis: one time axis for every clock in the inputs.
//!
//! * Journal prefixes without `time=` (local wall clock, no year, any locale) get their
//!   year from the complete timestamps of the inputs (or `--year`) and their zone from
//!   `--tz`, else from lines that carry both a prefix and `time=`, else from the zone
//!   `time=` is written in; UTC is assumed, and said, only when nothing tells.
//! * The guest kernel's seconds-since-boot are placed by the console lines' host times
//!   (or, without them, by how kernel and agent lines interleave).
//! * The agent's clock is moved onto the host's by the lines that carry both; an offset
//!   of whole hours is named as such (a guest clock in local time).
//! * Host traces (bpftrace) stamp their own wall clock: when none of their calls falls
//!   inside the boot and exactly one whole-hour shift puts them there (and lines their
//!   heavy pins up with the GPUs' enables), they are shifted and the report says so;
//!   when more than one shift fits, nothing is changed and the report says that.

use std::collections::{BTreeMap, HashMap};

use crate::analyze::model::{secs_fmt, Clocks};
use crate::parse::ingest::{Body, ClockSamples, Event};
use crate::parse::time::{days_from_civil, format_offset, format_rfc3339, Nanos, NS_PER_S};

/// What the user may say about the clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockOptions {
    /// Year of journald prefixes that have no `time=` (default: from the inputs).
    pub year: Option<i64>,
    /// Zone of journald prefixes, seconds east of UTC (default: inferred).
    pub tz: Option<i64>,
    /// Whole hours to add to the host trace's stamps, instead of inferring them per boot
    /// (a fleet's node: one trace clock, agreed by the boots whose pins it holds).
    pub trace_shift_h: Option<i64>,
}

/// Every clock of the inputs, placed on the host's.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    zone_s: i64,
    reference: Option<Nanos>,
    /// Guest boot instant on the host axis (0 when only guest-relative times exist).
    pub boot: Option<Nanos>,
    /// host − agent clock.
    pub agent_offset: i64,
    /// Added to host-trace stamps (whole hours).
    pub trace_shift: i64,
}

impl Axis {
    /// The host time of a journal line: its `time=`, or its prefix completed with the
    /// inferred year and zone.
    pub fn host(&self, e: &Event) -> Option<Nanos> {
        e.host.or_else(|| {
            e.local
                .and_then(|l| l.resolve_near(self.reference?, self.zone_s))
        })
    }

    pub fn kernel(&self, t: f64) -> Option<Nanos> {
        self.boot.map(|b| b.saturating_add(secs_ns(t)))
    }

    pub fn agent(&self, ts: Nanos) -> Nanos {
        ts.saturating_add(self.agent_offset)
    }

    pub fn trace(&self, ts: Nanos) -> Nanos {
        ts.saturating_add(self.trace_shift)
    }
}

/// Seconds → nanoseconds, saturating (input-derived values may be huge).
pub(crate) fn secs_ns(s: f64) -> i64 {
    (s * 1e9) as i64
}

/// (a − b) in seconds without overflow.
pub(crate) fn secs(a: Nanos, b: Nanos) -> f64 {
    (i128::from(a) - i128::from(b)) as f64 / 1e9
}

fn mode(m: &BTreeMap<i64, u64>) -> Option<(i64, u64)> {
    m.iter()
        .max_by_key(|(z, n)| (**n, -z.abs()))
        .map(|(z, n)| (*z, *n))
}

/// The journal's zone, and how it is known.
fn journal_zone(s: &ClockSamples, o: &ClockOptions) -> (i64, &'static str) {
    if let Some(z) = o.tz {
        return (z, "--tz");
    }
    if let Some((z, _)) = mode(&s.prefix_zones) {
        return (z, "prefix vs time=");
    }
    if let Some((z, _)) = mode(&s.time_zones) {
        return (z, "time= zone");
    }
    (0, "assumed UTC")
}

/// The journal's zone when the inputs or `--tz` tell it (not when UTC is only assumed).
pub fn journal_zone_known(s: &ClockSamples, o: &ClockOptions) -> Option<i64> {
    let (z, from) = journal_zone(s, o);
    (from != "assumed UTC").then_some(z)
}

/// Align the boot's clocks. `events` are the boot's records in input order, but for the
/// host's traces and kubectl output; `kubectl` tells whether there is kubectl output.
pub fn align(
    events: &[&Event],
    samples: &ClockSamples,
    opts: &ClockOptions,
    kubectl: bool,
    clocks: &mut Clocks,
) -> Axis {
    let mut axis = journal_axis(events, samples, opts, clocks);
    let (agent_off, boot_host) = host_offsets(events, &axis);
    note_agent_offset(agent_off, clocks);
    axis.agent_offset = agent_off.unwrap_or(0);
    axis.boot = guest_boot(events, boot_host, axis.agent_offset, clocks);
    console_delays(events, &axis, clocks);
    place_kernel_only(events, kubectl, &mut axis, clocks);
    axis
}

/// The axis of the journal prefixes without `time=`: their zone and the year near which
/// they resolve, noted in `clocks`.
fn journal_axis(
    events: &[&Event],
    samples: &ClockSamples,
    opts: &ClockOptions,
    clocks: &mut Clocks,
) -> Axis {
    let local_only = events
        .iter()
        .filter(|e| e.host.is_none() && e.local.is_some())
        .count();
    let (zone_s, zone_from) = journal_zone(samples, opts);
    let reference = match opts.year {
        // mid-year: the year of the nearest candidate is the one asked for
        Some(y) => Some((days_from_civil(y, 7, 2) * 86_400 + 12 * 3600) * NS_PER_S),
        None => samples.last_journal.or(samples.last_full),
    };
    if local_only > 0 || zone_from != "assumed UTC" {
        clocks.journal_zone = Some(format_offset(zone_s));
    }
    clocks.journal_zone_from = if local_only == 0 {
        "not needed"
    } else {
        zone_from
    };
    if local_only > 0 {
        match reference {
            None => clocks.notes.push(format!(
                "{local_only} journal lines have only a prefix time (no year, no zone) and no input has a complete timestamp: they are left off the time axis; pass --year"
            )),
            Some(r) if opts.year.is_none() => clocks.notes.push(format!(
                "{local_only} journal lines have only a prefix time: year from the inputs' complete timestamps (near {}), zone {} ({zone_from})",
                format_rfc3339(r),
                format_offset(zone_s)
            )),
            Some(_) => {}
        }
        if zone_from == "assumed UTC" {
            clocks.notes.push(
                "nothing in the inputs tells the journal's zone: UTC assumed for prefix-only lines; pass --tz".into(),
            );
        }
    }
    Axis {
        zone_s,
        reference,
        boot: None,
        agent_offset: 0,
        trace_shift: 0,
    }
}

/// Over the lines that carry a host time and their own: the agent clock's offset,
/// min(host − ts), and the earliest guest boot the kernel lines put on the host axis.
fn host_offsets(events: &[&Event], axis: &Axis) -> (Option<i64>, Option<Nanos>) {
    let mut agent_off: Option<i64> = None;
    let mut boot_host: Option<Nanos> = None;
    for e in events {
        if let Body::AgentRun(run) = &e.body {
            for l in &run.lines {
                let d = l.host.saturating_sub(l.ts);
                agent_off = Some(agent_off.map_or(d, |o: i64| o.min(d)));
            }
            continue;
        }
        let Some(h) = axis.host(e) else { continue };
        match &e.body {
            Body::Agent(a) => {
                let d = h.saturating_sub(a.ts);
                agent_off = Some(agent_off.map_or(d, |o: i64| o.min(d)));
            }
            Body::Kernel(k) => {
                let b = h.saturating_sub(secs_ns(k.t));
                boot_host = Some(boot_host.map_or(b, |o: i64| o.min(b)));
            }
            _ => {}
        }
    }
    (agent_off, boot_host)
}

/// Note the agent clock's offset: whole hours (a guest clock in local time), ahead of the
/// host, or records reaching the host late.
fn note_agent_offset(agent_off: Option<i64>, clocks: &mut Clocks) {
    clocks.agent_offset_s = agent_off.map(|o| o as f64 / 1e9);
    let Some(o) = agent_off else { return };
    let hours = (o as f64 / 3.6e12).round() as i64;
    let rest = o - hours * 3600 * NS_PER_S;
    if hours != 0 && rest.abs() < 120 * NS_PER_S {
        clocks.notes.push(format!(
            "the kata-agent clock is {} h {} the host's (a guest clock set to local time?): agent times were moved onto the host clock by the lines that carry both",
            hours.abs(),
            if hours > 0 { "behind" } else { "ahead of" }
        ));
    } else if o < -NS_PER_S / 1000 {
        clocks.notes.push(format!(
            "the kata-agent clock ran {} s ahead of the host; agent times were moved onto the host clock",
            secs_fmt(-o as f64 / 1e9, 3)
        ));
    } else if o > NS_PER_S / 10 {
        clocks.notes.push(format!(
            "kata-agent records reached the host at least {} s after their own timestamps (clock behind or console delay); host time used",
            secs_fmt(o as f64 / 1e9, 3)
        ));
    }
}

/// The guest boot on the host axis: from the console lines' host times, else from how
/// kernel and agent lines interleave ([`boot_by_order`]).
fn guest_boot(
    events: &[&Event],
    boot_host: Option<Nanos>,
    agent_offset: i64,
    clocks: &mut Clocks,
) -> Option<Nanos> {
    let mut boot = boot_host;
    clocks.guest_boot_from = if boot.is_some() { "host" } else { "none" };
    if boot.is_none() {
        boot = boot_by_order(events, agent_offset, clocks);
        if boot.is_some() {
            clocks.guest_boot_from = "agent-order";
        }
    }
    boot
}

/// Console delays: each line's host time against its own (aligned) time; those over 1 s
/// are disagreements, and noted.
fn console_delays(events: &[&Event], axis: &Axis, clocks: &mut Clocks) {
    let mut max_delay: Option<f64> = None;
    let mut delay = |h: Nanos, o: Nanos| {
        let d = secs(h, o);
        max_delay = Some(max_delay.map_or(d, |m: f64| m.max(d)));
        if d > 1.0 {
            clocks.disagreements += 1;
        }
    };
    for e in events {
        if let Body::AgentRun(run) = &e.body {
            for l in &run.lines {
                delay(l.host, axis.agent(l.ts));
            }
            continue;
        }
        let own = match &e.body {
            Body::Kernel(k) => axis.kernel(k.t),
            Body::Agent(a) => Some(axis.agent(a.ts)),
            _ => None,
        };
        if let (Some(h), Some(o)) = (axis.host(e), own) {
            delay(h, o);
        }
    }
    clocks.max_console_delay_s = max_delay;
    if clocks.disagreements > 0 {
        clocks.notes.push(format!(
            "{} console lines reached the host more than 1 s after the guest printed them (up to {} s); host time wins for the phase boundaries",
            clocks.disagreements,
            secs_fmt(max_delay.unwrap_or(0.0), 3)
        ));
    }
}

/// Kernel lines that no host time places: a guest-relative axis (boot at 0) when they are
/// all there is, else left out with a note. A placed guest boot is recorded in `clocks`.
fn place_kernel_only(events: &[&Event], kubectl: bool, axis: &mut Axis, clocks: &mut Clocks) {
    let has_kernel = events.iter().any(|e| matches!(e.body, Body::Kernel(_)));
    if axis.boot.is_none() && has_kernel {
        let absolute = kubectl
            || events.iter().any(|e| {
                axis.host(e).is_some()
                    || matches!(&e.body, Body::Agent(_) | Body::AgentRun(_) | Body::Kube(_))
            });
        if absolute {
            clocks.notes.push(
                "guest kernel lines could not be placed on the host clock (no console lines with host times, no agent records): they are left out; add the containerd journal".into(),
            );
        } else {
            // kernel lines only: a guest-relative axis
            axis.boot = Some(0);
        }
    } else {
        clocks.guest_boot = axis.boot.map(format_rfc3339);
    }
}

/// The agent ts of each line of an event (none for other bodies).
fn agent_ts(e: &Event) -> impl Iterator<Item = Nanos> + '_ {
    let (one, run) = match &e.body {
        Body::Agent(a) => (Some(a.ts), None),
        Body::AgentRun(r) => (None, Some(r.lines.iter().map(|l| l.ts))),
        _ => (None, None),
    };
    one.into_iter().chain(run.into_iter().flatten())
}

/// Guest boot bounded by the order of kernel and agent lines in the same file.
fn boot_by_order(events: &[&Event], agent_offset: i64, clocks: &mut Clocks) -> Option<Nanos> {
    let mut upper: Option<Nanos> = None;
    let mut lower: Option<Nanos> = None;
    let mut max_t: HashMap<u32, f64> = HashMap::new();
    for e in events {
        match &e.body {
            Body::Kernel(k) => {
                let m = max_t.entry(e.src.file).or_insert(k.t);
                *m = m.max(k.t);
            }
            Body::Agent(_) | Body::AgentRun(_) => {
                if let Some(t) = max_t.get(&e.src.file) {
                    for ts in agent_ts(e) {
                        let u = ts.saturating_add(agent_offset).saturating_sub(secs_ns(*t));
                        upper = Some(upper.map_or(u, |x: i64| x.min(u)));
                    }
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
            Body::Agent(_) | Body::AgentRun(_) => {
                if let Some(t) = min_t.get(&e.src.file) {
                    for ts in agent_ts(e) {
                        let l = ts.saturating_add(agent_offset).saturating_sub(secs_ns(*t));
                        lower = Some(lower.map_or(l, |x: i64| x.max(l)));
                    }
                }
            }
            _ => {}
        }
    }
    match (lower, upper) {
        (Some(l), Some(u)) if l > u => {
            clocks.notes.push(format!(
                "kernel and agent lines interleave inconsistently by {} s; guest boot placed by the tighter bound",
                secs_fmt((l - u) as f64 / 1e9, 3)
            ));
            Some(u)
        }
        (_, Some(u)) => Some(u),
        (Some(l), None) => Some(l),
        (None, None) => None,
    }
}

/// A host-trace call for [`trace_shift`]: its start (trace clock) and seconds.
#[derive(Debug, Clone, Copy)]
pub struct TracedCall {
    pub start: Nanos,
    pub dur_s: f64,
}

/// What [`trace_shift`] asks of a host trace's calls (those with a start).
pub trait CallTimes {
    /// How many calls there are.
    fn count(&self) -> usize;
    /// How many start in `lo..=hi` once moved by `shift` ns.
    fn inside(&self, shift: Nanos, lo: Nanos, hi: Nanos) -> usize;
    /// How many of 0.5 s or more start, once moved by `shift`, from `before` ns before to
    /// `after` ns after one of `enables`.
    fn heavy_near(&self, shift: Nanos, enables: &[Nanos], before: Nanos, after: Nanos) -> usize;
}

/// The calls one by one (the definition; a trace read once answers by binary search).
impl CallTimes for [TracedCall] {
    fn count(&self) -> usize {
        self.len()
    }

    fn inside(&self, shift: Nanos, lo: Nanos, hi: Nanos) -> usize {
        self.iter()
            .filter(|c| (lo..=hi).contains(&c.start.saturating_add(shift)))
            .count()
    }

    fn heavy_near(&self, shift: Nanos, enables: &[Nanos], before: Nanos, after: Nanos) -> usize {
        self.iter()
            .filter(|c| c.dur_s >= 0.5)
            .filter(|c| {
                let s = c.start.saturating_add(shift);
                enables
                    .iter()
                    .any(|e| s >= e.saturating_sub(before) && s <= e.saturating_add(after))
            })
            .count()
    }
}

const HOUR: Nanos = 3600 * NS_PER_S;

/// The heavy pins (0.5 s or more) that a whole-hour shift of `k` h puts from 1 s before to
/// 2 s after one of the GPU `enables`: a QEMU pins a GPU's BARs as the guest enables it.
pub fn aligned_at<C: CallTimes + ?Sized>(calls: &C, k: i64, enables: &[Nanos]) -> usize {
    calls.heavy_near(k * HOUR, enables, NS_PER_S, 2 * NS_PER_S)
}

/// The whole-hour shift that undoes a journal's zone (`journal_zone_s`, seconds east of
/// UTC): bpftrace's strftime prints local time with the script's literal "Z", so this shift
/// is expected without evidence (as is none). `None` for UTC, an unknown zone or one that
/// is not whole hours.
pub fn zone_undo_shift(journal_zone_s: Option<i64>) -> Option<i64> {
    journal_zone_s
        .filter(|z| *z != 0 && z % 3600 == 0)
        .map(|z| -z / 3600)
}

/// The whole-hour shift that puts the host trace's calls on the boot's clock: 0 when some
/// already fall inside `window`; the unique shift that does (preferring the one that lines
/// heavy pins up with GPU `enables`) otherwise; 0, with a note, when several would.
pub fn trace_shift<C: CallTimes + ?Sized>(
    calls: &C,
    window: Option<(Nanos, Nanos)>,
    enables: &[Nanos],
    journal_zone_s: Option<i64>,
    clocks: &mut Clocks,
) -> i64 {
    let Some((lo, hi)) = window else { return 0 };
    if calls.count() == 0 {
        return 0;
    }
    let inside = |k: i64| calls.inside(k * HOUR, lo, hi);
    let aligned = |k: i64| aligned_at(calls, k, enables);
    if inside(0) > 0 {
        clocks.trace_shift_aligned = aligned(0);
        clocks.trace_shift_expected = true;
        return 0;
    }
    let mut fits: Vec<(i64, usize, usize)> = (-14i64..=14)
        .filter(|k| *k != 0)
        .map(|k| (k, aligned(k), inside(k)))
        .filter(|(_, _, n)| *n > 0)
        .collect();
    if fits.is_empty() {
        clocks.notes.push(format!(
            "none of the {} host trace calls falls inside this boot's time window, at any whole-hour shift: they are not this boot's",
            calls.count()
        ));
        return 0;
    }
    let local = zone_undo_shift(journal_zone_s);
    fits.sort_by_key(|(k, a, n)| (std::cmp::Reverse((*a, Some(*k) == local, *n)), k.abs()));
    let best = fits[0];
    let unique = match fits.get(1) {
        None => true,
        Some(second) => {
            (best.1, Some(best.0) == local, best.2) > (second.1, Some(second.0) == local, second.2)
        }
    };
    if unique && (best.1 > 0 || Some(best.0) == local || fits.len() == 1) {
        clocks.trace_shift_h = Some(best.0);
        clocks.trace_shift_aligned = best.1;
        clocks.trace_shift_expected = Some(best.0) == local;
        clocks.notes.push(format!(
            "the host trace's stamps are {} h {} the journal's clock{}: shifted by {:+} h, which puts {} of its calls inside this boot{}",
            best.0.abs(),
            if best.0 > 0 { "behind" } else { "ahead of" },
            if Some(best.0) == local {
                " (bpftrace printed local time with a literal Z)"
            } else {
                ""
            },
            best.0,
            best.2,
            if best.1 > 0 {
                format!(" and {} heavy pins at GPU enables", best.1)
            } else {
                String::new()
            }
        ));
        return best.0 * HOUR;
    }
    let ks: Vec<String> = fits.iter().map(|(k, ..)| format!("{k:+} h")).collect();
    clocks.notes.push(format!(
        "no host trace call falls inside this boot's time window; shifting its stamps by {} would each put some there, so the offset is ambiguous and not corrected (pass --tz or trace with the journal's clock)",
        ks.join(" or ")
    ));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_shift_is_found_only_when_unambiguous() {
        let t0 = 1_000_000 * NS_PER_S;
        let enables: Vec<Nanos> = (0..4).map(|i| t0 + (20 + 4 * i) * NS_PER_S).collect();
        let window = Some((t0, t0 + 200 * NS_PER_S));
        // pins printed 8 h early (bpftrace in +08:00 printing local time as Z would be late;
        // this trace is in −08:00)
        let calls: Vec<TracedCall> = enables
            .iter()
            .map(|e| TracedCall {
                start: e + NS_PER_S / 10 - 8 * 3600 * NS_PER_S,
                dur_s: 3.2,
            })
            .collect();
        let mut c = Clocks::default();
        let k = trace_shift(&calls[..], window, &enables, None, &mut c);
        assert_eq!(k, 8 * 3600 * NS_PER_S, "{:?}", c.notes);
        assert_eq!(c.trace_shift_h, Some(8));
        // already inside: nothing to do
        let inside: Vec<TracedCall> = calls
            .iter()
            .map(|c| TracedCall {
                start: c.start + 8 * 3600 * NS_PER_S,
                ..*c
            })
            .collect();
        assert_eq!(
            trace_shift(&inside[..], window, &enables, None, &mut Clocks::default()),
            0
        );
        // a 3-hour window and no enables to line up with: +1 h and +2 h both fit
        let long = Some((t0, t0 + 3 * 3600 * NS_PER_S));
        let calls = [TracedCall {
            start: t0 - 1800 * NS_PER_S,
            dur_s: 0.1,
        }];
        let mut c = Clocks::default();
        assert_eq!(trace_shift(&calls[..], long, &[], None, &mut c), 0);
        assert!(
            c.notes.iter().any(|n| n.contains("ambiguous")),
            "{:?}",
            c.notes
        );
    }
}
