//! How available each vCPU has been: from its preemption episodes, the time an interrupt
//! raised on it at a random moment waits for the host to run it, and its steal fraction.
//!
//! On a guest whose affinity writes are *deferred* (x86 MSI without interrupt remapping: the
//! kernel moves the vector when the IRQ's next interrupt is acked on the old vCPU), a move
//! takes effect at a moment when the old vCPU runs, so following the preempted flag from one
//! instant to the next cannot help (see [`crate::policy`]). What can help is placing each IRQ
//! on the vCPU that, over the recent past, has made interrupts wait least. This module turns
//! what the daemon observes into that figure:
//!
//! - [`Episodes`]: preemption episodes as the eBPF reader reports them (a vCPU seen preempted;
//!   the same vCPU running again, with the episode's exact length from KVM's steal clock).
//!   An interrupt raised at time `t` inside an episode `[s, e]` waits `e - t`; averaged over a
//!   window of length `T`, the expected wait is `Σ L² / 2T` over the episodes' parts inside
//!   the window (an ongoing episode counts with its length so far).
//! - [`CounterWindow`]: per-CPU steal, idle and (eBPF) wake-up counters over a window, from
//!   cumulative samples; the wake-ups give the other part of the expected wait (an interrupt
//!   that finds the vCPU idle waits for the host to run it after the wake-up). With the
//!   `/proc/stat` fallback only the steal fraction is known.
//!
//! Both are pure bookkeeping (time is passed in), so the simulator feeds them exactly as the
//! daemon does.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// Default availability window: long enough to hold many host slices (credit 30 ms, EEVDF
/// ~3 ms) and to average out the phase of the host's round, short enough to follow a change
/// of co-tenants within seconds.
pub const DEFAULT_WINDOW_NS: u64 = 5_000_000_000;

/// The least coverage before availability figures are reported (`None` before): a second.
pub const MIN_COVERAGE_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, Default)]
struct CpuEpisodes {
    /// Ended episodes: (end ns, length ns), oldest first.
    ended: VecDeque<(u64, u64)>,
    /// Seen preempted at this time, not yet running again.
    ongoing: Option<u64>,
}

/// Preemption episodes per vCPU over a sliding window.
#[derive(Debug, Clone)]
pub struct Episodes {
    window_ns: u64,
    start_ns: u64,
    cpus: BTreeMap<u32, CpuEpisodes>,
}

/// One vCPU's availability over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Availability {
    pub cpu: u32,
    /// Fraction of the window the vCPU spent preempted.
    pub steal: f64,
    /// Expected wait of an interrupt raised on it at a random moment of the window, ns.
    pub wait_ns: f64,
    /// Preemption episodes that ended in the window.
    pub episodes: usize,
}

impl Episodes {
    /// Track episodes over `window_ns` (at least 1 ms), starting at `start_ns`.
    pub fn new(window_ns: u64, start_ns: u64) -> Self {
        Self {
            window_ns: window_ns.max(1_000_000),
            start_ns,
            cpus: BTreeMap::new(),
        }
    }

    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// `cpu` was seen preempted at `at_ns`.
    pub fn preempted(&mut self, cpu: u32, at_ns: u64) {
        let c = self.cpus.entry(cpu).or_default();
        if c.ongoing.is_none() {
            c.ongoing = Some(at_ns);
        }
    }

    /// `cpu` runs again at `at_ns` after an episode of `len_ns` (by the steal clock, so exact
    /// even when the preemption was seen late).
    pub fn resumed(&mut self, cpu: u32, at_ns: u64, len_ns: u64) {
        let window = self.window_ns;
        let c = self.cpus.entry(cpu).or_default();
        c.ongoing = None;
        c.ended.push_back((at_ns, len_ns));
        while c
            .ended
            .front()
            .is_some_and(|&(end, _)| at_ns.saturating_sub(end) > window)
        {
            c.ended.pop_front();
        }
    }

    /// How much of the window has been observed at `now_ns`.
    pub fn coverage_ns(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.start_ns).min(self.window_ns)
    }

    /// `cpu`'s availability at `now_ns`; `None` before [`MIN_COVERAGE_NS`] of observation.
    pub fn get(&self, cpu: u32, now_ns: u64) -> Option<Availability> {
        let t = self.coverage_ns(now_ns);
        if t < MIN_COVERAGE_NS.min(self.window_ns) {
            return None;
        }
        let from = now_ns.saturating_sub(t);
        let (mut stolen, mut sq, mut n) = (0f64, 0f64, 0usize);
        if let Some(c) = self.cpus.get(&cpu) {
            for &(end, len) in &c.ended {
                if end <= from || end > now_ns {
                    continue;
                }
                // the part of the episode inside the window
                let l = len.min(end - from) as f64;
                stolen += l;
                sq += l * l;
                n += 1;
            }
            if let Some(s) = c.ongoing {
                let l = now_ns.saturating_sub(s.max(from)) as f64;
                stolen += l;
                sq += l * l;
            }
        }
        let t = t as f64;
        Some(Availability {
            cpu,
            steal: (stolen / t).min(1.0),
            wait_ns: sq / (2.0 * t),
            episodes: n,
        })
    }
}

/// Cumulative per-CPU counters the daemon samples at each window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuCounters {
    /// Steal time (`/proc/stat`), ns.
    pub steal_ns: u64,
    /// Idle time (`/proc/stat` idle), ns.
    pub idle_ns: u64,
    /// eBPF: exits from idle, and the steal they waited for the host to run the vCPU after
    /// its wake-up (sum in ns, sum of squares in µs²). Zero without eBPF.
    pub wakes: u64,
    pub wake_wait_ns: u64,
    pub wake_wait_sq_us2: u64,
}

impl CpuCounters {
    fn delta(&self, old: &CpuCounters) -> CpuCounters {
        CpuCounters {
            steal_ns: self.steal_ns.saturating_sub(old.steal_ns),
            idle_ns: self.idle_ns.saturating_sub(old.idle_ns),
            wakes: self.wakes.saturating_sub(old.wakes),
            wake_wait_ns: self.wake_wait_ns.saturating_sub(old.wake_wait_ns),
            wake_wait_sq_us2: self.wake_wait_sq_us2.saturating_sub(old.wake_wait_sq_us2),
        }
    }
}

/// Per-CPU counters over a sliding window, from cumulative samples.
#[derive(Debug, Clone)]
pub struct CounterWindow {
    window_ns: u64,
    samples: VecDeque<(u64, BTreeMap<u32, CpuCounters>)>,
}

impl CounterWindow {
    pub fn new(window_ns: u64) -> Self {
        Self {
            window_ns: window_ns.max(1),
            samples: VecDeque::new(),
        }
    }

    /// Add a sample taken at `at_ns`.
    pub fn push(&mut self, at_ns: u64, cpus: impl IntoIterator<Item = (u32, CpuCounters)>) {
        self.samples.push_back((at_ns, cpus.into_iter().collect()));
        // keep the newest sample at least a window old as the base
        while self.samples.len() > 2
            && self
                .samples
                .get(1)
                .is_some_and(|(t, _)| at_ns.saturating_sub(*t) >= self.window_ns)
        {
            self.samples.pop_front();
        }
    }

    /// `cpu`'s counters from the oldest kept sample to the newest, and the time between them;
    /// `None` with fewer than two samples or less than [`MIN_COVERAGE_NS`] between them (or
    /// the window, if shorter).
    pub fn delta(&self, cpu: u32) -> Option<(u64, CpuCounters)> {
        let (t0, a) = self.samples.front()?;
        let (t1, b) = self.samples.back()?;
        let dt = t1.saturating_sub(*t0);
        if dt == 0 || dt < MIN_COVERAGE_NS.min(self.window_ns) {
            return None;
        }
        Some((dt, b.get(&cpu)?.delta(a.get(&cpu)?)))
    }

    /// Steal fraction of `cpu` over the window.
    pub fn steal(&self, cpu: u32) -> Option<f64> {
        let (dt, d) = self.delta(cpu)?;
        Some((d.steal_ns as f64 / dt as f64).min(1.0))
    }

    /// The part of the expected interrupt wait due to wake-ups from idle: an interrupt that
    /// finds the vCPU idle waits for the host to run it (the mean wait after a wake-up, times
    /// the idle fraction), one that comes while it waits after a wake-up waits out the rest
    /// (`Σ w² / 2T`). `None` when no wake-up was counted (no eBPF, or never idle).
    pub fn wake_wait_ns(&self, cpu: u32) -> Option<f64> {
        let (dt, d) = self.delta(cpu)?;
        if d.wakes == 0 {
            return (d.idle_ns == 0).then_some(0.0);
        }
        let dt = dt as f64;
        let idle = (d.idle_ns as f64 / dt).min(1.0);
        let mean = d.wake_wait_ns as f64 / d.wakes as f64;
        Some(idle * mean + d.wake_wait_sq_us2 as f64 * 1e6 / (2.0 * dt))
    }
}

/// A vCPU's expected interrupt wait: preemption episodes plus wake-ups from idle (eBPF);
/// `None` unless both are known.
pub fn expected_wait_ns(
    episodes: &Episodes,
    counters: &CounterWindow,
    cpu: u32,
    now_ns: u64,
) -> Option<f64> {
    Some(episodes.get(cpu, now_ns)?.wait_ns + counters.wake_wait_ns(cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn wait_is_the_mean_residual_of_episodes() {
        // a vCPU preempted 90 ms out of every 120 ms (four vCPUs, credit's 30 ms slices): an
        // interrupt at a random moment waits 90²/2/120 = 33.75 ms on average
        let mut e = Episodes::new(12_000 * MS, 0);
        let mut t = 0;
        for _ in 0..100 {
            e.preempted(0, t + 30 * MS);
            t += 120 * MS;
            e.resumed(0, t, 90 * MS);
        }
        let a = e.get(0, t).unwrap();
        assert!((a.wait_ns / 1e6 - 33.75).abs() < 1e-6, "{a:?}");
        assert!((a.steal - 0.75).abs() < 1e-9);
        assert_eq!(a.episodes, 100);
        // a vCPU never preempted waits nothing
        let b = e.get(1, t).unwrap();
        assert_eq!((b.wait_ns, b.steal), (0.0, 0.0));
    }

    #[test]
    fn long_rare_episodes_weigh_more_than_short_frequent_ones() {
        // same 50 % steal: 3 ms episodes (EEVDF-like) against 30 ms (credit-like)
        let mut e = Episodes::new(6_000 * MS, 0);
        let mut t = 0;
        while t < 6_000 * MS {
            e.resumed(0, t + 6 * MS, 3 * MS);
            t += 6 * MS;
        }
        let mut t = 0;
        while t < 6_000 * MS {
            e.resumed(1, t + 60 * MS, 30 * MS);
            t += 60 * MS;
        }
        let (a, b) = (e.get(0, t).unwrap(), e.get(1, t).unwrap());
        assert!((a.steal - b.steal).abs() < 0.01, "{a:?} {b:?}");
        assert!((b.wait_ns / a.wait_ns - 10.0).abs() < 0.2, "{a:?} {b:?}");
    }

    #[test]
    fn old_episodes_leave_the_window_and_an_ongoing_one_counts() {
        let mut e = Episodes::new(2_000 * MS, 0);
        e.resumed(0, 500 * MS, 400 * MS);
        assert!(e.get(0, 999 * MS).is_none(), "less than a second observed");
        let a = e.get(0, 2_000 * MS).unwrap();
        assert!((a.steal - 0.2).abs() < 1e-9, "{a:?}");
        // 3 s later it has left the window
        let a = e.get(0, 3_000 * MS).unwrap();
        assert_eq!(a.steal, 0.0);
        // an episode straddling the window's start counts only inside it: [2.2, 3.2] s in
        // the window [3, 5] s
        e.resumed(0, 3_200 * MS, 1_000 * MS);
        let a = e.get(0, 5_000 * MS).unwrap();
        assert!((a.steal - 0.1).abs() < 1e-9, "{a:?}");
        // seen preempted at 5 s and still preempted at 5.5 s
        e.preempted(0, 5_000 * MS);
        let a = e.get(0, 5_500 * MS).unwrap();
        assert!((a.steal - 0.25).abs() < 1e-9, "{a:?}");
        assert!((a.wait_ns - (500e6f64.powi(2)) / 4e9).abs() < 1.0, "{a:?}");
    }

    fn c(steal_ms: u64) -> CpuCounters {
        CpuCounters {
            steal_ns: steal_ms * MS,
            ..Default::default()
        }
    }

    #[test]
    fn steal_window_from_cumulative_counters() {
        let mut w = CounterWindow::new(2_000 * MS);
        w.push(0, [(0, c(0)), (1, c(0))]);
        assert_eq!(w.steal(0), None);
        w.push(500 * MS, [(0, c(250)), (1, c(0))]);
        assert_eq!(w.steal(0), None, "half a second is too short");
        w.push(1_000 * MS, [(0, c(500)), (1, c(100))]);
        assert_eq!(w.steal(0), Some(0.5));
        assert_eq!(w.steal(1), Some(0.1));
        assert_eq!(w.steal(7), None);
        // the base slides: from 1 s on, CPU0 has no more steal
        for k in 3..=8 {
            w.push(k * 500 * MS, [(0, c(500)), (1, c(100))]);
        }
        assert_eq!(w.steal(0), Some(0.0));
    }

    #[test]
    fn wake_waits_weigh_by_the_idle_fraction() {
        // over 2 s: idle half the time, 100 wake-ups that each waited 4 ms for the host
        let mut w = CounterWindow::new(2_000 * MS);
        w.push(
            0,
            [(0, CpuCounters::default()), (1, CpuCounters::default())],
        );
        let after = CpuCounters {
            steal_ns: 400 * MS,
            idle_ns: 1_000 * MS,
            wakes: 100,
            wake_wait_ns: 400 * MS,
            wake_wait_sq_us2: 100 * 4_000 * 4_000,
        };
        w.push(2_000 * MS, [(0, after), (1, CpuCounters::default())]);
        let got = w.wake_wait_ns(0).unwrap();
        // 0.5 × 4 ms + 100 × (4 ms)² / 4 s = 2 ms + 0.4 ms
        assert!((got - 2.4e6).abs() < 1.0, "{got}");
        // never idle, never woken: nothing to wait for
        assert_eq!(w.wake_wait_ns(1), Some(0.0));
        let mut e = Episodes::new(2_000 * MS, 0);
        e.resumed(0, 1_500 * MS, 200 * MS);
        let total = expected_wait_ns(&e, &w, 0, 2_000 * MS).unwrap();
        assert!(
            (total - 2.4e6 - 200e6f64.powi(2) / 4e9).abs() < 1.0,
            "{total}"
        );
    }
}
