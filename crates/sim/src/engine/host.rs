//! The host half on a KVM host: the agent that runs a waiting vCPU when an interrupt is
//! accepted for it (`host-boost`, and `vbalance` on EEVDF).
//!
//! What the agent can see and do, as `vmtune irq boost` does it: the tracepoint
//! `kvm:kvm_apic_accept_irq` fires in the injecting thread (vhost, irqfd) when an interrupt is
//! accepted for a vCPU; if that vCPU's thread is runnable but not on a CPU, the agent (woken
//! through an eventfd) raises the thread to SCHED_FIFO. The thread then runs at once, neither
//! charged fair-class time nor preempted by fair tasks, until the vCPU halts (its thread
//! leaves the CPU) or the budget ends — what `vmtune irq boost` can see; `host-boost-ideal`
//! ends it as soon as the guest's interrupt work is done (the bound: the host cannot see
//! that) — then it goes back to its class where it was. A per-VM share of a CPU (token bucket over a window) keeps
//! co-tenants from starving: a boost on a CPU where another VM's vCPU is runnable is charged to
//! it (real-time time is nobody's fair-class time: every fair task on the CPU waits); one where
//! only the VM's own vCPUs run only reorders that VM's own time, and is free. Nothing
//! re-triggers a boost while the guest polls with the interrupt masked.
//!
//! The reaction time (accept → running) is drawn from a shifted exponential through the
//! scenario's median and 99th percentile (`[host]`, what `vmtune irq boost` measures for
//! itself), plus a context switch.

use super::{RunState, Sim};
use crate::engine::Ev;

impl Sim {
    /// The VM's boost allowance now, ns (refilled at its share of a CPU).
    fn boost_tokens(&mut self, vm: u32) -> f64 {
        let Some(b) = self.boost else { return 0.0 };
        let now = self.now;
        let v = &mut self.vms[vm as usize];
        v.boost_tokens =
            (v.boost_tokens + b.share * now.saturating_sub(v.boost_at) as f64).min(b.capacity);
        v.boost_at = now;
        v.boost_tokens
    }

    /// The agent's reaction arrives: run `v` if it is still waiting with interrupt work.
    pub(super) fn host_boost(&mut self, v: u32) {
        let Some(b) = self.boost else { return };
        let x = &mut self.vcpus[v as usize];
        x.boost_armed = false;
        if x.state != RunState::Runnable || x.pending.is_empty() || x.boosted {
            return;
        }
        let (p, vm) = (x.pcpu, x.vm);
        if self.pcpus[p as usize]
            .current
            .is_some_and(|c| self.vcpus[c as usize].boosted)
        {
            // another boosted vCPU holds the CPU: in real-time FIFO order this one runs when
            // that one leaves the real-time class
            let q = &mut self.pcpus[p as usize].boost_queue;
            if !q.contains(&v) {
                q.push_back(v);
            }
            return;
        }
        // whose time the boost takes: a boosted thread runs in the real-time class, so every
        // fair task on the CPU waits, and none is charged for it. Where only this VM's vCPUs
        // share the CPU that only reorders the VM's own time (free); where another VM's vCPU
        // is runnable there, it loses its part, and the boost is charged to this VM's share
        // (and needs at least a packet's worth of allowance left)
        let pc = &self.pcpus[p as usize];
        let over_other = pc
            .runq
            .iter()
            .chain(pc.current.iter())
            .any(|&c| self.vcpus[c as usize].vm != vm);
        let tokens = self.boost_tokens(vm);
        if over_other && tokens < 10_000.0 {
            self.vms[vm as usize].boosts_refused += 1;
            return;
        }
        self.update_curr(p);
        self.deschedule(p, RunState::Runnable);
        self.pcpus[p as usize].runq.retain(|&o| o != v);
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        x.boosted = true;
        x.boost_start = now;
        x.boost_busy_at = now;
        x.boost_quiet_armed = false;
        x.boost_charged = over_other;
        x.boost_gen = x.boost_gen.wrapping_add(1);
        let gen = x.boost_gen;
        let budget = if over_other {
            b.budget.min(tokens as u64)
        } else {
            b.budget
        };
        self.push(now + budget, Ev::BoostEnd { vcpu: v, gen });
        self.vms[vm as usize].boosts += 1;
        self.run_vcpu(p, v);
    }

    /// A boosted vCPU looks for work: with interrupt work it is busy; without, the boost ends
    /// once it has been quiet for the scenario's `boost_quiet_us` (checked then).
    pub(super) fn boost_progress(&mut self, v: u32) {
        let Some(b) = self.boost else { return };
        if !b.ends_with_work {
            // the agent cannot see the guest's interrupt work end: a halt (the vCPU leaves
            // its CPU) or the budget ends the boost
            return;
        }
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        if !x.pending.is_empty() {
            x.boost_busy_at = now;
            return;
        }
        if now >= x.boost_busy_at + b.quiet {
            self.end_boost(v, true);
            return;
        }
        if !x.boost_quiet_armed {
            x.boost_quiet_armed = true;
            let (at, gen) = (x.boost_busy_at + b.quiet, x.boost_gen);
            self.push(at, Ev::BoostQuiet { vcpu: v, gen });
        }
    }

    pub(super) fn boost_quiet(&mut self, v: u32) {
        self.vcpus[v as usize].boost_quiet_armed = false;
        self.boost_progress(v);
    }

    /// `v` goes back to its fair class: charge the boost to its VM's allowance and, while it
    /// stays on its CPU (`rearm`), give it its slice back and let the scheduler decide.
    pub(super) fn end_boost(&mut self, v: u32, rearm: bool) {
        let Some(b) = self.boost else { return };
        let now = self.now;
        let x = &mut self.vcpus[v as usize];
        if !x.boosted {
            return;
        }
        x.boosted = false;
        x.boost_gen = x.boost_gen.wrapping_add(1);
        // the time run so far is real-time-class time: runtime, not vruntime
        let ran = now.saturating_sub(x.run_start);
        x.runtime += ran;
        x.run_start = now;
        let used = now.saturating_sub(x.boost_start) + b.switch;
        let (p, vm, charged) = (x.pcpu, x.vm, x.boost_charged);
        self.boost_tokens(vm);
        let vmr = &mut self.vms[vm as usize];
        if charged {
            vmr.boost_tokens -= used as f64;
        }
        vmr.boost_ns += used;
        if rearm && self.pcpus[p as usize].current == Some(v) {
            self.arm_slice_end(p);
            self.request_resched(p);
        }
        // the next raised vCPU in FIFO order takes the CPU
        if let Some(next) = self.pcpus[p as usize].boost_queue.pop_front() {
            let x = &mut self.vcpus[next as usize];
            x.boost_armed = true;
            x.boost_gen = x.boost_gen.wrapping_add(1);
            let gen = x.boost_gen;
            self.push(now, Ev::HostBoost { vcpu: next, gen });
        }
    }
}
