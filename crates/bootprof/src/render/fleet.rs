//! Rendering the fleet view: a terminal table, JSON lines, a self-contained HTML page
//! (histograms per phase, the outliers' Gantt charts; inline SVG, no scripts) and
//! node_exporter's textfile-collector format.
//!
//! JSON lines: one object per boot (`"type": "boot"`, a [`BootRow`]), then one per phase and
//! one for the total (`"type": "phase"`, a [`PhaseStats`]), one per slow boot (`"type":
//! "slowest"`), one per group (`"type": "group"`, a [`Group`]), one per sandbox seen without
//! a boot (`"type": "no_boot"`), and last one summary (`"type": "fleet"`).

use std::fmt::Write as _;

use super::short;

use serde::Serialize;

use crate::analyze::model::secs_fmt;
use crate::fleet::{BootRow, Fleet, Group, PhaseCell, PhaseStats, PHASES};
use crate::render::boot::{color, esc, gantt_svg};

fn opt_s(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| secs_fmt(v, digits))
}

/// How a boot is named: `node sandbox@N`.
pub fn boot_name(r: &BootRow, id_chars: usize) -> String {
    format!(
        "{} {}@{}",
        r.node.as_deref().unwrap_or("?"),
        short(r.sandbox.as_deref().unwrap_or("?"), id_chars),
        r.boot
    )
}

/// A phase's value in the table: its seconds, marked when it is not counted (`~`
/// estimated, `*` otherwise left out), `-` when missing.
fn cell(c: Option<&PhaseCell>) -> String {
    match c {
        Some(PhaseCell {
            s: Some(s),
            excluded,
            ..
        }) => {
            let mark = match excluded {
                None => "",
                Some(crate::fleet::Excluded::Estimated) => "~",
                Some(_) => "*",
            };
            format!("{}{mark}", secs_fmt(*s, 1))
        }
        _ => "-".to_string(),
    }
}

/// A boot's GPU count, `?` when no input shows it.
fn gpus_word(g: Option<usize>) -> String {
    g.map_or_else(|| "?".to_string(), |n| n.to_string())
}

fn state_word(r: &BootRow) -> String {
    let mut s = match r.failure_step {
        Some(step) => format!("failed:{step}"),
        None => r.state.to_string(),
    };
    if r.started_late {
        s.push_str(",late");
    }
    s
}

/// Column headers for the phases (short).
const PHASE_HEAD: [&str; 8] = [
    "vm_create",
    "kernel",
    "pci_enum",
    "gpu_init",
    "dma_pin",
    "cdi_wait",
    "mem_hotpl",
    "ctr_start",
];

fn states_line(f: &Fleet) -> String {
    let get = |k: &str| f.states.get(k).copied().unwrap_or(0);
    let stopped = match get("stopped") {
        0 => String::new(),
        n => format!(", {n} stopped"),
    };
    format!(
        "{} complete, {} failed, {} unfinished{stopped}, {} unknown; {} started late",
        get("complete"),
        get("failed"),
        get("unfinished"),
        get("unknown"),
        f.started_late
    )
}

fn excluded_words(st: &PhaseStats) -> String {
    if st.excluded.is_empty() {
        return String::new();
    }
    st.excluded
        .iter()
        .map(|(k, n)| format!("{} {n}", k.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The terminal report: a row per boot, then the fleet's percentiles, slowest boots, boots
/// that did not complete, and the groupings.
pub fn text(f: &Fleet) -> String {
    let mut o = String::new();
    text_head(&mut o, f);
    boot_table(&mut o, f);
    percentiles(&mut o, f);
    slowest(&mut o, f);
    incomplete(&mut o, f);
    groupings(&mut o, f);
    let st = &f.stats;
    let _ = writeln!(
        o,
        "\nInput: {} lines, {} events, {} unrecognized; bad lines skipped: {}",
        st.lines,
        st.events,
        st.unrecognized,
        st.bad.total()
    );
    if let Some(line) = st.wall_clock_line() {
        let _ = writeln!(o, "  {line}");
    }
    if let Some(line) = st.duplicates_line() {
        let _ = writeln!(o, "  {line}");
    }
    o
}

/// The plural ending `s` unless `n` is 1.
fn plural(n: usize, s: &'static str) -> &'static str {
    if n == 1 {
        ""
    } else {
        s
    }
}

/// How many boots on how many nodes, how they went, the sandboxes without a boot, the
/// notes.
fn text_head(o: &mut String, f: &Fleet) {
    let _ = writeln!(
        o,
        "Fleet: {} boots on {} node{} ({}), from {} file{}",
        f.rows.len(),
        f.nodes.len(),
        plural(f.nodes.len(), "s"),
        states_line(f),
        f.files.len(),
        plural(f.files.len(), "s")
    );
    if !f.without_boot.is_empty() {
        let _ = writeln!(
            o,
            "  and {} sandbox{} whose lines show no boot (no phase, no failure: a VM already running, another's teardown), not listed",
            f.without_boot.len(),
            plural(f.without_boot.len(), "es")
        );
    }
    for n in &f.notes {
        let _ = writeln!(o, "  note: {n}");
    }
}

/// A row per boot: its node, id, GPUs, pages, state, total, each phase and its slow phase.
fn boot_table(o: &mut String, f: &Fleet) {
    let _ = writeln!(o);
    let mut head = format!(
        "{:<16} {:<16} {:>4} {:<9} {:<18} {:>8}",
        "NODE", "SANDBOX@BOOT", "GPUS", "PAGES", "STATE", "TOTAL s"
    );
    for h in PHASE_HEAD {
        let _ = write!(head, " {h:>9}");
    }
    head.push_str("  SLOW PHASE (over median)");
    let _ = writeln!(o, "{head}");
    for r in &f.rows {
        let mut line = format!(
            "{:<16} {:<16} {:>4} {:<9} {:<18} {:>8}",
            short(r.node.as_deref().unwrap_or("?"), 16),
            format!(
                "{}@{}",
                short(r.sandbox.as_deref().unwrap_or("?"), 13),
                r.boot
            ),
            gpus_word(r.gpus),
            r.page_size.unwrap_or("?"),
            short(&state_word(r), 18),
            opt_s(r.total_s, 1)
        );
        for k in PHASES {
            let _ = write!(line, " {:>9}", cell(r.phases.get(k)));
        }
        if let Some(sp) = &r.slow_phase {
            let _ = write!(
                line,
                "  {} +{} s",
                sp.phase,
                secs_fmt(sp.over_median_s.max(0.0), 1)
            );
        }
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(
        o,
        "(~ estimated, * left out of the percentiles — see below; - no such phase; seconds per boot, summed over GPUs and pin calls)"
    );
}

/// Each phase's and the total's percentiles, and the boots left out of them.
fn percentiles(o: &mut String, f: &Fleet) {
    let _ = writeln!(
        o,
        "\nPhases across the fleet (nearest-rank percentiles over the boots where the phase is counted):"
    );
    let _ = writeln!(
        o,
        "{:<16} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}  LEFT OUT",
        "PHASE", "BOOTS", "min s", "p50 s", "p90 s", "p99 s", "max s"
    );
    for st in f.phases.iter().chain(std::iter::once(&f.total)) {
        let _ = writeln!(
            o,
            "{:<16} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}  {}",
            st.phase,
            st.n,
            opt_s(st.min, 1),
            opt_s(st.p50, 1),
            opt_s(st.p90, 1),
            opt_s(st.p99, 1),
            opt_s(st.max, 1),
            excluded_words(st)
        );
    }
}

/// The slowest complete boots, each with the phase furthest above its fleet median.
fn slowest(o: &mut String, f: &Fleet) {
    if f.slowest.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nSlowest complete boots, and the phase furthest above its fleet median:"
    );
    for (i, &k) in f.slowest.iter().enumerate() {
        let Some(r) = f.rows.get(k) else { continue };
        let _ = writeln!(
            o,
            "  {:>2}. {:<32} {:>7} s  {} GPUs, {}{}",
            i + 1,
            boot_name(r, 16),
            opt_s(r.total_s, 1),
            gpus_word(r.gpus),
            r.page_size.unwrap_or("pages unknown"),
            r.slow_phase.as_ref().map_or(String::new(), |sp| format!(
                "  — {} {} s (+{} s over the median {} s)",
                sp.phase,
                secs_fmt(sp.s, 1),
                secs_fmt(sp.over_median_s.max(0.0), 1),
                secs_fmt(sp.median_s, 1)
            ))
        );
    }
}

/// The first 20 boots without a total, with their state and first finding.
fn incomplete(o: &mut String, f: &Fleet) {
    if f.incomplete.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nBoots without a total ({}): not complete, or their log starts after they began:",
        f.incomplete.len()
    );
    for &k in f.incomplete.iter().take(20) {
        let Some(r) = f.rows.get(k) else { continue };
        let _ = writeln!(
            o,
            "  {:<32} {:<18} {}",
            boot_name(r, 16),
            state_word(r),
            short(r.finding.as_deref().unwrap_or(""), 140)
        );
    }
    if f.incomplete.len() > 20 {
        let _ = writeln!(o, "  and {} more (see --json)", f.incomplete.len() - 20);
    }
}

/// The boots grouped by node, by GPU count and by page size: a table each.
fn groupings(o: &mut String, f: &Fleet) {
    for (by, title) in [
        ("node", "By node"),
        ("gpus", "By GPU count"),
        (
            "page_size",
            "By page size (from the host's RAM pinning pace)",
        ),
    ] {
        let _ = writeln!(o, "\n{title}:");
        let _ = writeln!(
            o,
            "  {:<18} {:>6} {:>9} {:>7} {:>11} {:>8} {:>5} {:>9} {:>9} {:>9}  LARGEST PHASE (p50)",
            "",
            "BOOTS",
            "COMPLETE",
            "FAILED",
            "UNFINISHED",
            "UNKNOWN",
            "LATE",
            "TOTAL p50",
            "p90",
            "max"
        );
        for g in f.groups.iter().filter(|g| g.by == by) {
            let get = |k: &str| g.states.get(k).copied().unwrap_or(0);
            let _ = writeln!(
                o,
                "  {:<18} {:>6} {:>9} {:>7} {:>11} {:>8} {:>5} {:>9} {:>9} {:>9}  {}",
                short(g.key.as_deref().unwrap_or("unknown"), 18),
                g.boots,
                get("complete"),
                get("failed"),
                get("unfinished"),
                get("unknown"),
                g.started_late,
                opt_s(g.total.p50, 1),
                opt_s(g.total.p90, 1),
                opt_s(g.total.max, 1),
                largest_phase_words(g)
            );
        }
    }
    if let Some(n) = f.states.get("stopped").filter(|n| **n > 0) {
        let _ = writeln!(
            o,
            "  ({n} stopped boot{}, stopped before its container started, in BOOTS only)",
            plural(*n, "s")
        );
    }
}

/// `cdi_wait 41.2 s`: a group's largest phase and its median.
fn largest_phase_words(g: &Group) -> String {
    g.largest_phase.map_or(String::new(), |p| {
        format!("{p} {} s", opt_s(g.phase_p50.get(p).copied().flatten(), 1))
    })
}

#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    value: &'a T,
}

#[derive(Serialize)]
struct Slowest<'a> {
    rank: usize,
    node: Option<&'a str>,
    sandbox: Option<&'a str>,
    boot: usize,
    total_s: Option<f64>,
    gpus: Option<usize>,
    page_size: Option<&'static str>,
    slow_phase: Option<&'a crate::fleet::SlowPhase>,
}

#[derive(Serialize)]
struct Summary<'a> {
    boots: usize,
    nodes: &'a [String],
    states: &'a std::collections::BTreeMap<&'static str, usize>,
    started_late: usize,
    without_boot: usize,
    files: &'a [String],
    notes: &'a [String],
    percentiles: &'static str,
    stats: &'a crate::parse::ingest::Stats,
}

fn put<T: Serialize>(
    o: &mut String,
    kind: &'static str,
    value: &T,
) -> Result<(), serde_json::Error> {
    o.push_str(&serde_json::to_string(&Tagged { kind, value })?);
    o.push('\n');
    Ok(())
}

/// JSON lines: the boots, then the summary objects (see the module docs).
pub fn json_lines(f: &Fleet) -> Result<String, serde_json::Error> {
    let mut o = String::new();
    for r in &f.rows {
        put(&mut o, "boot", r)?;
    }
    for st in f.phases.iter().chain(std::iter::once(&f.total)) {
        put(&mut o, "phase", st)?;
    }
    for (i, &k) in f.slowest.iter().enumerate() {
        let Some(r) = f.rows.get(k) else { continue };
        let s = Slowest {
            rank: i + 1,
            node: r.node.as_deref(),
            sandbox: r.sandbox.as_deref(),
            boot: r.boot,
            total_s: r.total_s,
            gpus: r.gpus,
            page_size: r.page_size,
            slow_phase: r.slow_phase.as_ref(),
        };
        put(&mut o, "slowest", &s)?;
    }
    for g in &f.groups {
        put(&mut o, "group", g)?;
    }
    for nb in &f.without_boot {
        put(&mut o, "no_boot", nb)?;
    }
    let summary = Summary {
        boots: f.rows.len(),
        nodes: &f.nodes,
        states: &f.states,
        started_late: f.started_late,
        without_boot: f.without_boot.len(),
        files: &f.files,
        notes: &f.notes,
        percentiles: "nearest rank over the boots where the phase is counted",
        stats: &f.stats,
    };
    put(&mut o, "fleet", &summary)?;
    Ok(o)
}

/// Histogram buckets (upper bounds, seconds) of `vmtune_boot_phase_seconds`: boot phases
/// run from milliseconds (a pin call) to minutes (the CDI wait, a whole boot).
pub const BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
];

/// A label value escaped for the Prometheus text format.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v}");
        if s == "-0" {
            "0".into()
        } else {
            s
        }
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

fn histogram(o: &mut String, name: &str, labels: &str, values: &[f64]) {
    let sep = if labels.is_empty() { "" } else { "," };
    for b in BUCKETS {
        let n = values.iter().filter(|v| **v <= b).count();
        let _ = writeln!(o, "{name}_bucket{{{labels}{sep}le=\"{}\"}} {n}", number(b));
    }
    let _ = writeln!(
        o,
        "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
        values.len()
    );
    let sum: f64 = values.iter().sum();
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(
        o,
        "{name}_sum{braces} {}",
        number((sum * 1000.0).round() / 1000.0)
    );
    let _ = writeln!(o, "{name}_count{braces} {}", values.len());
}

/// node_exporter's textfile-collector format (the Prometheus text exposition format, no
/// timestamps): `vmtune_boot_phase_seconds` (a histogram per phase, over the boots where
/// the phase is counted), `vmtune_boot_seconds` (complete boots), `vmtune_boots` (boots
/// by node and state), `vmtune_boots_started_late`, `vmtune_boot_phase_left_out` (boots
/// left out of a phase's histogram, by reason) and `vmtune_boots_without_boot`.
pub fn prometheus(f: &Fleet) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# HELP vmtune_boot_phase_seconds Seconds each VM boot phase took, per boot where the phase is counted (vmtune boot analyze --all; missing, estimated or cut phases are left out, see vmtune_boot_phase_left_out)."
    );
    let _ = writeln!(o, "# TYPE vmtune_boot_phase_seconds histogram");
    for k in PHASES {
        let v: Vec<f64> = f
            .rows
            .iter()
            .filter_map(|r| r.phases.get(k))
            .filter(|c| c.counted)
            .filter_map(|c| c.s)
            .collect();
        histogram(
            &mut o,
            "vmtune_boot_phase_seconds",
            &format!("phase=\"{}\"", label(k)),
            &v,
        );
    }
    let _ = writeln!(
        o,
        "# HELP vmtune_boot_seconds Seconds from pod accepted (or the boot's first line) to container started, per complete boot whose log starts before it."
    );
    let _ = writeln!(o, "# TYPE vmtune_boot_seconds histogram");
    let totals: Vec<f64> = f.rows.iter().filter_map(|r| r.total_s).collect();
    histogram(&mut o, "vmtune_boot_seconds", "", &totals);
    let _ = writeln!(
        o,
        "# HELP vmtune_boots VM boots in the analyzed logs, by node and state (complete, failed, unfinished, unknown)."
    );
    let _ = writeln!(o, "# TYPE vmtune_boots gauge");
    let mut by: std::collections::BTreeMap<(String, &str), usize> = Default::default();
    for r in &f.rows {
        *by.entry((r.node.clone().unwrap_or_default(), r.state))
            .or_default() += 1;
    }
    for ((node, state), n) in &by {
        let _ = writeln!(
            o,
            "vmtune_boots{{node=\"{}\",state=\"{}\"}} {n}",
            label(node),
            label(state)
        );
    }
    let _ = writeln!(
        o,
        "# HELP vmtune_boots_started_late VM boots whose log starts after the boot began, by node."
    );
    let _ = writeln!(o, "# TYPE vmtune_boots_started_late gauge");
    let mut late: std::collections::BTreeMap<String, usize> = Default::default();
    for r in &f.rows {
        *late.entry(r.node.clone().unwrap_or_default()).or_default() += usize::from(r.started_late);
    }
    for (node, n) in &late {
        let _ = writeln!(
            o,
            "vmtune_boots_started_late{{node=\"{}\"}} {n}",
            label(node)
        );
    }
    let _ = writeln!(
        o,
        "# HELP vmtune_boot_phase_left_out VM boots left out of vmtune_boot_phase_seconds for a phase, by reason (missing, estimated, started_late, ended_early, partial, unresolved, not_closed, untraced)."
    );
    let _ = writeln!(o, "# TYPE vmtune_boot_phase_left_out gauge");
    for st in &f.phases {
        for (why, n) in &st.excluded {
            let _ = writeln!(
                o,
                "vmtune_boot_phase_left_out{{phase=\"{}\",reason=\"{}\"}} {n}",
                label(st.phase),
                label(why)
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP vmtune_boots_without_boot Sandboxes whose lines show no boot (no phase, no failure)."
    );
    let _ = writeln!(o, "# TYPE vmtune_boots_without_boot gauge");
    let _ = writeln!(o, "vmtune_boots_without_boot {}", f.without_boot.len());
    o
}

/// A 1-2-5 step giving at most about `ticks` steps over `span`.
fn nice_step(span: f64, ticks: f64) -> f64 {
    let raw = (span / ticks).max(1e-3);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// An SVG histogram of `values` (seconds), bins of a 1-2-5 width.
fn histogram_svg(name: &str, values: &[f64], colour: &str) -> String {
    let (w, h, left, bottom) = (360.0, 150.0, 34.0, 22.0);
    let mut svg = format!(
        r#"<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" role="img" aria-label="{} histogram">"#,
        esc(name)
    );
    if values.is_empty() {
        let _ = write!(
            svg,
            r#"<text x="10" y="70" class="tick">no boot where this phase is counted</text></svg>"#
        );
        return svg;
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let step = nice_step((hi - lo).max(0.001), 20.0);
    let start = (lo / step).floor() * step;
    let nbins = (((hi - start) / step).floor() as usize + 1).clamp(1, 60);
    let mut bins = vec![0usize; nbins];
    for v in values {
        let i = (((v - start) / step).floor().max(0.0) as usize).min(nbins - 1);
        if let Some(b) = bins.get_mut(i) {
            *b += 1;
        }
    }
    let top = bins.iter().copied().max().unwrap_or(1).max(1) as f64;
    let plot_w = w - left - 8.0;
    let plot_h = h - bottom - 12.0;
    let bw = plot_w / nbins as f64;
    for (i, n) in bins.iter().enumerate() {
        let bh = *n as f64 / top * plot_h;
        let x = left + i as f64 * bw;
        let lo_s = start + i as f64 * step;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{colour}"><title>{}–{} s: {n} boot{}</title></rect>"#,
            12.0 + plot_h - bh,
            (bw - 1.0).max(0.5),
            secs_fmt(lo_s, 2),
            secs_fmt(lo_s + step, 2),
            if *n == 1 { "" } else { "s" }
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="{left}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#999"/><text x="{left}" y="{2:.1}" class="tick" text-anchor="start">{3} s</text><text x="{1:.1}" y="{2:.1}" class="tick" text-anchor="end">{4} s</text><text x="2" y="20" class="tick" text-anchor="start">{5}</text>"##,
        12.0 + plot_h,
        w - 8.0,
        h - 6.0,
        secs_fmt(start, 1),
        secs_fmt(start + nbins as f64 * step, 1),
        top as usize
    );
    svg.push_str("</svg>");
    svg
}

fn stats_row(st: &PhaseStats) -> String {
    format!(
        "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>",
        esc(st.phase),
        st.n,
        opt_s(st.min, 1),
        opt_s(st.p50, 1),
        opt_s(st.p90, 1),
        opt_s(st.p99, 1),
        opt_s(st.max, 1),
        esc(&excluded_words(st))
    )
}

fn group_rows(o: &mut String, groups: &[&Group]) {
    o.push_str("<table><tr><th></th><th>boots</th><th>complete</th><th>failed</th><th>unfinished</th><th>unknown</th><th>started late</th><th>total p50 s</th><th>p90 s</th><th>max s</th><th>largest phase (p50)</th></tr>");
    for g in groups {
        let get = |k: &str| g.states.get(k).copied().unwrap_or(0);
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>",
            esc(g.key.as_deref().unwrap_or("unknown")),
            g.boots,
            get("complete"),
            get("failed"),
            get("unfinished"),
            get("unknown"),
            g.started_late,
            opt_s(g.total.p50, 1),
            opt_s(g.total.p90, 1),
            opt_s(g.total.max, 1),
            esc(&largest_phase_words(g))
        );
    }
    o.push_str("</table>");
}

/// The fleet as a self-contained HTML page: summary, a histogram per phase, percentiles,
/// the groupings, the slowest boots' and the incomplete boots' Gantt charts (the
/// single-boot report's chart), and the table of every boot.
pub fn html(f: &Fleet) -> String {
    let mut o = String::new();
    html_head(&mut o, f);
    histograms(&mut o, f);
    o.push_str("<h2>Percentiles</h2><table><tr><th>phase</th><th>boots</th><th>min s</th><th>p50 s</th><th>p90 s</th><th>p99 s</th><th>max s</th><th>left out</th></tr>");
    for st in f.phases.iter().chain(std::iter::once(&f.total)) {
        o.push_str(&stats_row(st));
    }
    o.push_str("</table>");
    for (by, title) in [
        ("node", "By node"),
        ("gpus", "By GPU count"),
        ("page_size", "By page size"),
    ] {
        let _ = write!(o, "<h2>{title}</h2>");
        let gs: Vec<&Group> = f.groups.iter().filter(|g| g.by == by).collect();
        group_rows(&mut o, &gs);
    }
    slowest_charts(&mut o, f);
    incomplete_charts(&mut o, f);
    every_boot(&mut o, f);
    o.push_str("</table>\n</body></html>\n");
    o
}

/// The page's head and style, the fleet's summary and the notes.
fn html_head(o: &mut String, f: &Fleet) {
    let _ = write!(
        o,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vmtune fleet boot analysis</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}}
h1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}} h3{{font-size:14px;margin:18px 0 4px}}
table{{border-collapse:collapse}} td,th{{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}
.tick{{font-size:11px;fill:#666;text-anchor:middle}} .lab{{font-size:12px}} .dur{{font-size:11px;fill:#444}}
.hists{{display:flex;flex-wrap:wrap;gap:12px}} .hists figure{{margin:0}} figcaption{{font-size:12px;color:#444}}
.fix{{color:#2a6}} code{{font-size:12px}} .left{{color:#999}}
</style></head><body>
<h1>Boots across the fleet</h1>
<p><b>{}</b> boots on <b>{}</b> node{} ({}), from {} file{}.{}</p>
"#,
        f.rows.len(),
        f.nodes.len(),
        plural(f.nodes.len(), "s"),
        esc(&states_line(f)),
        f.files.len(),
        plural(f.files.len(), "s"),
        if f.without_boot.is_empty() {
            String::new()
        } else {
            format!(
                " {} sandboxes whose lines show no boot are not listed.",
                f.without_boot.len()
            )
        }
    );
    for n in &f.notes {
        let _ = write!(o, "<p>Note: {}</p>", esc(n));
    }
}

/// A histogram of each phase over the boots where it is counted, and of the totals.
fn histograms(o: &mut String, f: &Fleet) {
    o.push_str("<h2>Phases</h2><p>Each histogram is over the boots where the phase is counted; a phase that is missing, estimated, cut by the log's start or end, or the step a boot failed in is left out and counted.</p><div class=\"hists\">");
    for (k, st) in PHASES.iter().zip(&f.phases) {
        let v: Vec<f64> = f
            .rows
            .iter()
            .filter_map(|r| r.phases.get(k))
            .filter(|c| c.counted)
            .filter_map(|c| c.s)
            .collect();
        let _ = write!(
            o,
            "<figure>{}<figcaption>{} — {} boots, p50 {} s, p90 {} s{}</figcaption></figure>",
            histogram_svg(k, &v, color(k)),
            esc(k),
            st.n,
            opt_s(st.p50, 1),
            opt_s(st.p90, 1),
            if st.excluded.is_empty() {
                String::new()
            } else {
                format!("; left out: {}", esc(&excluded_words(st)))
            }
        );
    }
    let totals: Vec<f64> = f.rows.iter().filter_map(|r| r.total_s).collect();
    let _ = write!(
        o,
        "<figure>{}<figcaption>total — {} complete boots, p50 {} s, p90 {} s</figcaption></figure></div>",
        histogram_svg("total", &totals, "#555"),
        f.total.n,
        opt_s(f.total.p50, 1),
        opt_s(f.total.p90, 1)
    );
}

/// The slowest boots' Gantt charts, each with its slow phase and first finding.
fn slowest_charts(o: &mut String, f: &Fleet) {
    if f.slowest.is_empty() {
        return;
    }
    o.push_str("<h2>Slowest boots</h2>");
    for (i, &k) in f.slowest.iter().enumerate() {
        let (Some(r), Some(rep)) = (f.rows.get(k), f.charts.get(&k)) else {
            continue;
        };
        let _ = write!(
            o,
            "<h3>{}. <code>{}</code> — {} s, {} GPUs{}</h3>{}",
            i + 1,
            esc(&boot_name(r, 64)),
            opt_s(r.total_s, 1),
            gpus_word(r.gpus),
            esc(&r.slow_phase.as_ref().map_or(String::new(), |sp| format!(
                "; {} {} s, +{} s over the fleet median",
                sp.phase,
                secs_fmt(sp.s, 1),
                secs_fmt(sp.over_median_s.max(0.0), 1)
            ))),
            gantt_svg(rep)
        );
        if let Some(t) = &r.finding {
            let _ = write!(o, "<p>{}</p>", esc(t));
        }
    }
}

/// The first incomplete boots' Gantt charts ([`crate::fleet::CHARTED_INCOMPLETE`]).
fn incomplete_charts(o: &mut String, f: &Fleet) {
    if f.incomplete.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<h2>Boots that did not complete or started late ({})</h2>",
        f.incomplete.len()
    );
    for &k in f.incomplete.iter().take(crate::fleet::CHARTED_INCOMPLETE) {
        let (Some(r), Some(rep)) = (f.rows.get(k), f.charts.get(&k)) else {
            continue;
        };
        let _ = write!(
            o,
            "<h3><code>{}</code> — {}</h3>{}<p>{}</p>",
            esc(&boot_name(r, 64)),
            esc(&state_word(r)),
            gantt_svg(rep),
            esc(r.finding.as_deref().unwrap_or(""))
        );
    }
    if f.incomplete.len() > crate::fleet::CHARTED_INCOMPLETE {
        let _ = write!(
            o,
            "<p>and {} more in the table below.</p>",
            f.incomplete.len() - crate::fleet::CHARTED_INCOMPLETE
        );
    }
}

/// The table of every boot (left open for the page's end).
fn every_boot(o: &mut String, f: &Fleet) {
    o.push_str("<h2>Every boot</h2><table><tr><th>node</th><th>sandbox@boot</th><th>GPUs</th><th>pages</th><th>state</th><th>total s</th>");
    for k in PHASES {
        let _ = write!(o, "<th>{}</th>", esc(k));
    }
    o.push_str("<th>slow phase</th><th>finding</th></tr>");
    for r in &f.rows {
        boot_row(o, r);
    }
}

/// One boot's row of the table: a cell per phase, those left out greyed with the reason.
fn boot_row(o: &mut String, r: &BootRow) {
    let _ = write!(
        o,
        "<tr><td>{}</td><td><code>{}@{}</code></td><td class=n>{}</td><td>{}</td><td>{}</td><td class=n>{}</td>",
        esc(r.node.as_deref().unwrap_or("?")),
        esc(&short(r.sandbox.as_deref().unwrap_or("?"), 16)),
        r.boot,
        gpus_word(r.gpus),
        esc(r.page_size.unwrap_or("?")),
        esc(&state_word(r)),
        opt_s(r.total_s, 1)
    );
    for k in PHASES {
        let c = r.phases.get(k);
        let left = c.is_some_and(|c| !c.counted && c.s.is_some());
        let _ = write!(
            o,
            "<td class=\"n{}\"{}>{}</td>",
            if left { " left" } else { "" },
            c.and_then(|c| c.excluded)
                .filter(|_| left)
                .map_or(String::new(), |w| format!(
                    " title=\"left out: {}\"",
                    w.as_str()
                )),
            esc(&cell(c))
        );
    }
    let _ = write!(
        o,
        "<td>{}</td><td>{}</td></tr>",
        esc(&r.slow_phase.as_ref().map_or(String::new(), |sp| format!(
            "{} +{} s",
            sp.phase,
            secs_fmt(sp.over_median_s.max(0.0), 1)
        ))),
        esc(&short(r.finding.as_deref().unwrap_or(""), 160))
    );
}
