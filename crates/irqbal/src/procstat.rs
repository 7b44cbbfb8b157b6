//! `/proc/stat` parser: the per-CPU time lines.
//!
//! ```text
//! cpu  49620 0 10313 86761 1242 0 229 1027 0 0
//! cpu0 23789 0 4449 45793 117 0 17 471 0 0
//! ```
//! Fields in USER_HZ ticks (normally 10 ms): user nice system idle iowait irq softirq steal
//! guest guest_nice. Old kernels print fewer fields (steal since 2.6.11, guest since 2.6.24,
//! guest_nice since 2.6.33); missing ones are `None`. Other lines (`intr`, `ctxt`, ...) are
//! skipped.

use serde::{Deserialize, Serialize};

/// Ticks of one CPU (or of the `cpu` total line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: Option<u64>,
    pub irq: Option<u64>,
    pub softirq: Option<u64>,
    pub steal: Option<u64>,
    pub guest: Option<u64>,
    pub guest_nice: Option<u64>,
}

impl CpuTimes {
    /// Time spent servicing hard and soft interrupts: the paper's interrupt load.
    pub fn irq_time(&self) -> u64 {
        self.irq
            .unwrap_or(0)
            .saturating_add(self.softirq.unwrap_or(0))
    }

    /// Everything except guest time (already included in user/nice).
    pub fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait.unwrap_or(0),
            self.irq.unwrap_or(0),
            self.softirq.unwrap_or(0),
            self.steal.unwrap_or(0),
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// The CPU lines of `/proc/stat`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcStat {
    /// The `cpu` aggregate line, if present.
    pub total: Option<CpuTimes>,
    /// `(cpu number, times)` in file order (offline CPUs have no line).
    pub cpus: Vec<(u32, CpuTimes)>,
}

impl ProcStat {
    pub fn cpu(&self, n: u32) -> Option<&CpuTimes> {
        self.cpus.iter().find(|(c, _)| *c == n).map(|(_, t)| t)
    }
}

/// Parse the text of `/proc/stat`. The error names the line and the problem.
pub fn parse_proc_stat(text: &str) -> Result<ProcStat, String> {
    let mut out = ProcStat::default();
    for (i, line) in text.lines().enumerate() {
        let mut toks = line.split_whitespace();
        let Some(label) = toks.next() else { continue };
        let Some(num) = label.strip_prefix("cpu") else {
            continue;
        };
        let lineno = i + 1;
        let cpu = if num.is_empty() {
            None
        } else {
            Some(
                num.parse::<u32>()
                    .map_err(|_| format!("line {lineno}: bad CPU label {label:?}"))?,
            )
        };
        let mut vals = Vec::with_capacity(10);
        for t in toks {
            let v = t
                .parse::<u64>()
                .map_err(|_| format!("line {lineno}: {label} field {t:?} is not a number"))?;
            vals.push(v);
        }
        if vals.len() < 4 {
            return Err(format!(
                "line {lineno}: {label} has {} fields, at least 4 expected",
                vals.len()
            ));
        }
        let g = |k: usize| vals.get(k).copied();
        let times = CpuTimes {
            user: vals[0],
            nice: vals[1],
            system: vals[2],
            idle: vals[3],
            iowait: g(4),
            irq: g(5),
            softirq: g(6),
            steal: g(7),
            guest: g(8),
            guest_nice: g(9),
        };
        match cpu {
            None => {
                if out.total.is_some() {
                    return Err(format!("line {lineno}: second aggregate `cpu` line"));
                }
                out.total = Some(times);
            }
            Some(n) => {
                if out.cpus.iter().any(|(c, _)| *c == n) {
                    return Err(format!("line {lineno}: cpu{n} appears twice"));
                }
                out.cpus.push((n, times));
            }
        }
    }
    if out.total.is_none() && out.cpus.is_empty() {
        return Err("no cpu lines".into());
    }
    Ok(out)
}

/// USER_HZ of `/proc/stat` ticks. Linux fixes it at 100 on every architecture vmtune targets.
pub const USER_HZ: u64 = 100;

/// Nanoseconds per `/proc/stat` tick.
pub const NS_PER_TICK: u64 = 1_000_000_000 / USER_HZ;

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "cpu  49620 0 10313 86761 1242 0 229 1027 0 0
cpu0 23789 0 4449 45793 117 0 17 471 0 0
cpu1 25830 0 5864 40967 1125 3 212 555 0 0
intr 416213 0 0 0
ctxt 557139
btime 1763700000
processes 1234
procs_running 2
procs_blocked 0
softirq 1 2 3
";

    #[test]
    fn parses_cpu_lines() {
        let s = parse_proc_stat(SAMPLE).unwrap();
        assert_eq!(s.total.unwrap().steal, Some(1027));
        assert_eq!(s.cpus.len(), 2);
        let c1 = s.cpu(1).unwrap();
        assert_eq!(c1.user, 25830);
        assert_eq!(c1.irq_time(), 215);
        assert_eq!(c1.steal, Some(555));
        assert!(s.cpu(2).is_none());
    }

    #[test]
    fn old_kernel_without_steal() {
        let s = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4 5\n").unwrap();
        let c = s.cpu(0).unwrap();
        assert_eq!(c.iowait, Some(5));
        assert_eq!(c.steal, None);
        assert_eq!(c.irq_time(), 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn live_file_parses() {
        // every Linux machine has /proc/stat: not being able to read it is a failure here
        let t = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let s = parse_proc_stat(&t).unwrap();
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(
            s.cpus.len() >= online,
            "{} cpu lines, {online} CPUs",
            s.cpus.len()
        );
        assert!(s.total.is_some());
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_proc_stat("cpu 1 2 3 4\ncpuX 1 2 3 4\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(parse_proc_stat("cpu0 1 2 x 4\n")
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_proc_stat("cpu0 1 2\n")
            .unwrap_err()
            .contains("at least 4"));
        assert!(parse_proc_stat("cpu0 1 2 3 4\ncpu0 1 2 3 4\n")
            .unwrap_err()
            .contains("twice"));
        assert!(parse_proc_stat("intr 5\n").is_err());
        assert!(parse_proc_stat("").is_err());
        assert!(parse_proc_stat("cpu0 99999999999999999999999 0 0 0").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,400}") {
            let _ = parse_proc_stat(&s);
        }
    }
}
