//! The host agent's reaction time (`vmtune bench boost`): from the moment a thread waiting
//! behind a busy CPU is made runnable to the moment it runs, when an agent on another CPU is
//! woken at that moment (an eventfd, as the `irq boost` agent is by its eBPF program) and
//! raises it with `sched_setscheduler(SCHED_FIFO)` — the synthetic stand-in for "an interrupt
//! accepted for a preempted vCPU". The same trigger without the agent is the baseline: how long
//! the thread waits for its turn in the fair class.
//!
//! Threads: a burner spinning on CPU `busy`; the target, pinned there too and spinning as
//! well (a runnable vCPU that is not always on its CPU: the two share it by turns), watching for
//! a trigger; the agent on CPU `agent_cpu`, blocked on an eventfd; the trigger (this thread, on
//! the agent's CPU) reads the clock, publishes the trigger and wakes the agent. The target reads
//! the clock when it sees the trigger — at once if it happens to be on the CPU, else when it is
//! next — goes back to the fair class and answers. Without the agent it waits for its turn.
//! The simulator's `[host] boost_reaction_p50_us`/`p99_us` are this measurement's.
//!
//! Needs CAP_SYS_NICE (root) for SCHED_FIFO and two CPUs. Changes nothing outside its own
//! threads, which end with it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::stats::{percentile_sorted, PercentileMethod};
use crate::sys;

#[derive(Debug, Clone)]
pub struct BoostOptions {
    /// The CPU the burner and the target share.
    pub busy_cpu: u32,
    /// The agent's and the trigger's CPU.
    pub agent_cpu: u32,
    /// Triggers per side.
    pub samples: usize,
    /// Time between triggers.
    pub gap: Duration,
}

/// Quantiles of one side, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    pub samples: usize,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoostResult {
    pub busy_cpu: u32,
    pub agent_cpu: u32,
    /// With the agent: every trigger, and those that found the target off its CPU (it took
    /// longer than [`ON_CPU_US`] to see it) — the agent's reaction time.
    pub boosted: Waits,
    pub boosted_waiting: Waits,
    /// The same without the agent: the target's wait for its fair turn.
    pub unboosted: Waits,
    pub unboosted_waiting: Waits,
}

/// A trigger the target saw within this many µs found it on its CPU (it polls in a loop).
pub const ON_CPU_US: f64 = 10.0;

fn eventfd() -> Result<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(BenchError::sys("eventfd"));
    }
    // SAFETY: fd is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ev_write(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: 8 bytes from a valid u64 to a valid eventfd.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

fn ev_read(fd: &OwnedFd) -> bool {
    let mut v: u64 = 0;
    // SAFETY: 8 bytes into a valid u64 from a valid eventfd.
    unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) == 8 }
}

fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() }
}

/// Back to SCHED_OTHER (the calling thread).
fn back_to_fair() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid sched_param; 0 = the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
}

fn quantiles(mut ns: Vec<u64>) -> Waits {
    ns.sort_unstable();
    let us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1000.0).collect();
    let q = |p: f64| percentile_sorted(&us, p, PercentileMethod::NearestRank).unwrap_or(f64::NAN);
    Waits {
        samples: us.len(),
        p50_us: q(50.0),
        p90_us: q(90.0),
        p99_us: q(99.0),
        max_us: us.last().copied().unwrap_or(f64::NAN),
    }
}

/// Measures both sides, interleaved trigger by trigger.
pub fn run(opts: &BoostOptions) -> Result<BoostResult> {
    if opts.busy_cpu == opts.agent_cpu {
        return Err(BenchError::Invalid(
            "the busy CPU and the agent's must differ".into(),
        ));
    }
    let allowed = sys::allowed_cpus()?;
    for c in [opts.busy_cpu, opts.agent_cpu] {
        if !allowed.contains(c) {
            return Err(BenchError::Invalid(format!(
                "CPU {c} is not available here ({allowed})"
            )));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let agent_fd = Arc::new(eventfd()?);
    let done_fd = Arc::new(eventfd()?);
    let trigger_at = Arc::new(AtomicU64::new(0));
    let ran_at = Arc::new(AtomicU64::new(0));
    let target_tid = Arc::new(AtomicI32::new(0));
    let agent_error = Arc::new(AtomicI32::new(0));

    let burner = {
        let (stop, cpu) = (stop.clone(), opts.busy_cpu);
        std::thread::spawn(move || {
            let _ = sys::pin_current_thread(cpu);
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        })
    };
    let trigger_seq = Arc::new(AtomicU64::new(0));
    let target = {
        let (stop, seq, done, ran, tid, cpu) = (
            stop.clone(),
            trigger_seq.clone(),
            done_fd.clone(),
            ran_at.clone(),
            target_tid.clone(),
            opts.busy_cpu,
        );
        std::thread::spawn(move || {
            let _ = sys::pin_current_thread(cpu);
            tid.store(gettid(), Ordering::SeqCst);
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                let now = seq.load(Ordering::SeqCst);
                if now != last {
                    last = now;
                    ran.store(sys::monotonic_ns(), Ordering::SeqCst);
                    back_to_fair();
                    ev_write(&done);
                }
                std::hint::spin_loop();
            }
        })
    };
    let agent = {
        let (stop, fd, tid, err, cpu) = (
            stop.clone(),
            agent_fd.clone(),
            target_tid.clone(),
            agent_error.clone(),
            opts.agent_cpu,
        );
        std::thread::spawn(move || {
            let _ = sys::pin_current_thread(cpu);
            let _ = sys::set_fifo(2);
            while ev_read(&fd) && !stop.load(Ordering::Relaxed) {
                let param = libc::sched_param { sched_priority: 1 };
                // SAFETY: valid sched_param, a thread of this process.
                let rc = unsafe {
                    libc::sched_setscheduler(tid.load(Ordering::SeqCst), libc::SCHED_FIFO, &param)
                };
                if rc != 0 {
                    err.store(
                        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1),
                        Ordering::SeqCst,
                    );
                }
            }
        })
    };
    sys::pin_current_thread(opts.agent_cpu)?;
    while target_tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    let (mut boosted, mut unboosted) = (Vec::new(), Vec::new());
    let mut failure = None;
    // triggers at random phases of the CPU's turns: the gap varies from 0.5 to 1.5 × `gap`
    let mut lcg: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..opts.samples * 2 {
        let with_agent = i % 2 == 0;
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let f = 0.5 + (lcg >> 11) as f64 / (1u64 << 53) as f64;
        std::thread::sleep(opts.gap.mul_f64(f));
        let t0 = sys::monotonic_ns();
        trigger_at.store(t0, Ordering::SeqCst);
        trigger_seq.fetch_add(1, Ordering::SeqCst);
        if with_agent {
            ev_write(&agent_fd);
        }
        if !ev_read(&done_fd) {
            failure = Some("reading the target's answer".to_string());
            break;
        }
        let e = agent_error.load(Ordering::SeqCst);
        if e != 0 {
            failure = Some(format!(
                "sched_setscheduler(SCHED_FIFO) of the target: {} (needs CAP_SYS_NICE: run as root)",
                std::io::Error::from_raw_os_error(e)
            ));
            break;
        }
        let waited = ran_at.load(Ordering::SeqCst).saturating_sub(t0);
        if with_agent {
            boosted.push(waited);
        } else {
            unboosted.push(waited);
        }
    }
    stop.store(true, Ordering::SeqCst);
    ev_write(&agent_fd);
    let _ = (burner.join(), target.join(), agent.join());
    if let Some(f) = failure {
        return Err(BenchError::Invalid(f));
    }
    let waiting = |v: &[u64]| -> Vec<u64> {
        v.iter()
            .copied()
            .filter(|&n| n as f64 > ON_CPU_US * 1000.0)
            .collect()
    };
    Ok(BoostResult {
        busy_cpu: opts.busy_cpu,
        agent_cpu: opts.agent_cpu,
        boosted_waiting: quantiles(waiting(&boosted)),
        unboosted_waiting: quantiles(waiting(&unboosted)),
        boosted: quantiles(boosted),
        unboosted: quantiles(unboosted),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_known_waits() {
        let w = quantiles((1..=100).map(|i| i * 1000).collect());
        assert_eq!(
            (w.samples, w.p50_us, w.p99_us, w.max_us),
            (100, 50.0, 99.0, 100.0)
        );
    }
}
