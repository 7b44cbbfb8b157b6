//! The boot analysis, one module per step (ripgrep's searcher/printer split is the model):
//!
//! 1. [`crate::analyze::select`]: the boots in the inputs, and the records of one;
//! 2. [`crate::analyze::clocks`]: every clock on the host's axis;
//! 3. [`crate::analyze::facts`]: dated facts (GPUs, enables, binds, CDI tries, pins, errors);
//! 4. [`crate::analyze::join`]: pins joined to this VM and its GPUs, driver init per GPU;
//! 5. [`crate::analyze::phases`]: the named phases;
//! 6. [`crate::analyze::state`]: complete / failed / unfinished, started late;
//! 7. [`crate::analyze::critical`]: the critical path;
//! 8. [`crate::analyze::findings`]: conclusions and fixes.
//!
//! [`analyze`] runs steps 2–8 on the records of one boot and returns its [`Report`]: a fleet
//! view calls it once per [`crate::analyze::select::Boots::records`].

pub mod clocks;
pub mod critical;
pub mod facts;
pub mod findings;
pub mod join;
pub mod model;
pub mod phases;
pub mod select;
pub mod state;
pub mod traces;

use std::borrow::Cow;

use self::clocks::{secs, Axis, ClockOptions};
use self::facts::Facts;
use self::model::{gib, Clocks, Gpu, PinCall, PinSummary};
use self::select::Selection;
use self::traces::Traces;
use crate::parse::bpftrace::BpfLine;
use crate::parse::ingest::{Body, Event, Ingest};
use crate::parse::time::{format_rfc3339, Nanos};

pub use self::critical::critical_path;
pub use self::model::{
    BootState, BootSummary, CdiSummary, CriticalStep, Failure, Finding, Phase, Report,
    DEFAULT_CDI_MAX_TRIES, DMA_ENTRY_LIMIT, PIN_PHASE_MIN_S,
};
pub use self::select::SelectError as TimelineError;

/// What `vmtune boot analyze` passes in.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// `ID`, a unique prefix, or `ID@N` (the N-th boot of that sandbox).
    pub sandbox: Option<String>,
    pub clocks: ClockOptions,
}

/// Build the report of one boot (the `sandbox` one, or the busiest).
pub fn build(ing: &Ingest, sandbox: Option<&str>) -> Result<Report, TimelineError> {
    build_with(
        ing,
        &AnalyzeOptions {
            sandbox: sandbox.map(str::to_string),
            ..AnalyzeOptions::default()
        },
    )
}

/// [`build`] with clock options.
pub fn build_with(ing: &Ingest, opts: &AnalyzeOptions) -> Result<Report, TimelineError> {
    let sel = select::select(ing, opts.sandbox.as_deref())?;
    if sel.events.is_empty() {
        return Err(TimelineError::NoEvents {
            lines: ing.stats.lines,
            bad: ing.stats.bad.total(),
            why: ing.stats.why_no_events(),
        });
    }
    Ok(analyze(&sel, &opts.clocks))
}

/// Name in `r` the other sandboxes a [`crate::parse::ingest::Census`] counted, when only the
/// busiest sandbox's lines were parsed.
pub fn other_sandboxes_from(r: &mut Report, census: &crate::parse::ingest::Census) {
    r.other_sandboxes = census
        .sandboxes
        .iter()
        .map(|(s, _)| s)
        .filter(|s| Some(*s) != r.sandbox.as_ref())
        .cloned()
        .collect();
}

/// What guest RAM pinning at `s_per_gib` says about its pages: the study's hotplug pinned
/// 4 KiB pages at 0.125 s/GiB (kernel commit 4d83de6da265: 0.27 s/GiB cold, 0.0175 s/GiB
/// pre-faulted); hugetlbfs pins at 0.0033 s/GiB.
fn ram_backing(s_per_gib: f64) -> &'static str {
    if s_per_gib >= 0.05 {
        "small pages"
    } else if s_per_gib >= 0.008 {
        "small pages, pre-faulted"
    } else {
        "hugepages or pre-faulted"
    }
}

/// Steps 2–8 on the records of one boot.
pub fn analyze(sel: &Selection<'_>, opts: &ClockOptions) -> Report {
    let files = &sel.ing.files;
    // 2–3: the clocks, the host's traces and the dated facts, on one axis
    let (traces, guest) = traces_and_guest(sel);
    let mut clocks = Clocks::default();
    let mut axis = clocks::align(&guest, sel.clocks, opts, traces.kubectl, &mut clocks);
    let f = facts_of(&guest, &axis, &traces, files, &mut clocks);
    axis.trace_shift = trace_clock(sel, opts, &traces, &f, &mut clocks);
    // 4: the pins joined to this VM and its GPUs
    let j = join_pins(&f, &traces, &axis, &mut clocks);
    // 5: the phases, on a timeline from the boot's origin
    let built = phases::build(&f, &j, &axis, files);
    let mut tl = Timeline::new(built.phases, &f, &j);
    let cdi = built.cdi;
    let gpus = gpus(&f, &j, tl.t0);
    let (gpu_count, gpu_count_from) = gpu_count(&f, &gpus, cdi.as_ref());
    let pins = pin_calls(&j, tl.t0, files);
    let pin_summary = pin_summary(&j, &traces);
    // 6: how the boot went, and what of it is a lower bound
    let state = state::assess(
        &f,
        &tl.phases,
        cdi.as_ref(),
        gpu_count.unwrap_or(0),
        tl.t0,
        files,
    );
    let total_at_least = tl.mark_lower_bounds(&state, cdi.as_ref());
    // 7: the critical path
    let critical_path = critical_path(&tl.phases);
    let report = Report {
        sandbox: sel.boot.as_ref().and_then(|b| b.sandbox.clone()),
        boot: sel.boot.clone(),
        other_boots: sel.other_boots.clone(),
        other_sandboxes: sel.other_sandboxes.clone(),
        files: files.clone(),
        t0: if relative_only(&axis, &traces, &guest) {
            Some("guest boot".to_string())
        } else {
            tl.origin.map(format_rfc3339)
        },
        total_s: tl.total_s,
        total_from: tl.total_from,
        total_at_least,
        state,
        gpu_count,
        gpu_count_from,
        gpus,
        phases: tl.phases,
        pins,
        pin_summary,
        cdi,
        critical_path,
        bar_assignment: bar_assignment(&f, files),
        findings: Vec::new(),
        fixes_save_s: None,
        clocks,
        stats: sel.ing.stats.clone(),
    };
    // 8: the findings
    with_findings(report)
}

/// The host's traces and kubectl output (read once for a fleet's node, here otherwise),
/// and the boot's other records.
fn traces_and_guest<'a>(sel: &Selection<'a>) -> (Cow<'a, Traces>, Vec<&'a Event>) {
    match sel.traces {
        Some(t) => (Cow::Borrowed(t), sel.events.clone()),
        None => {
            let guest = sel
                .events
                .iter()
                .copied()
                .filter(|e| !crate::analyze::traces::is_trace(e))
                .collect();
            (Cow::Owned(Traces::read(sel.events.iter().copied())), guest)
        }
    }
}

/// The dated facts of the guest's records, with the kubectl times of this boot; their
/// notes and the traces' disagreements go to `clocks`.
fn facts_of(
    guest: &[&Event],
    axis: &Axis,
    traces: &Traces,
    files: &[String],
    clocks: &mut Clocks,
) -> Facts {
    let mut f = facts::collect(guest, axis);
    facts::kubectl_of_this_boot(&mut f, &traces.pods, files);
    clocks.notes.append(&mut f.notes);
    clocks.disagreements += traces.pin_disagreements;
    f
}

/// The host trace on the boot's clock: the shift given (and how well it fits this boot,
/// for the fleet's vote on it), else the one inferred.
fn trace_clock(
    sel: &Selection<'_>,
    opts: &ClockOptions,
    traces: &Traces,
    f: &Facts,
    clocks: &mut Clocks,
) -> Nanos {
    let enables: Vec<Nanos> = f.enables.iter().map(|(_, m)| m.t).collect();
    let zone = clocks::journal_zone_known(sel.clocks, opts);
    match opts.trace_shift_h {
        Some(k) => {
            // how well the given shift fits this boot, for the fleet's vote on it
            clocks.trace_shift_aligned = clocks::aligned_at(traces, k, &enables);
            clocks.trace_shift_expected = k == 0 || Some(k) == clocks::zone_undo_shift(zone);
            if k != 0 {
                clocks.trace_shift_h = Some(k);
                clocks.notes.push(format!(
                    "the host trace's stamps are shifted by {k:+} h, as for the other boots of this node"
                ));
            }
            k * 3600 * crate::parse::time::NS_PER_S
        }
        None => clocks::trace_shift(traces, f.window(), &enables, zone, clocks),
    }
}

/// The trace's pins near the boot joined to this VM and its GPUs; the join's notes and how
/// well its pins fit the boot go to `clocks`.
fn join_pins(f: &Facts, traces: &Traces, axis: &Axis, clocks: &mut Clocks) -> join::Join {
    let pins = join::TracePins {
        near: traces.near(join::window(f), axis.trace_shift),
        total: traces.pins.len() as u64,
        pids: &traces.pids,
    };
    let j = join::join(f, &pins, axis.boot);
    clocks.notes.extend(j.notes.iter().cloned());
    clocks.trace_fit = j.fit(f, axis.boot);
    j
}

/// The phases on a timeline from the boot's origin, and the boot's total.
struct Timeline {
    /// The earliest dated instant; no origin when nothing is dated (an ftrace trace
    /// alone): never the epoch.
    origin: Option<Nanos>,
    /// The origin, or 0.
    t0: Nanos,
    /// In order of start (the longer first), with seconds from `t0`.
    phases: Vec<Phase>,
    total_s: Option<f64>,
    /// `kubectl` or `timeline`.
    total_from: &'static str,
}

impl Timeline {
    fn new(mut phases: Vec<Phase>, f: &Facts, j: &join::Join) -> Self {
        let origin = phases
            .iter()
            .map(|p| p.start_ns)
            .chain(f.kube_start.map(|m| m.t))
            .min()
            .or(f.first_any.map(|m| m.t))
            .or(j.pins.iter().filter_map(|p| p.start).min());
        let t0 = origin.unwrap_or(0);
        for p in &mut phases {
            p.start_s = secs(p.start_ns, t0);
            p.end_s = secs(p.end_ns, t0);
        }
        phases.sort_by(|a, b| a.start_ns.cmp(&b.start_ns).then(b.end_ns.cmp(&a.end_ns)));
        // no phase, no kubectl times: the length is unknown, not 0
        let (total_s, total_from) = match (f.kube_start, f.kube_started) {
            (Some(a), Some(b)) if b.t > a.t => (Some(secs(b.t, a.t)), "kubectl"),
            _ => (
                phases.iter().map(|p| p.end_ns).max().map(|e| secs(e, t0)),
                "timeline",
            ),
        };
        Timeline {
            origin,
            t0,
            phases,
            total_s,
            total_from,
        }
    }

    /// Mark the phases that a log starting late may have cut, and tell whether the total
    /// is a lower bound. What such a log shows of a phase it may have cut is a lower bound
    /// (a pin call is timed whole: its sum is, see the pin summary), as is an untraced
    /// memory hotplug (marked by `phases::build`).
    fn mark_lower_bounds(&mut self, state: &BootState, cdi: Option<&CdiSummary>) -> bool {
        let late = !state.started_late.is_empty();
        for p in &mut self.phases {
            p.at_least |= p.name != "dma_pinning" && state::cut_by_late_start(p.name, late, cdi);
        }
        self.total_s.is_some()
            && self.total_from == "timeline"
            && (late || state.status == "unfinished")
    }
}

/// Each GPU the facts name: when it was found and enabled, its driver init and BAR pins.
fn gpus(f: &Facts, j: &join::Join, t0: Nanos) -> Vec<Gpu> {
    f.gpus
        .iter()
        .map(|g| {
            let init = j.inits.iter().find(|i| i.bdf == g.bdf);
            let enable = f
                .enables
                .iter()
                .find(|(b, _)| *b == g.bdf)
                .map(|(_, m)| m.t);
            Gpu {
                bdf: g.bdf.clone(),
                vendor_id: g.vendor.map(|v| format!("{v:04x}")),
                device_id: g.device.map(|d| format!("{d:04x}")),
                largest_bar: g.largest_bar(),
                found_s: g.found.map(|m| secs(m.t, t0)),
                enabled_s: enable.map(|t| secs(t, t0)),
                driver_init_s: init.and_then(|i| Some(secs(i.end?, i.enable.t))),
                driver_init_estimated: init.is_some_and(|i| i.estimated),
                pin_s: (!j.pins.is_empty()).then(|| {
                    j.pins
                        .iter()
                        .filter(|p| p.kind == "bar" && p.gpu.as_deref() == Some(g.bdf.as_str()))
                        .map(|p| p.pin.dur_s)
                        .sum()
                }),
            }
        })
        .collect()
}

/// How many GPUs the VM has (the largest count any input shows), and where that comes from.
fn gpu_count(f: &Facts, gpus: &[Gpu], cdi: Option<&CdiSummary>) -> (Option<usize>, String) {
    let enumerated = f.gpus.iter().filter(|g| g.found.is_some()).count();
    let requested = cdi.map_or(0, |c| c.devices as usize);
    // a count of 0 only from an enumeration seen: the guest kernel from its start to
    // running init (PCI enumeration lies between), or a display it enumerated
    let enumeration_seen = (f.kernel_min_t.is_some_and(|t| t <= 1.0) && f.run_init.is_some())
        || !f.emulated_displays.is_empty();
    let counted = gpus.len().max(requested);
    let gpu_count = (counted > 0 || enumeration_seen).then_some(counted);
    let mut from = if gpu_count.is_none() {
        "unknown: no input shows the guest's PCI enumeration, a GPU driver enabling a GPU or a CDI request".to_string()
    } else if requested > gpus.len() {
        format!(
            "the CDI request ({requested} devices); the log shows {} ({enumerated} enumerated)",
            gpus.len()
        )
    } else if enumerated == gpus.len() {
        "the guest's PCI enumeration".to_string()
    } else {
        format!("the guest's PCI enumeration ({enumerated}) and its GPU driver's enables")
    };
    if !f.emulated_displays.is_empty() {
        from.push_str(&format!(
            "; not counted: emulated display {}",
            f.emulated_displays.join(", ")
        ));
    }
    (gpu_count, from)
}

/// This VM's pin calls in order of start (those without one last).
fn pin_calls(j: &join::Join, t0: Nanos, files: &[String]) -> Vec<PinCall> {
    let mut order: Vec<usize> = (0..j.pins.len()).collect();
    order.sort_by_key(|&i| j.pins.get(i).and_then(|p| p.start).unwrap_or(Nanos::MAX));
    order
        .iter()
        .filter_map(|&i| j.pins.get(i))
        .map(|p| PinCall {
            start_s: p.start.map(|s| secs(s, t0)),
            duration_s: p.pin.dur_s,
            bytes: p.pin.size,
            npage: p.pin.npage,
            vaddr: p.pin.vaddr.map(|v| format!("{v:#x}")),
            pid: p.pin.pid,
            gpu: p.gpu.clone(),
            kind: p.kind,
            source: p.pin.source,
            line: p.pin.src.at(files),
        })
        .collect()
}

/// The host pinning of this VM added up, with the guest RAM's pace and what backs it.
fn pin_summary(j: &join::Join, traces: &Traces) -> PinSummary {
    let ram: Vec<&join::JoinedPin> = j
        .pins
        .iter()
        .filter(|p| p.kind == "ram" && p.pin.dur_s >= crate::analyze::model::PIN_PHASE_MIN_S)
        .collect();
    let ram_gib: f64 = ram.iter().filter_map(|p| p.pin.size).map(gib).sum();
    let ram_s: f64 = ram.iter().map(|p| p.pin.dur_s).sum();
    let ram_s_per_gib = (ram_gib >= 1.0).then(|| ram_s / ram_gib);
    PinSummary {
        traced: !j.pins.is_empty() || traces.ftrace_calls > 0,
        calls: j.pins.len() as u64,
        total_s: (!j.pins.is_empty()).then(|| j.pins.iter().map(|p| p.pin.dur_s).sum()),
        heavy_calls: j.pins.iter().filter(|p| p.pin.dur_s >= 1.0).count() as u64,
        bytes: j.pins.iter().filter_map(|p| p.pin.size).sum(),
        size_unknown: j.pins.iter().filter(|p| p.pin.size.is_none()).count() as u64,
        ram_s_per_gib,
        ram_backing: ram_s_per_gib.map(ram_backing),
        hist: traces.hist.iter().map(|((a, b), c)| (*a, *b, *c)).collect(),
        ftrace_calls: traces.ftrace_calls,
        ftrace_heavy: traces.ftrace_heavy.clone(),
        map_ioctls: traces.map_ioctls,
        iommufd_maps: traces.iommufd_maps,
        foreign_calls: j.foreign_calls,
        foreign_pids: j.foreign_pids.clone(),
    }
}

/// Only guest-relative times exist: the guest boot is the axis's 0 and every record is one
/// a guest-relative timeline shows (kernel, ftrace, a histogram, a banner).
fn relative_only(axis: &Axis, traces: &Traces, guest: &[&Event]) -> bool {
    axis.boot == Some(0)
        && traces.relative_only
        && guest.iter().all(|e| {
            axis.host(e).is_none()
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

/// The PCI resources of GPUs the guest could not assign: `None` unless a GPU's (or an
/// unknown device's) BAR failed or the GPU driver found a BAR of 0M. A device the guest
/// enumerated as something else is left out; a bridge's window is kept, as the cause above
/// a GPU's.
fn bar_assignment(f: &Facts, files: &[String]) -> Option<model::BarAssignment> {
    let named = |bdf: &str| {
        f.gpus.iter().any(|g| g.bdf == bdf)
            || f.nvrm_bar_invalid.iter().any(|(_, b, _)| b == bdf)
            || f.probe_failed.iter().any(|(_, b, _, _)| b == bdf)
    };
    let bridge = |b: &facts::BarFailed| {
        b.name == "bridge window"
            || b.name
                .strip_prefix("BAR ")
                .and_then(|n| n.parse::<u8>().ok())
                .is_some_and(|n| n > 6)
    };
    let mut kept: Vec<&facts::BarFailed> = f
        .bar_failures
        .iter()
        .filter(|b| named(&b.bdf) || bridge(b) || !f.non_gpus.contains(&b.bdf))
        .collect();
    // the devices' own first, then the bridges above them (each in log order)
    kept.sort_by_key(|b| bridge(b));
    let failures: Vec<model::BarFailure> = kept
        .into_iter()
        .map(|b| model::BarFailure {
            bdf: b.bdf.clone(),
            resource: b.name.clone(),
            bytes: b.size,
            pref64: b.pref64,
            gpu: named(&b.bdf) && !bridge(b),
            line: b.m.src.at(files),
        })
        .collect();
    let device = failures.iter().any(|b| b.gpu)
        || f.bar_failures
            .iter()
            .any(|b| !bridge(b) && !f.non_gpus.contains(&b.bdf));
    if !device && f.nvrm_bar_invalid.is_empty() {
        return None;
    }
    Some(model::BarAssignment {
        failures,
        realloc_hint: f.pci_realloc.is_some(),
        nvrm_invalid: f
            .nvrm_bar_invalid
            .iter()
            .map(|(bar, bdf, _)| format!("{bdf} {bar}"))
            .collect(),
        probe_failed: f
            .probe_failed
            .iter()
            .map(|(d, bdf, e, _)| format!("{d} {bdf} {e}"))
            .collect(),
    })
}

/// The report with its findings, and what their fixes save together.
fn with_findings(mut report: Report) -> Report {
    report.findings = crate::analyze::findings::findings(&report);
    report.fixes_save_s = report
        .findings
        .iter()
        .filter_map(|f| f.saving_s)
        .reduce(|a, b| a + b);
    report
}
