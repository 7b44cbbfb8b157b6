//! Each run checks itself: what the guest sees (its own sysfs, read by `topo` like any host)
//! against what its layout tells it (the scratch domain's `<vcpu>`, `<topology>`, NUMA cells
//! and passed-through devices). A run whose guest does not match measured something else
//! than its layout: it is invalid, named, and kept out of the comparison.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use topo::{CpuSet, Host};

/// What a layout tells its guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expect {
    /// vCPUs online at boot.
    pub vcpus: u32,
    /// `sockets, dies, cores, threads`; `None`: libvirt's default (a socket per vCPU).
    pub topology: Option<[u32; 4]>,
    /// Guest NUMA cells; empty: one node.
    pub cells: Vec<ExpectCell>,
    /// Passed-through devices and the guest cell each should sit in.
    #[serde(default)]
    pub devices: Vec<ExpectDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectCell {
    pub id: u32,
    pub vcpus: CpuSet,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectDevice {
    /// Host address (the guest's differs).
    pub bdf: String,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    /// The guest NUMA node the layout puts it in (`None`: not said).
    pub cell: Option<u32>,
}

/// The guest's view in one line: CPUs, topology, nodes with their CPUs and memory,
/// hugepages, GPUs and their nodes.
pub fn describe(v: &Host) -> String {
    let threads = v.cores.iter().map(|c| c.pus.len()).max().unwrap_or(0);
    let mut s = format!(
        "{} CPU(s): {} socket(s) × {} core(s) × {} thread(s)",
        v.pus.len(),
        v.packages.len().max(1),
        v.cores.len() / v.packages.len().max(1),
        threads
    );
    let nodes: Vec<String> = v
        .numa_nodes
        .iter()
        .map(|n| {
            let mem = n
                .memory_bytes
                .map(|b| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64))
                .unwrap_or_else(|| "memory not said".into());
            format!("node {}: CPUs {} ({mem})", n.os_index, list(&n.cpus))
        })
        .collect();
    let _ = write!(s, "; {}", nodes.join(", "));
    let pages: Vec<String> = v
        .numa_nodes
        .iter()
        .flat_map(|n| &n.hugepages)
        .filter(|h| h.total.unwrap_or(0) > 0)
        .map(|h| {
            let free = h
                .free
                .map_or("free not said".into(), |f| format!("{f} free"));
            format!("{} × {} KiB ({free})", h.total.unwrap_or(0), h.size_kb)
        })
        .collect();
    if !pages.is_empty() {
        let _ = write!(s, "; hugepages {}", pages.join(", "));
    }
    let gpus: Vec<String> = v
        .pci_devices
        .iter()
        .filter(|d| d.class >> 8 == 0x03)
        .map(|d| {
            let node = d
                .numa
                .as_ref()
                .and_then(|n| n.first())
                .map_or("no node".to_string(), |n| format!("node {n}"));
            format!("{} {}", ids(d.vendor_id, d.device_id), node)
        })
        .collect();
    if !gpus.is_empty() {
        let _ = write!(s, "; display devices {}", gpus.join(", "));
    }
    s
}

fn list(c: &CpuSet) -> String {
    if c.is_empty() {
        "none".into()
    } else {
        c.to_list_string()
    }
}

fn ids(v: Option<u16>, d: Option<u16>) -> String {
    match (v, d) {
        (Some(v), Some(d)) => format!("{v:04x}:{d:04x}"),
        _ => "?".into(),
    }
}

/// Where the guest's view differs from `e`, one sentence each; empty: it matches.
pub fn check(e: &Expect, v: &Host) -> Vec<String> {
    let mut bad = Vec::new();
    let online = v.pus.len() as u32;
    if online != e.vcpus {
        bad.push(format!(
            "the guest has {online} CPU(s) online, the layout gives it {}",
            e.vcpus
        ));
    }
    let [sockets, dies, cores, threads] = e.topology.unwrap_or([e.vcpus, 1, 1, 1]);
    let seen_threads = v
        .cores
        .iter()
        .map(|c| c.pus.len() as u32)
        .max()
        .unwrap_or(0);
    if online == e.vcpus && seen_threads != threads {
        bad.push(format!(
            "the guest sees {seen_threads} thread(s) per core, the layout says {threads}"
        ));
    }
    let seen_sockets = v.packages.len().max(1) as u32;
    if online == e.vcpus && seen_sockets != sockets {
        bad.push(format!(
            "the guest sees {seen_sockets} socket(s), the layout says {sockets}"
        ));
    }
    let seen_cores = v.cores.len() as u32;
    if online == e.vcpus && seen_cores != sockets * dies * cores {
        bad.push(format!(
            "the guest sees {seen_cores} core(s), the layout says {}",
            sockets * dies * cores
        ));
    }
    check_nodes(e, v, &mut bad);
    check_devices(e, v, &mut bad);
    bad
}

/// The guest's nodes with CPUs: one per cell, each with the cell's vCPUs and (within what
/// the kernel keeps for itself) its memory.
fn check_nodes(e: &Expect, v: &Host, bad: &mut Vec<String>) {
    let with_cpus: Vec<_> = v.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).collect();
    let want = e.cells.len().max(1);
    if with_cpus.len() != want {
        bad.push(format!(
            "the guest sees {} NUMA node(s) with CPUs, the layout gives it {want}",
            with_cpus.len()
        ));
        return;
    }
    for c in &e.cells {
        let Some(n) = v.numa_nodes.iter().find(|n| n.os_index == c.id) else {
            bad.push(format!("the guest has no node {}", c.id));
            continue;
        };
        if n.cpus != c.vcpus {
            bad.push(format!(
                "guest node {} has CPUs {}, the layout's cell {} has vCPUs {}",
                c.id,
                list(&n.cpus),
                c.id,
                list(&c.vcpus)
            ));
        }
        if let Some(m) = n.memory_bytes {
            // the kernel's own reservations come off a node's total; a quarter is generous
            let low = c.memory_bytes / 4 * 3;
            if m > c.memory_bytes || m < low {
                bad.push(format!(
                    "guest node {} has {:.2} GiB, the layout's cell {} has {:.2} GiB",
                    c.id,
                    m as f64 / (1u64 << 30) as f64,
                    c.id,
                    c.memory_bytes as f64 / (1u64 << 30) as f64
                ));
            }
        }
    }
}

/// Each passed-through device is in the guest, on the node its layout puts it on.
fn check_devices(e: &Expect, v: &Host, bad: &mut Vec<String>) {
    for d in &e.devices {
        let (Some(vendor), Some(device)) = (d.vendor_id, d.device_id) else {
            continue;
        };
        let seen: Vec<_> = v
            .pci_devices
            .iter()
            .filter(|g| g.vendor_id == Some(vendor) && g.device_id == Some(device))
            .collect();
        if seen.is_empty() {
            bad.push(format!(
                "{} ({}) is not in the guest",
                d.bdf,
                ids(d.vendor_id, d.device_id)
            ));
            continue;
        }
        if let Some(cell) = d.cell {
            let on = |g: &&topo::PciDevice| g.numa.as_ref().and_then(|n| n.first()) == Some(&cell);
            if !seen.iter().any(on) {
                let nodes: Vec<String> = seen
                    .iter()
                    .map(|g| {
                        g.numa
                            .as_ref()
                            .and_then(|n| n.first())
                            .map_or("none".into(), |n| n.to_string())
                    })
                    .collect();
                bad.push(format!(
                    "{} ({}) sits on guest node {}, the layout puts it on {cell}",
                    d.bdf,
                    ids(d.vendor_id, d.device_id),
                    nodes.join(",")
                ));
            }
        }
    }
}

/// The shell script that snapshots a Linux guest's topology for `topo` (the files its
/// sysfs reader reads: CPUs, caches, nodes, hugepages, PCI functions and the bridges above
/// them, /proc's cpuinfo and meminfo) and prints it as a base64 `.tar.gz` on one line.
/// POSIX sh with coreutils, tar and gzip: what any Linux guest has.
pub const GATHER: &str = r#"set -u
S=$(mktemp -d) || exit 1
cp1() { [ -f "$1" ] && [ -r "$1" ] || return 0; mkdir -p "$S${1%/*}" && { cat "$1" > "$S$1" 2>/dev/null || rm -f "$S$1"; }; }
ln1() { [ -L "$1" ] || return 0; mkdir -p "$S${1%/*}" && ln -sfn "$(readlink "$1")" "$S$1"; }
for f in /sys/devices/system/cpu/online /sys/devices/system/cpu/possible /sys/devices/system/cpu/present \
  /sys/devices/system/cpu/cpu[0-9]*/online /sys/devices/system/cpu/cpu[0-9]*/topology/* \
  /sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/* \
  /sys/devices/system/node/online /sys/devices/system/node/possible /sys/devices/system/node/has_* \
  /sys/devices/system/node/node[0-9]*/cpulist /sys/devices/system/node/node[0-9]*/cpumap \
  /sys/devices/system/node/node[0-9]*/meminfo /sys/devices/system/node/node[0-9]*/distance \
  /sys/devices/system/node/node[0-9]*/hugepages/*/* /sys/kernel/mm/hugepages/*/* \
  /proc/cpuinfo /proc/meminfo /proc/sys/kernel/hostname /proc/sys/kernel/arch; do cp1 "$f"; done
for d in /sys/bus/pci/devices/*; do
  [ -L "$d" ] || continue
  ln1 "$d"
  r=$(readlink -f "$d")
  while :; do
    case "${r##*/}" in [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:*) ;; *) break ;; esac
    for f in class vendor device subsystem_vendor subsystem_device config numa_node local_cpulist irq resource current_link_speed current_link_width max_link_speed max_link_width; do cp1 "$r/$f"; done
    ln1 "$r/driver"; ln1 "$r/iommu_group"
    r=${r%/*}
  done
done
tar -C "$S" -czf - sys proc | base64 | tr -d '\n'
rc=$?
rm -rf "$S"
exit $rc
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        // one socket × eight cores × two threads, one node (15.5 GiB seen), a GTX 1080 Ti
        let mut h = topo::builtin::default_host();
        h.numa_nodes[0].memory_bytes = Some(31 << 29);
        h
    }

    fn expect(h: &Host) -> Expect {
        Expect {
            vcpus: h.pus.len() as u32,
            topology: Some([
                h.packages.len() as u32,
                1,
                (h.cores.len() / h.packages.len()) as u32,
                2,
            ]),
            cells: h
                .numa_nodes
                .iter()
                .map(|n| ExpectCell {
                    id: n.os_index,
                    vcpus: n.cpus.clone(),
                    memory_bytes: 16 << 30,
                })
                .collect(),
            devices: Vec::new(),
        }
    }

    #[test]
    fn a_matching_view_passes_and_each_difference_is_named() {
        let h = host();
        let e = expect(&h);
        assert_eq!(check(&e, &h), Vec::<String>::new(), "{}", describe(&h));
        // one cell and none are the same guest: one node
        let mut one_node = e.clone();
        one_node.cells.clear();
        assert_eq!(check(&one_node, &h), Vec::<String>::new());
        let mut two = e.clone();
        two.cells.push(ExpectCell {
            id: 1,
            vcpus: [15].into_iter().collect(),
            memory_bytes: 1 << 30,
        });
        let bad = check(&two, &h);
        assert!(bad.iter().any(|b| b.contains("NUMA node(s)")), "{bad:?}");
        let mut no_smt = e.clone();
        no_smt.topology = Some([1, 1, 16, 1]);
        let bad = check(&no_smt, &h);
        assert!(
            bad.iter().any(|b| b.contains("thread(s) per core")),
            "{bad:?}"
        );
        let mut more = e.clone();
        more.vcpus += 2;
        assert!(check(&more, &h)[0].contains("CPU(s) online"));
        let mut big = e.clone();
        big.cells[0].memory_bytes *= 4;
        assert!(check(&big, &h).iter().any(|b| b.contains("GiB")));
        let mut gpu = e;
        gpu.devices.push(ExpectDevice {
            bdf: "0000:01:00.0".into(),
            vendor_id: Some(0x10de),
            device_id: Some(0x1b06),
            cell: None,
        });
        assert_eq!(check(&gpu, &h), Vec::<String>::new());
        gpu.devices.push(ExpectDevice {
            bdf: "0000:41:00.0".into(),
            vendor_id: Some(0x10de),
            device_id: Some(0x2684),
            cell: Some(1),
        });
        assert!(check(&gpu, &h)[0].contains("not in the guest"));
    }
}
