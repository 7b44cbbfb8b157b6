//! The exact preemption signal of a KVM guest: an eBPF reader of every vCPU's
//! `kvm_steal_time.preempted` flag (`bpf/preempt.bpf.c`), loaded with `aya` from the object
//! checked in beside it (rebuilt by `bpf/build.sh`), so that building vmtune needs neither
//! clang nor libbpf.
//!
//! [`PreemptReader::open`] checks each precondition and says which one fails:
//! an x86 KVM guest whose host offers steal time (CPUID), the kernel's BTF with the per-CPU
//! offsets of `steal_time` and `runqueues`, the program loading and attaching (root), every
//! CPU's address learnt, and each CPU's steal clock read through it agreeing with
//! `/proc/stat`. Any failure is an [`Unavailable`] with the reason; the daemon then falls back
//! to `/proc/stat` steal sampling and says why.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::procstat::{parse_proc_stat, NS_PER_TICK};

/// The compiled program (see `bpf/build.sh`).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/preempt.bpf.o");

/// The clang that built [`OBJECT`] and the other checked-in objects (`bpf/clang.version`).
pub const OBJECT_CLANG: &str = include_str!("../bpf/clang.version");

/// The program's `MAX_CPUS`.
pub const MAX_CPUS: u32 = 1024;

/// Why the eBPF signal cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

fn unavailable(msg: impl Into<String>) -> Unavailable {
    Unavailable(msg.into())
}

/// One change of a vCPU's preempted flag, as the program saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PreemptEvent {
    /// CLOCK_MONOTONIC ns when a running vCPU saw the change.
    pub ts_ns: u64,
    /// The vCPU's steal clock then (KVM updates it when the vCPU enters the guest).
    pub steal_ns: u64,
    /// The vCPU's last guest event before: a preemption began after it.
    pub last_event_ns: u64,
    /// For a resume: the steal clock when the preemption was seen.
    pub steal_at_preempt_ns: u64,
    pub cpu: u32,
    /// The vCPU that saw it (the vCPU itself for its own resume).
    pub observer: u32,
    pub preempted: bool,
}

/// Size of `struct event` in the program.
pub const EVENT_SIZE: usize = 48;

impl PreemptEvent {
    /// Decode the program's `struct event` (little-endian, 48 bytes).
    pub fn parse(b: &[u8]) -> Option<PreemptEvent> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let u64_at = |o: usize| {
            b.get(o..o + 8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let u32_at = |o: usize| {
            b.get(o..o + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
        };
        Some(PreemptEvent {
            ts_ns: u64_at(0)?,
            steal_ns: u64_at(8)?,
            last_event_ns: u64_at(16)?,
            steal_at_preempt_ns: u64_at(24)?,
            cpu: u32_at(32)?,
            observer: u32_at(36)?,
            preempted: u32_at(40)? != 0,
        })
    }

    /// For a resume event: the estimated start of the preemption that just ended (the steal
    /// the episode added, counted back from when the vCPU was seen running again).
    pub fn episode_start_ns(&self) -> Option<u64> {
        (!self.preempted).then(|| {
            self.ts_ns
                .saturating_sub(self.steal_ns.saturating_sub(self.steal_at_preempt_ns))
        })
    }
}

/// The program's per-CPU record (`struct vcpu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct VcpuRaw {
    st_addr: u64,
    last_event: u64,
    steal: u64,
    steal_at_preempt: u64,
    preempted: u32,
    pad: u32,
}

// SAFETY: `VcpuRaw` is `#[repr(C)]`, made only of integers, with no padding (4 × u64 +
// 2 × u32 = 40 bytes, 8-aligned), matching `struct vcpu` in preempt.bpf.c; any bit pattern is
// a valid value.
unsafe impl aya::Pod for VcpuRaw {}

/// The program's per-CPU wake-up record (`struct wake`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct WakeRaw {
    steal_at_idle: u64,
    idle: u64,
    count: u64,
    wait_ns: u64,
    wait_sq_us2: u64,
}

// SAFETY: `WakeRaw` is `#[repr(C)]`, five u64 (40 bytes, no padding), matching `struct wake`
// in preempt.bpf.c; any bit pattern is a valid value.
unsafe impl aya::Pod for WakeRaw {}

/// One CPU's exits from idle and the steal they waited for the host, cumulative since the
/// program was loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WakeCounters {
    pub cpu: u32,
    pub wakes: u64,
    pub wait_ns: u64,
    pub wait_sq_us2: u64,
}

/// Offsets of the per-CPU variables inside `.data..percpu`, from the kernel's BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PercpuOffsets {
    pub steal_time: u32,
    pub runqueues: u32,
}

impl PercpuOffsets {
    /// `&steal_time - &runqueues` within one CPU's per-CPU area.
    pub fn st_minus_rq(&self) -> i64 {
        self.steal_time as i64 - self.runqueues as i64
    }
}

/// Read the offsets of `steal_time` and `runqueues` from a BTF file (normally
/// `/sys/kernel/btf/vmlinux`).
pub fn percpu_offsets(path: &std::path::Path) -> Result<PercpuOffsets, Unavailable> {
    // mapped, not parsed whole: only a few types are looked up
    let btf = btf_rs::Btf::from_file_with_backend(path, btf_rs::Backend::Mmap).map_err(|e| {
        unavailable(format!(
            "{}: kernel BTF unreadable ({e}); the kernel needs CONFIG_DEBUG_INFO_BTF",
            path.display()
        ))
    })?;
    offsets_in(&btf, &path.display().to_string())
}

/// [`percpu_offsets`] of raw BTF bytes.
pub fn percpu_offsets_from_bytes(bytes: &[u8]) -> Result<PercpuOffsets, Unavailable> {
    let btf =
        btf_rs::Btf::from_bytes(bytes).map_err(|e| unavailable(format!("BTF unreadable ({e})")))?;
    offsets_in(&btf, "BTF")
}

fn offsets_in(btf: &btf_rs::Btf, origin: &str) -> Result<PercpuOffsets, Unavailable> {
    use btf_rs::{BtfType, Type};
    let secs = btf.resolve_types_by_name(".data..percpu").map_err(|_| {
        unavailable(format!(
            "{origin}: no .data..percpu section in the kernel's BTF"
        ))
    })?;
    let (mut st, mut rq) = (None, None);
    for sec in secs {
        let Type::Datasec(ds) = sec else { continue };
        for v in &ds.variables {
            let Some(id) = v.get_type_id() else { continue };
            let Ok(Type::Var(var)) = btf.resolve_type_by_id(id) else {
                continue;
            };
            match btf.resolve_name(&var).as_deref() {
                Ok("steal_time") => st = Some((v.offset(), v.size())),
                Ok("runqueues") => rq = Some(v.offset()),
                _ => {}
            }
        }
    }
    let (st, size) = st.ok_or_else(|| {
        unavailable(
            "the kernel has no per-CPU steal_time (not built as a KVM guest: CONFIG_KVM_GUEST)",
        )
    })?;
    if size < 17 {
        return Err(unavailable(format!(
            "steal_time is {size} bytes, too small for struct kvm_steal_time"
        )));
    }
    let rq = rq.ok_or_else(|| unavailable("no per-CPU runqueues in the kernel's BTF"))?;
    Ok(PercpuOffsets {
        steal_time: st,
        runqueues: rq,
    })
}

/// Is this an x86 KVM guest whose host offers steal time (and so the preempted flag)?
pub fn kvm_steal_time_offered() -> Result<(), Unavailable> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // leaf 1 ECX bit 31: running under a hypervisor
        #[allow(unused_unsafe)]
        // SAFETY: CPUID is available on every x86_64 CPU; it reads identification registers.
        let l1 = unsafe { __cpuid(1) };
        if l1.ecx & (1 << 31) == 0 {
            return Err(unavailable(
                "not a virtual machine (CPUID hypervisor bit clear)",
            ));
        }
        #[allow(unused_unsafe)]
        // SAFETY: as above; leaf 0x40000000 is the hypervisor's signature leaf.
        let sig = unsafe { __cpuid(0x4000_0000) };
        let mut name = Vec::with_capacity(12);
        for r in [sig.ebx, sig.ecx, sig.edx] {
            name.extend_from_slice(&r.to_le_bytes());
        }
        if &name[..] != b"KVMKVMKVM\0\0\0" {
            return Err(unavailable(format!(
                "the hypervisor is not KVM (CPUID signature {:?})",
                String::from_utf8_lossy(&name).trim_end_matches('\0')
            )));
        }
        #[allow(unused_unsafe)]
        // SAFETY: as above; leaf 0x40000001 lists KVM's paravirtual features.
        let feat = unsafe { __cpuid(0x4000_0001) };
        const KVM_FEATURE_STEAL_TIME: u32 = 5;
        if feat.eax & (1 << KVM_FEATURE_STEAL_TIME) == 0 {
            return Err(unavailable(
                "the KVM host does not offer steal time (KVM_FEATURE_STEAL_TIME), so no preempted flag",
            ));
        }
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Err(unavailable(
            "the preempted-flag reader supports x86_64 KVM guests only",
        ))
    }
}

/// CLOCK_MONOTONIC in ns, the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Program counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub scans: u64,
    pub events: u64,
    pub ring_full: u64,
    pub addresses_learnt: u64,
    pub read_errors: u64,
}

/// What [`PreemptReader::open`] checked, per CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuCheck {
    pub cpu: u32,
    /// The steal clock read through the learnt address, ns.
    pub steal_ns: u64,
    /// `/proc/stat` steal for the CPU, ns.
    pub proc_stat_steal_ns: u64,
}

/// The loaded and attached program.
pub struct PreemptReader {
    bpf: aya::Ebpf,
    ring: aya::maps::RingBuf<aya::maps::MapData>,
    pub cpus: Vec<u32>,
    pub offsets: PercpuOffsets,
    pub checks: Vec<CpuCheck>,
    pub scan_gap: Duration,
    /// Why the wake-up counters (`tp_btf/cpu_idle`) are not available, if they are not; the
    /// preemption signal works without them.
    pub wakes_unavailable: Option<String>,
}

impl std::fmt::Debug for PreemptReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreemptReader")
            .field("cpus", &self.cpus)
            .field("offsets", &self.offsets)
            .finish()
    }
}

fn online_cpus() -> Result<Vec<u32>, Unavailable> {
    let text = std::fs::read_to_string("/proc/stat")
        .map_err(|e| unavailable(format!("/proc/stat: {e}")))?;
    let st = parse_proc_stat(&text).map_err(|e| unavailable(format!("/proc/stat: {e}")))?;
    Ok(st.cpus.iter().map(|(c, _)| *c).collect())
}

fn proc_stat_steal_ns() -> Vec<(u32, u64)> {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse_proc_stat(&t).ok())
        .map(|st| {
            st.cpus
                .iter()
                .map(|(c, t)| (*c, t.steal.unwrap_or(0).saturating_mul(NS_PER_TICK)))
                .collect()
        })
        .unwrap_or_default()
}

/// Make every CPU in `cpus` context-switch now (a short-lived thread pinned to each), so the
/// program learns each CPU's address without waiting for it to switch on its own.
fn touch_cpus(cpus: &[u32]) {
    let handles: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            std::thread::spawn(move || {
                // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
                // sched_setaffinity(0, ..) affects only this thread.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu as usize, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                for _ in 0..3 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

impl PreemptReader {
    /// Check the preconditions, load and attach the program, learn and check every CPU's
    /// `steal_time` address. `scan_gap` is the least time between two scans of the other
    /// vCPUs by one vCPU.
    pub fn open(scan_gap: Duration) -> Result<PreemptReader, Unavailable> {
        kvm_steal_time_offered()?;
        let offsets = percpu_offsets(std::path::Path::new("/sys/kernel/btf/vmlinux"))?;
        let cpus = online_cpus()?;
        let nr = cpus.iter().max().map_or(0, |m| m + 1);
        if nr == 0 || nr > MAX_CPUS {
            return Err(unavailable(format!(
                "{nr} CPUs: the program handles 1..={MAX_CPUS}"
            )));
        }
        let btf = aya::Btf::from_sys_fs().map_err(|e| unavailable(format!("kernel BTF: {e}")))?;
        let delta = offsets.st_minus_rq();
        let gap = scan_gap.as_nanos().min(u64::MAX as u128) as u64;
        let mut bpf = aya::EbpfLoader::new()
            .btf(Some(&btf))
            .set_global("st_minus_rq", &delta, true)
            .set_global("nr_cpus", &nr, true)
            .set_global("scan_gap_ns", &gap, true)
            .load(OBJECT)
            .map_err(|e| {
                let hint = if matches!(
                    std::io::Error::last_os_error().raw_os_error(),
                    Some(libc::EPERM)
                ) || !is_root()
                {
                    " (loading eBPF needs root, or CAP_BPF and CAP_PERFMON)"
                } else {
                    ""
                };
                unavailable(format!("loading the eBPF program: {}{hint}", chain(&e)))
            })?;
        for (prog, tp) in [
            ("on_switch", "sched_switch"),
            ("on_tick", "local_timer_entry"),
        ] {
            attach_tp_btf(&mut bpf, &btf, prog, tp, "")?;
        }
        // the wake-up counters are a refinement: the signal works without them
        let wakes_unavailable = attach_tp_btf(&mut bpf, &btf, "on_idle", "cpu_idle", "")
            .err()
            .map(|e| e.0);
        let ring = aya::maps::RingBuf::try_from(
            bpf.take_map("events")
                .ok_or_else(|| unavailable("the object has no ring buffer `events`"))?,
        )
        .map_err(|e| unavailable(format!("ring buffer: {}", chain(&e))))?;
        let mut reader = PreemptReader {
            bpf,
            ring,
            cpus: cpus.clone(),
            offsets,
            checks: Vec::new(),
            scan_gap,
            wakes_unavailable,
        };
        // learn every CPU's address, then check the steal read through it
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            touch_cpus(&cpus);
            let missing: Vec<u32> = cpus
                .iter()
                .copied()
                .filter(|&c| reader.vcpu(c).is_none_or(|v| v.st_addr == 0))
                .collect();
            if missing.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(unavailable(format!(
                    "the run queue of CPU(s) {missing:?} was never seen (task->se.cfs_rq->rq)"
                )));
            }
        }
        touch_cpus(&cpus);
        let proc = proc_stat_steal_ns();
        for &c in &cpus {
            let v = reader.vcpu(c).unwrap_or_default();
            let p = proc.iter().find(|(pc, _)| *pc == c).map_or(0, |(_, s)| *s);
            // /proc/stat accounts steal at the CPU's ticks, so it may trail the clock by the
            // steal since that CPU's last tick; an address that is wrong reads garbage
            let tol = 100_000_000 + p / 10;
            if v.steal.abs_diff(p) > tol {
                return Err(unavailable(format!(
                    "CPU {c}: the steal clock read at the computed steal_time address ({} ms) \
                     disagrees with /proc/stat ({} ms); not trusting the address",
                    v.steal / 1_000_000,
                    p / 1_000_000
                )));
            }
            reader.checks.push(CpuCheck {
                cpu: c,
                steal_ns: v.steal,
                proc_stat_steal_ns: p,
            });
        }
        Ok(reader)
    }

    fn vcpu(&self, cpu: u32) -> Option<VcpuRaw> {
        let m = self.bpf.map("vcpus")?;
        let a = aya::maps::Array::<_, VcpuRaw>::try_from(m).ok()?;
        a.get(&cpu, 0).ok()
    }

    /// Each CPU's wake-up counters (`None` when `tp_btf/cpu_idle` could not be attached).
    pub fn wakes(&self) -> Option<Vec<WakeCounters>> {
        if self.wakes_unavailable.is_some() {
            return None;
        }
        let m = self.bpf.map("wakes")?;
        let a = aya::maps::Array::<_, WakeRaw>::try_from(m).ok()?;
        Some(
            self.cpus
                .iter()
                .filter_map(|&cpu| {
                    let w = a.get(&cpu, 0).ok()?;
                    Some(WakeCounters {
                        cpu,
                        wakes: w.count,
                        wait_ns: w.wait_ns,
                        wait_sq_us2: w.wait_sq_us2,
                    })
                })
                .collect(),
        )
    }

    /// The program's counters, summed over CPUs.
    pub fn counters(&self) -> Counters {
        let c: [u64; 5] = percpu_counters(&self.bpf, "counters");
        Counters {
            scans: c[0],
            events: c[1],
            ring_full: c[2],
            addresses_learnt: c[3],
            read_errors: c[4],
        }
    }

    /// Wait up to `timeout` for events; return those queued (possibly none).
    pub fn poll(&mut self, timeout: Duration) -> Vec<PreemptEvent> {
        let mut out = self.drain();
        if !out.is_empty() {
            return out;
        }
        wait_readable(self.ring.as_raw_fd(), timeout);
        out = self.drain();
        out
    }

    fn drain(&mut self) -> Vec<PreemptEvent> {
        let mut out = Vec::new();
        while let Some(item) = self.ring.next() {
            if let Some(e) = PreemptEvent::parse(&item) {
                out.push(e);
            }
        }
        out
    }
}

/// Load program `prog` of `bpf` at `tp_btf/{tp}` and attach it; `hint` is added to a load
/// failure (what to check on this host).
pub(crate) fn attach_tp_btf(
    bpf: &mut aya::Ebpf,
    btf: &aya::Btf,
    prog: &str,
    tp: &str,
    hint: &str,
) -> Result<(), Unavailable> {
    let p: &mut aya::programs::BtfTracePoint = bpf
        .program_mut(prog)
        .ok_or_else(|| unavailable(format!("the object has no program {prog}")))?
        .try_into()
        .map_err(|e| unavailable(format!("{prog}: {}", chain(&e))))?;
    p.load(tp, btf).map_err(|e| {
        unavailable(format!(
            "loading {prog} at tp_btf/{tp}: {}{hint}",
            chain(&e)
        ))
    })?;
    p.attach()
        .map_err(|e| unavailable(format!("attaching tp_btf/{tp}: {}", chain(&e))))?;
    Ok(())
}

/// Block until `fd` (a ring buffer) is readable or `timeout` passes.
pub(crate) fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let _ = unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// A per-CPU array map of `N` counters, each summed over CPUs (zeros where unreadable).
pub(crate) fn percpu_counters<const N: usize>(bpf: &aya::Ebpf, name: &str) -> [u64; N] {
    let mut c = [0u64; N];
    if let Some(a) = bpf
        .map(name)
        .and_then(|m| aya::maps::PerCpuArray::<_, u64>::try_from(m).ok())
    {
        for (k, slot) in c.iter_mut().enumerate() {
            if let Ok(vals) = a.get(&(k as u32), 0) {
                *slot = vals.iter().sum();
            }
        }
    }
    c
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_decode_little_endian() {
        let mut b = Vec::new();
        for v in [10u64, 20, 5, 12] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [3u32, 1, 0, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let e = PreemptEvent::parse(&b).unwrap();
        assert_eq!(
            (e.ts_ns, e.steal_ns, e.last_event_ns, e.cpu, e.observer),
            (10, 20, 5, 3, 1)
        );
        assert!(!e.preempted);
        // a resume 8 ns of steal after it was seen preempted: began at 10 - 8
        assert_eq!(e.episode_start_ns(), Some(2));
        assert!(PreemptEvent::parse(&b[..40]).is_none());
    }

    /// Raw BTF with an INT, the given VARs in one DATASEC `.data..percpu`: (name, offset,
    /// size), in the layout of the kernel's `struct btf_header`, `btf_type`, `btf_var_secinfo`.
    pub(crate) fn percpu_btf(vars: &[(&str, u32, u32)]) -> Vec<u8> {
        let mut strs = vec![0u8];
        let mut name = |n: &str| {
            let off = strs.len() as u32;
            strs.extend_from_slice(n.as_bytes());
            strs.push(0);
            off
        };
        let mut types: Vec<u8> = Vec::new();
        let put = |t: &mut Vec<u8>, words: &[u32]| {
            for w in words {
                t.extend_from_slice(&w.to_le_bytes());
            }
        };
        // [1] INT "u8" size 1, 8 bits
        let n = name("u8");
        put(&mut types, &[n, 1 << 24, 1, 8]);
        // [2..] VAR name -> type 1, linkage global (1)
        for (vname, _, _) in vars {
            let n = name(vname);
            put(&mut types, &[n, 14 << 24, 1, 1]);
        }
        // DATASEC
        let n = name(".data..percpu");
        let size = vars.iter().map(|v| v.1 + v.2).max().unwrap_or(0);
        put(&mut types, &[n, (15 << 24) | vars.len() as u32, size]);
        for (i, (_, off, sz)) in vars.iter().enumerate() {
            put(&mut types, &[2 + i as u32, *off, *sz]);
        }
        let mut b = Vec::new();
        b.extend_from_slice(&0xeb9fu16.to_le_bytes());
        b.push(1); // version
        b.push(0); // flags
        b.extend_from_slice(&24u32.to_le_bytes()); // hdr_len
        b.extend_from_slice(&0u32.to_le_bytes()); // type_off
        b.extend_from_slice(&(types.len() as u32).to_le_bytes());
        b.extend_from_slice(&(types.len() as u32).to_le_bytes()); // str_off
        b.extend_from_slice(&(strs.len() as u32).to_le_bytes());
        b.extend_from_slice(&types);
        b.extend_from_slice(&strs);
        b
    }

    #[test]
    fn offsets_come_from_the_percpu_datasec() {
        let b = percpu_btf(&[
            ("this_cpu_off", 86056, 8),
            ("steal_time", 97280, 64),
            ("runqueues", 178752, 3584),
        ]);
        let o = percpu_offsets_from_bytes(&b).unwrap();
        assert_eq!(
            (o.steal_time, o.runqueues, o.st_minus_rq()),
            (97280, 178752, -81472)
        );
        // a kernel that is not a KVM guest, or a section without runqueues, says so
        let e = percpu_offsets_from_bytes(&percpu_btf(&[("runqueues", 0, 3584)])).unwrap_err();
        assert!(e.0.contains("CONFIG_KVM_GUEST"), "{e}");
        let e = percpu_offsets_from_bytes(&percpu_btf(&[("steal_time", 64, 64)])).unwrap_err();
        assert!(e.0.contains("runqueues"), "{e}");
        let e =
            percpu_offsets_from_bytes(&percpu_btf(&[("steal_time", 0, 8), ("runqueues", 64, 8)]))
                .unwrap_err();
        assert!(e.0.contains("too small"), "{e}");
        assert!(percpu_offsets_from_bytes(b"not btf").is_err());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn live_kernel_btf_has_the_offsets_where_it_is_a_kvm_guest() {
        let p = std::path::Path::new("/sys/kernel/btf/vmlinux");
        if !p.exists() {
            testkit::skip(&testkit::current_test(), "no kernel BTF on this machine");
            return;
        }
        match percpu_offsets(p) {
            Ok(o) => assert_ne!(o.steal_time, o.runqueues),
            Err(e) => assert!(
                kvm_steal_time_offered().is_err(),
                "a KVM guest with steal time whose BTF lacks the offsets: {e}"
            ),
        }
    }

    proptest::proptest! {
        #[test]
        fn generated_btf_offsets_are_recovered(
            st in 0u32..1_000_000, rq in 0u32..1_000_000, others in 0usize..20,
        ) {
            let mut vars: Vec<(String, u32, u32)> =
                (0..others).map(|i| (format!("pcpu_var_{i}"), i as u32 * 64, 8)).collect();
            vars.insert(others / 2, ("steal_time".into(), st, 64));
            vars.push(("runqueues".into(), rq, 3584));
            let refs: Vec<(&str, u32, u32)> = vars.iter().map(|(n, o, s)| (n.as_str(), *o, *s)).collect();
            let o = percpu_offsets_from_bytes(&percpu_btf(&refs)).unwrap();
            proptest::prop_assert_eq!((o.steal_time, o.runqueues), (st, rq));
            proptest::prop_assert_eq!(o.st_minus_rq(), st as i64 - rq as i64);
        }

        #[test]
        fn event_parse_never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            if let Some(e) = PreemptEvent::parse(&b) {
                proptest::prop_assert!(b.len() >= EVENT_SIZE);
                let _ = e.episode_start_ns();
            }
        }
    }

    #[test]
    fn object_is_an_ebpf_elf_with_its_programs_and_maps() {
        // parse only (no kernel needed): the checked-in object is what the loader expects
        let obj = aya_obj::Object::parse(OBJECT).unwrap();
        for p in ["on_switch", "on_tick", "on_idle"] {
            assert!(obj.programs.contains_key(p), "{p}");
        }
        for m in [
            "vcpus",
            "wakes",
            "last_scan",
            "counters",
            "events",
            ".rodata",
        ] {
            assert!(
                obj.maps.keys().any(|k| k == m),
                "{m}: {:?}",
                obj.maps.keys()
            );
        }
        assert!(OBJECT_CLANG.starts_with("Debian clang") || OBJECT_CLANG.contains("clang"));
    }
}
