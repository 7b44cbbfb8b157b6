//! Timer read cost: `clock_gettime(CLOCK_MONOTONIC)` through the vDSO and through a forced
//! system call under every available clocksource, plus `rdtsc`.
//!
//! Why: the vDSO reads the clock in user space only for clocksources with a vDSO clock mode
//! (`tsc`, `kvm-clock`, `hyperv_clocksource_tsc_page`); for `hpet` and `acpi_pm` it falls back
//! to a system call that reads an emulated device — in a guest that is a VM exit handled by
//! QEMU in user space. That is the 3,605 ns (acpi_pm) vs 12.52 ns (TSC) effect of the Windows 7 timer note.
//!
//! Switching clocksources writes `/sys/devices/system/clocksource/clocksource0/
//! current_clocksource`. [`ClocksourceGuard`] restores the original on drop (errors, panics),
//! on SIGINT/SIGTERM (through [`crate::signals`]), and — because SIGKILL cannot be caught — it
//! leaves the original's name in a state file that the next run restores first.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::stats::Summary;
use crate::{signals, Metric};

/// The live clocksource directory.
pub const CLOCKSOURCE_DIR: &str = "/sys/devices/system/clocksource/clocksource0";
/// Where the guard keeps its lock and the name of the clocksource to restore.
pub const STATE_DIR: &str = "/run/vmtune";

/// Read `available_clocksource` (space separated).
pub fn available(dir: &Path) -> Result<Vec<String>> {
    let p = dir.join("available_clocksource");
    let s = fs::read_to_string(&p).map_err(|e| BenchError::io(&p, e))?;
    Ok(s.split_whitespace().map(str::to_string).collect())
}

/// Read `current_clocksource`.
pub fn current(dir: &Path) -> Result<String> {
    let p = dir.join("current_clocksource");
    let s = fs::read_to_string(&p).map_err(|e| BenchError::io(&p, e))?;
    let name = s.trim().to_string();
    if name.is_empty() {
        return Err(BenchError::format(&p, "empty current_clocksource"));
    }
    Ok(name)
}

fn write_current(dir: &Path, name: &str) -> Result<()> {
    let p = dir.join("current_clocksource");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .map_err(|e| BenchError::io(&p, e))?;
    f.write_all(name.as_bytes())
        .map_err(|e| BenchError::io(&p, e))?;
    let now = current(dir)?;
    if now != name {
        return Err(BenchError::format(
            &p,
            format!("wrote {name:?} but the kernel kept {now:?}"),
        ));
    }
    Ok(())
}

/// Holds the clocksource lock; puts the original clocksource back when dropped.
pub struct ClocksourceGuard {
    dir: PathBuf,
    state_file: PathBuf,
    original: String,
    /// Held for the guard's life: serialises concurrent runs (flock is released on close).
    _lock: fs::File,
    restored: bool,
    /// What happened at start (a stale state file restored), for the report.
    pub recovered: Option<String>,
}

impl ClocksourceGuard {
    /// Take the lock under `state_dir`, restore a clocksource left by a killed run, and
    /// remember the current one.
    pub fn new(dir: &Path, state_dir: &Path) -> Result<Self> {
        fs::create_dir_all(state_dir).map_err(|e| BenchError::io(state_dir, e))?;
        let lock_path = state_dir.join("bench-clocksource.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| BenchError::io(&lock_path, e))?;
        // SAFETY: flock on a file descriptor we own; blocks until another run finishes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(BenchError::sys(format!("flock {}", lock_path.display())));
        }
        let state_file = state_dir.join("bench-clocksource.orig");
        let mut recovered = None;
        if let Ok(stale) = fs::read_to_string(&state_file) {
            let stale = stale.trim();
            if !stale.is_empty() && current(dir)? != stale {
                write_current(dir, stale)?;
                recovered = Some(format!(
                    "restored clocksource {stale} left switched by an earlier run that was killed"
                ));
            }
        }
        let original = current(dir)?;
        fs::write(&state_file, format!("{original}\n"))
            .map_err(|e| BenchError::io(&state_file, e))?;
        Ok(ClocksourceGuard {
            dir: dir.to_path_buf(),
            state_file,
            original,
            _lock: lock,
            restored: false,
            recovered,
        })
    }

    pub fn original(&self) -> &str {
        &self.original
    }

    /// Switch to `name` (verified by reading it back).
    pub fn switch(&self, name: &str) -> Result<()> {
        write_current(&self.dir, name)
    }

    /// Put the original back and forget the state file.
    pub fn restore(mut self) -> Result<()> {
        self.restored = true;
        self.do_restore()
    }

    fn do_restore(&self) -> Result<()> {
        if current(&self.dir)? != self.original {
            write_current(&self.dir, &self.original)?;
        }
        let _ = fs::remove_file(&self.state_file);
        Ok(())
    }
}

impl Drop for ClocksourceGuard {
    fn drop(&mut self) {
        if !self.restored {
            if let Err(e) = self.do_restore() {
                eprintln!(
                    "vmtune: warning: could not restore clocksource {}: {e}",
                    self.original
                );
            }
        }
    }
}

/// What was read and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// `clock_gettime(CLOCK_MONOTONIC)` through libc (vDSO where the clocksource allows).
    Vdso,
    /// `syscall(SYS_clock_gettime, CLOCK_MONOTONIC)`: always enters the kernel.
    Syscall,
    /// The `rdtsc` instruction.
    Rdtsc,
}

impl Method {
    pub fn label(self) -> &'static str {
        match self {
            Method::Vdso => "clock_gettime (vDSO)",
            Method::Syscall => "clock_gettime (syscall)",
            Method::Rdtsc => "rdtsc",
        }
    }
}

/// One measured way of reading time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The clocksource in use (`None` for rdtsc, which does not depend on it).
    pub clocksource: Option<String>,
    pub method: Method,
    /// Cost per read for each repeat, ns.
    pub ns_per_call: Vec<f64>,
    pub summary: Option<Summary>,
    /// Reads per second a single thread sustains (median repeat).
    pub calls_per_sec: f64,
    /// Why the probe has no numbers (switch refused, …).
    pub error: Option<String>,
}

/// The result of `bench timer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerResult {
    pub original_clocksource: Option<String>,
    pub available: Vec<String>,
    /// Whether other clocksources were switched to (needs root and a writable sysfs).
    pub swept: bool,
    pub repeats: usize,
    pub seconds_per_repeat: f64,
    pub notes: Vec<String>,
    pub probes: Vec<Probe>,
}

#[derive(Debug, Clone)]
pub struct TimerOptions {
    /// Clocksource sysfs directory (the live one by default).
    pub dir: PathBuf,
    pub state_dir: PathBuf,
    /// Switch to every available clocksource (`false`: the current one only).
    pub sweep: bool,
    /// Only these clocksources (default all available).
    pub only: Option<Vec<String>>,
    pub repeats: usize,
    pub seconds_per_repeat: f64,
}

impl Default for TimerOptions {
    fn default() -> Self {
        TimerOptions {
            dir: PathBuf::from(CLOCKSOURCE_DIR),
            state_dir: PathBuf::from(STATE_DIR),
            sweep: true,
            only: None,
            repeats: 5,
            seconds_per_repeat: 0.05,
        }
    }
}

#[inline(always)]
fn vdso_read() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_nsec
}

#[inline(always)]
fn syscall_read() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the raw system call with a valid timespec pointer.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC as libc::c_long,
            &mut ts as *mut libc::timespec,
        )
    };
    ts.tv_nsec
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc_read() -> i64 {
    // SAFETY: rdtsc is available on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() as i64 }
}

/// Time `f` in batches for about `seconds`; ns per call. Polls the stop flag between batches.
pub fn time_calls(seconds: f64, mut f: impl FnMut() -> i64) -> Result<f64> {
    const BATCH: u64 = 256;
    let budget = Duration::from_secs_f64(seconds.max(0.001));
    let mut calls = 0u64;
    let mut sink = 0i64;
    let t0 = Instant::now();
    let elapsed = loop {
        for _ in 0..BATCH {
            sink = sink.wrapping_add(f());
        }
        calls += BATCH;
        let e = t0.elapsed();
        if e >= budget {
            break e;
        }
        signals::check()?;
    };
    std::hint::black_box(sink);
    Ok(elapsed.as_nanos() as f64 / calls as f64)
}

fn probe(
    clocksource: Option<&str>,
    method: Method,
    opts: &TimerOptions,
    bar: &indicatif::ProgressBar,
) -> Result<Probe> {
    let mut ns = Vec::with_capacity(opts.repeats);
    for _ in 0..opts.repeats.max(1) {
        let x = match method {
            Method::Vdso => time_calls(opts.seconds_per_repeat, vdso_read)?,
            Method::Syscall => time_calls(opts.seconds_per_repeat, syscall_read)?,
            #[cfg(target_arch = "x86_64")]
            Method::Rdtsc => time_calls(opts.seconds_per_repeat, rdtsc_read)?,
            #[cfg(not(target_arch = "x86_64"))]
            Method::Rdtsc => return Err(BenchError::Invalid("rdtsc needs x86_64".into())),
        };
        ns.push(x);
        bar.inc(1);
    }
    let summary = Summary::of(&ns);
    let calls_per_sec = summary
        .as_ref()
        .map(|s| if s.median > 0.0 { 1e9 / s.median } else { 0.0 })
        .unwrap_or(0.0);
    Ok(Probe {
        clocksource: clocksource.map(str::to_string),
        method,
        ns_per_call: ns,
        summary,
        calls_per_sec,
        error: None,
    })
}

fn failed(clocksource: &str, method: Method, e: &BenchError) -> Probe {
    Probe {
        clocksource: Some(clocksource.to_string()),
        method,
        ns_per_call: vec![],
        summary: None,
        calls_per_sec: 0.0,
        error: Some(e.to_string()),
    }
}

/// Number of progress steps [`run`] will report.
pub fn steps(opts: &TimerOptions, n_clocksources: usize) -> u64 {
    ((2 * n_clocksources + 1) * opts.repeats.max(1)) as u64
}

/// What a run will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerPlan {
    /// Clocksources to measure, in order.
    pub clocksources: Vec<String>,
    /// The current clocksource.
    pub current: Option<String>,
    /// Whether it switches clocksources.
    pub sweep: bool,
    pub notes: Vec<String>,
}

/// Which clocksources a run would measure, and whether it can switch.
pub fn plan(opts: &TimerOptions) -> Result<TimerPlan> {
    let mut notes = Vec::new();
    let avail = available(&opts.dir).unwrap_or_default();
    let cur = current(&opts.dir).ok();
    let writable = fs::OpenOptions::new()
        .write(true)
        .open(opts.dir.join("current_clocksource"))
        .is_ok();
    let sweep = opts.sweep && writable && avail.len() > 1;
    if opts.sweep && !writable && cur.is_some() {
        notes.push(
            "current_clocksource is not writable (not root?): measured the current clocksource only"
                .to_string(),
        );
    }
    let mut list: Vec<String> = if sweep {
        avail.clone()
    } else {
        cur.iter().cloned().collect()
    };
    if let Some(only) = &opts.only {
        for o in only {
            if !avail.contains(o) {
                return Err(BenchError::Invalid(format!(
                    "clocksource {o:?} is not available (available: {})",
                    avail.join(" ")
                )));
            }
        }
        list.retain(|c| only.contains(c));
        if !sweep && list.is_empty() {
            return Err(BenchError::Invalid(
                "cannot switch clocksources here (not root?); only the current one can be measured"
                    .into(),
            ));
        }
    }
    Ok(TimerPlan {
        clocksources: list,
        current: cur,
        sweep,
        notes,
    })
}

/// Run the timer benchmark. The clocksource is the same afterwards as before, whatever
/// happens (see [`ClocksourceGuard`]).
pub fn run(opts: &TimerOptions, bar: &indicatif::ProgressBar) -> Result<TimerResult> {
    let TimerPlan {
        clocksources: list,
        current: cur,
        sweep,
        mut notes,
    } = plan(opts)?;
    let avail = available(&opts.dir).unwrap_or_default();
    bar.set_length(steps(opts, list.len()));
    let mut probes = Vec::new();
    if cfg!(target_arch = "x86_64") {
        bar.set_message("rdtsc");
        probes.push(probe(None, Method::Rdtsc, opts, bar)?);
    }
    if sweep {
        let guard = ClocksourceGuard::new(&opts.dir, &opts.state_dir)?;
        if let Some(r) = &guard.recovered {
            notes.push(r.clone());
        }
        for cs in &list {
            bar.set_message(cs.clone());
            if let Err(e) = guard.switch(cs) {
                probes.push(failed(cs, Method::Vdso, &e));
                probes.push(failed(cs, Method::Syscall, &e));
                bar.inc(2 * opts.repeats.max(1) as u64);
                continue;
            }
            std::thread::sleep(Duration::from_millis(10));
            probes.push(probe(Some(cs), Method::Vdso, opts, bar)?);
            probes.push(probe(Some(cs), Method::Syscall, opts, bar)?);
        }
        guard.restore()?;
    } else {
        for cs in &list {
            bar.set_message(cs.clone());
            probes.push(probe(Some(cs), Method::Vdso, opts, bar)?);
            probes.push(probe(Some(cs), Method::Syscall, opts, bar)?);
        }
    }
    Ok(TimerResult {
        original_clocksource: cur.or_else(|| current(&opts.dir).ok()),
        available: avail,
        swept: sweep,
        repeats: opts.repeats.max(1),
        seconds_per_repeat: opts.seconds_per_repeat,
        notes,
        probes,
    })
}

/// Reads per second of the games in the Windows 7 timer note, for the "what it costs a guest" line.
pub const SEED_RATES: &[(&str, f64)] = &[
    ("25k reads/s (most games)", 25_000.0),
    ("275k reads/s (Outlast)", 275_000.0),
];

/// Share of one CPU spent reading the clock at `rate` reads per second, in percent.
pub fn cpu_share_pct(ns_per_call: f64, rate: f64) -> f64 {
    ns_per_call * rate / 1e9 * 100.0
}

impl TimerResult {
    pub fn metrics(&self) -> Vec<Metric> {
        self.probes
            .iter()
            .filter(|p| p.error.is_none() && !p.ns_per_call.is_empty())
            .map(|p| {
                let name = match (&p.clocksource, p.method) {
                    (Some(cs), Method::Vdso) => format!("timer.{cs}.vdso"),
                    (Some(cs), Method::Syscall) => format!("timer.{cs}.syscall"),
                    (_, m) => format!("timer.{}", m.label().replace(' ', "_")),
                };
                Metric::new(name, "ns/read", false, p.ns_per_call.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(cur: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join("available_clocksource"),
            "tsc kvm-clock acpi_pm \n",
        )
        .unwrap();
        fs::write(d.path().join("current_clocksource"), format!("{cur}\n")).unwrap();
        d
    }

    #[test]
    fn guard_restores_on_drop_and_on_error() {
        let sys = fake_sysfs("tsc");
        let state = tempfile::tempdir().unwrap();
        {
            let g = ClocksourceGuard::new(sys.path(), state.path()).unwrap();
            assert_eq!(g.original(), "tsc");
            g.switch("acpi_pm").unwrap();
            assert_eq!(current(sys.path()).unwrap(), "acpi_pm");
            assert!(state.path().join("bench-clocksource.orig").exists());
        }
        assert_eq!(current(sys.path()).unwrap(), "tsc");
        assert!(!state.path().join("bench-clocksource.orig").exists());

        // a panic unwinds through the guard
        let r = std::panic::catch_unwind(|| {
            let g = ClocksourceGuard::new(sys.path(), state.path()).unwrap();
            g.switch("kvm-clock").unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        assert_eq!(current(sys.path()).unwrap(), "tsc");
    }

    #[test]
    fn stale_state_from_killed_run_is_restored() {
        let sys = fake_sysfs("acpi_pm");
        let state = tempfile::tempdir().unwrap();
        fs::write(state.path().join("bench-clocksource.orig"), "tsc\n").unwrap();
        let g = ClocksourceGuard::new(sys.path(), state.path()).unwrap();
        assert_eq!(g.original(), "tsc");
        assert!(g.recovered.as_deref().unwrap().contains("tsc"));
        g.restore().unwrap();
        assert_eq!(current(sys.path()).unwrap(), "tsc");
    }

    #[test]
    fn run_on_fake_sysfs_sweeps_and_restores() {
        // The fake sysfs accepts any write, so the sweep runs; the real clock is measured.
        let sys = fake_sysfs("kvm-clock");
        let state = tempfile::tempdir().unwrap();
        let opts = TimerOptions {
            dir: sys.path().into(),
            state_dir: state.path().into(),
            repeats: 2,
            seconds_per_repeat: 0.002,
            only: Some(vec!["tsc".into(), "kvm-clock".into()]),
            ..Default::default()
        };
        let r = run(&opts, &indicatif::ProgressBar::hidden()).unwrap();
        assert!(r.swept);
        assert_eq!(current(sys.path()).unwrap(), "kvm-clock");
        let cs: Vec<_> = r
            .probes
            .iter()
            .filter_map(|p| p.clocksource.clone())
            .collect();
        assert_eq!(cs, ["tsc", "tsc", "kvm-clock", "kvm-clock"]);
        for p in &r.probes {
            let s = p.summary.as_ref().unwrap();
            assert!(s.median > 0.0 && s.median < 1e6, "{p:?}");
            assert_eq!(p.ns_per_call.len(), 2);
        }
        assert!(r.metrics().iter().any(|m| m.name == "timer.tsc.vdso"));
        let bad = TimerOptions {
            only: Some(vec!["hpet".into()]),
            ..opts
        };
        assert!(run(&bad, &indicatif::ProgressBar::hidden()).is_err());
    }

    #[test]
    fn share_of_cpu() {
        // the Windows 7 timer note: 3 605 ns × 275 000 reads/s = 99.1% of a CPU
        assert!((cpu_share_pct(3605.0, 275_000.0) - 99.1375).abs() < 1e-9);
    }
}
