//! Terminal tables and the self-contained HTML report (inline SVG charts, no scripts, no
//! network resources).

use std::fmt::Write;

use crate::compare::Comparison;
use crate::latency::LatencyResult;
use crate::membw::MembwResult;
use crate::svg::{self, esc, num, Bar};
use crate::timer::{self, TimerResult};
use crate::{frametimes, FrameLogResult, RunFile};

/// Left-aligned first column, right-aligned others.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let ncol = headers.len();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(ncol) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate().take(ncol) {
            let pad = w[i].saturating_sub(c.chars().count());
            if i == 0 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(w.iter().map(|n| "-".repeat(*n)).collect()));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

/// Short chart label: `tsc vDSO`, `acpi_pm syscall`, `rdtsc`.
fn probe_short(p: &timer::Probe) -> String {
    let m = match p.method {
        timer::Method::Vdso => "vDSO",
        timer::Method::Syscall => "syscall",
        timer::Method::Rdtsc => "rdtsc",
    };
    match &p.clocksource {
        Some(cs) => format!("{cs} {m}"),
        None => m.to_string(),
    }
}

fn probe_label(p: &timer::Probe) -> String {
    match &p.clocksource {
        Some(cs) => format!("{cs} {}", p.method.label()),
        None => p.method.label().to_string(),
    }
}

pub fn text_timer(t: &TimerResult) -> String {
    let mut out = format!(
        "Timer read cost (clocksource before and after: {}; {} repeats × {:.0} ms)\n",
        t.original_clocksource.as_deref().unwrap_or("unknown"),
        t.repeats,
        t.seconds_per_repeat * 1000.0
    );
    let mut rows = Vec::new();
    for p in &t.probes {
        let label = probe_label(p);
        match (&p.summary, &p.error) {
            (Some(s), _) => rows.push(vec![
                label,
                format!("{:.2}", s.median),
                format!("{:.2}–{:.2}", s.min, s.max),
                format!("{:.1}M", p.calls_per_sec / 1e6),
                format!("{:.2}%", timer::cpu_share_pct(s.median, 275_000.0)),
            ]),
            (None, e) => rows.push(vec![
                label,
                "—".into(),
                e.clone().unwrap_or_default(),
                String::new(),
                String::new(),
            ]),
        }
    }
    out.push_str(&table(
        &["read", "ns/read", "range", "reads/s", "CPU @275k/s"],
        &rows,
    ));
    out.push_str(
        "CPU @275k/s: share of one CPU spent reading the clock at the 275,000 reads/s of the Windows 7 timer note's games.\n",
    );
    for n in &t.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

pub fn text_membw(m: &MembwResult) -> String {
    let mut out = format!(
        "STREAM memory bandwidth: {} threads {}, {:.0} MiB per array, {} repeats (first not counted){}\n",
        m.threads,
        m.cpus
            .as_ref()
            .map_or("unpinned".to_string(), |c| format!("pinned to CPUs {c}")),
        m.array_bytes as f64 / (1 << 20) as f64,
        m.repeats,
        if m.validated { ", results check OK" } else { ", results check FAILED" }
    );
    let rows: Vec<Vec<String>> = m
        .kernels
        .iter()
        .map(|k| {
            let s = k.summary.as_ref();
            vec![
                k.name.clone(),
                format!("{:.2}", k.best_gbps),
                s.map_or("—".into(), |s| format!("{:.2}", s.median)),
                s.map_or("—".into(), |s| format!("{:.2}–{:.2}", s.min, s.max)),
                format!("{:.2}", k.avg_time_s * 1000.0),
            ]
        })
        .collect();
    out.push_str(&table(
        &["kernel", "best GB/s", "median GB/s", "range", "avg ms"],
        &rows,
    ));
    for n in &m.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

pub fn text_latency(l: &LatencyResult) -> String {
    let mut out = format!(
        "Wakeup latency: interval {} µs, {:.1} s, policy {}, load on {}\n",
        l.interval_us,
        l.duration_s,
        l.policy,
        l.load_cpus.as_deref().unwrap_or("no CPUs")
    );
    let rows: Vec<Vec<String>> = l
        .cpus
        .iter()
        .map(|c| match &c.error {
            Some(e) => vec![format!("cpu{}", c.cpu), e.clone()],
            None => vec![
                format!("cpu{}", c.cpu),
                c.samples.to_string(),
                format!("{:.1}", c.min_us),
                format!("{:.1}", c.avg_us),
                format!("{:.1}", c.p99_us),
                format!("{:.1}", c.max_us),
                c.overruns.to_string(),
            ],
        })
        .collect();
    out.push_str(&table(
        &[
            "cpu", "wakeups", "min µs", "avg µs", "p99 µs", "max µs", "overruns",
        ],
        &rows,
    ));
    for c in l.cpus.iter().filter(|c| c.error.is_none()) {
        let _ = writeln!(
            out,
            "cpu{} histogram: {}",
            c.cpu,
            text_hist(&c.histogram, c.overflow, l.hist_max_us)
        );
    }
    for n in &l.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Compact histogram: counts in power-of-two µs ranges `[lo,hi)`, the last one cut at the
/// histogram's end, then `≥max` for the overflow; the ranges are disjoint and cover
/// `[0, h.len())` (`[512,1000) ≥1000µs`, not `[512,1024) ≥1000µs`).
pub fn text_hist(h: &[u64], overflow: u64, max_us: u32) -> String {
    let mut parts = Vec::new();
    for (lo, hi) in hist_ranges(h.len()) {
        let n: u64 = h.get(lo..hi).map_or(0, |s| s.iter().sum());
        if n > 0 {
            parts.push(format!("[{lo},{hi})µs:{n}"));
        }
    }
    if overflow > 0 {
        parts.push(format!("≥{max_us}µs:{overflow}"));
    }
    parts.join(" ")
}

/// What a format id means, for people.
pub fn format_name(id: &str) -> &str {
    match id {
        "presentmon-1" => "PresentMon 1.x CSV",
        "presentmon-2" => "PresentMon 2.0-2.3 CSV",
        "presentmon-2.4" => "PresentMon 2.4+ CSV",
        "ocat" => "OCAT CSV",
        "capframex-csv" => "CapFrameX CSV",
        "capframex-json" => "CapFrameX capture (JSON)",
        "frameview" => "FrameView CSV",
        "mangohud" => "MangoHud log",
        "afterburner" => "MSI Afterburner log (HML)",
        "plain" => "list of frame times",
        "csv" => "CSV",
        other => other,
    }
}

/// `~` before figures estimated from samples.
fn approx(l: &FrameLogResult) -> &'static str {
    if l.lows_approximate {
        "~"
    } else {
        ""
    }
}

/// What a series is and where its numbers come from: a head line, then indented lines.
fn frame_log_detail(l: &FrameLogResult) -> String {
    let mut out = format!("{}\n", l.label());
    let what = format!(
        "{}{}",
        format_name(&l.format),
        l.column
            .as_deref()
            .map(|c| format!(", column {c}"))
            .unwrap_or_default()
    );
    match (&l.kind, &l.sampling) {
        (frametimes::RowKind::Samples, Some(s)) => {
            let over = match (s.interval_ms, s.duration_s) {
                (Some(i), Some(d)) => format!(
                    ", one every ~{} ms over {:.1} s ({})",
                    num(i),
                    d,
                    s.time_column.as_deref().unwrap_or("time column")
                ),
                _ => ", no time column: interval and duration unknown".to_string(),
            };
            let _ = writeln!(out, "  {what}: {} samples{over}", l.stats.frames);
            let _ = writeln!(
                out,
                "  samples, not frames ({}): the ~ figures are approximate",
                s.reason
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  {what}: {} frames, {:.1} s, frame time median {:.2} ms, max {:.2} ms",
                l.stats.frames, l.stats.duration_s, l.stats.median_ms, l.stats.max_ms
            );
        }
    }
    let mut facts = Vec::new();
    if let Some(d) = &l.displayed {
        facts.push(format!(
            "{} of {} presents not displayed ({})",
            d.dropped, d.presents, d.rule
        ));
    }
    if !l.present_modes.is_empty() {
        facts.push(format!(
            "present mode {}",
            l.present_modes
                .iter()
                .map(|m| format!("{} ({})", m.mode, m.presents))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(t) = l.allows_tearing {
        facts.push(format!("AllowsTearing = 1 on {t} of {}", l.presents));
    }
    if l.skipped_rows > 0 {
        let zeros = if l.zero_rows > 0 {
            format!(" ({} at 0 ms)", l.zero_rows)
        } else {
            String::new()
        };
        facts.push(format!(
            "{} rows without a value skipped{zeros}",
            l.skipped_rows
        ));
    }
    if !facts.is_empty() {
        let _ = writeln!(out, "  {}", facts.join("; "));
    }
    out
}

/// The power-of-two ranges of [`text_hist`] over `len` 1 µs buckets: `[0,1) [1,2) [2,4) …`,
/// the last one ending at `len`.
pub fn hist_ranges(len: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut lo, mut hi) = (0usize, 1usize);
    while lo < len {
        out.push((lo, hi.min(len)));
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    out
}

pub fn text_frametimes(logs: &[FrameLogResult]) -> String {
    let mut out = String::new();
    let Some(first) = logs.first() else {
        return out;
    };
    let pcts: Vec<f64> = first.stats.lows.iter().map(|l| l.percent).collect();
    let mut headers = vec!["log".to_string(), "rows".into(), "avg FPS".into()];
    for p in &pcts {
        headers.push(format!("{p}% low"));
    }
    for p in &pcts {
        headers.push(format!("avg slowest {p}%"));
    }
    let rows: Vec<Vec<String>> = logs
        .iter()
        .map(|l| {
            let a = approx(l);
            let mut r = vec![
                l.label(),
                format!("{} {}", l.stats.frames, l.kind.noun()),
                format!("{a}{:.2}", l.stats.avg_fps),
            ];
            for x in &l.stats.lows {
                r.push(format!("{a}{:.2}", x.fps));
            }
            for x in &l.stats.lows {
                r.push(format!("{a}{:.2}", x.avg_slowest_fps));
            }
            r
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let _ = writeln!(
        out,
        "Frame times (p% low = 1000 / frame time at the (100−p)th percentile, {} interpolation; \
         \"avg slowest p%\" = 1000 / mean of the slowest p% of frames{})",
        first.stats.method,
        if logs.iter().any(|l| l.lows_approximate) {
            "; ~ = approximate, from samples"
        } else {
            ""
        }
    );
    out.push_str(&table(&h, &rows));
    for l in logs {
        out.push_str(&frame_log_detail(l));
        for n in &l.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        if !l.others.is_empty() {
            let _ = writeln!(
                out,
                "  also in {} (--app NAME|PID|SWAPCHAIN picks one, --all-apps reports each):",
                l.source
            );
            for o in l.others.iter().take(12) {
                let _ = writeln!(out, "    {} {} presents", o.app.label(), o.presents);
            }
            if l.others.len() > 12 {
                let _ = writeln!(out, "    … and {} more", l.others.len() - 12);
            }
        }
    }
    out
}

pub fn text_comparison(c: &Comparison) -> String {
    let mut out = String::new();
    let mut headers = vec!["metric".to_string()];
    for (i, cfg) in c.configs.iter().enumerate() {
        headers.push(format!("{cfg} median [min–max]"));
        if i > 0 {
            headers.push("change".into());
        }
    }
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            let mut cells = vec![format!(
                "{} ({}{})",
                r.metric,
                r.unit,
                if r.higher_is_better { " ↑" } else { " ↓" }
            )];
            for (i, s) in r.runs.iter().enumerate() {
                let t = if r.approximate.get(i).copied().unwrap_or(false) {
                    "~"
                } else {
                    ""
                };
                cells.push(s.as_ref().map_or("—".into(), |s| {
                    format!(
                        "{t}{} [{t}{}–{t}{}] n={}",
                        num(s.median),
                        num(s.min),
                        num(s.max),
                        s.n
                    )
                }));
                if i > 0 {
                    cells.push(
                        r.changes
                            .get(i)
                            .cloned()
                            .flatten()
                            .map_or("—".into(), |ch| {
                                let verdict = match ch.beyond_noise {
                                    Some(true) => {
                                        if ch.better {
                                            "better"
                                        } else {
                                            "worse"
                                        }
                                    }
                                    Some(false) => "noise",
                                    None => "n<2",
                                };
                                format!("{:+.1}% {verdict}", ch.pct)
                            }),
                    );
                }
            }
            cells
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    out.push_str(&table(&h, &rows));
    out.push_str("change: median vs the first run; \"better\"/\"worse\" only when the min–max ranges of the repeats do not overlap, else \"noise\".\n");
    if c.rows.iter().any(|r| r.approximate.iter().any(|a| *a)) {
        out.push_str("~ = approximate: from frame times sampled once per polling interval, not every frame.\n");
    }
    if !c.differences.is_empty() {
        out.push_str("What differed:\n");
        for d in &c.differences {
            let _ = writeln!(out, "  {d}");
        }
    }
    out
}

/// The text of one run file (every section present).
pub fn text_run(r: &RunFile) -> String {
    let mut out = String::new();
    if let Some(t) = &r.timer {
        out.push_str(&text_timer(t));
        out.push('\n');
    }
    if let Some(m) = &r.membw {
        out.push_str(&text_membw(m));
        out.push('\n');
    }
    if let Some(l) = &r.latency {
        out.push_str(&text_latency(l));
        out.push('\n');
    }
    if !r.frametimes.is_empty() {
        out.push_str(&text_frametimes(&r.frametimes));
    }
    out.trim_end().to_string() + "\n"
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}.better{color:#1a7f37;font-weight:bold}\
.worse{color:#cf222e;font-weight:bold}.noise{color:#777}svg.chart{display:block;margin:10px 0;border:1px solid #eee}\
.note{color:#555;font-size:13px}code{background:#f5f5f5;padding:1px 3px}pre{overflow-x:auto;font-size:12px;background:#fafafa;padding:6px}";

fn html_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><tr>");
    for h in headers {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            // cells may carry a class marker "cls|text"
            match c.split_once('|') {
                Some((cls, t)) if ["better", "worse", "noise"].contains(&cls) => {
                    let _ = write!(s, "<td class=\"{cls}\">{}</td>", esc(t));
                }
                _ => {
                    let _ = write!(s, "<td>{}</td>", esc(c));
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// The HTML report for one or more runs (and their comparison when there are several).
pub fn html(runs: &[RunFile], title: &str) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body><h1>{t}</h1>",
        t = esc(title)
    );
    // runs
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let e = &r.environment;
            vec![
                r.config.clone(),
                r.host
                    .as_ref()
                    .map(|h| {
                        format!(
                            "{} ({} PUs, {} NUMA nodes)",
                            h.name.clone().unwrap_or_else(|| h.source.clone()),
                            h.pus.len(),
                            h.numa_nodes.len()
                        )
                    })
                    .unwrap_or_else(|| {
                        format!(
                            "not recorded{}",
                            r.host_error
                                .as_ref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default()
                        )
                    }),
                e.kernel.clone().unwrap_or_else(|| "not recorded".into()),
                e.cpu_model.clone().unwrap_or_else(|| "not recorded".into()),
                e.clocksource
                    .clone()
                    .unwrap_or_else(|| "not recorded".into()),
                match e.in_guest {
                    Some(true) => "guest",
                    Some(false) => "bare metal",
                    None => "not recorded",
                }
                .into(),
                if r.plan.is_some() { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    b.push_str("<h2>Runs</h2>");
    b.push_str(&html_table(
        &[
            "config",
            "host",
            "kernel",
            "CPU",
            "clocksource",
            "where",
            "plan",
        ]
        .map(String::from),
        &rows,
    ));
    if runs.len() > 1 {
        let c = crate::compare::compare(runs);
        b.push_str("<h2>Comparison</h2><p class=\"note\">Median of the repeats with [min–max]; change vs the first run; a change is marked better/worse only when the min–max ranges do not overlap.");
        if c.rows.iter().any(|r| r.approximate.iter().any(|a| *a)) {
            b.push_str(" ~ = approximate: from frame times sampled once per polling interval, not every frame.");
        }
        b.push_str("</p>");
        let mut headers = vec!["metric".to_string()];
        for (i, cfg) in c.configs.iter().enumerate() {
            headers.push(cfg.clone());
            if i > 0 {
                headers.push("change".into());
            }
        }
        let rows: Vec<Vec<String>> =
            c.rows
                .iter()
                .map(|r| {
                    let mut cells = vec![format!("{} ({})", r.metric, r.unit)];
                    for (i, s) in r.runs.iter().enumerate() {
                        let t = if r.approximate.get(i).copied().unwrap_or(false) {
                            "~"
                        } else {
                            ""
                        };
                        cells.push(s.as_ref().map_or("—".into(), |s| {
                            format!("{t}{} [{t}{}–{t}{}]", num(s.median), num(s.min), num(s.max))
                        }));
                        if i > 0 {
                            cells.push(r.changes.get(i).cloned().flatten().map_or(
                                "—".into(),
                                |ch| {
                                    let cls = match ch.beyond_noise {
                                        Some(true) if ch.better => "better",
                                        Some(true) => "worse",
                                        _ => "noise",
                                    };
                                    format!("{cls}|{:+.1}%", ch.pct)
                                },
                            ));
                        }
                    }
                    cells
                })
                .collect();
        b.push_str(&html_table(&headers, &rows));
        if !c.differences.is_empty() {
            b.push_str("<p class=\"note\">What differed:</p><ul class=\"note\">");
            for d in &c.differences {
                let _ = write!(b, "<li>{}</li>", esc(d));
            }
            b.push_str("</ul>");
        }
    }
    html_timer(&mut b, runs);
    html_membw(&mut b, runs);
    html_latency(&mut b, runs);
    html_frames(&mut b, runs);
    b.push_str("<p class=\"note\">Generated by <code>vmtune bench report</code>. Definitions: docs/bench.md.</p></body></html>\n");
    b
}

fn bar_of(s: Option<&crate::stats::Summary>) -> Option<Bar> {
    s.map(|s| Bar {
        value: s.median,
        lo: Some(s.min),
        hi: Some(s.max),
    })
}

fn html_timer(b: &mut String, runs: &[RunFile]) {
    let with: Vec<&RunFile> = runs.iter().filter(|r| r.timer.is_some()).collect();
    if with.is_empty() {
        return;
    }
    let mut cats: Vec<String> = Vec::new();
    for r in &with {
        for p in r.timer.iter().flat_map(|t| &t.probes) {
            let l = probe_short(p);
            if !cats.contains(&l) {
                cats.push(l);
            }
        }
    }
    let series: Vec<(String, Vec<Option<Bar>>)> = with
        .iter()
        .map(|r| {
            let probes = r.timer.as_ref().map(|t| t.probes.as_slice()).unwrap_or(&[]);
            let v = cats
                .iter()
                .map(|c| {
                    probes
                        .iter()
                        .find(|p| &probe_short(p) == c)
                        .and_then(|p| bar_of(p.summary.as_ref()))
                })
                .collect();
            (r.config.clone(), v)
        })
        .collect();
    b.push_str("<h2>Timer read cost</h2><p class=\"note\">ns per read (median of the repeats, whisker min–max), log scale. Slow emulated clocksources (acpi_pm, hpet) make the vDSO fall back to a system call — the Windows 7 timer note measured 3,605 ns (acpi_pm) vs 12.52 ns (TSC) in a Windows guest.</p>");
    b.push_str(&svg::bar_chart(
        "Timer read cost",
        "ns per read (log)",
        &cats,
        &series,
        true,
    ));
    for r in with {
        if let Some(t) = &r.timer {
            let _ = write!(
                b,
                "<pre>{}</pre>",
                esc(&format!("[{}]\n{}", r.config, text_timer(t)))
            );
        }
    }
}

fn html_membw(b: &mut String, runs: &[RunFile]) {
    let with: Vec<&RunFile> = runs.iter().filter(|r| r.membw.is_some()).collect();
    if with.is_empty() {
        return;
    }
    let cats: Vec<String> = crate::membw::KERNELS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let series: Vec<(String, Vec<Option<Bar>>)> = with
        .iter()
        .map(|r| {
            let ks = r
                .membw
                .as_ref()
                .map(|m| m.kernels.as_slice())
                .unwrap_or(&[]);
            let v = cats
                .iter()
                .map(|c| {
                    ks.iter()
                        .find(|k| &k.name == c)
                        .and_then(|k| bar_of(k.summary.as_ref()))
                })
                .collect();
            let m = r.membw.as_ref();
            let how = m
                .and_then(|m| m.cpus.clone())
                .map_or("unpinned".into(), |c| format!("CPUs {c}"));
            (format!("{} ({how})", r.config), v)
        })
        .collect();
    b.push_str("<h2>Memory bandwidth (STREAM)</h2><p class=\"note\">GB/s, median of the repeats with min–max whiskers. The r/VFIO pinning benchmark saw 2–7× on multi-NUMA hosts once the guest had NUMA topology.</p>");
    b.push_str(&svg::bar_chart(
        "STREAM bandwidth",
        "GB/s",
        &cats,
        &series,
        false,
    ));
    for r in with {
        if let Some(m) = &r.membw {
            let _ = write!(
                b,
                "<pre>{}</pre>",
                esc(&format!("[{}]\n{}", r.config, text_membw(m)))
            );
        }
    }
}

fn html_latency(b: &mut String, runs: &[RunFile]) {
    let with: Vec<&RunFile> = runs.iter().filter(|r| r.latency.is_some()).collect();
    if with.is_empty() {
        return;
    }
    b.push_str("<h2>Wakeup latency</h2><p class=\"note\">Timer-driven thread per CPU (clock_nanosleep to absolute deadlines); histogram of wakeup latency in 1 µs buckets, log count scale.</p>");
    for r in with {
        let Some(l) = &r.latency else { continue };
        let series: Vec<(String, Vec<u64>)> = l
            .cpus
            .iter()
            .filter(|c| c.error.is_none())
            .map(|c| (format!("cpu{}", c.cpu), c.histogram.clone()))
            .collect();
        b.push_str(&svg::histogram(
            &format!("Wakeup latency — {}", r.config),
            "latency (µs)",
            &series,
        ));
        let _ = write!(b, "<pre>{}</pre>", esc(&text_latency(l)));
    }
}

fn html_frames(b: &mut String, runs: &[RunFile]) {
    let with: Vec<&RunFile> = runs.iter().filter(|r| !r.frametimes.is_empty()).collect();
    if with.is_empty() {
        return;
    }
    b.push_str("<h2>Frame times</h2><p class=\"note\">Frame time over the run (each log), and average FPS with the 5/2/1% lows (1000 / frame time at the 95/98/99th percentile) — the figures of the VFIO gaming-host write-up. Logs marked (samples) hold one frame time per polling interval, not every frame: their figures are approximate.</p>");
    let mut lines = Vec::new();
    let mut series = Vec::new();
    let mut cats = vec!["average".to_string()];
    if let Some(l) = with.first().and_then(|r| r.frametimes.first()) {
        let mut lows: Vec<f64> = l.stats.lows.iter().map(|x| x.percent).collect();
        lows.sort_by(|a, b| b.total_cmp(a));
        cats.extend(lows.iter().map(|p| format!("{p}% low")));
    }
    for r in &with {
        for l in &r.frametimes {
            let label = format!(
                "{}{}",
                l.label(),
                if l.lows_approximate { " (samples)" } else { "" }
            );
            let name = if runs.len() > 1 {
                format!("{}: {label}", r.config)
            } else {
                label
            };
            // frames at their cumulative time; samples at their row times
            let step = l.sampling.as_ref().and_then(|s| s.interval_ms);
            let mut t = 0.0;
            let pts: Vec<(f64, f64)> = l
                .frame_times_ms
                .iter()
                .enumerate()
                .map(|(i, ms)| match step {
                    Some(st) if l.lows_approximate => ((i + 1) as f64 * st / 1000.0, *ms),
                    _ => {
                        t += ms / 1000.0;
                        (t, *ms)
                    }
                })
                .collect();
            lines.push((name.clone(), pts));
            let vals = cats
                .iter()
                .map(|c| {
                    if c == "average" {
                        return Some(Bar {
                            value: l.stats.avg_fps,
                            lo: None,
                            hi: None,
                        });
                    }
                    l.stats
                        .lows
                        .iter()
                        .find(|x| format!("{}% low", x.percent) == *c)
                        .map(|x| Bar {
                            value: x.fps,
                            lo: None,
                            hi: None,
                        })
                })
                .collect();
            series.push((name, vals));
        }
    }
    b.push_str(&svg::line_plot(
        "Frame times",
        "time (s)",
        "frame time (ms)",
        &lines,
    ));
    b.push_str(&svg::bar_chart(
        "FPS: average and percentile lows",
        "FPS",
        &cats,
        &series,
        false,
    ));
    for r in with {
        let _ = write!(b, "<pre>{}</pre>", esc(&text_frametimes(&r.frametimes)));
    }
}

/// The figures of one layout's runs that [`reader_charts`] draws: (the `--run` command or
/// file the figure came from, the measure), one per key and run.
pub type LayoutMeasures = (String, Vec<(String, crate::readers::Measure)>);

/// Per name in a chart, its (size, value) figures of one layout.
type Points = std::collections::BTreeMap<String, Vec<(Option<u64>, f64)>>;

/// A curve's identity: (command, benchmark, metric, unit).
type CurveKey = (String, String, String, String);

/// A family of figures drawn in one chart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Family {
    command: String,
    benchmark: String,
    /// Curves: one chart per metric; bars: every metric of the unit.
    metric: Option<String>,
    unit: String,
}

/// Parameters that follow the size rather than tell series apart (nccl-tests' element
/// `count`), left out of a curve's series names.
const SIZE_BOUND: [&str; 1] = ["count"];

/// The chart `m` is drawn in: per metric for a curve, per unit for bars.
fn family_of(m: &crate::readers::Measure, command: &str, curve: bool) -> Family {
    Family {
        command: command.to_string(),
        benchmark: m.benchmark.clone(),
        metric: curve.then(|| m.metric.clone()),
        unit: m.unit.clone(),
    }
}

/// A measure's name within its chart: its key without the benchmark (and, in a curve,
/// without the metric, the size and the size-bound parameters).
fn series_label(m: &crate::readers::Measure) -> String {
    m.params
        .iter()
        .filter(|(k, _)| !SIZE_BOUND.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One chart per family of `--run` figures: a curve per layout over the size where the
/// figures are per size (nccl-tests' bus bandwidth against message size, a pointer-chase
/// latency curve, a bandwidth sweep), grouped bars per layout otherwise (STREAM per kernel
/// and binding, host↔device copies per GPU and direction, matmul per dtype, sysbench);
/// median of the runs, bars with min–max whiskers. STREAM's pass times are left to the
/// table (its rates say the same). Empty when there is nothing to draw.
pub fn reader_charts(layouts: &[LayoutMeasures]) -> String {
    use std::collections::{BTreeMap, BTreeSet};
    // which (command, benchmark, metric, unit) are curves: sizes on every figure, ≥ 3 of them
    let mut sizes: BTreeMap<CurveKey, (BTreeSet<u64>, bool)> = BTreeMap::new();
    for (_, ms) in layouts {
        for (cmd, m) in ms {
            let e = sizes
                .entry((
                    cmd.clone(),
                    m.benchmark.clone(),
                    m.metric.clone(),
                    m.unit.clone(),
                ))
                .or_insert((BTreeSet::new(), true));
            match m.size_bytes {
                Some(b) => {
                    e.0.insert(b);
                }
                None => e.1 = false,
            }
        }
    }
    let is_curve = |cmd: &str, m: &crate::readers::Measure| {
        sizes
            .get(&(
                cmd.to_string(),
                m.benchmark.clone(),
                m.metric.clone(),
                m.unit.clone(),
            ))
            .is_some_and(|(s, all)| *all && s.len() >= 3)
    };
    // family → layout → name in the chart → (size, value) figures
    let mut families: Vec<Family> = Vec::new();
    let mut data: BTreeMap<Family, Vec<Points>> = BTreeMap::new();
    for (li, (_, ms)) in layouts.iter().enumerate() {
        for (cmd, m) in ms {
            if m.benchmark == crate::readers::stream::BENCHMARK && m.metric.ends_with("_time") {
                continue;
            }
            let curve = is_curve(cmd, m);
            let fam = family_of(m, cmd, curve);
            if !families.contains(&fam) {
                families.push(fam.clone());
            }
            let name = if curve {
                series_label(m)
            } else {
                let key = m.key();
                key.strip_prefix(&format!("{}.", m.benchmark))
                    .unwrap_or(&key)
                    .to_string()
            };
            let per = data
                .entry(fam)
                .or_insert_with(|| vec![Points::new(); layouts.len()]);
            per[li]
                .entry(name)
                .or_default()
                .push((m.size_bytes, m.value));
        }
    }
    if families.is_empty() {
        return String::new();
    }
    let mut b = String::from("<h2>Benchmark outputs</h2><p class=\"note\">One chart per family of figures the --run commands (or imported files) printed: a curve per layout over the size where the figures are per size, bars per layout otherwise; the median of the runs, bars with min–max whiskers. Figures a tool printed several times in one output are one figure per run (see the notes above).</p>");
    for fam in &families {
        let Some(per) = data.get(fam) else { continue };
        let title = match &fam.metric {
            Some(metric) => format!("{}: {} {metric}", fam.command, fam.benchmark),
            None => format!("{}: {}", fam.command, fam.benchmark),
        };
        if fam.metric.is_some() {
            b.push_str(&curve_chart(&title, fam, layouts, per));
        } else {
            bar_charts(&mut b, &title, fam, layouts, per);
        }
    }
    b
}

/// The median of `values` (they are never empty where called).
fn median(values: &[f64]) -> Option<crate::stats::Summary> {
    crate::stats::Summary::of(values)
}

fn curve_chart(title: &str, fam: &Family, layouts: &[LayoutMeasures], per: &[Points]) -> String {
    // a parameter every series shares (`type=float`) says nothing in the legend
    let mut shared: Option<std::collections::BTreeSet<&str>> = None;
    for name in per.iter().flat_map(|names| names.keys()) {
        let words: std::collections::BTreeSet<&str> = name.split(' ').collect();
        shared = Some(match shared {
            Some(s) => s.intersection(&words).copied().collect(),
            None => words,
        });
    }
    let shared = shared.unwrap_or_default();
    let mut series = Vec::new();
    for ((layout, _), names) in layouts.iter().zip(per) {
        for (name, pts) in names {
            let name: Vec<&str> = name.split(' ').filter(|w| !shared.contains(w)).collect();
            let name = name.join(" ");
            let mut by_size: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
            for (size, v) in pts {
                if let Some(s) = size {
                    by_size.entry(*s).or_default().push(*v);
                }
            }
            let line: Vec<(f64, f64)> = by_size
                .iter()
                .filter_map(|(s, vs)| Some((*s as f64, median(vs)?.median)))
                .collect();
            let label = if name.is_empty() {
                layout.clone()
            } else {
                format!("{layout} {name}")
            };
            series.push((label, line));
        }
    }
    let what = if fam.benchmark == crate::readers::chase::BENCHMARK {
        "working set (bytes, log₂)"
    } else {
        "size (bytes, log₂)"
    };
    let log_y = crate::stats::is_time_unit(&fam.unit);
    let y = format!(
        "{} ({}{})",
        fam.metric.as_deref().unwrap_or(""),
        fam.unit,
        if log_y { ", log" } else { "" }
    );
    svg::size_curve(title, what, &y, &series, log_y)
}

/// Bars per layout, at most 16 categories a chart (more are split over several).
fn bar_charts(
    b: &mut String,
    title: &str,
    fam: &Family,
    layouts: &[LayoutMeasures],
    per: &[Points],
) {
    let mut cats: Vec<String> = Vec::new();
    for names in per {
        for name in names.keys() {
            if !cats.contains(name) {
                cats.push(name.clone());
            }
        }
    }
    let parts = cats.len().div_ceil(16).max(1);
    let title = format!("{title} ({})", fam.unit);
    for (pi, chunk) in cats.chunks(16).enumerate() {
        let series: Vec<(String, Vec<Option<Bar>>)> = layouts
            .iter()
            .zip(per)
            .map(|((layout, _), names)| {
                let bars = chunk
                    .iter()
                    .map(|c| {
                        let vs: Vec<f64> = names.get(c)?.iter().map(|p| p.1).collect();
                        bar_of(median(&vs).as_ref())
                    })
                    .collect();
                (layout.clone(), bars)
            })
            .collect();
        let t = if parts > 1 {
            format!("{title}, {}/{parts}", pi + 1)
        } else {
            title.clone()
        };
        b.push_str(&svg::bar_chart(&t, &fam.unit, chunk, &series, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let t = table(
            &["a", "bb"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(t, "a    bb\n---  --\nxyz   1\nq    22\n");
    }

    #[test]
    fn hist_text() {
        assert_eq!(
            text_hist(&[0, 3, 1, 0, 2], 4, 5),
            "[1,2)µs:3 [2,4)µs:1 [4,5)µs:2 ≥5µs:4"
        );
        // the default 1000 µs histogram: the last range stops where the overflow starts
        let mut h = vec![0u64; 1000];
        h[700] = 1;
        h[999] = 2;
        assert_eq!(text_hist(&h, 3, 1000), "[512,1000)µs:3 ≥1000µs:3");
    }

    proptest::proptest! {
        /// The printed ranges are disjoint, in order, cover every bucket once, and their
        /// counts add up to the histogram's.
        #[test]
        fn hist_ranges_partition_the_buckets(
            h in proptest::collection::vec(0u64..5, 0..3000),
            overflow in 0u64..5,
        ) {
            let ranges = hist_ranges(h.len());
            let mut next = 0;
            for &(lo, hi) in &ranges {
                proptest::prop_assert_eq!(lo, next);
                proptest::prop_assert!(hi > lo && hi <= h.len());
                next = hi;
            }
            proptest::prop_assert_eq!(next, h.len());
            let text = text_hist(&h, overflow, h.len() as u32);
            let mut total = 0u64;
            let mut last_hi = 0usize;
            for part in text.split(' ').filter(|p| !p.is_empty()) {
                let (range, n) = part.rsplit_once(':').unwrap();
                let n: u64 = n.parse().unwrap();
                if let Some(r) = range.strip_prefix('[') {
                    let (lo, hi) = r.trim_end_matches(")µs").split_once(',').unwrap();
                    let (lo, hi): (usize, usize) = (lo.parse().unwrap(), hi.parse().unwrap());
                    proptest::prop_assert!(lo >= last_hi && hi <= h.len());
                    last_hi = hi;
                } else {
                    proptest::prop_assert_eq!(range, format!("≥{}µs", h.len()));
                    proptest::prop_assert_eq!(n, overflow);
                }
                total += n;
            }
            proptest::prop_assert_eq!(total, h.iter().sum::<u64>() + overflow);
        }
    }
}
