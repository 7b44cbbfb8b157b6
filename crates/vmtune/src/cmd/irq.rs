//! `vmtune irq`: show interrupt load and what the vBalance policy would do; run the balancer.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use irqbal::daemon::{self, DaemonEvent, GuestConfig, MovesChoice, ProcFs, Sample, SignalChoice};
use irqbal::host;
use irqbal::policy::{Mapping, Policy, PolicyConfig};
use topo::CpuSet;

use super::common::{print_json, start_journal};

/// Interrupts of this machine: show per-IRQ and per-CPU load and the vBalance decision, or run
/// the vBalance-style balancer.
///
/// In a KVM guest (`balance --mode guest`), interrupts bound to a vCPU the host has preempted
/// wait until that vCPU runs again. The balancer learns which vCPUs are preempted from KVM's
/// exact per-vCPU preempted flag (an eBPF program; where that is unavailable, /proc/stat steal,
/// saying why), reads irq/softirq time and per-IRQ counts, and moves movable (non-managed)
/// MSI/MSI-X vectors — virtio-net queues — to running, less loaded vCPUs (vBalance, threshold
/// max/min = 1.5). On a host (`--mode host --pid QEMU_PID`) it keeps each VFIO vector on the
/// physical CPU where its target vCPU thread runs. Every affinity it changes is restored on
/// exit, including SIGTERM and SIGINT.
#[derive(clap::Args, Debug)]
#[command(after_help = IRQ_HELP)]
pub struct Args {
    #[command(subcommand)]
    pub command: IrqCommand,
}

const IRQ_HELP: &str = "\
In a KVM guest, an interrupt bound to a vCPU the host has preempted waits until that vCPU runs
again. `irq balance --mode guest` learns which vCPUs are preempted from KVM's exact per-vCPU
preempted flag, read by an eBPF program at every guest tick and context switch and pushed
through a ring buffer (root, x86 KVM guest with steal time, kernel BTF); where that is
unavailable it falls back to /proc/stat steal over each window, and says which it uses and why.
It moves movable MSI/MSI-X vectors (virtio-net queues; not the managed virtio-blk/scsi ones)
off preempted vCPUs and balances them (vBalance, max/min > 1.5, loads under 2 % of a CPU count
as 2 %). Without interrupt remapping (no vIOMMU: chips named PCI-MSI*, not IR-PCI-MSI*) x86
applies a move only at the IRQ's next interrupt, which still goes to the old vCPU; there the
daemon does not follow single preemptions (it would hand stream IRQs to just-preempted vCPUs)
but places each IRQ by the vCPUs' recent availability (--moves auto detects this and says so
at start-up).
`--mode host --pid QEMU_PID` keeps each VFIO vector on the host CPU where its target vCPU
thread runs. Every affinity changed is restored on exit, SIGTERM or SIGINT.

Examples:
  vmtune irq show
  vmtune irq balance --duration 60
  vmtune irq balance --mode host --pid $(pidof qemu-system-x86_64) --json
  vmtune irq wait --duration 30                   # on the host: do interrupts wait for vCPUs?
  vmtune irq boost                                # on the host: run the vCPU they wait for";

impl Args {
    /// Whether the command changes host state it must put back (the balancer moves IRQs).
    pub fn changes_host(&self) -> bool {
        matches!(self.command, IrqCommand::Balance(_) | IrqCommand::Boost(_))
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum IrqCommand {
    /// Per-CPU steal and interrupt load, per-IRQ rates and holders, and what the vBalance
    /// policy would do now (measured over --interval).
    Show(ShowArgs),
    /// Run the balancer until SIGTERM/SIGINT (or --duration).
    Balance(BalanceArgs),
    /// Host: how long interrupts wait for their vCPU to enter the guest, per VM, vCPU and the
    /// vCPU's state (preempted, halted, in the host): whether vBalance's host half is worth
    /// running here (eBPF).
    Wait(super::irq_wait::WaitArgs),
    /// Host: run the vCPU an interrupt waits for (SCHED_FIFO until it halts or a budget runs
    /// out, within a per-VM share of a CPU): vBalance's host half. Journaled; restored on
    /// exit, or by `vmtune restore --journal FILE` after a crash.
    Boost(Box<super::irq_boost::BoostArgs>),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Measurement window in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Test whether each balanced IRQ is movable by writing its current mask back (a no-op
    /// for movable IRQs; managed ones refuse). Without it, movability is not probed.
    #[arg(long)]
    pub probe: bool,
    /// Show all numbered IRQs, not only those that took interrupts in the window.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Imbalance threshold: move when max/min of online vCPU loads exceeds it (paper: 1.5).
    #[arg(long, default_value_t = 1.5)]
    pub threshold: f64,
    /// `many-to-many` (each queue placed on its own, with hysteresis and a rate limit) or
    /// `many-to-one` (the paper: all balanced IRQs move together, no hysteresis).
    #[arg(long, default_value = "many-to-many", value_parser = parse_mapping)]
    pub mapping: Mapping,
    /// `/proc/stat` signal: a vCPU whose steal time over the window exceeds this fraction
    /// counts as preempted.
    #[arg(long, default_value_t = 0.10)]
    pub steal_threshold: f64,
    /// Loads (fraction of a CPU in irq + softirq) below this count as this when comparing
    /// max/min, so near-idle vCPUs do not look infinitely imbalanced (0 = the paper).
    #[arg(long, default_value_t = irqbal::policy::DEFAULT_LOAD_FLOOR)]
    pub load_floor: f64,
    /// Preemption signal: `auto` (the eBPF preempted flag where it works, else /proc/stat
    /// steal), `ebpf` (or fail), `procstat`.
    #[arg(long, value_enum, default_value_t = SignalArg::Auto)]
    pub signal: SignalArg,
    /// Whether affinity writes take effect at once or at the IRQ's next interrupt on the old
    /// CPU: `auto` (from the IRQs' chips: x86 MSI without interrupt remapping is deferred),
    /// `deferred` (place IRQs by availability, never follow single preemptions), `direct`
    /// (light IRQs follow preemptions at once; busy queues, see --chase-max-load, are placed
    /// by availability).
    #[arg(long, value_enum, default_value_t = MovesArg::Auto)]
    pub moves: MovesArg,
    /// Direct moves, many-to-many: an IRQ with at least this load (fraction of a CPU) is a
    /// busy queue, whose
    /// raised interrupt stays on a preempted vCPU whatever is written: it is placed by
    /// availability instead of following preemptions (0 = every IRQ follows them, as in the
    /// paper).
    #[arg(long, default_value_t = irqbal::policy::DEFAULT_CHASE_MAX_LOAD)]
    pub chase_max_load: f64,
    /// Balance exactly these IRQ numbers (repeatable). Default: virtio-net / NIC queue vectors.
    #[arg(long = "irq")]
    pub irqs: Vec<u32>,
    /// Only these CPUs may receive balanced IRQs (list: `0-3,8`).
    #[arg(long)]
    pub cpus: Option<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MovesArg {
    Auto,
    Deferred,
    Direct,
}

impl MovesArg {
    fn choice(self) -> MovesChoice {
        match self {
            MovesArg::Auto => MovesChoice::Auto,
            MovesArg::Deferred => MovesChoice::Deferred,
            MovesArg::Direct => MovesChoice::Direct,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalArg {
    Auto,
    Ebpf,
    Procstat,
}

impl SignalArg {
    fn choice(self) -> SignalChoice {
        match self {
            SignalArg::Auto => SignalChoice::Auto,
            SignalArg::Ebpf => SignalChoice::Ebpf,
            SignalArg::Procstat => SignalChoice::Procstat,
        }
    }
}

fn parse_mapping(s: &str) -> Result<Mapping, String> {
    match s {
        "many-to-many" => Ok(Mapping::ManyToMany),
        "many-to-one" | "paper" => Ok(Mapping::ManyToOne),
        _ => Err(format!("unknown mapping {s:?} (many-to-many, many-to-one)")),
    }
}

impl PolicyArgs {
    fn config(&self) -> anyhow::Result<PolicyConfig> {
        let mut c = match self.mapping {
            Mapping::ManyToMany => PolicyConfig::extended(),
            Mapping::ManyToOne => PolicyConfig::paper(),
        };
        c.threshold = self.threshold;
        c.load_floor = self.load_floor;
        c.chase_max_load = self.chase_max_load;
        c.validate()?;
        if !(self.steal_threshold.is_finite() && (0.0..=1.0).contains(&self.steal_threshold)) {
            anyhow::bail!("--steal-threshold must be between 0 and 1");
        }
        Ok(c)
    }

    /// Every `--irq N` must be an IRQ of this machine.
    fn check_irqs(&self, table: &topo::InterruptTable) -> anyhow::Result<()> {
        for &n in &self.irqs {
            if !table.irqs.iter().any(|r| r.number == Some(n)) {
                anyhow::bail!("IRQ {n} does not exist (not in /proc/interrupts)");
            }
        }
        Ok(())
    }

    fn cpuset(&self) -> anyhow::Result<Option<CpuSet>> {
        self.cpus
            .as_deref()
            .map(|s| CpuSet::parse_list(s).with_context(|| format!("--cpus {s:?}")))
            .transpose()
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Inside a KVM guest: move virtio-net queue IRQs off preempted vCPUs.
    Guest,
    /// On the host: keep VFIO vectors on the CPU where their target vCPU thread runs.
    Host,
}

#[derive(clap::Args, Debug)]
pub struct BalanceArgs {
    #[arg(long, value_enum, default_value_t = Mode::Guest)]
    pub mode: Mode,
    /// Load window in milliseconds (steal time has 10 ms resolution). Default: 1000 with the
    /// eBPF signal (which wakes the daemon on each preemption by itself), 200 with /proc/stat.
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// Stop after this many seconds (default: run until SIGTERM/SIGINT).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Decide and report, but write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Host mode: the QEMU process whose `CPU N/KVM` threads to follow.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Host mode: the vCPU an IRQ targets, `IRQ=VCPU` (repeatable). Default: vector k of a
    /// device targets vCPU k mod vCPUs.
    #[arg(long = "target", value_parser = parse_target)]
    pub targets: Vec<(u32, u32)>,
    /// Print one JSON object per event (start, decision, move, stop) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Text mode: also print decisions that move nothing, and every preemption seen.
    #[arg(long, short)]
    pub verbose: bool,
    /// Guest mode: run the daemon at normal priority instead of SCHED_FIFO 1 (which lets a
    /// preemption wake-up run at once on a busy vCPU).
    #[arg(long)]
    pub no_realtime: bool,
    /// Guest mode: the journal of every IRQ it may move, each written with its affinity
    /// before the first move. The daemon puts them back on exit (SIGTERM, SIGINT,
    /// --duration) and archives the journal; after a crash or SIGKILL, `vmtune restore
    /// --journal FILE` does (the systemd unit runs it as ExecStopPost). Not with --dry-run
    #[arg(long, value_name = "FILE", default_value = DEFAULT_BALANCE_JOURNAL)]
    pub journal: std::path::PathBuf,
}

/// Where the guest balancer's journal goes by default (beside `apply`'s).
pub const DEFAULT_BALANCE_JOURNAL: &str = "/run/vmtune/irq-balance.journal";

fn parse_target(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected IRQ=VCPU"))?;
    Ok((
        a.trim()
            .parse()
            .map_err(|_| format!("{s:?}: bad IRQ number"))?,
        b.trim()
            .parse()
            .map_err(|_| format!("{s:?}: bad vCPU number"))?,
    ))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        IrqCommand::Show(a) => show(a),
        IrqCommand::Balance(a) => match a.mode {
            Mode::Guest => balance_guest(a),
            Mode::Host => balance_host(a),
        },
        IrqCommand::Wait(a) => super::irq_wait::run(a),
        IrqCommand::Boost(a) => super::irq_boost::run(*a),
    }
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval > 0.0 && a.interval <= 3600.0) {
        anyhow::bail!("--interval must be between 0 and 3600 seconds");
    }
    let cfg = a.policy.config()?;
    let eligible = a.policy.cpuset()?;
    let fs = ProcFs::default();
    a.policy.check_irqs(&fs.interrupt_counts()?)?;
    let (mut reader, signal) =
        daemon::open_signal(a.policy.signal.choice(), Duration::from_micros(100))?;
    let first = Sample::take_full(&fs)?;
    let cands = daemon::discover(&fs, &first.ints, &a.policy.irqs, a.probe);
    let moves = daemon::decide_moves(a.policy.moves.choice(), &cands);
    // availability over the window: preemption episodes and wake-ups (eBPF), steal, idle
    let window_ns = (a.interval * 1e9) as u64;
    let mono0 = irqbal::ebpf::monotonic_ns();
    let mut episodes = irqbal::avail::Episodes::new(window_ns, mono0);
    let mut counters = irqbal::avail::CounterWindow::new(window_ns);
    let wakes = |r: &Option<irqbal::ebpf::PreemptReader>| r.as_ref().and_then(|r| r.wakes());
    counters.push(
        mono0,
        daemon::counters_of(&first.stat, wakes(&reader).as_deref()),
    );
    let (preemptions, preempted_now) = watch(reader.as_mut(), a.interval, &mut episodes);
    let cur = Sample::take_full(&fs)?;
    let mono1 = irqbal::ebpf::monotonic_ns();
    counters.push(
        mono1,
        daemon::counters_of(&cur.stat, wakes(&reader).as_deref()),
    );
    let dt = cur
        .at
        .saturating_duration_since(first.at)
        .as_secs_f64()
        .max(1e-9);
    let mut cpus = daemon::cpu_windows(&first, &cur, a.policy.steal_threshold, eligible.as_ref());
    let ebpf = reader.is_some();
    if ebpf {
        for c in &mut cpus {
            c.online = !preempted_now.contains(&c.cpu);
        }
    }
    let irqs = irq_rows(&first, &cur, &cands, &a, dt);
    let mut snap = daemon::observe(
        &first,
        &cur,
        &held(&cands, &cur),
        a.policy.steal_threshold,
        eligible.as_ref(),
        0,
    );
    if ebpf {
        for v in &mut snap.vcpus {
            v.online = !preempted_now.contains(&v.vcpu);
        }
    }
    let wakes_known = reader
        .as_ref()
        .is_some_and(|r| r.wakes_unavailable.is_none());
    daemon::fill_availability(
        &mut snap,
        Some(&mut cpus),
        wakes_known.then_some(&episodes),
        &counters,
        mono1,
    );
    let decision = Policy::new(cfg.with_moves(moves.moves))?.decide(&snap);
    if a.json {
        print_json(&serde_json::json!({
            "interval_s": dt,
            "signal": signal,
            "moves": moves,
            "preemptions": ebpf.then(|| cpus.iter().map(|c| serde_json::json!({
                "cpu": c.cpu, "count": preemptions.get(&c.cpu).copied().unwrap_or(0),
                "preempted_now": preempted_now.contains(&c.cpu),
            })).collect::<Vec<_>>()),
            "cpus": cpus,
            "irqs": irqs,
            "snapshot": snap,
            "decision": decision,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let shown = Shown {
        signal: &signal,
        moves: &moves,
        dt,
        ebpf,
        cpus: &cpus,
        preemptions: &preemptions,
        irqs: &irqs,
        cfg: &cfg,
        decision: &decision,
    };
    print!("{}", show_text(&shown));
    Ok(ExitCode::SUCCESS)
}

/// What `irq show` prints as text.
struct Shown<'a> {
    signal: &'a daemon::SignalInfo,
    moves: &'a irqbal::moves::MoveDetection,
    dt: f64,
    ebpf: bool,
    cpus: &'a [daemon::CpuWindow],
    preemptions: &'a BTreeMap<u32, u64>,
    irqs: &'a [serde_json::Value],
    cfg: &'a PolicyConfig,
    decision: &'a irqbal::policy::Decision,
}

/// `irq show`'s text: the signal and moves, the CPUs' window, the IRQs, the vBalance decision.
fn show_text(w: &Shown) -> String {
    let Shown {
        signal,
        moves,
        dt,
        ebpf,
        cpus,
        preemptions,
        irqs,
        cfg,
        decision,
    } = *w;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "preemption signal: {} ({})",
        signal_label(signal.signal),
        signal.reason
    );
    let _ = writeln!(s, "moves: {} ({})", moves.moves, moves.reason);
    let _ = writeln!(s, "window {dt:.2} s");
    let _ = writeln!(
        s,
        "{:<6} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "cpu",
        "steal%",
        "irq+soft%",
        if ebpf { "preempt/s" } else { "" },
        "wait ms",
        "state"
    );
    for c in cpus {
        let _ = writeln!(
            s,
            "cpu{:<3} {:>8.1} {:>10.1} {:>10} {:>10} {:>10}",
            c.cpu,
            c.steal_frac * 100.0,
            c.irq_frac * 100.0,
            if ebpf {
                format!(
                    "{:.1}",
                    preemptions.get(&c.cpu).copied().unwrap_or(0) as f64 / dt
                )
            } else {
                String::new()
            },
            c.wait_ms.map_or("-".to_string(), |w| format!("{w:.3}")),
            if c.online { "running" } else { "preempted" }
        );
    }
    let _ = writeln!(
        s,
        "\n{:>5} {:>10} {:>9} {:>9} {:>8}  name",
        "irq", "per sec", "affinity", "effective", "balanced"
    );
    for i in irqs {
        let bal = match (i["balanced"].as_bool(), i["movable"].as_bool()) {
            (Some(true), Some(true)) => "movable",
            (Some(true), Some(false)) => "fixed",
            (Some(true), None) => "yes",
            _ => "-",
        };
        let _ = writeln!(
            s,
            "{:>5} {:>10.1} {:>9} {:>9} {:>8}  {}",
            i["irq"].as_u64().unwrap_or(0),
            i["per_sec"].as_f64().unwrap_or(0.0),
            i["affinity"].as_str().unwrap_or("?"),
            i["effective"].as_str().unwrap_or("?"),
            bal,
            i["name"].as_str().unwrap_or("")
        );
    }
    let _ = writeln!(
        s,
        "\nvBalance now (threshold {}, {}, {} moves, load floor {}, average irq load {:.3}):",
        cfg.threshold, cfg.mapping, moves.moves, cfg.load_floor, decision.average
    );
    if decision.placements.is_empty() {
        let _ = writeln!(s, "  no balanced IRQs (virtio-net queues or --irq N)");
    }
    for p in &decision.placements {
        let verb = if p.moved() {
            format!("move cpu{} -> cpu{}", p.from, p.to)
        } else {
            format!("stay on cpu{}", p.from)
        };
        let _ = writeln!(s, "  irq {:>4}: {verb}: {}", p.irq, p.reason.describe());
    }
    s
}

/// The window: with the eBPF signal, preemptions counted as they come (per CPU, and which
/// are preempted at its end) and each episode recorded; without it, a sleep.
fn watch(
    reader: Option<&mut irqbal::ebpf::PreemptReader>,
    interval: f64,
    episodes: &mut irqbal::avail::Episodes,
) -> (BTreeMap<u32, u64>, std::collections::BTreeSet<u32>) {
    let mut preemptions: BTreeMap<u32, u64> = BTreeMap::new();
    let mut preempted_now: std::collections::BTreeSet<u32> = Default::default();
    let end = Instant::now() + Duration::from_secs_f64(interval);
    match reader {
        Some(r) => {
            while Instant::now() < end {
                let left = end.saturating_duration_since(Instant::now());
                for e in r.poll(left.min(Duration::from_millis(50))) {
                    if e.preempted {
                        *preemptions.entry(e.cpu).or_default() += 1;
                        preempted_now.insert(e.cpu);
                        episodes.preempted(e.cpu, e.ts_ns);
                    } else {
                        preempted_now.remove(&e.cpu);
                        let len = e.steal_ns.saturating_sub(e.steal_at_preempt_ns);
                        episodes.resumed(e.cpu, e.ts_ns, len);
                    }
                }
            }
        }
        None => std::thread::sleep(Duration::from_secs_f64(interval)),
    }
    (preemptions, preempted_now)
}

/// Each IRQ's rate over the window and what the balancer makes of it (those that took no
/// interrupts and are not balanced only with --all).
fn irq_rows(
    first: &Sample,
    cur: &Sample,
    cands: &[daemon::Candidate],
    a: &ShowArgs,
    dt: f64,
) -> Vec<serde_json::Value> {
    let mut irqs = Vec::new();
    for r in &cur.ints.irqs {
        let Some(n) = r.number else { continue };
        let before = first
            .ints
            .irqs
            .iter()
            .find(|p| p.id == r.id)
            .map_or(0, |p| p.total());
        let rate = r.total().saturating_sub(before) as f64 / dt;
        if !a.all && rate == 0.0 && !cands.iter().any(|c| c.irq == n) {
            continue;
        }
        let cand = cands.iter().find(|c| c.irq == n);
        irqs.push(serde_json::json!({
            "irq": n,
            "name": r.actions,
            "chip": r.chip,
            "per_sec": rate,
            "affinity": r.affinity.as_ref().map(|s| s.to_list_string()),
            "effective": r.effective_affinity.as_ref().map(|s| s.to_list_string()),
            "balanced": cand.is_some(),
            "movable": cand.map(|c| if a.probe { serde_json::json!(c.movable) } else { serde_json::Value::Null }),
            "note": cand.map(|c| c.note.clone()),
        }));
    }
    irqs
}

/// The CPU each balanced IRQ is on now (its effective affinity, else its affinity).
fn held(cands: &[daemon::Candidate], cur: &Sample) -> Vec<(u32, u32)> {
    cands
        .iter()
        .filter_map(|c| {
            let r = cur.ints.irqs.iter().find(|r| r.number == Some(c.irq))?;
            let cpu = r
                .effective_affinity
                .as_ref()
                .or(r.affinity.as_ref())?
                .first()?;
            Some((c.irq, cpu))
        })
        .collect()
}

fn signal_label(signal: &str) -> &'static str {
    if signal == daemon::SIGNAL_EBPF {
        "eBPF, KVM's exact per-vCPU preempted flag"
    } else {
        "/proc/stat steal over each window"
    }
}

fn duration(a: &BalanceArgs) -> anyhow::Result<Option<Duration>> {
    a.duration
        .map(|d| {
            if d.is_finite() && d > 0.0 {
                Ok(Duration::from_secs_f64(d))
            } else {
                anyhow::bail!("--duration must be a positive number of seconds")
            }
        })
        .transpose()
}

fn balance_guest(a: BalanceArgs) -> anyhow::Result<ExitCode> {
    if a.interval_ms.is_some_and(|ms| ms < 10) {
        anyhow::bail!("--interval-ms must be at least 10 (steal time has 10 ms resolution)");
    }
    let fs = ProcFs::default();
    a.policy.check_irqs(&fs.interrupt_counts()?)?;
    let cfg = GuestConfig {
        fs,
        interval: a.interval_ms.map(Duration::from_millis),
        steal_threshold: a.policy.steal_threshold,
        policy: a.policy.config()?,
        irqs: a.policy.irqs.clone(),
        cpus: a.policy.cpuset()?,
        dry_run: a.dry_run,
        duration: duration(&a)?,
        signal: a.policy.signal.choice(),
        scan_gap: Duration::from_micros(100),
        realtime: !a.no_realtime,
        moves: a.policy.moves.choice(),
    };
    let stop = daemon::install_signal_flag()?;
    let json = a.json;
    let verbose = a.verbose;
    let mut out = Out::default();
    let mut journal = if a.dry_run {
        None
    } else {
        Some(start_journal(&a.journal, None)?)
    };
    let mut journal_error = None;
    let summary = daemon::run_guest(&cfg, &stop, |ev| {
        // every IRQ the daemon may move is journaled before its first move; if that fails,
        // the daemon stops before moving any
        if let (DaemonEvent::Start { candidates, .. }, Some((_, j))) = (ev, journal.as_mut()) {
            if let Err(e) = journal_candidates(j, candidates) {
                journal_error = Some(e);
                stop.store(true, Ordering::Relaxed);
            }
        }
        // a closed stdout (the reader went away) stops the daemon, which restores what it
        // changed and ends quietly
        if print_event(&mut out, ev, json, verbose).is_err() {
            stop.store(true, Ordering::Relaxed);
        }
    })?;
    if let Some((lock, j)) = journal.take() {
        // the daemon has put every IRQ back; restoring the journal checks it and archives it
        drop(j);
        drop(lock);
        let rep = apply::engine::restore(&a.journal, Duration::from_secs(10))
            .map_err(|e| anyhow::anyhow!("restoring {}: {e}", a.journal.display()))?;
        if rep.failed > 0 {
            anyhow::bail!(
                "{} IRQ(s) could not be restored: the journal is kept at {}",
                rep.failed,
                a.journal.display()
            );
        }
    }
    if let Some(e) = journal_error {
        return Err(e.context(format!("writing {}", a.journal.display())));
    }
    Ok(if summary.restore_failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Journal each movable candidate's affinity (and the CPU its vector is on) as `irq`
/// targets, as `apply` journals the IRQs it routes.
fn journal_candidates(
    j: &mut apply::journal::Journal,
    candidates: &[daemon::Candidate],
) -> anyhow::Result<()> {
    for c in candidates.iter().filter(|c| c.movable) {
        let dir = std::path::PathBuf::from(format!("/proc/irq/{}", c.irq));
        let effective = std::fs::read_to_string(dir.join("effective_affinity_list"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let target = apply::step::Target::Irq(apply::step::Irq {
            irq: c.irq,
            path: dir.join("smp_affinity_list"),
            name: c.name.clone(),
            class: apply::step::IrqClass::Host,
            previous_effective: effective,
        });
        let step = j.intend(&target, &c.original, "balanced by vmtune irq balance")?;
        j.outcome(
            step,
            apply::journal::State::Done,
            Some("moved while the daemon runs".into()),
        )?;
    }
    Ok(())
}

/// Standard output that remembers it was closed and stays quiet after that.
#[derive(Default)]
struct Out {
    closed: bool,
}

impl Out {
    fn line(&mut self, s: &str) -> std::io::Result<()> {
        use std::io::Write;
        if self.closed {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let mut o = std::io::stdout().lock();
        let r = writeln!(o, "{s}").and_then(|()| o.flush());
        if r.is_err() {
            self.closed = true;
        }
        r
    }
}

fn dist(d: &daemon::Dist) -> String {
    match (d.p50, d.p99, d.max) {
        (Some(a), Some(b), Some(c)) => format!("{a:.0}/{b:.0}/{c:.0} µs (n={})", d.n),
        _ => "-".to_string(),
    }
}

fn print_event(out: &mut Out, ev: &DaemonEvent, json: bool, verbose: bool) -> std::io::Result<()> {
    if json {
        return match serde_json::to_string(ev) {
            Ok(s) => out.line(&s),
            Err(_) => Ok(()),
        };
    }
    match ev {
        DaemonEvent::Start {
            candidates,
            signal,
            scheduling,
            moves,
            plan,
        } => {
            out.line(&format!(
                "vmtune irq balance (guest): {} candidate IRQ(s); preemption signal: {} ({}); scheduling {scheduling}",
                candidates.len(),
                signal_label(signal.signal),
                signal.reason
            ))?;
            out.line(&format!("moves: {} — {}", moves.moves, moves.reason))?;
            out.line(&format!("policy: {plan}"))?;
            for c in candidates {
                out.line(&format!(
                    "  irq {:>4} {:<24} {:<24} affinity {:<8} {}",
                    c.irq,
                    c.name,
                    c.chip.as_deref().unwrap_or("?"),
                    c.original,
                    c.note
                ))?;
            }
        }
        DaemonEvent::Decision {
            t_s,
            cpus,
            decision,
        } => {
            if verbose || decision.moves().next().is_some() {
                let cs: Vec<String> = cpus
                    .iter()
                    .map(|c| {
                        format!(
                            "cpu{}:{}{:.0}%/st{:.0}%{}",
                            c.cpu,
                            if c.online { "" } else { "!" },
                            c.irq_frac * 100.0,
                            c.steal_frac * 100.0,
                            match (c.avail_steal, c.wait_ms) {
                                (Some(st), Some(w)) =>
                                    format!("/5s:st{:.0}%,wait{w:.2}ms", st * 100.0),
                                (Some(st), None) => format!("/5s:st{:.0}%", st * 100.0),
                                _ => String::new(),
                            }
                        )
                    })
                    .collect();
                out.line(&format!("[{t_s:8.2}s] {}", cs.join(" ")))?;
            }
        }
        DaemonEvent::Preempt {
            t_s,
            cpu,
            preempted,
            observer,
            ring_us,
            span_us,
        } => {
            if verbose {
                out.line(&format!(
                    "[{t_s:8.2}s] cpu{cpu} {} (seen by cpu{observer}, read {ring_us:.0} µs later, {})",
                    if *preempted { "preempted" } else { "running again" },
                    if *preempted {
                        format!("last ran {span_us:.0} µs before")
                    } else {
                        format!("stolen {span_us:.0} µs")
                    }
                ))?;
            }
        }
        DaemonEvent::Move {
            irq,
            from,
            to,
            reason,
            outcome,
            effective,
            error,
            since_seen_us,
            ..
        } => {
            out.line(&format!(
                "  irq {irq}: cpu{from} -> cpu{to} ({}): {}{}{}{}",
                reason.describe(),
                outcome,
                if *outcome == "pending" {
                    " (the vector moves at its next interrupt)"
                } else {
                    ""
                },
                match (effective, error) {
                    (_, Some(e)) => format!(": {e}"),
                    (Some(e), None) => format!(", effective {e}"),
                    _ => String::new(),
                },
                since_seen_us
                    .map(|us| format!(", {us:.0} µs after the preemption was seen"))
                    .unwrap_or_default()
            ))?;
        }
        DaemonEvent::Stop { summary } => {
            out.line(&format!(
                "stopped after {:.1} s ({} moves): {} samples, {} moves ({} off preempted vCPUs, {} failed); daemon CPU {:.3} s = {:.3}% of one CPU (step {:.0} µs mean; start-up {:.2} s CPU in {:.2} s); restored {} IRQ(s){}",
                summary.wall_s,
                summary.move_kind,
                summary.samples,
                summary.moves,
                summary.moves_off_preempted,
                summary.failed_moves,
                summary.cpu_s,
                summary.cpu_percent,
                summary.step_us_mean,
                summary.startup_cpu_s,
                summary.startup_s,
                summary.restored.len(),
                if summary.restore_failures > 0 { format!(", {} FAILED", summary.restore_failures) } else { String::new() }
            ))?;
            for (irq, note) in &summary.effective_restored {
                out.line(&format!("  irq {irq}: effective CPU {note}"))?;
            }
            if let Some(l) = &summary.latencies {
                out.line(&format!(
                    "  eBPF: {} preemptions, {} resumes; preemption -> seen {} (bound {}); seen -> daemon {}; seen -> affinity written {}; write {}",
                    l.preemptions,
                    l.resumes,
                    dist(&l.preempt_to_seen_us),
                    dist(&l.preempt_to_seen_bound_us),
                    dist(&l.seen_to_daemon_us),
                    dist(&l.seen_to_written_us),
                    dist(&l.write_us)
                ))?;
            }
        }
    }
    Ok(())
}

fn balance_host(a: BalanceArgs) -> anyhow::Result<ExitCode> {
    let pid = a.pid.context("--mode host needs --pid QEMU_PID")?;
    let interval_ms = a.interval_ms.unwrap_or(200);
    if interval_ms < 10 {
        anyhow::bail!("--interval-ms must be at least 10");
    }
    let fs = ProcFs::default();
    let stop = daemon::install_signal_flag()?;
    let limit = duration(&a)?;
    let targets: BTreeMap<u32, u32> = a.targets.iter().copied().collect();
    let start = Instant::now();
    let mut guard = daemon::AffinityGuard::new(fs.clone());
    let mut originals: BTreeMap<u32, String> = BTreeMap::new();
    let (mut moves, mut failed, mut rounds) = (0u64, 0u64, 0u64);
    let cpu0 = fs.self_cpu_ticks().unwrap_or(0);
    loop {
        let table = fs.interrupts()?;
        let vfio = host::vfio_irqs(&table);
        let placement = host::vcpu_placement(&fs, pid)?;
        rounds += 1;
        if rounds == 1 {
            let msg = serde_json::json!({"event": "start", "pid": pid, "vfio_irqs": vfio, "vcpus": placement});
            if a.json {
                println!("{msg}");
            } else {
                println!(
                    "vmtune irq balance (host): pid {pid}, {} vCPU thread(s), {} VFIO vector(s)",
                    placement.len(),
                    vfio.len()
                );
            }
        }
        for m in host::host_plan(&vfio, &placement, &targets) {
            let res = if a.dry_run {
                Ok(())
            } else {
                if let std::collections::btree_map::Entry::Vacant(e) = originals.entry(m.irq) {
                    let orig = fs.affinity_list(m.irq)?;
                    guard.remember(m.irq, &orig);
                    e.insert(orig);
                }
                fs.set_affinity(m.irq, &m.to.to_string())
            };
            match &res {
                Ok(()) => moves += 1,
                Err(_) => failed += 1,
            }
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({"event": "move", "move": m, "ok": res.is_ok(), "error": res.as_ref().err().map(|e| e.to_string())})
                );
            } else {
                println!(
                    "  irq {} ({} → vCPU{}): cpu{} -> cpu{} {}",
                    m.irq,
                    m.bdf,
                    m.vcpu,
                    m.from.map_or("?".into(), |c| c.to_string()),
                    m.to,
                    res.as_ref()
                        .map_or_else(|e| format!("FAILED: {e}"), |_| "ok".into())
                );
            }
        }
        let wake = Instant::now() + Duration::from_millis(interval_ms);
        let mut done = false;
        while Instant::now() < wake {
            if stop.load(Ordering::Relaxed) || limit.is_some_and(|d| start.elapsed() >= d) {
                done = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if done {
            break;
        }
    }
    let restore_failures = guard.restore();
    let wall = start.elapsed().as_secs_f64();
    let cpu = fs.self_cpu_ticks().unwrap_or(cpu0).saturating_sub(cpu0) as f64 / 100.0;
    let summary = serde_json::json!({"event": "stop", "rounds": rounds, "moves": moves, "failed_moves": failed,
        "wall_s": wall, "cpu_s": cpu, "cpu_percent": if wall > 0.0 { 100.0 * cpu / wall } else { 0.0 },
        "restored": guard.restored.len(), "restore_failures": restore_failures});
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "stopped: {rounds} rounds, {moves} moves ({failed} failed), restored {} IRQ(s)",
            guard.restored.len()
        );
    }
    Ok(if restore_failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
