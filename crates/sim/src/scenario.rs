//! Scenarios: what to simulate. Built-in ones reproduce the vBalance paper's micro-benchmarks
//! (section 5.2); others are read from TOML.
//!
//! ```toml
//! name = "two-vms"
//! duration_ms = 20000
//! pcpus = 2
//! schedulers = ["credit", "eevdf"]
//! policies = ["static", "irqbalance", "vbalance"]
//!
//! [[vm]]
//! vcpus = 4
//! pin = [0, 0, 1, 1]
//! workload = { kind = "burn" }
//! queues = 1
//!
//! [[vm]]
//! vcpus = 2
//! pin = [0, 1]
//! workload = { kind = "io", compute_us = 500, io_us = 2000 }
//!
//! [[source]]
//! kind = "ping"
//! vm = 0
//! interval_ms = 100
//! ```

use serde::{Deserialize, Serialize};

/// Largest simulated duration accepted (one hour), so a scenario cannot run for ever.
pub const MAX_DURATION_MS: u64 = 3_600_000;
const MAX_PCPUS: u32 = 4096;
const MAX_VCPUS: u32 = 1024;
const MAX_QUEUES: u32 = 256;
const MAX_RING: u32 = 65_536;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{0}: {1}")]
    Toml(String, String),
    #[error("{0}: {1}")]
    Invalid(String, String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("unknown built-in scenario {0:?} (built-in: {1})")]
    UnknownBuiltin(String, String),
}

/// Host scheduler model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// Xen credit1: 30 ms slice, 10 ms tick, BOOST/UNDER/OVER (+ the paper's SMP_BOOST with
    /// vBalance).
    Credit,
    /// Linux EEVDF (CFS successor): ~3 ms base slice, wakeup preemption.
    Eevdf,
}

impl SchedulerKind {
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Credit => "credit",
            SchedulerKind::Eevdf => "eevdf",
        }
    }
}

/// Guest interrupt policy: where each IRQ goes, and for the vBalance variants how the guest
/// learns which vCPUs are preempted and what an affinity write does.
///
/// The `vbalance*` daemon variants run the `irqbal` policy (the daemon's code) on what the
/// daemon can know on a KVM guest, when it can know it, and move IRQs the way a KVM guest's
/// kernel does. Detectors:
/// - `procstat`: `/proc/stat` steal over 200 ms windows, a vCPU with more than 10 % steal
///   counts as preempted (the daemon's fallback). Steal reaches `/proc/stat` only at the
///   vCPU's own guest ticks, i.e. after it runs again.
/// - `tick`: a per-tick steal/heartbeat signal read at guest ticks: a vCPU that has not ticked
///   for `tick_miss` ticks without halting counts as preempted.
/// - the default (`vbalance`): KVM's exact `kvm_steal_time.preempted` flag, read by the eBPF
///   program at guest events (ticks, context switches, a vCPU's resume) on running vCPUs and
///   pushed through a ring buffer to the daemon, which runs on the observing vCPU.
///
/// Moves (`vbalance`, `-procstat`, `-tick`): an x86 guest without interrupt remapping defers
/// an MSI affinity change to the IRQ's next interrupt, which still goes to the old vCPU
/// (measured on a KVM guest; the kernel's IRQCHIP_MOVE_DEFERRED). The `-ir` variants model a
/// guest with interrupt remapping (a vIOMMU): the next interrupt goes to the new vCPU, one
/// already pending stays on the old one.
///
/// `vbalance-oracle` is the zero-delay upper bound, the paper's Xen design: the exact running
/// state at every context switch, and a rebind that carries a pending event along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// Every IRQ stays on vCPU0 (Xen/KVM default without a balancer).
    Static,
    /// irqbalance: every 10 s, heaviest IRQ first onto the vCPU with the least interrupt load;
    /// blind to vCPU scheduling.
    Irqbalance,
    /// What vmtune ships on KVM: the guest daemon of `vbalance-guest` and the host half,
    /// `host-boost` (`vmtune irq boost`'s own `Booster`). Under the credit scheduler (Xen)
    /// there is no host half: it is `vbalance-guest`.
    Vbalance,
    /// The guest half alone, the daemon's default on a KVM guest: the exact preempted flag via
    /// eBPF; moves deferred to the IRQ's next interrupt (x86 MSI without interrupt remapping),
    /// so every IRQ is placed by availability (never moved on a single preemption).
    VbalanceGuest,
    /// The host half alone (`vmtune irq boost`), IRQs where static placement has them: the
    /// agent's own state machine, `irqbal::wait::boost::Booster`, fed the events its eBPF
    /// program pushes; when an interrupt is accepted for a vCPU that waits for a CPU it raises
    /// the vCPU's thread (SCHED_FIFO, after the agent's reaction time) until the vCPU halts or
    /// the budget ends, within a per-VM share of a CPU. EEVDF (KVM) only.
    HostBoost,
    /// The bound for the host half, not an agent: `host-boost`'s `Booster`, also told the
    /// instant the guest has no interrupt work left — which the host cannot see (a guest that
    /// keeps computing after its interrupt work shows the host nothing until its next exit or
    /// halt) — and lowering then, at once.
    HostBoostIdeal,
    /// A shorter EEVDF slice for the vCPU threads (`sched_attr.sched_runtime`, Linux 6.12+;
    /// `[host] slice_us`), no agent: a woken or interrupted vCPU waits less for its turn.
    HostSlice,
    /// The exact preempted flag via eBPF, in a guest with interrupt remapping: light IRQs
    /// follow the flag, busy queues are placed by availability.
    VbalanceIr,
    /// The `/proc/stat` steal window (the daemon's fallback without eBPF); deferred moves.
    VbalanceProcstat,
    /// The `/proc/stat` steal window with interrupt remapping.
    VbalanceProcstatIr,
    /// The per-tick steal / heartbeat signal; deferred moves.
    VbalanceTick,
    /// The per-tick signal with interrupt remapping.
    VbalanceTickIr,
    /// Upper bound: exact running state at every switch, instant rebinds that carry a pending
    /// interrupt along, and (with credit) the paper's SMP_BOOST fast path.
    VbalanceOracle,
    /// The daemon's former default on a deferred-move guest, kept for comparison: the exact
    /// flag via eBPF, and the policy chasing it (moving the IRQs of a preempted holder at
    /// once) although every move waits for the IRQ's next interrupt on the old vCPU.
    VbalanceChase,
}

/// How a vBalance variant learns that a vCPU is preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Detector {
    Procstat,
    Tick,
    Flag,
    Oracle,
}

/// What writing an IRQ's affinity does to its interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveSemantics {
    /// x86 MSI without interrupt remapping: applied when the IRQ's next interrupt is acked on
    /// the old vCPU; that interrupt still goes to the old vCPU.
    Deferred,
    /// Interrupt remapping: the next interrupt goes to the new vCPU; one already raised stays.
    Direct,
    /// Xen event channel: the IRQ and a raised, unserviced interrupt follow at once.
    Rebind,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 14] = [
        PolicyKind::Static,
        PolicyKind::Irqbalance,
        PolicyKind::VbalanceProcstat,
        PolicyKind::VbalanceProcstatIr,
        PolicyKind::VbalanceTick,
        PolicyKind::VbalanceTickIr,
        PolicyKind::VbalanceChase,
        PolicyKind::VbalanceGuest,
        PolicyKind::VbalanceIr,
        PolicyKind::HostSlice,
        PolicyKind::HostBoost,
        PolicyKind::HostBoostIdeal,
        PolicyKind::Vbalance,
        PolicyKind::VbalanceOracle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Static => "static",
            PolicyKind::Irqbalance => "irqbalance",
            PolicyKind::Vbalance => "vbalance",
            PolicyKind::VbalanceGuest => "vbalance-guest",
            PolicyKind::HostBoost => "host-boost",
            PolicyKind::HostBoostIdeal => "host-boost-ideal",
            PolicyKind::HostSlice => "host-slice",
            PolicyKind::VbalanceIr => "vbalance-ir",
            PolicyKind::VbalanceProcstat => "vbalance-procstat",
            PolicyKind::VbalanceProcstatIr => "vbalance-procstat-ir",
            PolicyKind::VbalanceTick => "vbalance-tick",
            PolicyKind::VbalanceTickIr => "vbalance-tick-ir",
            PolicyKind::VbalanceOracle => "vbalance-oracle",
            PolicyKind::VbalanceChase => "vbalance-chase",
        }
    }

    /// Parse a policy name (the names of [`PolicyKind::name`]).
    pub fn from_name(s: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The detector of a vBalance variant (`None` for static and irqbalance).
    pub fn detector(self) -> Option<Detector> {
        match self {
            PolicyKind::Static
            | PolicyKind::Irqbalance
            | PolicyKind::HostBoost
            | PolicyKind::HostBoostIdeal
            | PolicyKind::HostSlice => None,
            PolicyKind::VbalanceProcstat | PolicyKind::VbalanceProcstatIr => {
                Some(Detector::Procstat)
            }
            PolicyKind::VbalanceTick | PolicyKind::VbalanceTickIr => Some(Detector::Tick),
            PolicyKind::Vbalance
            | PolicyKind::VbalanceGuest
            | PolicyKind::VbalanceIr
            | PolicyKind::VbalanceChase => Some(Detector::Flag),
            PolicyKind::VbalanceOracle => Some(Detector::Oracle),
        }
    }

    /// What an affinity write does under this policy.
    pub fn moves(self) -> MoveSemantics {
        match self {
            PolicyKind::VbalanceOracle => MoveSemantics::Rebind,
            PolicyKind::VbalanceIr
            | PolicyKind::VbalanceProcstatIr
            | PolicyKind::VbalanceTickIr => MoveSemantics::Direct,
            _ => MoveSemantics::Deferred,
        }
    }

    /// How the daemon runs the policy on this guest: what it detects of the guest's moves
    /// (`vbalance-chase` ignores it, as the former default did).
    pub fn policy_moves(self) -> irqbal::MoveKind {
        match (self, self.moves()) {
            (PolicyKind::VbalanceChase, _) => irqbal::MoveKind::Direct,
            (_, MoveSemantics::Deferred) => irqbal::MoveKind::Deferred,
            _ => irqbal::MoveKind::Direct,
        }
    }

    /// The policy configuration this variant runs: the scenario's, with the move semantics
    /// the daemon would detect; `vbalance-chase` (the former default) and the oracle (the
    /// paper's design, where a rebind carries a raised interrupt along) follow the preempted
    /// flag with every IRQ.
    pub fn policy_config(self, spec: &VbalanceSpec) -> irqbal::PolicyConfig {
        let mut c = spec.policy_config().with_moves(self.policy_moves());
        if matches!(self, PolicyKind::VbalanceChase | PolicyKind::VbalanceOracle) {
            c.chase_max_load = 0.0;
        }
        c
    }

    /// Runs the `irqbal` policy.
    pub fn is_vbalance(self) -> bool {
        self.detector().is_some()
    }

    /// Has the host agent boost vCPUs with interrupts waiting (EEVDF hosts only).
    pub fn host_boost(self) -> bool {
        matches!(
            self,
            PolicyKind::Vbalance | PolicyKind::HostBoost | PolicyKind::HostBoostIdeal
        )
    }

    /// The boost also ends when the guest's interrupt work is done (the bound), not only at
    /// a halt or the budget (what the agent sees).
    pub fn boost_ends_with_work(self) -> bool {
        self == PolicyKind::HostBoostIdeal
    }

    /// Gives the vCPU threads the `[host] slice_us` EEVDF slice.
    pub fn host_slice(self) -> bool {
        self == PolicyKind::HostSlice
    }
}

/// What a VM's vCPUs do besides interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Workload {
    /// Always runnable (the paper's CPU burn script in every vCPU).
    Burn,
    /// Halts when there is no interrupt work.
    Idle,
    /// Computes `compute_us`, then blocks on I/O for `io_us`, in a loop.
    Io { compute_us: u64, io_us: u64 },
}

fn default_ring() -> u32 {
    256
}
fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    pub vcpus: u32,
    /// Physical CPU of each vCPU (vCPU i runs only on `pin[i]`). Default: vCPU i on pCPU
    /// i mod pcpus.
    #[serde(default)]
    pub pin: Option<Vec<u32>>,
    pub workload: Workload,
    /// NIC queues, each with its own IRQ (a multi-queue virtio-net has one per queue).
    #[serde(default = "one")]
    pub queues: u32,
    /// Ring size of each queue, in packet slots (virtio-net default 256).
    #[serde(default = "default_ring")]
    pub ring: u32,
}

/// An interrupt source feeding one NIC queue of one VM from an external machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceSpec {
    /// ICMP echo every `interval_ms`; the guest answers from the interrupt handler.
    Ping {
        vm: u32,
        #[serde(default)]
        queue: u32,
        #[serde(default = "default_ping_interval")]
        interval_ms: u64,
        #[serde(default = "default_ping_size")]
        size: u32,
    },
    /// netperf TCP_STREAM into the VM: a window-limited closed loop, MSS-sized segments
    /// (Nagle coalesces small messages), delayed ACK every 2 segments or after 40 ms.
    Tcp {
        vm: u32,
        #[serde(default)]
        queue: u32,
        #[serde(default = "default_msg")]
        message_size: u32,
        #[serde(default = "default_window")]
        window_kb: u32,
    },
    /// netperf UDP_STREAM into the VM: datagrams at link rate; a datagram that does not fit
    /// the ring is dropped.
    Udp {
        vm: u32,
        #[serde(default)]
        queue: u32,
        #[serde(default = "default_msg")]
        message_size: u32,
    },
}

fn default_ping_interval() -> u64 {
    100
}
fn default_ping_size() -> u32 {
    64
}
fn default_msg() -> u32 {
    4096
}
fn default_window() -> u32 {
    128
}

impl SourceSpec {
    pub fn vm(&self) -> u32 {
        match self {
            SourceSpec::Ping { vm, .. }
            | SourceSpec::Tcp { vm, .. }
            | SourceSpec::Udp { vm, .. } => *vm,
        }
    }
    pub fn queue(&self) -> u32 {
        match self {
            SourceSpec::Ping { queue, .. }
            | SourceSpec::Tcp { queue, .. }
            | SourceSpec::Udp { queue, .. } => *queue,
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            SourceSpec::Ping { .. } => "ping",
            SourceSpec::Tcp { .. } => "tcp",
            SourceSpec::Udp { .. } => "udp",
        }
    }
}

/// Network and guest-cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetSpec {
    /// Link rate of the external sender, Mbit/s.
    pub link_mbps: f64,
    /// One-way wire + backend latency, µs.
    pub one_way_us: f64,
    /// Guest CPU cost per packet (interrupt + protocol), ns.
    pub pkt_ns: f64,
    /// Guest CPU cost per payload byte (copy), ns.
    pub byte_ns: f64,
    /// Guest CPU cost per application message (netserver recv call), ns.
    pub msg_ns: f64,
    /// TCP maximum segment size, bytes.
    pub mss: u32,
    /// Delayed-ACK timeout, ms.
    pub delack_ms: f64,
}

impl Default for NetSpec {
    fn default() -> Self {
        Self {
            link_mbps: 1000.0,
            one_way_us: 50.0,
            pkt_ns: 2000.0,
            byte_ns: 1.0,
            msg_ns: 1000.0,
            mss: 1448,
            delack_ms: 40.0,
        }
    }
}

/// Credit scheduler parameters (Xen credit1 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CreditSpec {
    pub timeslice_ms: f64,
    pub tick_ms: f64,
    /// Ticks per accounting period (credit1: 3, i.e. 30 ms).
    pub ticks_per_acct: u32,
}

impl Default for CreditSpec {
    fn default() -> Self {
        Self {
            timeslice_ms: 30.0,
            tick_ms: 10.0,
            ticks_per_acct: 3,
        }
    }
}

/// EEVDF parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EevdfSpec {
    /// Base slice (sysctl `kernel.sched_base_slice_ns`), µs.
    pub slice_us: f64,
}

impl Default for EevdfSpec {
    fn default() -> Self {
        Self { slice_us: 3000.0 }
    }
}

/// The host half on a KVM (EEVDF) host: `vmtune irq boost` and the vCPU threads' slice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostSpec {
    /// From an interrupt accepted for a waiting vCPU to that vCPU's thread raised, median and
    /// 99th percentile, µs: what `vmtune irq boost` itself reports (accept → raise decided: the
    /// program's event through the ring buffer and the agent's wake-up; `sched_setattr` follows) for
    /// MSIs sent into a KVM VM on the development machine, a KVM guest itself, two runs of 300:
    /// p50 111 / 120 µs, p99 270 / 176 µs (the slower p99 kept). A synthetic trigger
    /// (`vmtune bench boost`: an eventfd instead of the ring buffer) gives p50 56, p99 ~137 µs.
    /// Drawn from a shifted exponential with these two quantiles.
    pub boost_reaction_p50_us: f64,
    pub boost_reaction_p99_us: f64,
    /// A context switch, µs: the CPU time each boost loses switching in and out.
    pub switch_us: f64,
    /// Longest boost, µs: the vCPU goes back to its class after this even with work left.
    pub boost_budget_us: f64,
    /// The bound's (`host-boost-ideal`'s) end of the interrupt work: the vCPU has had none for
    /// this long, µs (0: as soon as its pending interrupts are serviced). The agent itself
    /// cannot see it.
    pub boost_quiet_us: f64,
    /// Most of one CPU a VM may take through boosts, over `boost_window_ms`.
    pub boost_max_share: f64,
    pub boost_window_ms: f64,
    /// Which waiting vCPUs the agent raises (`vmtune irq boost --on`; its default,
    /// `preempted`).
    pub boost_on: irqbal::wait::boost::BoostOn,
    /// How long an interrupt waits before the agent makes a boost charged to the VM's share
    /// (one over another tenant), µs; its vCPU entering the guest first cancels it.
    pub boost_grace_us: f64,
    /// The vCPU threads' EEVDF slice (`host-slice`), µs (the base slice is `[eevdf]`'s).
    pub slice_us: f64,
    /// Whether the host runs the HRTICK scheduler feature: without it a slice ends at the
    /// next scheduler tick at the earliest (Debian kernels: HZ=250, 4 ms).
    pub hrtick: bool,
    pub tick_us: f64,
}

impl Default for HostSpec {
    fn default() -> Self {
        Self {
            boost_reaction_p50_us: 115.0,
            boost_reaction_p99_us: 270.0,
            switch_us: 3.0,
            boost_budget_us: 2000.0,
            boost_quiet_us: 0.0,
            boost_max_share: 0.05,
            boost_window_ms: 100.0,
            boost_on: irqbal::wait::boost::BoostOn::Preempted,
            boost_grace_us: 0.0,
            slice_us: 300.0,
            hrtick: false,
            tick_us: 4000.0,
        }
    }
}

impl HostSpec {
    /// The agent's configuration, as `vmtune irq boost --budget-us --max-share --window-ms
    /// --on` would give it.
    pub fn boost_config(&self) -> irqbal::wait::boost::BoostConfig {
        irqbal::wait::boost::BoostConfig {
            budget_ns: ((self.boost_budget_us * 1e3) as u64).max(1),
            max_share: self.boost_max_share,
            window_ns: ((self.boost_window_ms * 1e6) as u64).max(1),
            on: self.boost_on,
            grace_ns: (self.boost_grace_us * 1e3) as u64,
        }
    }
}

/// vBalance parameters of the simulated guest and daemon.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VbalanceSpec {
    /// `extended` (the daemon's default: many-to-many, hysteresis, rate limit, load floor) or
    /// `paper` (Algorithm 1: many-to-one, no hysteresis).
    pub variant: VbalanceVariant,
    pub threshold: f64,
    /// Loads (fraction of a CPU in interrupt work) below this count as this when comparing
    /// max/min, so near-idle vCPUs do not look infinitely imbalanced (the daemon's default).
    pub load_floor: f64,
    /// Guest tick (µs; 4000 = HZ 250): the eBPF program and the tick detector read their
    /// signals at it, `/proc/stat` steal is accounted at it.
    pub tick_us: f64,
    /// Half-life of the per-vCPU / per-IRQ interrupt load, ms.
    pub load_half_life_ms: f64,
    /// Enable the paper's SMP_BOOST hypervisor fast path (credit scheduler, oracle only).
    pub smp_boost: bool,
    /// `/proc/stat` detector: sampling interval, ms (the daemon's `--interval-ms`).
    pub procstat_interval_ms: f64,
    /// `/proc/stat` detector: steal fraction of the window above which a vCPU is preempted.
    pub procstat_steal_threshold: f64,
    /// Daemon CPU time for one `/proc` sample and decision, µs.
    pub procstat_read_us: f64,
    /// Tick detector: a vCPU silent for this many ticks while not halted is preempted.
    pub tick_miss: f64,
    /// eBPF program: least time between two scans by one vCPU, µs.
    pub scan_gap_us: f64,
    /// From a ring-buffer event to the daemon running on the observing vCPU, µs.
    pub wake_us: f64,
    /// The daemon's decision and affinity write (`/proc/irq/N/smp_affinity_list`), µs.
    pub write_us: f64,
    /// eBPF and tick daemons: the load window (`/proc/stat`, `/proc/interrupts` sampled and a
    /// decision made), ms (the daemon's default with eBPF: 1000).
    pub window_ms: f64,
    /// Deferred-move guests: the availability window (preemption episodes, steal), ms.
    pub avail_window_ms: f64,
    /// Deferred-move guests: a vCPU is clearly worse than another when its expected interrupt
    /// wait exceeds the other's times this ratio plus `avail_margin_us`.
    pub avail_ratio: f64,
    pub avail_margin_us: f64,
    /// Direct-move guests: an IRQ with at least this load (fraction of a CPU) is a busy queue,
    /// placed by availability instead of following the preempted flag (0: every IRQ follows
    /// it). `vbalance-chase` and `vbalance-oracle` always use 0.
    pub chase_max_load: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VbalanceVariant {
    Paper,
    Extended,
}

impl Default for VbalanceSpec {
    fn default() -> Self {
        Self {
            variant: VbalanceVariant::Extended,
            threshold: 1.5,
            load_floor: irqbal::PolicyConfig::extended().load_floor,
            tick_us: 4000.0,
            load_half_life_ms: 500.0,
            smp_boost: true,
            procstat_interval_ms: 200.0,
            procstat_steal_threshold: 0.10,
            procstat_read_us: DAEMON_PROCSTAT_READ_US,
            tick_miss: 1.5,
            scan_gap_us: 100.0,
            wake_us: DAEMON_WAKE_US,
            write_us: DAEMON_WRITE_US,
            window_ms: irqbal::daemon::INTERVAL_EBPF.as_secs_f64() * 1e3,
            avail_window_ms: irqbal::avail::DEFAULT_WINDOW_NS as f64 / 1e6,
            avail_ratio: irqbal::policy::DEFAULT_AVAIL_RATIO,
            avail_margin_us: irqbal::policy::DEFAULT_AVAIL_MARGIN_NS / 1e3,
            chase_max_load: irqbal::policy::DEFAULT_CHASE_MAX_LOAD,
        }
    }
}

/// Daemon latencies measured on this project's 2-vCPU KVM guest (kernel 6.18, both vCPUs
/// busy, the daemon at SCHED_FIFO 1, release build, `vmtune irq balance --json` for 120 s):
/// from the eBPF program seeing a preemption to the daemon reading it, median 68 µs (p90 94,
/// n = 116); from seeing it to the affinity written, median about 170 µs (n = 6, 156–283 µs),
/// so the decision and write take about 100 µs. A `/proc` sample and decision: 218 µs mean.
pub const DAEMON_WAKE_US: f64 = 68.0;
pub const DAEMON_WRITE_US: f64 = 100.0;
pub const DAEMON_PROCSTAT_READ_US: f64 = 218.0;

impl VbalanceSpec {
    pub fn policy_config(&self) -> irqbal::PolicyConfig {
        let mut c = match self.variant {
            VbalanceVariant::Paper => irqbal::PolicyConfig::paper(),
            VbalanceVariant::Extended => irqbal::PolicyConfig::extended(),
        };
        c.threshold = self.threshold;
        c.load_floor = self.load_floor;
        c.avail_ratio = self.avail_ratio;
        c.avail_margin_ns = self.avail_margin_us * 1e3;
        c.chase_max_load = self.chase_max_load;
        c
    }
}

/// A sweep over message sizes: one run per size, each setting every stream's message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    #[serde(default)]
    pub message_sizes: Vec<u32>,
}

fn default_seed() -> u64 {
    1
}
fn default_schedulers() -> Vec<SchedulerKind> {
    vec![SchedulerKind::Credit, SchedulerKind::Eevdf]
}
fn default_policies() -> Vec<PolicyKind> {
    PolicyKind::ALL.to_vec()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub duration_ms: u64,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub pcpus: u32,
    #[serde(default = "default_schedulers")]
    pub schedulers: Vec<SchedulerKind>,
    #[serde(default = "default_policies")]
    pub policies: Vec<PolicyKind>,
    /// irqbalance rebalance period, ms (10 s by default).
    #[serde(default = "default_irqbalance_ms")]
    pub irqbalance_period_ms: u64,
    #[serde(default)]
    pub net: NetSpec,
    #[serde(default)]
    pub credit: CreditSpec,
    #[serde(default)]
    pub eevdf: EevdfSpec,
    #[serde(default)]
    pub vbalance: VbalanceSpec,
    #[serde(default)]
    pub host: HostSpec,
    #[serde(default)]
    pub sweep: Sweep,
    #[serde(rename = "vm")]
    pub vms: Vec<VmSpec>,
    #[serde(rename = "source", default)]
    pub sources: Vec<SourceSpec>,
}

fn default_irqbalance_ms() -> u64 {
    10_000
}

impl Scenario {
    /// Parse and validate a TOML scenario; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ScenarioError> {
        let s: Scenario = toml::from_str(text)
            .map_err(|e| ScenarioError::Toml(origin.into(), e.message().replace('\n', " ")))?;
        s.validate()
            .map_err(|m| ScenarioError::Invalid(origin.into(), m))?;
        Ok(s)
    }

    /// Read a TOML scenario file.
    pub fn load(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| ScenarioError::Io(origin.clone(), e))?;
        Self::from_toml(&text, &origin)
    }

    /// Check every field; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_sizes()?;
        self.validate_vms()?;
        self.validate_net()?;
        self.validate_schedulers()?;
        self.validate_host()?;
        self.validate_vbalance()?;
        self.validate_sources()?;
        self.validate_sweep()
    }

    /// The run: its length, pCPUs, VMs, variants and the irqbalance period.
    fn validate_sizes(&self) -> Result<(), String> {
        if self.duration_ms == 0 || self.duration_ms > MAX_DURATION_MS {
            return Err(format!(
                "duration_ms must be 1..={MAX_DURATION_MS}, got {}",
                self.duration_ms
            ));
        }
        if self.pcpus == 0 || self.pcpus > MAX_PCPUS {
            return Err(format!("pcpus must be 1..={MAX_PCPUS}, got {}", self.pcpus));
        }
        if self.vms.is_empty() {
            return Err("at least one [[vm]] is needed".into());
        }
        if self.schedulers.is_empty() || self.policies.is_empty() {
            return Err("schedulers and policies must not be empty".into());
        }
        if self.irqbalance_period_ms == 0 || self.irqbalance_period_ms > MAX_DURATION_MS {
            return Err(format!(
                "irqbalance_period_ms must be 1..={MAX_DURATION_MS}"
            ));
        }
        let total_vcpus: u64 = self.vms.iter().map(|v| v.vcpus as u64).sum();
        if total_vcpus > MAX_VCPUS as u64 * 4 {
            return Err(format!("too many vCPUs in total ({total_vcpus})"));
        }
        Ok(())
    }

    /// Each VM: vCPUs, pinning, queues, ring and workload.
    fn validate_vms(&self) -> Result<(), String> {
        for (i, vm) in self.vms.iter().enumerate() {
            if vm.vcpus == 0 || vm.vcpus > MAX_VCPUS {
                return Err(format!(
                    "vm[{i}].vcpus must be 1..={MAX_VCPUS}, got {}",
                    vm.vcpus
                ));
            }
            if let Some(pin) = &vm.pin {
                if pin.len() != vm.vcpus as usize {
                    return Err(format!(
                        "vm[{i}].pin has {} entries for {} vCPUs",
                        pin.len(),
                        vm.vcpus
                    ));
                }
                if let Some(p) = pin.iter().find(|&&p| p >= self.pcpus) {
                    return Err(format!(
                        "vm[{i}].pin names pCPU {p}, but pcpus = {}",
                        self.pcpus
                    ));
                }
            }
            if vm.queues == 0 || vm.queues > MAX_QUEUES {
                return Err(format!(
                    "vm[{i}].queues must be 1..={MAX_QUEUES}, got {}",
                    vm.queues
                ));
            }
            if vm.ring == 0 || vm.ring > MAX_RING {
                return Err(format!(
                    "vm[{i}].ring must be 1..={MAX_RING}, got {}",
                    vm.ring
                ));
            }
            if let Workload::Io { compute_us, io_us } = vm.workload {
                if compute_us == 0 || io_us == 0 || compute_us > 60_000_000 || io_us > 60_000_000 {
                    return Err(format!(
                        "vm[{i}].workload io: compute_us and io_us must be 1..=60000000"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The network model's costs and sizes.
    fn validate_net(&self) -> Result<(), String> {
        let n = &self.net;
        finite_pos(n.link_mbps, "net.link_mbps")?;
        if n.link_mbps > 1e7 {
            return Err("net.link_mbps must be at most 1e7".into());
        }
        finite_nonneg(n.one_way_us, "net.one_way_us")?;
        if n.one_way_us > 1e7 {
            return Err("net.one_way_us must be at most 1e7".into());
        }
        finite_pos(n.pkt_ns, "net.pkt_ns")?;
        finite_nonneg(n.byte_ns, "net.byte_ns")?;
        finite_nonneg(n.msg_ns, "net.msg_ns")?;
        if n.pkt_ns > 1e9 || n.byte_ns > 1e6 || n.msg_ns > 1e9 {
            return Err("net costs are unreasonably large".into());
        }
        if !(64..=65_000).contains(&n.mss) {
            return Err(format!("net.mss must be 64..=65000, got {}", n.mss));
        }
        finite_pos(n.delack_ms, "net.delack_ms")?;
        Ok(())
    }

    /// The credit and EEVDF schedulers' times.
    fn validate_schedulers(&self) -> Result<(), String> {
        finite_pos(self.credit.timeslice_ms, "credit.timeslice_ms")?;
        finite_pos(self.credit.tick_ms, "credit.tick_ms")?;
        if self.credit.timeslice_ms < 0.1 || self.credit.tick_ms < 0.1 {
            return Err("credit.timeslice_ms and credit.tick_ms must be at least 0.1".into());
        }
        if self.credit.timeslice_ms > 1e5 || self.credit.tick_ms > 1e5 {
            return Err("credit times must be at most 100000 ms".into());
        }
        if self.credit.ticks_per_acct == 0 || self.credit.ticks_per_acct > 1000 {
            return Err("credit.ticks_per_acct must be 1..=1000".into());
        }
        finite_pos(self.eevdf.slice_us, "eevdf.slice_us")?;
        if !(10.0..=1e6).contains(&self.eevdf.slice_us) {
            return Err("eevdf.slice_us must be 10..=1000000".into());
        }
        Ok(())
    }

    /// The host agent's (boost) timings and shares.
    fn validate_host(&self) -> Result<(), String> {
        let h = &self.host;
        for (v, what) in [
            (h.boost_reaction_p50_us, "host.boost_reaction_p50_us"),
            (h.boost_reaction_p99_us, "host.boost_reaction_p99_us"),
            (h.boost_budget_us, "host.boost_budget_us"),
            (h.boost_window_ms * 1000.0, "host.boost_window_ms"),
            (h.slice_us, "host.slice_us"),
            (h.tick_us, "host.tick_us"),
        ] {
            finite_pos(v, what)?;
            if v > 1e9 {
                return Err(format!("{what} is too large"));
            }
        }
        finite_nonneg(h.switch_us, "host.switch_us")?;
        finite_nonneg(h.boost_quiet_us, "host.boost_quiet_us")?;
        finite_nonneg(h.boost_grace_us, "host.boost_grace_us")?;
        if h.boost_grace_us > 1e9 {
            return Err("host.boost_grace_us is too large".into());
        }
        if h.switch_us > 1e6 || h.boost_quiet_us > 1e9 {
            return Err("host.switch_us or host.boost_quiet_us is too large".into());
        }
        if h.boost_reaction_p99_us < h.boost_reaction_p50_us {
            return Err("host.boost_reaction_p99_us must be at least its p50".into());
        }
        if !(h.boost_max_share > 0.0 && h.boost_max_share <= 1.0) {
            return Err(format!(
                "host.boost_max_share must be in (0, 1], got {}",
                h.boost_max_share
            ));
        }
        if h.slice_us < 10.0 || h.tick_us < 10.0 {
            return Err("host.slice_us and host.tick_us must be at least 10".into());
        }
        Ok(())
    }

    /// The vBalance policy and its daemons' timings.
    fn validate_vbalance(&self) -> Result<(), String> {
        let vb = &self.vbalance;
        finite_pos(vb.tick_us, "vbalance.tick_us")?;
        if vb.tick_us < 10.0 {
            return Err("vbalance.tick_us must be at least 10".into());
        }
        finite_pos(vb.load_half_life_ms, "vbalance.load_half_life_ms")?;
        if vb.tick_us > 1e9 || vb.load_half_life_ms > 1e9 || self.net.delack_ms > 1e7 {
            return Err(
                "vbalance.tick_us, vbalance.load_half_life_ms or net.delack_ms is too large".into(),
            );
        }
        vb.policy_config()
            .validate()
            .map_err(|e| format!("vbalance: {e}"))?;
        // daemon timings: positive (a move is never instantaneous for the daemon variants, so
        // no decision can loop at one instant) and below an hour
        for (v, what) in [
            (
                vb.procstat_interval_ms * 1000.0,
                "vbalance.procstat_interval_ms",
            ),
            (vb.procstat_read_us, "vbalance.procstat_read_us"),
            (vb.scan_gap_us, "vbalance.scan_gap_us"),
            (vb.wake_us, "vbalance.wake_us"),
            (vb.write_us, "vbalance.write_us"),
            (vb.window_ms * 1000.0, "vbalance.window_ms"),
            (vb.avail_window_ms * 1000.0, "vbalance.avail_window_ms"),
        ] {
            finite_pos(v, what)?;
            if v > 3.6e9 {
                return Err(format!("{what} is too large"));
            }
        }
        if vb.window_ms < 10.0 || vb.avail_window_ms < 10.0 {
            return Err(
                "vbalance.window_ms and vbalance.avail_window_ms must be at least 10".into(),
            );
        }
        if vb.procstat_interval_ms < 10.0 {
            return Err("vbalance.procstat_interval_ms must be at least 10 (USER_HZ ticks)".into());
        }
        if !(vb.procstat_steal_threshold.is_finite()
            && (0.0..=1.0).contains(&vb.procstat_steal_threshold))
        {
            return Err("vbalance.procstat_steal_threshold must be within 0..=1".into());
        }
        if !(vb.tick_miss.is_finite() && (1.0..=1000.0).contains(&vb.tick_miss)) {
            return Err("vbalance.tick_miss must be within 1..=1000 ticks".into());
        }
        Ok(())
    }

    /// Each traffic source: its VM, queue and sizes.
    fn validate_sources(&self) -> Result<(), String> {
        let n = &self.net;
        for (i, s) in self.sources.iter().enumerate() {
            let vm = self.vms.get(s.vm() as usize).ok_or_else(|| {
                format!(
                    "source[{i}] names vm {} but there are {}",
                    s.vm(),
                    self.vms.len()
                )
            })?;
            if s.queue() >= vm.queues {
                return Err(format!(
                    "source[{i}] names queue {} but vm {} has {}",
                    s.queue(),
                    s.vm(),
                    vm.queues
                ));
            }
            match *s {
                SourceSpec::Ping {
                    interval_ms, size, ..
                } => {
                    if interval_ms == 0
                        || interval_ms > MAX_DURATION_MS
                        || !(1..=65_507).contains(&size)
                    {
                        return Err(format!(
                            "source[{i}] ping: interval_ms must be 1..={MAX_DURATION_MS}, size 1..=65507"
                        ));
                    }
                }
                SourceSpec::Tcp {
                    message_size,
                    window_kb,
                    ..
                } => {
                    if message_size == 0 || message_size > 1 << 20 {
                        return Err(format!("source[{i}] tcp: message_size must be 1..=1048576"));
                    }
                    let segs = (window_kb as u64 * 1024).div_ceil(n.mss as u64);
                    if window_kb == 0 || segs > vm.ring as u64 {
                        return Err(format!(
                            "source[{i}] tcp: window_kb {window_kb} is {segs} segments; it must be \
                             1..=ring ({}) so that TCP never overflows the ring (loss recovery is \
                             not modelled)",
                            vm.ring
                        ));
                    }
                }
                SourceSpec::Udp { message_size, .. } => {
                    if !(1..=65_507).contains(&message_size) {
                        return Err(format!("source[{i}] udp: message_size must be 1..=65507"));
                    }
                    if udp_slots(message_size) > vm.ring {
                        return Err(format!(
                            "source[{i}] udp: a datagram needs more slots than the ring has"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The message-size sweep: every size fits each UDP source's ring.
    fn validate_sweep(&self) -> Result<(), String> {
        for &m in &self.sweep.message_sizes {
            if !(1..=65_507).contains(&m) {
                return Err(format!("sweep.message_sizes: {m} is not 1..=65507"));
            }
            for (i, s) in self.sources.iter().enumerate() {
                if let SourceSpec::Udp { vm, .. } = s {
                    let ring = self.vms.get(*vm as usize).map_or(0, |v| v.ring);
                    if udp_slots(m) > ring {
                        return Err(format!(
                            "sweep size {m}: source[{i}] datagrams would not fit the ring"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The scenario with every stream's message size set to `size`.
    pub fn with_message_size(&self, size: u32) -> Scenario {
        let mut s = self.clone();
        for src in &mut s.sources {
            match src {
                SourceSpec::Tcp { message_size, .. } | SourceSpec::Udp { message_size, .. } => {
                    *message_size = size
                }
                SourceSpec::Ping { .. } => {}
            }
        }
        s
    }
}

/// Ring slots a UDP datagram of `size` bytes takes (one per IP fragment of a 1500-byte MTU).
pub fn udp_slots(size: u32) -> u32 {
    size.div_ceil(1472).max(1)
}

/// Names of the built-in scenarios.
pub const BUILTINS: &[&str] = &[
    "vbalance-fig5",
    "vbalance-fig6",
    "vbalance-fig6-tcp",
    "vbalance-fig6-udp",
    "vbalance-more",
    "vbalance-mixed",
    "vbalance-shared-core",
    "vbalance-two-vms",
    "vbalance-wide",
];

fn paper_vm() -> VmSpec {
    VmSpec {
        vcpus: 4,
        pin: Some(vec![0, 0, 0, 0]),
        workload: Workload::Burn,
        queues: 1,
        ring: 256,
    }
}

fn base(name: &str, description: &str, duration_ms: u64, sources: Vec<SourceSpec>) -> Scenario {
    Scenario {
        name: name.into(),
        description: description.into(),
        duration_ms,
        seed: 1,
        pcpus: 1,
        schedulers: default_schedulers(),
        policies: default_policies(),
        irqbalance_period_ms: 10_000,
        net: NetSpec::default(),
        credit: CreditSpec::default(),
        eevdf: EevdfSpec::default(),
        vbalance: VbalanceSpec::default(),
        host: HostSpec::default(),
        sweep: Sweep::default(),
        vms: vec![paper_vm()],
        sources,
    }
}

/// The message sizes of the fig6 sweeps.
pub const FIG6_SIZES: &[u32] = &[64, 256, 1024, 4096, 16384];

/// The fig6 sweep of one stream kind (`tcp`, else UDP).
fn fig6(kind: &str) -> Scenario {
    let src = match kind {
        "tcp" => SourceSpec::Tcp {
            vm: 0,
            queue: 0,
            message_size: 4096,
            window_kb: 128,
        },
        _ => SourceSpec::Udp {
            vm: 0,
            queue: 0,
            message_size: 4096,
        },
    };
    let mut s = base(
        &format!("vbalance-fig6-{kind}"),
        &format!(
            "vBalance paper 5.2.2: netperf {}_STREAM into a 4-vCPU VM whose vCPUs all burn CPU \
                 on one physical core, over message sizes",
            kind.to_ascii_uppercase()
        ),
        10_000,
        vec![src],
    );
    s.sweep.message_sizes = FIG6_SIZES.to_vec();
    s
}

fn vm(vcpus: u32, pin: Option<Vec<u32>>, workload: Workload, queues: u32) -> VmSpec {
    VmSpec {
        vcpus,
        pin,
        workload,
        queues,
        ring: 256,
    }
}

fn ping(vm: u32, queue: u32) -> SourceSpec {
    SourceSpec::Ping {
        vm,
        queue,
        interval_ms: 100,
        size: 64,
    }
}

fn tcp(vm: u32, queue: u32, message_size: u32) -> SourceSpec {
    SourceSpec::Tcp {
        vm,
        queue,
        message_size,
        window_kb: 128,
    }
}

fn udp(vm: u32, queue: u32, message_size: u32) -> SourceSpec {
    SourceSpec::Udp {
        vm,
        queue,
        message_size,
    }
}

/// One of the `vbalance-more` scenarios (`vbalance-wide` for any other name).
fn more(name: &str) -> Scenario {
    match name {
        "vbalance-mixed" => {
            let mut s = base(
                name,
                "fig5's VM (4 vCPUs on one core, CPU burn) with a ping on one NIC queue and \
                     TCP_STREAM 4 KiB on another",
                30_000,
                vec![ping(0, 0), tcp(0, 1, 4096)],
            );
            s.vms = vec![vm(4, Some(vec![0, 0, 0, 0]), Workload::Burn, 2)];
            s
        }
        "vbalance-shared-core" => {
            let mut s = base(
                name,
                "a 2-vCPU I/O-bound VM whose vCPU0 shares its core with a busy 1-vCPU \
                     co-tenant while vCPU1 has a core to itself; ping and UDP_STREAM 1 KiB",
                30_000,
                vec![ping(0, 0), udp(0, 1, 1024)],
            );
            s.pcpus = 2;
            let io = Workload::Io {
                compute_us: 2000,
                io_us: 1000,
            };
            s.vms = vec![
                vm(2, Some(vec![0, 1]), io, 2),
                vm(1, Some(vec![0]), Workload::Burn, 1),
            ];
            s
        }
        "vbalance-two-vms" => {
            let mut s = base(
                name,
                "two VMs on two cores: a 4-vCPU CPU burner (vCPUs on cores 0,0,1,1) pinged \
                     and receiving TCP_STREAM 4 KiB, beside a 2-vCPU I/O-bound VM",
                30_000,
                vec![ping(0, 0), tcp(0, 1, 4096)],
            );
            s.pcpus = 2;
            s.vms = vec![
                vm(4, Some(vec![0, 0, 1, 1]), Workload::Burn, 2),
                vm(
                    2,
                    Some(vec![0, 1]),
                    Workload::Io {
                        compute_us: 500,
                        io_us: 2000,
                    },
                    1,
                ),
            ];
            s
        }
        _ => {
            let mut s = base(
                "vbalance-wide",
                "8 vCPUs on 2 cores (4:1), CPU burn, a 4-queue NIC: ping, UDP_STREAM 1 KiB \
                     and 4 KiB, TCP_STREAM 4 KiB",
                30_000,
                vec![
                    ping(0, 0),
                    udp(0, 1, 1024),
                    udp(0, 2, 4096),
                    tcp(0, 3, 4096),
                ],
            );
            s.pcpus = 2;
            s.vms = vec![vm(8, None, Workload::Burn, 4)];
            s
        }
    }
}

/// A built-in scenario set by name. `vbalance-fig6` is the TCP and the UDP sweep.
pub fn builtin(name: &str) -> Result<Vec<Scenario>, ScenarioError> {
    match name {
        "vbalance-more" => Ok([
            "vbalance-mixed",
            "vbalance-shared-core",
            "vbalance-two-vms",
            "vbalance-wide",
        ]
        .into_iter()
        .map(more)
        .collect()),
        "vbalance-mixed" | "vbalance-shared-core" | "vbalance-two-vms" | "vbalance-wide" => {
            Ok(vec![more(name)])
        }
        "vbalance-fig5" => Ok(vec![base(
            "vbalance-fig5",
            "vBalance paper 5.2.1: 4-vCPU VM, all vCPUs on one physical core, CPU burn in every \
             vCPU, ping every 100 ms for 60 s",
            60_000,
            vec![SourceSpec::Ping {
                vm: 0,
                queue: 0,
                interval_ms: 100,
                size: 64,
            }],
        )]),
        "vbalance-fig6" => Ok(vec![fig6("tcp"), fig6("udp")]),
        "vbalance-fig6-tcp" => Ok(vec![fig6("tcp")]),
        "vbalance-fig6-udp" => Ok(vec![fig6("udp")]),
        _ => Err(ScenarioError::UnknownBuiltin(
            name.into(),
            BUILTINS.join(", "),
        )),
    }
}

fn finite_pos(v: f64, what: &str) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be a positive number, got {v}"))
    }
}

fn finite_nonneg(v: f64, what: &str) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be a non-negative number, got {v}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_validate() {
        for b in BUILTINS {
            for s in builtin(b).unwrap() {
                s.validate().unwrap();
            }
        }
        assert!(builtin("nope").is_err());
    }

    #[test]
    fn builtins_round_trip_through_toml() {
        for s in BUILTINS.iter().flat_map(|b| builtin(b).unwrap()) {
            let text = toml::to_string(&s).unwrap();
            let back = Scenario::from_toml(&text, "x.toml").unwrap();
            assert_eq!(back, s);
        }
    }

    #[test]
    fn parses_the_doc_example() {
        let text = r#"
name = "two-vms"
duration_ms = 20000
pcpus = 2
schedulers = ["credit", "eevdf"]
policies = ["static", "irqbalance", "vbalance"]

[[vm]]
vcpus = 4
pin = [0, 0, 1, 1]
workload = { kind = "burn" }
queues = 1

[[vm]]
vcpus = 2
pin = [0, 1]
workload = { kind = "io", compute_us = 500, io_us = 2000 }

[[source]]
kind = "ping"
vm = 0
interval_ms = 100
"#;
        let s = Scenario::from_toml(text, "ex.toml").unwrap();
        assert_eq!(s.vms.len(), 2);
        assert_eq!(
            s.vms[1].workload,
            Workload::Io {
                compute_us: 500,
                io_us: 2000
            }
        );
        assert_eq!(s.net, NetSpec::default());
    }

    #[test]
    fn bad_scenarios_name_the_problem() {
        let cases = [
            ("name='x'\nduration_ms=0\npcpus=1\n[[vm]]\nvcpus=1\nworkload={kind='burn'}", "duration_ms"),
            ("name='x'\nduration_ms=10\npcpus=1\n[[vm]]\nvcpus=2\npin=[0,1]\nworkload={kind='burn'}", "pCPU 1"),
            ("name='x'\nduration_ms=10\npcpus=1\n[[vm]]\nvcpus=1\nworkload={kind='burn'}\n[[source]]\nkind='ping'\nvm=3", "vm 3"),
            ("name='x'\nduration_ms=10\npcpus=1\n[[vm]]\nvcpus=1\nring=8\nworkload={kind='burn'}\n[[source]]\nkind='tcp'\nvm=0\nwindow_kb=64", "window_kb"),
            ("name='x'\nduration_ms=10\npcpus=1\nbogus=1\n[[vm]]\nvcpus=1\nworkload={kind='burn'}", "bogus"),
            ("name='x'\nduration_ms=10\npcpus=1\n[net]\nlink_mbps=-1\n[[vm]]\nvcpus=1\nworkload={kind='burn'}", "link_mbps"),
            ("name='x'\nduration_ms=10\npcpus=1\n[vbalance]\nchase_max_load=-1\n[[vm]]\nvcpus=1\nworkload={kind='burn'}", "chase max load"),
        ];
        for (text, needle) in cases {
            let e = Scenario::from_toml(text, "f.toml").unwrap_err().to_string();
            assert!(e.starts_with("f.toml: "), "{e}");
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }
}
