//! Inline SVG charts for the HTML report: grouped bars with min–max whiskers, line plots
//! (frame times), and step histograms (latency). No scripts, no external resources.

use std::fmt::Write;

pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const W: f64 = 760.0;
const H: f64 = 320.0;
const ML: f64 = 70.0;
const MR: f64 = 20.0;
const MT: f64 = 34.0;
const MB: f64 = 58.0;

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Format a tick/label value compactly.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.3e}", v)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// "Nice" linear ticks covering [0, max].
fn linear_ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (0..=((max / step).ceil() as usize).min(20))
        .map(|i| i as f64 * step)
        .collect()
}

/// Y axis: linear from 0, or log10 over decades.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Axis {
    fn new(max: f64, min_pos: f64, log: bool) -> Axis {
        if log {
            let lo = 10f64.powf(min_pos.max(1e-9).log10().floor());
            let hi = 10f64.powf(max.max(lo * 10.0).log10().ceil());
            let mut ticks = vec![];
            let mut t = lo;
            while t <= hi * 1.0001 {
                ticks.push(t);
                t *= 10.0;
            }
            Axis { log, lo, hi, ticks }
        } else {
            let ticks = linear_ticks(max);
            let hi = ticks.last().copied().unwrap_or(1.0).max(1e-12);
            Axis {
                log,
                lo: 0.0,
                hi,
                ticks,
            }
        }
    }
    /// Fraction 0..1 of the axis height.
    fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            if v <= 0.0 {
                0.0
            } else {
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        } else {
            v / self.hi
        };
        f.clamp(0.0, 1.0)
    }
    fn y(&self, v: f64) -> f64 {
        MT + (H - MT - MB) * (1.0 - self.frac(v))
    }
}

/// Tick labels at `ticks` (placed by `xpos`) and the axis label under the plot area.
fn x_axis(out: &mut String, ticks: &[f64], xpos: impl Fn(f64) -> f64, x_label: &str) {
    for t in ticks {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="11">{v}</text>"#,
            x = xpos(*t),
            y = H - MB + 14.0,
            v = num(*t)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{x}" y="{y}" text-anchor="middle" font-size="12">{l}</text>"#,
        x = (ML + W - MR) / 2.0,
        y = H - MB + 30.0,
        l = esc(x_label)
    );
}

/// The chart's frame; `names` are the legend's entries, whose rows below the plot make the
/// chart taller.
fn frame(out: &mut String, class: &str, title: &str, y_label: &str, axis: &Axis, names: &[String]) {
    let h = H + LEGEND_ROW * legend_layout(names).len().saturating_sub(1) as f64;
    let _ = write!(
        out,
        r#"<svg class="chart {class}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{t}">"#,
        t = esc(title)
    );
    let _ = write!(
        out,
        r##"<rect x="0" y="0" width="{W}" height="{h}" fill="#ffffff"/><text x="{x}" y="20" text-anchor="middle" font-size="15" font-weight="bold">{t}</text>"##,
        x = W / 2.0,
        t = esc(title)
    );
    for t in &axis.ticks {
        let y = axis.y(*t);
        let _ = write!(
            out,
            r##"<line x1="{ML}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{v}</text>"##,
            x2 = W - MR,
            tx = ML - 6.0,
            ty = y + 4.0,
            v = num(*t)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{yb}" stroke="#333333"/><line x1="{ML}" x2="{x2}" y1="{yb}" y2="{yb}" stroke="#333333"/><text transform="translate(16 {cy}) rotate(-90)" text-anchor="middle" font-size="12">{l}</text>"##,
        yb = H - MB,
        x2 = W - MR,
        cy = (MT + H - MB) / 2.0,
        l = esc(y_label)
    );
}

/// Height of one legend row.
const LEGEND_ROW: f64 = 16.0;
/// Width of a legend label's character (12 px text), for the layout.
const LEGEND_CHAR: f64 = 7.0;

/// The legend's rows: each entry (series index, label as shown, x), wrapped so that no row
/// runs past the chart's right edge; a label longer than a row is cut with `…` (the full
/// name is the entry's tooltip).
fn legend_layout(names: &[String]) -> Vec<Vec<(usize, String, f64)>> {
    let max_chars = ((W - ML - MR - 16.0) / LEGEND_CHAR) as usize;
    let mut rows: Vec<Vec<(usize, String, f64)>> = vec![Vec::new()];
    let mut x = ML;
    for (i, n) in names.iter().enumerate() {
        let label: String = if n.chars().count() > max_chars {
            let mut t: String = n.chars().take(max_chars.saturating_sub(1)).collect();
            t.push('…');
            t
        } else {
            n.clone()
        };
        let w = 30.0 + LEGEND_CHAR * label.chars().count() as f64;
        if x > ML && x + w - 14.0 > W - MR {
            rows.push(Vec::new());
            x = ML;
        }
        if let Some(r) = rows.last_mut() {
            r.push((i, label, x));
        }
        x += w;
    }
    rows
}

fn legend(out: &mut String, names: &[String]) {
    for (row, entries) in legend_layout(names).iter().enumerate() {
        let y = H - 18.0 + LEGEND_ROW * row as f64;
        for (i, label, x) in entries {
            let c = PALETTE[i % PALETTE.len()];
            let _ = write!(
                out,
                r#"<g><title>{full}</title><rect x="{x}" y="{y}" width="12" height="12" fill="{c}"/><text x="{tx}" y="{ty}" font-size="12">{n}</text></g>"#,
                full = esc(names.get(*i).map_or("", String::as_str)),
                tx = x + 16.0,
                ty = y + 10.0,
                n = esc(label)
            );
        }
    }
}

/// One bar: the value drawn, and an optional min–max whisker.
#[derive(Debug, Clone, Copy)]
pub struct Bar {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

/// Grouped bars: one group per category, one bar per series (`None`: no bar).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<Option<Bar>>)],
    log_y: bool,
) -> String {
    let vals = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .flat_map(|b| [Some(b.value), b.hi, b.lo])
        .flatten()
        .filter(|v| v.is_finite());
    let (max, min_pos) = vals.fold((0.0f64, f64::INFINITY), |(m, p), v| {
        (m.max(v), if v > 0.0 { p.min(v) } else { p })
    });
    let axis = Axis::new(max, if min_pos.is_finite() { min_pos } else { 1.0 }, log_y);
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let mut out = String::new();
    frame(&mut out, "bars", title, y_label, &axis, &names);
    let n_cat = categories.len().max(1) as f64;
    let group_w = (W - ML - MR) / n_cat;
    let n_ser = series.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / n_ser).min(60.0);
    let base = H - MB;
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ML + group_w * ci as f64;
        let start = gx + (group_w - bar_w * n_ser) / 2.0;
        for (si, (name, vals)) in series.iter().enumerate() {
            let Some(Some(b)) = vals.get(ci) else {
                continue;
            };
            let x = start + bar_w * si as f64;
            let y = axis.y(b.value);
            let c = PALETTE[si % PALETTE.len()];
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{n} {cat}: {v}</title></rect>"#,
                w = (bar_w - 2.0).max(1.0),
                h = (base - y).max(0.0),
                n = esc(name),
                cat = esc(cat),
                v = num(b.value)
            );
            if let (Some(lo), Some(hi)) = (b.lo, b.hi) {
                let cx = x + (bar_w - 2.0) / 2.0;
                let _ = write!(
                    out,
                    r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="#000000" stroke-width="1.5"/>"##,
                    y1 = axis.y(lo),
                    y2 = axis.y(hi)
                );
            }
            if bar_w > 28.0 {
                let _ = write!(
                    out,
                    r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="middle" font-size="10">{v}</text>"#,
                    tx = x + bar_w / 2.0 - 1.0,
                    ty = y - 3.0,
                    v = num(b.value)
                );
            }
        }
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="12">{c}</text>"#,
            x = gx + group_w / 2.0,
            y = H - MB + 16.0,
            c = esc(cat)
        );
    }
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Reduce a long series to at most `2 · buckets` points, keeping each bucket's min and max
/// (spikes stay visible).
pub fn downsample(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if points.len() <= buckets * 2 || buckets == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(buckets * 2);
    for chunk in points.chunks(per) {
        let lo = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let hi = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.extend([*lo, *hi]);
            } else {
                out.extend([*hi, *lo]);
            }
        }
    }
    out
}

/// Line plot of several series over a shared x axis.
pub fn line_plot(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let ymax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let xmax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let axis = Axis::new(ymax, 1.0, false);
    let xt = linear_ticks(xmax);
    let xhi = xt.last().copied().unwrap_or(1.0).max(1e-12);
    let xpos = |x: f64| ML + (W - ML - MR) * (x / xhi).clamp(0.0, 1.0);
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let mut out = String::new();
    frame(&mut out, "lines", title, y_label, &axis, &names);
    x_axis(&mut out, &xt, xpos, x_label);
    for (i, (_, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let mut d = String::new();
        for (j, (x, y)) in downsample(pts, 700).iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if j == 0 { "M" } else { "L" },
                xpos(*x),
                axis.y(*y)
            );
        }
        let _ = write!(
            out,
            r#"<path class="series" d="{d}" fill="none" stroke="{c}" stroke-width="1" stroke-opacity="0.85"/>"#
        );
    }
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// A byte count as a short label: `512`, `4K`, `1M`, `2G` (powers of 1024).
pub fn bytes_label(v: f64) -> String {
    const UNITS: [(f64, &str); 4] = [
        (1_099_511_627_776.0, "T"),
        (1_073_741_824.0, "G"),
        (1_048_576.0, "M"),
        (1024.0, "K"),
    ];
    let short = |x: f64| {
        if x.fract() == 0.0 && x < 1e6 {
            format!("{x:.0}")
        } else {
            num(x)
        }
    };
    for (scale, unit) in UNITS {
        if v >= scale {
            return format!("{}{unit}", short(v / scale));
        }
    }
    short(v)
}

/// A curve over sizes: each series' points (x in bytes, y) joined and marked, x on a log₂
/// scale labelled in bytes, y linear from 0 or log₁₀; points with x ≤ 0 or a non-finite
/// value are left out.
pub fn size_curve(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_y: bool,
) -> String {
    let ok = |p: &&(f64, f64)| p.0 > 0.0 && p.0.is_finite() && p.1.is_finite();
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, p)| p.iter().filter(ok).copied())
        .collect();
    let ymax = all.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let ymin = all
        .iter()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let axis = Axis::new(ymax, if ymin.is_finite() { ymin } else { 1.0 }, log_y);
    let (lo, hi) = all.iter().fold((f64::INFINITY, 0.0f64), |(l, h), p| {
        (l.min(p.0.log2()), h.max(p.0.log2()))
    });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo.floor(), hi.ceil())
    } else if lo.is_finite() {
        (lo.floor() - 1.0, lo.floor() + 1.0)
    } else {
        (0.0, 1.0)
    };
    let xpos = |x: f64| ML + (W - ML - MR) * ((x.log2() - lo) / (hi - lo)).clamp(0.0, 1.0);
    let step = ((hi - lo) / 10.0).ceil().max(1.0);
    let mut ticks = Vec::new();
    let mut e = lo;
    while e <= hi + 1e-9 && ticks.len() < 40 {
        ticks.push(2f64.powf(e));
        e += step;
    }
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let mut out = String::new();
    frame(&mut out, "curve", title, y_label, &axis, &names);
    for t in &ticks {
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" font-size="11">{v}</text>"#,
            x = xpos(*t),
            y = H - MB + 14.0,
            v = bytes_label(*t)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{x}" y="{y}" text-anchor="middle" font-size="12">{l}</text>"#,
        x = (ML + W - MR) / 2.0,
        y = H - MB + 30.0,
        l = esc(x_label)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = pts.iter().filter(ok).copied().collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut d = String::new();
        for (j, (x, y)) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if j == 0 { "M" } else { "L" },
                xpos(*x),
                axis.y(*y)
            );
        }
        let _ = write!(
            out,
            r#"<path class="series" d="{d}" fill="none" stroke="{c}" stroke-width="1.5"/>"#
        );
        for (x, y) in &pts {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"><title>{} {}: {}</title></circle>"#,
                xpos(*x),
                axis.y(*y),
                esc(name),
                bytes_label(*x),
                num(*y)
            );
        }
    }
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Step histograms (1-unit buckets) on a log count axis, x up to the last non-empty bucket.
pub fn histogram(title: &str, x_label: &str, series: &[(String, Vec<u64>)]) -> String {
    let last = series
        .iter()
        .filter_map(|(_, h)| h.iter().rposition(|c| *c > 0))
        .max()
        .unwrap_or(0)
        + 2;
    let ymax = series
        .iter()
        .flat_map(|(_, h)| h.iter().copied())
        .max()
        .unwrap_or(1) as f64;
    let axis = Axis::new(ymax.max(1.0), 1.0, true);
    let xt = linear_ticks(last as f64);
    let xhi = xt.last().copied().unwrap_or(1.0).max(1.0);
    let xpos = |x: f64| ML + (W - ML - MR) * (x / xhi).clamp(0.0, 1.0);
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let mut out = String::new();
    frame(&mut out, "histogram", title, "wakeups (log)", &axis, &names);
    x_axis(&mut out, &xt, xpos, x_label);
    let base = H - MB;
    for (i, (_, h)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let mut d = format!("M{:.1},{base:.1} ", xpos(0.0));
        for (b, &n) in h.iter().enumerate().take(last) {
            let y = if n == 0 { base } else { axis.y(n as f64) };
            let _ = write!(
                d,
                "L{:.1},{y:.1} L{:.1},{y:.1} ",
                xpos(b as f64),
                xpos(b as f64 + 1.0)
            );
        }
        let _ = write!(
            out,
            r#"<path class="series" d="{d}" fill="none" stroke="{c}" stroke-width="1.5"/>"#
        );
    }
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_curves_are_log2_in_bytes() {
        assert_eq!(
            [8.0, 4096.0, 1536.0, 2097152.0, 1073741824.0].map(bytes_label),
            ["8", "4K", "1.50K", "2M", "1G"]
        );
        let c = size_curve(
            "busbw <&>",
            "size",
            "GB/s",
            &[
                (
                    "a".into(),
                    vec![(8.0, 0.1), (1024.0, 2.0), (1048576.0, 11.0)],
                ),
                // bad points are left out, not drawn at 0
                (
                    "b".into(),
                    vec![(0.0, 5.0), (64.0, f64::NAN), (4096.0, 3.0)],
                ),
            ],
            false,
        );
        assert!(c.starts_with("<svg class=\"chart curve\"") && c.ends_with("</svg>"));
        assert!(c.contains("busbw &lt;&amp;&gt;"));
        assert_eq!(c.matches("<circle").count(), 4);
        assert_eq!(c.matches("<path class=\"series\"").count(), 2);
        // the x axis spans 2^3 … 2^20, a tick every two powers of two from 8
        assert!(c.contains(">8</text>") && c.contains(">512K</text>"), "{c}");
        assert!(!c.contains("NaN"));
        // nothing to draw is still a chart
        let empty = size_curve("e", "x", "y", &[], true);
        assert!(empty.ends_with("</svg>") && !empty.contains("NaN"));
    }

    #[test]
    fn charts_are_well_formed() {
        let b = bar_chart(
            "t<&>",
            "GB/s",
            &["copy".into(), "triad".into()],
            &[
                (
                    "a".into(),
                    vec![
                        Some(Bar {
                            value: 10.0,
                            lo: Some(9.0),
                            hi: Some(11.0),
                        }),
                        None,
                    ],
                ),
                (
                    "b".into(),
                    vec![
                        Some(Bar {
                            value: 20.0,
                            lo: None,
                            hi: None,
                        }),
                        Some(Bar {
                            value: 5.0,
                            lo: None,
                            hi: None,
                        }),
                    ],
                ),
            ],
            false,
        );
        assert!(b.starts_with("<svg") && b.ends_with("</svg>"));
        assert_eq!(b.matches("class=\"bar\"").count(), 3);
        assert!(b.contains("t&lt;&amp;&gt;"));
        let l = bar_chart(
            "log",
            "ns",
            &["x".into()],
            &[(
                "s".into(),
                vec![Some(Bar {
                    value: 3605.0,
                    lo: None,
                    hi: None,
                })],
            )],
            true,
        );
        assert!(
            l.contains(">1000<") || l.contains(">1.000e3<") || l.contains(">10000<"),
            "{l}"
        );
        let p = line_plot(
            "ft",
            "s",
            "ms",
            &[(
                "x".into(),
                (0..10_000).map(|i| (i as f64, (i % 7) as f64)).collect(),
            )],
        );
        assert!(p.contains("<path"));
        assert!(p.matches('L').count() <= 1500);
        let h = histogram("lat", "µs", &[("cpu0".into(), vec![0, 5, 100, 3])]);
        assert!(h.contains("class=\"series\""));
    }

    #[test]
    fn a_long_legend_wraps_inside_the_chart() {
        // `bench report` of --all-apps runs: six series named file: app (pid, swap chain)
        let names: Vec<String> = (0..6)
            .map(|i| {
                format!("allapps: pm24_default.csv: dwm.exe (pid 1480, swap chain 0x2A1B0C0D0E{i})")
            })
            .chain(std::iter::once("x".repeat(200)))
            .collect();
        let series: Vec<(String, Vec<(f64, f64)>)> = names
            .iter()
            .map(|n| (n.clone(), vec![(0.0, 7.0), (1.0, 7.1)]))
            .collect();
        let p = line_plot("ft", "s", "ms", &series);
        let rows = legend_layout(&names);
        assert!(rows.len() >= 4, "{rows:?}");
        for (_, label, x) in rows.iter().flatten() {
            let right = x + 16.0 + LEGEND_CHAR * label.chars().count() as f64;
            assert!(right <= W - MR + 1e-9, "{label} ends at {right}");
        }
        // every series is named (in full, as the tooltip), and the chart grew to hold them
        for n in &names {
            assert!(p.contains(&format!("<title>{}</title>", esc(n))), "{n}");
        }
        let h = H + LEGEND_ROW * (rows.len() - 1) as f64;
        assert!(
            p.contains(&format!("viewBox=\"0 0 {W} {h}\"")),
            "{}",
            &p[..200]
        );
        // one short name: one row, the old height
        assert_eq!(legend_layout(&["a".to_string()]).len(), 1);
    }

    #[test]
    fn downsample_keeps_spikes() {
        let mut pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 10.0)).collect();
        pts[5_555].1 = 99.0;
        let d = downsample(&pts, 100);
        assert!(d.len() <= 200);
        assert!(d.iter().any(|p| p.1 == 99.0));
    }
}
