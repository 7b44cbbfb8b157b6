//! `vmtune irq boost`: vBalance's host half on KVM. When an interrupt is accepted for a vCPU
//! whose thread waits for a CPU, run that thread (SCHED_FIFO) until the vCPU halts or a budget
//! runs out, within a per-VM share of a CPU. Every vCPU thread it may raise is journaled with
//! its scheduling state before anything changes; stopping (SIGINT, SIGTERM, --duration) puts
//! every thread back, and after a crash or SIGKILL `vmtune restore --journal FILE` does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use apply::journal::{Journal, State};
use apply::sched::{self, Policy, SchedState};
use apply::step::Target;
use irqbal::wait::boost::{BoostAction, BoostConfig, BoostOn, Booster, LowerWhy};
use irqbal::wait::{tracer, vms, WaitEvent};
use serde::Serialize;

use super::common::{print_json, start_journal};

/// Where the agent's journal goes by default (beside `apply`'s).
pub const DEFAULT_BOOST_JOURNAL: &str = "/run/vmtune/irq-boost.journal";

pub const BOOST_HELP: &str = "\
On a KVM host, an interrupt accepted for a vCPU whose thread is runnable but has no CPU waits
until the host scheduler runs that thread again (`vmtune irq wait` measures it). The agent
watches the same tracepoints and, for such a vCPU, makes its thread SCHED_FIFO (--priority)
until the vCPU halts (its thread goes to sleep) or --budget-us runs out. It cannot see the
guest finish its interrupt work: a guest that computes on keeps the boost for the whole
budget (in the simulator's fig6, which drives this agent's own policy, that gives 1.5x / 1.3x
static's TCP / UDP, where ending at the work's end would give 2.4x / 1.7x). Boosts that take a
CPU from another tenant together take at most --max-share of a CPU over --window-ms, so a
co-tenant keeps its time; a boost over the VM's own vCPUs or an idle CPU is not counted. The agent itself runs SCHED_FIFO one above.

Every vCPU thread it may raise is written to the journal, with its policy, nice, priority and
EEVDF slice, before anything changes (VMs that start later: before their first boost). On
SIGINT, SIGTERM or --duration it lowers every thread and restores the journal; after a crash
or SIGKILL run `vmtune restore --journal FILE`.

Measured on the development machine (a KVM guest itself), accept → raise decided: p50 111-120
µs, p99 176-270 µs (the summary's reaction_us); the simulator's host-boost uses 115 / 270 µs.

Examples:
  vmtune irq wait --duration 30                   # first: do interrupts wait for vCPUs here?
  vmtune irq boost --duration 600
  vmtune irq boost --pid $(pidof qemu-system-x86_64) --max-share 0.02 --json";

/// Run the vCPU an interrupt waits for (host, eBPF + SCHED_FIFO, journaled).
#[derive(clap::Args, Debug)]
#[command(after_help = BOOST_HELP)]
pub struct BoostArgs {
    /// Stop after this many seconds (default: run until SIGTERM/SIGINT).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Only this VM process (its pid).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Which waiting vCPUs to raise: `preempted` (runnable, no CPU: vBalance's case),
    /// `waiting` (also vCPUs woken from halt), `any` (every accept outside the guest, states
    /// the program has not seen included).
    #[arg(long, value_enum, default_value_t = OnArg::Preempted)]
    pub on: OnArg,
    /// Longest one boost lasts, µs.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=1_000_000))]
    pub budget_us: u64,
    /// Share of one CPU each VM's boosts may take together (0 < share ≤ 1).
    #[arg(long, default_value_t = 0.05)]
    pub max_share: f64,
    /// Window the share is kept over, ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub window_ms: u64,
    /// SCHED_FIFO priority of a raised vCPU thread (the agent runs one above).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=98))]
    pub priority: u32,
    /// The journal of the threads it may change.
    #[arg(long, default_value = DEFAULT_BOOST_JOURNAL)]
    pub journal: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnArg {
    Preempted,
    Waiting,
    Any,
}

/// A vCPU thread the agent may raise, and how to put it back.
struct Known {
    previous: SchedState,
}

/// The agent's summary.
#[derive(Debug, Serialize)]
struct Summary {
    seconds: f64,
    vms: Vec<vms::VmProc>,
    threads_journaled: usize,
    stats: irqbal::wait::boost::BoostStats,
    /// Accept → the agent's decision to raise the thread, µs (its reaction: the event through
    /// the ring buffer and the agent's wake-up; the `sched_setattr` follows, and the
    /// scheduler's switch).
    reaction_us: Option<Reaction>,
    /// Lost ring-buffer events (boosts may have been missed).
    lost: u64,
    /// Raises that failed (the thread exited, or the kernel refused), with the last reason.
    failed: u64,
    last_failure: Option<String>,
    restored: bool,
    journal: PathBuf,
    /// Where the restored journal was kept.
    archived_as: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Reaction {
    count: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

fn reaction(mut v: Vec<f64>) -> Option<Reaction> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Reaction {
        count: v.len(),
        p50: at(0.50),
        p99: at(0.99),
        max: v[v.len() - 1],
    })
}

/// vCPU index → thread id of a VM, from QEMU's thread names (`CPU N/KVM`).
fn vcpu_threads(pid: u32) -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if let Some(idx) = irqbal::host::parse_vcpu_comm(comm.trim()) {
            out.insert(idx, tid);
        }
    }
    out
}

/// `(vm, vCPU index) → thread` of every VM, from the thread names.
fn named_vcpus(vms: &[vms::VmProc]) -> BTreeMap<(u32, u32), u32> {
    vms.iter()
        .flat_map(|v| {
            vcpu_threads(v.pid)
                .into_iter()
                .map(move |(i, t)| ((v.pid, i), t))
        })
        .collect()
}

fn start_time(pid: u32, tid: u32) -> Option<u64> {
    apply::proc::start_time(Path::new("/proc"), pid as i32, tid as i32)
}

fn raised_state(priority: u32) -> SchedState {
    SchedState {
        policy: Policy::Fifo,
        nice: 0,
        priority,
        slice_ns: 0,
        custom_slice: false,
    }
}

struct Agent {
    journal: Journal,
    known: BTreeMap<u32, Known>,
    base_slice: Option<u64>,
    raised: SchedState,
}

impl Agent {
    /// Journal every vCPU thread of `vm` not journaled yet.
    fn journal_vm(&mut self, vm: &vms::VmProc) -> anyhow::Result<()> {
        for (idx, tid) in vcpu_threads(vm.pid) {
            if self.known.contains_key(&tid) {
                continue;
            }
            let Some(start) = start_time(vm.pid, tid) else {
                continue;
            };
            let Ok(previous) = sched::get(tid as i32, self.base_slice) else {
                continue;
            };
            let target = Target::ThreadSched(apply::step::ThreadSched {
                pid: vm.pid as i32,
                tid: tid as i32,
                start_time: start,
                role: format!("vcpu {idx} (irq boost)"),
                proc_root: PathBuf::from("/proc"),
            });
            let step = self
                .journal
                .intend(&target, &previous.to_value(), &self.raised.to_value())
                .context("writing the journal")?;
            self.journal
                .outcome(
                    step,
                    State::Done,
                    Some("raised while an interrupt waits".into()),
                )
                .context("writing the journal")?;
            self.known.insert(tid, Known { previous });
        }
        Ok(())
    }

    fn set(&mut self, tid: u32, raise: bool) -> Result<(), String> {
        let Some(k) = self.known.get(&tid) else {
            return Err(format!("thread {tid} is not journaled"));
        };
        let st = if raise { self.raised } else { k.previous };
        sched::set(tid as i32, &st).map_err(|e| format!("thread {tid}: {e}"))
    }
}

/// Make this thread SCHED_FIFO `prio` (best effort), returning what it was.
fn raise_self(prio: u32) -> Option<SchedState> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let before = sched::get(me, sched::base_slice_ns()).ok()?;
    sched::set(me, &raised_state(prio)).ok()?;
    Some(before)
}

/// The summary as text.
fn summary_text(sum: &Summary, a: &BoostArgs) -> String {
    use std::fmt::Write as _;
    let s = &sum.stats;
    let mut out = format!(
        "irq boost: {:.1} s, {} vCPU thread(s) journaled; {} boosts ({} ended by a halt, {} by \
         the {} µs budget), {} refused by the {:.0} % share, {} without a known thread\n",
        sum.seconds,
        sum.threads_journaled,
        s.raised,
        s.lowered_halted,
        s.lowered_budget,
        a.budget_us,
        s.refused_share,
        a.max_share * 100.0,
        s.no_thread
    );
    for (vm, ns) in &s.boosted_ns {
        let _ = writeln!(
            out,
            "  VM pid {vm}: boosted {:.1} ms in all",
            *ns as f64 / 1e6
        );
    }
    if let Some(r) = &sum.reaction_us {
        let _ = writeln!(
            out,
            "  reaction (accept → raise decided): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs over {}",
            r.p50, r.p99, r.max, r.count
        );
    }
    if sum.lost > 0 {
        let _ = writeln!(
            out,
            "  PARTIAL: {} events lost (ring buffer full)",
            sum.lost
        );
    }
    if let Some(f) = &sum.last_failure {
        let _ = writeln!(out, "  {} raise/lower(s) failed, last: {f}", sum.failed);
    }
    if sum.restored {
        let _ = writeln!(
            out,
            "  every thread restored{}",
            sum.archived_as.as_ref().map_or(String::new(), |p| format!(
                "; journal archived as {}",
                p.display()
            ))
        );
    }
    out
}

/// The agent's policy from the flags, which it checks.
fn config(a: &BoostArgs) -> anyhow::Result<BoostConfig> {
    if !(a.max_share.is_finite() && a.max_share > 0.0 && a.max_share <= 1.0) {
        bail!("--max-share must be in (0, 1]");
    }
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0 && d <= 31_536_000.0) {
            bail!("--duration must be a positive number of seconds");
        }
    }
    let cfg = BoostConfig {
        budget_ns: a.budget_us * 1000,
        max_share: a.max_share,
        window_ns: a.window_ms * 1_000_000,
        on: match a.on {
            OnArg::Preempted => BoostOn::Preempted,
            OnArg::Waiting => BoostOn::Waiting,
            OnArg::Any => BoostOn::Any,
        },
        ..BoostConfig::default()
    };
    Ok(cfg)
}

/// What the agent starts on, said on stderr: the VMs, the threads journaled, its own priority.
fn announce(a: &BoostArgs, seen: &[vms::VmProc], journaled: usize, own: bool) {
    eprintln!(
        "boosting vCPUs of {} VM(s) ({} thread(s) journaled in {}){}: {}",
        seen.len(),
        journaled,
        a.journal.display(),
        if own {
            format!(", agent at SCHED_FIFO {}", (a.priority + 1).min(99))
        } else {
            ", agent at normal priority (SCHED_FIFO refused)".to_string()
        },
        if seen.is_empty() {
            "none yet, watching for VMs".to_string()
        } else {
            seen.iter()
                .map(|v| format!("{} (pid {})", v.name, v.pid))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
}

/// Raises that failed (the thread exited, or the kernel refused), with the last reason.
#[derive(Default)]
struct Failures {
    count: u64,
    last: Option<String>,
}

/// One raise or lower carried out (a thread the scan has not journaled yet: its VM journaled
/// first); the tracer told which vCPUs are boosted. Only a journal error is an error.
fn perform(
    agent: &mut Agent,
    tr: &mut tracer::WaitTracer,
    seen: &[vms::VmProc],
    act: BoostAction,
    failures: &mut Failures,
) -> anyhow::Result<()> {
    let (vm, vcpu, tid, raise) = match act {
        BoostAction::Raise { vm, vcpu, tid } => (vm, vcpu, tid, true),
        BoostAction::Lower { vm, vcpu, tid, .. } => (vm, vcpu, tid, false),
    };
    if raise && !agent.known.contains_key(&tid) {
        if let Some(v) = seen.iter().find(|v| v.pid == vm) {
            agent.journal_vm(v)?;
        }
    }
    match agent.set(tid, raise) {
        Ok(()) => {
            let _ = tr.set_boosted(vm, vcpu, raise);
        }
        Err(why) => {
            failures.count += 1;
            failures.last = Some(why);
        }
    }
    Ok(())
}

pub fn run(a: BoostArgs) -> anyhow::Result<ExitCode> {
    let cfg = config(&a)?;
    let mut tr = tracer::WaitTracer::open().map_err(|e| anyhow!("irq boost: {e}"))?;
    let (lock, journal) = start_journal(&a.journal, a.pid.map(|p| p as i32))?;
    let mut agent = Agent {
        journal,
        known: BTreeMap::new(),
        base_slice: sched::base_slice_ns(),
        raised: raised_state(a.priority),
    };
    let mut seen = tr.refresh(a.pid).map_err(|e| anyhow!("irq boost: {e}"))?;
    for vm in &seen {
        agent.journal_vm(vm)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }
    let own = raise_self((a.priority + 1).min(99));
    announce(&a, &seen, agent.known.len(), own.is_some());
    let start = Instant::now();
    let deadline = a.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut booster = Booster::new(cfg);
    let mut reactions = Vec::new();
    let mut failures = Failures::default();
    let mut next_scan = start + Duration::from_secs(1);
    let mut err: Option<anyhow::Error> = None;
    // (vm, vcpu index) → thread, from the names
    let mut names = named_vcpus(&seen);
    while !stop.load(Ordering::Relaxed) && err.is_none() {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        let mono = tracer::monotonic_ns();
        let mut wait = Duration::from_millis(100);
        if let Some(d) = booster.next_deadline() {
            wait = wait.min(Duration::from_nanos(d.saturating_sub(mono)));
        }
        if let Some(d) = deadline {
            wait = wait.min(d - now);
        }
        let mut events = Vec::new();
        tr.poll(wait, |e| events.push(e));
        let mut actions = Vec::new();
        for e in &events {
            let now_ns = tracer::monotonic_ns();
            let acts = booster.on_event(e, now_ns, |vm, vcpu| names.get(&(vm, vcpu)).copied());
            for act in &acts {
                if let (BoostAction::Raise { .. }, WaitEvent::Accept { ts_ns, .. }) = (act, e) {
                    reactions.push(tracer::monotonic_ns().saturating_sub(*ts_ns) as f64 / 1000.0);
                }
            }
            actions.extend(acts);
        }
        actions.extend(booster.on_tick(tracer::monotonic_ns()));
        for act in actions {
            if let Err(e) = perform(&mut agent, &mut tr, &seen, act, &mut failures) {
                err = Some(e);
                break;
            }
        }
        if Instant::now() >= next_scan {
            match tr.refresh(a.pid) {
                Ok(now) => seen = now,
                Err(e) => err = Some(anyhow!("irq boost: {e}")),
            }
            for vm in &seen {
                if let Err(e) = agent.journal_vm(vm) {
                    err = Some(e);
                }
            }
            names = named_vcpus(&seen);
            next_scan += Duration::from_secs(1);
        }
    }
    // lower everything, then restore the journal (which puts every thread back exactly and
    // archives it)
    for act in booster.lower_all(tracer::monotonic_ns()) {
        if let BoostAction::Lower {
            tid,
            why: LowerWhy::Stop,
            ..
        } = act
        {
            let _ = agent.set(tid, false);
        }
    }
    if let Some(before) = own {
        // SAFETY: gettid has no preconditions.
        let _ = sched::set(unsafe { libc::gettid() }, &before);
    }
    let threads_journaled = agent.known.len();
    drop(agent);
    drop(lock);
    let rep = apply::engine::restore(&a.journal, Duration::from_secs(10))
        .map_err(|e| anyhow!("restoring {}: {e}", a.journal.display()))?;
    let summary = Summary {
        seconds: start.elapsed().as_secs_f64(),
        vms: seen,
        threads_journaled,
        stats: booster.stats().clone(),
        reaction_us: reaction(reactions),
        lost: tr.counters().lost,
        failed: failures.count,
        last_failure: failures.last,
        restored: rep.failed == 0,
        journal: a.journal.clone(),
        archived_as: rep.archived_as.clone(),
    };
    if a.json {
        print_json(&summary)?;
    } else {
        print!("{}", summary_text(&summary, &a));
    }
    if let Some(e) = err {
        return Err(e);
    }
    if rep.failed > 0 {
        bail!(
            "{} thread(s) could not be restored: the journal is kept at {}",
            rep.failed,
            a.journal.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
