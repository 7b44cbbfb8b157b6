//! Rendering what the analysis found: [`boot`] for one boot (terminal table, HTML Gantt
//! page, the estimator's table), [`fleet`] for a fleet (table, JSON lines, Prometheus
//! textfile, HTML with histograms).

pub mod boot;
pub mod fleet;
