//! `vmtune sim`: run a scheduling / interrupt-delivery simulation and compare IRQ policies.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use sim::{PolicyKind, RunResult, Scenario, SchedulerKind};

use super::common::print_json;

/// Simulate hypervisor vCPU scheduling and guest interrupt delivery, and compare interrupt
/// policies: `static` (all IRQs on vCPU0), `irqbalance` (10 s rebalancing, blind to vCPU
/// scheduling), the vBalance daemon as it runs on a KVM guest with each preemption signal it
/// can read (`vbalance-guest`: the exact preempted flag via eBPF, the daemon's default;
/// `vbalance-tick`; `vbalance-procstat`), with and without interrupt remapping (`-ir`), the
/// host half on KVM (`host-boost`, `host-slice`), `vbalance` (what vmtune ships: the guest
/// daemon and the host boost),
/// `vbalance-chase` (the former default, for comparison) and `vbalance-oracle`, the
/// zero-delay upper bound of the paper's Xen design.
///
/// SCENARIO is a built-in name or a TOML file:
///   vbalance-fig5      paper 5.2.1: 4-vCPU VM on one core, CPU burn, ping every 100 ms, 60 s
///   vbalance-fig6      paper 5.2.2: netperf TCP_STREAM and UDP_STREAM over message sizes
///   vbalance-fig6-tcp / vbalance-fig6-udp   one of the two
///   vbalance-more      the four scenarios below, where vCPUs are not equally available:
///   vbalance-mixed / -shared-core / -two-vms / -wide
///
/// Output per run: ping RTT p50/p99/max (ms), stream throughput (Mbit/s), drops, IRQ moves,
/// host context switches, how soon the daemon learnt of preemptions, and the simulator's
/// speed (events/s). Runs are deterministic for a seed. See `crates/sim/src/scenario.rs` for
/// the TOML format.
#[derive(clap::Args, Debug)]
#[command(after_help = SIM_HELP)]
pub struct Args {
    /// Built-in scenario name or path to a scenario TOML file.
    pub scenario: String,
    /// Only these host schedulers (credit, eevdf); repeatable. Default: the scenario's.
    /// (`cfs` is refused: Linux replaced it with EEVDF in 6.6.)
    #[arg(long = "scheduler", value_parser = parse_sched)]
    pub schedulers: Vec<SchedulerKind>,
    /// Only these policies (static, irqbalance, vbalance, vbalance-guest, host-boost,
    /// host-boost-ideal, host-slice, vbalance-ir, vbalance-tick, vbalance-tick-ir, vbalance-procstat,
    /// vbalance-procstat-ir, vbalance-chase, vbalance-oracle); repeatable. Default: the
    /// scenario's (all).
    #[arg(long = "policy", value_parser = parse_policy)]
    pub policies: Vec<PolicyKind>,
    /// Override the simulated duration, in seconds (e.g. 5 for a quick look).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Override the random seed (ping phase and jitter, initial run order, tick offsets).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the sweep's message sizes (bytes), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "BYTES")]
    pub sizes: Vec<u32>,
    /// Threads to run simulations on (each run is single-threaded). Default: all CPUs.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write the figure (RTT over time per policy; throughput bars) as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Print results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the events `vmtune irq wait` would record on a KVM host running this
    /// simulation (one scenario, scheduler, policy and message size), as JSON lines for
    /// `vmtune irq wait --replay FILE`. VM i is process 1000 + i.
    #[arg(long, value_name = "FILE")]
    pub irq_trace: Option<PathBuf>,
}

const SIM_HELP: &str = "\
Policies:
  static                 all IRQs on vCPU0
  irqbalance             10 s rebalancing, blind to vCPU scheduling
  vbalance               what vmtune ships on KVM: vbalance-guest in the guest and host-boost on
                         the host (EEVDF); under credit (Xen) the guest half alone
  vbalance-guest         the guest daemon's default: the exact kvm_steal_time.preempted flag read
                         by eBPF at guest ticks and switches, the daemon woken through a ring
                         buffer on the observing vCPU; x86 MSI without interrupt remapping defers
                         each affinity change to the IRQ's next interrupt (old vCPU), so IRQs are
                         placed by each vCPU's recent availability, at 1 s windows
  host-boost             the host agent, `vmtune irq boost` (EEVDF only): an interrupt accepted for
                         a vCPU waiting in the host's runqueue gets it run (SCHED_FIFO) after the
                         agent's reaction time ([host] boost_reaction_p50_us/p99_us, what the
                         agent measures for itself) until the vCPU halts or 2 ms pass; boosts
                         over another VM's vCPU are held to [host] boost_max_share (5 %) of a
                         CPU; IRQs as static
  host-boost-ideal       the bound for host-boost: the boost ends as soon as the guest's interrupt
                         work is done, which the host cannot see
  host-slice             [host] slice_us (300 µs) EEVDF slice for the vCPU threads, no agent;
                         without [host] hrtick a slice under the 4 ms tick is the tick
  vbalance-tick          a vCPU silent for 1.5 guest ticks (not halted) counts as preempted
  vbalance-procstat      /proc/stat steal > 10 % over a 200 ms window (the fallback)
  *-ir                   the same detector in a guest with interrupt remapping: the next
                         interrupt goes to the new vCPU, one already raised stays; light IRQs
                         follow the flag, busy queues (>= 2 % of a CPU) are placed by
                         availability
  vbalance-chase         the former default: every IRQ follows the flag although moves are
                         deferred (streams collapse; for comparison)
  vbalance-oracle        upper bound (the paper on Xen): exact running state at every switch,
                         a rebind carries a pending interrupt along, SMP_BOOST with credit
Host schedulers: credit (Xen credit1: 30 ms slice, BOOST/UNDER/OVER; the Xen rows) and eevdf
(Linux: 3 ms base slice, wakeup preemption; the KVM rows).

Built-in scenarios:
  vbalance-fig5      paper 5.2.1: 4-vCPU VM on one core, CPU burn, ping every 100 ms, 60 s
  vbalance-fig6      paper 5.2.2: netperf TCP_STREAM and UDP_STREAM over message sizes
  vbalance-fig6-tcp, vbalance-fig6-udp   one of the two
  vbalance-mixed     fig5's VM with a ping and a TCP_STREAM 4 KiB on two NIC queues, 30 s
  vbalance-shared-core  2-vCPU I/O-bound VM, vCPU0 sharing its core with a busy co-tenant
  vbalance-two-vms   4-vCPU CPU burner (ping + TCP) beside a 2-vCPU I/O-bound VM, 2 cores
  vbalance-wide      8 vCPUs on 2 cores, 4 NIC queues: ping, UDP 1 and 4 KiB, TCP 4 KiB
  vbalance-more      the four above

Output per run: ping RTT p50/p99/max (ms), stream throughput (Mbit/s), drops, IRQ moves, host
context switches, detection (preemptions the daemon learnt of, and how soon: p50/p99 ms),
simulator speed (events/s). Deterministic for a seed. TOML format: see
crates/sim/src/scenario.rs.

Examples:
  vmtune sim vbalance-fig5 --svg fig5.svg
  vmtune sim vbalance-fig6 --duration 5 --sizes 256,4096 --json
  vmtune sim vbalance-fig5 --policy vbalance --policy vbalance-oracle
  vmtune sim my-scenario.toml --scheduler eevdf";

fn parse_sched(s: &str) -> Result<SchedulerKind, String> {
    match s {
        "credit" => Ok(SchedulerKind::Credit),
        "eevdf" => Ok(SchedulerKind::Eevdf),
        "cfs" => Err(
            "\"cfs\" is not modelled: Linux replaced CFS with EEVDF in 6.6; use eevdf (schedulers: \
             credit, eevdf)"
                .into(),
        ),
        _ => Err(format!("unknown scheduler {s:?} (schedulers: credit, eevdf)")),
    }
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    PolicyKind::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
        format!("unknown policy {s:?} (policies: {})", names.join(", "))
    })
}

/// Load the scenarios named by `arg`: a built-in name, else a TOML file.
pub fn load_scenarios(arg: &str) -> anyhow::Result<Vec<Scenario>> {
    if sim::BUILTINS.contains(&arg) {
        return Ok(sim::builtin(arg)?);
    }
    let path = std::path::Path::new(arg);
    if !path.exists() {
        anyhow::bail!(
            "scenario {arg:?} is neither a built-in ({}) nor a file",
            sim::BUILTINS.join(", ")
        );
    }
    Ok(vec![Scenario::load(path)?])
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut scenarios = load_scenarios(&args.scenario)?;
    for sc in &mut scenarios {
        if !args.schedulers.is_empty() {
            sc.schedulers.clone_from(&args.schedulers);
        }
        if !args.policies.is_empty() {
            sc.policies.clone_from(&args.policies);
        }
        if let Some(d) = args.duration {
            if !(d.is_finite() && d > 0.0) {
                anyhow::bail!("--duration must be a positive number of seconds");
            }
            sc.duration_ms = (d * 1000.0).round().max(1.0) as u64;
        }
        if let Some(s) = args.seed {
            sc.seed = s;
        }
        if !args.sizes.is_empty() && !sc.sweep.message_sizes.is_empty() {
            sc.sweep.message_sizes.clone_from(&args.sizes);
        }
        sc.validate()
            .map_err(|m| anyhow::anyhow!("scenario {}: {m}", sc.name))?;
    }
    if let Some(path) = &args.irq_trace {
        write_irq_trace(&scenarios, path)?;
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut results = Vec::new();
    for sc in &scenarios {
        let rs = sim::run_scenario(sc, threads)
            .map_err(|m| anyhow::anyhow!("scenario {}: {m}", sc.name))?;
        results.extend(rs);
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, sim::svg::render(&results))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let out = serde_json::json!({
            "scenarios": scenarios.iter().map(|s| serde_json::json!({
                "name": s.name, "description": s.description, "seed": s.seed,
                "duration_ms": s.duration_ms,
            })).collect::<Vec<_>>(),
            "runs": results,
        });
        print_json(&out)?;
    } else {
        print!("{}", render_table(&scenarios, &results));
    }
    Ok(ExitCode::SUCCESS)
}

/// Run the one simulation `--irq-trace` names again with the trace on and write its events.
fn write_irq_trace(scenarios: &[Scenario], path: &std::path::Path) -> anyhow::Result<()> {
    let one = match scenarios {
        [sc] if sc.schedulers.len() == 1
            && sc.policies.len() == 1
            && sc.sweep.message_sizes.len() <= 1 =>
        {
            sc
        }
        _ => anyhow::bail!(
            "--irq-trace records one run: name one scenario, one --scheduler, one --policy \
             and, for a sweep, one --sizes"
        ),
    };
    let sc = match one.sweep.message_sizes.first() {
        Some(&size) => one.with_message_size(size),
        None => one.clone(),
    };
    let st = sim::Sim::new(&sc, sc.schedulers[0], sc.policies[0])
        .map_err(|m| anyhow::anyhow!("scenario {}: {m}", sc.name))?
        .trace_irq_waits()
        .run()
        .map_err(|e| anyhow::anyhow!("scenario {}: {e}", sc.name))?;
    let mut text = format!(
        "# vmtune sim {} --scheduler {:?} --policy {:?} --seed {} --duration {}: irq-wait events\n",
        sc.name,
        sc.schedulers[0],
        sc.policies[0],
        sc.seed,
        sc.duration_ms as f64 / 1000.0
    )
    .to_lowercase();
    for e in &st.irq_trace {
        text.push_str(&serde_json::to_string(e)?);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The human-readable report: one table per scenario and scheduler.
pub fn render_table(scenarios: &[Scenario], results: &[RunResult]) -> String {
    let mut s = String::new();
    for sc in scenarios {
        let _ = writeln!(
            s,
            "{} — {} (seed {}, {:.0} s simulated)",
            sc.name,
            sc.description,
            sc.seed,
            sc.duration_ms as f64 / 1000.0
        );
        for sched in &sc.schedulers {
            let rs: Vec<&RunResult> = results
                .iter()
                .filter(|r| r.scenario == sc.name && r.scheduler == *sched)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let _ = writeln!(s, "  scheduler {}:", sched.name());
            let _ = writeln!(
                s,
                "    {:<20} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6} {:>15} {:>9}",
                "policy",
                "msg",
                "rtt p50",
                "rtt p99",
                "rtt max",
                "Mbit/s",
                "drops",
                "moves",
                "ctxsw",
                "detected p50/p99",
                "events/s"
            );
            for r in rs {
                let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
                let det = match &r.detection {
                    None => "-".to_string(),
                    Some(d) if d.detected == 0 => format!("0/{}", d.episodes),
                    Some(d) => format!(
                        "{:.0}% {}/{}",
                        100.0 * d.detected as f64 / d.episodes.max(1) as f64,
                        ms(d.p50_ms),
                        ms(d.p99_ms)
                    ),
                };
                let _ = writeln!(
                    s,
                    "    {:<20} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6} {:>15} {:>9}",
                    r.policy.name(),
                    r.message_size.map_or("-".to_string(), |m| m.to_string()),
                    ms(r.rtt_ms.map(|q| q.p50)),
                    ms(r.rtt_ms.map(|q| q.p99)),
                    ms(r.rtt_ms.map(|q| q.max)),
                    r.throughput_mbps
                        .map_or("-".to_string(), |t| format!("{t:.1}")),
                    r.drops,
                    r.irq_moves,
                    r.context_switches,
                    det,
                    format!("{:.2e}", r.events_per_sec),
                );
            }
        }
    }
    s
}
