//! The vBalance interrupt policy as a pure state machine.
//!
//! This is Algorithm 1 of the vBalance paper (Cheng & Wang, section 3.3.2) extended the way its
//! future-work section asks: many IRQs to many vCPUs, each IRQ (each queue of a multi-queue NIC)
//! placed on its own, with hysteresis and a migration rate limit.
//!
//! Inputs per decision ([`Snapshot`]): each vCPU's online/offline status and interrupt load,
//! and each balanced IRQ with its current holder and its own load. Output ([`Decision`]): the
//! new IRQ → vCPU map and the moves that lead there, each with its [`Reason`].
//!
//! The simulator (`sim` crate) and the daemon ([`crate::daemon`]) both call [`Policy::decide`];
//! nothing else decides where an interrupt goes.
//!
//! # Algorithm 1, per IRQ
//! 1. `avg` = mean load over **all** vCPUs (online or not); online vCPUs above it are `HIGH`,
//!    the others `LOW`.
//! 2. If the holder is offline: move to the least loaded online vCPU ([`Reason::HolderOffline`]).
//! 3. Else if the holder is `HIGH` and `max(online) > min(online) × threshold`: move to the
//!    least loaded online vCPU ([`Reason::Imbalance`]).
//! 4. Else stay.
//!
//! With no online vCPU the IRQ stays (the paper's hypervisor fast path handles that case).
//!
//! # Guests whose moves are deferred
//! Algorithm 1 assumes a move takes effect at once (a Xen event channel is rebound, a pending
//! event follows). On x86 without interrupt remapping the guest kernel applies an MSI
//! affinity write only when the IRQ's *next* interrupt is acked on the old vCPU, and that
//! interrupt is still delivered there ([`MoveKind::Deferred`]). So a move always takes effect
//! at a moment when the old holder is *running*; an interrupt already raised on a preempted
//! holder waits for it whatever is written; and the new holder gets the interrupts after that
//! one, when it may well be preempted itself. Chasing the preempted flag then moves a stream's
//! IRQ, at every host slice, to a vCPU that has just been descheduled (measured in the
//! simulator: TCP/UDP 4 KiB 18/48 Mbit/s against 247/263 for static placement).
//!
//! With [`MoveKind::Deferred`] the many-to-many policy therefore never moves on the
//! instantaneous flag ([`Reason::Deferred`]); it places each IRQ by the vCPUs' recent
//! *availability*
//! ([`VcpuView::wait_ns`]: how long an interrupt raised at a random moment has waited for the
//! host to run the vCPU; else [`VcpuView::steal`]):
//! 1. If the holder is clearly worse than the best eligible vCPU (`wait > ratio × best +
//!    margin`), move to the least loaded of the vCPUs that are not clearly worse than the
//!    best ([`Reason::HolderStarved`]), at most once per `avail_dwell_ns` per IRQ.
//! 2. Else balance as Algorithm 1 (with the extension's guards) among the vCPUs that are not
//!    clearly worse than the holder.
//!
//! Where every vCPU is equally available (the paper's four vCPUs on one core) nothing moves
//! for availability, and the result is static placement's, by design. Following the flag
//! there does not help in general: the IRQ's next interrupt lands on a vCPU chosen when the
//! previous one was acked, at a moment independent of the host's schedule, so every target
//! makes it wait as long on average. In the simulator, chasing gave the paper's 100 ms ping a
//! lower p99 under credit (its period beats with the 120 ms round of four 30 ms slices) but a
//! higher mean at 50, 70, 130 and 170 ms (credit at 50 ms: 45 ms against static's 34 ms).
//!
//! # Busy queues on guests with direct moves
//! With interrupt remapping (or the GIC ITS) a write takes the IRQ's next interrupt to the
//! new vCPU, but an interrupt already raised stays, and a busy queue (NAPI polling with its
//! interrupt off) has one raised most of the time. Following the flag with such a queue
//! hands its next interrupt, raised once the preempted holder has drained the ring, to the
//! vCPU that ran at the preemption, which has often been preempted since. An IRQ whose own
//! load is at least [`PolicyConfig::chase_max_load`] is therefore placed by availability as
//! above, among the vCPUs running now (a direct move to a preempted vCPU would make the next
//! interrupt wait there), and stays on a preempted holder ([`Reason::BusyQueue`]); lighter
//! IRQs follow the flag as in Algorithm 1. Where availability figures are given, a light IRQ
//! leaving a preempted holder goes to the least loaded of the running vCPUs that are as
//! available as the best running one, and one whose running holder has made interrupts wait
//! clearly longer than the best running vCPU moves too ([`Reason::HolderStarved`]): a vCPU
//! that is slow to run after each wake-up, behind a busy co-tenant, is never seen preempted.

use serde::{Deserialize, Serialize};

/// A vCPU index: the guest CPU number in the daemon, the vCPU index in the simulator.
pub type Vcpu = u32;

/// One vCPU as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VcpuView {
    pub vcpu: Vcpu,
    /// Running (or able to take an interrupt now): not preempted by the hypervisor.
    pub online: bool,
    /// Interrupt load: irq + softirq time over the recent window as a fraction of one CPU
    /// (the unit of [`PolicyConfig::load_floor`] and [`PolicyConfig::chase_max_load`]; with
    /// both at 0 any unit will do, as long as every vCPU and IRQ of a snapshot share it).
    pub load: f64,
    /// May hold balanced IRQs (false for CPUs excluded by the user).
    pub eligible: bool,
    /// Fraction of the recent past the vCPU spent preempted (steal), when known.
    #[serde(default)]
    pub steal: Option<f64>,
    /// Expected time an interrupt raised on this vCPU at a random moment of the recent past
    /// waited for the host to run it, ns (from its preemption episodes; [`crate::avail`]),
    /// when known.
    #[serde(default)]
    pub wait_ns: Option<f64>,
}

impl VcpuView {
    /// A vCPU with no availability figures (what Algorithm 1 looks at).
    pub fn new(vcpu: Vcpu, online: bool, load: f64, eligible: bool) -> Self {
        Self {
            vcpu,
            online,
            load,
            eligible,
            steal: None,
            wait_ns: None,
        }
    }
}

/// One balanced IRQ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IrqView {
    /// IRQ number (daemon) or interrupt-source index (simulator).
    pub irq: u32,
    /// The vCPU that holds it now.
    pub holder: Vcpu,
    /// Its own share of the holder's load, same unit as [`VcpuView::load`]. Only the
    /// many-to-many extension uses it (to update the projected loads after a move, and to
    /// tell busy queues: [`PolicyConfig::chase_max_load`]).
    pub load: f64,
}

/// Everything one decision looks at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Time of the snapshot in nanoseconds (monotonic); drives hysteresis and rate limits.
    pub now_ns: u64,
    pub vcpus: Vec<VcpuView>,
    pub irqs: Vec<IrqView>,
}

/// How a group of IRQs is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// The paper: all balanced IRQs move together to one vCPU (many-to-one). The group's
    /// holder is the holder of the first IRQ.
    ManyToOne,
    /// The extension: each IRQ is decided on its own, heaviest first, with the loads projected
    /// after every move so that queues of one NIC spread over the online vCPUs.
    ManyToMany,
}

/// The daemon's default load floor: 2 % of a CPU in irq + softirq. Below it a vCPU counts as
/// carrying 2 %, so on a nearly idle guest (one vCPU at 0.4 %, another at 0) the max/min ratio
/// is 1, not infinite, and no IRQ is moved for "balance" (issue seen: an IRQ bouncing between
/// two idle vCPUs every second).
pub const DEFAULT_LOAD_FLOOR: f64 = 0.02;

/// When an affinity write takes effect for the IRQ's interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveKind {
    /// The IRQ's next interrupt goes to the new vCPU (interrupt remapping on x86, the GIC ITS
    /// on arm64, a Xen event channel); one already raised may stay where it is.
    #[default]
    Direct,
    /// The write is applied when the IRQ's next interrupt is acked on the old vCPU, and that
    /// interrupt is still delivered there (x86 MSI without interrupt remapping: the kernel's
    /// `IRQCHIP_MOVE_DEFERRED`).
    Deferred,
}

impl MoveKind {
    pub fn name(self) -> &'static str {
        match self {
            MoveKind::Direct => "direct",
            MoveKind::Deferred => "deferred",
        }
    }
}

impl std::fmt::Display for MoveKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Default availability ratio: a holder whose interrupts wait more than twice as long as on
/// the best vCPU (plus the margin) is moved on a deferred-move guest.
pub const DEFAULT_AVAIL_RATIO: f64 = 2.0;
/// Default absolute margin on the expected interrupt wait: 0.5 ms.
pub const DEFAULT_AVAIL_MARGIN_NS: f64 = 500_000.0;
/// Default absolute margin on steal fractions (the fallback when no wait is known): 10 %.
pub const DEFAULT_STEAL_MARGIN: f64 = 0.10;
/// Default least time between two moves of one IRQ on a deferred-move guest: 5 s.
pub const DEFAULT_AVAIL_DWELL_NS: u64 = 5_000_000_000;

impl Mapping {
    /// The name users type and read (`many-to-one`, `many-to-many`).
    pub fn name(self) -> &'static str {
        match self {
            Mapping::ManyToOne => "many-to-one",
            Mapping::ManyToMany => "many-to-many",
        }
    }
}

impl std::fmt::Display for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Policy parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// Imbalance threshold on `max/min` of online vCPU loads (paper: 1.5).
    pub threshold: f64,
    pub mapping: Mapping,
    /// Hysteresis: after a move, an IRQ is not moved again *for balance* for this long.
    /// Moves away from an offline holder are never held back.
    pub min_dwell_ns: u64,
    /// Rate limit: at most this many balance moves per `rate_window_ns` (0 = unlimited).
    pub max_balance_moves: u32,
    pub rate_window_ns: u64,
    /// Loads below this floor count as the floor when testing `max > min × threshold`, so that
    /// noise on nearly idle vCPUs does not look like an infinite ratio (0 = the paper).
    pub load_floor: f64,
    /// Hysteresis: a balance move must leave the target less loaded than the holder was
    /// (projected with the IRQ's own load), so two vCPUs cannot trade an IRQ back and forth.
    pub require_improvement: bool,
    /// When writes take effect; [`MoveKind::Deferred`] switches the many-to-many policy to
    /// availability placement (see the module documentation).
    #[serde(default)]
    pub moves: MoveKind,
    /// Deferred moves: a vCPU is clearly worse than another when its expected interrupt wait
    /// exceeds the other's times this ratio plus `avail_margin_ns` (or, without waits, its
    /// steal exceeds the other's times the ratio plus `steal_margin`).
    #[serde(default = "default_avail_ratio")]
    pub avail_ratio: f64,
    #[serde(default = "default_avail_margin")]
    pub avail_margin_ns: f64,
    #[serde(default = "default_steal_margin")]
    pub steal_margin: f64,
    /// Deferred moves: least time between two moves of one IRQ.
    #[serde(default = "default_avail_dwell")]
    pub avail_dwell_ns: u64,
    /// Direct moves, many-to-many: an IRQ whose own load is at least this (fraction of a
    /// CPU) is a busy queue and is placed by availability, as with deferred moves, instead of
    /// following the preempted flag (0 = every IRQ follows it, as in the paper). See
    /// [`DEFAULT_CHASE_MAX_LOAD`].
    #[serde(default = "default_chase_max_load")]
    pub chase_max_load: f64,
}

/// Default [`PolicyConfig::chase_max_load`]: 2 % of a CPU. A busy queue keeps its interrupt
/// raised while NAPI polls it, so when its vCPU is preempted the raised interrupt stays there
/// whatever is written, and the move hands the queue's *next* interrupt, after that vCPU has
/// drained the ring, to a vCPU that was running at the preemption and has often been
/// preempted since. Light IRQs (a ping: 10 interrupts/s, 0.002 % of a CPU) gain from
/// following the flag; streams (TCP 4 KiB at 250 Mbit/s: about 8 %) lose. In the simulator,
/// following the flag with every IRQ cost a 1 Gbit/s TCP stream 9 % against static placement
/// (`vbalance-two-vms`, EEVDF, interrupt remapping) and any value from 0.5 % to 10 % gave the
/// same results on every built-in scenario.
pub const DEFAULT_CHASE_MAX_LOAD: f64 = 0.02;

fn default_chase_max_load() -> f64 {
    DEFAULT_CHASE_MAX_LOAD
}

fn default_avail_ratio() -> f64 {
    DEFAULT_AVAIL_RATIO
}
fn default_avail_margin() -> f64 {
    DEFAULT_AVAIL_MARGIN_NS
}
fn default_steal_margin() -> f64 {
    DEFAULT_STEAL_MARGIN
}
fn default_avail_dwell() -> u64 {
    DEFAULT_AVAIL_DWELL_NS
}

impl PolicyConfig {
    /// Algorithm 1 exactly as published: threshold 1.5, many-to-one, no hysteresis, no limit.
    pub fn paper() -> Self {
        Self {
            threshold: 1.5,
            mapping: Mapping::ManyToOne,
            min_dwell_ns: 0,
            max_balance_moves: 0,
            rate_window_ns: 1_000_000_000,
            load_floor: 0.0,
            require_improvement: false,
            moves: MoveKind::Direct,
            avail_ratio: DEFAULT_AVAIL_RATIO,
            avail_margin_ns: DEFAULT_AVAIL_MARGIN_NS,
            steal_margin: DEFAULT_STEAL_MARGIN,
            avail_dwell_ns: DEFAULT_AVAIL_DWELL_NS,
            chase_max_load: 0.0,
        }
    }

    /// The extension used by the daemon by default: many-to-many, a 1 s dwell for balance
    /// moves, at most 4 balance moves per second, improvement required, a load floor of
    /// [`DEFAULT_LOAD_FLOOR`] (loads are fractions of a CPU spent in interrupt work), and busy
    /// queues placed by availability ([`DEFAULT_CHASE_MAX_LOAD`]).
    pub fn extended() -> Self {
        Self {
            threshold: 1.5,
            mapping: Mapping::ManyToMany,
            min_dwell_ns: 1_000_000_000,
            max_balance_moves: 4,
            rate_window_ns: 1_000_000_000,
            load_floor: DEFAULT_LOAD_FLOOR,
            require_improvement: true,
            moves: MoveKind::Direct,
            avail_ratio: DEFAULT_AVAIL_RATIO,
            avail_margin_ns: DEFAULT_AVAIL_MARGIN_NS,
            steal_margin: DEFAULT_STEAL_MARGIN,
            avail_dwell_ns: DEFAULT_AVAIL_DWELL_NS,
            chase_max_load: DEFAULT_CHASE_MAX_LOAD,
        }
    }

    /// The same policy for a guest whose moves take effect as `moves` says.
    pub fn with_moves(mut self, moves: MoveKind) -> Self {
        self.moves = moves;
        self
    }

    /// Check the parameters; the error names the bad field.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if !(self.threshold.is_finite() && self.threshold >= 1.0) {
            return Err(crate::Error::Config(format!(
                "threshold {} must be a number >= 1",
                self.threshold
            )));
        }
        if !(self.load_floor.is_finite() && self.load_floor >= 0.0) {
            return Err(crate::Error::Config(format!(
                "load floor {} must be a number >= 0",
                self.load_floor
            )));
        }
        if !(self.avail_ratio.is_finite() && self.avail_ratio >= 1.0) {
            return Err(crate::Error::Config(format!(
                "availability ratio {} must be a number >= 1",
                self.avail_ratio
            )));
        }
        let wait_ok = self.avail_margin_ns.is_finite() && self.avail_margin_ns >= 0.0;
        let steal_ok = self.steal_margin.is_finite() && (0.0..=1.0).contains(&self.steal_margin);
        if !(wait_ok && steal_ok) {
            return Err(crate::Error::Config(format!(
                "availability margins must be >= 0 (wait {} ns, steal {} within 0..=1)",
                self.avail_margin_ns, self.steal_margin
            )));
        }
        if !(self.chase_max_load.is_finite() && self.chase_max_load >= 0.0) {
            return Err(crate::Error::Config(format!(
                "chase max load {} must be a number >= 0 (a fraction of a CPU)",
                self.chase_max_load
            )));
        }
        if self.max_balance_moves > 0 && self.rate_window_ns == 0 {
            return Err(crate::Error::Config(
                "a migration rate limit needs a non-zero window".into(),
            ));
        }
        Ok(())
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self::extended()
    }
}

/// The state a vCPU is in for one decision (paper figure 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VcpuClass {
    Offline,
    /// Online and holding the IRQ under decision.
    Hold,
    /// Online, load above the all-vCPU average.
    High,
    /// Online, load at or below the average.
    Low,
}

/// Why an IRQ moved or stayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The holder is descheduled: the IRQ must go to an online vCPU.
    HolderOffline,
    /// The holder is HIGH and max/min of online loads exceeds the threshold.
    Imbalance,
    /// The holder is online and LOW, or the ratio is within the threshold.
    Balanced,
    /// No vCPU is online (or eligible): nothing to move to.
    NoOnlineVcpu,
    /// The holder is not in the snapshot (unknown CPU): treated as offline.
    HolderUnknown,
    /// A balance move was held back by the dwell time.
    Dwell,
    /// A balance move was held back by the rate limit.
    RateLimited,
    /// A balance move would not make the target less loaded than the holder.
    NoImprovement,
    /// Many-to-one: the IRQ joins the vCPU its group (the first IRQ's holder) goes to.
    Group,
    /// Deferred moves: interrupts on the holder have recently waited far longer for the host
    /// to run it than on the target.
    HolderStarved,
    /// Deferred moves: the holder is preempted now, but a move would take effect only at its
    /// next interrupt, on the holder once it runs again: it stays.
    Deferred,
    /// Direct moves: the holder is preempted now, but the IRQ is a busy queue (its load is at
    /// least [`PolicyConfig::chase_max_load`]): the interrupt it has raised stays on the holder
    /// whatever is written, and it is placed by availability instead.
    BusyQueue,
}

impl Reason {
    /// The name in JSON and text output (`holder-offline`, `imbalance`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Reason::HolderOffline => "holder-offline",
            Reason::Imbalance => "imbalance",
            Reason::Balanced => "balanced",
            Reason::NoOnlineVcpu => "no-online-vcpu",
            Reason::HolderUnknown => "holder-unknown",
            Reason::Dwell => "dwell",
            Reason::RateLimited => "rate-limited",
            Reason::NoImprovement => "no-improvement",
            Reason::Group => "group",
            Reason::HolderStarved => "holder-starved",
            Reason::Deferred => "deferred",
            Reason::BusyQueue => "busy-queue",
        }
    }

    /// A short phrase for people.
    pub fn describe(self) -> &'static str {
        match self {
            Reason::HolderOffline => "its vCPU is preempted",
            Reason::Imbalance => "max/min load over the threshold",
            Reason::Balanced => "balanced",
            Reason::NoOnlineVcpu => "no vCPU is running",
            Reason::HolderUnknown => "its CPU is not in the snapshot",
            Reason::Dwell => "moved recently (dwell)",
            Reason::RateLimited => "rate limit of balance moves",
            Reason::NoImprovement => "moving would not lower the peak",
            Reason::Group => "joins its group's vCPU (many-to-one)",
            Reason::HolderStarved => "its vCPU makes interrupts wait far longer for the host",
            Reason::Deferred => {
                "its vCPU is preempted, but a move would land only when it runs again"
            }
            Reason::BusyQueue => {
                "its vCPU is preempted, but a busy queue's raised interrupt stays there"
            }
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One IRQ's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub irq: u32,
    pub from: Vcpu,
    pub to: Vcpu,
    pub reason: Reason,
}

impl Placement {
    pub fn moved(&self) -> bool {
        self.from != self.to
    }
}

/// The outcome of one decision: one placement per IRQ of the snapshot, in snapshot order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub placements: Vec<Placement>,
    /// The all-vCPU average load the decision used.
    pub average: f64,
}

impl Decision {
    /// Only the placements that change a holder.
    pub fn moves(&self) -> impl Iterator<Item = &Placement> {
        self.placements.iter().filter(|p| p.moved())
    }

    /// The new holder of `irq`, if it was in the snapshot.
    pub fn target(&self, irq: u32) -> Option<Vcpu> {
        self.placements.iter().find(|p| p.irq == irq).map(|p| p.to)
    }
}

/// Algorithm 1 for one holder: a pure function of the vCPU views.
///
/// Returns the next holder and why. Ties for the least loaded vCPU go to the lowest index.
pub fn algorithm1(prev: Vcpu, vcpus: &[VcpuView], threshold: f64, floor: f64) -> (Vcpu, Reason) {
    let avg = average(vcpus);
    let mut min: Option<&VcpuView> = None;
    let mut max_load = f64::NEG_INFINITY;
    for v in vcpus.iter().filter(|v| v.online && v.eligible) {
        if min.is_none_or(|m| v.load < m.load) {
            min = Some(v);
        }
        max_load = max_load.max(v.load);
    }
    let Some(min) = min else {
        return (prev, Reason::NoOnlineVcpu);
    };
    let holder = vcpus.iter().find(|v| v.vcpu == prev);
    match holder {
        None => (min.vcpu, Reason::HolderUnknown),
        Some(h) if !h.online => (min.vcpu, Reason::HolderOffline),
        Some(h) => {
            let high = h.load > avg;
            if high && max_load.max(floor) > min.load.max(floor) * threshold {
                (min.vcpu, Reason::Imbalance)
            } else {
                (prev, Reason::Balanced)
            }
        }
    }
}

/// Classify every vCPU for `holder` (paper figure 4); for display and tests.
pub fn classify(holder: Vcpu, vcpus: &[VcpuView]) -> Vec<(Vcpu, VcpuClass)> {
    let avg = average(vcpus);
    vcpus
        .iter()
        .map(|v| {
            let c = if !v.online {
                VcpuClass::Offline
            } else if v.vcpu == holder {
                VcpuClass::Hold
            } else if v.load > avg {
                VcpuClass::High
            } else {
                VcpuClass::Low
            };
            (v.vcpu, c)
        })
        .collect()
}

fn average(vcpus: &[VcpuView]) -> f64 {
    if vcpus.is_empty() {
        0.0
    } else {
        vcpus.iter().map(|v| v.load).sum::<f64>() / vcpus.len() as f64
    }
}

/// The decision for one IRQ: `(policy, now, irq, holder, vCPUs with projected loads, the IRQ's
/// load) -> (target, reason)`.
type OneIrq = fn(&Policy, u64, u32, Vcpu, &[VcpuView], Option<f64>) -> (Vcpu, Reason);

/// The policy: its configuration plus the little history that hysteresis and the rate limit
/// need (when each IRQ last moved for balance; when recent balance moves happened).
#[derive(Debug, Clone)]
pub struct Policy {
    config: PolicyConfig,
    last_move: Vec<(u32, u64)>,
    recent_moves: std::collections::VecDeque<u64>,
}

impl Policy {
    pub fn new(config: PolicyConfig) -> Result<Self, crate::Error> {
        config.validate()?;
        Ok(Self {
            config,
            last_move: Vec::new(),
            recent_moves: std::collections::VecDeque::new(),
        })
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// Decide the new map for `snap`. The caller applies the moves; the policy records the
    /// balance moves it returned for hysteresis and rate limiting.
    pub fn decide(&mut self, snap: &Snapshot) -> Decision {
        let now = snap.now_ns;
        let window = self.config.rate_window_ns;
        while self
            .recent_moves
            .front()
            .is_some_and(|&t| now.saturating_sub(t) >= window)
        {
            self.recent_moves.pop_front();
        }
        let average = average(&snap.vcpus);
        let placements = match self.config.mapping {
            Mapping::ManyToOne => self.decide_group(snap),
            Mapping::ManyToMany => self.decide_each(snap),
        };
        Decision {
            placements,
            average,
        }
    }

    /// The paper: one decision for the whole group, from the first IRQ's holder.
    fn decide_group(&mut self, snap: &Snapshot) -> Vec<Placement> {
        let Some(first) = snap.irqs.first() else {
            return Vec::new();
        };
        let (to, reason) = self.one(snap.now_ns, first.irq, first.holder, &snap.vcpus, None);
        if to != first.holder && reason == Reason::Imbalance {
            self.record(snap.now_ns, first.irq);
        }
        let keep = reason == Reason::NoOnlineVcpu;
        let online = |v: Vcpu| snap.vcpus.iter().any(|x| x.vcpu == v && x.online);
        snap.irqs
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let to = if keep { i.holder } else { to };
                // label each IRQ by what happens to it: the first carries the group's
                // decision; the others stay (already with the group) or join it
                let reason = if keep {
                    Reason::NoOnlineVcpu
                } else if i.holder == to {
                    if k == 0 {
                        reason
                    } else {
                        Reason::Balanced
                    }
                } else if k == 0 {
                    reason
                } else if !online(i.holder) {
                    Reason::HolderOffline
                } else {
                    Reason::Group
                };
                Placement {
                    irq: i.irq,
                    from: i.holder,
                    to,
                    reason,
                }
            })
            .collect()
    }

    /// Whether an IRQ of this load is placed by availability rather than by the preempted
    /// flag: every IRQ on a deferred-move guest, busy queues on any guest.
    pub fn by_availability(&self, irq_load: f64) -> bool {
        let c = &self.config;
        c.moves == MoveKind::Deferred || (c.chase_max_load > 0.0 && irq_load >= c.chase_max_load)
    }

    /// The extension: each IRQ on its own, heaviest first, with the loads projected after
    /// every move; by the preempted flag ([`Self::one`]) or by availability
    /// ([`Self::one_available`]).
    fn decide_each(&mut self, snap: &Snapshot) -> Vec<Placement> {
        let mut vcpus = snap.vcpus.clone();
        let mut order: Vec<usize> = (0..snap.irqs.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&snap.irqs[a], &snap.irqs[b]);
            y.load.total_cmp(&x.load).then(x.irq.cmp(&y.irq))
        });
        let mut out: Vec<Option<Placement>> = vec![None; snap.irqs.len()];
        for idx in order {
            let i = snap.irqs[idx];
            let one: OneIrq = if self.by_availability(i.load) {
                Self::one_available
            } else {
                Self::one
            };
            let (to, reason) = one(self, snap.now_ns, i.irq, i.holder, &vcpus, Some(i.load));
            if to != i.holder {
                if matches!(reason, Reason::Imbalance | Reason::HolderStarved) {
                    self.record(snap.now_ns, i.irq);
                }
                let share = i.load.max(0.0);
                if let Some(h) = vcpus.iter_mut().find(|v| v.vcpu == i.holder) {
                    h.load = (h.load - share).max(0.0);
                }
                if let Some(t) = vcpus.iter_mut().find(|v| v.vcpu == to) {
                    t.load += share;
                }
            }
            out[idx] = Some(Placement {
                irq: i.irq,
                from: i.holder,
                to,
                reason,
            });
        }
        out.into_iter().flatten().collect()
    }

    /// Algorithm 1 plus the extension's guards on balance moves; where availability figures
    /// are given, a preempted holder's IRQ goes to the least loaded of the running vCPUs that
    /// are as available as the best running one, and a running holder whose interrupts have
    /// waited clearly longer than on the best running vCPU loses its IRQ too (a vCPU that is
    /// slow to run after each wake-up is never seen preempted).
    fn one(
        &self,
        now: u64,
        irq: u32,
        holder: Vcpu,
        vcpus: &[VcpuView],
        irq_load: Option<f64>,
    ) -> (Vcpu, Reason) {
        let c = &self.config;
        let (to, reason) = algorithm1(holder, vcpus, c.threshold, c.load_floor);
        let running: Vec<&VcpuView> = vcpus.iter().filter(|v| v.online && v.eligible).collect();
        let h = vcpus.iter().find(|v| v.vcpu == holder);
        let (to, reason) = if reason == Reason::Imbalance {
            // balance only towards vCPUs as available as the holder
            let peers: Vec<VcpuView> = vcpus
                .iter()
                .map(|v| VcpuView {
                    online: v.online && h.is_none_or(|h| Self::as_available(v, h)),
                    ..*v
                })
                .collect();
            algorithm1(holder, &peers, c.threshold, c.load_floor)
        } else {
            (to, reason)
        };
        match reason {
            Reason::Imbalance => self.guard_balance(now, irq, holder, to, vcpus, irq_load),
            Reason::HolderOffline | Reason::HolderUnknown => {
                let to = Self::most_available(&running).map_or(to, |(_, t)| t.vcpu);
                (to, reason)
            }
            Reason::Balanced => match (h, Self::most_available(&running)) {
                (Some(h), Some((best, target))) if self.clearly_worse(h, best) => {
                    self.starved(now, irq, holder, target.vcpu)
                }
                _ => (to, reason),
            },
            _ => (to, reason),
        }
    }

    /// The extension's guards on a balance move `holder → to`: dwell, rate limit, improvement.
    fn guard_balance(
        &self,
        now: u64,
        irq: u32,
        holder: Vcpu,
        to: Vcpu,
        vcpus: &[VcpuView],
        irq_load: Option<f64>,
    ) -> (Vcpu, Reason) {
        let c = &self.config;
        if c.min_dwell_ns > 0 {
            if let Some(&(_, t)) = self.last_move.iter().find(|(i, _)| *i == irq) {
                if now.saturating_sub(t) < c.min_dwell_ns {
                    return (holder, Reason::Dwell);
                }
            }
        }
        if c.max_balance_moves > 0 && self.recent_moves.len() >= c.max_balance_moves as usize {
            return (holder, Reason::RateLimited);
        }
        if c.require_improvement {
            let load_of = |v: Vcpu| vcpus.iter().find(|x| x.vcpu == v).map_or(0.0, |x| x.load);
            let share = irq_load.unwrap_or(0.0).max(0.0);
            if load_of(to) + share >= load_of(holder) {
                return (holder, Reason::NoImprovement);
            }
        }
        (to, Reason::Imbalance)
    }

    /// Whether interrupts on `a` have waited clearly longer than on `b` (deferred moves): by
    /// the expected wait where both have one, else by steal; unknown is never worse.
    fn clearly_worse(&self, a: &VcpuView, b: &VcpuView) -> bool {
        let c = &self.config;
        Self::worse(a, b, c.avail_ratio, c.avail_margin_ns, c.steal_margin)
    }

    /// Whether `a` is at least as available as `b`, up to noise (deferred moves: where balance
    /// moves may go): a tenth more wait plus 0.1 ms, or two points more steal.
    fn as_available(a: &VcpuView, b: &VcpuView) -> bool {
        !Self::worse(a, b, 1.1, 100_000.0, 0.02)
    }

    fn worse(a: &VcpuView, b: &VcpuView, ratio: f64, margin_ns: f64, steal_margin: f64) -> bool {
        match (a.wait_ns, b.wait_ns) {
            (Some(wa), Some(wb)) => wa > wb * ratio + margin_ns,
            _ => match (a.steal, b.steal) {
                (Some(sa), Some(sb)) => sa > sb * ratio + steal_margin,
                _ => false,
            },
        }
    }

    /// Among `cands`, the most available vCPU (least expected wait, else steal; then load,
    /// then index) and the least loaded of those as available as it (up to noise): `(best,
    /// target)`. Without availability figures every candidate is as available as any other,
    /// and the target is the least loaded (lowest index on ties), as in Algorithm 1.
    fn most_available<'a>(cands: &[&'a VcpuView]) -> Option<(&'a VcpuView, &'a VcpuView)> {
        let key = |v: &VcpuView| {
            (
                v.wait_ns.or(v.steal).unwrap_or(0.0),
                v.steal.unwrap_or(0.0),
                v.load,
            )
        };
        let best = cands.iter().copied().min_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0)
                .then(ka.1.total_cmp(&kb.1))
                .then(ka.2.total_cmp(&kb.2))
                .then(a.vcpu.cmp(&b.vcpu))
        })?;
        let target = cands
            .iter()
            .copied()
            .filter(|v| Self::as_available(v, best))
            .min_by(|a, b| a.load.total_cmp(&b.load).then(a.vcpu.cmp(&b.vcpu)))
            .unwrap_or(best);
        Some((best, target))
    }

    /// A move off a holder whose interrupts wait clearly longer than on `target`'s, at most
    /// once per `avail_dwell_ns` per IRQ.
    fn starved(&self, now: u64, irq: u32, holder: Vcpu, target: Vcpu) -> (Vcpu, Reason) {
        if let Some(&(_, t)) = self.last_move.iter().find(|(i, _)| *i == irq) {
            if now.saturating_sub(t) < self.config.avail_dwell_ns {
                return (holder, Reason::Dwell);
            }
        }
        (target, Reason::HolderStarved)
    }

    /// One IRQ placed by availability: every IRQ on a guest whose moves are deferred, a busy
    /// queue on any guest (see the module documentation).
    fn one_available(
        &self,
        now: u64,
        irq: u32,
        holder: Vcpu,
        vcpus: &[VcpuView],
        irq_load: Option<f64>,
    ) -> (Vcpu, Reason) {
        // where it may go: with deferred moves the write lands later, at an interrupt on the
        // holder, so who runs now does not matter; with direct moves the next interrupt goes
        // to the target at once, so only a running vCPU may take it
        let direct = self.config.moves == MoveKind::Direct;
        let can_take = |v: &VcpuView| v.eligible && (v.online || !direct);
        let eligible: Vec<&VcpuView> = vcpus.iter().filter(|v| can_take(v)).collect();
        let Some((best, target)) = Self::most_available(&eligible) else {
            return (holder, Reason::NoOnlineVcpu);
        };
        let Some(h) = vcpus.iter().find(|v| v.vcpu == holder) else {
            return (target.vcpu, Reason::HolderUnknown);
        };
        if self.clearly_worse(h, best) || !h.eligible {
            return self.starved(now, irq, holder, target.vcpu);
        }
        // balance among the vCPUs at least as available as the holder
        let peers: Vec<VcpuView> = vcpus
            .iter()
            .map(|v| VcpuView {
                online: v.vcpu == holder || (can_take(v) && Self::as_available(v, h)),
                ..*v
            })
            .collect();
        let (to, reason) = algorithm1(
            holder,
            &peers,
            self.config.threshold,
            self.config.load_floor,
        );
        let (to, reason) = if reason == Reason::Imbalance {
            // the target, with the IRQ, must stay a tenth below the holder: the loads are
            // estimates, and moving the only IRQ of a vCPU just moves its load elsewhere
            let share = irq_load.unwrap_or(0.0).max(0.0);
            let load_of = |v: Vcpu| vcpus.iter().find(|x| x.vcpu == v).map_or(0.0, |x| x.load);
            if self.config.require_improvement && load_of(to) + share >= 0.9 * load_of(holder) {
                (holder, Reason::NoImprovement)
            } else {
                self.guard_balance(now, irq, holder, to, &peers, irq_load)
            }
        } else {
            (to, reason)
        };
        if to == holder && !h.online && matches!(reason, Reason::Balanced | Reason::NoImprovement) {
            // say why a preempted holder keeps it (no balance move was due anyway)
            return (
                holder,
                if direct {
                    Reason::BusyQueue
                } else {
                    Reason::Deferred
                },
            );
        }
        (to, reason)
    }

    fn record(&mut self, now: u64, irq: u32) {
        match self.last_move.iter_mut().find(|(i, _)| *i == irq) {
            Some(e) => e.1 = now,
            None => self.last_move.push((irq, now)),
        }
        self.recent_moves.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(vcpu: Vcpu, online: bool, load: f64) -> VcpuView {
        VcpuView::new(vcpu, online, load, true)
    }

    /// The extension with every IRQ following the preempted flag (Algorithm 1's path): the
    /// tests of that path use loads in any unit, which would make busy queues of them.
    fn chasing() -> PolicyConfig {
        PolicyConfig {
            chase_max_load: 0.0,
            ..PolicyConfig::extended()
        }
    }

    fn snap(now_ns: u64, vcpus: Vec<VcpuView>, irqs: Vec<(u32, Vcpu, f64)>) -> Snapshot {
        Snapshot {
            now_ns,
            vcpus,
            irqs: irqs
                .into_iter()
                .map(|(irq, holder, load)| IrqView { irq, holder, load })
                .collect(),
        }
    }

    // --- Algorithm 1, case by case ---

    #[test]
    fn offline_holder_goes_to_least_loaded_online() {
        // vCPU0 holds and is descheduled; vCPU2 is the least loaded online one.
        let vs = [
            v(0, false, 1.0),
            v(1, true, 5.0),
            v(2, true, 2.0),
            v(3, true, 9.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (2, Reason::HolderOffline));
    }

    #[test]
    fn offline_holder_moves_even_when_it_is_the_least_loaded() {
        // Being offline beats everything: the offline vCPU's own low load does not matter.
        let vs = [v(0, false, 0.0), v(1, true, 7.0), v(2, true, 8.0)];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (1, Reason::HolderOffline));
    }

    #[test]
    fn high_holder_over_threshold_remaps() {
        // avg = (9+2+3+2)/4 = 4: holder 9 is HIGH; 9 > 2 * 1.5 → move to the min (vCPU1,
        // lowest index on a tie with vCPU3).
        let vs = [
            v(0, true, 9.0),
            v(1, true, 2.0),
            v(2, true, 3.0),
            v(3, true, 2.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (1, Reason::Imbalance));
    }

    #[test]
    fn high_holder_within_threshold_stays() {
        // avg = 4.5: holder 5 is HIGH but 5 <= 4 * 1.5 → stay.
        let vs = [
            v(0, true, 5.0),
            v(1, true, 4.0),
            v(2, true, 4.5),
            v(3, true, 4.5),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (0, Reason::Balanced));
    }

    #[test]
    fn low_holder_stays_even_with_imbalance() {
        // Holder 1 is LOW (below avg 4); the 10 vs 1 imbalance is someone else's.
        let vs = [
            v(0, true, 1.0),
            v(1, true, 10.0),
            v(2, true, 2.0),
            v(3, true, 3.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (0, Reason::Balanced));
    }

    #[test]
    fn average_includes_offline_vcpus() {
        // avg over all four = (4+1+20+3)/4 = 7 with offline vCPU2's 20 counted: the holder
        // (4) is LOW, so it stays although 4 > 1 * 1.5 among the online ones.
        let vs = [
            v(0, true, 4.0),
            v(1, true, 1.0),
            v(2, false, 20.0),
            v(3, true, 3.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (0, Reason::Balanced));
        // Without the offline vCPU's load the holder would be HIGH and move.
        let vs = [
            v(0, true, 4.0),
            v(1, true, 1.0),
            v(2, false, 0.0),
            v(3, true, 3.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (1, Reason::Imbalance));
    }

    #[test]
    fn max_min_taken_over_online_vcpus_only() {
        // Offline vCPU3 has load 0; online min is 3, max 4: 4 <= 3*1.5 → stay.
        let vs = [
            v(0, true, 4.0),
            v(1, true, 3.0),
            v(2, true, 3.5),
            v(3, false, 0.0),
        ];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (0, Reason::Balanced));
    }

    #[test]
    fn no_online_vcpu_keeps_the_holder() {
        let vs = [v(0, false, 1.0), v(1, false, 0.0)];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (0, Reason::NoOnlineVcpu));
    }

    #[test]
    fn unknown_holder_is_remapped() {
        let vs = [v(0, true, 3.0), v(1, true, 1.0)];
        assert_eq!(algorithm1(7, &vs, 1.5, 0.0), (1, Reason::HolderUnknown));
    }

    #[test]
    fn ineligible_vcpus_never_receive() {
        let mut vs = [v(0, false, 1.0), v(1, true, 0.0), v(2, true, 5.0)];
        vs[1].eligible = false;
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (2, Reason::HolderOffline));
    }

    #[test]
    fn zero_min_load_counts_as_imbalance_in_the_paper_but_not_over_the_floor() {
        let vs = [v(0, true, 0.2), v(1, true, 0.0)];
        assert_eq!(algorithm1(0, &vs, 1.5, 0.0), (1, Reason::Imbalance));
        assert_eq!(algorithm1(0, &vs, 1.5, 1.0), (0, Reason::Balanced));
    }

    #[test]
    fn classify_matches_figure_4() {
        let vs = [
            v(0, true, 9.0),
            v(1, false, 2.0),
            v(2, true, 5.0),
            v(3, true, 0.0),
        ];
        assert_eq!(
            classify(0, &vs),
            vec![
                (0, VcpuClass::Hold),
                (1, VcpuClass::Offline),
                (2, VcpuClass::High),
                (3, VcpuClass::Low)
            ]
        );
    }

    // --- Policy: many-to-one (paper) ---

    #[test]
    fn paper_mode_moves_the_whole_group() {
        let mut p = Policy::new(PolicyConfig::paper()).unwrap();
        let s = snap(
            0,
            vec![v(0, false, 3.0), v(1, true, 1.0), v(2, true, 0.5)],
            vec![(30, 0, 2.0), (31, 0, 1.0), (32, 2, 0.5)],
        );
        let d = p.decide(&s);
        assert!(d.placements.iter().all(|pl| pl.to == 2));
        assert_eq!(d.moves().count(), 2);
        assert_eq!(d.placements[0].reason, Reason::HolderOffline);
        assert_eq!(d.placements[2].reason, Reason::Balanced);
    }

    // --- Policy: many-to-many extension ---

    #[test]
    fn many_to_many_spreads_queues_of_an_offline_holder() {
        let mut p = Policy::new(chasing()).unwrap();
        // vCPU0 (offline) holds four queues of 1.0 each; three online vCPUs idle.
        let s = snap(
            0,
            vec![
                v(0, false, 4.0),
                v(1, true, 0.0),
                v(2, true, 0.0),
                v(3, true, 0.0),
            ],
            vec![(40, 0, 1.0), (41, 0, 1.0), (42, 0, 1.0), (43, 0, 1.0)],
        );
        let d = p.decide(&s);
        let targets: Vec<_> = d.placements.iter().map(|pl| pl.to).collect();
        assert_eq!(targets, vec![1, 2, 3, 1]);
        assert!(d
            .placements
            .iter()
            .all(|pl| pl.reason == Reason::HolderOffline));
    }

    #[test]
    fn dwell_holds_back_a_second_balance_move_but_not_an_offline_one() {
        let mut cfg = chasing();
        cfg.max_balance_moves = 0;
        let mut p = Policy::new(cfg).unwrap();
        let s1 = snap(
            0,
            vec![v(0, true, 10.0), v(1, true, 0.0)],
            vec![(5, 0, 6.0)],
        );
        assert_eq!(p.decide(&s1).placements[0].to, 1);
        // 100 ms later vCPU1 is overloaded: a balance move is held back by the 1 s dwell.
        let s2 = snap(
            100_000_000,
            vec![v(0, true, 0.0), v(1, true, 10.0)],
            vec![(5, 1, 6.0)],
        );
        assert_eq!(p.decide(&s2).placements[0].reason, Reason::Dwell);
        // ...but going offline moves it at once.
        let s3 = snap(
            200_000_000,
            vec![v(0, true, 0.0), v(1, false, 10.0)],
            vec![(5, 1, 6.0)],
        );
        assert_eq!(
            p.decide(&s3).placements[0],
            Placement {
                irq: 5,
                from: 1,
                to: 0,
                reason: Reason::HolderOffline
            }
        );
        // After the dwell the balance move is allowed again.
        let s4 = snap(
            1_100_000_000,
            vec![v(0, true, 10.0), v(1, true, 0.0)],
            vec![(5, 0, 6.0)],
        );
        assert_eq!(p.decide(&s4).placements[0].reason, Reason::Imbalance);
    }

    #[test]
    fn rate_limit_caps_balance_moves_per_window() {
        let mut cfg = chasing();
        cfg.max_balance_moves = 1;
        cfg.min_dwell_ns = 0;
        cfg.require_improvement = false;
        let mut p = Policy::new(cfg).unwrap();
        let s = snap(
            0,
            vec![v(0, true, 10.0), v(1, true, 0.0), v(2, true, 0.0)],
            vec![(1, 0, 5.0), (2, 0, 4.0)],
        );
        let d = p.decide(&s);
        let reasons: Vec<_> = d.placements.iter().map(|pl| pl.reason).collect();
        assert_eq!(reasons, vec![Reason::Imbalance, Reason::RateLimited]);
        // next window: allowed again
        let s = snap(
            1_000_000_000,
            vec![v(0, true, 10.0), v(1, true, 0.0)],
            vec![(2, 0, 4.0)],
        );
        assert_eq!(p.decide(&s).placements[0].reason, Reason::Imbalance);
    }

    #[test]
    fn improvement_guard_prevents_ping_pong() {
        let mut cfg = chasing();
        cfg.min_dwell_ns = 0;
        let mut p = Policy::new(cfg).unwrap();
        // One IRQ carries all of vCPU0's load: moving it would just make vCPU1 the hot one.
        let s = snap(0, vec![v(0, true, 4.0), v(1, true, 0.0)], vec![(9, 0, 4.0)]);
        assert_eq!(p.decide(&s).placements[0].reason, Reason::NoImprovement);
    }

    #[test]
    fn load_floor_stops_an_idle_guest_bouncing_its_irq() {
        // Two nearly idle vCPUs (0.4 % and 0 % of a CPU in interrupts, swapping every window):
        // with the paper's zero floor the ratio is infinite and the IRQ follows the idle one
        // each time its dwell has passed; with the default 2 % floor nothing moves.
        let run = |floor: f64| {
            let mut cfg = PolicyConfig::extended();
            cfg.load_floor = floor;
            let mut p = Policy::new(cfg).unwrap();
            let mut holder = 0;
            let mut moves = 0;
            for step in 0..20u64 {
                let (l0, l1) = if holder == 0 {
                    (0.004, 0.0)
                } else {
                    (0.0, 0.004)
                };
                let s = snap(
                    step * 1_200_000_000,
                    vec![v(0, true, l0), v(1, true, l1)],
                    vec![(38, holder, 0.001)],
                );
                let d = p.decide(&s);
                let to = d.moves().next().map(|m| m.to);
                if let Some(to) = to {
                    holder = to;
                    moves += 1;
                }
            }
            moves
        };
        assert!(run(0.0) >= 10, "{}", run(0.0));
        assert_eq!(run(DEFAULT_LOAD_FLOOR), 0);
        assert_eq!(PolicyConfig::extended().load_floor, DEFAULT_LOAD_FLOOR);
    }

    // --- Policy: availability placement (deferred moves, busy queues) ---

    const MS: u64 = 1_000_000;

    /// A vCPU with availability figures: expected interrupt wait (ms) and steal.
    fn av(vcpu: Vcpu, online: bool, load: f64, wait_ms: f64, steal: f64) -> VcpuView {
        VcpuView {
            wait_ns: Some(wait_ms * 1e6),
            steal: Some(steal),
            ..v(vcpu, online, load)
        }
    }

    fn deferred() -> Policy {
        Policy::new(PolicyConfig::extended().with_moves(MoveKind::Deferred)).unwrap()
    }

    #[test]
    fn deferred_moves_never_follow_a_single_preemption() {
        // the paper's setup: four vCPUs equally available (33.75 ms expected wait each), the
        // holder preempted now: the IRQ stays, because a move would land only when it runs
        let mut p = deferred();
        let vs = (0..4).map(|i| av(i, i != 0, 0.0, 33.75, 0.75)).collect();
        let s = snap(10 * MS, vs, vec![(30, 0, 0.0001)]);
        let d = p.decide(&s);
        assert_eq!(d.moves().count(), 0);
        assert_eq!(d.placements[0].reason, Reason::Deferred);
        // the same holder running: plainly balanced
        let vs = (0..4).map(|i| av(i, true, 0.0, 33.75, 0.75)).collect();
        let d = p.decide(&snap(20 * MS, vs, vec![(30, 0, 0.0001)]));
        assert_eq!(d.placements[0].reason, Reason::Balanced);
    }

    #[test]
    fn a_starved_holder_loses_its_irq_once_per_dwell() {
        // vCPU0 shares its core with a busy co-tenant (15 ms expected wait), vCPUs 1 and 2
        // have cores of their own (0.1 ms): the IRQ goes to the less loaded of the two, even
        // while vCPU0 runs, and does not move again for `avail_dwell_ns`
        let mut p = deferred();
        let vs = vec![
            av(0, true, 0.04, 15.0, 0.5),
            av(1, true, 0.03, 0.1, 0.0),
            av(2, false, 0.01, 0.12, 0.0),
        ];
        let d = p.decide(&snap(2_000 * MS, vs.clone(), vec![(30, 0, 0.04)]));
        assert_eq!(
            d.placements[0],
            Placement {
                irq: 30,
                from: 0,
                to: 2,
                reason: Reason::HolderStarved
            }
        );
        // a second later vCPU2 looks starved in turn: held back by the dwell
        let vs2 = vec![
            av(0, true, 0.0, 0.1, 0.0),
            av(1, true, 0.0, 0.1, 0.0),
            av(2, true, 0.05, 15.0, 0.5),
        ];
        let d = p.decide(&snap(3_000 * MS, vs2.clone(), vec![(30, 2, 0.04)]));
        assert_eq!(d.placements[0].reason, Reason::Dwell);
        let at = 2_000 * MS + DEFAULT_AVAIL_DWELL_NS;
        let d = p.decide(&snap(at, vs2, vec![(30, 2, 0.04)]));
        assert_eq!(d.placements[0].reason, Reason::HolderStarved);
        // within the ratio and margin (2x + 0.5 ms) nothing moves: 0.9 ms against 0.2 ms
        let mut p = deferred();
        let vs = vec![av(0, true, 0.04, 0.9, 0.1), av(1, true, 0.0, 0.2, 0.0)];
        let d = p.decide(&snap(2_000 * MS, vs, vec![(30, 0, 0.04)]));
        assert_eq!(d.moves().count(), 0, "{d:?}");
    }

    #[test]
    fn without_waits_steal_decides() {
        // the /proc/stat fallback: 60 % steal against 5 % is clearly worse (2x + 10 points)
        let mut p = deferred();
        let sv = |vcpu, steal| VcpuView {
            steal: Some(steal),
            ..v(vcpu, true, 0.0)
        };
        let d = p.decide(&snap(0, vec![sv(0, 0.6), sv(1, 0.05)], vec![(7, 0, 0.001)]));
        assert_eq!(d.placements[0].to, 1);
        assert_eq!(d.placements[0].reason, Reason::HolderStarved);
        // 20 % against 10 %: not clearly worse
        let mut p = deferred();
        let d = p.decide(&snap(0, vec![sv(0, 0.2), sv(1, 0.1)], vec![(7, 0, 0.001)]));
        assert_eq!(d.moves().count(), 0);
        // nothing known: nothing is worse
        let mut p = deferred();
        let d = p.decide(&snap(
            0,
            vec![v(0, false, 0.0), v(1, true, 0.0)],
            vec![(7, 0, 0.0)],
        ));
        assert_eq!(d.moves().count(), 0);
    }

    #[test]
    fn balance_among_equally_available_vcpus_moves_a_light_irq_off_a_busy_queue() {
        // a ping (0.001 %) shares vCPU0 with a stream's queue (8 %): moving the stream would
        // only move the hot spot (no improvement), moving the ping takes it out from behind
        // the stream's polling
        let mut p = deferred();
        let vs = (0..4).map(|i| av(i, true, if i == 0 { 0.08 } else { 0.0 }, 33.75, 0.75));
        let d = p.decide(&snap(
            2_000 * MS,
            vs.collect(),
            vec![(30, 0, 0.079), (31, 0, 0.00001)],
        ));
        assert_eq!(d.placements[0].reason, Reason::NoImprovement, "{d:?}");
        assert_eq!(d.placements[1].reason, Reason::Imbalance, "{d:?}");
        assert_eq!(d.placements[1].to, 1);
    }

    #[test]
    fn busy_queues_with_direct_moves_are_placed_by_availability() {
        // interrupt remapping: a light IRQ (a ping) follows the flag; a busy queue (8 % of a
        // CPU, over DEFAULT_CHASE_MAX_LOAD) stays on its preempted vCPU, whose raised
        // interrupt would not move anyway
        let mut p = Policy::new(PolicyConfig::extended()).unwrap();
        assert_eq!(p.config().moves, MoveKind::Direct);
        let vs = vec![
            av(0, false, 0.0801, 1.0, 0.3),
            av(1, true, 0.0, 1.0, 0.3),
            av(2, true, 0.0, 1.0, 0.3),
        ];
        let s = snap(2_000 * MS, vs.clone(), vec![(40, 0, 0.08), (41, 0, 0.0001)]);
        let d = p.decide(&s);
        assert_eq!(d.placements[0].reason, Reason::BusyQueue, "{d:?}");
        assert!(!d.placements[0].moved());
        assert_eq!(d.placements[1].reason, Reason::HolderOffline);
        assert!(d.placements[1].moved());
        // with chase_max_load = 0 both follow the flag (the paper)
        let mut p = Policy::new(chasing()).unwrap();
        let d = p.decide(&s);
        assert!(d
            .placements
            .iter()
            .all(|pl| pl.reason == Reason::HolderOffline));
        // a busy queue leaves a starved vCPU, but only for one that runs now: with direct
        // moves its next interrupt goes there at once
        let mut p = Policy::new(PolicyConfig::extended()).unwrap();
        let vs = vec![
            av(0, true, 0.08, 15.0, 0.5),
            av(1, false, 0.0, 0.1, 0.0),
            av(2, true, 0.01, 0.1, 0.0),
        ];
        let d = p.decide(&snap(2_000 * MS, vs, vec![(40, 0, 0.08)]));
        assert_eq!(d.placements[0].to, 2);
        assert_eq!(d.placements[0].reason, Reason::HolderStarved);
        assert!(p.by_availability(DEFAULT_CHASE_MAX_LOAD));
        assert!(!p.by_availability(DEFAULT_CHASE_MAX_LOAD / 2.0));
    }

    #[test]
    fn light_irqs_with_direct_moves_follow_the_flag_to_the_most_available_running_vcpu() {
        let mut p = Policy::new(PolicyConfig::extended()).unwrap();
        // the holder is preempted; vCPU1 runs but shares its core with a busy co-tenant
        // (20 ms expected wait), vCPU2 runs with a core of its own: vCPU2, although vCPU1
        // is less loaded
        let vs = vec![
            av(0, false, 0.01, 1.0, 0.2),
            av(1, true, 0.0, 20.0, 0.5),
            av(2, true, 0.005, 0.1, 0.0),
        ];
        let d = p.decide(&snap(2_000 * MS, vs, vec![(41, 0, 0.0001)]));
        assert_eq!(d.placements[0].to, 2);
        assert_eq!(d.placements[0].reason, Reason::HolderOffline);
        // a running holder that is slow to run after each wake-up (never seen preempted)
        let vs = vec![av(0, true, 0.001, 7.0, 0.45), av(1, true, 0.3, 0.0, 0.0)];
        let d = p.decide(&snap(3_000 * MS, vs.clone(), vec![(41, 0, 0.0001)]));
        assert_eq!(d.placements[0].to, 1);
        assert_eq!(d.placements[0].reason, Reason::HolderStarved);
        // and balance never sends it back to the starved vCPU, however idle it is
        let back = vec![av(0, true, 0.0, 7.0, 0.45), av(1, true, 0.3, 0.0, 0.0)];
        for k in 1..20 {
            let d = p.decide(&snap(
                (3_000 + 500 * k) * MS,
                back.clone(),
                vec![(41, 1, 0.0001)],
            ));
            assert!(!d.placements[0].moved(), "{d:?}");
        }
        // without availability figures the same snapshots are Algorithm 1's
        let mut p = Policy::new(PolicyConfig::extended()).unwrap();
        let plain: Vec<VcpuView> = back.iter().map(|x| v(x.vcpu, x.online, x.load)).collect();
        let d = p.decide(&snap(0, plain, vec![(41, 1, 0.0001)]));
        assert_eq!(d.placements[0].to, 0);
        assert_eq!(d.placements[0].reason, Reason::Imbalance);
    }

    #[test]
    fn config_validation() {
        let mut c = PolicyConfig::paper();
        c.threshold = 0.5;
        assert!(Policy::new(c).is_err());
        c.threshold = f64::NAN;
        assert!(Policy::new(c).is_err());
        let mut c = PolicyConfig::extended();
        c.rate_window_ns = 0;
        assert!(c.validate().is_err());
        for bad in [-0.1, f64::NAN, f64::INFINITY] {
            let c = PolicyConfig {
                chase_max_load: bad,
                ..PolicyConfig::extended()
            };
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("chase max load"), "{e}");
        }
        // a config written before the field existed reads with the default
        let mut j = serde_json::to_value(PolicyConfig::extended()).unwrap();
        j.as_object_mut().unwrap().remove("chase_max_load");
        let back: PolicyConfig = serde_json::from_value(j).unwrap();
        assert_eq!(back.chase_max_load, DEFAULT_CHASE_MAX_LOAD);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
            (1usize..9, 0usize..9).prop_flat_map(|(n, k)| {
                (
                    proptest::collection::vec((any::<bool>(), 0.0f64..100.0), n),
                    proptest::collection::vec((0u32..(n as u32 + 2), 0.0f64..20.0), k),
                )
                    .prop_map(|(vs, is)| Snapshot {
                        now_ns: 0,
                        vcpus: vs
                            .into_iter()
                            .enumerate()
                            .map(|(i, (online, load))| v(i as u32, online, load))
                            .collect(),
                        irqs: is
                            .into_iter()
                            .enumerate()
                            .map(|(i, (holder, load))| IrqView {
                                irq: i as u32,
                                holder,
                                load,
                            })
                            .collect(),
                    })
            })
        }

        proptest! {
            #[test]
            fn every_move_lands_on_an_online_vcpu(s in arb_snapshot(), many in any::<bool>()) {
                let cfg = if many { PolicyConfig::extended() } else { PolicyConfig::paper() };
                let mut p = Policy::new(cfg).unwrap();
                let d = p.decide(&s);
                prop_assert_eq!(d.placements.len(), s.irqs.len());
                for pl in d.moves() {
                    let t = s.vcpus.iter().find(|x| x.vcpu == pl.to);
                    prop_assert!(t.is_some_and(|t| t.online));
                }
            }

            #[test]
            fn many_to_one_moves_the_group_together_and_labels_each_irq_by_what_happens(
                s in arb_snapshot()
            ) {
                let mut p = Policy::new(PolicyConfig::paper()).unwrap();
                let d = p.decide(&s);
                prop_assert_eq!(d.placements.len(), s.irqs.len());
                let move_reasons = [
                    Reason::HolderOffline,
                    Reason::Imbalance,
                    Reason::HolderUnknown,
                    Reason::Group,
                ];
                let all_stay = d.placements.iter().all(|pl| pl.reason == Reason::NoOnlineVcpu);
                if !all_stay {
                    // one target for the whole group
                    if let Some(first) = d.placements.first() {
                        prop_assert!(d.placements.iter().all(|pl| pl.to == first.to));
                    }
                }
                for pl in &d.placements {
                    if pl.moved() {
                        prop_assert!(move_reasons.contains(&pl.reason), "{:?}", pl);
                    } else {
                        // a placement that stays never carries a reason to move
                        prop_assert!(
                            !move_reasons.contains(&pl.reason) || pl.irq == s.irqs[0].irq,
                            "{:?}", pl
                        );
                    }
                }
            }

            #[test]
            fn deferred_decisions_do_not_depend_on_who_is_preempted_now(
                s in arb_snapshot(),
                flags in proptest::collection::vec(any::<bool>(), 9),
            ) {
                // a deferred move lands at the IRQ's next interrupt on its holder, whoever
                // runs now: the targets are the same whatever the preempted flags say
                let cfg = PolicyConfig::extended().with_moves(MoveKind::Deferred);
                let a = Policy::new(cfg).unwrap().decide(&s);
                let mut t = s.clone();
                for (x, f) in t.vcpus.iter_mut().zip(&flags) {
                    x.online = *f;
                }
                let b = Policy::new(cfg).unwrap().decide(&t);
                let to = |d: &Decision| d.placements.iter().map(|p| p.to).collect::<Vec<_>>();
                prop_assert_eq!(to(&a), to(&b));
                for pl in &a.placements {
                    prop_assert!(pl.reason != Reason::HolderOffline, "{:?}", pl);
                }
            }

            #[test]
            fn busy_queues_never_follow_the_flag(s in arb_snapshot()) {
                // direct moves, the default config: an IRQ at or over chase_max_load never
                // moves because its holder is preempted, and never to a preempted vCPU
                let mut p = Policy::new(PolicyConfig::extended()).unwrap();
                let d = p.decide(&s);
                for (pl, i) in d.placements.iter().zip(&s.irqs) {
                    if i.load >= DEFAULT_CHASE_MAX_LOAD {
                        prop_assert!(pl.reason != Reason::HolderOffline, "{:?}", pl);
                    }
                    if pl.moved() {
                        let t = s.vcpus.iter().find(|x| x.vcpu == pl.to);
                        prop_assert!(t.is_some_and(|t| t.online), "{:?}", pl);
                    }
                }
            }

            #[test]
            fn an_irq_on_an_offline_vcpu_leaves_when_any_is_online(s in arb_snapshot()) {
                let mut p = Policy::new(chasing()).unwrap();
                let d = p.decide(&s);
                let any_online = s.vcpus.iter().any(|x| x.online);
                for (pl, i) in d.placements.iter().zip(&s.irqs) {
                    let holder_online = s.vcpus.iter().any(|x| x.vcpu == i.holder && x.online);
                    if any_online && !holder_online {
                        prop_assert!(pl.moved());
                    }
                    if holder_online && pl.reason == Reason::Balanced {
                        prop_assert!(!pl.moved());
                    }
                }
            }
        }
    }
}
