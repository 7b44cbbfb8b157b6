//! The vBalance daemon on a KVM guest: what it can know, when, and what its writes do.
//!
//! - **Guest tick.** A running vCPU takes a timer tick every `tick_us` on its own HZ grid; a
//!   preempted one misses its ticks and takes the missed one at once when it runs again (the
//!   LAPIC timer is pending); a halted one has no tick (NO_HZ idle) and restarts on the grid.
//! - **Steal.** KVM's steal clock grows by the host run-queue wait and is updated when the
//!   vCPU enters the guest; the guest accounts it (what `/proc/stat` shows) at its own ticks,
//!   so a vCPU's steal appears only after it runs again.
//! - **Detectors** (`scenario::Detector`): the eBPF program reads every vCPU's
//!   `kvm_steal_time.preempted` at guest events on a running vCPU (a tick, a context switch
//!   from or to idle), at most once per `scan_gap_us` per vCPU, and pushes changes through a
//!   ring buffer; the tick detector calls a vCPU preempted when it has not been heard from for
//!   `tick_miss` ticks without halting; the `/proc/stat` detector samples accounted steal every
//!   `procstat_interval_ms` and calls a vCPU preempted above `procstat_steal_threshold`.
//! - **The daemon** is a guest thread: it runs on a vCPU (the observing one for ring-buffer
//!   events, a running one for its window timer; the `/proc/stat` daemon sleeps where it last
//!   ran) and needs that vCPU to run for `wake_us + write_us` (or `procstat_read_us +
//!   write_us`); if the vCPU is preempted meanwhile, so is the daemon. When done it runs
//!   `irqbal::Policy` and writes the moves, when the real daemon would: at each window
//!   (`window_ms`, 1 s; `procstat_interval_ms` for the `/proc/stat` detector) and, on a
//!   direct-move guest, when the ring buffer reports a vCPU holding an IRQ preempted (on the
//!   last window's loads and availability).
//! - **Loads** are what the real daemon computes from its window's samples
//!   (`irqbal::daemon::observe`): a vCPU's irq + softirq time over the window, and an IRQ's
//!   share of its holder's load by the interrupts each IRQ raised there (`/proc/interrupts`).
//! - **Availability**: every daemon samples `/proc/stat` steal (and idle) at its window into
//!   an `irqbal::avail::CounterWindow`; the eBPF daemon also keeps each vCPU's preemption
//!   episodes as the ring buffer reports them (seen preempted; running again, with the
//!   episode's length by the steal clock) in an `irqbal::avail::Episodes`, and samples the
//!   program's per-CPU wake-up counters (exits from idle and the steal each waited) — the same
//!   bookkeeping the real daemon does. `vbalance-chase`, the former default, had none.

use serde::Serialize;

use super::*;

/// One daemon of one VM.
pub(super) struct Daemon {
    pub(super) det: Detector,
    /// The daemon's belief per VM-local vCPU: online (not preempted).
    view: Vec<bool>,
    /// The detector's last verdict per vCPU (what the eBPF maps hold): preempted.
    seen_preempted: Vec<bool>,
    /// Verdict changes not yet read by the daemon.
    inbox: Vec<Seen>,
    /// eBPF: each vCPU's steal clock when it was seen preempted (the program's
    /// `steal_at_preempt`).
    steal_at_preempt: Vec<u64>,
    /// Preemption episodes as the daemon has read them (eBPF only).
    episodes: irqbal::avail::Episodes,
    /// `/proc/stat` steal and idle, and the eBPF wake-up counters, over the availability
    /// window.
    counters: irqbal::avail::CounterWindow,
    /// The policy is run only at windows (deferred moves: no reaction to single preemptions).
    pub(super) windows_only: bool,
    /// The holder the daemon believes each queue has: the last CPU it wrote.
    held: Vec<u32>,
    /// Last guest event per vCPU (tick, switch) and whether the vCPU was going idle then.
    heartbeat: Vec<(u64, bool)>,
    /// Last scan of the other vCPUs by each vCPU (the eBPF program's rate limit).
    last_scan: Vec<Option<u64>>,
    /// The sample at the last window (at start: the daemon's first sample, all zero).
    prev: Sample,
    /// Loads and availability of the last window (`None` before the first).
    last: Option<WindowView>,
    sample_due: bool,
    /// Global index of the vCPU the daemon runs on, or waits for.
    home: u32,
    busy: bool,
    work_left: u64,
    running_since: Option<u64>,
    pub(super) gen: u32,
    runs: u64,
}

/// What the daemon reads at a window: `/proc/stat` (irq + softirq time and accounted steal
/// per vCPU) and `/proc/interrupts` (each queue's interrupts per vCPU), cumulative.
#[derive(Debug, Clone)]
struct Sample {
    at: u64,
    irq_ns: Vec<u64>,
    /// Per queue (VM-local index), per vCPU.
    ints: Vec<Vec<u64>>,
    steal_ticks: Vec<u64>,
}

/// One window as the policy sees it.
#[derive(Debug, Clone)]
struct WindowView {
    /// Per vCPU: irq + softirq time over the window, fraction of a CPU.
    vcpu_load: Vec<f64>,
    /// Per queue: its holder's load times the queue's share of the interrupts the holder
    /// took in the window (`irqbal::daemon::observe`).
    irq_load: Vec<f64>,
    /// Per vCPU: steal over the availability window and expected interrupt wait, ns.
    avail: Vec<(Option<f64>, Option<f64>)>,
}

/// The window from `a` to `b` with the holders the daemon believes in, as the real daemon
/// computes it (`irqbal::daemon::observe`).
fn window_view(
    a: &Sample,
    b: &Sample,
    held: &[u32],
    avail: impl Fn(u32) -> (Option<f64>, Option<f64>),
) -> WindowView {
    let dt = b.at.saturating_sub(a.at).max(1) as f64;
    let vcpu_load: Vec<f64> = b
        .irq_ns
        .iter()
        .zip(&a.irq_ns)
        .map(|(x, y)| x.saturating_sub(*y) as f64 / dt)
        .collect();
    let delta = |q: usize, u: usize| -> u64 {
        let get = |s: &Sample| s.ints.get(q).and_then(|c| c.get(u)).copied().unwrap_or(0);
        get(b).saturating_sub(get(a))
    };
    let irq_load = held
        .iter()
        .enumerate()
        .map(|(q, &h)| {
            let h = h as usize;
            let all: u64 = (0..b.ints.len()).map(|o| delta(o, h)).sum();
            let hl = vcpu_load.get(h).copied().unwrap_or(0.0);
            if all == 0 {
                0.0
            } else {
                hl * delta(q, h) as f64 / all as f64
            }
        })
        .collect();
    WindowView {
        vcpu_load,
        irq_load,
        avail: (0..b.irq_ns.len() as u32).map(avail).collect(),
    }
}

/// One change the detector reported.
#[derive(Debug, Clone, Copy)]
struct Seen {
    vcpu: u32,
    online: bool,
    at: u64,
    /// A resume: the episode's length by the steal clock (eBPF).
    episode_ns: Option<u64>,
}

impl Daemon {
    pub(super) fn new(
        det: Detector,
        vcpus: u32,
        queues: u32,
        avail_window_ns: u64,
        windows_only: bool,
    ) -> Self {
        let n = vcpus as usize;
        Self {
            det,
            view: vec![true; n],
            seen_preempted: vec![false; n],
            inbox: Vec::new(),
            steal_at_preempt: vec![0; n],
            episodes: irqbal::avail::Episodes::new(avail_window_ns, 0),
            counters: {
                // the daemon's first sample, at its start
                let mut c = irqbal::avail::CounterWindow::new(avail_window_ns);
                c.push(
                    0,
                    (0..vcpus).map(|u| (u, irqbal::avail::CpuCounters::default())),
                );
                c
            },
            windows_only,
            held: vec![0; queues as usize],
            heartbeat: vec![(0, false); n],
            last_scan: vec![None; n],
            prev: Sample {
                at: 0,
                irq_ns: vec![0; n],
                ints: vec![vec![0; n]; queues as usize],
                steal_ticks: vec![0; n],
            },
            last: None,
            sample_due: false,
            home: 0,
            busy: false,
            work_left: 0,
            running_since: None,
            gen: 0,
            runs: 0,
        }
    }
}

/// Collected over a run: preemption episodes and when the daemon learnt of them.
#[derive(Debug, Default)]
pub(super) struct DetectStats {
    episodes: u64,
    detected: u64,
    latencies_ns: Vec<u64>,
    runs: u64,
}

/// How soon a daemon variant learnt that a vCPU was preempted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detection {
    /// Preemption episodes of the VM's vCPUs (descheduled while runnable, until run again).
    pub episodes: u64,
    /// Episodes the daemon learnt of while they lasted (after its decision was made).
    pub detected: u64,
    /// From the preemption to the daemon's decision, ms: percentiles over detected episodes
    /// (`None` when none was detected).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Times the daemon ran (ring-buffer wake-ups or `/proc` samples).
    pub daemon_runs: u64,
}

impl Sim {
    pub(super) fn procstat_interval(&self) -> u64 {
        (self.vb.procstat_interval_ms * MS as f64) as u64
    }

    /// The daemon's sampling window for its detector.
    pub(super) fn daemon_interval(&self, det: Detector) -> u64 {
        match det {
            Detector::Procstat => self.procstat_interval(),
            _ => ((self.vb.window_ms * MS as f64) as u64).max(1),
        }
    }

    fn us(v: f64) -> u64 {
        ((v * US as f64) as u64).max(1)
    }

    /// `v` was just scheduled in (from the runqueue; `was_halted` if it had been woken from a
    /// halt and waited there).
    pub(super) fn vcpu_resumed(&mut self, v: u32, was_halted: bool) {
        let now = self.now;
        let tick = self.vb_tick;
        let x = &mut self.vcpus[v as usize];
        x.tick_gen = x.tick_gen.wrapping_add(1);
        let gen = x.tick_gen;
        if x.next_tick <= now {
            if was_halted {
                // NO_HZ idle exit: the tick restarts on its grid
                let behind = now - x.next_tick;
                x.next_tick += (behind / tick + 1) * tick;
            } else {
                // a tick missed while preempted fires as soon as the vCPU runs
                x.next_tick = now;
            }
        }
        let at = x.next_tick;
        self.push(at, Ev::GuestTick { vcpu: v, gen });
        if was_halted {
            // the guest switches from its idle task: a sched_switch
            self.guest_event(v, false);
        }
        let vm = self.vcpus[v as usize].vm;
        if self.vms[vm as usize]
            .daemon
            .as_ref()
            .is_some_and(|d| d.busy && d.home == v)
        {
            self.daemon_try_start(vm);
        }
    }

    /// `v` was just taken off its pCPU (state already set).
    pub(super) fn vcpu_descheduled(&mut self, v: u32) {
        let now = self.now;
        let vm = self.vcpus[v as usize].vm;
        if let Some(d) = self.vms[vm as usize].daemon.as_mut() {
            if d.home == v {
                if let Some(t) = d.running_since.take() {
                    d.work_left = d.work_left.saturating_sub(now - t).max(1);
                    d.gen = d.gen.wrapping_add(1);
                }
            }
        }
        if self.vcpus[v as usize].state == RunState::Blocked {
            // the guest switched to idle before halting
            self.guest_event(v, true);
        }
    }

    pub(super) fn guest_tick(&mut self, v: u32) {
        if self.vcpus[v as usize].state != RunState::Running {
            return;
        }
        let tick = self.vb_tick;
        let x = &mut self.vcpus[v as usize];
        // steal_account_process_time(): the steal clock is accounted at the tick
        x.steal_accounted = x.steal_clock;
        x.next_tick += tick;
        let (at, gen, vm) = (x.next_tick, x.tick_gen, x.vm);
        self.push(at, Ev::GuestTick { vcpu: v, gen });
        self.guest_event(v, false);
        if self.policy == PolicyKind::VbalanceOracle {
            self.vbalance(vm);
        }
    }

    /// A guest event on vCPU `v` (a tick, or a context switch; `halting` when it switches to
    /// idle): the eBPF program and the tick detector run here.
    fn guest_event(&mut self, v: u32, halting: bool) {
        let now = self.now;
        let (vm, me) = {
            let x = &self.vcpus[v as usize];
            (x.vm, x.index as usize)
        };
        let gap = Self::us(self.vb.scan_gap_us);
        let tick_miss = (self.vb.tick_miss * self.vb_tick as f64) as u64;
        let vcpus = self.vms[vm as usize].vcpus.clone();
        let flags: Vec<bool> = vcpus
            .iter()
            .map(|&g| self.vcpus[g as usize].kvm_preempted)
            .collect();
        // the steal clock in each vCPU's kvm_steal_time (updated when it enters the guest)
        let clocks: Vec<u64> = vcpus
            .iter()
            .map(|&g| self.vcpus[g as usize].steal_clock)
            .collect();
        let Some(d) = self.vms[vm as usize].daemon.as_mut() else {
            return;
        };
        d.heartbeat[me] = (now, halting);
        let mut changed = false;
        let flag = d.det == Detector::Flag;
        // a resume as the program reports it: the episode's length by the steal clock
        let resumed = |d: &mut Daemon, u: usize| Seen {
            vcpu: u as u32,
            online: true,
            at: now,
            episode_ns: flag.then(|| clocks[u].saturating_sub(d.steal_at_preempt[u])),
        };
        // this vCPU runs: if it was reported preempted, report it back
        if d.seen_preempted[me] {
            d.seen_preempted[me] = false;
            let ev = resumed(d, me);
            d.inbox.push(ev);
            changed = true;
        }
        match d.det {
            Detector::Flag => {
                if d.last_scan[me].is_none_or(|t| now - t >= gap) {
                    d.last_scan[me] = Some(now);
                    for (u, &f) in flags.iter().enumerate() {
                        if u != me && d.seen_preempted[u] != f {
                            d.seen_preempted[u] = f;
                            let ev = if f {
                                d.steal_at_preempt[u] = clocks[u];
                                Seen {
                                    vcpu: u as u32,
                                    online: false,
                                    at: now,
                                    episode_ns: None,
                                }
                            } else {
                                resumed(d, u)
                            };
                            d.inbox.push(ev);
                            changed = true;
                        }
                    }
                }
            }
            Detector::Tick => {
                for u in 0..flags.len() {
                    let (hb, halted) = d.heartbeat[u];
                    let silent = u != me && !halted && now.saturating_sub(hb) > tick_miss;
                    if silent != d.seen_preempted[u] {
                        d.seen_preempted[u] = silent;
                        d.inbox.push(Seen {
                            vcpu: u as u32,
                            online: !silent,
                            at: now,
                            episode_ns: None,
                        });
                        changed = true;
                    }
                }
            }
            Detector::Procstat | Detector::Oracle => {}
        }
        if changed {
            let work = Self::us(self.vb.wake_us) + Self::us(self.vb.write_us);
            self.daemon_post(vm, v, work);
        }
    }

    /// Wake the daemon on vCPU `on` for `work` ns of its run time (no-op if it is busy: it
    /// reads everything queued when it gets there).
    fn daemon_post(&mut self, vm: u32, on: u32, work: u64) {
        let Some(d) = self.vms[vm as usize].daemon.as_mut() else {
            return;
        };
        if d.busy {
            return;
        }
        d.busy = true;
        d.home = on;
        d.work_left = work;
        d.running_since = None;
        d.runs += 1;
        self.daemon_try_start(vm);
    }

    fn daemon_try_start(&mut self, vm: u32) {
        let now = self.now;
        let Some(d) = self.vms[vm as usize].daemon.as_mut() else {
            return;
        };
        if !d.busy || d.running_since.is_some() {
            return;
        }
        if self.vcpus[d.home as usize].state != RunState::Running {
            return;
        }
        d.running_since = Some(now);
        d.gen = d.gen.wrapping_add(1);
        let (at, gen) = (now + d.work_left, d.gen);
        self.push(at, Ev::DaemonDone { vm, gen });
    }

    /// The daemon's window timer: sample `/proc/stat` (and `/proc/interrupts`) and decide.
    pub(super) fn daemon_timer(&mut self, vm: u32) {
        let now = self.now;
        let Some(det) = self.vms[vm as usize].daemon.as_ref().map(|d| d.det) else {
            return;
        };
        let interval = self.daemon_interval(det);
        self.push(now + interval, Ev::DaemonTimer { vm });
        let work = Self::us(self.vb.procstat_read_us) + Self::us(self.vb.write_us);
        let running = self.vms[vm as usize]
            .vcpus
            .iter()
            .copied()
            .find(|&g| self.vcpus[g as usize].state == RunState::Running);
        let first = self.vms[vm as usize].vcpus[0];
        let Some(d) = self.vms[vm as usize].daemon.as_mut() else {
            return;
        };
        d.sample_due = true;
        // the /proc/stat daemon sleeps on the vCPU it last ran on (vCPU 0 at start); the
        // eBPF daemon's window work runs, like its ring-buffer wake-ups, on a running vCPU
        // (so that it never holds those back behind a preempted one)
        let last = if d.runs == 0 { first } else { d.home };
        let home = match d.det {
            Detector::Procstat => last,
            _ => running.unwrap_or(last),
        };
        self.daemon_post(vm, home, work);
    }

    /// What VM `vm`'s daemon reads now: each vCPU's accounted steal in ticks, its
    /// availability counters, and the /proc/stat and /proc/interrupts sample.
    fn daemon_reading(
        &self,
        vm: u32,
        vcpus: &[u32],
    ) -> (Vec<u64>, Vec<irqbal::avail::CpuCounters>, Sample) {
        let now = self.now;
        let steal_ticks: Vec<u64> = vcpus
            .iter()
            .map(|&g| self.vcpus[g as usize].steal_accounted / (10 * MS))
            .collect();
        let ebpf = self.policy.detector() == Some(Detector::Flag);
        let counters: Vec<irqbal::avail::CpuCounters> = vcpus
            .iter()
            .zip(&steal_ticks)
            .map(|(&g, &ticks)| {
                let x = &self.vcpus[g as usize];
                let halted = x.state == RunState::Blocked;
                irqbal::avail::CpuCounters {
                    steal_ns: ticks * 10 * MS,
                    idle_ns: x.idle_ns + if halted { now - x.blocked_since } else { 0 },
                    wakes: if ebpf { x.wakes } else { 0 },
                    wake_wait_ns: if ebpf { x.wake_wait_ns } else { 0 },
                    wake_wait_sq_us2: if ebpf { x.wake_wait_sq_us2 } else { 0 },
                }
            })
            .collect();
        // what /proc/stat (irq + softirq time) and /proc/interrupts show now
        let sample = Sample {
            at: now,
            irq_ns: vcpus
                .iter()
                .map(|&g| self.vcpus[g as usize].irq_ns)
                .collect(),
            ints: self.vms[vm as usize]
                .queues
                .iter()
                .map(|&q| self.queues[q as usize].ints.clone())
                .collect(),
            steal_ticks: steal_ticks.clone(),
        };
        (steal_ticks, counters, sample)
    }

    /// The daemon's run ends: it reads what it was told, samples at its window, decides when
    /// the real daemon would (at each window; with direct moves also when a vCPU holding an
    /// IRQ is seen preempted) and writes.
    pub(super) fn daemon_done(&mut self, vm: u32) {
        let now = self.now;
        let threshold = self.vb.procstat_steal_threshold;
        let vcpus = self.vms[vm as usize].vcpus.clone();
        let (steal_ticks, counters, sample) = self.daemon_reading(vm, &vcpus);
        let Some(d) = self.vms[vm as usize].daemon.as_mut() else {
            return;
        };
        d.busy = false;
        d.running_since = None;
        let window = std::mem::take(&mut d.sample_due);
        if window {
            d.counters.push(
                now,
                counters.iter().enumerate().map(|(u, &c)| (u as u32, c)),
            );
        }
        let mut urgent = false;
        if d.det == Detector::Procstat {
            if window {
                let dt = now.saturating_sub(d.prev.at).max(1) as f64;
                for (u, (&a, &b)) in steal_ticks.iter().zip(&d.prev.steal_ticks).enumerate() {
                    let frac = (a.saturating_sub(b) * 10 * MS) as f64 / dt;
                    d.view[u] = frac <= threshold;
                }
            }
        } else {
            for ev in d.inbox.drain(..) {
                d.view[ev.vcpu as usize] = ev.online;
                match (ev.online, ev.episode_ns) {
                    (false, _) if d.det == Detector::Flag => d.episodes.preempted(ev.vcpu, ev.at),
                    (true, Some(len)) => d.episodes.resumed(ev.vcpu, ev.at, len),
                    _ => {}
                }
                // the real daemon acts between windows only on a holder seen preempted
                urgent |= !ev.online && d.held.contains(&ev.vcpu);
            }
        }
        // the loads and availability the decision sees: at a window, the window's; between
        // windows, the last window's; before the first window, since the start (the real
        // daemon samples then), with the steal fraction so far and no expected wait
        let view = if window {
            let w = window_view(&d.prev, &sample, &d.held, |u| {
                let wait = (d.det == Detector::Flag)
                    .then(|| irqbal::avail::expected_wait_ns(&d.episodes, &d.counters, u, now))
                    .flatten();
                (d.counters.steal(u), wait)
            });
            d.prev = sample;
            d.last = Some(w.clone());
            w
        } else {
            match &d.last {
                Some(w) => w.clone(),
                None => window_view(&d.prev, &sample, &d.held, |u| {
                    let dt = now.saturating_sub(d.prev.at).max(1) as f64;
                    let stolen = sample.steal_ticks[u as usize]
                        .saturating_sub(d.prev.steal_ticks[u as usize]);
                    (Some((stolen * 10 * MS) as f64 / dt), None)
                }),
            }
        };
        let online = d.view.clone();
        let held = d.held.clone();
        let decide = window || (urgent && !d.windows_only);
        // detection statistics: preempted vCPUs the daemon now knows about
        for (u, &g) in vcpus.iter().enumerate() {
            let x = &mut self.vcpus[g as usize];
            if !online[u] && x.kvm_preempted && !x.episode_seen {
                if let Some(t) = x.preempted_at {
                    self.detect.latencies_ns.push(now - t);
                }
                x.episode_seen = true;
            }
        }
        self.detect.runs += 1;
        if !decide {
            return;
        }
        // the former default had no availability bookkeeping
        let avail = |u: usize| match self.policy {
            PolicyKind::VbalanceChase => (None, None),
            _ => view.avail[u],
        };
        let snap = Snapshot {
            now_ns: now,
            vcpus: (0..vcpus.len())
                .map(|u| VcpuView {
                    vcpu: u as u32,
                    online: online[u],
                    load: view.vcpu_load[u],
                    eligible: true,
                    steal: avail(u).0,
                    wait_ns: avail(u).1,
                })
                .collect(),
            irqs: held
                .iter()
                .enumerate()
                .map(|(qi, &h)| IrqView {
                    irq: qi as u32,
                    holder: h,
                    load: view.irq_load[qi],
                })
                .collect(),
        };
        let Some(policy) = self.vms[vm as usize].policy.as_mut() else {
            return;
        };
        let decision = policy.decide(&snap);
        let moves: Vec<(u32, u32)> = decision.moves().map(|m| (m.irq, m.to)).collect();
        for (qi, to) in moves {
            if (to as usize) < vcpus.len() {
                if let Some(d) = self.vms[vm as usize].daemon.as_mut() {
                    d.held[qi as usize] = to;
                }
                self.rebind(vm, qi, to);
            }
        }
    }

    /// `v` runs again: close its preemption episode for the statistics.
    pub(super) fn end_episode(&mut self, v: u32) {
        let vm = self.vcpus[v as usize].vm;
        let tracked = self.vms[vm as usize].daemon.is_some();
        let x = &mut self.vcpus[v as usize];
        if x.preempted_at.take().is_some() && tracked {
            self.detect.episodes += 1;
            if x.episode_seen {
                self.detect.detected += 1;
            }
        }
        x.episode_seen = false;
    }

    pub(super) fn detection(&self) -> Option<Detection> {
        if !self.vms.iter().any(|v| v.daemon.is_some()) {
            return None;
        }
        let mut l = self.detect.latencies_ns.clone();
        l.sort_unstable();
        let rank = |p: f64| -> Option<f64> {
            if l.is_empty() {
                return None;
            }
            let k = ((p / 100.0) * l.len() as f64).ceil() as usize;
            Some(l[k.clamp(1, l.len()) - 1] as f64 / 1e6)
        };
        Some(Detection {
            episodes: self.detect.episodes,
            detected: self.detect.detected,
            p50_ms: rank(50.0),
            p99_ms: rank(99.0),
            max_ms: rank(100.0),
            daemon_runs: self.detect.runs,
        })
    }
}
