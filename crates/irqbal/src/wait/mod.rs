//! How long an interrupt accepted for a KVM vCPU waits until that vCPU next enters the guest
//! (`vmtune irq wait`, on the host): the tool that tells a user whether vBalance's host half is
//! worth running on their host.
//!
//! The eBPF program (`bpf/irqwait.bpf.c`, loaded by [`tracer`]) pushes two kinds of event: an
//! *accept* for every interrupt KVM's local APIC accepts for a vCPU, with the vCPU's state at
//! that moment and how its VM was found, and an *entry* for the next guest entry of a vCPU that
//! has an accepted interrupt waiting. [`WaitBook`] pairs them: each accept with the first entry
//! of its vCPU at or after it, the wait being the difference, kept in a histogram per VM, vCPU
//! and state. The same accounting runs on the live ring buffer and on a recording
//! ([`WaitEvent`] as JSON lines), which is how it is tested.
//!
//! What the states mean for a user:
//! - `preempted`: the vCPU thread was runnable but another task had its CPU. This is the wait
//!   vBalance's host half removes (run the vCPU an interrupt is accepted for), and the one that
//!   dedicated CPUs for the vCPUs remove too.
//! - `blocked`: the vCPU had halted (or its thread slept in the host); the wait is the wake-up.
//!   Halt polling trades CPU time for it.
//! - `host`: the vCPU was in the host handling an exit or in QEMU; the wait is that work.
//! - `guest`: the vCPU was in the guest; the interrupt is delivered by a kick or a posted
//!   interrupt without a wait worth measuring, so it is counted, not paired.
//! - `unknown`: no event of this vCPU seen since the program started.
//!
//! Blind spot: interrupts the IOMMU posts straight to a vCPU (VT-d posted interrupts, AVIC with
//! IOMMU guest mode) pass no host CPU and are not seen.

pub mod boost;
pub mod render;
pub mod tracer;
pub mod vms;

use std::collections::{BTreeMap, HashMap, VecDeque};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The compiled program (see `bpf/build.sh`).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/irqwait.bpf.o");

/// Size of `struct event` in the program.
pub const EVENT_SIZE: usize = 40;

/// The most accepts kept waiting for one vCPU; more are counted in `overflow`.
pub const MAX_PENDING: usize = 4096;

/// The vCPU's state when an interrupt was accepted for it (the program's `STATE_*`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum VcpuState {
    /// No event of the vCPU seen yet.
    #[default]
    Unknown,
    /// In the guest: delivered without a wait to measure.
    Guest,
    /// In the host: handling an exit, or in QEMU.
    Host,
    /// Descheduled while runnable: waiting for a CPU.
    Preempted,
    /// Its thread was sleeping: normally a halted vCPU.
    Blocked,
}

impl VcpuState {
    fn from_raw(v: u8) -> Option<VcpuState> {
        Some(match v {
            0 => VcpuState::Unknown,
            1 => VcpuState::Guest,
            2 => VcpuState::Host,
            3 => VcpuState::Preempted,
            4 => VcpuState::Blocked,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            VcpuState::Unknown => "unknown",
            VcpuState::Guest => "guest",
            VcpuState::Host => "host",
            VcpuState::Preempted => "preempted",
            VcpuState::Blocked => "blocked",
        }
    }
}

/// How an accept's VM was found (the program's `BY_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// Not found: several VMs run and the context belonged to none of them.
    None,
    /// The VFIO vector whose handler delivered it.
    Irq,
    /// The delivering thread belongs to the VM's process.
    Thread,
    /// The only VM running.
    OnlyVm,
}

impl Attribution {
    fn from_raw(v: u8) -> Option<Attribution> {
        Some(match v {
            0 => Attribution::None,
            1 => Attribution::Irq,
            2 => Attribution::Thread,
            3 => Attribution::OnlyVm,
            _ => return None,
        })
    }
}

/// Who ran on the CPU a waiting vCPU's thread last ran on when an interrupt was accepted for
/// it (the program's `HOLDER_*`): whom raising that thread displaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Holder {
    /// Not known (the vCPU in the guest, its CPU not seen yet, or a recording without it).
    #[default]
    Unknown,
    /// The CPU was idle.
    Idle,
    /// A thread of the vCPU's own VM (another of its vCPUs, its QEMU or vhost threads).
    Own,
    /// Another VM's thread or a host task.
    Other,
}

impl Holder {
    fn from_raw(v: u8) -> Option<Holder> {
        Some(match v {
            0 => Holder::Unknown,
            1 => Holder::Idle,
            2 => Holder::Own,
            3 => Holder::Other,
            _ => return None,
        })
    }

    pub fn is_unknown(&self) -> bool {
        *self == Holder::Unknown
    }

    /// Raising the vCPU takes time from no other tenant.
    pub fn is_own(self) -> bool {
        matches!(self, Holder::Idle | Holder::Own)
    }
}

/// APIC delivery modes that are interrupts (fixed, lowest priority); NMI, SMI, INIT, SIPI and
/// ExtINT are counted apart.
pub fn is_interrupt_delivery(dm: u16) -> bool {
    matches!(dm, 0x000 | 0x100)
}

/// One event of the program, or of a recording (one JSON object per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WaitEvent {
    /// An interrupt accepted for vCPU `vcpu` of VM `vm` (0: unattributed).
    Accept {
        ts_ns: u64,
        vm: u32,
        vcpu: u32,
        /// The host IRQ whose handler delivered it, if one was running.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        irq: Option<u32>,
        /// The vCPU's thread, once the program has seen it enter the guest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tid: Option<u32>,
        vector: u8,
        /// APIC delivery mode (0 fixed, 0x100 lowest priority, 0x400 NMI, ...).
        #[serde(default)]
        dm: u16,
        state: VcpuState,
        by: Attribution,
        /// Who ran on the vCPU thread's CPU (a vCPU not in the guest).
        #[serde(default, skip_serializing_if = "Holder::is_unknown")]
        holder: Holder,
    },
    /// The vCPU entered the guest with an accepted interrupt waiting.
    Entry { ts_ns: u64, vm: u32, vcpu: u32 },
    /// The thread of a vCPU `vmtune irq boost` raised went to sleep (the vCPU halted).
    Blocked {
        ts_ns: u64,
        vm: u32,
        vcpu: u32,
        tid: u32,
    },
}

impl WaitEvent {
    /// Decode the program's `struct event` (little-endian, [`EVENT_SIZE`] bytes).
    pub fn parse(b: &[u8]) -> Option<WaitEvent> {
        let b = b.get(..EVENT_SIZE)?;
        let u64_at = |o: usize| b.get(o..o + 8)?.try_into().ok().map(u64::from_le_bytes);
        let u32_at = |o: usize| b.get(o..o + 4)?.try_into().ok().map(u32::from_le_bytes);
        let u16_at = |o: usize| b.get(o..o + 2)?.try_into().ok().map(u16::from_le_bytes);
        let ts_ns = u64_at(0)?;
        let vm = u32_at(12)?;
        let vcpu = u32_at(16)?;
        match u32_at(8)? {
            1 => {
                let irq = u32_at(20)?;
                let tid = u32_at(24)?;
                Some(WaitEvent::Accept {
                    ts_ns,
                    vm,
                    vcpu,
                    // the program writes the IRQ only with a handler running; IRQ 0 is the
                    // timer, which never delivers to a guest
                    irq: (irq != 0).then_some(irq),
                    tid: (tid != 0).then_some(tid),
                    dm: u16_at(28)?,
                    vector: *b.get(30)?,
                    state: VcpuState::from_raw(*b.get(31)?)?,
                    by: Attribution::from_raw(*b.get(32)?)?,
                    holder: Holder::from_raw(*b.get(33)?)?,
                })
            }
            2 => Some(WaitEvent::Entry { ts_ns, vm, vcpu }),
            3 => Some(WaitEvent::Blocked {
                ts_ns,
                vm,
                vcpu,
                tid: u32_at(24)?,
            }),
            _ => None,
        }
    }

    /// An accept as the program writes one for an interrupt a VM thread raised: fixed
    /// delivery, no host IRQ handler, vector 0x30 (generated sequences, the simulator's trace).
    pub fn accept(ts_ns: u64, vm: u32, vcpu: u32, state: VcpuState, tid: Option<u32>) -> Self {
        WaitEvent::Accept {
            ts_ns,
            vm,
            vcpu,
            irq: None,
            tid,
            vector: 0x30,
            dm: 0,
            state,
            by: Attribution::Thread,
            holder: Holder::Unknown,
        }
    }

    /// The same accept, saying who held the vCPU's CPU.
    pub fn with_holder(mut self, h: Holder) -> Self {
        if let WaitEvent::Accept { holder, .. } = &mut self {
            *holder = h;
        }
        self
    }

    pub fn ts_ns(&self) -> u64 {
        match *self {
            WaitEvent::Accept { ts_ns, .. }
            | WaitEvent::Entry { ts_ns, .. }
            | WaitEvent::Blocked { ts_ns, .. } => ts_ns,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    ts_ns: u64,
    state: VcpuState,
}

/// Waits in ns, 2 significant digits (1 % error), up to an hour.
fn new_histogram() -> Histogram<u64> {
    // the bounds are constants that hdrhistogram accepts
    Histogram::new_with_bounds(1, 3_600_000_000_000, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
    })
}

/// The accounting: accepts paired with entries, per VM, vCPU and state.
#[derive(Debug, Default)]
pub struct WaitBook {
    pending: HashMap<(u32, u32), VecDeque<Pending>>,
    hists: BTreeMap<(u32, u32, VcpuState), Histogram<u64>>,
    in_guest: BTreeMap<(u32, u32), u64>,
    irqs: BTreeMap<(u32, u32), std::collections::BTreeSet<u32>>,
    by: BTreeMap<Attribution, u64>,
    accepts: u64,
    unattributed: u64,
    other_delivery: u64,
    overflow: u64,
    /// Entries with no accept of theirs before them (the program cleared its mark for an
    /// accept pushed after the entry's time, across CPUs).
    unmatched_entries: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
}

impl WaitBook {
    pub fn new() -> WaitBook {
        WaitBook::default()
    }

    pub fn push(&mut self, e: &WaitEvent) {
        let ts = e.ts_ns();
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
        self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        match *e {
            WaitEvent::Accept {
                ts_ns,
                vm,
                vcpu,
                irq,
                dm,
                state,
                by,
                ..
            } => {
                self.accepts += 1;
                *self.by.entry(by).or_default() += 1;
                if !is_interrupt_delivery(dm) {
                    self.other_delivery += 1;
                    return;
                }
                if vm == 0 {
                    self.unattributed += 1;
                    return;
                }
                if let Some(irq) = irq {
                    self.irqs.entry((vm, vcpu)).or_default().insert(irq);
                }
                if state == VcpuState::Guest {
                    *self.in_guest.entry((vm, vcpu)).or_default() += 1;
                    return;
                }
                let q = self.pending.entry((vm, vcpu)).or_default();
                if q.len() >= MAX_PENDING {
                    self.overflow += 1;
                    return;
                }
                q.push_back(Pending { ts_ns, state });
            }
            // the booster's signal; not part of the waits
            WaitEvent::Blocked { .. } => {}
            WaitEvent::Entry { ts_ns, vm, vcpu } => {
                let Some(q) = self.pending.get_mut(&(vm, vcpu)) else {
                    self.unmatched_entries += 1;
                    return;
                };
                let mut paired = 0;
                while let Some(p) = q.front().copied() {
                    if p.ts_ns > ts_ns {
                        break;
                    }
                    q.pop_front();
                    paired += 1;
                    let h = self
                        .hists
                        .entry((vm, vcpu, p.state))
                        .or_insert_with(new_histogram);
                    h.saturating_record((ts_ns - p.ts_ns).max(1));
                }
                if paired == 0 {
                    self.unmatched_entries += 1;
                }
                if q.is_empty() {
                    self.pending.remove(&(vm, vcpu));
                }
            }
        }
    }

    /// Total accepts seen.
    pub fn accepts(&self) -> u64 {
        self.accepts
    }

    /// The report, with `end_ns` the time the window closed (on the events' clock) and `names`
    /// the VMs known by process id.
    pub fn report(&self, end_ns: Option<u64>, vms: &[vms::VmProc]) -> WaitReport {
        let end = end_ns.or(self.last_ts);
        let mut keys: std::collections::BTreeSet<(u32, u32)> =
            self.hists.keys().map(|&(vm, c, _)| (vm, c)).collect();
        keys.extend(self.in_guest.keys().copied());
        keys.extend(self.pending.keys().copied());
        let mut pids: std::collections::BTreeSet<u32> = keys.iter().map(|k| k.0).collect();
        pids.extend(vms.iter().map(|v| v.pid));
        let mut out = Vec::new();
        for pid in pids {
            let proc_ = vms.iter().find(|v| v.pid == pid);
            let mut vcpus = Vec::new();
            let mut totals: BTreeMap<VcpuState, Histogram<u64>> = BTreeMap::new();
            for &(vm, vcpu) in keys.iter().filter(|k| k.0 == pid) {
                let mut states = Vec::new();
                let range = (vm, vcpu, VcpuState::Unknown)..=(vm, vcpu, VcpuState::Blocked);
                for (&(_, _, st), h) in self.hists.range(range) {
                    states.push(StateWait::of(st, h));
                    let t = totals.entry(st).or_insert_with(new_histogram);
                    let _ = t.add(h);
                }
                let still = self.pending.get(&(vm, vcpu)).map(|q| StillWaiting {
                    count: q.len() as u64,
                    oldest_us: end
                        .zip(q.front())
                        .map(|(e, p)| e.saturating_sub(p.ts_ns) as f64 / 1000.0),
                });
                vcpus.push(VcpuWait {
                    vcpu,
                    states,
                    in_guest: self.in_guest.get(&(vm, vcpu)).copied().unwrap_or(0),
                    still_waiting: still,
                    host_irqs: self
                        .irqs
                        .get(&(vm, vcpu))
                        .map(|s| s.iter().copied().collect())
                        .unwrap_or_default(),
                });
            }
            let total: Vec<StateWait> = totals.iter().map(|(&s, h)| StateWait::of(s, h)).collect();
            let advice = advice(&total, &vcpus);
            out.push(VmWait {
                pid,
                name: proc_.map(|p| p.name.clone()),
                running: None,
                vcpus,
                total,
                advice,
            });
        }
        WaitReport {
            window_s: None,
            vms: out,
            accepts: self.accepts,
            unattributed: self.unattributed,
            other_delivery: self.other_delivery,
            overflow: self.overflow,
            unmatched_entries: self.unmatched_entries,
            attribution: self
                .by
                .iter()
                .map(|(b, n)| (format!("{b:?}").to_lowercase(), *n))
                .collect(),
            lost: None,
            partial: None,
        }
    }
}

/// Waits of one state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateWait {
    pub state: VcpuState,
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl StateWait {
    fn of(state: VcpuState, h: &Histogram<u64>) -> StateWait {
        let us = |ns: u64| ns as f64 / 1000.0;
        StateWait {
            state,
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// Accepts still waiting for their vCPU's entry when the window closed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StillWaiting {
    pub count: u64,
    /// How long the oldest had waited by then.
    pub oldest_us: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VcpuWait {
    pub vcpu: u32,
    pub states: Vec<StateWait>,
    /// Accepted while it ran in the guest (not a wait).
    pub in_guest: u64,
    pub still_waiting: Option<StillWaiting>,
    /// Host IRQs (VFIO vectors) whose handlers delivered its interrupts.
    pub host_irqs: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VmWait {
    /// The VM's process id.
    pub pid: u32,
    pub name: Option<String>,
    /// Whether the process was still running at the end of a live window (`None` for a
    /// recording).
    pub running: Option<bool>,
    pub vcpus: Vec<VcpuWait>,
    /// All vCPUs together, per state.
    pub total: Vec<StateWait>,
    /// What to read from it.
    pub advice: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitReport {
    /// Length of the measurement, when it was a live one.
    pub window_s: Option<f64>,
    pub vms: Vec<VmWait>,
    pub accepts: u64,
    /// Accepts whose VM could not be found (several VMs, a foreign context).
    pub unattributed: u64,
    /// NMI, SMI, INIT, SIPI, ExtINT deliveries (not interrupts to wait for).
    pub other_delivery: u64,
    /// Accepts dropped because one vCPU had [`MAX_PENDING`] waiting.
    pub overflow: u64,
    pub unmatched_entries: u64,
    /// Accepts by how their VM was found.
    pub attribution: BTreeMap<String, u64>,
    /// Events the ring buffer dropped (live runs).
    pub lost: Option<u64>,
    /// Why the figures are incomplete, when they are.
    pub partial: Option<String>,
}

/// A preempted wait at p99 above this is worth acting on (a 1 ms frame-time budget slice; the
/// vBalance paper's ping tails under static placement are tens of ms).
pub const PREEMPTED_P99_US: f64 = 500.0;

fn advice(total: &[StateWait], vcpus: &[VcpuWait]) -> Vec<String> {
    let mut out = Vec::new();
    let waited: u64 = total.iter().map(|s| s.count).sum();
    let in_guest: u64 = vcpus.iter().map(|v| v.in_guest).sum();
    let still: u64 = vcpus
        .iter()
        .filter_map(|v| v.still_waiting.as_ref())
        .map(|w| w.count)
        .sum();
    if waited + in_guest == 0 && still > 0 {
        out.push(format!(
            "{still} interrupt(s) were accepted but their vCPU never entered the guest in the \
             window: the VM is paused, or its vCPUs sleep without waking for interrupts"
        ));
        return out;
    }
    if waited + in_guest == 0 {
        out.push(
            "no interrupt was accepted for this VM's vCPUs by the host's local APIC in the \
             window (idle, or its interrupts are posted by the IOMMU, which this cannot see)"
                .to_string(),
        );
        return out;
    }
    if let Some(p) = total.iter().find(|s| s.state == VcpuState::Preempted) {
        let share = p.count as f64 / (waited + in_guest) as f64;
        if p.p99_us > PREEMPTED_P99_US {
            out.push(format!(
                "{:.1} % of interrupts found their vCPU preempted and waited p99 {:.0} µs \
                 (max {:.0} µs) for it to get a CPU back: give the vCPUs CPUs of their own \
                 (vmtune plan / apply), or where CPUs must be shared, run the vCPU an interrupt \
                 is for (vBalance's host half; `vmtune sim vbalance-fig5` shows the effect)",
                share * 100.0,
                p.p99_us,
                p.max_us
            ));
        } else {
            out.push(format!(
                "{:.1} % of interrupts found their vCPU preempted, p99 {:.0} µs: under {} µs, \
                 vBalance's host half has little to win here (or is already at work)",
                share * 100.0,
                p.p99_us,
                PREEMPTED_P99_US
            ));
        }
    } else {
        out.push(
            "no interrupt found its vCPU preempted: the vCPUs got their CPUs when interrupts \
             came; vBalance's host half has nothing to win here"
                .to_string(),
        );
    }
    if let Some(b) = total.iter().find(|s| s.state == VcpuState::Blocked) {
        if b.p99_us > 100.0 {
            out.push(format!(
                "interrupts that woke a halted vCPU waited p99 {:.0} µs: halt polling \
                 (kvm.halt_poll_ns) or a polling idle in the guest (cpuidle-haltpoll) trade CPU \
                 time for this",
                b.p99_us
            ));
        }
    }
    out
}

/// Read a recording: one [`WaitEvent`] JSON object per line (blank lines and `#` comments
/// skipped). The error names the line.
pub fn parse_recording(text: &str) -> Result<Vec<WaitEvent>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let e: WaitEvent = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(ts: u64, vm: u32, vcpu: u32, state: VcpuState) -> WaitEvent {
        WaitEvent::accept(ts, vm, vcpu, state, None)
    }

    #[test]
    fn event_decodes_the_program_layout() {
        let mut b = [0u8; EVENT_SIZE];
        b[0..8].copy_from_slice(&123_456u64.to_le_bytes());
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[12..16].copy_from_slice(&4242u32.to_le_bytes());
        b[16..20].copy_from_slice(&3u32.to_le_bytes());
        b[20..24].copy_from_slice(&77u32.to_le_bytes());
        b[24..28].copy_from_slice(&5150u32.to_le_bytes());
        b[28..30].copy_from_slice(&0x100u16.to_le_bytes());
        b[30] = 0x31;
        b[31] = 3;
        b[32] = 1;
        b[33] = 2;
        assert_eq!(
            WaitEvent::parse(&b),
            Some(WaitEvent::Accept {
                ts_ns: 123_456,
                vm: 4242,
                vcpu: 3,
                irq: Some(77),
                tid: Some(5150),
                vector: 0x31,
                dm: 0x100,
                state: VcpuState::Preempted,
                by: Attribution::Irq,
                holder: Holder::Own,
            })
        );
        b[8] = 3;
        assert_eq!(
            WaitEvent::parse(&b),
            Some(WaitEvent::Blocked {
                ts_ns: 123_456,
                vm: 4242,
                vcpu: 3,
                tid: 5150
            })
        );
        b[8] = 1;
        b[31] = 9;
        assert_eq!(WaitEvent::parse(&b), None, "unknown state");
        assert_eq!(WaitEvent::parse(&b[..20]), None, "short");
    }

    #[test]
    fn every_accept_pairs_with_the_next_entry_of_its_vcpu() {
        let mut book = WaitBook::new();
        for e in [
            accept(1_000, 10, 0, VcpuState::Preempted),
            accept(1_500, 10, 0, VcpuState::Preempted),
            accept(1_700, 10, 1, VcpuState::Blocked),
            WaitEvent::Entry {
                ts_ns: 3_000,
                vm: 10,
                vcpu: 0,
            },
            accept(3_100, 10, 0, VcpuState::Guest),
            WaitEvent::Entry {
                ts_ns: 9_700,
                vm: 10,
                vcpu: 1,
            },
        ] {
            book.push(&e);
        }
        let r = book.report(None, &[]);
        let vm = &r.vms[0];
        assert_eq!(vm.pid, 10);
        let v0 = &vm.vcpus[0];
        assert_eq!(v0.states.len(), 1);
        assert_eq!(v0.states[0].count, 2);
        assert!((v0.states[0].max_us - 2.0).abs() < 0.03, "{:?}", v0.states);
        assert_eq!(v0.in_guest, 1);
        let v1 = &vm.vcpus[1];
        assert_eq!(v1.states[0].state, VcpuState::Blocked);
        assert!((v1.states[0].max_us - 8.0).abs() < 0.1);
        assert_eq!(r.unmatched_entries, 0);
    }

    #[test]
    fn accepts_after_an_entry_wait_for_the_following_one() {
        let mut book = WaitBook::new();
        book.push(&accept(5_000, 1, 0, VcpuState::Host));
        book.push(&WaitEvent::Entry {
            ts_ns: 4_000,
            vm: 1,
            vcpu: 0,
        });
        let r = book.report(Some(10_000), &[]);
        assert_eq!(r.unmatched_entries, 1);
        let still = r.vms[0].vcpus[0].still_waiting.as_ref().unwrap();
        assert_eq!(still.count, 1);
        assert_eq!(still.oldest_us, Some(5.0));
    }

    #[test]
    fn unattributed_and_non_interrupt_deliveries_are_counted_apart() {
        let mut book = WaitBook::new();
        book.push(&accept(1, 0, 0, VcpuState::Unknown));
        book.push(&WaitEvent::Accept {
            ts_ns: 2,
            vm: 5,
            vcpu: 0,
            irq: None,
            tid: None,
            vector: 2,
            dm: 0x400,
            state: VcpuState::Host,
            by: Attribution::Thread,
            holder: Holder::Unknown,
        });
        let r = book.report(None, &[]);
        assert_eq!((r.accepts, r.unattributed, r.other_delivery), (2, 1, 1));
        assert!(r.vms.is_empty());
    }

    #[test]
    fn recordings_round_trip_and_name_the_bad_line() {
        let evs = [
            accept(1, 7, 2, VcpuState::Preempted),
            WaitEvent::Entry {
                ts_ns: 9,
                vm: 7,
                vcpu: 2,
            },
        ];
        let text: String = evs
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        assert_eq!(parse_recording(&text).unwrap(), evs);
        let err = parse_recording("# c\n{\"kind\":\"entry\"}\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
