//! Guest mode: the vBalance daemon inside a Linux KVM guest.
//!
//! observe (`/proc/stat`, `/proc/interrupts`) → [`observe`] (pure: loads, steal rate, online
//! status) → [`Policy::decide`] (pure) → write `/proc/irq/N/smp_affinity_list` (one CPU) and
//! check `effective_affinity_list`.
//!
//! **Preemption signal.** KVM exposes per-vCPU steal time; `/proc/stat` counts it in 10 ms
//! ticks and a vCPU's steal only grows once that vCPU runs again (the guest accounts it on its
//! own tick), so the steal *rate* over the last window says which vCPUs have recently been
//! preempted and predicts that they will be again — it does not observe the present. A vCPU
//! whose steal rate exceeds `steal_threshold` is treated as offline. (The exact signal,
//! `kvm_steal_time.preempted`, needs an eBPF reader; not built, see the crate README.)
//!
//! **What moves.** Only MSI/MSI-X IRQs whose affinity can be written: managed IRQs
//! (virtio-blk/scsi queue vectors) refuse writes with EIO, virtio-net queues accept them. By
//! default the daemon balances virtio-net queue IRQs (and other NIC-like queue names);
//! `irqs` overrides that. Every IRQ it touches is restored on exit (also on SIGTERM/SIGINT).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use topo::{CpuSet, InterruptTable};

use crate::policy::{Decision, IrqView, Policy, PolicyConfig, Snapshot, VcpuView};
use crate::procstat::{parse_proc_stat, ProcStat, NS_PER_TICK};
use crate::Error;

/// Reads and writes under a procfs root (`/proc` on a live system; a directory in tests).
#[derive(Debug, Clone)]
pub struct ProcFs {
    pub root: PathBuf,
    /// sysfs root, for finding virtio-net devices.
    pub sys: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }
}

impl ProcFs {
    fn read(&self, rel: &str) -> Result<String, Error> {
        let p = self.root.join(rel);
        std::fs::read_to_string(&p).map_err(|e| Error::io(p.display().to_string(), e))
    }

    pub fn stat(&self) -> Result<ProcStat, Error> {
        let text = self.read("stat")?;
        parse_proc_stat(&text).map_err(|msg| Error::Parse {
            path: self.root.join("stat").display().to_string(),
            msg,
        })
    }

    /// `/proc/interrupts` counts only (what each sample of the daemon needs).
    pub fn interrupt_counts(&self) -> Result<InterruptTable, Error> {
        let text = self.read("interrupts")?;
        topo::interrupts::parse_proc_interrupts(&text).map_err(|msg| Error::Parse {
            path: self.root.join("interrupts").display().to_string(),
            msg,
        })
    }

    /// `/proc/interrupts` with every numbered IRQ's affinity and effective affinity.
    pub fn interrupts(&self) -> Result<InterruptTable, Error> {
        let mut t = self.interrupt_counts()?;
        let irqdir = self.root.join("irq");
        topo::interrupts::fill_affinities(&mut t, |rel| {
            std::fs::read_to_string(irqdir.join(rel)).ok()
        });
        Ok(t)
    }

    pub fn affinity_list(&self, irq: u32) -> Result<String, Error> {
        Ok(self
            .read(&format!("irq/{irq}/smp_affinity_list"))?
            .trim()
            .to_string())
    }

    pub fn effective(&self, irq: u32) -> Option<CpuSet> {
        self.read(&format!("irq/{irq}/effective_affinity_list"))
            .ok()
            .and_then(|s| CpuSet::parse_list(s.trim()).ok())
    }

    /// Write a CPU list to `irq/N/smp_affinity_list`.
    pub fn set_affinity(&self, irq: u32, list: &str) -> Result<(), Error> {
        let p = self.root.join(format!("irq/{irq}/smp_affinity_list"));
        std::fs::write(&p, format!("{list}\n")).map_err(|e| Error::io(p.display().to_string(), e))
    }

    /// Names of virtio devices bound to virtio_net (`virtio2`, ...).
    pub fn virtio_net_devices(&self) -> Vec<String> {
        let dir = self.sys.join("bus/virtio/drivers/virtio_net");
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("virtio"))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// utime + stime of this process in ticks (`/proc/self/stat` fields 14 and 15).
    pub fn self_cpu_ticks(&self) -> Result<u64, Error> {
        let text = self.read("self/stat")?;
        parse_pid_stat_cpu(&text).ok_or_else(|| Error::Parse {
            path: self.root.join("self/stat").display().to_string(),
            msg: "no utime/stime fields".into(),
        })
    }
}

/// `(utime + stime)` from the text of `/proc/PID/stat` (the comm may contain spaces and
/// parentheses: fields are counted after the last `)`).
pub fn parse_pid_stat_cpu(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after ')' the first field is field 3 (state); utime is field 14, stime 15
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime.saturating_add(stime))
}

/// The CPU a task last ran on: field 39 of `/proc/PID/task/TID/stat`.
pub fn parse_pid_stat_processor(text: &str) -> Option<u32> {
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// Whether an IRQ row looks like a NIC queue vector by its action name.
pub fn is_nic_queue_name(actions: &str, virtio_net: &[String]) -> bool {
    let a = actions;
    virtio_net
        .iter()
        .any(|d| a.starts_with(&format!("{d}-input.")) || a.starts_with(&format!("{d}-output.")))
        || a.contains("-rx-")
        || a.contains("-tx-")
        || a.contains("-TxRx-")
        || a.contains("-txrx-")
}

fn is_msi(chip: Option<&str>) -> bool {
    chip.is_some_and(|c| c.contains("MSI"))
}

/// One IRQ the daemon may balance.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub irq: u32,
    pub name: String,
    /// `smp_affinity_list` when the daemon started.
    pub original: String,
    pub movable: bool,
    /// Why it is (not) movable: `write accepted`, the write error, `not MSI`.
    pub note: String,
}

/// Find the IRQs to balance: `explicit` if given, else virtio-net and NIC-queue MSI vectors.
/// With `probe`, movability is tested by writing the current mask back (a no-op for movable
/// IRQs, EIO for managed ones); without it, movability is left unknown (`movable = false`).
pub fn discover(
    fs: &ProcFs,
    table: &InterruptTable,
    explicit: &[u32],
    probe: bool,
) -> Vec<Candidate> {
    let nets = fs.virtio_net_devices();
    let mut out = Vec::new();
    for irq in &table.irqs {
        let Some(n) = irq.number else { continue };
        let wanted = if explicit.is_empty() {
            is_msi(irq.chip.as_deref()) && is_nic_queue_name(&irq.actions, &nets)
        } else {
            explicit.contains(&n)
        };
        if !wanted {
            continue;
        }
        let original = match fs.affinity_list(n) {
            Ok(s) => s,
            Err(e) => {
                out.push(Candidate {
                    irq: n,
                    name: irq.actions.clone(),
                    original: String::new(),
                    movable: false,
                    note: e.to_string(),
                });
                continue;
            }
        };
        let (movable, note) = if !is_msi(irq.chip.as_deref()) {
            (false, "not an MSI/MSI-X vector".to_string())
        } else if !probe {
            (false, "not probed".to_string())
        } else {
            match fs.set_affinity(n, &original) {
                Ok(()) => (true, "write accepted".to_string()),
                Err(e) => (false, format!("write refused (managed?): {e}")),
            }
        };
        out.push(Candidate {
            irq: n,
            name: irq.actions.clone(),
            original,
            movable,
            note,
        });
    }
    out
}

/// One observation of the system.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    pub stat: ProcStat,
    pub ints: InterruptTable,
}

impl Sample {
    /// Counters only: `/proc/stat` and `/proc/interrupts` (two reads per sample).
    pub fn take(fs: &ProcFs) -> Result<Sample, Error> {
        Ok(Sample {
            at: Instant::now(),
            stat: fs.stat()?,
            ints: fs.interrupt_counts()?,
        })
    }

    /// Counters plus every IRQ's affinity (for display).
    pub fn take_full(fs: &ProcFs) -> Result<Sample, Error> {
        Ok(Sample {
            at: Instant::now(),
            stat: fs.stat()?,
            ints: fs.interrupts()?,
        })
    }
}

/// Per-CPU view over one window, for display and for the policy.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CpuWindow {
    pub cpu: u32,
    /// Fraction of the window spent in irq + softirq.
    pub irq_frac: f64,
    /// Fraction of the window stolen by the hypervisor.
    pub steal_frac: f64,
    pub online: bool,
}

/// Pure: the window between two samples as per-CPU views.
pub fn cpu_windows(
    prev: &Sample,
    cur: &Sample,
    steal_threshold: f64,
    eligible: Option<&CpuSet>,
) -> Vec<CpuWindow> {
    let dt = cur.at.saturating_duration_since(prev.at).as_nanos().max(1) as f64;
    let _ = eligible;
    cur.stat
        .cpus
        .iter()
        .map(|(cpu, t)| {
            let p = prev.stat.cpu(*cpu).copied().unwrap_or(*t);
            let irq = t.irq_time().saturating_sub(p.irq_time());
            let steal = t.steal.unwrap_or(0).saturating_sub(p.steal.unwrap_or(0));
            let irq_frac = (irq * NS_PER_TICK) as f64 / dt;
            let steal_frac = (steal * NS_PER_TICK) as f64 / dt;
            CpuWindow {
                cpu: *cpu,
                irq_frac,
                steal_frac,
                online: steal_frac <= steal_threshold,
            }
        })
        .collect()
}

/// Pure: the policy snapshot for `irqs` (with their current holders) over the window.
///
/// A vCPU's load is its irq + softirq fraction; an IRQ's load is its holder's load times the
/// IRQ's share of the interrupts that CPU took in the window (from `/proc/interrupts`).
pub fn observe(
    prev: &Sample,
    cur: &Sample,
    irqs: &[(u32, u32)],
    steal_threshold: f64,
    eligible: Option<&CpuSet>,
    now_ns: u64,
) -> Snapshot {
    let w = cpu_windows(prev, cur, steal_threshold, eligible);
    let col = |t: &InterruptTable, cpu: u32| t.cpus.iter().position(|&c| c == cpu);
    let delta_on = |irq: Option<u32>, cpu: u32| -> u64 {
        let (Some(ci), Some(pi)) = (col(&cur.ints, cpu), col(&prev.ints, cpu)) else {
            return 0;
        };
        cur.ints
            .irqs
            .iter()
            .filter(|r| r.number.is_some() && (irq.is_none() || r.number == irq))
            .map(|r| {
                let now = r.counts.get(ci).copied().unwrap_or(0);
                let before = prev
                    .ints
                    .irqs
                    .iter()
                    .find(|p| p.id == r.id)
                    .and_then(|p| p.counts.get(pi).copied())
                    .unwrap_or(now);
                now.saturating_sub(before)
            })
            .sum()
    };
    let vcpus: Vec<VcpuView> = w
        .iter()
        .map(|c| VcpuView {
            vcpu: c.cpu,
            online: c.online,
            load: c.irq_frac,
            eligible: eligible.is_none_or_contains(c.cpu),
        })
        .collect();
    let irqs = irqs
        .iter()
        .map(|&(irq, holder)| {
            let all = delta_on(None, holder);
            let mine = delta_on(Some(irq), holder);
            let hl = w
                .iter()
                .find(|c| c.cpu == holder)
                .map_or(0.0, |c| c.irq_frac);
            let load = if all == 0 {
                0.0
            } else {
                hl * mine as f64 / all as f64
            };
            IrqView { irq, holder, load }
        })
        .collect();
    Snapshot {
        now_ns,
        vcpus,
        irqs,
    }
}

trait MaybeSet {
    fn is_none_or_contains(&self, cpu: u32) -> bool;
}

impl MaybeSet for Option<&CpuSet> {
    fn is_none_or_contains(&self, cpu: u32) -> bool {
        match self {
            None => true,
            Some(s) => s.contains(cpu),
        }
    }
}

/// Restores the original affinity of every IRQ it was given, on [`restore`](Self::restore)
/// or drop.
#[derive(Debug)]
pub struct AffinityGuard {
    fs: ProcFs,
    saved: Vec<(u32, String)>,
    pub restored: Vec<(u32, Result<(), String>)>,
}

impl AffinityGuard {
    pub fn new(fs: ProcFs) -> Self {
        Self {
            fs,
            saved: Vec::new(),
            restored: Vec::new(),
        }
    }

    pub fn remember(&mut self, irq: u32, original: &str) {
        if !self.saved.iter().any(|(i, _)| *i == irq) {
            self.saved.push((irq, original.to_string()));
        }
    }

    /// Write every saved affinity back; returns how many writes failed.
    pub fn restore(&mut self) -> usize {
        let mut failed = 0;
        for (irq, orig) in std::mem::take(&mut self.saved) {
            let r = self.fs.set_affinity(irq, &orig).map_err(|e| e.to_string());
            failed += usize::from(r.is_err());
            self.restored.push((irq, r));
        }
        failed
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Guest-mode settings.
#[derive(Debug, Clone)]
pub struct GuestConfig {
    pub fs: ProcFs,
    pub interval: Duration,
    /// A vCPU whose steal fraction over the window exceeds this is offline (0..=1).
    pub steal_threshold: f64,
    pub policy: PolicyConfig,
    /// Balance exactly these IRQs (default: virtio-net / NIC queue vectors).
    pub irqs: Vec<u32>,
    /// Only these CPUs may receive IRQs.
    pub cpus: Option<CpuSet>,
    /// Decide and report, never write.
    pub dry_run: bool,
    /// Stop after this long (default: until SIGTERM/SIGINT).
    pub duration: Option<Duration>,
}

impl Default for GuestConfig {
    fn default() -> Self {
        Self {
            fs: ProcFs::default(),
            interval: Duration::from_millis(200),
            steal_threshold: 0.10,
            policy: PolicyConfig::extended(),
            irqs: Vec::new(),
            cpus: None,
            dry_run: false,
            duration: None,
        }
    }
}

/// What the daemon reports as it goes.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum DaemonEvent {
    /// The IRQs it balances and those it cannot.
    Start { candidates: Vec<Candidate> },
    /// One window: CPUs and the decision.
    Decision {
        t_s: f64,
        cpus: Vec<CpuWindow>,
        decision: Decision,
    },
    /// A move was written; `effective` is what the kernel reports afterwards.
    Move {
        irq: u32,
        from: u32,
        to: u32,
        reason: crate::policy::Reason,
        ok: bool,
        effective: Option<String>,
        /// The kernel has not moved the vector yet (it does so at the next interrupt).
        pending: bool,
        error: Option<String>,
    },
    /// Exit: affinities restored, CPU use.
    Stop { summary: Summary },
}

/// The daemon's own cost and work.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub samples: u64,
    pub moves: u64,
    pub failed_moves: u64,
    pub wall_s: f64,
    /// utime + stime of the daemon process over the run (10 ms resolution).
    pub cpu_s: f64,
    pub cpu_percent: f64,
    /// Mean time of one observe + decide + act step, µs (measured in-process).
    pub step_us_mean: f64,
    pub restored: Vec<(u32, String)>,
    pub restore_failures: usize,
}

/// Run the guest daemon until `stop` is set, the duration passes, or an error.
/// Installs nothing itself: the caller registers signal handlers that set `stop`
/// (see [`install_signal_flag`]).
pub fn run_guest(
    cfg: &GuestConfig,
    stop: &AtomicBool,
    mut emit: impl FnMut(&DaemonEvent),
) -> Result<Summary, Error> {
    let fs = &cfg.fs;
    let cpu0 = fs.self_cpu_ticks().unwrap_or(0);
    let start = Instant::now();
    let mut policy = Policy::new(cfg.policy)?;
    let first = Sample::take(fs)?;
    let cands = discover(fs, &first.ints, &cfg.irqs, !cfg.dry_run);
    emit(&DaemonEvent::Start {
        candidates: cands.clone(),
    });
    let mut guard = AffinityGuard::new(fs.clone());
    // current holder of each balanced IRQ: its effective CPU (or first CPU of its mask)
    let mut held: Vec<(u32, u32)> = Vec::new();
    for c in cands.iter().filter(|c| c.movable || cfg.dry_run) {
        let eff = fs
            .effective(c.irq)
            .and_then(|s| s.first())
            .or_else(|| CpuSet::parse_list(&c.original).ok().and_then(|s| s.first()));
        if let Some(cpu) = eff {
            held.push((c.irq, cpu));
            if !cfg.dry_run {
                guard.remember(c.irq, &c.original);
            }
        }
    }
    let mut prev = first;
    let (mut samples, mut moves, mut failed) = (0u64, 0u64, 0u64);
    let mut step_total = Duration::ZERO;
    'outer: loop {
        // sleep the interval in short steps so SIGTERM is seen quickly
        let wake = Instant::now() + cfg.interval;
        while Instant::now() < wake {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            if cfg.duration.is_some_and(|d| start.elapsed() >= d) {
                break 'outer;
            }
            std::thread::sleep(
                Duration::from_millis(10).min(wake.saturating_duration_since(Instant::now())),
            );
        }
        let t0 = Instant::now();
        let cur = Sample::take(fs)?;
        let now_ns = start.elapsed().as_nanos() as u64;
        let snap = observe(
            &prev,
            &cur,
            &held,
            cfg.steal_threshold,
            cfg.cpus.as_ref(),
            now_ns,
        );
        let decision = policy.decide(&snap);
        samples += 1;
        let cpus = cpu_windows(&prev, &cur, cfg.steal_threshold, cfg.cpus.as_ref());
        emit(&DaemonEvent::Decision {
            t_s: start.elapsed().as_secs_f64(),
            cpus,
            decision: decision.clone(),
        });
        for m in decision.moves() {
            let (ok, effective, pending, error) = if cfg.dry_run {
                (true, None, false, None)
            } else {
                match fs.set_affinity(m.irq, &m.to.to_string()) {
                    Ok(()) => {
                        // the mask must read back as the one CPU; the effective affinity of
                        // a non-remapped MSI follows at its next interrupt (x86 moves the
                        // vector from the interrupt context), so it may still be pending
                        let mask = fs.affinity_list(m.irq).ok();
                        let ok = mask.as_deref() == Some(m.to.to_string().as_str());
                        let eff = fs.effective(m.irq);
                        let pending = !eff.as_ref().is_none_or_eq(m.to);
                        let error = (!ok).then(|| format!("mask reads back as {mask:?}"));
                        (ok, eff.map(|e| e.to_list_string()), pending, error)
                    }
                    Err(e) => (false, None, false, Some(e.to_string())),
                }
            };
            if ok {
                moves += 1;
                if let Some(h) = held.iter_mut().find(|(i, _)| *i == m.irq) {
                    h.1 = m.to;
                }
            } else {
                failed += 1;
            }
            emit(&DaemonEvent::Move {
                irq: m.irq,
                from: m.from,
                to: m.to,
                reason: m.reason,
                ok,
                effective,
                pending,
                error,
            });
        }
        prev = cur;
        step_total += t0.elapsed();
    }
    let restore_failures = guard.restore();
    let restored = guard
        .restored
        .iter()
        .map(|(i, r)| {
            (
                *i,
                r.as_ref()
                    .map_or_else(|e| e.clone(), |_| "restored".to_string()),
            )
        })
        .collect();
    let wall = start.elapsed().as_secs_f64();
    let cpu =
        fs.self_cpu_ticks().unwrap_or(cpu0).saturating_sub(cpu0) as f64 * NS_PER_TICK as f64 / 1e9;
    let summary = Summary {
        samples,
        moves,
        failed_moves: failed,
        wall_s: wall,
        cpu_s: cpu,
        cpu_percent: if wall > 0.0 { 100.0 * cpu / wall } else { 0.0 },
        step_us_mean: if samples > 0 {
            step_total.as_secs_f64() * 1e6 / samples as f64
        } else {
            0.0
        },
        restored,
        restore_failures,
    };
    emit(&DaemonEvent::Stop {
        summary: summary.clone(),
    });
    Ok(summary)
}

trait EffOk {
    fn is_none_or_eq(&self, cpu: u32) -> bool;
}

impl EffOk for Option<&CpuSet> {
    fn is_none_or_eq(&self, cpu: u32) -> bool {
        match self {
            None => true,
            Some(s) => s.len() == 1 && s.contains(cpu),
        }
    }
}

/// Register SIGTERM and SIGINT to set the returned flag.
pub fn install_signal_flag() -> Result<Arc<AtomicBool>, Error> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .map_err(|e| Error::Other(format!("installing a signal handler: {e}")))?;
    }
    Ok(flag)
}

/// Is `path` a procfs root with the files the daemon needs?
pub fn check_root(root: &Path) -> bool {
    root.join("stat").exists() && root.join("interrupts").exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procstat::CpuTimes;

    fn sample(at: Instant, cpus: &[(u32, u64, u64)], ints: &str) -> Sample {
        Sample {
            at,
            stat: ProcStat {
                total: None,
                cpus: cpus
                    .iter()
                    .map(|&(c, irq, steal)| {
                        (
                            c,
                            CpuTimes {
                                softirq: Some(irq),
                                irq: Some(0),
                                steal: Some(steal),
                                ..Default::default()
                            },
                        )
                    })
                    .collect(),
            },
            ints: topo::interrupts::parse_proc_interrupts(ints).unwrap(),
        }
    }

    #[test]
    fn observe_turns_counters_into_loads_and_online_status() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let a = sample(t0, &[(0, 100, 10), (1, 50, 0)], "      CPU0 CPU1\n 38: 100 0 PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0\n 39: 100 0 PCI-MSIX-0000:00:03.0 2-edge virtio2-output.0\n");
        // in 1 s: CPU0 spent 20 ticks (200 ms) in softirq and had 50 ticks stolen; CPU1 5 ticks
        let b = sample(t1, &[(0, 120, 60), (1, 55, 0)], "      CPU0 CPU1\n 38: 400 0 PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0\n 39: 200 0 PCI-MSIX-0000:00:03.0 2-edge virtio2-output.0\n");
        let s = observe(&a, &b, &[(38, 0), (39, 0)], 0.1, None, 5);
        assert_eq!(s.now_ns, 5);
        assert!((s.vcpus[0].load - 0.2).abs() < 1e-9);
        assert!(!s.vcpus[0].online, "50% steal is offline");
        assert!(s.vcpus[1].online);
        // IRQ 38 took 300 of CPU0's 400 interrupts: 3/4 of 0.2
        assert!((s.irqs[0].load - 0.15).abs() < 1e-9, "{:?}", s.irqs);
        assert!((s.irqs[1].load - 0.05).abs() < 1e-9);
        // the policy moves both off the preempted vCPU0
        let mut p = Policy::new(PolicyConfig::extended()).unwrap();
        let d = p.decide(&s);
        assert!(d.placements.iter().all(|pl| pl.to == 1));
    }

    #[test]
    fn pid_stat_fields() {
        let text = "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_pid_stat_cpu(text), Some(10));
        assert_eq!(parse_pid_stat_processor(text), Some(1));
        assert_eq!(parse_pid_stat_cpu("garbage"), None);
        if let Ok(t) = std::fs::read_to_string("/proc/self/stat") {
            assert!(parse_pid_stat_cpu(&t).is_some());
            assert!(parse_pid_stat_processor(&t).is_some());
        }
    }

    #[test]
    fn nic_queue_names() {
        let nets = vec!["virtio2".to_string()];
        assert!(is_nic_queue_name("virtio2-input.0", &nets));
        assert!(is_nic_queue_name("virtio2-output.3", &nets));
        assert!(!is_nic_queue_name("virtio1-req.0", &nets));
        assert!(!is_nic_queue_name("virtio3-input.0", &nets));
        assert!(is_nic_queue_name("eth0-TxRx-3", &nets));
        assert!(!is_nic_queue_name("nvme0q1", &nets));
    }

    #[test]
    fn guard_restores_on_drop_in_a_fake_procfs() {
        let dir = tempfile::tempdir().unwrap();
        let irq = dir.path().join("irq/40");
        std::fs::create_dir_all(&irq).unwrap();
        std::fs::write(irq.join("smp_affinity_list"), "0-1\n").unwrap();
        let fs = ProcFs {
            root: dir.path().to_path_buf(),
            sys: dir.path().join("sys"),
        };
        {
            let mut g = AffinityGuard::new(fs.clone());
            g.remember(40, "0-1");
            fs.set_affinity(40, "1").unwrap();
            assert_eq!(fs.affinity_list(40).unwrap(), "1");
        }
        assert_eq!(fs.affinity_list(40).unwrap(), "0-1");
    }
}
