//! Guest mode: the vBalance daemon inside a Linux KVM guest.
//!
//! observe (`/proc/stat`, `/proc/interrupts`) → [`observe`] (pure: loads, steal rate, online
//! status) → [`Policy::decide`] (pure) → write `/proc/irq/N/smp_affinity_list` (one CPU) and
//! check `effective_affinity_list`.
//!
//! **Preemption signal.** Where it works (an x86 KVM guest whose host offers steal time, the
//! kernel's BTF, root), the exact one: KVM's per-vCPU `kvm_steal_time.preempted` flag, read
//! by the eBPF program of [`crate::ebpf`] at every guest tick and context switch on a running
//! vCPU and pushed through a ring buffer; the daemon wakes on each change and moves the IRQs of
//! a preempted holder at once. Otherwise `/proc/stat` steal: it counts in 10 ms ticks and a
//! vCPU's steal only grows once that vCPU runs again (the guest accounts it on its own tick),
//! so the steal *rate* over the last window says which vCPUs have recently been preempted and
//! predicts that they will be again — it does not observe the present. A vCPU whose steal rate
//! exceeds `steal_threshold` is treated as offline. The start event says which signal is in
//! use and why ([`open_signal`]).
//!
//! **Deferred moves.** Where a write takes effect only at the IRQ's next interrupt, on the old
//! vCPU (x86 MSI without interrupt remapping: [`crate::moves`] tells by the chip names), the
//! daemon does not follow single preemptions — such a move lands when the old vCPU runs
//! again and gives the IRQ to a vCPU that has, by then, usually been preempted itself. It
//! places IRQs by each vCPU's recent availability instead ([`crate::avail`]: preemption
//! episodes and wake-up waits from eBPF, steal from `/proc/stat`), deciding at each window;
//! the start event says which semantics were detected and why.
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

use crate::avail::{CounterWindow, CpuCounters, Episodes};
use crate::ebpf;
use crate::policy::{
    Decision, IrqView, MoveKind, Policy, PolicyConfig, Reason, Snapshot, VcpuView,
};
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
    /// The IRQ's chip as `/proc/interrupts` names it (`PCI-MSIX-0000:00:03.0`, `IR-PCI-MSI`).
    pub chip: Option<String>,
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
                    chip: irq.chip.clone(),
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
            chip: irq.chip.clone(),
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
    /// Steal over the availability window (deferred moves; `None` until it has a second of
    /// samples).
    pub avail_steal: Option<f64>,
    /// Expected wait of an interrupt raised on this vCPU at a random moment of the
    /// availability window, ms (eBPF with its wake-up counters; `None` otherwise).
    pub wait_ms: Option<f64>,
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
                avail_steal: None,
                wait_ms: None,
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
            steal: Some(c.steal_frac),
            ..VcpuView::new(
                c.cpu,
                c.online,
                c.irq_frac,
                eligible.is_none_or_contains(c.cpu),
            )
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
/// or drop: the mask always, and the effective CPU where the kernel lets it come back.
///
/// x86 moves a non-remapped MSI at its next interrupt, and writing back a multi-CPU mask
/// keeps the vector where it is if that CPU is in the mask. So to put the effective CPU back
/// too, the guard first writes the original effective CPU alone, waits (up to
/// [`effective_wait`](Self::effective_wait)) for the IRQ's next interrupt to move it there,
/// then writes the original mask. If no interrupt comes, the mask is restored and the effective
/// CPU is reported as not restored.
#[derive(Debug)]
pub struct AffinityGuard {
    fs: ProcFs,
    saved: Vec<Saved>,
    /// How long to wait for an interrupt to move the vector back.
    pub effective_wait: Duration,
    pub restored: Vec<(u32, Result<(), String>)>,
    /// Per IRQ: what happened to its effective CPU (`restored`, `unchanged`, or why not).
    pub effective: Vec<(u32, String)>,
}

#[derive(Debug, Clone)]
struct Saved {
    irq: u32,
    mask: String,
    effective: Option<u32>,
}

impl AffinityGuard {
    pub fn new(fs: ProcFs) -> Self {
        Self {
            fs,
            saved: Vec::new(),
            effective_wait: Duration::from_millis(500),
            restored: Vec::new(),
            effective: Vec::new(),
        }
    }

    /// Remember `irq`'s mask (and its effective CPU as it is now) before the first change.
    pub fn remember(&mut self, irq: u32, original: &str) {
        if !self.saved.iter().any(|s| s.irq == irq) {
            let effective = self
                .fs
                .effective(irq)
                .filter(|s| s.len() == 1)
                .and_then(|s| s.first());
            self.saved.push(Saved {
                irq,
                mask: original.to_string(),
                effective,
            });
        }
    }

    /// Write every saved affinity back; returns how many mask writes failed.
    pub fn restore(&mut self) -> usize {
        let mut failed = 0;
        for sv in std::mem::take(&mut self.saved) {
            let irq = sv.irq;
            let now_eff = self.fs.effective(irq).and_then(|s| s.first());
            let mask = CpuSet::parse_list(&sv.mask).ok();
            let mut note = "unchanged".to_string();
            if let (Some(want), Some(cur)) = (sv.effective, now_eff) {
                if want != cur && mask.as_ref().is_some_and(|m| m.contains(want)) {
                    note = match self.fs.set_affinity(irq, &want.to_string()) {
                        Err(e) => format!("not restored: {e}"),
                        Ok(()) => {
                            let deadline = Instant::now() + self.effective_wait;
                            let mut back = false;
                            while Instant::now() < deadline {
                                if self.fs.effective(irq).and_then(|s| s.first()) == Some(want) {
                                    back = true;
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            if back {
                                format!("restored to CPU {want}")
                            } else {
                                format!(
                                    "not restored: CPU {cur}, was {want} (no interrupt came to \
                                     move it back within {} ms)",
                                    self.effective_wait.as_millis()
                                )
                            }
                        }
                    };
                }
            }
            let r = self
                .fs
                .set_affinity(irq, &sv.mask)
                .map_err(|e| e.to_string())
                .and_then(|()| match self.fs.affinity_list(irq) {
                    Ok(m) if CpuSet::parse_list(&m).ok() == mask => Ok(()),
                    Ok(m) => Err(format!("mask reads back as {m}, not {}", sv.mask)),
                    Err(e) => Err(e.to_string()),
                });
            failed += usize::from(r.is_err());
            self.restored.push((irq, r));
            self.effective.push((irq, note));
        }
        failed
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Which preemption signal the guest daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignalChoice {
    /// The eBPF preempted flag where it works, else `/proc/stat` steal (saying why).
    Auto,
    /// The eBPF preempted flag or an error.
    Ebpf,
    /// `/proc/stat` steal over each window.
    Procstat,
}

/// The signal in use, and why.
#[derive(Debug, Clone, Serialize)]
pub struct SignalInfo {
    /// `ebpf-preempted-flag` or `procstat-steal`.
    pub signal: &'static str,
    /// Why this one (for the fallback: why eBPF is unavailable).
    pub reason: String,
    /// eBPF: `steal_time`'s and `runqueues`' per-CPU offsets found in BTF.
    pub percpu_offsets: Option<ebpf::PercpuOffsets>,
    /// eBPF: each CPU's steal clock read through the learnt address vs `/proc/stat`.
    pub checks: Vec<ebpf::CpuCheck>,
}

pub const SIGNAL_EBPF: &str = "ebpf-preempted-flag";
/// Default load window with the eBPF signal.
pub const INTERVAL_EBPF: Duration = Duration::from_secs(1);
/// Default window with the `/proc/stat` signal.
pub const INTERVAL_PROCSTAT: Duration = Duration::from_millis(200);
pub const SIGNAL_PROCSTAT: &str = "procstat-steal";

/// Open the signal `choice` asks for: the eBPF reader (or `None` and the reason it is
/// unavailable, for `Auto`).
pub fn open_signal(
    choice: SignalChoice,
    scan_gap: Duration,
) -> Result<(Option<ebpf::PreemptReader>, SignalInfo), Error> {
    let procstat = |reason: String| SignalInfo {
        signal: SIGNAL_PROCSTAT,
        reason,
        percpu_offsets: None,
        checks: Vec::new(),
    };
    if choice == SignalChoice::Procstat {
        return Ok((None, procstat("chosen with --signal procstat".into())));
    }
    match ebpf::PreemptReader::open(scan_gap) {
        Ok(r) => {
            let info = SignalInfo {
                signal: SIGNAL_EBPF,
                reason: format!(
                    "KVM steal time offered; steal_time found {} bytes from each CPU's run \
                     queue (kernel BTF); steal read through it matches /proc/stat on {} CPU(s)",
                    r.offsets.st_minus_rq(),
                    r.checks.len()
                ),
                percpu_offsets: Some(r.offsets),
                checks: r.checks.clone(),
            };
            Ok((Some(r), info))
        }
        Err(e) if choice == SignalChoice::Auto => Ok((
            None,
            procstat(format!("eBPF preempted flag unavailable: {e}")),
        )),
        Err(e) => Err(Error::Other(format!(
            "eBPF preempted flag unavailable: {e}"
        ))),
    }
}

/// How the daemon learns whether the guest's affinity writes are deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MovesChoice {
    /// From the balanced IRQs' chips ([`crate::moves::detect`]).
    Auto,
    /// As told.
    Deferred,
    Direct,
}

/// The move semantics for `cands` as `choice` asks, with the reason.
pub fn decide_moves(choice: MovesChoice, cands: &[Candidate]) -> crate::moves::MoveDetection {
    let irqs: Vec<(u32, Option<String>)> = cands.iter().map(|c| (c.irq, c.chip.clone())).collect();
    let mut d = crate::moves::detect(&irqs, crate::moves::this_arch());
    match choice {
        MovesChoice::Auto => {}
        MovesChoice::Deferred | MovesChoice::Direct => {
            let want = if choice == MovesChoice::Deferred {
                MoveKind::Deferred
            } else {
                MoveKind::Direct
            };
            d.reason = format!("chosen with --moves {want} (detected: {})", d.reason);
            d.moves = want;
        }
    }
    d
}

/// What the daemon will do with the detected move semantics, in a sentence (printed at
/// start-up).
pub fn plan_sentence(moves: MoveKind, ebpf: bool, wakes: bool, policy: &PolicyConfig) -> String {
    match (moves, policy.mapping) {
        (_, crate::policy::Mapping::ManyToOne) => format!(
            "many-to-one: the paper's Algorithm 1 as published, moving every balanced IRQ off \
             a preempted vCPU at once{}",
            if moves == MoveKind::Deferred {
                " - although moves are deferred here, so they land when that vCPU runs again \
                 (the default many-to-many mapping places IRQs by availability instead)"
            } else {
                ""
            }
        ),
        (MoveKind::Deferred, _) => format!(
            "IRQs are placed by each vCPU's recent availability ({}, over {} s), decided at \
             each window: an IRQ leaves a vCPU whose interrupts waited over {}x (+{} ms) \
             longer than on the best one, at most every {} s; it is never moved on a single \
             preemption, because the move would land only at the IRQ's next interrupt, on \
             that vCPU once it runs again, and hand the IRQ to a vCPU that has usually been \
             preempted since (in the simulator, following preemptions made TCP/UDP streams \
             5-14x slower than static placement)",
            match (ebpf, wakes) {
                (true, true) => {
                    "expected interrupt wait from eBPF preemption episodes and wake-ups, \
                     steal from /proc/stat"
                }
                (true, false) => {
                    "steal from /proc/stat; the eBPF wake-up counters are unavailable, so no \
                     expected wait"
                }
                _ => "steal from /proc/stat",
            },
            crate::avail::DEFAULT_WINDOW_NS / 1_000_000_000,
            policy.avail_ratio,
            policy.avail_margin_ns / 1e6,
            policy.avail_dwell_ns / 1_000_000_000,
        ),
        (MoveKind::Direct, _) => format!(
            "{}; IRQs are balanced at each window (max/min > {}){}",
            if ebpf {
                "the IRQs of a vCPU seen preempted move to a running vCPU at once (the next \
                 interrupt goes there)"
            } else {
                "the IRQs of a vCPU whose steal exceeds the threshold move at each window"
            },
            policy.threshold,
            if policy.chase_max_load > 0.0 {
                format!(
                    "; a busy queue (over {} % of a CPU) stays on a preempted vCPU, whose raised \
                     interrupt would not follow it, and is placed by availability instead",
                    policy.chase_max_load * 100.0
                )
            } else {
                String::new()
            }
        ),
    }
}

/// Guest-mode settings.
#[derive(Debug, Clone)]
pub struct GuestConfig {
    pub fs: ProcFs,
    /// Load window: `/proc/stat` and `/proc/interrupts` are sampled this often. `None`: by
    /// signal — [`INTERVAL_EBPF`] with the eBPF flag (it wakes the daemon on preemptions by
    /// itself; the window only serves balance), [`INTERVAL_PROCSTAT`] with `/proc/stat`
    /// (the window is also the preemption signal).
    pub interval: Option<Duration>,
    /// `/proc/stat` signal: a vCPU whose steal fraction over the window exceeds this is
    /// offline (0..=1).
    pub steal_threshold: f64,
    pub policy: PolicyConfig,
    /// Balance exactly these IRQs (default: virtio-net / NIC queue vectors).
    pub irqs: Vec<u32>,
    /// Only these CPUs may receive IRQs.
    pub cpus: Option<CpuSet>,
    /// Decide and report, never write (nothing is probed, so no move is reported as done).
    pub dry_run: bool,
    /// Stop after this long (default: until SIGTERM/SIGINT).
    pub duration: Option<Duration>,
    pub signal: SignalChoice,
    /// eBPF: least time between two scans of the other vCPUs by one vCPU.
    pub scan_gap: Duration,
    /// Run the daemon's thread as SCHED_FIFO priority 1, so that a ring-buffer wake-up
    /// preempts the guest's own busy tasks at once (it sleeps almost all the time).
    pub realtime: bool,
    /// Whether affinity writes are deferred on this guest: detected, or as told.
    pub moves: MovesChoice,
}

impl Default for GuestConfig {
    fn default() -> Self {
        Self {
            fs: ProcFs::default(),
            interval: None,
            steal_threshold: 0.10,
            policy: PolicyConfig::extended(),
            irqs: Vec::new(),
            cpus: None,
            dry_run: false,
            duration: None,
            signal: SignalChoice::Auto,
            scan_gap: Duration::from_micros(100),
            realtime: true,
            moves: MovesChoice::Auto,
        }
    }
}

/// What the daemon reports as it goes.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum DaemonEvent {
    /// The IRQs it balances and those it cannot, and the preemption signal in use.
    Start {
        candidates: Vec<Candidate>,
        signal: SignalInfo,
        /// The daemon thread's scheduling: `SCHED_FIFO 1`, or `normal` and why.
        scheduling: String,
        /// Whether affinity writes take effect at once or at the IRQ's next interrupt, and
        /// what decided it.
        moves: crate::moves::MoveDetection,
        /// What the daemon will do, given the signal and the move semantics.
        plan: String,
    },
    /// One window: CPUs and the decision.
    Decision {
        t_s: f64,
        cpus: Vec<CpuWindow>,
        decision: Decision,
    },
    /// eBPF: a vCPU was seen preempted or running again.
    Preempt {
        t_s: f64,
        cpu: u32,
        preempted: bool,
        observer: u32,
        /// From the program seeing it to the daemon reading it, µs.
        ring_us: f64,
        /// Preempted: its last guest event was this long before (the preemption began
        /// after it), µs. Resumed: how long the episode lasted by the steal clock, µs.
        span_us: f64,
    },
    /// A move. `outcome`: `moved` (mask reads back, effective CPU already there), `pending`
    /// (mask written; x86 moves the vector at its next interrupt), `failed`, or `dry-run`
    /// (nothing written).
    Move {
        irq: u32,
        from: u32,
        to: u32,
        reason: crate::policy::Reason,
        ok: bool,
        outcome: &'static str,
        effective: Option<String>,
        pending: bool,
        error: Option<String>,
        /// For a move off a preempted vCPU seen by eBPF: from the program seeing the
        /// preemption to the affinity write done, µs.
        since_seen_us: Option<f64>,
    },
    /// Exit: affinities restored, CPU use, latencies.
    Stop { summary: Box<Summary> },
}

/// Percentiles of a sample (nearest rank), in the unit of the field's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Dist {
    pub n: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Dist {
    pub fn of(xs: &[f64]) -> Dist {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| -> Option<f64> {
            if v.is_empty() {
                return None;
            }
            let k = ((p / 100.0) * v.len() as f64).ceil() as usize;
            Some(v[k.clamp(1, v.len()) - 1])
        };
        Dist {
            n: v.len(),
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: rank(100.0),
        }
    }
}

/// How fast the daemon learnt of preemptions and acted (eBPF signal).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latencies {
    /// Preemptions and resumes reported by the program.
    pub preemptions: u64,
    pub resumes: u64,
    /// From a preemption's start (its steal clock counted back from the resume) to the
    /// program seeing it, µs (0 when seen before the estimate).
    pub preempt_to_seen_us: Dist,
    /// Upper bound of the same: from the vCPU's last guest event before it, µs.
    pub preempt_to_seen_bound_us: Dist,
    /// From the program seeing a change to the daemon reading it (ring buffer wake-up), µs.
    pub seen_to_daemon_us: Dist,
    /// From the program seeing a holder's preemption to the affinity write done, µs.
    pub seen_to_written_us: Dist,
    /// The affinity write itself (write + read-back), µs.
    pub write_us: Dist,
    /// Preemption episode lengths by the steal clock, µs.
    pub episode_us: Dist,
    /// Program counters (scans, events, ring full, addresses learnt, read errors).
    pub counters: ebpf::Counters,
}

/// The daemon's own cost and work.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub signal: &'static str,
    /// The move semantics the policy ran with.
    pub move_kind: MoveKind,
    pub samples: u64,
    pub moves: u64,
    /// Moves off a vCPU the signal said was preempted.
    pub moves_off_preempted: u64,
    pub failed_moves: u64,
    /// Time balancing, after start-up.
    pub wall_s: f64,
    /// Start-up (reading BTF, loading and checking the eBPF program, probing IRQs): its CPU
    /// time and wall time, not counted in `cpu_s`.
    pub startup_cpu_s: f64,
    pub startup_s: f64,
    /// utime + stime of the daemon process while balancing (10 ms resolution).
    pub cpu_s: f64,
    /// `cpu_s` over `wall_s`: percent of one CPU.
    pub cpu_percent: f64,
    /// Mean time of one observe + decide + act step, µs (measured in-process).
    pub step_us_mean: f64,
    pub latencies: Option<Latencies>,
    pub restored: Vec<(u32, String)>,
    /// Per IRQ: what happened to its effective CPU on restore.
    pub effective_restored: Vec<(u32, String)>,
    pub restore_failures: usize,
}

/// Make the calling thread SCHED_FIFO priority 1; says what it got.
fn set_fifo_1() -> String {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if r == 0 {
        "SCHED_FIFO 1".to_string()
    } else {
        format!(
            "normal (SCHED_FIFO refused: {})",
            std::io::Error::last_os_error()
        )
    }
}

/// Write one move; returns (ok, outcome, effective, pending, error).
fn write_move(
    fs: &ProcFs,
    irq: u32,
    to: u32,
) -> (bool, &'static str, Option<String>, bool, Option<String>) {
    match fs.set_affinity(irq, &to.to_string()) {
        Ok(()) => {
            // the mask must read back as the one CPU; the effective affinity of a
            // non-remapped MSI follows at its next interrupt (x86 moves the vector from the
            // interrupt's ack), so it may still be pending
            let mask = fs.affinity_list(irq).ok();
            let ok = mask.as_deref() == Some(to.to_string().as_str());
            let eff = fs.effective(irq);
            let pending = !eff.as_ref().is_none_or_eq(to);
            let error = (!ok).then(|| format!("mask reads back as {mask:?}"));
            let outcome = match (ok, pending) {
                (false, _) => "failed",
                (true, true) => "pending",
                (true, false) => "moved",
            };
            (ok, outcome, eff.map(|e| e.to_list_string()), pending, error)
        }
        Err(e) => (false, "failed", None, false, Some(e.to_string())),
    }
}

/// The cumulative counters of one sample for the availability window: `/proc/stat` steal and
/// idle, and the eBPF wake-up counters where they are read.
pub fn counters_of(
    stat: &ProcStat,
    wakes: Option<&[ebpf::WakeCounters]>,
) -> Vec<(u32, CpuCounters)> {
    stat.cpus
        .iter()
        .map(|(cpu, t)| {
            let w = wakes
                .and_then(|ws| ws.iter().find(|w| w.cpu == *cpu))
                .copied()
                .unwrap_or_default();
            (
                *cpu,
                CpuCounters {
                    steal_ns: t.steal.unwrap_or(0).saturating_mul(NS_PER_TICK),
                    idle_ns: t.idle.saturating_mul(NS_PER_TICK),
                    wakes: w.wakes,
                    wake_wait_ns: w.wait_ns,
                    wake_wait_sq_us2: w.wait_sq_us2,
                },
            )
        })
        .collect()
}

/// Fill the availability of every vCPU of `snap` (and of `cpus`, for display): steal over the
/// window, and with `episodes` (eBPF with wake-up counters) the expected interrupt wait.
pub fn fill_availability(
    snap: &mut Snapshot,
    cpus: Option<&mut Vec<CpuWindow>>,
    episodes: Option<&Episodes>,
    counters: &CounterWindow,
    mono_now_ns: u64,
) {
    let wait = |cpu: u32| {
        episodes.and_then(|e| crate::avail::expected_wait_ns(e, counters, cpu, mono_now_ns))
    };
    for v in &mut snap.vcpus {
        v.steal = counters.steal(v.vcpu);
        v.wait_ns = wait(v.vcpu);
    }
    if let Some(cpus) = cpus {
        for c in cpus {
            c.avail_steal = counters.steal(c.cpu);
            c.wait_ms = wait(c.cpu).map(|w| w / 1e6);
        }
    }
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
    Policy::new(cfg.policy)?;
    let first = Sample::take(fs)?;
    check_irqs(cfg, &first)?;
    let (mut reader, signal) = open_signal(cfg.signal, cfg.scan_gap)?;
    let interval = cfg.interval.unwrap_or(if reader.is_some() {
        INTERVAL_EBPF
    } else {
        INTERVAL_PROCSTAT
    });
    let (cands, move_detection, mut policy, wakes_known) =
        announce(cfg, &first, reader.as_ref(), &signal, &mut emit)?;
    let deferred = move_detection.moves == MoveKind::Deferred;
    // availability (deferred moves): preemption episodes and wake-ups (eBPF), steal and idle
    let mono0 = ebpf::monotonic_ns();
    let mut episodes = Episodes::new(crate::avail::DEFAULT_WINDOW_NS, mono0);
    let mut counters = CounterWindow::new(crate::avail::DEFAULT_WINDOW_NS);
    let read_wakes = |r: &Option<ebpf::PreemptReader>| r.as_ref().and_then(|r| r.wakes());
    counters.push(
        mono0,
        counters_of(&first.stat, read_wakes(&reader).as_deref()),
    );
    let mut guard = AffinityGuard::new(fs.clone());
    let mut held = holders(cfg, &cands, &mut guard);
    // eBPF view: vCPUs currently preempted, with when each was seen
    let mut preempted: std::collections::BTreeMap<u32, ebpf::PreemptEvent> = Default::default();
    let mut m = Measured::default();
    // the daemon's own CPU from here on (start-up, e.g. loading eBPF, is reported apart)
    let cpu_loop0 = fs.self_cpu_ticks().unwrap_or(cpu0);
    let loop_start = Instant::now();
    let mut prev = first;
    let mut last_window: Option<Snapshot> = None;
    let mut next_sample = Instant::now() + interval;
    let mut n = Counts::default();
    loop {
        if stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        // SIGTERM/SIGINT interrupt the wait (poll and sleep return early on a signal)
        let wait = next_sample
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(250));
        // wait for the next window, waking at once on a preemption (eBPF)
        let mut urgent: Vec<ebpf::PreemptEvent> = Vec::new();
        // reports of what was seen go out after the moves they cause: act first
        let mut seen_reports: Vec<DaemonEvent> = Vec::new();
        match reader.as_mut() {
            Some(r) => {
                let evs = r.poll(wait);
                let got = ebpf::monotonic_ns();
                for e in evs {
                    let ev = on_signal(e, got, &mut m, &mut preempted, &mut episodes, start);
                    // with deferred moves a single preemption is not acted on
                    if e.preempted && !deferred && held.iter().any(|&(_, h)| h == e.cpu) {
                        urgent.push(e);
                    }
                    seen_reports.push(ev);
                }
            }
            None => std::thread::sleep(wait),
        }
        let t0 = Instant::now();
        let sample_due = Instant::now() >= next_sample;
        if !sample_due && urgent.is_empty() {
            for r in &seen_reports {
                emit(r);
            }
            continue;
        }
        let now_ns = start.elapsed().as_nanos() as u64;
        let mut snap = if sample_due {
            next_sample = Instant::now() + interval;
            let cur = Sample::take(fs)?;
            let mono = ebpf::monotonic_ns();
            counters.push(mono, counters_of(&cur.stat, read_wakes(&reader).as_deref()));
            let mut snap = observe(
                &prev,
                &cur,
                &held,
                cfg.steal_threshold,
                cfg.cpus.as_ref(),
                now_ns,
            );
            n.samples += 1;
            let mut cpus = cpu_windows(&prev, &cur, cfg.steal_threshold, cfg.cpus.as_ref());
            if reader.is_some() {
                for c in &mut cpus {
                    c.online = !preempted.contains_key(&c.cpu);
                }
            }
            let eps = wakes_known.then_some(&episodes);
            fill_availability(&mut snap, Some(&mut cpus), eps, &counters, mono);
            prev = cur;
            last_window = Some(snap.clone());
            (snap, Some(cpus))
        } else {
            // a preemption between windows: decide now on the last window's loads
            let s = between_windows(cfg, &mut prev, &mut last_window, &held, now_ns)?;
            (s, None)
        };
        if reader.is_some() {
            // the exact signal replaces the steal window's guess
            for v in &mut snap.0.vcpus {
                v.online = !preempted.contains_key(&v.vcpu);
            }
        }
        let decision = policy.decide(&snap.0);
        if let Some(cpus) = snap.1 {
            emit(&DaemonEvent::Decision {
                t_s: start.elapsed().as_secs_f64(),
                cpus,
                decision: decision.clone(),
            });
        }
        make_moves(
            cfg, &decision, &preempted, &mut held, &mut m, &mut n, &mut emit,
        );
        for r in &seen_reports {
            emit(r);
        }
        n.step_total += t0.elapsed();
    }
    let times = Times {
        start,
        loop_start,
        cpu0,
        cpu_loop0,
    };
    let summary = summarize(
        fs,
        &mut guard,
        reader.as_ref(),
        &signal,
        move_detection.moves,
        m,
        &n,
        &times,
    );
    emit(&DaemonEvent::Stop {
        summary: Box::new(summary.clone()),
    });
    Ok(summary)
}

/// The IRQs to balance, the move semantics they allow, the policy that runs with them and
/// whether the signal counts wake-ups; the Start event says so.
fn announce(
    cfg: &GuestConfig,
    first: &Sample,
    reader: Option<&ebpf::PreemptReader>,
    signal: &SignalInfo,
    emit: &mut impl FnMut(&DaemonEvent),
) -> Result<(Vec<Candidate>, crate::moves::MoveDetection, Policy, bool), Error> {
    let cands = discover(&cfg.fs, &first.ints, &cfg.irqs, !cfg.dry_run);
    let balanced: Vec<Candidate> = cands
        .iter()
        .filter(|c| c.movable || cfg.dry_run)
        .cloned()
        .collect();
    let move_detection = decide_moves(cfg.moves, &balanced);
    let policy = Policy::new(cfg.policy.with_moves(move_detection.moves))?;
    let wakes_known = reader.is_some_and(|r| r.wakes_unavailable.is_none());
    let plan = plan_sentence(
        move_detection.moves,
        reader.is_some(),
        wakes_known,
        &cfg.policy,
    );
    let scheduling = if cfg.realtime {
        set_fifo_1()
    } else {
        "normal (asked for)".to_string()
    };
    emit(&DaemonEvent::Start {
        candidates: cands.clone(),
        signal: signal.clone(),
        scheduling,
        moves: move_detection.clone(),
        plan,
    });
    Ok((cands, move_detection, policy, wakes_known))
}

/// The IRQs the daemon was told to balance exist.
fn check_irqs(cfg: &GuestConfig, first: &Sample) -> Result<(), Error> {
    for &irq in &cfg.irqs {
        if !first.ints.irqs.iter().any(|r| r.number == Some(irq)) {
            return Err(Error::Other(format!(
                "IRQ {irq} does not exist (not in {}/interrupts)",
                cfg.fs.root.display()
            )));
        }
    }
    Ok(())
}

/// The current holder of each balanced IRQ: its effective CPU (or the first CPU of its mask).
/// Only IRQs probed movable are balanced; a dry run probes nothing and balances
/// hypothetically, reporting its moves as `dry-run`. Each IRQ's mask is remembered for the
/// restore.
fn holders(cfg: &GuestConfig, cands: &[Candidate], guard: &mut AffinityGuard) -> Vec<(u32, u32)> {
    let fs = &cfg.fs;
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
    held
}

/// What the loop measures for the summary's latencies (eBPF signal).
#[derive(Default)]
struct Measured {
    lat: Latencies,
    pts: Vec<f64>,
    bound: Vec<f64>,
    ring: Vec<f64>,
    written: Vec<f64>,
    writes: Vec<f64>,
    episode_lens: Vec<f64>,
}

/// The loop's counts.
#[derive(Default)]
struct Counts {
    samples: u64,
    moves: u64,
    off_preempted: u64,
    failed: u64,
    step_total: Duration,
}

/// When the daemon started and began balancing, and its CPU ticks then.
struct Times {
    start: Instant,
    loop_start: Instant,
    cpu0: u64,
    cpu_loop0: u64,
}

/// One event of the eBPF program, read at `got`: the preempted set, the availability
/// episodes and the measures updated; the report of what was seen.
fn on_signal(
    e: ebpf::PreemptEvent,
    got: u64,
    m: &mut Measured,
    preempted: &mut std::collections::BTreeMap<u32, ebpf::PreemptEvent>,
    episodes: &mut Episodes,
    start: Instant,
) -> DaemonEvent {
    let ring_us = got.saturating_sub(e.ts_ns) as f64 / 1e3;
    m.ring.push(ring_us);
    let span_us = if e.preempted {
        m.lat.preemptions += 1;
        let b = e.ts_ns.saturating_sub(e.last_event_ns) as f64 / 1e3;
        m.bound.push(b);
        preempted.insert(e.cpu, e);
        episodes.preempted(e.cpu, e.ts_ns);
        b
    } else {
        m.lat.resumes += 1;
        let seen = preempted.remove(&e.cpu);
        let ep_ns = e.steal_ns.saturating_sub(e.steal_at_preempt_ns);
        episodes.resumed(e.cpu, e.ts_ns, ep_ns);
        let ep = ep_ns as f64 / 1e3;
        m.episode_lens.push(ep);
        // the episode began `ep` before the resume was seen; it was seen
        // preempted at `seen.ts_ns`: the gap is how late the program was
        if let (Some(p), Some(s0)) = (seen, e.episode_start_ns()) {
            m.pts.push(p.ts_ns.saturating_sub(s0) as f64 / 1e3);
        }
        ep
    };
    DaemonEvent::Preempt {
        t_s: start.elapsed().as_secs_f64(),
        cpu: e.cpu,
        preempted: e.preempted,
        observer: e.observer,
        ring_us,
        span_us,
    }
}

/// The loads of the last window, or before the first window since the start: a decision
/// between windows (on a preemption).
fn between_windows(
    cfg: &GuestConfig,
    prev: &mut Sample,
    last_window: &mut Option<Snapshot>,
    held: &[(u32, u32)],
    now_ns: u64,
) -> Result<Snapshot, Error> {
    let fs = &cfg.fs;
    match last_window {
        Some(w) => {
            let mut s = w.clone();
            s.now_ns = now_ns;
            for i in &mut s.irqs {
                if let Some(&(_, h)) = held.iter().find(|(q, _)| *q == i.irq) {
                    i.holder = h;
                }
            }
            Ok(s)
        }
        None => {
            let cur = Sample::take(fs)?;
            let s = observe(
                prev,
                &cur,
                held,
                cfg.steal_threshold,
                cfg.cpus.as_ref(),
                now_ns,
            );
            *prev = cur;
            *last_window = Some(s.clone());
            Ok(s)
        }
    }
}

/// Make (or, in a dry run, report) the decision's moves.
fn make_moves(
    cfg: &GuestConfig,
    decision: &Decision,
    preempted: &std::collections::BTreeMap<u32, ebpf::PreemptEvent>,
    held: &mut [(u32, u32)],
    ms: &mut Measured,
    n: &mut Counts,
    emit: &mut impl FnMut(&DaemonEvent),
) {
    let fs = &cfg.fs;
    for m in decision.moves() {
        let seen = preempted
            .get(&m.from)
            .filter(|_| m.reason == Reason::HolderOffline);
        let w0 = Instant::now();
        let (ok, outcome, effective, pending, error) = if cfg.dry_run {
            (false, "dry-run", None, false, None)
        } else {
            write_move(fs, m.irq, m.to)
        };
        let done = ebpf::monotonic_ns();
        let since_seen_us = seen
            .filter(|_| !cfg.dry_run)
            .map(|e| done.saturating_sub(e.ts_ns) as f64 / 1e3);
        if !cfg.dry_run {
            ms.writes.push(w0.elapsed().as_secs_f64() * 1e6);
        }
        if let Some(us) = since_seen_us {
            ms.written.push(us);
        }
        if ok {
            n.moves += 1;
            if m.reason == Reason::HolderOffline {
                n.off_preempted += 1;
            }
            if let Some(h) = held.iter_mut().find(|(i, _)| *i == m.irq) {
                h.1 = m.to;
            }
        } else if !cfg.dry_run {
            n.failed += 1;
        }
        emit(&DaemonEvent::Move {
            irq: m.irq,
            from: m.from,
            to: m.to,
            reason: m.reason,
            ok,
            outcome,
            effective,
            pending,
            error,
            since_seen_us,
        });
    }
}

/// The summary at the end: the IRQs restored, the daemon's own cost, the latencies.
#[allow(clippy::too_many_arguments)]
fn summarize(
    fs: &ProcFs,
    guard: &mut AffinityGuard,
    reader: Option<&ebpf::PreemptReader>,
    signal: &SignalInfo,
    move_kind: MoveKind,
    m: Measured,
    n: &Counts,
    t: &Times,
) -> Summary {
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
    let effective_restored = guard.effective.clone();
    let wall = t.loop_start.elapsed().as_secs_f64();
    let ticks = fs.self_cpu_ticks().unwrap_or(t.cpu_loop0);
    let cpu = ticks.saturating_sub(t.cpu_loop0) as f64 * NS_PER_TICK as f64 / 1e9;
    let startup_cpu = t.cpu_loop0.saturating_sub(t.cpu0) as f64 * NS_PER_TICK as f64 / 1e9;
    let latencies = reader.map(|r| Latencies {
        preempt_to_seen_us: Dist::of(&m.pts),
        preempt_to_seen_bound_us: Dist::of(&m.bound),
        seen_to_daemon_us: Dist::of(&m.ring),
        seen_to_written_us: Dist::of(&m.written),
        write_us: Dist::of(&m.writes),
        episode_us: Dist::of(&m.episode_lens),
        counters: r.counters(),
        ..m.lat.clone()
    });
    Summary {
        signal: signal.signal,
        move_kind,
        samples: n.samples,
        moves: n.moves,
        moves_off_preempted: n.off_preempted,
        failed_moves: n.failed,
        wall_s: wall,
        startup_cpu_s: startup_cpu,
        startup_s: t.loop_start.duration_since(t.start).as_secs_f64(),
        cpu_s: cpu,
        cpu_percent: if wall > 0.0 { 100.0 * cpu / wall } else { 0.0 },
        step_us_mean: if n.samples > 0 {
            n.step_total.as_secs_f64() * 1e6 / n.samples as f64
        } else {
            0.0
        },
        latencies,
        restored,
        effective_restored,
        restore_failures,
    }
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
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn live_pid_stat_parses() {
        let t = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
        assert!(parse_pid_stat_cpu(&t).is_some());
        let cpu = parse_pid_stat_processor(&t).unwrap();
        let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        assert!(cpu < n.max(1024), "{cpu}");
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

    /// A fake procfs whose `stat` a thread keeps rewriting: CPU0 has 50 % steal, CPU1 none.
    fn fake_proc(dir: &Path, irq: u32) -> std::thread::JoinHandle<()> {
        fake_proc_for(dir, irq, Duration::from_millis(900))
    }

    fn fake_proc_for(dir: &Path, irq: u32, run: Duration) -> std::thread::JoinHandle<()> {
        let irqdir = dir.join(format!("irq/{irq}"));
        std::fs::create_dir_all(&irqdir).unwrap();
        std::fs::write(irqdir.join("smp_affinity_list"), "0-1\n").unwrap();
        std::fs::write(irqdir.join("effective_affinity_list"), "0\n").unwrap();
        std::fs::write(
            dir.join("interrupts"),
            format!("           CPU0       CPU1\n {irq}:        100          0  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n"),
        )
        .unwrap();
        std::fs::write(dir.join("self"), "").ok();
        let stat = dir.join("stat");
        let write = move |t: u64| {
            let text = format!(
                "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 {t} 0 0 0 0 0 0 {} 0 0\ncpu1 {t} 0 0 0 0 0 0 0 0 0\n",
                t / 2
            );
            let tmp = stat.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, &stat).unwrap();
        };
        write(0);
        std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < run {
                // 100 ticks per second of wall time: 1 tick every 10 ms
                write(start.elapsed().as_millis() as u64 / 10);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    }

    fn run_fake(dry_run: bool) -> (Vec<DaemonEvent>, Summary, tempfile::TempDir) {
        run_fake_with(dry_run, MovesChoice::Direct, Duration::from_millis(700))
    }

    fn run_fake_with(
        dry_run: bool,
        moves: MovesChoice,
        run: Duration,
    ) -> (Vec<DaemonEvent>, Summary, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let writer = fake_proc_for(dir.path(), 38, run + Duration::from_millis(200));
        let cfg = GuestConfig {
            fs: ProcFs {
                root: dir.path().to_path_buf(),
                sys: dir.path().join("sys"),
            },
            interval: Some(Duration::from_millis(100)),
            irqs: vec![38],
            dry_run,
            duration: Some(run),
            signal: SignalChoice::Procstat,
            moves,
            ..GuestConfig::default()
        };
        let stop = AtomicBool::new(false);
        let mut evs = Vec::new();
        let summary = run_guest(&cfg, &stop, |e| evs.push(e.clone())).unwrap();
        writer.join().unwrap();
        (evs, summary, dir)
    }

    #[test]
    fn procstat_daemon_moves_off_a_stolen_vcpu_and_restores_the_mask() {
        let (evs, summary, dir) = run_fake(false);
        let DaemonEvent::Start {
            candidates, signal, ..
        } = &evs[0]
        else {
            panic!("{:?}", evs[0])
        };
        assert_eq!(signal.signal, SIGNAL_PROCSTAT);
        assert!(candidates[0].movable, "{candidates:?}");
        let moved: Vec<_> = evs
            .iter()
            .filter_map(|e| match e {
                DaemonEvent::Move {
                    irq,
                    from,
                    to,
                    reason,
                    ok,
                    outcome,
                    ..
                } => Some((*irq, *from, *to, *reason, *ok, *outcome)),
                _ => None,
            })
            .collect();
        // CPU0 has 50 % steal: the IRQ leaves it; the effective file does not follow in a
        // fake procfs, so the move is reported pending
        assert_eq!(
            moved.first(),
            Some(&(38, 0, 1, Reason::HolderOffline, true, "pending"))
        );
        assert_eq!(summary.moves_off_preempted, summary.moves);
        assert_eq!(summary.restore_failures, 0);
        let mask = std::fs::read_to_string(dir.path().join("irq/38/smp_affinity_list")).unwrap();
        assert_eq!(mask.trim(), "0-1");
        assert!(summary.latencies.is_none());
    }

    fn moves_of(evs: &[DaemonEvent]) -> Vec<(u32, u32, u32, Reason, bool, &'static str)> {
        evs.iter()
            .filter_map(|e| match e {
                DaemonEvent::Move {
                    irq,
                    from,
                    to,
                    reason,
                    ok,
                    outcome,
                    ..
                } => Some((*irq, *from, *to, *reason, *ok, *outcome)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn deferred_moves_are_detected_from_the_chip_and_the_irq_moves_by_availability() {
        // the fake IRQ's chip is an x86 MSI without remapping (PCI-MSIX-...): on x86 the
        // daemon detects deferred moves, does not chase CPU0's steal window by window, and
        // moves the IRQ once its 50 % steal has been seen over a second
        let (evs, summary, dir) =
            run_fake_with(false, MovesChoice::Auto, Duration::from_millis(1600));
        let DaemonEvent::Start { moves, plan, .. } = &evs[0] else {
            panic!("{:?}", evs[0])
        };
        let want = if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
            MoveKind::Deferred
        } else {
            MoveKind::Direct
        };
        assert_eq!(moves.moves, want, "{}", moves.reason);
        assert_eq!(summary.move_kind, want);
        if want == MoveKind::Deferred {
            assert!(
                moves.reason.contains("PCI-MSIX-0000:00:03.0"),
                "{}",
                moves.reason
            );
            assert!(
                plan.contains("never moved on a single preemption"),
                "{plan}"
            );
            let m = moves_of(&evs);
            assert_eq!(
                m,
                vec![(38, 0, 1, Reason::HolderStarved, true, "pending")],
                "one move, by availability, after a second of samples"
            );
            // the decision that moved it saw the window's steal
            let seen = evs.iter().any(|e| match e {
                DaemonEvent::Decision { cpus, .. } => cpus
                    .iter()
                    .any(|c| c.cpu == 0 && c.avail_steal.is_some_and(|s| s > 0.3)),
                _ => false,
            });
            assert!(seen);
        }
        let mask = std::fs::read_to_string(dir.path().join("irq/38/smp_affinity_list")).unwrap();
        assert_eq!(mask.trim(), "0-1");
    }

    #[test]
    fn the_plan_says_how_busy_queues_are_placed_on_a_direct_guest() {
        let p = plan_sentence(MoveKind::Direct, true, true, &PolicyConfig::extended());
        assert!(p.contains("a busy queue (over 2 % of a CPU) stays"), "{p}");
        let paper_like = PolicyConfig {
            chase_max_load: 0.0,
            ..PolicyConfig::extended()
        };
        let p = plan_sentence(MoveKind::Direct, true, true, &paper_like);
        assert!(!p.contains("busy queue"), "{p}");
        let p = plan_sentence(MoveKind::Deferred, true, true, &PolicyConfig::extended());
        assert!(p.contains("never moved on a single preemption"), "{p}");
    }

    #[test]
    fn dry_run_probes_and_writes_nothing_and_reports_no_move_as_done() {
        let (evs, summary, dir) = run_fake(true);
        let DaemonEvent::Start { candidates, .. } = &evs[0] else {
            panic!()
        };
        assert!(!candidates[0].movable);
        assert_eq!(candidates[0].note, "not probed");
        let moves: Vec<_> = evs
            .iter()
            .filter_map(|e| match e {
                DaemonEvent::Move { ok, outcome, .. } => Some((*ok, *outcome)),
                _ => None,
            })
            .collect();
        assert!(!moves.is_empty(), "the policy should want to move IRQ 38");
        assert!(moves.iter().all(|&m| m == (false, "dry-run")), "{moves:?}");
        assert_eq!((summary.moves, summary.failed_moves), (0, 0));
        assert!(summary.restored.is_empty());
        // untouched, not even rewritten
        let mask = std::fs::read_to_string(dir.path().join("irq/38/smp_affinity_list")).unwrap();
        assert_eq!(mask, "0-1\n");
    }

    #[test]
    fn an_explicit_irq_that_does_not_exist_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let writer = fake_proc(dir.path(), 38);
        let cfg = GuestConfig {
            fs: ProcFs {
                root: dir.path().to_path_buf(),
                sys: dir.path().join("sys"),
            },
            irqs: vec![99999],
            signal: SignalChoice::Procstat,
            ..GuestConfig::default()
        };
        let e = run_guest(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
        assert!(e.to_string().contains("IRQ 99999 does not exist"), "{e}");
        writer.join().unwrap();
    }

    #[test]
    fn dist_percentiles() {
        let d = Dist::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((d.n, d.p50, d.max), (5, Some(3.0), Some(5.0)));
        assert_eq!(Dist::of(&[]).p50, None);
    }
}
