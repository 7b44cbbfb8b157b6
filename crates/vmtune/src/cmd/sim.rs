//! `vmtune sim`: run a scheduling / interrupt-delivery simulation and compare IRQ policies.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use sim::{PolicyKind, RunResult, Scenario, SchedulerKind};

use super::common::print_json;

/// Simulate hypervisor vCPU scheduling and guest interrupt delivery, and compare interrupt
/// policies: `static` (all IRQs on vCPU0), `irqbalance` (10 s rebalancing, blind to vCPU
/// scheduling) and `vbalance` (the irqbal policy: move IRQs off preempted vCPUs, balance with a
/// max/min threshold of 1.5), under the Xen credit scheduler and Linux EEVDF.
///
/// SCENARIO is a built-in name or a TOML file:
///   vbalance-fig5      paper 5.2.1: 4-vCPU VM on one core, CPU burn, ping every 100 ms, 60 s
///   vbalance-fig6      paper 5.2.2: netperf TCP_STREAM and UDP_STREAM over message sizes
///   vbalance-fig6-tcp / vbalance-fig6-udp   one of the two
///
/// Output per run: ping RTT p50/p99/max (ms), stream throughput (Mbit/s), drops, IRQ moves,
/// host context switches and the simulator's speed (events/s). Runs are deterministic for a
/// seed. See `crates/sim/src/scenario.rs` for the TOML format.
#[derive(clap::Args, Debug)]
#[command(after_help = SIM_HELP)]
pub struct Args {
    /// Built-in scenario name or path to a scenario TOML file.
    pub scenario: String,
    /// Only these host schedulers (credit, eevdf); repeatable. Default: the scenario's.
    #[arg(long = "scheduler", value_parser = parse_sched)]
    pub schedulers: Vec<SchedulerKind>,
    /// Only these policies (static, irqbalance, vbalance); repeatable. Default: the scenario's.
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
}

const SIM_HELP: &str = "\
Policies: static (all IRQs on vCPU0), irqbalance (10 s rebalancing, blind to vCPU scheduling),
vbalance (the irqbal policy: move IRQs off preempted vCPUs, balance with max/min > 1.5).
Host schedulers: credit (Xen credit1: 30 ms slice, BOOST/UNDER/OVER, SMP_BOOST fast path with
vBalance) and eevdf (Linux: 3 ms base slice, wakeup preemption).

Built-in scenarios:
  vbalance-fig5      paper 5.2.1: 4-vCPU VM on one core, CPU burn, ping every 100 ms, 60 s
  vbalance-fig6      paper 5.2.2: netperf TCP_STREAM and UDP_STREAM over message sizes
  vbalance-fig6-tcp, vbalance-fig6-udp   one of the two

Output per run: ping RTT p50/p99/max (ms), stream throughput (Mbit/s), drops, IRQ moves, host
context switches, simulator speed (events/s). Deterministic for a seed. TOML format: see
crates/sim/src/scenario.rs.

Examples:
  vmtune sim vbalance-fig5 --svg fig5.svg
  vmtune sim vbalance-fig6 --duration 5 --sizes 256,4096 --json
  vmtune sim my-scenario.toml --scheduler eevdf";

fn parse_sched(s: &str) -> Result<SchedulerKind, String> {
    match s {
        "credit" => Ok(SchedulerKind::Credit),
        "eevdf" | "cfs" => Ok(SchedulerKind::Eevdf),
        _ => Err(format!("unknown scheduler {s:?} (credit, eevdf)")),
    }
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    match s {
        "static" => Ok(PolicyKind::Static),
        "irqbalance" => Ok(PolicyKind::Irqbalance),
        "vbalance" => Ok(PolicyKind::Vbalance),
        _ => Err(format!(
            "unknown policy {s:?} (static, irqbalance, vbalance)"
        )),
    }
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
                "    {:<11} {:>7} {:>9} {:>9} {:>9} {:>11} {:>8} {:>8} {:>9} {:>11}",
                "policy",
                "msg",
                "rtt p50",
                "rtt p99",
                "rtt max",
                "Mbit/s",
                "drops",
                "moves",
                "ctxsw",
                "events/s"
            );
            for r in rs {
                let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
                let _ = writeln!(
                    s,
                    "    {:<11} {:>7} {:>9} {:>9} {:>9} {:>11} {:>8} {:>8} {:>9} {:>11}",
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
                    format!("{:.2e}", r.events_per_sec),
                );
            }
        }
    }
    s
}
