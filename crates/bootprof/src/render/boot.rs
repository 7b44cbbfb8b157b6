//! Rendering: the terminal table and a self-contained HTML page (inline CSS and SVG Gantt
//! chart, no scripts, no network).

use std::fmt::Write as _;

use super::short;

use crate::analyze::findings::fixes_line;
use crate::analyze::model::{secs_fmt, Phase, Report};
use crate::estimate::Estimate;

/// How many ids a list in the terminal report shows before "and N more".
const LIST_MAX: usize = 5;

fn bounded(ids: &[String]) -> String {
    let mut v: Vec<String> = ids.iter().take(LIST_MAX).cloned().collect();
    if ids.len() > LIST_MAX {
        v.push(format!("and {} more", ids.len() - LIST_MAX));
    }
    v.join(", ")
}

/// One line on how the boot went.
pub fn state_line(r: &Report) -> String {
    let st = &r.state;
    let mut s = match (st.status, &st.failure) {
        (_, Some(f)) => format!(
            "FAILED at {}: {}{}",
            f.step,
            f.summary,
            f.at_s.map_or(String::new(), |t| format!(
                " ({} s into the boot)",
                secs_fmt(t, 1)
            ))
        ),
        ("unfinished", _) if r.phases.is_empty() => format!(
            "UNFINISHED: {}",
            st.ends_during
                .as_deref()
                .unwrap_or("no phase of the boot is in the inputs")
        ),
        ("unfinished", _) => format!(
            "UNFINISHED: the log ends during {}",
            st.ends_during.as_deref().unwrap_or("the boot")
        ),
        ("stopped", _) => format!(
            "STOPPED: {}",
            st.ends_during
                .as_deref()
                .unwrap_or("the sandbox was stopped before its container started")
        ),
        ("complete", _) => match &st.stopped {
            Some(s) => format!("complete (the container started); {s}"),
            None => "complete (the container started)".to_string(),
        },
        _ => "unknown (the inputs do not show how the boot ended)".to_string(),
    };
    if !st.started_late.is_empty() {
        s.push_str(&format!("; STARTED LATE: {}", st.started_late.join("; ")));
    }
    s
}

/// `≥` before a value that is a lower bound ([`Phase::at_least`]).
fn at_least_mark(at_least: bool) -> &'static str {
    if at_least {
        "≥"
    } else {
        ""
    }
}

/// `dir/file:12` → `file:12` for the terminal.
fn base(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Rows shown in tables: every phase, except the pin calls not tied to a GPU that are guest
/// RAM, or that nothing tells apart (a pin trace without the guest's log), which are folded
/// into one row each (a BAR pin of no known GPU and a call of unknown size keep their own).
fn table_rows(r: &Report) -> Vec<Phase> {
    // (kind, its row's label, what the row sums)
    const FOLDED: [(&str, &str, &str); 2] = [
        ("ram", "RAM", "guest RAM pin calls"),
        ("unclassified", "pins", "pin calls, BAR or RAM not known"),
    ];
    let mut rows: Vec<Phase> = Vec::new();
    let mut folded: [(Option<Phase>, usize); 2] = [(None, 0), (None, 0)];
    for p in &r.phases {
        let slot = FOLDED
            .iter()
            .position(|(k, ..)| {
                p.name == "dma_pinning" && p.gpu.is_none() && p.pin_kind == Some(*k)
            })
            .and_then(|i| folded.get_mut(i));
        let Some((acc, n)) = slot else {
            rows.push(p.clone());
            continue;
        };
        *n += 1;
        match acc {
            None => *acc = Some(p.clone()),
            Some(a) => {
                a.duration_s += p.duration_s;
                if p.end_ns > a.end_ns {
                    a.end_ns = p.end_ns;
                    a.end_s = p.end_s;
                    a.end_line = p.end_line.clone().or(p.start_line.clone());
                }
            }
        }
    }
    for ((acc, n), (_, label, what)) in folded.into_iter().zip(FOLDED) {
        if let Some(mut a) = acc {
            a.label = format!("{label} ×{n}");
            a.detail = format!("{n} {what}; duration is their sum");
            rows.push(a);
        }
    }
    rows.sort_by_key(|x| x.start_ns);
    rows
}

/// The terminal report.
pub fn text(r: &Report) -> String {
    let mut o = String::new();
    summary(&mut o, r);
    clocks(&mut o, r);
    phase_table(&mut o, r);
    pinning(&mut o, r);
    critical_path(&mut o, r);
    findings(&mut o, r);
    input(&mut o, r);
    o
}

/// ` (boot 2 of 3, shim pid 123)`: which boot of its sandbox the report is (nothing when
/// that says nothing).
fn boot_words(r: &Report) -> String {
    r.boot.as_ref().map_or(String::new(), |b| {
        let mut parts = Vec::new();
        if b.boots_of_sandbox > 1 {
            parts.push(format!("boot {} of {}", b.boot, b.boots_of_sandbox));
        }
        if let Some(p) = b.shim_pid {
            parts.push(format!("shim pid {p}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    })
}

/// The report's head: the boot, its total and origin, how it went, its GPUs.
fn summary(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "Boot timeline{}{}: total {} ({}), t0 {}",
        r.sandbox
            .as_ref()
            .map_or(String::new(), |s| format!(" of sandbox {}", short(s, 16))),
        boot_words(r),
        r.total_words(),
        if r.total_from == "kubectl" {
            "kubectl Start Time → Started"
        } else if r.total_s.is_none() {
            "no phase could be timed"
        } else if r.total_at_least {
            "first to last phase the log shows"
        } else {
            "first to last phase"
        },
        r.t0.as_deref()
            .unwrap_or("unknown (no input dates anything)")
    );
    let _ = writeln!(o, "State: {}", state_line(r));
    if r.gpu_count.is_none() {
        let _ = writeln!(o, "GPUs: {}", r.gpu_count_from);
    }
    if let Some(n) = r.gpu_count.filter(|n| *n > 0) {
        let ids: Vec<String> = r.gpus.iter().map(|g| g.bdf.clone()).collect();
        let first = r
            .gpus
            .iter()
            .find_map(|g| {
                Some(format!(
                    " [{}:{}]",
                    g.vendor_id.as_ref()?,
                    g.device_id.as_ref()?
                ))
            })
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "GPUs: {n}{first}: {} (from {})",
            ids.join(" "),
            r.gpu_count_from
        );
    }
}

/// How the inputs' clocks were put on one timeline, and the notes on them.
fn clocks(o: &mut String, r: &Report) {
    let c = &r.clocks;
    let _ = writeln!(
        o,
        "Clocks: guest boot {} (from {}); agent offset {}; max console delay {}",
        c.guest_boot.as_deref().unwrap_or("unknown"),
        c.guest_boot_from,
        c.agent_offset_s.map_or("n/a".into(), |v| {
            let t = secs_fmt(v, 3);
            if t.starts_with('-') {
                format!("{t} s")
            } else {
                format!("+{t} s")
            }
        }),
        c.max_console_delay_s
            .map_or("n/a".into(), |v| format!("{} s", secs_fmt(v, 3)))
    );
    if let (Some(z), true) = (&c.journal_zone, c.journal_zone_from != "not needed") {
        let _ = writeln!(
            o,
            "  journal prefix times read in zone {z} ({})",
            c.journal_zone_from
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "  note: {n}");
    }
}

/// The phases' table ([`table_rows`]), and why some are lower bounds.
fn phase_table(o: &mut String, r: &Report) {
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<16} {:<16} {:>9} {:>9} {:>9}  SOURCE",
        "PHASE", "LABEL", "START s", "END s", "SECONDS"
    );
    let rows = table_rows(r);
    for p in &rows {
        let _ = writeln!(
            o,
            "{:<16} {:<16} {:>9.3} {:>9.3} {:>9}{} {} → {}",
            p.name,
            short(&p.label, 16),
            p.start_s,
            p.end_s,
            format!("{}{:.3}", at_least_mark(p.at_least), p.duration_s),
            if p.estimated { "~" } else { " " },
            base(p.start_line.as_deref().unwrap_or("?")),
            base(p.end_line.as_deref().unwrap_or("(estimated)"))
        );
    }
    if rows.iter().any(|p| p.at_least) {
        let mut why = Vec::new();
        if rows
            .iter()
            .any(|p| p.at_least && p.name != "memory_hotplug")
        {
            why.push("the log starts after the boot began, and the phase may have begun before its first line");
        }
        if rows
            .iter()
            .any(|p| p.at_least && p.name == "memory_hotplug")
        {
            why.push("the host's side of the memory hotplug (pinning the memory before the guest onlines it) is not traced");
        }
        let _ = writeln!(o, "(≥ at least: {})", why.join("; "));
    }
}

/// `; N calls of other processes or boots left out` when the trace had any.
fn foreign_words(foreign_calls: u64) -> String {
    if foreign_calls > 0 {
        format!("; {foreign_calls} calls of other processes or boots left out")
    } else {
        String::new()
    }
}

/// The host's DMA pinning: not traced, or the trace's totals, then its details.
fn pinning(o: &mut String, r: &Report) {
    let s = &r.pin_summary;
    if !s.traced && r.gpu_count.unwrap_or(0) > 0 {
        let _ = writeln!(
            o,
            "\nHost DMA pinning: not traced for this boot (IOMMUFD or no bpftrace): not measured{}",
            foreign_words(s.foreign_calls)
        );
    }
    match s.total_s.filter(|_| s.calls > 0) {
        Some(total) => {
            let _ = writeln!(
            o,
            "\nHost DMA pinning: {} vfio_pin_pages_remote calls (bpftrace){}, {}{} s, {}{:.0} GiB; {} took ≥ 1 s{}",
            s.calls,
            match s.size_unknown {
                0 => String::new(),
                n => format!(
                    " ({n} of them a return whose call line the trace lacks: size and process unknown)"
                ),
            },
            if r.state.started_late.is_empty() {
                ""
            } else {
                "at least (the log starts after the boot began: earlier calls are outside its window) "
            },
            secs_fmt(total, 1),
            if s.size_unknown > 0 { "at least " } else { "" },
            s.bytes as f64 / (1u64 << 30) as f64,
            s.heavy_calls,
            foreign_words(s.foreign_calls)
        );
        }
        // function_graph alone: its calls, no bpftrace totals to state
        None if s.ftrace_calls > 0 => {
            let _ = writeln!(o, "\nHost DMA pinning (no bpftrace pin calls):");
        }
        None => {}
    }
    if s.calls > 0 || s.ftrace_calls > 0 {
        pinning_details(o, r);
    }
}

/// The pin calls' details: the RAM pinning pace, function_graph's calls, the histogram.
fn pinning_details(o: &mut String, r: &Report) {
    let s = &r.pin_summary;
    if let (Some(rate), Some(b)) = (s.ram_s_per_gib, s.ram_backing) {
        let _ = writeln!(o, "  guest RAM pinned at {rate:.3} s/GiB: {b}");
    }
    if s.ftrace_calls > 0 {
        let h: Vec<String> = s.ftrace_heavy.iter().map(|v| format!("{v:.2}")).collect();
        let _ = writeln!(
            o,
            "  function_graph: {} calls, ≥ 1 s: [{}] s",
            s.ftrace_calls,
            h.join(", ")
        );
    }
    if !s.hist.is_empty() {
        let b: Vec<String> = s
            .hist
            .iter()
            .filter(|h| h.2 > 0)
            .map(|(a, b, c)| format!("[{a},{b}) ms: {c}"))
            .collect();
        let _ = writeln!(o, "  @hist: {}", b.join("; "));
    }
}

/// The critical path, a step a line.
fn critical_path(o: &mut String, r: &Report) {
    if r.critical_path.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nCritical path:");
    for st in &r.critical_path {
        let _ = writeln!(
            o,
            "  {:>8} s  {:<16} {:<14} {:>7} s{}{}{}",
            secs_fmt(st.start_s, 1),
            st.phase,
            short(&st.label, 14),
            format!(
                "{}{}",
                at_least_mark(st.at_least),
                secs_fmt(st.duration_s, 1)
            ),
            if st.on_path_s + 0.05 < st.duration_s {
                format!(" ({} s beyond the step before)", secs_fmt(st.on_path_s, 1))
            } else {
                String::new()
            },
            if st.gap_before_s >= 0.5 {
                format!("  (after {:.1} s gap)", st.gap_before_s)
            } else {
                String::new()
            },
            if st.contains.is_empty() {
                String::new()
            } else {
                format!("  contains: {}", st.contains.join(", "))
            }
        );
    }
}

/// The findings with their fixes, and what the fixes save together.
fn findings(o: &mut String, r: &Report) {
    if r.findings.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nFindings:");
    for (i, f) in r.findings.iter().enumerate() {
        let _ = writeln!(
            o,
            "  {}. [{}{}] {}",
            i + 1,
            f.phase,
            f.measured_s.map_or(String::new(), |m| format!(
                " {}{} s",
                at_least_mark(r.phases.iter().any(|p| p.name == f.phase && p.at_least)),
                secs_fmt(m, 1)
            )),
            f.text
        );
        let _ = writeln!(
            o,
            "     fix: {}{}",
            f.fix,
            f.saving_s
                .map_or(String::new(), |s| format!(" (saves ~{} s)", secs_fmt(s, 1)))
        );
    }
    if let Some(line) = fixes_line(r) {
        let _ = writeln!(o, "  {line}");
    }
}

/// What was read: the line counts, the bad lines, and the other boots and sandboxes the
/// inputs hold.
fn input(o: &mut String, r: &Report) {
    let st = &r.stats;
    let _ = writeln!(
        o,
        "\nInput: {} lines, {} events, {} unrecognized, {} other sandboxes' lines; bad lines skipped: {} (json {}, encoding {}, time {}, format {}, out-of-order {})",
        st.lines, st.events, st.unrecognized, st.other_sandbox, st.bad.total(), st.bad.json, st.bad.encoding, st.bad.time, st.bad.format, st.bad.out_of_order
    );
    for e in &st.bad_examples {
        let _ = writeln!(o, "  {e}");
    }
    if let Some(line) = st.wall_clock_line() {
        let _ = writeln!(o, "  {line}");
    }
    if let Some(line) = st.duplicates_line() {
        let _ = writeln!(o, "  {line}");
    }
    if !r.other_boots.is_empty() {
        let b: Vec<String> = r
            .other_boots
            .iter()
            .map(|b| {
                format!(
                    "{}@{} (shim pid {}, {} → {})",
                    b.sandbox.as_deref().unwrap_or("?"),
                    b.boot,
                    b.shim_pid.map_or("?".into(), |p| p.to_string()),
                    b.first.as_deref().unwrap_or("?"),
                    b.last.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "Other boots of this sandbox (use --sandbox ID@N): {}",
            bounded(&b)
        );
    }
    if !r.other_sandboxes.is_empty() {
        let _ = writeln!(
            o,
            "Other sandboxes in the input (use --sandbox): {}",
            bounded(&r.other_sandboxes)
        );
    }
}

/// The estimator's terminal report.
pub fn estimate_text(e: &Estimate) -> String {
    let mut o = String::new();
    let i = &e.input;
    let _ = writeln!(
        o,
        "Estimated boot: {:.0} s ({:.0}:{:02.0}) for {}{:.0} GiB RAM, {} pages{}, {:?} backend, kernel {}.{}",
        e.total_s,
        (e.total_s / 60.0).floor(),
        e.total_s % 60.0,
        match i.gpus {
            0 => String::new(),
            1 => "1 GPU, ".to_string(),
            n => format!("{n} GPUs, "),
        },
        i.memory as f64 / (1u64 << 30) as f64,
        serde_json::to_value(i.page_size).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        if i.prealloc { " (prealloc)" } else { "" },
        i.backend,
        i.kernel.0,
        i.kernel.1
    );
    let _ = writeln!(o, "\n{:<16} {:>9}  FORMULA", "PHASE", "SECONDS");
    for p in &e.phases {
        let _ = writeln!(o, "{:<16} {:>9.1}  {}", p.name, p.seconds, p.formula);
    }
    let _ = writeln!(o, "{:<16} {:>9.1}", "total", e.total_s);
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    if i.gpus == 0 {
        let _ = writeln!(
            o,
            "\nQEMU page tables (VmPTE): {:.1} MiB for guest RAM",
            mib(e.page_table_ram_bytes)
        );
    } else {
        let _ = writeln!(
            o,
            "\nQEMU page tables (VmPTE): {:.1} MiB = guest RAM {:.1} MiB + GPU BARs {:.1} MiB",
            mib(e.page_table_bytes),
            mib(e.page_table_ram_bytes),
            mib(e.page_table_bar_bytes)
        );
    }
    for w in &e.warnings {
        let _ = writeln!(o, "\nwarning: {w}");
    }
    let _ = writeln!(o, "\nConstants:");
    // a VM without GPUs uses none of the GPU constants: list only those it used
    let used = |c: &&crate::estimate::Constant| {
        i.gpus > 0 || !crate::estimate::GPU_CONSTANTS.contains(&c.name)
    };
    for c in e.constants.iter().filter(used) {
        let _ = writeln!(
            o,
            "  {:<28} {:>10.4} {:<9} {}",
            c.name, c.value, c.unit, c.source
        );
    }
    o
}

/// Text escaped for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The colour of a phase in every chart.
pub fn color(name: &str) -> &'static str {
    match name {
        "vm_create" => "#8c8c8c",
        "kernel_boot" => "#4e79a7",
        "pci_enumeration" => "#59a14f",
        "gpu_driver_init" => "#f28e2b",
        "dma_pinning" => "#e15759",
        "cdi_wait" => "#b07aa1",
        "memory_hotplug" => "#76b7b2",
        "container_start" => "#edc948",
        _ => "#bab0ac",
    }
}

/// The Gantt chart of a report's phases: one inline SVG (no scripts), a row per phase (RAM
/// pin calls folded into one), on a 1-2-5 time axis.
pub fn gantt_svg(r: &Report) -> String {
    let rows = table_rows(r);
    let span = rows
        .iter()
        .map(|p| p.end_s)
        .fold(r.total_s.unwrap_or(0.0), f64::max)
        .max(1.0);
    let (left, width, row_h) = (260.0, 900.0, 22.0);
    let height = rows.len() as f64 * row_h + 50.0;
    let x = |s: f64| left + s / span * width;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{height:.0}" role="img" aria-label="boot phases">"#,
        left + width + 70.0
    );
    // axis ticks
    // a 1-2-5 tick step giving at most ~12 ticks, whatever the span
    let raw = (span / 12.0).max(1e-3);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = 0.0;
    while t <= span + 1e-9 {
        let _ = write!(
            svg,
            r##"<line x1="{0:.1}" y1="20" x2="{0:.1}" y2="{1:.0}" stroke="#ddd"/><text x="{0:.1}" y="14" class="tick">{2:.0} s</text>"##,
            x(t),
            height - 20.0,
            t
        );
        t += step;
    }
    for (i, p) in rows.iter().enumerate() {
        let y = 24.0 + i as f64 * row_h;
        let w = (x(p.end_s) - x(p.start_s)).max(1.5);
        let _ = write!(
            svg,
            r#"<text x="4" y="{:.1}" class="lab">{} {}</text><rect x="{:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}" rx="2"{}><title>{} {}: {:.3} s ({:.3} → {:.3} s) — {}; {} → {}</title></rect>"#,
            y + 14.0,
            esc(p.name),
            esc(&short(&p.label, 16)),
            x(p.start_s),
            row_h - 6.0,
            color(p.name),
            if p.estimated {
                r#" fill-opacity="0.5""#
            } else {
                ""
            },
            esc(p.name),
            esc(&p.label),
            p.duration_s,
            p.start_s,
            p.end_s,
            esc(&p.detail),
            esc(p.start_line.as_deref().unwrap_or("?")),
            esc(p.end_line.as_deref().unwrap_or("estimated"))
        );
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="dur">{:.1} s</text>"#,
            x(p.start_s) + w + 4.0,
            y + 13.0,
            p.duration_s
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A self-contained HTML page: summary, Gantt chart of the phases, table, findings.
pub fn html(r: &Report) -> String {
    let rows = table_rows(r);
    let svg = gantt_svg(r);

    let mut o = String::new();
    let _ = write!(
        o,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vmtune boot timeline</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}}
h1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}}
table{{border-collapse:collapse}} td,th{{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}
.tick{{font-size:11px;fill:#666;text-anchor:middle}} .lab{{font-size:12px}} .dur{{font-size:11px;fill:#444}}
.fix{{color:#2a6}} code{{font-size:12px}}
</style></head><body>
<h1>Boot timeline{}</h1>
<p>Total <b>{}</b> ({}); origin {}; {} GPUs.</p>
<p>State: {}</p>
"#,
        r.sandbox.as_ref().map_or(String::new(), |s| format!(
            " — sandbox <code>{}</code>",
            esc(s)
        )),
        esc(&r.total_words()),
        esc(r.total_from),
        esc(r.t0.as_deref().unwrap_or("unknown")),
        r.gpu_count.map_or("unknown".to_string(), |n| n.to_string()),
        esc(&state_line(r))
    );
    o.push_str(&svg);
    o.push_str("\n<h2>Critical path</h2><ol>");
    for st in &r.critical_path {
        let _ = write!(
            o,
            "<li>{} {} — {}{} s{}</li>",
            esc(st.phase),
            esc(&st.label),
            if st.at_least { "at least " } else { "" },
            secs_fmt(st.duration_s, 1),
            if st.contains.is_empty() {
                String::new()
            } else {
                format!(" (contains {})", esc(&st.contains.join(", ")))
            }
        );
    }
    o.push_str("</ol>\n<h2>Findings</h2><ol>");
    for f in &r.findings {
        let _ = write!(
            o,
            "<li><b>{}</b>{}: {}<br><span class=\"fix\">Fix: {}{}</span></li>",
            esc(f.phase),
            f.measured_s
                .map_or(String::new(), |m| format!(" ({} s)", secs_fmt(m, 1))),
            esc(&f.text),
            esc(&f.fix),
            f.saving_s
                .map_or(String::new(), |s| format!(" (saves ~{} s)", secs_fmt(s, 1)))
        );
    }
    o.push_str("</ol>\n");
    if let Some(line) = fixes_line(r) {
        let _ = write!(o, "<p>{}</p>", esc(&line));
    }
    o.push_str("<h2>Phases</h2><table><tr><th>phase</th><th>label</th><th>start s</th><th>end s</th><th>seconds</th><th>source</th></tr>");
    for p in &rows {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=n>{:.3}</td><td class=n>{:.3}</td><td class=n>{}{:.3}{}</td><td><code>{} → {}</code></td></tr>",
            esc(p.name),
            esc(&p.label),
            p.start_s,
            p.end_s,
            at_least_mark(p.at_least),
            p.duration_s,
            if p.estimated { "~" } else { "" },
            esc(p.start_line.as_deref().unwrap_or("?")),
            esc(p.end_line.as_deref().unwrap_or("estimated"))
        );
    }
    let st = &r.stats;
    let _ = write!(
        o,
        "</table>\n<h2>Input</h2><p>{} lines, {} events; bad lines skipped: {} (JSON {}, encoding {}, time {}, format {}, out of order {}).</p>",
        st.lines, st.events, st.bad.total(), st.bad.json, st.bad.encoding, st.bad.time, st.bad.format, st.bad.out_of_order
    );
    if let Some(line) = st.duplicates_line() {
        let _ = write!(o, "<p>{}.</p>", esc(&line));
    }
    for n in &r.clocks.notes {
        let _ = write!(o, "<p>Clock note: {}</p>", esc(n));
    }
    o.push_str("\n</body></html>\n");
    o
}
