//! SVG figures: ping RTT over time per policy (paper figure 5) and throughput bars per message
//! size and policy (figure 6). Plain SVG text, no dependencies.

use std::fmt::Write;

use crate::{PolicyKind, RunResult};

const W: f64 = 760.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 45.0;

fn color(p: PolicyKind) -> &'static str {
    match p {
        PolicyKind::Static => "#d62728",
        PolicyKind::Irqbalance => "#1f77b4",
        PolicyKind::VbalanceProcstat => "#8c564b",
        PolicyKind::VbalanceProcstatIr => "#c49c94",
        PolicyKind::VbalanceTick => "#9467bd",
        PolicyKind::VbalanceTickIr => "#c5b0d5",
        PolicyKind::Vbalance => "#ff7f0e",
        PolicyKind::VbalanceGuest => "#ffbb78",
        PolicyKind::HostBoost => "#17becf",
        PolicyKind::HostBoostIdeal => "#9edae5",
        PolicyKind::HostSlice => "#bcbd22",
        PolicyKind::VbalanceIr => "#2ca02c",
        PolicyKind::VbalanceOracle => "#7f7f7f",
        PolicyKind::VbalanceChase => "#e377c2",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Round up to a "nice" axis maximum.
fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Draw all results: one panel per (scenario, scheduler). Panels with pings are RTT-over-time
/// scatter plots; panels with streams are grouped throughput bars.
pub fn render(results: &[RunResult]) -> String {
    let mut panels: Vec<(String, String)> = Vec::new();
    for r in results {
        let key = (r.scenario.clone(), r.scheduler.name().to_string());
        if !panels.contains(&key) {
            panels.push(key);
        }
    }
    let h = TOP + panels.len() as f64 * (PANEL_H + TOP + BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, (scen, sched)) in panels.iter().enumerate() {
        let y0 = TOP + i as f64 * (PANEL_H + TOP + BOTTOM);
        let rs: Vec<&RunResult> = results
            .iter()
            .filter(|r| &r.scenario == scen && r.scheduler.name() == sched)
            .collect();
        let streams = rs.iter().any(|r| r.throughput_mbps.is_some());
        if streams {
            bars(&mut s, y0, &format!("{scen} — {sched}: throughput"), &rs);
        } else {
            rtt(&mut s, y0, &format!("{scen} — {sched}: ping RTT"), &rs);
        }
    }
    s.push_str("</svg>\n");
    s
}

fn axes(s: &mut String, y0: f64, title: &str, ymax: f64, ylabel: &str) {
    let x1 = W - RIGHT;
    let y1 = y0 + PANEL_H;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        y0 - 12.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{y0}" width="{}" height="{PANEL_H}" fill="none" stroke="black"/>"#,
        x1 - LEFT
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let y = y1 - PANEL_H * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            LEFT - 5.0,
            y + 4.0,
            fmt_num(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="15" y="{}" transform="rotate(-90 15 {})" text-anchor="middle">{}</text>"#,
        y0 + PANEL_H / 2.0,
        y0 + PANEL_H / 2.0,
        esc(ylabel)
    );
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn legend(s: &mut String, y0: f64, items: &[(String, &str)]) {
    for (k, (label, col)) in items.iter().enumerate() {
        let y = y0 + 10.0 + k as f64 * 18.0;
        let x = W - RIGHT + 12.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{col}"/><text x="{}" y="{}">{}</text>"#,
            y - 10.0,
            x + 18.0,
            y,
            esc(label)
        );
    }
}

fn rtt(s: &mut String, y0: f64, title: &str, rs: &[&RunResult]) {
    let ymax = nice_max(
        rs.iter()
            .flat_map(|r| r.rtt_series.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let tmax = rs
        .iter()
        .map(|r| r.simulated_s)
        .fold(0.0, f64::max)
        .max(1e-9);
    axes(s, y0, title, ymax, "RTT (ms)");
    let x1 = W - RIGHT;
    let y1 = y0 + PANEL_H;
    for k in 0..=4 {
        let t = tmax * k as f64 / 4.0;
        let x = LEFT + (x1 - LEFT) * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            y1 + 16.0,
            fmt_num(t)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time (s)</text>"#,
        (LEFT + x1) / 2.0,
        y1 + 34.0
    );
    let mut leg = Vec::new();
    for r in rs {
        let col = color(r.policy);
        let mut pts = String::new();
        for &(t, v) in &r.rtt_series {
            let x = LEFT + (x1 - LEFT) * (t / tmax).min(1.0);
            let y = y1 - PANEL_H * (v / ymax).min(1.0);
            let _ = write!(pts, "{x:.1},{y:.1} ");
        }
        // irqbalance often coincides with static: dash it so both stay visible
        let dash = if r.policy == PolicyKind::Irqbalance {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="1" opacity="0.85"{dash}/>"#
        );
        let label = match r.rtt_ms {
            Some(q) => format!("{} (max {:.1} ms)", r.policy.name(), q.max),
            None => r.policy.name().to_string(),
        };
        leg.push((label, col));
    }
    legend(s, y0, &leg);
}

fn bars(s: &mut String, y0: f64, title: &str, rs: &[&RunResult]) {
    let ymax = nice_max(
        rs.iter()
            .filter_map(|r| r.throughput_mbps)
            .fold(0.0, f64::max),
    );
    axes(s, y0, title, ymax, "throughput (Mbit/s)");
    let mut sizes: Vec<Option<u32>> = Vec::new();
    let mut pols: Vec<PolicyKind> = Vec::new();
    for r in rs {
        if !sizes.contains(&r.message_size) {
            sizes.push(r.message_size);
        }
        if !pols.contains(&r.policy) {
            pols.push(r.policy);
        }
    }
    let x1 = W - RIGHT;
    let y1 = y0 + PANEL_H;
    let group = (x1 - LEFT) / sizes.len().max(1) as f64;
    let bw = group * 0.8 / pols.len().max(1) as f64;
    for (gi, m) in sizes.iter().enumerate() {
        let gx = LEFT + gi as f64 * group + group * 0.1;
        for (pi, p) in pols.iter().enumerate() {
            let v = rs
                .iter()
                .find(|r| r.message_size == *m && r.policy == *p)
                .and_then(|r| r.throughput_mbps)
                .unwrap_or(0.0);
            let bh = PANEL_H * (v / ymax).min(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {:.1} Mbit/s</title></rect>"#,
                gx + pi as f64 * bw,
                y1 - bh,
                bw * 0.95,
                bh,
                color(*p),
                p.name(),
                v
            );
        }
        let label = m.map_or("-".to_string(), |m| format!("{m} B"));
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            gx + group * 0.4,
            y1 + 16.0,
            label
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">message size</text>"#,
        (LEFT + x1) / 2.0,
        y1 + 34.0
    );
    let leg: Vec<(String, &str)> = pols
        .iter()
        .map(|p| (p.name().to_string(), color(*p)))
        .collect();
    legend(s, y0, &leg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis() {
        assert_eq!(nice_max(93.0), 100.0);
        assert_eq!(nice_max(0.4), 0.5);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(180.0), 200.0);
    }
}
