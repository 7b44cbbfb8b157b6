//! A thread's scheduling attributes — policy, nice, real-time priority and EEVDF slice — read
//! and written with `sched_getattr(2)` / `sched_setattr(2)`, and what the kernel offers: per-task
//! slices (Linux 6.12+: `sched_attr.sched_runtime` of a fair task is its slice), the HRTICK
//! scheduler feature (without it a slice ends at the next tick at the earliest) and the tick.
//!
//! Values are written as one line, `other nice=0 prio=0 slice_ns=1500000 custom_slice=no`, the
//! spelling the journal keeps. A fair task's slice is either the kernel's base slice (it follows
//! `base_slice_ns`; `custom_slice=no`) or one set for it (`custom_slice=yes`); restoring
//! `custom_slice=no` writes a runtime of 0, which puts the task back on the base slice exactly
//! as it was, rather than pinning today's base value.

use std::io;

/// Scheduling policies (`SCHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Other,
    Fifo,
    Rr,
    Batch,
    Idle,
    Deadline,
}

impl Policy {
    fn from_raw(p: u32) -> Option<Policy> {
        Some(match p {
            0 => Policy::Other,
            1 => Policy::Fifo,
            2 => Policy::Rr,
            3 => Policy::Batch,
            5 => Policy::Idle,
            6 => Policy::Deadline,
            _ => return None,
        })
    }

    fn raw(self) -> u32 {
        match self {
            Policy::Other => 0,
            Policy::Fifo => 1,
            Policy::Rr => 2,
            Policy::Batch => 3,
            Policy::Idle => 5,
            Policy::Deadline => 6,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
            Policy::Deadline => "deadline",
        }
    }

    fn parse(s: &str) -> Option<Policy> {
        [
            Policy::Other,
            Policy::Fifo,
            Policy::Rr,
            Policy::Batch,
            Policy::Idle,
            Policy::Deadline,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }

    /// Fair-class policies, the ones a slice applies to.
    pub fn is_fair(self) -> bool {
        matches!(self, Policy::Other | Policy::Batch | Policy::Idle)
    }
}

/// What `sched_getattr` says of a thread, as far as vmtune changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedState {
    pub policy: Policy,
    pub nice: i32,
    /// Real-time priority (0 for fair tasks).
    pub priority: u32,
    /// Fair tasks: the slice (0 where the kernel has no per-task slices).
    pub slice_ns: u64,
    /// The slice was set for this task, not the base slice.
    pub custom_slice: bool,
}

impl SchedState {
    /// The journal's spelling.
    pub fn to_value(&self) -> String {
        format!(
            "{} nice={} prio={} slice_ns={} custom_slice={}",
            self.policy.name(),
            self.nice,
            self.priority,
            self.slice_ns,
            if self.custom_slice { "yes" } else { "no" }
        )
    }

    /// Read [`SchedState::to_value`]'s spelling; the error names what is wrong.
    pub fn parse(s: &str) -> Result<SchedState, String> {
        let mut words = s.split_whitespace();
        let pol = words.next().ok_or("empty scheduling value")?;
        let policy = Policy::parse(pol).ok_or_else(|| format!("unknown policy {pol:?}"))?;
        let (mut nice, mut priority, mut slice_ns, mut custom) = (None, None, None, None);
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("{w:?}: expected KEY=VALUE"))?;
            let bad = || format!("{k}={v:?}: not a number");
            match k {
                "nice" => nice = Some(v.parse::<i32>().map_err(|_| bad())?),
                "prio" => priority = Some(v.parse::<u32>().map_err(|_| bad())?),
                "slice_ns" => slice_ns = Some(v.parse::<u64>().map_err(|_| bad())?),
                "custom_slice" => {
                    custom = Some(match v {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(format!("custom_slice={v:?}: yes or no")),
                    })
                }
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        let st = SchedState {
            policy,
            nice: nice.ok_or("nice= missing")?,
            priority: priority.ok_or("prio= missing")?,
            slice_ns: slice_ns.ok_or("slice_ns= missing")?,
            custom_slice: custom.ok_or("custom_slice= missing")?,
        };
        if !(-20..=19).contains(&st.nice) {
            return Err(format!("nice={} outside -20..19", st.nice));
        }
        if st.priority > 99 {
            return Err(format!("prio={} above 99", st.priority));
        }
        Ok(st)
    }
}

/// `struct sched_attr` as of Linux 3.14 (`SCHED_ATTR_SIZE_VER0`, 48 bytes); later fields
/// (utilization clamps) are left to the kernel.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

const SCHED_ATTR_SIZE_VER0: u32 = 48;

fn getattr(tid: i32) -> io::Result<SchedAttr> {
    let mut a = SchedAttr {
        size: SCHED_ATTR_SIZE_VER0,
        ..SchedAttr::default()
    };
    // SAFETY: sched_getattr writes at most `size` (the 4th argument) bytes into `a`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            SCHED_ATTR_SIZE_VER0,
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(a)
}

fn setattr(tid: i32, a: &SchedAttr) -> io::Result<()> {
    // SAFETY: sched_setattr reads one sched_attr of `a.size` bytes.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, a as *const SchedAttr, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The base slice of fair tasks: the slice of a thread just created (the kernel gives every new
/// task the base slice). `None` where the kernel reports no per-task slice (before 6.12) or the
/// thread cannot be made. Learnt once per process (every read of a thread's state needs it).
pub fn base_slice_ns() -> Option<u64> {
    static BASE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *BASE.get_or_init(probe_base_slice)
}

fn probe_base_slice() -> Option<u64> {
    let h = std::thread::spawn(|| {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        getattr(tid).ok().map(|a| a.runtime)
    });
    h.join().ok().flatten().filter(|&r| r > 0)
}

/// A thread's state; `base` is [`base_slice_ns`] (a fair slice equal to it counts as the base
/// slice, not a custom one).
pub fn get(tid: i32, base: Option<u64>) -> io::Result<SchedState> {
    let a = getattr(tid)?;
    let policy = Policy::from_raw(a.policy).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("thread {tid}: unknown policy {}", a.policy),
        )
    })?;
    let fair = policy.is_fair();
    let slice_ns = if fair { a.runtime } else { 0 };
    Ok(SchedState {
        policy,
        nice: a.nice,
        priority: a.priority,
        slice_ns,
        custom_slice: fair && slice_ns > 0 && base.is_some_and(|b| b != slice_ns),
    })
}

/// Make a thread's state `st`.
pub fn set(tid: i32, st: &SchedState) -> io::Result<()> {
    let a = SchedAttr {
        size: SCHED_ATTR_SIZE_VER0,
        policy: st.policy.raw(),
        flags: 0,
        nice: st.nice,
        priority: st.priority,
        runtime: if st.policy.is_fair() && st.custom_slice {
            st.slice_ns
        } else {
            0
        },
        deadline: 0,
        period: 0,
    };
    setattr(tid, &a)
}

/// The kernel's clamp of a custom slice (`0.1 ms ..= 100 ms`).
pub const SLICE_MIN_NS: u64 = 100_000;
pub const SLICE_MAX_NS: u64 = 100_000_000;

/// Whether the HRTICK scheduler feature is on (`/sys/kernel/debug/sched/features`), or why
/// that cannot be told.
pub fn hrtick(features: &std::path::Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(features).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => format!(
            "{} is missing (mount debugfs: mount -t debugfs none /sys/kernel/debug)",
            features.display()
        ),
        io::ErrorKind::PermissionDenied => format!(
            "{} is not readable here (root, and no kernel lockdown, are needed)",
            features.display()
        ),
        _ => format!("{}: {e}", features.display()),
    })?;
    text.split_whitespace()
        .find_map(|f| match f {
            "HRTICK" => Some(true),
            "NO_HRTICK" => Some(false),
            _ => None,
        })
        .ok_or_else(|| format!("{} does not list HRTICK", features.display()))
}

/// `CONFIG_HZ` from a kernel config's text.
pub fn hz_from_config(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| hz > 0)
}

/// The running kernel's config: `/boot/config-RELEASE`, else `/proc/config.gz`.
pub fn kernel_config(proc_root: &std::path::Path) -> Option<String> {
    let release = std::fs::read_to_string(proc_root.join("sys/kernel/osrelease")).ok()?;
    if let Ok(t) = std::fs::read_to_string(format!("/boot/config-{}", release.trim())) {
        return Some(t);
    }
    let gz = std::fs::File::open(proc_root.join("config.gz")).ok()?;
    let mut text = String::new();
    io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).ok()?;
    Some(text)
}

/// The tick in ns, from a kernel config's text ([`kernel_config`]).
pub fn tick_ns(config: Option<&str>) -> Option<u64> {
    let hz = hz_from_config(config?)?;
    Some(1_000_000_000 / u64::from(hz))
}

/// How long a slice really lasts: without HRTICK the scheduler looks at it only at the tick.
pub fn effective_slice_ns(slice_ns: u64, hrtick: Option<bool>, tick_ns: Option<u64>) -> u64 {
    match (hrtick, tick_ns) {
        (Some(true), _) | (_, None) => slice_ns,
        (_, Some(t)) => slice_ns.max(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_bad_ones_are_named() {
        let st = SchedState {
            policy: Policy::Other,
            nice: -5,
            priority: 0,
            slice_ns: 300_000,
            custom_slice: true,
        };
        assert_eq!(
            st.to_value(),
            "other nice=-5 prio=0 slice_ns=300000 custom_slice=yes"
        );
        assert_eq!(SchedState::parse(&st.to_value()), Ok(st));
        for (bad, why) in [
            ("", "empty"),
            ("rt nice=0", "unknown policy"),
            ("other nice=0 prio=0 slice_ns=1", "custom_slice= missing"),
            ("other nice=40 prio=0 slice_ns=1 custom_slice=no", "outside"),
            (
                "fifo nice=0 prio=120 slice_ns=0 custom_slice=no",
                "above 99",
            ),
            (
                "other nice=x prio=0 slice_ns=1 custom_slice=no",
                "not a number",
            ),
        ] {
            let e = SchedState::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_slice_under_the_tick_without_hrtick_is_the_tick() {
        assert_eq!(
            effective_slice_ns(300_000, Some(false), Some(4_000_000)),
            4_000_000
        );
        assert_eq!(
            effective_slice_ns(300_000, None, Some(4_000_000)),
            4_000_000
        );
        assert_eq!(
            effective_slice_ns(300_000, Some(true), Some(4_000_000)),
            300_000
        );
        assert_eq!(
            hz_from_config("# x\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
            Some(250)
        );
        assert_eq!(tick_ns(Some("CONFIG_HZ=1000")), Some(1_000_000));
    }

    #[test]
    fn hrtick_is_read_from_the_features_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("features");
        std::fs::write(&f, "GENTLE_FAIR_SLEEPERS START_DEBIT NO_HRTICK HRTICK_DL\n").unwrap();
        assert_eq!(hrtick(&f), Ok(false));
        std::fs::write(&f, "HRTICK NO_HRTICK_DL\n").unwrap();
        assert_eq!(hrtick(&f), Ok(true));
        assert!(hrtick(&d.path().join("missing"))
            .unwrap_err()
            .contains("mount debugfs"));
    }

    #[test]
    fn this_thread_reads_back_what_it_sets() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let base = base_slice_ns();
        let before = get(tid, base).unwrap();
        let Some(base) = base else {
            // no per-task slices on this kernel: nothing more to check
            assert_eq!(before.slice_ns, 0);
            return;
        };
        assert!(!before.custom_slice, "{before:?}");
        assert_eq!(before.slice_ns, base);
        let want = SchedState {
            slice_ns: 300_000,
            custom_slice: true,
            ..before
        };
        set(tid, &want).unwrap();
        assert_eq!(get(tid, Some(base)).unwrap(), want);
        set(tid, &before).unwrap();
        assert_eq!(get(tid, Some(base)).unwrap(), before);
    }
}
