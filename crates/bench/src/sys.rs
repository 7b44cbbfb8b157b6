//! Thin wrappers over the few system calls the benchmarks need: CPU affinity, the FIFO
//! scheduling class, absolute sleeps.

use topo::CpuSet;

use crate::error::{BenchError, Result};

/// CPUs the calling thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Result<CpuSet> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pointer and size describe `set`.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(BenchError::sys("sched_getaffinity"));
    }
    let mut out = CpuSet::new();
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: cpu < CPU_SETSIZE.
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            out.insert(cpu as u32);
        }
    }
    Ok(out)
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    pin_current_thread_to(&[cpu])
}

/// Pin the calling thread to a set of CPUs.
pub fn pin_current_thread_to(cpus: &[u32]) -> Result<()> {
    // SAFETY: zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c as usize >= libc::CPU_SETSIZE as usize {
            return Err(BenchError::Invalid(format!("CPU {c} is out of range")));
        }
        // SAFETY: c < CPU_SETSIZE.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: pointer and size describe `set`; 0 = the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(BenchError::sys(format!(
            "sched_setaffinity to CPU {cpus:?}"
        )));
    }
    Ok(())
}

/// Put the calling thread in SCHED_FIFO at `priority` (1–99).
pub fn set_fifo(priority: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid sched_param; 0 = the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(BenchError::sys(format!(
            "sched_setscheduler(SCHED_FIFO, {priority})"
        )));
    }
    Ok(())
}

/// `CLOCK_MONOTONIC` now, in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until the absolute `CLOCK_MONOTONIC` time `deadline_ns` (`clock_nanosleep` with
/// `TIMER_ABSTIME`), retrying on EINTR unless a stop signal arrived.
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; remaining-time pointer unused with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR || crate::signals::interrupted() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_roundtrip() {
        let allowed = allowed_cpus().unwrap();
        let first = allowed.first().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(first).unwrap();
            assert_eq!(allowed_cpus().unwrap().to_vec(), vec![first]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(100_000).is_err());
    }

    #[test]
    fn sleeps_until_deadline() {
        let t = monotonic_ns();
        sleep_until_ns(t + 2_000_000);
        assert!(monotonic_ns() >= t + 2_000_000);
    }
}
