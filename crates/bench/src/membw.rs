//! STREAM-style memory bandwidth: copy, scale, add, triad over three `f64` arrays, split
//! across threads that are optionally pinned one per CPU of a list. Each thread allocates and
//! first-touches its own slice of every array after pinning, so a pinned run's memory is local
//! to the thread's NUMA node (the "pinning + guest NUMA" cell of the r/VFIO pinning benchmark's matrix), while an
//! unpinned run leaves both placement and scheduling to the kernel.
//!
//! Rates follow STREAM: bytes counted are those the kernel names (2 arrays for copy/scale, 3
//! for add/triad; no write-allocate traffic), the first repeat is a warm-up and not counted,
//! and "best" is the rate of the fastest repeat. Results are checked against the values the
//! same sequence of kernels must produce.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use topo::CpuSet;

use crate::error::{BenchError, Result};
use crate::stats::Summary;
use crate::{signals, sys, Metric};

pub const KERNELS: [&str; 4] = ["copy", "scale", "add", "triad"];
const SCALAR: f64 = 3.0;
/// More repeats would overflow the growing values of the check.
pub const MAX_REPEATS: usize = 100;

#[derive(Debug, Clone)]
pub struct MembwOptions {
    /// Bytes per array (three arrays are used).
    pub array_bytes: u64,
    /// Pin thread i to the i-th CPU of this list; `None`: `threads` unpinned threads.
    pub cpus: Option<CpuSet>,
    /// Thread count when not pinned.
    pub threads: usize,
    /// Timed repeats of the four kernels (the first is a warm-up).
    pub repeats: usize,
}

/// One kernel's rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelResult {
    pub name: String,
    pub bytes_per_pass: u64,
    /// GB/s (10⁹ bytes/s) of each counted repeat.
    pub gbps: Vec<f64>,
    /// Rate of the fastest repeat (STREAM's figure).
    pub best_gbps: f64,
    pub summary: Option<Summary>,
    pub min_time_s: f64,
    pub avg_time_s: f64,
    pub max_time_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MembwResult {
    pub array_bytes: u64,
    pub elements: u64,
    pub threads: usize,
    /// CPU list threads were pinned to; `None` = unpinned.
    pub cpus: Option<String>,
    pub repeats: usize,
    pub kernels: Vec<KernelResult>,
    /// Whether every thread's arrays hold the expected values afterwards.
    pub validated: bool,
    pub notes: Vec<String>,
}

struct Chunk {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Chunk {
    fn new(n: usize) -> Chunk {
        // first touch happens here, on the (pinned) worker thread
        Chunk {
            a: vec![1.0; n],
            b: vec![2.0; n],
            c: vec![0.0; n],
        }
    }

    fn kernel(&mut self, k: usize) {
        let Chunk { a, b, c } = self;
        match k {
            0 => c.copy_from_slice(a),
            1 => b
                .iter_mut()
                .zip(c.iter())
                .for_each(|(b, c)| *b = SCALAR * c),
            2 => c
                .iter_mut()
                .zip(a.iter().zip(b.iter()))
                .for_each(|(c, (a, b))| *c = a + b),
            _ => a
                .iter_mut()
                .zip(b.iter().zip(c.iter()))
                .for_each(|(a, (b, c))| *a = b + SCALAR * c),
        }
    }

    /// STREAM's check: replay the kernels on scalars and compare.
    fn check(&self, passes: usize) -> bool {
        let (mut aj, mut bj, mut cj) = (1.0f64, 2.0f64, 0.0f64);
        for _ in 0..passes {
            cj = aj;
            bj = SCALAR * cj;
            cj = aj + bj;
            aj = bj + SCALAR * cj;
        }
        let ok = |v: &[f64], want: f64| {
            v.iter()
                .all(|x| ((x - want) / want.abs().max(f64::MIN_POSITIVE)).abs() <= 1e-13)
        };
        ok(&self.a, aj) && ok(&self.b, bj) && ok(&self.c, cj)
    }
}

/// Default array size: 64 MiB, or 4 × the total L3 when that is larger (STREAM's rule that
/// each array be much larger than all caches).
pub fn default_array_bytes(total_l3_bytes: Option<u64>) -> u64 {
    let floor = 64u64 << 20;
    total_l3_bytes.map_or(floor, |l3| floor.max(l3.saturating_mul(4)))
}

pub fn run(opts: &MembwOptions, bar: &indicatif::ProgressBar) -> Result<MembwResult> {
    let repeats = opts.repeats.clamp(2, MAX_REPEATS);
    let mut notes = Vec::new();
    if opts.repeats != repeats {
        notes.push(format!("repeats clamped to {repeats} (2..={MAX_REPEATS})"));
    }
    let pins: Option<Vec<u32>> = opts.cpus.as_ref().map(|c| c.to_vec());
    if let Some(p) = &pins {
        if p.is_empty() {
            return Err(BenchError::Invalid("empty CPU list".into()));
        }
        let allowed = sys::allowed_cpus()?;
        let bad: Vec<u32> = p
            .iter()
            .copied()
            .filter(|c| !allowed.contains(*c))
            .collect();
        if !bad.is_empty() {
            return Err(BenchError::Invalid(format!(
                "CPUs {} are not online/allowed here (allowed: {})",
                bad.iter().copied().collect::<CpuSet>().to_list_string(),
                allowed.to_list_string()
            )));
        }
    }
    let threads = pins.as_ref().map_or(opts.threads.max(1), Vec::len);
    let elements = (opts.array_bytes / 8).max(threads as u64);
    if elements.saturating_mul(24) > 1 << 46 {
        return Err(BenchError::Invalid("array size too large".into()));
    }
    if cfg!(debug_assertions) {
        notes.push("built without optimizations: rates are far below what the hardware does; use a release build".into());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let n = (elements / threads as u64 + u64::from((t as u64) < elements % threads as u64))
            as usize;
        let pin = pins.as_ref().and_then(|p| p.get(t).copied());
        let (stop, barrier) = (Arc::clone(&stop), Arc::clone(&barrier));
        let h = std::thread::Builder::new()
            .name(format!("membw-{t}"))
            .spawn(move || -> (Option<String>, bool) {
                let pin_err =
                    pin.and_then(|c| sys::pin_current_thread(c).err().map(|e| e.to_string()));
                let mut chunk = Chunk::new(n);
                barrier.wait(); // allocation done
                let mut passes = 0;
                loop {
                    for k in 0..KERNELS.len() {
                        barrier.wait();
                        if stop.load(Ordering::Acquire) {
                            return (pin_err, chunk.check(passes));
                        }
                        chunk.kernel(k);
                        barrier.wait();
                    }
                    passes += 1;
                }
            })
            .map_err(|e| BenchError::Sys {
                what: "spawning membw thread".into(),
                source: e,
            })?;
        handles.push(h);
    }
    bar.set_length((repeats * KERNELS.len()) as u64);
    bar.set_message("allocating");
    barrier.wait();
    let mut times = vec![Vec::with_capacity(repeats); KERNELS.len()];
    let mut interrupted = false;
    'outer: for _rep in 0..repeats {
        for (k, name) in KERNELS.iter().enumerate() {
            if signals::interrupted() {
                interrupted = true;
                break 'outer;
            }
            bar.set_message(*name);
            barrier.wait();
            let t0 = Instant::now();
            barrier.wait();
            times[k].push(t0.elapsed().as_secs_f64());
            bar.inc(1);
        }
    }
    stop.store(true, Ordering::Release);
    barrier.wait();
    let mut validated = true;
    for h in handles {
        match h.join() {
            Ok((pin_err, ok)) => {
                if let Some(e) = pin_err {
                    notes.push(e);
                }
                validated &= ok;
            }
            Err(_) => validated = false,
        }
    }
    if interrupted {
        return Err(BenchError::Interrupted);
    }
    let bytes = [2u64, 2, 3, 3].map(|arrays| arrays * 8 * elements);
    let kernels = KERNELS
        .iter()
        .zip(times.iter())
        .zip(bytes)
        .map(|((name, ts), b)| {
            let counted = ts.get(1..).unwrap_or(&[]);
            let gbps: Vec<f64> = counted
                .iter()
                .map(|t| b as f64 / t.max(1e-12) / 1e9)
                .collect();
            let min = counted.iter().copied().fold(f64::INFINITY, f64::min);
            let max = counted.iter().copied().fold(0.0, f64::max);
            let avg = counted.iter().sum::<f64>() / counted.len().max(1) as f64;
            KernelResult {
                name: name.to_string(),
                bytes_per_pass: b,
                best_gbps: b as f64 / min.max(1e-12) / 1e9,
                summary: Summary::of(&gbps),
                gbps,
                min_time_s: min,
                avg_time_s: avg,
                max_time_s: max,
            }
        })
        .collect();
    if !validated {
        notes.push("result check FAILED: arrays do not hold the expected values".into());
    }
    Ok(MembwResult {
        array_bytes: elements * 8,
        elements,
        threads,
        cpus: opts.cpus.as_ref().map(CpuSet::to_list_string),
        repeats,
        kernels,
        validated,
        notes,
    })
}

impl MembwResult {
    pub fn metrics(&self) -> Vec<Metric> {
        self.kernels
            .iter()
            .map(|k| Metric::new(format!("membw.{}", k.name), "GB/s", true, k.gbps.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_validates_pinned_and_unpinned() {
        let bar = indicatif::ProgressBar::hidden();
        let r = run(
            &MembwOptions {
                array_bytes: 1 << 20,
                cpus: None,
                threads: 2,
                repeats: 3,
            },
            &bar,
        )
        .unwrap();
        assert!(r.validated);
        assert_eq!(r.kernels.len(), 4);
        assert_eq!(r.kernels[0].gbps.len(), 2);
        assert!(r.kernels.iter().all(|k| k.best_gbps > 0.0));
        assert_eq!(r.kernels[3].bytes_per_pass, 3 * 8 * r.elements);
        let first = sys::allowed_cpus().unwrap().first().unwrap();
        let r = run(
            &MembwOptions {
                array_bytes: 1 << 20,
                cpus: Some(CpuSet::parse_list(&first.to_string()).unwrap()),
                threads: 0,
                repeats: 2,
            },
            &bar,
        )
        .unwrap();
        assert!(r.validated);
        assert_eq!(r.threads, 1);
        assert_eq!(r.cpus.as_deref(), Some(first.to_string().as_str()));
        assert_eq!(r.metrics().len(), 4);
    }

    #[test]
    fn check_detects_wrong_values() {
        let mut c = Chunk::new(8);
        for k in 0..4 {
            c.kernel(k);
        }
        assert!(c.check(1));
        assert!(!c.check(2));
        c.a[3] = 0.5;
        assert!(!c.check(1));
    }

    #[test]
    fn rejects_unknown_cpus() {
        let e = run(
            &MembwOptions {
                array_bytes: 1 << 16,
                cpus: Some(CpuSet::parse_list("4000").unwrap()),
                threads: 0,
                repeats: 2,
            },
            &indicatif::ProgressBar::hidden(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not online"), "{e}");
        assert_eq!(default_array_bytes(Some(32 << 20)), 128 << 20);
        assert_eq!(default_array_bytes(None), 64 << 20);
    }
}
