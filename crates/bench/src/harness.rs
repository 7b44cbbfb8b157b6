//! The harness of a wall-clock benchmark run from the command line (`vmtune boot bench`):
//! the spread of a side's runs, ratios of runs taken in the same round, the machine's load
//! and the process's CPU seconds.

use std::time::Instant;

use serde::Serialize;

use crate::stats::Summary;

/// Wall (or CPU) seconds of one side of a benchmark over its runs.
#[derive(Debug, Serialize, Clone, Copy, Default)]
pub struct Spread {
    pub best: f64,
    pub median: f64,
    pub worst: f64,
}

impl Spread {
    /// The best, median and worst of the finite values (zeros when there are none): the
    /// minimum, median and maximum of [`Summary::of`].
    pub fn of(v: &[f64]) -> Spread {
        Summary::of(v).map_or_else(Spread::default, |s| Spread {
            best: s.min,
            median: s.median,
            worst: s.max,
        })
    }

    /// `median [best–worst]`, with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        format!(
            "{:.d$} [{:.d$}–{:.d$}]",
            self.median,
            self.best,
            self.worst,
            d = digits
        )
    }
}

/// Ratios `num[i] / den[i]` of the runs of two sides taken in the same round.
pub fn paired(num: &[f64], den: &[f64]) -> Vec<f64> {
    num.iter().zip(den).map(|(a, b)| a / b.max(1e-9)).collect()
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`), if readable.
pub fn loadavg() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|w| w.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The load averages as `1.00 2.00 3.00`, `?` when unknown.
pub fn show_load(l: Option<[f64; 3]>) -> String {
    l.map_or("?".to_string(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

/// CPU seconds (user + system, all threads) this process has used.
pub fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given; a zeroed rusage is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Wall and CPU seconds of `f`.
pub fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<(f64, f64, T), E> {
    let (t, c) = (Instant::now(), cpu_s());
    let v = f()?;
    Ok((t.elapsed().as_secs_f64(), cpu_s() - c, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_min_median_max_of_the_finite_values() {
        let s = Spread::of(&[3.0, f64::NAN, 1.0, 2.0, 10.0]);
        assert_eq!((s.best, s.median, s.worst), (1.0, 2.5, 10.0));
        let s = Spread::of(&[5.0, 1.0, 3.0]);
        assert_eq!((s.best, s.median, s.worst), (1.0, 3.0, 5.0));
        let s = Spread::of(&[f64::INFINITY]);
        assert_eq!((s.best, s.median, s.worst), (0.0, 0.0, 0.0));
    }
}
