//! The host half of vBalance as a pure state machine (`vmtune irq boost` drives it): when an
//! interrupt is accepted for a vCPU that waits for a CPU, raise its thread (the caller makes it
//! SCHED_FIFO), and lower it again when its interrupt work is done — the thread goes to sleep,
//! the vCPU having halted — or when the per-boost budget runs out. A boost is charged by whom
//! it displaces (the accept's [`Holder`](super::Holder)): one over the VM's own threads or an idle CPU takes
//! nothing from another tenant and is free; one over another VM's thread or a host task (or
//! over an unknown holder) is charged to the VM's share. Each VM's charged boosts together may
//! take at most `max_share` of a CPU, kept as a token bucket over `window`, so that a VM whose
//! vCPUs never halt cannot starve the tenants it shares CPUs with. A charged boost is worth
//! making only for an interrupt that would otherwise wait long: it is made once the interrupt
//! has waited `grace` without its vCPU entering the guest (an entry before then cancels it),
//! so a vCPU the host scheduler runs soon anyway costs the other tenant nothing.
//!
//! Time is the program's clock (CLOCK_MONOTONIC ns) throughout; the caller passes `now` with
//! every call, which keeps the machine testable on recorded and simulated sequences.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{VcpuState, WaitEvent};

/// Which waiting vCPUs get raised (`vmtune irq boost --on`, the simulator's `[host] boost_on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoostOn {
    /// Descheduled while runnable (vBalance's case).
    Preempted,
    /// Also vCPUs woken from halt: their wake-up runs at once.
    Waiting,
    /// Every accept for a vCPU not known to be in the guest (states not seen included): for
    /// hosts where the program does not see the vCPUs' states.
    Any,
}

impl BoostOn {
    fn wants(self, s: VcpuState) -> bool {
        match self {
            BoostOn::Preempted => s == VcpuState::Preempted,
            BoostOn::Waiting => matches!(s, VcpuState::Preempted | VcpuState::Blocked),
            BoostOn::Any => s != VcpuState::Guest,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostConfig {
    /// Longest one boost lasts, ns.
    pub budget_ns: u64,
    /// Share of one CPU a VM's boosts may take together.
    pub max_share: f64,
    /// The window the share is kept over, ns (the bucket holds `max_share × window`).
    pub window_ns: u64,
    pub on: BoostOn,
    /// How long an interrupt waits before a boost charged to the share is made for it, ns
    /// (0: at once); an entry of its vCPU before then cancels the boost. Free boosts (over the
    /// VM's own threads or an idle CPU) are made at once.
    pub grace_ns: u64,
}

impl Default for BoostConfig {
    /// The simulator's `[host]` defaults: a 2 ms budget, 5 % of a CPU over 100 ms, every boost
    /// at once (a 1 ms grace measured worse: two-vms 10 s ping p99 1.51x static at seed 3,
    /// shared-core 1.52x at seed 5, against 0.93x and 1.47x without).
    fn default() -> Self {
        BoostConfig {
            budget_ns: 2_000_000,
            max_share: 0.05,
            window_ns: 100_000_000,
            on: BoostOn::Preempted,
            grace_ns: 0,
        }
    }
}

/// Why a boost ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LowerWhy {
    /// The thread went to sleep: the vCPU halted, its interrupt work done.
    Halted,
    /// The budget ran out.
    Budget,
    /// The agent is stopping.
    Stop,
}

/// What the caller must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum BoostAction {
    Raise {
        vm: u32,
        vcpu: u32,
        tid: u32,
    },
    Lower {
        vm: u32,
        vcpu: u32,
        tid: u32,
        why: LowerWhy,
    },
}

#[derive(Debug, Clone, Copy)]
struct Active {
    tid: u32,
    since: u64,
    until: u64,
    /// Taken from the VM's bucket (a boost over another tenant).
    charged: bool,
}

/// A charged boost not made yet: its vCPU's thread, and when it is made if the vCPU has not
/// entered the guest by then.
#[derive(Debug, Clone, Copy)]
struct Deferred {
    tid: u32,
    due: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: u64,
}

/// Counts of what the booster did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BoostStats {
    pub raised: u64,
    /// Raises over the VM's own threads or an idle CPU, not charged to its share.
    pub raised_free: u64,
    pub lowered_halted: u64,
    pub lowered_budget: u64,
    /// Accepts that wanted a boost the VM's share did not allow.
    pub refused_share: u64,
    /// Accepts that wanted a boost for a vCPU whose thread is not known.
    pub no_thread: u64,
    /// Charged boosts not made: the vCPU entered the guest within the grace.
    pub entered_in_grace: u64,
    /// Boosted time per VM, ns.
    pub boosted_ns: BTreeMap<u32, u64>,
    /// Of that, the time charged to the VM's share, ns.
    pub charged_ns: BTreeMap<u32, u64>,
}

/// The state machine.
#[derive(Debug)]
pub struct Booster {
    cfg: BoostConfig,
    active: BTreeMap<(u32, u32), Active>,
    deferred: BTreeMap<(u32, u32), Deferred>,
    buckets: BTreeMap<u32, Bucket>,
    stats: BoostStats,
}

impl Booster {
    pub fn new(cfg: BoostConfig) -> Booster {
        Booster {
            cfg,
            active: BTreeMap::new(),
            deferred: BTreeMap::new(),
            buckets: BTreeMap::new(),
            stats: BoostStats::default(),
        }
    }

    pub fn stats(&self) -> &BoostStats {
        &self.stats
    }

    fn capacity(&self) -> f64 {
        self.cfg.max_share * self.cfg.window_ns as f64
    }

    fn tokens(&mut self, vm: u32, now: u64) -> f64 {
        let cap = self.capacity();
        let share = self.cfg.max_share;
        let b = self.buckets.entry(vm).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        let dt = now.saturating_sub(b.at) as f64;
        b.tokens = (b.tokens + dt * share).min(cap);
        b.at = b.at.max(now);
        b.tokens
    }

    fn lower(&mut self, key: (u32, u32), now: u64, why: LowerWhy) -> Option<BoostAction> {
        let a = self.active.remove(&key)?;
        let granted = a.until - a.since;
        let used = now.saturating_sub(a.since).min(granted);
        if a.charged {
            // the grant was taken from the bucket at the raise: give back what was not used
            self.tokens(key.0, now);
            let cap = self.capacity();
            if let Some(b) = self.buckets.get_mut(&key.0) {
                b.tokens = (b.tokens + (granted - used) as f64).min(cap);
            }
            *self.stats.charged_ns.entry(key.0).or_default() += used;
        }
        *self.stats.boosted_ns.entry(key.0).or_default() += used;
        match why {
            LowerWhy::Halted => self.stats.lowered_halted += 1,
            LowerWhy::Budget => self.stats.lowered_budget += 1,
            LowerWhy::Stop => {}
        }
        Some(BoostAction::Lower {
            vm: key.0,
            vcpu: key.1,
            tid: a.tid,
            why,
        })
    }

    /// An event of the program; `tid_of` finds a vCPU's thread where the event does not carry
    /// it (`None`: not known).
    pub fn on_event(
        &mut self,
        e: &WaitEvent,
        now: u64,
        tid_of: impl Fn(u32, u32) -> Option<u32>,
    ) -> Vec<BoostAction> {
        let mut out = self.on_tick(now);
        match *e {
            WaitEvent::Accept {
                vm,
                vcpu,
                tid,
                state,
                dm,
                holder,
                ..
            } => {
                if vm == 0
                    || !super::is_interrupt_delivery(dm)
                    || !self.cfg.on.wants(state)
                    || self.active.contains_key(&(vm, vcpu))
                {
                    return out;
                }
                let Some(tid) = tid.or_else(|| tid_of(vm, vcpu)) else {
                    self.stats.no_thread += 1;
                    return out;
                };
                if holder.is_own() {
                    self.deferred.remove(&(vm, vcpu));
                    out.extend(self.raise(vm, vcpu, tid, now, false));
                } else if self.cfg.grace_ns == 0 {
                    out.extend(self.raise(vm, vcpu, tid, now, true));
                } else {
                    let due = now + self.cfg.grace_ns;
                    self.deferred
                        .entry((vm, vcpu))
                        .or_insert(Deferred { tid, due });
                }
            }
            WaitEvent::Blocked { vm, vcpu, tid, .. } => {
                if self.active.get(&(vm, vcpu)).is_some_and(|a| a.tid == tid) {
                    out.extend(self.lower((vm, vcpu), now, LowerWhy::Halted));
                }
            }
            WaitEvent::Entry { vm, vcpu, .. } => {
                if self.deferred.remove(&(vm, vcpu)).is_some() {
                    self.stats.entered_in_grace += 1;
                }
            }
        }
        out
    }

    /// Raise `tid` (`charged`: from the VM's share, if it allows).
    fn raise(
        &mut self,
        vm: u32,
        vcpu: u32,
        tid: u32,
        now: u64,
        charged: bool,
    ) -> Option<BoostAction> {
        let budget = if charged {
            let tokens = self.tokens(vm, now);
            // a boost shorter than a tenth of the longest one the VM can have is not worth
            // two policy changes
            let longest = (self.cfg.budget_ns as f64).min(self.capacity());
            if tokens < longest / 10.0 {
                self.stats.refused_share += 1;
                return None;
            }
            // take the whole grant now, so that two vCPUs of one VM raised together share
            // one bucket
            let budget = ((self.cfg.budget_ns as f64).min(tokens) as u64).max(1);
            if let Some(b) = self.buckets.get_mut(&vm) {
                b.tokens -= budget as f64;
            }
            budget
        } else {
            self.stats.raised_free += 1;
            self.cfg.budget_ns.max(1)
        };
        self.active.insert(
            (vm, vcpu),
            Active {
                tid,
                since: now,
                until: now + budget,
                charged,
            },
        );
        self.stats.raised += 1;
        Some(BoostAction::Raise { vm, vcpu, tid })
    }

    /// Lower every boost whose budget has run out by `now`, then make the charged boosts
    /// whose grace has passed.
    pub fn on_tick(&mut self, now: u64) -> Vec<BoostAction> {
        let due: Vec<(u32, u32)> = self
            .active
            .iter()
            .filter(|(_, a)| a.until <= now)
            .map(|(k, _)| *k)
            .collect();
        let mut out: Vec<BoostAction> = due
            .into_iter()
            .filter_map(|k| self.lower(k, now, LowerWhy::Budget))
            .collect();
        let ripe: Vec<((u32, u32), Deferred)> = self
            .deferred
            .iter()
            .filter(|(_, d)| d.due <= now)
            .map(|(k, d)| (*k, *d))
            .collect();
        for ((vm, vcpu), d) in ripe {
            self.deferred.remove(&(vm, vcpu));
            if !self.active.contains_key(&(vm, vcpu)) {
                out.extend(self.raise(vm, vcpu, d.tid, now, true));
            }
        }
        out
    }

    /// When the next budget runs out or the next grace passes, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        let a = self.active.values().map(|a| a.until);
        a.chain(self.deferred.values().map(|d| d.due)).min()
    }

    /// Lower everything (the agent stops).
    pub fn lower_all(&mut self, now: u64) -> Vec<BoostAction> {
        self.deferred.clear();
        let keys: Vec<(u32, u32)> = self.active.keys().copied().collect();
        keys.into_iter()
            .filter_map(|k| self.lower(k, now, LowerWhy::Stop))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::Holder;
    use WaitEvent as E;

    const NO_TID: fn(u32, u32) -> Option<u32> = |_, _| None;

    /// Charged boosts made at once.
    fn at_once() -> BoostConfig {
        BoostConfig::default()
    }

    fn with_grace() -> BoostConfig {
        BoostConfig {
            grace_ns: 1_000_000,
            ..BoostConfig::default()
        }
    }

    fn raises(acts: &[BoostAction]) -> usize {
        acts.iter()
            .filter(|a| matches!(a, BoostAction::Raise { .. }))
            .count()
    }

    #[test]
    fn a_boost_over_the_vms_own_threads_or_an_idle_cpu_is_not_charged() {
        let mut b = Booster::new(BoostConfig::default());
        // a vCPU that never halts, over its own VM's vCPU: every accept is raised at once for
        // a whole budget, far beyond the 5 % share, and none is refused
        let mut now = 0;
        for i in 0..100 {
            let h = if i % 2 == 0 {
                Holder::Own
            } else {
                Holder::Idle
            };
            let e = E::accept(now, 3, 0, VcpuState::Preempted, Some(9)).with_holder(h);
            assert_eq!(raises(&b.on_event(&e, now, NO_TID)), 1, "accept {i}");
            now = b.next_deadline().unwrap();
            assert_eq!(b.on_tick(now).len(), 1);
            now += 1_000;
        }
        let st = b.stats();
        assert_eq!((st.raised, st.raised_free, st.refused_share), (100, 100, 0));
        assert_eq!(st.boosted_ns[&3], 200_000_000);
        assert!(!st.charged_ns.contains_key(&3));
    }

    #[test]
    fn a_charged_boost_waits_its_grace_and_an_entry_cancels_it() {
        let mut b = Booster::new(with_grace());
        let other = |t, vcpu| {
            E::accept(t, 3, vcpu, VcpuState::Preempted, Some(9)).with_holder(Holder::Other)
        };
        // vCPU 0 enters the guest within the grace: no boost, nothing charged
        assert!(b.on_event(&other(0, 0), 0, NO_TID).is_empty());
        assert_eq!(b.next_deadline(), Some(1_000_000));
        let entry = E::Entry {
            ts_ns: 400_000,
            vm: 3,
            vcpu: 0,
        };
        assert!(b.on_event(&entry, 400_000, NO_TID).is_empty());
        assert_eq!(b.next_deadline(), None);
        assert_eq!(b.stats().entered_in_grace, 1);
        // vCPU 1 still waits when the grace has passed: raised then, from the share; a second
        // accept in the grace does not push it back
        assert!(b.on_event(&other(500_000, 1), 500_000, NO_TID).is_empty());
        assert!(b.on_event(&other(900_000, 1), 900_000, NO_TID).is_empty());
        assert_eq!(b.next_deadline(), Some(1_500_000));
        assert!(b.on_tick(1_499_999).is_empty());
        assert_eq!(
            b.on_tick(1_500_000),
            vec![BoostAction::Raise {
                vm: 3,
                vcpu: 1,
                tid: 9
            }]
        );
        let halted = E::Blocked {
            ts_ns: 1_600_000,
            vm: 3,
            vcpu: 1,
            tid: 9,
        };
        assert_eq!(b.on_event(&halted, 1_600_000, NO_TID).len(), 1);
        assert_eq!(b.stats().charged_ns[&3], 100_000);
        assert_eq!(b.stats().raised_free, 0);
        // an accept over the VM's own thread raises at once, dropping a deferred one
        assert!(b
            .on_event(&other(2_000_000, 2), 2_000_000, NO_TID)
            .is_empty());
        let own =
            E::accept(2_100_000, 3, 2, VcpuState::Preempted, Some(9)).with_holder(Holder::Own);
        assert_eq!(raises(&b.on_event(&own, 2_100_000, NO_TID)), 1);
        assert_eq!(b.next_deadline(), Some(4_100_000));
    }

    #[test]
    fn a_preempted_vcpu_is_raised_until_it_halts() {
        let mut b = Booster::new(at_once());
        let a = b.on_event(
            &E::accept(1_000, 7, 2, VcpuState::Preempted, Some(77)),
            1_050,
            NO_TID,
        );
        assert_eq!(
            a,
            vec![BoostAction::Raise {
                vm: 7,
                vcpu: 2,
                tid: 77
            }]
        );
        // a second interrupt while raised changes nothing
        assert!(b
            .on_event(
                &E::accept(1_100, 7, 2, VcpuState::Preempted, Some(77)),
                1_100,
                NO_TID
            )
            .is_empty());
        let halted = WaitEvent::Blocked {
            ts_ns: 50_000,
            vm: 7,
            vcpu: 2,
            tid: 77,
        };
        assert_eq!(
            b.on_event(&halted, 50_000, NO_TID),
            vec![BoostAction::Lower {
                vm: 7,
                vcpu: 2,
                tid: 77,
                why: LowerWhy::Halted
            }]
        );
        assert_eq!(b.stats().boosted_ns[&7], 48_950);
        assert_eq!(b.next_deadline(), None);
    }

    #[test]
    fn only_the_configured_states_are_raised_and_the_thread_must_be_known() {
        let mut b = Booster::new(at_once());
        for s in [
            VcpuState::Guest,
            VcpuState::Blocked,
            VcpuState::Host,
            VcpuState::Unknown,
        ] {
            assert!(b
                .on_event(&E::accept(1, 1, 0, s, Some(5)), 1, NO_TID)
                .is_empty());
        }
        assert!(b
            .on_event(&E::accept(1, 1, 0, VcpuState::Preempted, None), 1, NO_TID)
            .is_empty());
        assert_eq!(b.stats().no_thread, 1);
        // the caller's thread map fills in
        let a = b.on_event(
            &E::accept(2, 1, 0, VcpuState::Preempted, None),
            2,
            |_, v| Some(100 + v),
        );
        assert_eq!(
            a,
            vec![BoostAction::Raise {
                vm: 1,
                vcpu: 0,
                tid: 100
            }]
        );
        let mut any = Booster::new(BoostConfig {
            on: BoostOn::Any,
            ..at_once()
        });
        assert_eq!(
            any.on_event(&E::accept(1, 1, 0, VcpuState::Unknown, Some(5)), 1, NO_TID)
                .len(),
            1
        );
    }

    #[test]
    fn the_budget_ends_a_boost_and_the_share_caps_a_vm() {
        let cfg = BoostConfig {
            budget_ns: 2_000_000,
            max_share: 0.05,
            window_ns: 100_000_000,
            on: BoostOn::Preempted,
            grace_ns: 0,
        };
        let mut b = Booster::new(cfg);
        // a vCPU that never halts: every boost runs its full budget; within one window the
        // bucket (5 ms) allows three boosts, the third cut to what is left
        let mut now = 0;
        let mut raised = 0;
        for _ in 0..10 {
            let acts = b.on_event(
                &E::accept(now, 3, 0, VcpuState::Preempted, Some(9)),
                now,
                NO_TID,
            );
            raised += acts
                .iter()
                .filter(|a| matches!(a, BoostAction::Raise { .. }))
                .count();
            now = b.next_deadline().unwrap_or(now + 10_000);
            let low = b.on_tick(now);
            assert!(low.iter().all(|a| matches!(
                a,
                BoostAction::Lower {
                    why: LowerWhy::Budget,
                    ..
                }
            )));
            now += 1_000;
        }
        assert_eq!(raised, 3, "{:?}", b.stats());
        assert!(b.stats().refused_share > 0);
        // boosted time never above the bucket plus what refilled
        let boosted = b.stats().boosted_ns[&3] as f64;
        assert!(
            boosted <= 5_000_000.0 + now as f64 * 0.05 + 1.0,
            "{boosted}"
        );
        // another VM is not held back by the first one's share
        let acts = b.on_event(
            &E::accept(now, 4, 0, VcpuState::Preempted, Some(10)),
            now,
            NO_TID,
        );
        assert_eq!(acts.len(), 1);
        assert_eq!(b.lower_all(now + 5).len(), 1);
    }
}
