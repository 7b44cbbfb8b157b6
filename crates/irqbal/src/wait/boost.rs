//! The host half of vBalance as a pure state machine (`vmtune irq boost` drives it): when an
//! interrupt is accepted for a vCPU that waits for a CPU, raise its thread (the caller makes it
//! SCHED_FIFO), and lower it again when its interrupt work is done — the thread goes to sleep,
//! the vCPU having halted — or when the per-boost budget runs out. Each VM's boosts together
//! may take at most `max_share` of a CPU, kept as a token bucket over `window`, so that a VM
//! whose vCPUs never halt cannot starve the tenants it shares CPUs with.
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
}

impl Default for BoostConfig {
    /// The simulator's `[host]` defaults: a 2 ms budget, 5 % of a CPU over 100 ms.
    fn default() -> Self {
        BoostConfig {
            budget_ns: 2_000_000,
            max_share: 0.05,
            window_ns: 100_000_000,
            on: BoostOn::Preempted,
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
    pub lowered_halted: u64,
    pub lowered_budget: u64,
    /// Accepts that wanted a boost the VM's share did not allow.
    pub refused_share: u64,
    /// Accepts that wanted a boost for a vCPU whose thread is not known.
    pub no_thread: u64,
    /// Boosted time per VM, ns.
    pub boosted_ns: BTreeMap<u32, u64>,
}

/// The state machine.
#[derive(Debug)]
pub struct Booster {
    cfg: BoostConfig,
    active: BTreeMap<(u32, u32), Active>,
    buckets: BTreeMap<u32, Bucket>,
    stats: BoostStats,
}

impl Booster {
    pub fn new(cfg: BoostConfig) -> Booster {
        Booster {
            cfg,
            active: BTreeMap::new(),
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
        // the grant was taken from the bucket at the raise: give back what was not used
        self.tokens(key.0, now);
        let cap = self.capacity();
        if let Some(b) = self.buckets.get_mut(&key.0) {
            b.tokens = (b.tokens + (granted - used) as f64).min(cap);
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
                let tokens = self.tokens(vm, now);
                // a boost shorter than a tenth of the longest one the VM can have is not
                // worth two policy changes
                let longest = (self.cfg.budget_ns as f64).min(self.capacity());
                if tokens < longest / 10.0 {
                    self.stats.refused_share += 1;
                    return out;
                }
                // take the whole grant now, so that two vCPUs of one VM raised together
                // share one bucket
                let budget = ((self.cfg.budget_ns as f64).min(tokens) as u64).max(1);
                if let Some(b) = self.buckets.get_mut(&vm) {
                    b.tokens -= budget as f64;
                }
                self.active.insert(
                    (vm, vcpu),
                    Active {
                        tid,
                        since: now,
                        until: now + budget,
                    },
                );
                self.stats.raised += 1;
                out.push(BoostAction::Raise { vm, vcpu, tid });
            }
            WaitEvent::Blocked { vm, vcpu, tid, .. } => {
                if self.active.get(&(vm, vcpu)).is_some_and(|a| a.tid == tid) {
                    out.extend(self.lower((vm, vcpu), now, LowerWhy::Halted));
                }
            }
            WaitEvent::Entry { .. } => {}
        }
        out
    }

    /// Lower every boost whose budget has run out by `now`.
    pub fn on_tick(&mut self, now: u64) -> Vec<BoostAction> {
        let due: Vec<(u32, u32)> = self
            .active
            .iter()
            .filter(|(_, a)| a.until <= now)
            .map(|(k, _)| *k)
            .collect();
        due.into_iter()
            .filter_map(|k| self.lower(k, now, LowerWhy::Budget))
            .collect()
    }

    /// When the next budget runs out, if any boost is active.
    pub fn next_deadline(&self) -> Option<u64> {
        self.active.values().map(|a| a.until).min()
    }

    /// Lower everything (the agent stops).
    pub fn lower_all(&mut self, now: u64) -> Vec<BoostAction> {
        let keys: Vec<(u32, u32)> = self.active.keys().copied().collect();
        keys.into_iter()
            .filter_map(|k| self.lower(k, now, LowerWhy::Stop))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use WaitEvent as E;

    const NO_TID: fn(u32, u32) -> Option<u32> = |_, _| None;

    #[test]
    fn a_preempted_vcpu_is_raised_until_it_halts() {
        let mut b = Booster::new(BoostConfig::default());
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
        let mut b = Booster::new(BoostConfig::default());
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
            ..BoostConfig::default()
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
