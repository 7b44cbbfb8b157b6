//! Load and attach `bpf/irqwait.bpf.c`, keep its VM maps current, and read its ring buffer.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use super::vms::VmProc;
use super::WaitEvent;
use crate::ebpf::{attach_tp_btf, chain, is_root, percpu_counters, wait_readable, Unavailable};

/// The program's tracepoints: (program, tp_btf name).
pub const ATTACH: [(&str, &str); 6] = [
    ("on_accept", "kvm_apic_accept_irq"),
    ("on_entry", "kvm_entry"),
    ("on_exit", "kvm_exit"),
    ("on_switch", "sched_switch"),
    ("on_irq_entry", "irq_handler_entry"),
    ("on_irq_exit", "irq_handler_exit"),
];

/// The program's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Events the ring buffer had no room for.
    pub lost: u64,
    pub accepts: u64,
    pub entries: u64,
    pub unattributed: u64,
}

/// The loaded and attached program.
pub struct WaitTracer {
    bpf: aya::Ebpf,
    ring: aya::maps::RingBuf<aya::maps::MapData>,
    vms: Vec<u32>,
    irqs: Vec<u32>,
}

impl std::fmt::Debug for WaitTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitTracer")
            .field("vms", &self.vms)
            .finish()
    }
}

fn unavailable(msg: impl Into<String>) -> Unavailable {
    Unavailable(msg.into())
}

impl WaitTracer {
    /// Load the program and attach it to every tracepoint; the error names the step that
    /// failed (no kernel BTF, not root, KVM's tracepoints absent: KVM not built or loaded).
    pub fn open() -> Result<WaitTracer, Unavailable> {
        let btf = aya::Btf::from_sys_fs()
            .map_err(|e| unavailable(format!("kernel BTF (/sys/kernel/btf/vmlinux): {e}")))?;
        let mut bpf = aya::EbpfLoader::new()
            .btf(Some(&btf))
            .load(super::OBJECT)
            .map_err(|e| {
                let hint = if is_root() {
                    ""
                } else {
                    " (loading eBPF needs root, or CAP_BPF and CAP_PERFMON)"
                };
                unavailable(format!("loading the eBPF program: {}{hint}", chain(&e)))
            })?;
        for (prog, tp) in ATTACH {
            let hint = if tp.starts_with("kvm_") {
                " (is KVM built in or its module loaded? `modprobe kvm`)"
            } else {
                ""
            };
            attach_tp_btf(&mut bpf, &btf, prog, tp, hint)?;
        }
        let ring = aya::maps::RingBuf::try_from(
            bpf.take_map("events")
                .ok_or_else(|| unavailable("the object has no ring buffer `events`"))?,
        )
        .map_err(|e| unavailable(format!("ring buffer: {}", chain(&e))))?;
        Ok(WaitTracer {
            bpf,
            ring,
            vms: Vec::new(),
            irqs: Vec::new(),
        })
    }

    /// Tell the program which processes are VMs and which host IRQs are whose VFIO vectors.
    pub fn set_vms(
        &mut self,
        vms: &[VmProc],
        irq_owner: &BTreeMap<u32, u32>,
    ) -> Result<(), Unavailable> {
        let map_err = |what: &str, e: &dyn std::error::Error| {
            unavailable(format!("updating {what}: {}", chain(e)))
        };
        {
            let m = self
                .bpf
                .map_mut("vm_tgid")
                .ok_or_else(|| unavailable("no map vm_tgid"))?;
            let mut h = aya::maps::HashMap::<_, u32, u32>::try_from(m)
                .map_err(|e| map_err("vm_tgid", &e))?;
            for old in &self.vms {
                let _ = h.remove(old);
            }
            for v in vms {
                h.insert(v.pid, v.pid, 0)
                    .map_err(|e| map_err("vm_tgid", &e))?;
            }
        }
        {
            let m = self
                .bpf
                .map_mut("irq_vm")
                .ok_or_else(|| unavailable("no map irq_vm"))?;
            let mut h = aya::maps::HashMap::<_, u32, u32>::try_from(m)
                .map_err(|e| map_err("irq_vm", &e))?;
            for old in &self.irqs {
                let _ = h.remove(old);
            }
            for (irq, pid) in irq_owner {
                h.insert(irq, pid, 0).map_err(|e| map_err("irq_vm", &e))?;
            }
        }
        {
            let m = self
                .bpf
                .map_mut("only_vm")
                .ok_or_else(|| unavailable("no map only_vm"))?;
            let mut a =
                aya::maps::Array::<_, u32>::try_from(m).map_err(|e| map_err("only_vm", &e))?;
            let only = if vms.len() == 1 { vms[0].pid } else { 0 };
            a.set(0, only, 0).map_err(|e| map_err("only_vm", &e))?;
        }
        self.vms = vms.iter().map(|v| v.pid).collect();
        self.irqs = irq_owner.keys().copied().collect();
        Ok(())
    }

    /// Find the VMs running now (`only`: just that process) and tell the program which they
    /// are and which VFIO vectors are theirs; the VMs found.
    pub fn refresh(&mut self, only: Option<u32>) -> Result<Vec<VmProc>, Unavailable> {
        let vms: Vec<VmProc> = super::vms::scan(Path::new("/proc"), Path::new("/sys"))
            .into_iter()
            .filter(|v| only.is_none_or(|p| p == v.pid))
            .collect();
        let owners = std::fs::read_to_string("/proc/interrupts")
            .ok()
            .and_then(|t| topo::interrupts::parse_proc_interrupts(&t).ok())
            .map(|t| super::vms::irq_owners(&t, &vms))
            .unwrap_or_default();
        self.set_vms(&vms, &owners)?;
        Ok(vms)
    }

    /// Mark a vCPU raised (or not) by the booster: the program then pushes its thread's next
    /// sleep.
    pub fn set_boosted(&mut self, vm: u32, vcpu: u32, on: bool) -> Result<(), Unavailable> {
        let key = (u64::from(vm) << 32) | u64::from(vcpu);
        let m = self
            .bpf
            .map_mut("boosted")
            .ok_or_else(|| unavailable("no map boosted"))?;
        let mut h = aya::maps::HashMap::<_, u64, u8>::try_from(m)
            .map_err(|e| unavailable(format!("boosted: {}", chain(&e))))?;
        if on {
            h.insert(key, 1, 0)
                .map_err(|e| unavailable(format!("boosted: {}", chain(&e))))?;
        } else {
            let _ = h.remove(&key);
        }
        Ok(())
    }

    /// Wait up to `timeout` for events and hand each to `f`.
    pub fn poll(&mut self, timeout: Duration, mut f: impl FnMut(WaitEvent)) -> usize {
        let mut n = self.drain(&mut f);
        if n > 0 {
            return n;
        }
        wait_readable(self.ring.as_raw_fd(), timeout);
        n += self.drain(&mut f);
        n
    }

    fn drain(&mut self, f: &mut impl FnMut(WaitEvent)) -> usize {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            if let Some(e) = WaitEvent::parse(&item) {
                f(e);
                n += 1;
            }
        }
        n
    }

    /// The program's counters, summed over CPUs.
    pub fn counters(&self) -> Counters {
        let c: [u64; 4] = percpu_counters(&self.bpf, "counters");
        Counters {
            lost: c[0],
            accepts: c[1],
            entries: c[2],
            unattributed: c[3],
        }
    }
}

/// CLOCK_MONOTONIC now, ns: the clock of the program's `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}
