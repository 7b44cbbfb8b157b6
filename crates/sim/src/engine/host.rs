//! The host half on a KVM host: `vmtune irq boost`. Its decisions are those of
//! [`Booster`], the state machine the agent itself runs, fed the events the agent's eBPF
//! program (`crates/irqbal/bpf/irqwait.bpf.c`) would push from the simulated host: an accept
//! for every interrupt raised for a vCPU (with the vCPU's state and, once it has entered the
//! guest, its thread), an entry when a vCPU with an accept waiting next enters the guest, and
//! a blocked event when a raised vCPU's thread goes to sleep. Booster's clock is the events'
//! clock: each event is passed with its own time, and its budgets run out on the agent's timer
//! at the deadlines Booster names. The events and the decisions can be recorded
//! ([`Sim::trace_irq_waits`]); replayed through a `Booster` alone they give the same
//! decisions (`crates/sim/tests/replay.rs`).
//!
//! What the simulator models is only what lies outside the agent's code:
//! - **Reaction.** A decision takes effect after the agent's reaction — the event through the
//!   ring buffer, the agent's wake-up, `sched_setattr` — drawn from a shifted exponential
//!   through the scenario's median and 99th percentile (`[host]`, what `vmtune irq boost`
//!   measures for itself), and a raise after a context switch more. The agent is one thread:
//!   its decisions take effect in the order it made them. A budget's end is the agent's own
//!   timer, set when it raised the thread: it takes effect its raise's reaction after Booster's
//!   deadline, so that a raised thread has its whole budget, as on a host.
//! - **The kernel's scheduling** of a raised thread (`engine.rs`): SCHED_FIFO runs it at once,
//!   before every fair task of its CPU and in FIFO order among raised ones, neither charged
//!   fair-class time nor preempted by fair tasks, asleep or awake; lowered, it goes back to its
//!   fair class where it was.
//!
//! `host-boost-ideal` is the bound, not an agent: the same `Booster`, also told the instant
//! the guest has had no interrupt work for `[host] boost_quiet_us` — which the host cannot
//! see — through the input by which Booster learns that a vCPU's interrupt work is done (a
//! blocked event), and its lowering applied at once. Those extra inputs are not in the trace.

use std::collections::VecDeque;

use irqbal::wait::boost::{BoostAction, Booster, LowerWhy};
use irqbal::wait::WaitEvent;
use serde::Serialize;

use super::{Ev, Rng, RunState, Sim, IRQ_TRACE_PID, US};
use crate::scenario::HostSpec;

/// The thread id of vCPU `vcpu` of the VM that is process `vm` in an irq-wait trace
/// (`vm * 10_000 + vcpu`: unique, and never a process id of the trace).
pub fn irq_trace_tid(vm: u32, vcpu: u32) -> u32 {
    vm.saturating_mul(10_000).saturating_add(vcpu)
}

/// `irq_trace_tid` as the agent's name lookup (`tid_of` of [`Booster::on_event`]): the agent
/// finds every vCPU thread by its name, also those the program has not seen yet.
fn tid_of(vm: u32, vcpu: u32) -> Option<u32> {
    Some(irq_trace_tid(vm, vcpu))
}

/// One decision of the agent: when Booster made it, on its clock, and what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BoostDecision {
    pub at_ns: u64,
    pub action: BoostAction,
}

/// The agent: its `Booster` and what the simulator models around it.
pub(super) struct HostAgent {
    booster: Booster,
    /// Reaction: `base + Exp(tail)`, ns.
    base: f64,
    tail: f64,
    /// A context switch, ns (a raise takes effect after one more).
    switch: u64,
    rng: Rng,
    /// The bound: the guest's interrupt work is done after this long without any, ns.
    bound_quiet: Option<u64>,
    /// Decisions not yet in effect, in the order made, each with when it takes effect.
    effects: VecDeque<(u64, BoostAction)>,
    last_effect: u64,
    /// Reaction of each vCPU's latest raise (global vCPU index), ns: when its budget's end
    /// takes effect after Booster's deadline.
    lag: Vec<u64>,
    /// The agent's timer: its generation and the deadline it is set for.
    timer_gen: u32,
    timer_at: Option<u64>,
    log: Option<Vec<BoostDecision>>,
}

impl HostAgent {
    pub(super) fn new(h: &HostSpec, bound: bool, seed: u64) -> HostAgent {
        // p50 = base + tail·ln 2, p99 = base + tail·ln 100
        let tail = (h.boost_reaction_p99_us - h.boost_reaction_p50_us) / (100f64.ln() - 2f64.ln());
        HostAgent {
            booster: Booster::new(h.boost_config()),
            base: (h.boost_reaction_p50_us - tail * 2f64.ln()).max(0.0) * US as f64,
            tail: tail * US as f64,
            switch: (h.switch_us * US as f64) as u64,
            rng: Rng(seed ^ 0xB005_7ED0),
            bound_quiet: bound.then_some((h.boost_quiet_us * US as f64) as u64),
            effects: VecDeque::new(),
            last_effect: 0,
            lag: Vec::new(),
            timer_gen: 0,
            timer_at: None,
            log: None,
        }
    }

    pub(super) fn size(&mut self, vcpus: usize) {
        self.lag = vec![0; vcpus];
    }

    pub(super) fn keep_log(&mut self) {
        self.log = Some(Vec::new());
    }

    pub(super) fn timer_is(&self, gen: u32) -> bool {
        self.timer_gen == gen
    }

    fn reaction(&mut self) -> u64 {
        let u = (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        (self.base - self.tail * (1.0 - u).max(f64::MIN_POSITIVE).ln()) as u64
    }

    /// The agent's counts (raised, boosted ns, refused by the share) and its decisions.
    pub(super) fn finish(self) -> (u64, u64, u64, Vec<BoostDecision>) {
        let st = self.booster.stats();
        (
            st.raised,
            st.boosted_ns.values().sum(),
            st.refused_share,
            self.log.unwrap_or_default(),
        )
    }
}

impl Sim {
    /// Global index of the vCPU an action names.
    fn action_vcpu(&self, a: &BoostAction) -> Option<u32> {
        let (BoostAction::Raise { vm, vcpu, .. } | BoostAction::Lower { vm, vcpu, .. }) = *a;
        let vm = self.vms.get(vm.checked_sub(IRQ_TRACE_PID)? as usize)?;
        vm.vcpus.get(vcpu as usize).copied()
    }

    /// One event of the program: into the trace, if one is kept, and to the agent.
    pub(super) fn program_event(&mut self, e: WaitEvent) {
        if let Some(tr) = self.irq_trace.as_mut() {
            tr.push(e);
        }
        let now = self.now;
        let Some(a) = self.agent.as_mut() else { return };
        let acts = a.booster.on_event(&e, now, tid_of);
        self.agent_decided(acts, false);
    }

    /// The program's event for a raised vCPU's thread going to sleep.
    pub(super) fn program_blocked(&mut self, v: u32) {
        let e = self.blocked_event(v);
        self.program_event(e);
    }

    /// The event the program pushes when `v`'s thread goes to sleep, at the current time.
    fn blocked_event(&self, v: u32) -> WaitEvent {
        let x = &self.vcpus[v as usize];
        let vm = IRQ_TRACE_PID + x.vm;
        WaitEvent::Blocked {
            ts_ns: self.now,
            vm,
            vcpu: x.index,
            tid: irq_trace_tid(vm, x.index),
        }
    }

    /// Queue the agent's decisions to take effect (`at_once`: now, the bound's lowering) and
    /// set its timer for Booster's next deadline.
    fn agent_decided(&mut self, acts: Vec<BoostAction>, at_once: bool) {
        let now = self.now;
        for act in acts {
            let Some(v) = self.action_vcpu(&act) else {
                continue;
            };
            let Some(a) = self.agent.as_mut() else { return };
            if let Some(log) = a.log.as_mut() {
                log.push(BoostDecision {
                    at_ns: now,
                    action: act,
                });
            }
            if at_once {
                self.apply_boost(v, act);
                continue;
            }
            let delay = match act {
                BoostAction::Raise { .. } => {
                    let r = a.reaction();
                    a.lag[v as usize] = r;
                    r + a.switch
                }
                BoostAction::Lower {
                    why: LowerWhy::Budget,
                    ..
                } => a.lag[v as usize],
                BoostAction::Lower { .. } => a.reaction(),
            };
            let at = (now + delay).max(a.last_effect);
            a.last_effect = at;
            a.effects.push_back((at, act));
            self.push(at, Ev::AgentEffect);
        }
        let Some(a) = self.agent.as_mut() else { return };
        let next = a.booster.next_deadline();
        if next != a.timer_at {
            a.timer_gen = a.timer_gen.wrapping_add(1);
            a.timer_at = next;
            let gen = a.timer_gen;
            if let Some(d) = next {
                self.push(d.max(now), Ev::AgentTimer { gen });
            }
        }
    }

    /// The agent's timer: budgets that have run out by now.
    pub(super) fn agent_timer(&mut self, gen: u32) {
        let now = self.now;
        let Some(a) = self.agent.as_mut().filter(|a| a.timer_gen == gen) else {
            return;
        };
        a.timer_at = None;
        let acts = a.booster.on_tick(now);
        self.agent_decided(acts, false);
    }

    /// The agent's oldest decision not yet in effect takes effect.
    pub(super) fn agent_effect(&mut self) {
        let Some((_, act)) = self.agent.as_mut().and_then(|a| a.effects.pop_front()) else {
            return;
        };
        if let Some(v) = self.action_vcpu(&act) {
            self.apply_boost(v, act);
        }
    }

    fn apply_boost(&mut self, v: u32, act: BoostAction) {
        match act {
            BoostAction::Raise { .. } => self.raise_thread(v),
            BoostAction::Lower { .. } => self.lower_thread(v),
        }
    }

    /// `v`'s thread becomes SCHED_FIFO (and marked raised in the program's map): running, it
    /// keeps its CPU; waiting, it takes the CPU from any fair task; asleep, it does when it
    /// wakes.
    fn raise_thread(&mut self, v: u32) {
        let x = &self.vcpus[v as usize];
        if x.boosted {
            return;
        }
        let (p, state) = (x.pcpu, x.state);
        if state == RunState::Running {
            // its fair-class time so far
            self.update_curr(p);
        }
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        x.boosted = true;
        x.boost_gen = x.boost_gen.wrapping_add(1);
        x.boost_busy_at = now;
        x.boost_quiet_armed = false;
        match state {
            RunState::Running => {
                // no slice end while real-time
                self.arm_slice_end(p);
                self.bound_progress(v);
            }
            RunState::Runnable => {
                self.pcpus[p as usize].runq.retain(|&o| o != v);
                self.pcpus[p as usize].rt_queue.push_back(v);
                self.request_resched(p);
            }
            RunState::Blocked => {}
        }
    }

    /// `v`'s thread goes back to its fair class where it is.
    fn lower_thread(&mut self, v: u32) {
        let x = &self.vcpus[v as usize];
        if !x.boosted {
            return;
        }
        let (p, state) = (x.pcpu, x.state);
        if state == RunState::Running {
            // the time run so far is real-time-class time: runtime, not vruntime
            self.update_curr(p);
        }
        let x = &mut self.vcpus[v as usize];
        x.boosted = false;
        x.boost_gen = x.boost_gen.wrapping_add(1);
        match state {
            RunState::Running => {
                self.arm_slice_end(p);
                self.request_resched(p);
            }
            RunState::Runnable => {
                self.pcpus[p as usize].rt_queue.retain(|&o| o != v);
                self.enqueue(p, v);
                self.request_resched(p);
            }
            RunState::Blocked => {}
        }
    }

    /// The bound: a raised vCPU looks for work; with interrupt work it is busy; without, the
    /// boost ends once it has been quiet for `boost_quiet_us` (checked then).
    pub(super) fn bound_progress(&mut self, v: u32) {
        let Some(quiet) = self.agent.as_ref().and_then(|a| a.bound_quiet) else {
            return;
        };
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        if !x.boosted || x.state != RunState::Running {
            return;
        }
        if !x.pending.is_empty() {
            x.boost_busy_at = now;
            return;
        }
        if now >= x.boost_busy_at + quiet {
            self.bound_work_done(v);
            return;
        }
        if !x.boost_quiet_armed {
            x.boost_quiet_armed = true;
            let (at, gen) = (x.boost_busy_at + quiet, x.boost_gen);
            self.push(at, Ev::BoundQuiet { vcpu: v, gen });
        }
    }

    pub(super) fn bound_quiet(&mut self, v: u32) {
        self.vcpus[v as usize].boost_quiet_armed = false;
        self.bound_progress(v);
    }

    /// The bound tells Booster that `v`'s interrupt work is done, as a halt would, and lowers
    /// it at once.
    fn bound_work_done(&mut self, v: u32) {
        let e = self.blocked_event(v);
        let now = self.now;
        let Some(a) = self.agent.as_mut() else { return };
        let acts = a.booster.on_event(&e, now, tid_of);
        let (done, rest): (Vec<BoostAction>, Vec<BoostAction>) = acts.into_iter().partition(|a| {
            matches!(
                a,
                BoostAction::Lower {
                    why: LowerWhy::Halted,
                    ..
                }
            )
        });
        // budgets that ran out at this instant take effect as the agent's timer's would
        self.agent_decided(rest, false);
        self.agent_decided(done, true);
    }
}
