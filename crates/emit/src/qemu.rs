//! QEMU command-line arguments for the plan.
//!
//! Pinning is not spelled here: QEMU has no option that pins vCPU threads. `vmtune apply
//! PLAN.json --qmp SOCKET` pins a running QEMU (it finds the vCPU threads through QMP
//! `query-cpus-fast`, and `-name …,debug-threads=on` names them `CPU n/KVM` for `/proc`).
//! Memory placement is spelled: every guest RAM region is a memory backend bound to the
//! plan's host nodes (`host-nodes=…,policy=bind`).
//!
//! No `-object iothread`: an iothread no device names does nothing. Give a disk one with
//! `-object iothread,id=io0 -device virtio-blk-pci,iothread=io0,…`, and `vmtune apply` pins it
//! to the plan's iothread CPUs.
//!
//! Choices: hugepages come from hugetlbfs (`/dev/hugepages` for 2 MiB, the systemd mount;
//! `/dev/hugepages1G` for 1 GiB, which must be mounted with `-o pagesize=1G`), preallocated
//! (VFIO pins all guest RAM at start anyway, so preallocating with threads is faster than
//! faulting it in one page at a time). No `-overcommit mem-lock=on`: VFIO pins the RAM
//! itself and hugetlbfs pages are never swapped (see the libvirt module for `<locked/>`).

use std::fmt::Write as _;

use plan::Plan;

use crate::features::{enlightenments, is_windows, plan_timers, vcpu_count};

/// Mount point of the hugetlbfs for a page size.
pub fn hugetlbfs_path(size_kb: u64) -> &'static str {
    if size_kb >= 1024 * 1024 {
        "/dev/hugepages1G"
    } else {
        "/dev/hugepages"
    }
}

fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

fn nodes(n: &[u32]) -> String {
    // `host-nodes` is a list property: a range is `host-nodes=0-1`, separate ranges repeat
    // the key (`host-nodes=0,host-nodes=2`), since `,` separates properties.
    let set: topo::CpuSet = n.iter().copied().collect();
    set.to_list_string()
        .split(',')
        .map(|r| format!("host-nodes={r}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Threads QEMU uses to preallocate a backend (bounded: more threads than memory channels do
/// not help).
fn prealloc_threads(vcpus: usize) -> usize {
    vcpus.clamp(1, 16)
}

fn backend(plan: &Plan, id: &str, bytes: u64, host_nodes: &[u32], vcpus: usize) -> String {
    let size_kb = plan.memory.hugepage_size_kb;
    let mut s = if size_kb > 4 {
        format!(
            "memory-backend-file,id={id},size={}M,mem-path={},prealloc=on,prealloc-threads={}",
            mib(bytes),
            hugetlbfs_path(size_kb),
            prealloc_threads(vcpus)
        )
    } else {
        format!("memory-backend-ram,id={id},size={}M", mib(bytes))
    };
    if !host_nodes.is_empty() {
        let _ = write!(s, ",{},policy=bind", nodes(host_nodes));
    }
    s
}

fn cpu_flags(plan: &Plan) -> String {
    let f = &plan.cpu_features;
    let mut s = String::from("host,migratable=off");
    if f.invtsc {
        s.push_str(",+invtsc");
    } else if f.invtsc_disabled {
        s.push_str(",-invtsc");
    }
    if f.hide_hypervisor {
        // the Windows 7 timer note: Windows 7 only uses the TSC when the hypervisor bit is clear
        s.push_str(",-hypervisor");
    }
    if f.kvm_hidden {
        s.push_str(",kvm=off");
    }
    let timers = plan_timers(plan);
    if timers.iter().any(|t| t.name == "kvmclock" && !t.present) {
        s.push_str(",kvmclock=off");
    }
    if timers.iter().any(|t| t.name == "hypervclock" && t.present) {
        // libvirt's hypervclock timer: the Hyper-V reference TSC page
        s.push_str(",hv-time=on");
    }
    if f.hyperv_passthrough {
        // every enlightenment the host supports; explicit ones below still apply
        s.push_str(",hv-passthrough=on");
    }
    let (hv, _unknown) = enlightenments(&f.hyperv);
    for e in &hv {
        match e.name {
            "spinlocks" => {
                let _ = write!(s, ",hv-spinlocks={:#x}", e.retries());
            }
            "vendor_id" => {
                let v: String = e
                    .vendor()
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .take(12)
                    .collect();
                let _ = write!(s, ",hv-vendor-id={v}");
            }
            n => {
                let _ = write!(s, ",{}=on", qemu_hv_name(n));
            }
        }
    }
    let (off, _) = enlightenments(&f.hyperv_off);
    for e in &off {
        let _ = write!(s, ",{}=off", qemu_hv_name(e.name));
    }
    s
}

/// QEMU's property for a libvirt enlightenment name (`tlbflush_extended` is `hv-tlbflush-ext`).
fn qemu_hv_name(name: &str) -> String {
    match name {
        "tlbflush_extended" => "hv-tlbflush-ext".into(),
        n => format!("hv-{}", n.replace('_', "-")),
    }
}

/// QEMU arguments (`-smp`, `-object memory-backend-*`, `-numa`, `-cpu`, ...) for the plan,
/// one argument per element (`["-smp", "12,sockets=1,…"]`), without the binary and without
/// disks, network or display, which are the user's.
pub fn args(plan: &Plan) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    let name = plan
        .request
        .name
        .as_deref()
        .unwrap_or("vmtune")
        .replace(',', ",,");
    push("-name", format!("guest={name},debug-threads=on"));

    let exposed = crate::guest_numa_exposed(plan);
    let windows = is_windows(plan);
    let timers = plan_timers(plan);
    let timer = |name: &str| timers.iter().find(|t| t.name == name);
    let mut machine = String::from("q35,accel=kvm");
    if !exposed {
        machine.push_str(",memory-backend=ram0");
    }
    if timer("hpet").is_some_and(|t| !t.present) {
        // HPET is emulated in QEMU userspace (Windows 7 timer note: emulated timers cost ~3.6 µs a read)
        machine.push_str(",hpet=off");
    }
    push("-machine", machine);
    push("-cpu", cpu_flags(plan));

    let n = vcpu_count(plan);
    let t = &plan.guest_topology;
    push(
        "-smp",
        format!(
            "{n},sockets={},dies={},cores={},threads={}",
            t.sockets.max(1),
            t.dies.max(1),
            t.cores.max(1),
            t.threads.max(1)
        ),
    );
    // -m and the backends in whole pages that sum exactly to it: QEMU refuses NUMA nodes
    // whose memory does not ("total memory for NUMA nodes should equal RAM size")
    let ram = crate::guest_ram(plan);
    push("-m", format!("{}M", mib(ram.total_bytes)));

    if exposed {
        for (c, &bytes) in plan.guest_numa.iter().zip(&ram.parts) {
            let id = format!("ram{}", c.cell);
            let host = if c.host_nodes.is_empty() {
                &plan.memory.host_nodes
            } else {
                &c.host_nodes
            };
            // a cell the plan gives no memory (its node had no room in whole pages) is a
            // memory-less node: QEMU takes a node without memdev, but no backend of size 0
            if bytes > 0 {
                push("-object", backend(plan, &id, bytes, host, c.vcpus.len()));
            }
            // non-contiguous vCPU lists need one `cpus=` per range
            let cpus: Vec<String> = c
                .vcpus
                .to_list_string()
                .split(',')
                .filter(|r| !r.is_empty())
                .map(|r| format!("cpus={r}"))
                .collect();
            let mut node = format!("node,nodeid={}", c.cell);
            for r in cpus {
                let _ = write!(node, ",{r}");
            }
            if bytes > 0 {
                let _ = write!(node, ",memdev={id}");
            }
            push("-numa", node);
        }
    } else {
        push(
            "-object",
            backend(plan, "ram0", ram.total_bytes, &plan.memory.host_nodes, n),
        );
    }

    let rtc_catchup = timer("rtc").and_then(|t| t.tickpolicy.as_deref()) == Some("catchup");
    if windows || rtc_catchup {
        let mut rtc = format!("base={}", if windows { "localtime" } else { "utc" });
        if rtc_catchup {
            rtc.push_str(",driftfix=slew");
        }
        push("-rtc", rtc);
    }
    if let Some(tp) = timer("pit").and_then(|t| t.tickpolicy.as_deref()) {
        if matches!(tp, "delay" | "discard") {
            push("-global", format!("kvm-pit.lost_tick_policy={tp}"));
        }
    }
    let expanders = crate::locality::expanders(plan);
    for e in &expanders {
        push(
            "-device",
            format!(
                "pxb-pcie,id=pxb{c},bus_nr={},numa_node={c},bus=pcie.0",
                e.bus_nr,
                c = e.cell
            ),
        );
        for p in &e.ports {
            push(
                "-device",
                format!(
                    "pcie-root-port,id=rp{ch},bus=pxb{},chassis={ch},addr={:x}.0",
                    e.cell,
                    p.slot,
                    ch = p.chassis
                ),
            );
            for (bdf, f) in &p.functions {
                let multi = if *f == 0 && p.functions.len() > 1 {
                    ",multifunction=on"
                } else {
                    ""
                };
                push(
                    "-device",
                    format!("{},bus=rp{},addr=0.{f}{multi}", vfio_device(bdf), p.chassis),
                );
            }
        }
    }
    for d in plan.devices.iter().filter(|d| d.guest_cell.is_none()) {
        push("-device", vfio_device(&d.bdf));
    }
    a
}

/// `vfio-pci` for a host device: `host=BDF`, or for a PCI domain above 0xffff (Intel VMD's
/// `10000:e1:00.0`), which QEMU's `host` property refuses (it takes four domain digits),
/// `sysfsdev=/sys/bus/pci/devices/BDF`.
fn vfio_device(bdf: &str) -> String {
    let domain_digits = bdf.rsplitn(3, ':').nth(2).map_or(0, str::len);
    if domain_digits > 4 {
        format!("vfio-pci,sysfsdev=/sys/bus/pci/devices/{bdf}")
    } else {
        format!("vfio-pci,host={bdf}")
    }
}

/// The arguments as one shell-quoted command line (for `vmtune plan --emit qemu`).
pub fn command_line(plan: &Plan) -> String {
    let mut s = String::from("qemu-system-x86_64");
    for (i, arg) in args(plan).iter().enumerate() {
        if arg.starts_with('-') && i > 0 {
            s.push_str(" \\\n  ");
        } else {
            s.push(' ');
        }
        s.push_str(&shell_quote(arg));
    }
    s.push('\n');
    s
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=,./:+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
