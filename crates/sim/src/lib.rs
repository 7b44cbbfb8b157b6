//! A discrete-event simulator of hypervisor vCPU scheduling and guest interrupt delivery,
//! built to evaluate vBalance-style interrupt placement at scales and loads a development
//! machine cannot produce.
//!
//! ```text
//! Scenario (built-in or TOML) ──► Sim (engine: pCPUs, vCPUs, credit/EEVDF, NIC queues,
//!                                      ping/TCP/UDP sources, static/irqbalance/vBalance)
//!                                  └─► RunStats ──► RunResult (rtt_ms, throughput_mbps, ...)
//! ```
//!
//! The vBalance policy the simulator runs is [`irqbal::Policy`], the same code the daemon runs.

pub mod engine;
pub mod scenario;
pub mod svg;

use serde::Serialize;

pub use engine::{Detection, RunStats, Sim, SimError};
pub use scenario::{
    builtin, Detector, MoveSemantics, PolicyKind, Scenario, ScenarioError, SchedulerKind, BUILTINS,
};

/// Nearest-rank percentiles of ping round-trip times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rtt {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Rtt {
    /// `None` for no samples.
    pub fn from_ns(samples: &[u64]) -> Option<Rtt> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let rank = |p: f64| {
            let k = ((p / 100.0) * s.len() as f64).ceil() as usize;
            s[k.clamp(1, s.len()) - 1] as f64 / 1e6
        };
        let mean = s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64 / 1e6;
        Some(Rtt {
            p50: rank(50.0),
            p99: rank(99.0),
            max: rank(100.0),
            mean,
        })
    }
}

/// The result of one run: one scenario (one sweep point) under one scheduler and policy.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub scheduler: SchedulerKind,
    pub policy: PolicyKind,
    /// The sweep's message size for stream scenarios.
    pub message_size: Option<u32>,
    /// Ping round-trip times (when the scenario pings).
    pub rtt_ms: Option<Rtt>,
    pub pings_sent: u64,
    pub pings_answered: u64,
    /// Goodput of all streams together, Mbit/s (when the scenario has streams).
    pub throughput_mbps: Option<f64>,
    /// Packets dropped at full rings.
    pub drops: u64,
    pub irq_moves: u64,
    pub context_switches: u64,
    pub events: u64,
    /// Most events queued at once (live and superseded), a measure of the run's memory.
    pub peak_queue: usize,
    /// Simulator speed: events handled per wall-clock second.
    pub events_per_sec: f64,
    pub wall_ms: f64,
    pub simulated_s: f64,
    /// Run time of each vCPU, ms (global vCPU order).
    pub vcpu_runtime_ms: Vec<f64>,
    /// Interrupt processing time of each vCPU, ms.
    pub vcpu_irq_ms: Vec<f64>,
    /// Daemon variants: preemption episodes and how soon the daemon learnt of them.
    pub detection: Option<Detection>,
    /// Host boosts (`host-boost`, `vbalance` on EEVDF): count, total run time, refusals by
    /// the per-VM share.
    pub boosts: u64,
    pub boost_ms: f64,
    pub boosts_refused: u64,
    /// `(ping send time s, rtt ms)` for plotting; not in the JSON.
    #[serde(skip)]
    pub rtt_series: Vec<(f64, f64)>,
}

/// Run one scenario under one scheduler and policy.
pub fn run_one(
    sc: &Scenario,
    sched: SchedulerKind,
    policy: PolicyKind,
    message_size: Option<u32>,
) -> Result<RunResult, String> {
    let sim = Sim::new(sc, sched, policy)?;
    let start = std::time::Instant::now();
    let st = sim.run().map_err(|e| e.to_string())?;
    let wall = start.elapsed().as_secs_f64();
    let rtts: Vec<u64> = st.pings.iter().map(|&(_, r)| r).collect();
    let secs = st.simulated_ns as f64 / 1e9;
    let stream_total: u64 = st.stream_bytes.iter().map(|(_, b)| *b).sum();
    Ok(RunResult {
        scenario: sc.name.clone(),
        scheduler: sched,
        policy,
        message_size,
        rtt_ms: Rtt::from_ns(&rtts),
        pings_sent: st.pings_sent,
        pings_answered: st.pings.len() as u64,
        throughput_mbps: (!st.stream_bytes.is_empty())
            .then(|| stream_total as f64 * 8.0 / secs / 1e6),
        drops: st.drops,
        irq_moves: st.irq_moves,
        context_switches: st.context_switches,
        events: st.events,
        peak_queue: st.peak_queue,
        events_per_sec: if wall > 0.0 {
            st.events as f64 / wall
        } else {
            0.0
        },
        wall_ms: wall * 1e3,
        simulated_s: secs,
        vcpu_runtime_ms: st.vcpu_runtime_ns.iter().map(|&n| n as f64 / 1e6).collect(),
        vcpu_irq_ms: st.vcpu_irq_ns.iter().map(|&n| n as f64 / 1e6).collect(),
        detection: st.detection.clone(),
        boosts: st.boosts,
        boost_ms: st.boost_ns as f64 / 1e6,
        boosts_refused: st.boosts_refused,
        rtt_series: st
            .pings
            .iter()
            .map(|&(t, r)| (t as f64 / 1e9, r as f64 / 1e6))
            .collect(),
    })
}

/// One unit of work of a scenario: (scenario with the sweep applied, scheduler, policy, size).
pub fn plan_runs(sc: &Scenario) -> Vec<(Scenario, SchedulerKind, PolicyKind, Option<u32>)> {
    let points: Vec<(Scenario, Option<u32>)> = if sc.sweep.message_sizes.is_empty() {
        vec![(sc.clone(), None)]
    } else {
        sc.sweep
            .message_sizes
            .iter()
            .map(|&m| (sc.with_message_size(m), Some(m)))
            .collect()
    };
    let mut out = Vec::new();
    for &sched in &sc.schedulers {
        for (s, m) in &points {
            for &p in &sc.policies {
                out.push((s.clone(), sched, p, *m));
            }
        }
    }
    out
}

/// Run every (scheduler × sweep point × policy) of a scenario on up to `threads` threads;
/// results come back in plan order whatever the thread count.
pub fn run_scenario(sc: &Scenario, threads: usize) -> Result<Vec<RunResult>, String> {
    let plan = plan_runs(sc);
    let threads = threads.clamp(1, plan.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<RunResult, String>>>> =
        plan.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((sc, sched, pol, m)) = plan.get(i) else {
                    break;
                };
                let r = run_one(sc, *sched, *pol, *m);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .map_err(|_| "a simulation thread panicked".to_string())?
                .unwrap_or_else(|| Err("a simulation did not run".into()))
        })
        .collect()
}
