//! cyclictest-like wakeup latency: one thread per measured CPU, pinned, sleeping to absolute
//! `CLOCK_MONOTONIC` deadlines `interval` apart with `clock_nanosleep(TIMER_ABSTIME)`; the
//! latency of a wakeup is the time read after waking minus the deadline. Optional CPU burners
//! load other CPUs (`load_cpus`).
//!
//! When a wakeup is later than the next deadline, the missed deadlines are skipped (counted
//! as `overruns`) instead of being fired back to back, so one long stall is one large sample.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use topo::CpuSet;

use crate::error::{BenchError, Result};
use crate::stats::{percentile_sorted, PercentileMethod, Summary};
use crate::{signals, sys, Metric};

#[derive(Debug, Clone)]
pub struct LatencyOptions {
    pub cpus: CpuSet,
    pub interval_us: u64,
    pub duration: Duration,
    /// SCHED_FIFO priority for the measuring threads (`None`: SCHED_OTHER).
    pub fifo_priority: Option<i32>,
    /// CPUs to keep busy with burner threads while measuring.
    pub load_cpus: Option<CpuSet>,
    /// Histogram range in µs (1 µs buckets; later wakeups land in `overflow`).
    pub hist_max_us: u32,
    /// Windows the run is cut into for the repeat statistics.
    pub windows: usize,
}

/// One CPU's wakeup latencies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLatency {
    pub cpu: u32,
    pub samples: u64,
    pub min_us: f64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub overruns: u64,
    /// `histogram[i]` = wakeups with latency in [i, i+1) µs.
    pub histogram: Vec<u64>,
    /// Wakeups at or beyond `hist_max_us`.
    pub overflow: u64,
    /// Per-window average, p99 and max (µs): the repeat samples used by `compare`.
    pub window_avg_us: Vec<f64>,
    pub window_p99_us: Vec<f64>,
    pub window_max_us: Vec<f64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyResult {
    pub interval_us: u64,
    pub duration_s: f64,
    /// `other` or `fifo:PRIO`.
    pub policy: String,
    pub load_cpus: Option<String>,
    pub hist_max_us: u32,
    pub cpus: Vec<CpuLatency>,
    pub notes: Vec<String>,
}

/// Summarise raw latencies (ns) of one CPU.
pub fn summarize(
    cpu: u32,
    lat_ns: &[u64],
    overruns: u64,
    hist_max_us: u32,
    windows: usize,
) -> CpuLatency {
    let mut hist = vec![0u64; hist_max_us as usize];
    let mut overflow = 0;
    for &l in lat_ns {
        match hist.get_mut((l / 1000) as usize) {
            Some(b) => *b += 1,
            None => overflow += 1,
        }
    }
    let us = |v: &[u64]| -> Vec<f64> {
        let mut s: Vec<f64> = v.iter().map(|&x| x as f64 / 1000.0).collect();
        s.sort_by(f64::total_cmp);
        s
    };
    let all = us(lat_ns);
    let p = |s: &[f64], q| percentile_sorted(s, q, PercentileMethod::NearestRank).unwrap_or(0.0);
    let (mut wa, mut wp, mut wm) = (vec![], vec![], vec![]);
    let w = windows.max(1);
    let per = lat_ns.len().div_ceil(w).max(1);
    for part in lat_ns.chunks(per) {
        let s = us(part);
        let sum = Summary::of(&s);
        wa.push(sum.as_ref().map_or(0.0, |x| x.mean));
        wp.push(p(&s, 99.0));
        wm.push(s.last().copied().unwrap_or(0.0));
    }
    let summary = Summary::of(&all);
    CpuLatency {
        cpu,
        samples: lat_ns.len() as u64,
        min_us: summary.as_ref().map_or(0.0, |s| s.min),
        avg_us: summary.as_ref().map_or(0.0, |s| s.mean),
        p50_us: p(&all, 50.0),
        p99_us: p(&all, 99.0),
        max_us: summary.as_ref().map_or(0.0, |s| s.max),
        overruns,
        histogram: hist,
        overflow,
        window_avg_us: wa,
        window_p99_us: wp,
        window_max_us: wm,
        error: None,
    }
}

fn burner(cpu: u32, stop: Arc<AtomicBool>) {
    let _ = sys::pin_current_thread(cpu);
    let mut buf = vec![1u64; 1 << 16];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = buf.len();
            if let Some(v) = buf.get_mut((x as usize) % len) {
                *v = v.wrapping_add(x);
            }
        }
    }
    std::hint::black_box(&buf);
}

pub fn run(opts: &LatencyOptions, bar: &indicatif::ProgressBar) -> Result<LatencyResult> {
    if opts.cpus.is_empty() {
        return Err(BenchError::Invalid("no CPUs to measure".into()));
    }
    if opts.interval_us == 0 || opts.interval_us > 10_000_000 {
        return Err(BenchError::Invalid("interval must be 1 µs … 10 s".into()));
    }
    let allowed = sys::allowed_cpus()?;
    let all = opts
        .cpus
        .union(opts.load_cpus.as_ref().unwrap_or(&CpuSet::new()));
    let bad = all.difference(&allowed);
    if !bad.is_empty() {
        return Err(BenchError::Invalid(format!(
            "CPUs {} are not online/allowed here (allowed: {})",
            bad.to_list_string(),
            allowed.to_list_string()
        )));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut burners = Vec::new();
    for cpu in opts.load_cpus.iter().flat_map(|c| c.to_vec()) {
        let s = Arc::clone(&stop);
        burners.push(std::thread::spawn(move || burner(cpu, s)));
    }
    let interval_ns = opts.interval_us * 1000;
    let total_ns = opts.duration.as_nanos().min(u64::MAX as u128) as u64;
    let start = sys::monotonic_ns() + 20_000_000; // all threads start together, 20 ms from now
    let end = start + total_ns;
    let mut workers = Vec::new();
    for cpu in opts.cpus.iter() {
        let fifo = opts.fifo_priority;
        let cap = (total_ns / interval_ns).min(50_000_000) as usize + 1;
        workers.push((
            cpu,
            std::thread::Builder::new()
                .name(format!("latency-{cpu}"))
                .spawn(move || -> std::result::Result<(Vec<u64>, u64), String> {
                    sys::pin_current_thread(cpu).map_err(|e| e.to_string())?;
                    if let Some(p) = fifo {
                        sys::set_fifo(p).map_err(|e| e.to_string())?;
                    }
                    let mut lat = Vec::with_capacity(cap);
                    let mut overruns = 0;
                    let mut next = start;
                    while next < end {
                        sys::sleep_until_ns(next);
                        let now = sys::monotonic_ns();
                        if signals::interrupted() {
                            break;
                        }
                        lat.push(now.saturating_sub(next));
                        next += interval_ns;
                        while next <= now {
                            next += interval_ns;
                            overruns += 1;
                        }
                    }
                    Ok((lat, overruns))
                })
                .map_err(|e| BenchError::Sys {
                    what: "spawning latency thread".into(),
                    source: e,
                })?,
        ));
    }
    // progress: tick every 100 ms until the end
    let ticks = (total_ns / 100_000_000).max(1);
    bar.set_length(ticks);
    while sys::monotonic_ns() < end && !signals::interrupted() {
        std::thread::sleep(Duration::from_millis(100));
        bar.set_position(((sys::monotonic_ns().saturating_sub(start)) / 100_000_000).min(ticks));
    }
    let mut cpus = Vec::new();
    let mut notes = Vec::new();
    for (cpu, h) in workers {
        match h.join() {
            Ok(Ok((lat, overruns))) => cpus.push(summarize(
                cpu,
                &lat,
                overruns,
                opts.hist_max_us,
                opts.windows,
            )),
            Ok(Err(e)) => {
                let mut c = summarize(cpu, &[], 0, 0, 1);
                c.error = Some(e.clone());
                notes.push(format!("CPU {cpu}: {e}"));
                cpus.push(c);
            }
            Err(_) => notes.push(format!("CPU {cpu}: measuring thread panicked")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for b in burners {
        let _ = b.join();
    }
    signals::check()?;
    if let Some(e) = cpus.iter().find_map(|c| c.error.clone()) {
        if cpus.iter().all(|c| c.error.is_some()) {
            return Err(BenchError::Invalid(format!("latency: {e}")));
        }
    }
    Ok(LatencyResult {
        interval_us: opts.interval_us,
        duration_s: opts.duration.as_secs_f64(),
        policy: opts
            .fifo_priority
            .map_or("other".to_string(), |p| format!("fifo:{p}")),
        load_cpus: opts.load_cpus.as_ref().map(CpuSet::to_list_string),
        hist_max_us: opts.hist_max_us,
        cpus,
        notes,
    })
}

impl LatencyResult {
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        for c in self.cpus.iter().filter(|c| c.error.is_none()) {
            m.push(Metric::new(
                format!("latency.cpu{}.avg", c.cpu),
                "µs",
                false,
                c.window_avg_us.clone(),
            ));
            m.push(Metric::new(
                format!("latency.cpu{}.p99", c.cpu),
                "µs",
                false,
                c.window_p99_us.clone(),
            ));
            m.push(Metric::new(
                format!("latency.cpu{}.max", c.cpu),
                "µs",
                false,
                c.window_max_us.clone(),
            ));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_hand_values() {
        // 1, 2, 2, 3, 50 µs and one beyond the 100 µs histogram
        let ns = [1_000, 2_000, 2_500, 3_000, 50_000, 150_000];
        let c = summarize(3, &ns, 1, 100, 2);
        assert_eq!(c.samples, 6);
        assert_eq!(c.min_us, 1.0);
        assert_eq!(c.max_us, 150.0);
        assert!((c.avg_us - 208.5 / 6.0).abs() < 1e-9);
        assert_eq!(c.histogram[1], 1);
        assert_eq!(c.histogram[2], 2);
        assert_eq!(c.histogram[50], 1);
        assert_eq!(c.overflow, 1);
        assert_eq!(c.p99_us, 150.0);
        assert_eq!(c.p50_us, 2.5);
        assert_eq!(c.window_max_us, vec![2.5, 150.0]);
    }

    #[test]
    fn short_run_with_load() {
        let allowed = sys::allowed_cpus().unwrap();
        let first = allowed.first().unwrap();
        let mut cpus = CpuSet::new();
        cpus.insert(first);
        let load = allowed.difference(&cpus);
        let r = run(
            &LatencyOptions {
                cpus,
                interval_us: 1000,
                duration: Duration::from_millis(300),
                fifo_priority: None,
                load_cpus: (!load.is_empty()).then_some(load),
                hist_max_us: 2000,
                windows: 3,
            },
            &indicatif::ProgressBar::hidden(),
        )
        .unwrap();
        let c = &r.cpus[0];
        assert_eq!(c.cpu, first);
        // every deadline in the 300 ms is either a wakeup or a skipped overrun (robust to a
        // loaded machine, where many are overruns)
        assert!(c.samples >= 1 && c.samples <= 300, "{}", c.samples);
        assert!(
            c.samples + c.overruns >= 300,
            "{} + {}",
            c.samples,
            c.overruns
        );
        assert!(c.min_us <= c.avg_us && c.avg_us <= c.max_us);
        assert_eq!(c.histogram.iter().sum::<u64>() + c.overflow, c.samples);
        assert_eq!(c.window_p99_us.len(), 3);
        assert_eq!(r.metrics().len(), 3);
    }
}
