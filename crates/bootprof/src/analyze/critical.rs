//! Step 7 of the analysis: the critical path — the chain of phases that set the boot's
//! length.

use std::collections::BTreeMap;

use crate::analyze::clocks::secs;
use crate::analyze::model::{CriticalStep, Phase};
use crate::parse::time::{Nanos, NS_PER_S};

/// Walk back from the phase that ends last, each time to the phase that ends latest at or
/// before the current one starts (with 0.5 s slack). Phases inside a step are listed in it.
/// Each step's `on_path_s` is what it adds beyond the steps before it, so the shares and
/// the gaps add up to the path's span and never to more than the boot.
pub fn critical_path(phases: &[Phase]) -> Vec<CriticalStep> {
    const SLACK: i64 = NS_PER_S / 2;
    let mut steps: Vec<usize> = Vec::new();
    let Some(mut cur) = phases
        .iter()
        .enumerate()
        .max_by(|a, b| {
            a.1.end_ns
                .cmp(&b.1.end_ns)
                .then(b.1.start_ns.cmp(&a.1.start_ns))
        })
        .map(|(i, _)| i)
    else {
        return Vec::new();
    };
    loop {
        steps.push(cur);
        let Some(c) = phases.get(cur) else { break };
        // the phase that was running (or ended) latest before this one started
        let reach = |p: &Phase| p.end_ns.min(c.start_ns.saturating_add(SLACK));
        let pred = phases
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !steps.contains(i) && p.start_ns < c.start_ns && p.name != "dma_pinning"
            })
            .max_by(|a, b| {
                reach(a.1)
                    .cmp(&reach(b.1))
                    .then(b.1.start_ns.cmp(&a.1.start_ns))
            })
            .map(|(i, _)| i);
        match pred {
            Some(p) if steps.len() < phases.len() => cur = p,
            _ => break,
        }
    }
    steps.reverse();
    let mut out = Vec::new();
    let mut prev_end: Option<Nanos> = None;
    for i in steps {
        let Some(p) = phases.get(i) else { continue };
        let contains = phases
            .iter()
            .enumerate()
            .filter(|(j, q)| {
                *j != i
                    && q.start_ns >= p.start_ns
                    && q.end_ns <= p.end_ns
                    && q.name != p.name
                    && q.name != "dma_pinning"
            })
            .fold(BTreeMap::<&str, (usize, f64)>::new(), |mut m, (_, q)| {
                let e = m.entry(q.name).or_default();
                e.0 += 1;
                e.1 += q.duration_s;
                m
            })
            .into_iter()
            .map(|(n, (c, s))| {
                if c > 1 {
                    format!("{c}× {n} {s:.1} s")
                } else {
                    format!("{n} {s:.1} s")
                }
            })
            .collect();
        let from = prev_end.map_or(p.start_ns, |e| e.max(p.start_ns));
        out.push(CriticalStep {
            phase: p.name,
            label: p.label.clone(),
            start_s: p.start_s,
            duration_s: p.duration_s,
            on_path_s: secs(p.end_ns, from).max(0.0),
            gap_before_s: prev_end.map_or(0.0, |e| secs(p.start_ns, e).max(0.0)),
            contains,
            at_least: p.at_least,
        });
        prev_end = Some(prev_end.map_or(p.end_ns, |e: Nanos| e.max(p.end_ns)));
    }
    out
}
