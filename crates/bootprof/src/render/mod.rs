//! Rendering what the analysis found: [`boot`] for one boot (terminal table, HTML Gantt
//! page, the estimator's table), [`fleet`] for a fleet (table, JSON lines, Prometheus
//! textfile, HTML with histograms).

pub mod boot;
pub mod fleet;

/// `s` cut to `n` characters, the last one `…` when cut.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
