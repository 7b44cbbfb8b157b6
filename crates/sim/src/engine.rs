//! The discrete-event engine: physical CPUs, vCPUs, host schedulers, NIC queues, sources and
//! the guest interrupt policies.
//!
//! Time is in nanoseconds. Events sit in a binary heap ordered by `(time, sequence)`; the
//! sequence number is the insertion order, so events at the same instant run in the order they
//! were scheduled and a run is a pure function of the scenario and its seed.
//!
//! # Model
//! - A **vCPU** is running on its pCPU, runnable but descheduled ("preempted", offline to
//!   vBalance), or blocked (halted). A running vCPU does interrupt work first (pending NIC
//!   queues, one packet at a time) and its workload otherwise.
//! - A **NIC queue** has a ring of fixed size and one IRQ. A packet arriving at an armed queue
//!   raises the interrupt on the vCPU the IRQ is bound to (and disarms it); that vCPU polls the
//!   ring NAPI-style until it is empty, then re-arms. Packets that find the ring full are
//!   dropped. Rebinding an IRQ whose interrupt is pending on a vCPU that is not processing it
//!   moves the pending interrupt along (Xen event-channel semantics, as in the paper).
//! - **Credit**: per-pCPU runqueue ordered SMP_BOOST > BOOST > UNDER > OVER, FIFO within a
//!   priority; 30 ms slices; a 10 ms tick debits the running vCPU and drops its boost; every 3
//!   ticks credits are shared among the pCPU's non-blocked vCPUs. A vCPU waking from block gets
//!   BOOST if UNDER and preempts a lower priority. With vBalance, an interrupt for a VM none of
//!   whose vCPUs runs gives the target SMP_BOOST (the paper's fast path).
//! - **EEVDF**: virtual runtime, eligibility (`vruntime <= average`), earliest virtual deadline
//!   first, `deadline = vruntime + slice`; a woken task keeps its lag and preempts the current
//!   one if it is eligible with an earlier deadline.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use irqbal::load::DecayingLoad;
use irqbal::{IrqView, Policy, Snapshot, VcpuView};

use crate::scenario::{
    udp_slots, Detector, MoveSemantics, PolicyKind, Scenario, SchedulerKind, SourceSpec,
    VbalanceSpec, VmSpec, Workload,
};

mod daemon;
mod host;
pub use daemon::Detection;
use daemon::{Daemon, DetectStats};
use host::HostAgent;
pub use host::{irq_trace_tid, BoostDecision};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// More events than this at one simulated instant is a livelock in the model (time cannot
/// advance); the run stops with [`SimError::Livelock`] instead of spinning for ever.
const SAME_INSTANT_LIMIT: u64 = 1_000_000;
/// Event budget: a floor plus this many events per simulated millisecond (the busiest
/// built-in, 64-byte UDP at 1 Gbit/s, needs about 4 000). A run over it stops with
/// [`SimError::Budget`].
const EVENT_BUDGET_PER_MS: u64 = 200_000;
const EVENT_BUDGET_FLOOR: u64 = 20_000_000;
/// The queue is compacted (superseded events dropped) when it doubles; a queue of live
/// events larger than this stops the run with [`SimError::Queue`].
const COMPACT_MIN: usize = 1 << 16;
const QUEUE_LIMIT: usize = 20_000_000;

/// Why a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error(
        "the model stopped making progress at t = {at_ns} ns: {events} events at one \
         instant (last: {last})"
    )]
    Livelock {
        at_ns: u64,
        events: u64,
        last: String,
    },
    #[error(
        "more than {budget} events by t = {at_ns} ns (event budget exceeded after {events} \
         events)"
    )]
    Budget {
        at_ns: u64,
        events: u64,
        budget: u64,
    },
    #[error("{queued} live events queued at t = {at_ns} ns (queue limit exceeded)")]
    Queue { at_ns: u64, queued: usize },
}

// ---------------------------------------------------------------- event queue

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// End of the running vCPU's slice on a pCPU.
    SliceEnd { pcpu: u32, gen: u32 },
    /// Re-pick on a pCPU (wakeup preemption, idle pCPU, block).
    Resched { pcpu: u32 },
    /// Credit scheduler tick on a pCPU.
    Tick { pcpu: u32, n: u32 },
    /// The running vCPU finished its current activity (a packet or a compute phase).
    Activity { vcpu: u32, gen: u32 },
    /// A blocked vCPU's I/O completed.
    IoDone { vcpu: u32 },
    /// A packet reaches a NIC queue.
    Arrive { queue: u32, pkt: Pkt },
    /// A source's own timer (ping send, stream send).
    Source { src: u32 },
    /// A TCP ACK reaches the sender.
    Ack { src: u32, acked: u64 },
    /// Delayed-ACK timer of a TCP receiver.
    DelAck { src: u32, gen: u32 },
    /// irqbalance's rebalancing period.
    PolicyTick { vm: u32 },
    /// A running vCPU's guest timer tick (HZ): steal accounting, the eBPF program's and the
    /// tick detector's reading point.
    GuestTick { vcpu: u32, gen: u32 },
    /// The `/proc/stat` daemon's sampling timer.
    DaemonTimer { vm: u32 },
    /// The daemon finished its work (read, decide, write) on its vCPU.
    DaemonDone { vm: u32, gen: u32 },
    /// The host agent's oldest decision not yet in effect takes effect (a thread raised or
    /// lowered).
    AgentEffect,
    /// The host agent's timer: a boost's budget runs out on the agent's clock.
    AgentTimer { gen: u32 },
    /// The bound (`host-boost-ideal`): has a raised vCPU's interrupt work gone quiet?
    BoundQuiet { vcpu: u32, gen: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Pkt {
    src: u32,
    /// ping: send time; tcp: segment number; udp: unused.
    tag: u64,
    bytes: u32,
    slots: u32,
    cost_ns: u64,
}

struct Entry {
    t: u64,
    /// 0 for credit ticks, 1 for the rest: at one instant the scheduler's accounting runs
    /// before its decisions (a vCPU picked at the instant of a tick is not debited for a tick
    /// it did not run, which would preempt it at once).
    class: u8,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.class == o.class && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // min-heap on (t, class, seq)
        o.t.cmp(&self.t)
            .then(o.class.cmp(&self.class))
            .then(o.seq.cmp(&self.seq))
    }
}

/// A deterministic PRNG (SplitMix64).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

// ---------------------------------------------------------------- entities

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    Running,
    Runnable,
    Blocked,
}

/// Credit priorities, higher runs first.
const PRI_OVER: i8 = -1;
const PRI_UNDER: i8 = 0;
const PRI_BOOST: i8 = 1;
const PRI_SMP_BOOST: i8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Nothing scheduled (burning or blocked).
    None,
    /// Processing the head packet of a queue.
    Packet(u32),
    /// Compute phase of an I/O workload.
    Compute,
}

struct Vcpu {
    vm: u32,
    index: u32,
    pcpu: u32,
    state: RunState,
    // credit
    pri: i8,
    credit: i64,
    // eevdf
    vruntime: i64,
    deadline: i64,
    lag: i64,
    // activity
    act: Act,
    act_gen: u32,
    act_start: u64,
    compute_left: u64,
    pending: Vec<u32>,
    // accounting
    run_start: u64,
    runtime: u64,
    irq_ns: u64,
    load: DecayingLoad,
    // what a KVM guest can see of its scheduling
    /// `kvm_steal_time.preempted`: descheduled while runnable, until it runs again.
    kvm_preempted: bool,
    /// When it last became runnable (for the steal clock).
    runnable_since: u64,
    /// KVM's steal clock: host run-queue wait so far (updated when it is scheduled in).
    steal_clock: u64,
    /// Steal the guest has accounted (at its own ticks): what `/proc/stat` shows.
    steal_accounted: u64,
    /// Guest tick: next deadline on the HZ grid, and a generation (no ticks while it does
    /// not run).
    next_tick: u64,
    tick_gen: u32,
    /// Preemption episode bookkeeping for the detection statistics.
    preempted_at: Option<u64>,
    episode_seen: bool,
    /// Waiting in the runqueue after a wake-up from halt (not preempted).
    woken: bool,
    /// Idle (halted) time so far, and since when it is halted (what `/proc/stat` idle shows).
    idle_ns: u64,
    blocked_since: u64,
    /// What the eBPF program counts at each exit from idle: wake-ups, and the steal each
    /// waited for the host after it (sum ns, sum of squares µs²).
    wakes: u64,
    wake_wait_ns: u64,
    wake_wait_sq_us2: u64,
    /// EEVDF slice of this vCPU's thread (the base slice, or `host-slice`'s).
    slice: i64,
    /// Its thread has entered the guest once: the agent's program knows its thread id.
    entered: bool,
    /// Its thread is raised (SCHED_FIFO: neither charged vruntime nor preempted by fair
    /// tasks), and marked raised in the program's map, until the agent lowers it.
    boosted: bool,
    /// When it last had interrupt work while raised, and whether the bound's quiet check is
    /// queued (`host-boost-ideal`).
    boost_busy_at: u64,
    boost_quiet_armed: bool,
    /// Generation of the pending BoundQuiet event (bumped at every raise and lower).
    boost_gen: u32,
}

struct Pcpu {
    current: Option<u32>,
    runq: VecDeque<u32>,
    /// Raised vCPUs waiting for the CPU (out of `runq`): they run before every fair task, in
    /// real-time FIFO order, each when the one before it leaves the CPU or the real-time
    /// class.
    rt_queue: VecDeque<u32>,
    slice_gen: u32,
    resched_pending: bool,
    switches: u64,
}

struct Queue {
    vm: u32,
    irq_index: u32,
    ring: VecDeque<Pkt>,
    /// Processing time left of the head packet when a vCPU was interrupted in it (0: none).
    head_left: u64,
    slots_used: u32,
    ring_slots: u32,
    armed: bool,
    /// vCPU (global index) the interrupt is pending on, if raised.
    raised_on: Option<u32>,
    /// The raised interrupt has been acked (its vCPU started servicing it).
    acked: bool,
    /// A deferred affinity change (VM-local vCPU), applied when the next interrupt is acked.
    move_pending: Option<u32>,
    /// Interrupts raised per VM-local vCPU (what `/proc/interrupts` counts).
    ints: Vec<u64>,
    load: DecayingLoad,
    drops: u64,
}

struct Vm {
    vcpus: Vec<u32>,
    queues: Vec<u32>,
    /// IRQ map: queue (VM-local index) → VM-local vCPU index.
    map: Vec<u32>,
    running: u32,
    workload: Workload,
    policy: Option<Policy>,
    /// The vBalance daemon of a daemon variant (detector state, where it runs).
    daemon: Option<Daemon>,
    irq_moves: u64,
    /// irqbalance: per-queue irq time at the previous period.
    last_queue_ns: Vec<u64>,
    queue_ns: Vec<u64>,
}

enum SrcState {
    Ping {
        queue: u32,
        interval: u64,
        size: u32,
        rtts: Vec<(u64, u64)>,
        sent: u64,
    },
    Tcp {
        queue: u32,
        msg: u32,
        window: u64,
        next: u64,
        acked: u64,
        link_free: u64,
        send_armed: bool,
        // receiver
        received: u64,
        unacked: u32,
        delack_gen: u32,
        delack_armed: bool,
        bytes: u64,
    },
    Udp {
        queue: u32,
        msg: u32,
        bytes: u64,
        sent: u64,
    },
}

/// Per-run outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunStats {
    pub events: u64,
    /// Most events queued at once.
    pub peak_queue: usize,
    pub simulated_ns: u64,
    /// (send time ns, rtt ns) per answered ping.
    pub pings: Vec<(u64, u64)>,
    pub pings_sent: u64,
    /// Bytes delivered to the guest per stream source (TCP and UDP), in source order.
    pub stream_bytes: Vec<(String, u64)>,
    pub drops: u64,
    pub irq_moves: u64,
    pub context_switches: u64,
    /// Run time per vCPU (global order), ns.
    pub vcpu_runtime_ns: Vec<u64>,
    /// Interrupt processing time per vCPU, ns.
    pub vcpu_irq_ns: Vec<u64>,
    /// How soon the daemon learned of preemptions (daemon variants only).
    pub detection: Option<Detection>,
    /// Host boosts (host-boost, vbalance on EEVDF), the agent's own counts
    /// (`irqbal::wait::boost::BoostStats`): raises, boosted time on its clock (boosts still
    /// raised at the end not counted), and accepts the per-VM share refused.
    pub boosts: u64,
    pub boost_ns: u64,
    pub boosts_refused: u64,
    /// The irq-wait events, when [`Sim::trace_irq_waits`] asked for them.
    #[serde(skip)]
    pub irq_trace: Vec<irqbal::wait::WaitEvent>,
    /// The host agent's decisions, in the order it made them, when [`Sim::trace_irq_waits`]
    /// asked for the trace.
    #[serde(skip)]
    pub boost_decisions: Vec<BoostDecision>,
}

/// One simulation: a scenario under one host scheduler and one guest policy.
pub struct Sim {
    now: u64,
    end: u64,
    seq: u64,
    heap: BinaryHeap<Entry>,
    rng: Rng,
    sched: SchedulerKind,
    policy: PolicyKind,
    pcpus: Vec<Pcpu>,
    vcpus: Vec<Vcpu>,
    vms: Vec<Vm>,
    queues: Vec<Queue>,
    srcs: Vec<SrcState>,
    // parameters
    timeslice: u64,
    tick: u64,
    ticks_per_acct: u32,
    slice: i64,
    net_one_way: u64,
    bits_ns: f64,
    pkt_ns: f64,
    byte_ns: f64,
    msg_ns: f64,
    mss: u32,
    delack: u64,
    irqbalance_period: u64,
    /// Guest tick period.
    vb_tick: u64,
    vb: VbalanceSpec,
    half_life_ns: u64,
    detect: DetectStats,
    smp_boost: bool,
    /// The host agent (`host-boost`, `vbalance`, the bound; EEVDF only).
    agent: Option<HostAgent>,
    events: u64,
    compact_at: usize,
    peak_queue: usize,
    /// What the irq-wait program would push on a KVM host (see [`Sim::trace_irq_waits`]),
    /// and the vCPUs that have an accept waiting for their next run (the program's pending
    /// marks; kept while the trace or the agent is on).
    irq_trace: Option<Vec<irqbal::wait::WaitEvent>>,
    irq_waiting: Vec<bool>,
}

/// vCPU `i` of VM `vm` (spec `spec`), on `pcpu`, as it starts: runnable, in its runqueue.
fn vcpu_of(
    sc: &Scenario,
    spec: &VmSpec,
    vm: u32,
    i: u32,
    pcpu: u32,
    sched: SchedulerKind,
    policy: PolicyKind,
) -> Vcpu {
    let half_life = (sc.vbalance.load_half_life_ms * MS as f64) as u64;
    let compute = match spec.workload {
        Workload::Io { compute_us, .. } => compute_us * US,
        _ => 0,
    };
    Vcpu {
        vm,
        index: i,
        pcpu,
        state: RunState::Runnable,
        pri: PRI_UNDER,
        credit: 0,
        vruntime: 0,
        deadline: 0,
        lag: 0,
        act: Act::None,
        act_gen: 0,
        act_start: 0,
        compute_left: compute,
        pending: Vec::new(),
        run_start: 0,
        runtime: 0,
        irq_ns: 0,
        load: DecayingLoad::new(half_life),
        // every vCPU starts in the runqueue, as if preempted (a vCPU that has not
        // run yet must not look like a good target)
        kvm_preempted: true,
        runnable_since: 0,
        steal_clock: 0,
        steal_accounted: 0,
        next_tick: 0,
        tick_gen: 0,
        preempted_at: None,
        episode_seen: false,
        woken: false,
        idle_ns: 0,
        blocked_since: 0,
        wakes: 0,
        wake_wait_ns: 0,
        wake_wait_sq_us2: 0,
        slice: if policy.host_slice() && sched == SchedulerKind::Eevdf {
            // without HRTICK a slice ends at a scheduler tick at the earliest: a
            // slice under the tick is the tick
            let us = if sc.host.hrtick {
                sc.host.slice_us
            } else {
                sc.host.slice_us.max(sc.host.tick_us)
            };
            (us * US as f64) as i64
        } else {
            (sc.eevdf.slice_us * US as f64) as i64
        },
        entered: false,
        boosted: false,
        boost_busy_at: 0,
        boost_quiet_armed: false,
        boost_gen: 0,
    }
}

/// Queue `q` of VM `vm`, empty and armed.
fn queue_of(spec: &VmSpec, vm: u32, q: u32, half_life: u64) -> Queue {
    Queue {
        vm,
        irq_index: q,
        ring: VecDeque::new(),
        head_left: 0,
        slots_used: 0,
        ring_slots: spec.ring,
        armed: true,
        raised_on: None,
        acked: false,
        move_pending: None,
        ints: vec![0; spec.vcpus as usize],
        load: DecayingLoad::new(half_life),
        drops: 0,
    }
}

/// The process id a simulated VM has in an irq-wait trace: VM `i` is `IRQ_TRACE_PID + i`.
pub const IRQ_TRACE_PID: u32 = 1000;

impl Sim {
    /// Build a simulation. The scenario must be valid ([`Scenario::validate`]).
    pub fn new(sc: &Scenario, sched: SchedulerKind, policy: PolicyKind) -> Result<Self, String> {
        sc.validate()?;
        let mut sim = Sim::idle(sc, sched, policy);
        for (vi, spec) in sc.vms.iter().enumerate() {
            sim.add_vm(sc, vi, spec)?;
        }
        sim.shuffle_runqueues();
        for (si, s) in sc.sources.iter().enumerate() {
            sim.add_source(si, s);
        }
        sim.arm_timers(sc);
        Ok(sim)
    }

    /// The simulation's parameters, with no VM and nothing queued.
    fn idle(sc: &Scenario, sched: SchedulerKind, policy: PolicyKind) -> Sim {
        let half_life = (sc.vbalance.load_half_life_ms * MS as f64) as u64;
        Sim {
            now: 0,
            end: sc.duration_ms * MS,
            seq: 0,
            heap: BinaryHeap::new(),
            rng: Rng(sc.seed ^ 0x005E_ED0F_5EED),
            sched,
            policy,
            pcpus: (0..sc.pcpus)
                .map(|_| Pcpu {
                    current: None,
                    runq: VecDeque::new(),
                    rt_queue: VecDeque::new(),
                    slice_gen: 0,
                    resched_pending: false,
                    switches: 0,
                })
                .collect(),
            vcpus: Vec::new(),
            vms: Vec::new(),
            queues: Vec::new(),
            srcs: Vec::new(),
            timeslice: (sc.credit.timeslice_ms * MS as f64) as u64,
            tick: (sc.credit.tick_ms * MS as f64) as u64,
            ticks_per_acct: sc.credit.ticks_per_acct,
            slice: (sc.eevdf.slice_us * US as f64) as i64,
            net_one_way: (sc.net.one_way_us * US as f64) as u64,
            bits_ns: 1000.0 / sc.net.link_mbps, // ns per bit
            pkt_ns: sc.net.pkt_ns,
            byte_ns: sc.net.byte_ns,
            msg_ns: sc.net.msg_ns,
            mss: sc.net.mss,
            delack: (sc.net.delack_ms * MS as f64) as u64,
            irqbalance_period: sc.irqbalance_period_ms * MS,
            vb_tick: (sc.vbalance.tick_us * US as f64) as u64,
            vb: sc.vbalance,
            half_life_ns: half_life.max(1),
            detect: DetectStats::default(),
            smp_boost: sc.vbalance.smp_boost
                && sched == SchedulerKind::Credit
                && policy == PolicyKind::VbalanceOracle,
            agent: (policy.host_boost() && sched == SchedulerKind::Eevdf)
                .then(|| HostAgent::new(&sc.host, policy.boost_ends_with_work(), sc.seed)),
            events: 0,
            compact_at: COMPACT_MIN,
            peak_queue: 0,
            irq_trace: None,
            irq_waiting: Vec::new(),
        }
    }

    /// VM `vi`: its vCPUs, each in the runqueue of its pCPU, and its queues.
    fn add_vm(&mut self, sc: &Scenario, vi: usize, spec: &VmSpec) -> Result<(), String> {
        let (sched, policy) = (self.sched, self.policy);
        let half_life = (sc.vbalance.load_half_life_ms * MS as f64) as u64;
        let mut vm = Vm {
            vcpus: Vec::new(),
            queues: Vec::new(),
            map: vec![0; spec.queues as usize],
            running: 0,
            workload: spec.workload,
            policy: None,
            daemon: None,
            irq_moves: 0,
            last_queue_ns: vec![0; spec.queues as usize],
            queue_ns: vec![0; spec.queues as usize],
        };
        let config = policy.policy_config(&sc.vbalance);
        if policy.is_vbalance() {
            vm.policy = Some(Policy::new(config).map_err(|e| e.to_string())?);
        }
        if let Some(det) = policy.detector().filter(|&d| d != Detector::Oracle) {
            let windows_only = config.moves == irqbal::MoveKind::Deferred;
            let avail_window = (sc.vbalance.avail_window_ms * MS as f64) as u64;
            vm.daemon = Some(Daemon::new(
                det,
                spec.vcpus,
                spec.queues,
                avail_window,
                windows_only,
            ));
        }
        for i in 0..spec.vcpus {
            let pcpu = match &spec.pin {
                Some(p) => p.get(i as usize).copied().unwrap_or(0),
                None => i % sc.pcpus,
            };
            vm.vcpus.push(self.vcpus.len() as u32);
            let vcpu = vcpu_of(sc, spec, vi as u32, i, pcpu, sched, policy);
            self.vcpus.push(vcpu);
        }
        for q in 0..spec.queues {
            vm.queues.push(self.queues.len() as u32);
            self.queues.push(queue_of(spec, vi as u32, q, half_life));
        }
        self.vms.push(vm);
        Ok(())
    }

    /// Initial runqueues: a random order of each pCPU's vCPUs.
    fn shuffle_runqueues(&mut self) {
        let mut order: Vec<u32> = (0..self.vcpus.len() as u32).collect();
        for i in (1..order.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        for v in order {
            let p = self.vcpus[v as usize].pcpu;
            self.pcpus[p as usize].runq.push_back(v);
        }
    }

    /// Traffic source `si`, its first packet queued.
    fn add_source(&mut self, si: usize, s: &SourceSpec) {
        let vm = &self.vms[s.vm() as usize];
        let queue = vm.queues[s.queue() as usize];
        let st = match *s {
            SourceSpec::Ping {
                interval_ms, size, ..
            } => {
                let interval = interval_ms * MS;
                let first = self.rng.below(interval);
                self.push(first, Ev::Source { src: si as u32 });
                SrcState::Ping {
                    queue,
                    interval,
                    size,
                    rtts: Vec::new(),
                    sent: 0,
                }
            }
            SourceSpec::Tcp {
                message_size,
                window_kb,
                ..
            } => {
                let t0 = self.rng.below(MS);
                self.push(t0, Ev::Source { src: si as u32 });
                SrcState::Tcp {
                    queue,
                    msg: message_size,
                    window: (window_kb as u64 * 1024).div_ceil(self.mss as u64),
                    next: 0,
                    acked: 0,
                    link_free: 0,
                    send_armed: true,
                    received: 0,
                    unacked: 0,
                    delack_gen: 0,
                    delack_armed: false,
                    bytes: 0,
                }
            }
            SourceSpec::Udp { message_size, .. } => {
                let t0 = self.rng.below(MS);
                self.push(t0, Ev::Source { src: si as u32 });
                SrcState::Udp {
                    queue,
                    msg: message_size,
                    bytes: 0,
                    sent: 0,
                }
            }
        };
        self.srcs.push(st);
    }

    /// The first of every periodic event: pCPU reschedules and ticks, guest ticks, policy
    /// ticks and daemon windows, and the host agent's tables.
    fn arm_timers(&mut self, sc: &Scenario) {
        let (sched, policy) = (self.sched, self.policy);
        for p in 0..self.pcpus.len() as u32 {
            self.push(0, Ev::Resched { pcpu: p });
            self.pcpus[p as usize].resched_pending = true;
            if sched == SchedulerKind::Credit {
                // stagger the pCPU ticks like Xen does
                let off = self.rng.below(self.tick);
                self.push(off, Ev::Tick { pcpu: p, n: 0 });
            }
        }
        // each vCPU's guest tick has its own phase on the HZ grid
        for v in 0..self.vcpus.len() {
            let phase = self.rng.below(self.vb_tick);
            self.vcpus[v].next_tick = phase;
        }
        for vm in 0..self.vms.len() as u32 {
            if policy == PolicyKind::Irqbalance {
                self.push(self.irqbalance_period, Ev::PolicyTick { vm });
            }
            // every daemon samples /proc/stat and /proc/interrupts at its window and decides
            // there; the eBPF and tick daemons also decide when a vCPU holding an IRQ is seen
            // preempted, except on a deferred-move guest
            if let Some(det) = policy.detector().filter(|&d| d != Detector::Oracle) {
                // the daemon's windows have no fixed phase against the host's slices: the
                // first comes at a random moment of its second interval (its own RNG, so that
                // the other random draws are those of the static run with the same seed)
                let every = self.daemon_interval(det);
                let phase = Rng(sc.seed ^ 0xDAE_3011 ^ vm as u64).below(every);
                self.push(every + phase.max(1), Ev::DaemonTimer { vm });
            }
        }
        if let Some(a) = self.agent.as_mut() {
            a.size(self.vcpus.len());
            self.irq_waiting = vec![false; self.vcpus.len()];
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let class = u8::from(!matches!(ev, Ev::Tick { .. }));
        self.heap.push(Entry {
            t,
            class,
            seq: self.seq,
            ev,
        });
    }

    /// Whether a queued event has been superseded (its slice, activity or delayed ACK was
    /// re-armed since it was pushed); such events are skipped when they come up.
    fn is_stale(&self, ev: &Ev) -> bool {
        match *ev {
            Ev::SliceEnd { pcpu, gen } => self.pcpus[pcpu as usize].slice_gen != gen,
            Ev::Activity { vcpu, gen } => self.vcpus[vcpu as usize].act_gen != gen,
            Ev::GuestTick { vcpu, gen } => self.vcpus[vcpu as usize].tick_gen != gen,
            Ev::BoundQuiet { vcpu, gen } => self.vcpus[vcpu as usize].boost_gen != gen,
            Ev::AgentTimer { gen } => self.agent.as_ref().is_none_or(|a| !a.timer_is(gen)),
            Ev::DaemonDone { vm, gen } => self.vms[vm as usize]
                .daemon
                .as_ref()
                .is_none_or(|d| d.gen != gen),
            Ev::DelAck { src, gen } => match &self.srcs[src as usize] {
                SrcState::Tcp {
                    delack_gen,
                    delack_armed,
                    ..
                } => *delack_gen != gen || !*delack_armed,
                _ => true,
            },
            _ => false,
        }
    }

    /// Drop superseded events from the queue. Every context switch and every interrupted
    /// activity leaves one behind; without this, a run with frequent switches and long
    /// slices or compute phases keeps millions of dead events queued.
    fn compact(&mut self) {
        let heap = std::mem::take(&mut self.heap);
        let live: Vec<Entry> = heap
            .into_vec()
            .into_iter()
            .filter(|e| !self.is_stale(&e.ev))
            .collect();
        self.heap = BinaryHeap::from(live);
        self.compact_at = (2 * self.heap.len()).max(COMPACT_MIN);
    }

    /// Run to the end of the scenario and return the statistics, or stop with an error
    /// when the model stops making progress (see [`SimError`]).
    pub fn run(mut self) -> Result<RunStats, SimError> {
        let budget = EVENT_BUDGET_FLOOR.saturating_add(self.end / 1_000_000 * EVENT_BUDGET_PER_MS);
        let mut same_instant = 0u64;
        while let Some(e) = self.heap.pop() {
            if e.t > self.end {
                break;
            }
            if e.t == self.now {
                same_instant += 1;
                if same_instant > SAME_INSTANT_LIMIT {
                    return Err(SimError::Livelock {
                        at_ns: self.now,
                        events: same_instant,
                        last: format!("{:?}", e.ev),
                    });
                }
            } else {
                same_instant = 0;
            }
            self.now = e.t;
            self.events += 1;
            if self.events > budget {
                return Err(SimError::Budget {
                    at_ns: self.now,
                    events: self.events,
                    budget,
                });
            }
            self.handle(e.ev);
            self.peak_queue = self.peak_queue.max(self.heap.len());
            if self.heap.len() > self.compact_at {
                self.compact();
                if self.heap.len() > QUEUE_LIMIT {
                    return Err(SimError::Queue {
                        at_ns: self.now,
                        queued: self.heap.len(),
                    });
                }
            }
        }
        self.now = self.end;
        // close the accounting of running vCPUs
        for v in 0..self.vcpus.len() {
            if self.vcpus[v].state == RunState::Running {
                let vc = &mut self.vcpus[v];
                vc.runtime += self.end.saturating_sub(vc.run_start);
            }
        }
        let (boosts, boost_ns, boosts_refused, boost_decisions) = match self.agent.take() {
            Some(a) => a.finish(),
            None => (0, 0, 0, Vec::new()),
        };
        let mut pings = Vec::new();
        let mut pings_sent = 0;
        let mut stream_bytes = Vec::new();
        for s in &self.srcs {
            match s {
                SrcState::Ping { rtts, sent, .. } => {
                    pings.extend_from_slice(rtts);
                    pings_sent += sent;
                }
                SrcState::Tcp { bytes, .. } => stream_bytes.push(("tcp".to_string(), *bytes)),
                SrcState::Udp { bytes, .. } => stream_bytes.push(("udp".to_string(), *bytes)),
            }
        }
        Ok(RunStats {
            events: self.events,
            peak_queue: self.peak_queue,
            simulated_ns: self.end,
            pings,
            pings_sent,
            stream_bytes,
            drops: self.queues.iter().map(|q| q.drops).sum(),
            irq_moves: self.vms.iter().map(|v| v.irq_moves).sum(),
            context_switches: self.pcpus.iter().map(|p| p.switches).sum(),
            vcpu_runtime_ns: self.vcpus.iter().map(|v| v.runtime).collect(),
            vcpu_irq_ns: self.vcpus.iter().map(|v| v.irq_ns).collect(),
            detection: self.detection(),
            boosts,
            boost_ns,
            boosts_refused,
            irq_trace: self.irq_trace.take().unwrap_or_default(),
            boost_decisions,
        })
    }

    /// Also record the events `vmtune irq wait`'s eBPF program would push on a KVM host: an
    /// accept at each interrupt raised for a vCPU, with its state (running: in the guest;
    /// runnable after a preemption: preempted; halted, or woken and not yet run: blocked; not
    /// yet entered the guest: unknown) and, once it has entered the guest, its thread
    /// ([`irq_trace_tid`]); an entry when a vCPU with an accept waiting next runs (KVM enters
    /// the guest at once); and, where the host agent runs, a blocked event when a raised
    /// vCPU's thread goes to sleep. These are the events the agent is fed, in its order; its
    /// decisions are recorded too ([`RunStats::boost_decisions`]). VM `i` is process
    /// [`IRQ_TRACE_PID`]` + i`; accepts are attributed by the VM's thread.
    pub fn trace_irq_waits(mut self) -> Self {
        self.irq_trace = Some(Vec::new());
        self.irq_waiting = vec![false; self.vcpus.len()];
        if let Some(a) = self.agent.as_mut() {
            a.keep_log();
        }
        self
    }

    /// Whether the program's events are wanted (a trace, or the agent).
    fn program_on(&self) -> bool {
        self.irq_trace.is_some() || self.agent.is_some()
    }

    /// The program's accept for an interrupt raised for `t`.
    fn program_accept(&mut self, t: u32) {
        if !self.program_on() {
            return;
        }
        use irqbal::wait::{Holder, VcpuState, WaitEvent};
        let x = &self.vcpus[t as usize];
        let state = match x.state {
            _ if !x.entered => VcpuState::Unknown,
            RunState::Running => VcpuState::Guest,
            RunState::Runnable if !x.woken => VcpuState::Preempted,
            RunState::Runnable | RunState::Blocked => VcpuState::Blocked,
        };
        let vm = IRQ_TRACE_PID + x.vm;
        let tid = x.entered.then(|| irq_trace_tid(vm, x.index));
        // who runs on its CPU (the program's per-CPU current process)
        let holder = match self.pcpus[x.pcpu as usize].current {
            _ if state == VcpuState::Guest => Holder::Unknown,
            None => Holder::Idle,
            Some(c) if self.vcpus[c as usize].vm == x.vm => Holder::Own,
            Some(_) => Holder::Other,
        };
        let e = WaitEvent::accept(self.now, vm, x.index, state, tid).with_holder(holder);
        if state != VcpuState::Guest {
            self.irq_waiting[t as usize] = true;
        }
        self.program_event(e);
    }

    /// The program's entry for `v` entering the guest, if an accept waits for it.
    fn program_entry(&mut self, v: u32) {
        if !self.program_on() {
            return;
        }
        if std::mem::take(&mut self.irq_waiting[v as usize]) {
            let x = &self.vcpus[v as usize];
            let e = irqbal::wait::WaitEvent::Entry {
                ts_ns: self.now,
                vm: IRQ_TRACE_PID + x.vm,
                vcpu: x.index,
            };
            self.program_event(e);
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::SliceEnd { pcpu, gen } => {
                if self.pcpus[pcpu as usize].slice_gen == gen {
                    self.slice_end(pcpu);
                }
            }
            Ev::Resched { pcpu } => {
                self.pcpus[pcpu as usize].resched_pending = false;
                self.resched(pcpu);
            }
            Ev::Tick { pcpu, n } => self.credit_tick(pcpu, n),
            Ev::Activity { vcpu, gen } => {
                if self.vcpus[vcpu as usize].act_gen == gen {
                    self.activity_done(vcpu);
                }
            }
            Ev::IoDone { vcpu } => {
                let v = &mut self.vcpus[vcpu as usize];
                if let Workload::Io { compute_us, .. } = self.vms[v.vm as usize].workload {
                    v.compute_left = compute_us * US;
                }
                if v.state == RunState::Blocked {
                    self.wake(vcpu);
                }
            }
            Ev::Arrive { queue, pkt } => self.arrive(queue, pkt),
            Ev::Source { src } => self.source_timer(src),
            Ev::Ack { src, acked } => self.tcp_ack(src, acked),
            Ev::DelAck { src, gen } => self.tcp_delack(src, gen),
            Ev::PolicyTick { vm } => self.policy_tick(vm),
            Ev::GuestTick { vcpu, gen } => {
                if self.vcpus[vcpu as usize].tick_gen == gen {
                    self.guest_tick(vcpu);
                }
            }
            Ev::DaemonTimer { vm } => self.daemon_timer(vm),
            Ev::AgentEffect => self.agent_effect(),
            Ev::AgentTimer { gen } => self.agent_timer(gen),
            Ev::BoundQuiet { vcpu, gen } => {
                let x = &self.vcpus[vcpu as usize];
                if x.boosted && x.boost_gen == gen {
                    self.bound_quiet(vcpu);
                }
            }
            Ev::DaemonDone { vm, gen } => {
                if self.vms[vm as usize]
                    .daemon
                    .as_ref()
                    .is_some_and(|d| d.gen == gen)
                {
                    self.daemon_done(vm);
                }
            }
        }
    }

    // ------------------------------------------------------------ scheduling

    fn request_resched(&mut self, p: u32) {
        let pc = &mut self.pcpus[p as usize];
        if !pc.resched_pending {
            pc.resched_pending = true;
            let now = self.now;
            self.push(now, Ev::Resched { pcpu: p });
        }
    }

    /// Average vruntime of the pCPU's runnable and running vCPUs (EEVDF).
    fn avg_vruntime(&self, p: u32) -> Option<i64> {
        let pc = &self.pcpus[p as usize];
        let mut sum: i128 = 0;
        let mut n: i128 = 0;
        for &v in pc.runq.iter().chain(pc.current.iter()) {
            sum += self.vcpus[v as usize].vruntime as i128;
            n += 1;
        }
        (n > 0).then(|| (sum / n) as i64)
    }

    /// Bring the current vCPU's vruntime up to now (EEVDF).
    fn update_curr(&mut self, p: u32) {
        if let Some(c) = self.pcpus[p as usize].current {
            let now = self.now;
            let v = &mut self.vcpus[c as usize];
            let ran = now.saturating_sub(v.run_start);
            v.runtime += ran;
            if !v.boosted {
                // a boosted vCPU runs in the real-time class: no fair-class time
                v.vruntime += ran as i64;
            }
            v.run_start = now;
        }
    }

    /// Which vCPU should run on `p` now: index into runq, or None for "keep current/idle".
    fn best_in_runq(&self, p: u32) -> Option<usize> {
        let pc = &self.pcpus[p as usize];
        if pc.runq.is_empty() {
            return None;
        }
        match self.sched {
            SchedulerKind::Credit => Some(0),
            SchedulerKind::Eevdf => {
                let avg = self.avg_vruntime(p).unwrap_or(0);
                let mut best: Option<(usize, i64)> = None;
                let mut fallback: Option<(usize, i64)> = None;
                for (i, &v) in pc.runq.iter().enumerate() {
                    let vc = &self.vcpus[v as usize];
                    if fallback.is_none_or_gt(vc.vruntime) {
                        fallback = Some((i, vc.vruntime));
                    }
                    if vc.vruntime <= avg && best.is_none_or_gt(vc.deadline) {
                        best = Some((i, vc.deadline));
                    }
                }
                best.or(fallback).map(|(i, _)| i)
            }
        }
    }

    fn resched(&mut self, p: u32) {
        match self.pcpus[p as usize].current {
            None => self.pick_and_run(p),
            Some(c) => {
                if self.vcpus[c as usize].boosted {
                    // SCHED_FIFO: no fair-class task preempts it
                    return;
                }
                if self.sched == SchedulerKind::Eevdf {
                    self.update_curr(p);
                }
                if !self.pcpus[p as usize].rt_queue.is_empty() {
                    // a raised thread preempts every fair task
                    self.deschedule(p, RunState::Runnable);
                    self.pick_and_run(p);
                    return;
                }
                let Some(i) = self.best_in_runq(p) else {
                    return;
                };
                let cand = self.pcpus[p as usize].runq[i];
                let preempt = match self.sched {
                    SchedulerKind::Credit => {
                        self.vcpus[cand as usize].pri > self.vcpus[c as usize].pri
                    }
                    SchedulerKind::Eevdf => {
                        let avg = self.avg_vruntime(p).unwrap_or(0);
                        let x = &self.vcpus[cand as usize];
                        x.vruntime <= avg && x.deadline < self.vcpus[c as usize].deadline
                    }
                };
                if preempt {
                    self.deschedule(p, RunState::Runnable);
                    self.pick_and_run(p);
                }
            }
        }
    }

    /// Take the current vCPU off `p` into `to` (Runnable: back in the runqueue).
    fn deschedule(&mut self, p: u32, to: RunState) {
        let Some(c) = self.pcpus[p as usize].current.take() else {
            return;
        };
        let now = self.now;
        self.pause_activity(c);
        let v = &mut self.vcpus[c as usize];
        let ran = now.saturating_sub(v.run_start);
        v.runtime += ran;
        if self.sched == SchedulerKind::Eevdf && !v.boosted {
            // a raised thread's time is real-time-class time: runtime, not vruntime
            v.vruntime += ran as i64;
        }
        v.run_start = now;
        v.state = to;
        v.tick_gen = v.tick_gen.wrapping_add(1);
        if to == RunState::Blocked {
            v.blocked_since = now;
        }
        if to == RunState::Runnable {
            v.kvm_preempted = true;
            v.runnable_since = now;
            v.preempted_at = Some(now);
            v.episode_seen = false;
        }
        let vm = v.vm;
        self.vms[vm as usize].running -= 1;
        self.vcpu_descheduled(c);
        self.pcpus[p as usize].slice_gen = self.pcpus[p as usize].slice_gen.wrapping_add(1);
        match to {
            RunState::Runnable if self.vcpus[c as usize].boosted => {
                // a real-time thread put back while runnable stays first in its FIFO order
                self.pcpus[p as usize].rt_queue.push_front(c);
            }
            RunState::Runnable => {
                if self.sched == SchedulerKind::Credit {
                    let v = &mut self.vcpus[c as usize];
                    if v.pri > PRI_UNDER {
                        v.pri = credit_pri(v.credit);
                    }
                }
                self.enqueue(p, c);
            }
            RunState::Blocked => {
                if self.sched == SchedulerKind::Eevdf {
                    let avg = self.avg_vruntime(p);
                    let slice = self.slice;
                    let v = &mut self.vcpus[c as usize];
                    v.lag = avg.map_or(0, |a| (a - v.vruntime).clamp(-2 * slice, 2 * slice));
                }
                if self.vcpus[c as usize].boosted {
                    // a raised thread went to sleep: the program tells the agent
                    self.program_blocked(c);
                }
            }
            RunState::Running => {}
        }
    }

    fn enqueue(&mut self, p: u32, v: u32) {
        match self.sched {
            SchedulerKind::Credit => {
                let pri = self.vcpus[v as usize].pri;
                let rq = &self.pcpus[p as usize].runq;
                let pos = rq
                    .iter()
                    .position(|&o| self.vcpus[o as usize].pri < pri)
                    .unwrap_or(rq.len());
                self.pcpus[p as usize].runq.insert(pos, v);
            }
            SchedulerKind::Eevdf => self.pcpus[p as usize].runq.push_back(v),
        }
    }

    fn pick_and_run(&mut self, p: u32) {
        if let Some(v) = self.pcpus[p as usize].rt_queue.pop_front() {
            return self.run_vcpu(p, v);
        }
        let Some(i) = self.best_in_runq(p) else {
            return;
        };
        let Some(v) = self.pcpus[p as usize].runq.remove(i) else {
            return;
        };
        self.run_vcpu(p, v);
    }

    /// Arm the end of the current vCPU's slice on `p` (none while it is boosted).
    fn arm_slice_end(&mut self, p: u32) {
        let Some(v) = self.pcpus[p as usize].current else {
            return;
        };
        let now = self.now;
        let pc = &mut self.pcpus[p as usize];
        pc.slice_gen = pc.slice_gen.wrapping_add(1);
        let gen = pc.slice_gen;
        if self.vcpus[v as usize].boosted {
            return;
        }
        let len = match self.sched {
            SchedulerKind::Credit => self.timeslice,
            SchedulerKind::Eevdf => {
                let x = &mut self.vcpus[v as usize];
                if x.deadline <= x.vruntime {
                    x.deadline = x.vruntime + x.slice;
                }
                (x.deadline - x.vruntime).max(1) as u64
            }
        };
        self.push(now + len, Ev::SliceEnd { pcpu: p, gen });
    }

    /// Put `v` (already out of the runqueue) on `p`.
    fn run_vcpu(&mut self, p: u32, v: u32) {
        self.vcpus[v as usize].entered = true;
        self.program_entry(v);
        let now = self.now;
        let pc = &mut self.pcpus[p as usize];
        pc.current = Some(v);
        pc.switches += 1;
        self.arm_slice_end(p);
        let x = &mut self.vcpus[v as usize];
        let was_halted = std::mem::take(&mut x.woken);
        x.state = RunState::Running;
        x.run_start = now;
        let waited = now.saturating_sub(x.runnable_since);
        x.steal_clock += waited;
        if was_halted {
            x.wakes += 1;
            x.wake_wait_ns += waited;
            let us = waited / US;
            x.wake_wait_sq_us2 = x.wake_wait_sq_us2.saturating_add(us * us);
        }
        x.kvm_preempted = false;
        let vm = x.vm;
        self.vms[vm as usize].running += 1;
        self.end_episode(v);
        self.vcpu_resumed(v, was_halted);
        if self.policy == PolicyKind::VbalanceOracle {
            // the guest's upcall on being scheduled runs the balance analyzer, before the
            // vCPU goes on with its own work (which may halt it at once)
            self.vbalance(vm);
        }
        if self.vcpus[v as usize].state == RunState::Running
            && self.vcpus[v as usize].act == Act::None
        {
            self.dispatch(v);
        }
    }

    fn slice_end(&mut self, p: u32) {
        let Some(c) = self.pcpus[p as usize].current else {
            return;
        };
        if self.vcpus[c as usize].boosted {
            // re-armed when the boost ends
            return;
        }
        if self.sched == SchedulerKind::Eevdf {
            self.update_curr(p);
            let v = &mut self.vcpus[c as usize];
            v.deadline = v.vruntime + v.slice;
        }
        if self.pcpus[p as usize].runq.is_empty() {
            // nobody else: keep running with a fresh slice
            self.arm_slice_end(p);
            return;
        }
        self.deschedule(p, RunState::Runnable);
        self.pick_and_run(p);
    }

    fn credit_tick(&mut self, p: u32, n: u32) {
        self.push(
            self.now + self.tick,
            Ev::Tick {
                pcpu: p,
                n: n.wrapping_add(1),
            },
        );
        // debit the running vCPU one tick's worth and drop its boost
        let per_tick = (self.tick / 100_000) as i64; // 10 credits per ms
        if let Some(c) = self.pcpus[p as usize].current {
            let v = &mut self.vcpus[c as usize];
            v.credit -= per_tick;
            v.pri = credit_pri(v.credit);
        }
        if n.wrapping_add(1).is_multiple_of(self.ticks_per_acct) {
            // accounting: share one accounting period of credit among the active vCPUs
            let period = per_tick * self.ticks_per_acct as i64;
            let pc = &self.pcpus[p as usize];
            let active: Vec<u32> = pc.runq.iter().chain(pc.current.iter()).copied().collect();
            if !active.is_empty() {
                let share = period / active.len() as i64;
                for v in active {
                    let x = &mut self.vcpus[v as usize];
                    x.credit = (x.credit + share).clamp(-period, period);
                    if x.pri <= PRI_UNDER {
                        x.pri = credit_pri(x.credit);
                    }
                }
                // keep the runqueue ordered by priority
                let mut rq: Vec<u32> = self.pcpus[p as usize].runq.drain(..).collect();
                rq.sort_by_key(|&v| std::cmp::Reverse(self.vcpus[v as usize].pri));
                self.pcpus[p as usize].runq = rq.into();
            }
        }
        // credit1's tick only accounts and re-sorts the runqueue: the running vCPU keeps the
        // rest of its 30 ms slice even when it drops to OVER behind an UNDER one (only a
        // wake-up with BOOST preempts, in `wake`); hence the paper's (vCPUs - 1) x 30 ms peaks
    }

    /// A blocked vCPU becomes runnable.
    fn wake(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        match self.sched {
            SchedulerKind::Credit => {
                let x = &mut self.vcpus[v as usize];
                x.pri = credit_pri(x.credit);
                if x.pri == PRI_UNDER {
                    x.pri = PRI_BOOST;
                }
            }
            SchedulerKind::Eevdf => {
                self.update_curr(p);
                let avg = self.avg_vruntime(p);
                let x = &mut self.vcpus[v as usize];
                if let Some(a) = avg {
                    x.vruntime = a - x.lag;
                }
                x.deadline = x.vruntime + x.slice;
            }
        }
        let x = &mut self.vcpus[v as usize];
        x.idle_ns += self.now.saturating_sub(x.blocked_since);
        self.vcpus[v as usize].state = RunState::Runnable;
        self.vcpus[v as usize].run_start = self.now;
        self.vcpus[v as usize].runnable_since = self.now;
        self.vcpus[v as usize].woken = true;
        if self.vcpus[v as usize].boosted {
            // a raised thread wakes into the real-time class
            self.pcpus[p as usize].rt_queue.push_back(v);
        } else {
            self.enqueue(p, v);
        }
        self.request_resched(p);
    }

    // ------------------------------------------------------------ guest execution

    /// Stop the running activity, keeping its progress.
    fn pause_activity(&mut self, v: u32) {
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        match x.act {
            Act::None => {}
            Act::Packet(q) => {
                let done = now - x.act_start;
                // interrupt time is charged to the vCPU that spent it (a packet begun on one
                // vCPU may be finished on another when its interrupt is rebound)
                x.irq_ns += done;
                x.load.add(now, done as f64);
                let qu = &mut self.queues[q as usize];
                qu.head_left = qu.head_left.saturating_sub(done).max(1);
            }
            Act::Compute => {
                x.compute_left = x.compute_left.saturating_sub(now - x.act_start);
            }
        }
        if x.act != Act::None {
            x.act_gen = x.act_gen.wrapping_add(1);
        }
        x.act = Act::None;
    }

    /// Decide what a running vCPU does next.
    fn dispatch(&mut self, v: u32) {
        let now = self.now;
        if self.vcpus[v as usize].boosted {
            self.bound_progress(v);
        }
        if let Some(&q) = self.vcpus[v as usize].pending.first() {
            let Some(head) = self.queues[q as usize].ring.front().copied() else {
                // nothing left (moved away): drop the pending mark and re-arm
                self.finish_queue(v, q);
                return self.dispatch(v);
            };
            if !self.queues[q as usize].acked && self.queues[q as usize].raised_on == Some(v) {
                self.ack(q);
            }
            let qu = &mut self.queues[q as usize];
            if qu.head_left == 0 {
                qu.head_left = head.cost_ns.max(1);
            }
            let left = qu.head_left;
            let x = &mut self.vcpus[v as usize];
            x.act = Act::Packet(q);
            x.act_start = now;
            x.act_gen = x.act_gen.wrapping_add(1);
            let gen = x.act_gen;
            self.push(now + left, Ev::Activity { vcpu: v, gen });
            return;
        }
        let vm = self.vcpus[v as usize].vm;
        match self.vms[vm as usize].workload {
            Workload::Burn => {}
            Workload::Idle => self.block(v),
            Workload::Io { .. } => {
                let x = &mut self.vcpus[v as usize];
                if x.compute_left == 0 {
                    self.block(v);
                } else {
                    x.act = Act::Compute;
                    x.act_start = now;
                    x.act_gen = x.act_gen.wrapping_add(1);
                    let (gen, left) = (x.act_gen, x.compute_left);
                    self.push(now + left, Ev::Activity { vcpu: v, gen });
                }
            }
        }
    }

    fn block(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        if self.pcpus[p as usize].current == Some(v) {
            self.deschedule(p, RunState::Blocked);
            self.request_resched(p);
        }
    }

    fn finish_queue(&mut self, v: u32, q: u32) {
        let x = &mut self.vcpus[v as usize];
        x.pending.retain(|&o| o != q);
        let qu = &mut self.queues[q as usize];
        if qu.raised_on == Some(v) {
            qu.raised_on = None;
            qu.armed = true;
        }
    }

    fn activity_done(&mut self, v: u32) {
        let now = self.now;
        let act = self.vcpus[v as usize].act;
        self.vcpus[v as usize].act = Act::None;
        match act {
            Act::None => {}
            Act::Compute => {
                let vm = self.vcpus[v as usize].vm;
                self.vcpus[v as usize].compute_left = 0;
                if let Workload::Io { io_us, .. } = self.vms[vm as usize].workload {
                    self.push(now + io_us * US, Ev::IoDone { vcpu: v });
                }
            }
            Act::Packet(q) => {
                let Some(pkt) = self.queues[q as usize].ring.pop_front() else {
                    self.finish_queue(v, q);
                    return self.dispatch(v);
                };
                let qu = &mut self.queues[q as usize];
                qu.head_left = 0;
                qu.slots_used -= pkt.slots;
                qu.load.add(now, pkt.cost_ns as f64);
                let (vm, qi) = (qu.vm, qu.irq_index);
                self.vms[vm as usize].queue_ns[qi as usize] += pkt.cost_ns;
                let x = &mut self.vcpus[v as usize];
                let spent = now - x.act_start;
                x.irq_ns += spent;
                x.load.add(now, spent as f64);
                if self.queues[q as usize].ring.is_empty() {
                    self.finish_queue(v, q);
                }
                self.deliver(pkt);
            }
        }
        if self.vcpus[v as usize].state == RunState::Running {
            self.dispatch(v);
        }
    }

    // ------------------------------------------------------------ interrupts

    fn arrive(&mut self, q: u32, pkt: Pkt) {
        let qu = &mut self.queues[q as usize];
        if qu.slots_used + pkt.slots > qu.ring_slots {
            qu.drops += 1;
            return;
        }
        qu.slots_used += pkt.slots;
        qu.ring.push_back(pkt);
        if qu.armed {
            qu.armed = false;
            let vm = qu.vm;
            let local = self.vms[vm as usize].map[qu.irq_index as usize];
            let target = self.vms[vm as usize].vcpus[local as usize];
            self.raise(q, target);
        }
    }

    /// Make the interrupt of queue `q` pending on vCPU `t` and get it serviced.
    fn raise(&mut self, q: u32, t: u32) {
        self.program_accept(t);
        let local = self.vcpus[t as usize].index as usize;
        let qu = &mut self.queues[q as usize];
        qu.raised_on = Some(t);
        qu.acked = false;
        if let Some(n) = qu.ints.get_mut(local) {
            *n += 1;
        }
        let x = &mut self.vcpus[t as usize];
        if !x.pending.contains(&q) {
            x.pending.push(q);
        }
        match x.state {
            RunState::Running => {
                if !matches!(x.act, Act::Packet(_)) {
                    self.pause_activity(t);
                    self.dispatch(t);
                }
            }
            RunState::Blocked => self.wake(t),
            RunState::Runnable => {
                let vm = x.vm;
                if self.smp_boost && self.vms[vm as usize].running == 0 {
                    // the paper's fast path: no vCPU of the VM is online
                    let p = x.pcpu;
                    if x.pri < PRI_SMP_BOOST {
                        x.pri = PRI_SMP_BOOST;
                        self.pcpus[p as usize].runq.retain(|&o| o != t);
                        self.enqueue(p, t);
                        self.request_resched(p);
                    }
                }
            }
        }
    }

    /// An affinity write for VM-local queue index `qi`, with the policy's move semantics.
    fn rebind(&mut self, vm: u32, qi: u32, to_local: u32) {
        let sem = match self.policy {
            // irqbalance on a KVM guest writes affinities like the daemon does
            PolicyKind::Irqbalance => MoveSemantics::Deferred,
            p => p.moves(),
        };
        let q = self.vms[vm as usize].queues[qi as usize];
        let vmr = &mut self.vms[vm as usize];
        match sem {
            MoveSemantics::Rebind | MoveSemantics::Direct => {
                self.queues[q as usize].move_pending = None;
                if vmr.map[qi as usize] == to_local {
                    return;
                }
                vmr.map[qi as usize] = to_local;
                vmr.irq_moves += 1;
                if sem == MoveSemantics::Rebind {
                    self.sync_pending(vm, qi);
                }
            }
            MoveSemantics::Deferred => {
                let pending = self.queues[q as usize].move_pending;
                let target = if vmr.map[qi as usize] == to_local {
                    None
                } else {
                    Some(to_local)
                };
                if pending != target {
                    self.queues[q as usize].move_pending = target;
                    if target.is_some() {
                        vmr.irq_moves += 1;
                    }
                }
            }
        }
    }

    /// The interrupt of queue `q` is acked by the vCPU it was raised on: a deferred affinity
    /// change takes effect now (x86 moves a non-remapped MSI from its ack path), so the
    /// interrupt after this one goes to the new vCPU.
    fn ack(&mut self, q: u32) {
        let qu = &mut self.queues[q as usize];
        qu.acked = true;
        if let Some(to) = qu.move_pending.take() {
            let (vm, qi) = (qu.vm, qu.irq_index);
            self.vms[vm as usize].map[qi as usize] = to;
        }
    }

    /// A pending interrupt follows its IRQ to the current holder unless a running vCPU is in
    /// the middle of servicing it (rebinding an event channel re-targets a pending event).
    fn sync_pending(&mut self, vm: u32, qi: u32) {
        let vmr = &self.vms[vm as usize];
        let q = vmr.queues[qi as usize];
        let to = vmr.vcpus[vmr.map[qi as usize] as usize];
        if let Some(old) = self.queues[q as usize].raised_on {
            let busy = self.vcpus[old as usize].state == RunState::Running
                && self.vcpus[old as usize].act == Act::Packet(q);
            if old != to && !busy {
                self.vcpus[old as usize].pending.retain(|&x| x != q);
                self.raise(q, to);
            }
        }
    }

    fn policy_tick(&mut self, vm: u32) {
        let now = self.now;
        if self.policy == PolicyKind::Irqbalance {
            self.push(now + self.irqbalance_period, Ev::PolicyTick { vm });
            self.irqbalance(vm);
        }
    }

    /// irqbalance: heaviest IRQ of the last period first, onto the vCPU with the least
    /// interrupt load so far this round; ties keep the current holder. Blind to scheduling.
    fn irqbalance(&mut self, vm: u32) {
        let vmr = &mut self.vms[vm as usize];
        let n = vmr.vcpus.len();
        let loads: Vec<u64> = vmr
            .queue_ns
            .iter()
            .zip(&vmr.last_queue_ns)
            .map(|(a, b)| a - b)
            .collect();
        vmr.last_queue_ns.clone_from(&vmr.queue_ns);
        let mut order: Vec<usize> = (0..loads.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(loads[i]), i));
        let mut vload = vec![0u64; n];
        let mut moves = Vec::new();
        for qi in order {
            let cur = vmr.map[qi] as usize;
            let mut best = cur;
            for (c, &l) in vload.iter().enumerate() {
                if l < vload[best] {
                    best = c;
                }
            }
            vload[best] += loads[qi];
            if best != cur {
                moves.push((qi as u32, best as u32));
            }
        }
        for (qi, to) in moves {
            self.rebind(vm, qi, to);
        }
    }

    /// A decaying interrupt load as a fraction of one CPU (the daemon's unit): a steady
    /// rate r of work per ns decays to r × half-life / ln 2.
    fn load_frac(&self, l: &DecayingLoad) -> f64 {
        l.get(self.now) * std::f64::consts::LN_2 / self.half_life_ns as f64
    }

    /// vBalance upper bound: the `irqbal` policy on this VM's exact live state.
    fn vbalance(&mut self, vm: u32) {
        let now = self.now;
        let vmr = &self.vms[vm as usize];
        let vcpus: Vec<VcpuView> = vmr
            .vcpus
            .iter()
            .map(|&g| {
                let x = &self.vcpus[g as usize];
                VcpuView {
                    vcpu: x.index,
                    // the paper's sched_info bit: online = running on a pCPU now. (Counting
                    // a halted vCPU as online let a pending interrupt bounce between halted
                    // vCPUs that each woke into the runqueue, for ever at one instant.)
                    online: x.state == RunState::Running,
                    load: self.load_frac(&x.load),
                    eligible: true,
                    steal: None,
                    wait_ns: None,
                }
            })
            .collect();
        let irqs: Vec<IrqView> = vmr
            .queues
            .iter()
            .enumerate()
            .map(|(qi, &q)| IrqView {
                irq: qi as u32,
                holder: vmr.map[qi],
                load: self.load_frac(&self.queues[q as usize].load),
            })
            .collect();
        let snap = Snapshot {
            now_ns: now,
            vcpus,
            irqs,
        };
        let Some(policy) = self.vms[vm as usize].policy.as_mut() else {
            return;
        };
        let decision = policy.decide(&snap);
        for m in decision.moves() {
            if (m.to as usize) < self.vms[vm as usize].vcpus.len() {
                self.rebind(vm, m.irq, m.to);
            }
        }
        for qi in 0..self.vms[vm as usize].queues.len() as u32 {
            self.sync_pending(vm, qi);
        }
    }

    // ------------------------------------------------------------ sources

    fn wire_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * 8.0 * self.bits_ns).ceil() as u64
    }

    fn cost(&self, pkts: u32, bytes: u32, msgs: f64) -> u64 {
        (pkts as f64 * self.pkt_ns + bytes as f64 * self.byte_ns + msgs * self.msg_ns).round()
            as u64
    }

    fn source_timer(&mut self, src: u32) {
        let now = self.now;
        let one_way = self.net_one_way;
        match self.srcs[src as usize] {
            SrcState::Ping {
                queue,
                interval,
                size,
                ..
            } => {
                // ping's interval is a sleep after each send: jitter of up to 1 ms
                let jitter = self.rng.below(MS);
                let cost = self.cost(1, size, 0.0);
                let wire = self.wire_ns(size as u64 + 42);
                if let SrcState::Ping { sent, .. } = &mut self.srcs[src as usize] {
                    *sent += 1;
                }
                self.push(now + interval + jitter, Ev::Source { src });
                let pkt = Pkt {
                    src,
                    tag: now,
                    bytes: size,
                    slots: 1,
                    cost_ns: cost,
                };
                self.push(now + wire + one_way, Ev::Arrive { queue, pkt });
            }
            SrcState::Tcp { .. } => self.tcp_send(src),
            SrcState::Udp { queue, msg, .. } => {
                let slots = udp_slots(msg);
                let wire = self.wire_ns(msg as u64 + slots as u64 * (28 + 38));
                let cost = self.cost(slots, msg, 1.0);
                let pkt = Pkt {
                    src,
                    tag: 0,
                    bytes: msg,
                    slots,
                    cost_ns: cost,
                };
                if let SrcState::Udp { sent, .. } = &mut self.srcs[src as usize] {
                    *sent += 1;
                }
                self.push(now + wire + one_way, Ev::Arrive { queue, pkt });
                self.push(now + wire, Ev::Source { src });
            }
        }
    }

    fn tcp_send(&mut self, src: u32) {
        let now = self.now;
        let mss = self.mss;
        let one_way = self.net_one_way;
        let wire = self.wire_ns(mss as u64 + 78);
        let (queue, msg, window, next, acked, link_free) = match &self.srcs[src as usize] {
            SrcState::Tcp {
                queue,
                msg,
                window,
                next,
                acked,
                link_free,
                ..
            } => (*queue, *msg, *window, *next, *acked, *link_free),
            _ => return,
        };
        if next - acked >= window {
            if let SrcState::Tcp { send_armed, .. } = &mut self.srcs[src as usize] {
                *send_armed = false;
            }
            return;
        }
        if link_free > now {
            self.push(link_free, Ev::Source { src });
            return;
        }
        let msgs = mss as f64 / msg as f64;
        let cost = self.cost(1, mss, msgs);
        let pkt = Pkt {
            src,
            tag: next,
            bytes: mss,
            slots: 1,
            cost_ns: cost,
        };
        self.push(now + wire + one_way, Ev::Arrive { queue, pkt });
        if let SrcState::Tcp {
            next,
            link_free,
            send_armed,
            ..
        } = &mut self.srcs[src as usize]
        {
            *next += 1;
            *link_free = now + wire;
            *send_armed = true;
        }
        self.push(now + wire, Ev::Source { src });
    }

    fn tcp_ack(&mut self, src: u32, ack: u64) {
        if let SrcState::Tcp {
            acked, send_armed, ..
        } = &mut self.srcs[src as usize]
        {
            if ack > *acked {
                *acked = ack;
            }
            if !*send_armed {
                *send_armed = true;
                let now = self.now;
                self.push(now, Ev::Source { src });
            }
        }
    }

    fn tcp_delack(&mut self, src: u32, gen: u32) {
        let now = self.now;
        let one_way = self.net_one_way;
        if let SrcState::Tcp {
            delack_gen,
            delack_armed,
            unacked,
            received,
            ..
        } = &mut self.srcs[src as usize]
        {
            if *delack_gen != gen || !*delack_armed {
                return;
            }
            *delack_armed = false;
            if *unacked > 0 {
                *unacked = 0;
                let acked = *received;
                self.push(now + one_way, Ev::Ack { src, acked });
            }
        }
    }

    /// The guest finished processing a packet.
    fn deliver(&mut self, pkt: Pkt) {
        let now = self.now;
        let one_way = self.net_one_way;
        let delack = self.delack;
        match &mut self.srcs[pkt.src as usize] {
            SrcState::Ping { rtts, size, .. } => {
                // the echo reply goes out from the handler
                let back = (*size as f64 + 42.0) * 8.0 * self.bits_ns;
                let rtt = now + one_way + back as u64 - pkt.tag;
                rtts.push((pkt.tag, rtt));
            }
            SrcState::Tcp {
                received,
                unacked,
                bytes,
                delack_gen,
                delack_armed,
                ..
            } => {
                *received = (*received).max(pkt.tag + 1);
                *bytes += pkt.bytes as u64;
                *unacked += 1;
                if *unacked >= 2 {
                    *unacked = 0;
                    *delack_armed = false;
                    let acked = *received;
                    self.push(
                        now + one_way,
                        Ev::Ack {
                            src: pkt.src,
                            acked,
                        },
                    );
                } else if !*delack_armed {
                    *delack_armed = true;
                    *delack_gen = delack_gen.wrapping_add(1);
                    let gen = *delack_gen;
                    self.push(now + delack, Ev::DelAck { src: pkt.src, gen });
                }
            }
            SrcState::Udp { bytes, .. } => {
                *bytes += pkt.bytes as u64;
            }
        }
    }
}

fn credit_pri(credit: i64) -> i8 {
    if credit < 0 {
        PRI_OVER
    } else {
        PRI_UNDER
    }
}

trait MinBy {
    fn is_none_or_gt(&self, v: i64) -> bool;
}

impl MinBy for Option<(usize, i64)> {
    fn is_none_or_gt(&self, v: i64) -> bool {
        match self {
            None => true,
            Some((_, b)) => v < *b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_breaks_ties_by_insertion_order() {
        let mut h = BinaryHeap::new();
        for (seq, t) in [(1u64, 5u64), (2, 3), (3, 5), (4, 3)] {
            h.push(Entry {
                t,
                class: 1,
                seq,
                ev: Ev::Resched { pcpu: seq as u32 },
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| h.pop().map(|e| e.seq)).collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn a_livelock_stops_with_an_error_instead_of_spinning() {
        let sc = crate::builtin("vbalance-fig5").unwrap().remove(0);
        let mut sim = Sim::new(&sc, SchedulerKind::Credit, PolicyKind::Static).unwrap();
        // more events at t = 0 than any model step can need
        for _ in 0..=SAME_INSTANT_LIMIT + 1 {
            sim.push(0, Ev::Resched { pcpu: 0 });
        }
        match sim.run() {
            Err(SimError::Livelock {
                at_ns: 0, events, ..
            }) => {
                assert!(events > SAME_INSTANT_LIMIT)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn superseded_events_are_compacted_away() {
        let sc = crate::builtin("vbalance-fig5").unwrap().remove(0);
        let mut sim = Sim::new(&sc, SchedulerKind::Credit, PolicyKind::Static).unwrap();
        // 200k slice ends of old generations: all stale
        for i in 0..200_000u64 {
            sim.push(
                1_000_000 + i,
                Ev::SliceEnd {
                    pcpu: 0,
                    gen: u32::MAX - 1,
                },
            );
        }
        let before = sim.heap.len();
        sim.compact();
        assert!(
            before >= 200_000 && sim.heap.len() < 100,
            "{} -> {}",
            before,
            sim.heap.len()
        );
    }

    #[test]
    fn rng_is_deterministic() {
        let mut a = Rng(7);
        let mut b = Rng(7);
        assert_eq!(
            (0..5).map(|_| a.next()).collect::<Vec<_>>(),
            (0..5).map(|_| b.next()).collect::<Vec<_>>()
        );
        // below(n) is uniform in 0..n: all ten values show up in 1000 draws, none outside
        let mut seen = [0u32; 10];
        for _ in 0..1000 {
            let x = a.below(10) as usize;
            assert!(x < 10);
            seen[x] += 1;
        }
        assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
        assert_eq!(a.below(0), 0);
    }
}
