//! NUMA nodes from `/sys/devices/system/node`: CPUs, memory, hugepages, distances, and what
//! kind of memory a CPU-less node holds. A kernel without NUMA support has no such directory:
//! its one node is inferred, as hwloc infers it (node 0, every PU, `/proc/meminfo`).
//! Firmware that lists a CPU in several nodes is repaired: the lowest node keeps it, a node
//! left without CPUs of its own is dropped (see [`drop_repeated_cpus`]).
//!
//! A CPU-less node is flagged as
//! - `Gpu` when an NVIDIA driver's `/proc/driver/nvidia/gpus/<bdf>/numa_status` names it
//!   (`Node: N`) — how hwloc recognizes GPU memory nodes (POWER9+V100 NVLink, Grace Hopper;
//!   hwloc gives them subtype `GPUMemory`, or hides them on POWER);
//! - `Nvm` when a kmem DAX device onlines it from an NVDIMM region (`ndbus` in its sysfs path)
//!   or a CXL region — hwloc's `DAXType=NVM` and `CXLDevice`;
//! - `Hbm` when the kernel's HMAT attributes (`access0/initiators/read_bandwidth`) give it at
//!   least twice the bandwidth of every node with CPUs (Xeon Max flat mode, KNL MCDRAM);
//! - `Unknown` otherwise.

use std::collections::BTreeSet;

use crate::cpuset::CpuSet;
use crate::error::TopoError;
use crate::model::{Distances, HugePages, MemoryKind, NumaNode, PciDevice};

use super::cpu::{read_set, read_u64};
use super::fs::Fs;

pub const NODE_DIR: &str = "sys/devices/system/node";

/// What the loader makes of the NUMA directory.
#[derive(Debug, Default)]
pub struct NumaTopo {
    pub nodes: Vec<NumaNode>,
    pub distances: Option<Distances>,
    /// No node was listed (a kernel without NUMA support): `nodes` is the one node inferred.
    pub inferred: bool,
    /// Nodes dropped for listing only CPUs of lower nodes, each with the node that holds
    /// the first of its CPUs: devices the kernel puts on a dropped node are on that one.
    pub merged: Vec<(u32, u32)>,
    /// What was inferred or dropped, in words, for [`crate::model::Host::notes`].
    pub notes: Vec<String>,
}

impl NumaTopo {
    /// The node that stands for `id`: itself, or the node a dropped duplicate merged into.
    pub fn follow(&self, id: u32) -> u32 {
        self.merged
            .iter()
            .find(|(dropped, _)| *dropped == id)
            .map_or(id, |&(_, kept)| kept)
    }

    /// Point devices the kernel put on a dropped node at the node that kept its CPUs.
    pub fn follow_devices(&self, devices: &mut [PciDevice]) {
        if self.merged.is_empty() {
            return;
        }
        for d in devices {
            if let Some(v) = d.numa.as_mut() {
                for id in v.iter_mut() {
                    *id = self.follow(*id);
                }
                v.sort_unstable();
                v.dedup();
            }
        }
    }
}

/// Nodes and distances. A kernel without NUMA support has no node directory (and a trimmed
/// snapshot may have an empty one): then, as hwloc does, one node 0 holding every PU in
/// `pus`, with `/proc/meminfo`'s memory and the hugepages of `/sys/kernel/mm/hugepages`.
pub fn read_nodes(fs: &Fs, pus: &CpuSet) -> Result<NumaTopo, TopoError> {
    let ids = match fs.list(NODE_DIR) {
        Some(names) => node_ids(fs, &names)?,
        None => Vec::new(),
    };
    if ids.is_empty() {
        return Ok(inferred_node(fs, pus));
    }

    let gpu_nodes = nvidia_gpu_nodes(fs);
    let nvm_nodes = dax_nvm_nodes(fs);
    let mut nodes = Vec::with_capacity(ids.len());
    let mut rows: Vec<Option<Vec<u32>>> = Vec::with_capacity(ids.len());
    for &id in &ids {
        let d = format!("{NODE_DIR}/node{id}");
        if !fs.is_dir(&d) {
            return Err(fs.error(
                &d,
                format!("missing, but {NODE_DIR}/online lists node {id}"),
            ));
        }
        let cpus =
            read_set(fs, &format!("{d}/cpulist"), &format!("{d}/cpumap"))?.unwrap_or_default();
        let (total, free) = fs
            .read(&format!("{d}/meminfo"))
            .map(|m| parse_node_meminfo(&m))
            .unwrap_or((None, None));
        let hugepages = read_hugepages(fs, &format!("{d}/hugepages"));
        let memory_kind = if !cpus.is_empty() {
            MemoryKind::Dram
        } else if gpu_nodes.contains(&id) {
            MemoryKind::Gpu
        } else if nvm_nodes.contains(&id) {
            MemoryKind::Nvm
        } else {
            MemoryKind::Unknown
        };
        rows.push(fs.read(&format!("{d}/distance")).and_then(|s| {
            s.split_whitespace()
                .map(|t| t.parse::<u32>().ok())
                .collect::<Option<Vec<u32>>>()
        }));
        nodes.push(NumaNode {
            os_index: id,
            cpus,
            memory_bytes: total,
            hugepages,
            memory_kind,
            free_bytes: free,
        });
    }
    let mut notes = Vec::new();
    let (mut nodes, merged) = drop_repeated_cpus(nodes, pus, &mut notes);
    mark_hbm(fs, &mut nodes);

    // each node's distance row lists every online node, in os_index order; the rows and
    // columns of dropped nodes go
    let distances = if !rows.is_empty()
        && rows
            .iter()
            .all(|r| r.as_ref().is_some_and(|r| r.len() == ids.len()))
    {
        let keep: Vec<usize> = (0..ids.len())
            .filter(|&i| nodes.iter().any(|n| n.os_index == ids[i]))
            .collect();
        let matrix = rows
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(i, _)| keep.contains(i))
            .map(|(_, row)| keep.iter().map(|&j| row[j]).collect())
            .collect();
        Some(Distances {
            nodes: keep.iter().map(|&i| ids[i]).collect(),
            matrix,
        })
    } else {
        None
    };
    Ok(NumaTopo {
        nodes,
        distances,
        inferred: false,
        merged,
        notes,
    })
}

/// Firmware tables (SRAT) that give several nodes the same CPUs: a PU must sit in one node,
/// and the memory of a repeated node is counted twice. In `os_index` order, a node keeps
/// the online CPUs no lower node has taken; a node with CPUs left with none of its own (the
/// same cpulist as a lower node, or only CPUs of lower nodes) is dropped, with its memory.
/// A node that never listed an online CPU (memory-only, CPU-less) is no repeat and stays.
fn drop_repeated_cpus(
    nodes: Vec<NumaNode>,
    pus: &CpuSet,
    notes: &mut Vec<String>,
) -> (Vec<NumaNode>, Vec<(u32, u32)>) {
    let mut kept: Vec<NumaNode> = Vec::with_capacity(nodes.len());
    let mut merged = Vec::new();
    let mut claimed = CpuSet::new();
    for mut n in nodes {
        let cpus = n.cpus.intersection(pus);
        if !cpus.intersects(&claimed) {
            claimed = claimed.union(&cpus);
            kept.push(n);
            continue;
        }
        let shared = cpus.intersection(&claimed);
        let owners: Vec<u32> = kept
            .iter()
            .filter(|k| k.cpus.intersects(&shared))
            .map(|k| k.os_index)
            .collect();
        let owner_of_first = kept
            .iter()
            .find(|k| cpus.first().is_some_and(|c| k.cpus.contains(c)))
            .map_or(n.os_index, |k| k.os_index);
        if let Some(same) = kept.iter().find(|k| k.cpus.intersection(pus) == cpus) {
            notes.push(format!(
                "NUMA node {} lists the same CPUs ({cpus}) as node {} (a firmware table error): node {} dropped with its memory, node {} kept",
                n.os_index, same.os_index, n.os_index, same.os_index
            ));
            merged.push((n.os_index, same.os_index));
        } else if shared == cpus {
            notes.push(format!(
                "NUMA node {} lists only CPUs ({cpus}) of NUMA nodes {} (a firmware table error): node {} dropped with its memory",
                n.os_index,
                join_ids(&owners),
                n.os_index
            ));
            merged.push((n.os_index, owner_of_first));
        } else {
            notes.push(format!(
                "CPUs {shared} are listed by NUMA nodes {} and {} (a firmware table error): kept in node {} only",
                join_ids(&owners),
                n.os_index,
                join_ids(&owners)
            ));
            n.cpus = n.cpus.difference(&shared);
            claimed = claimed.union(&cpus);
            kept.push(n);
        }
    }
    (kept, merged)
}

/// `0`, `0, 1`.
fn join_ids(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The online nodes: `online`, else every `nodeN` directory.
fn node_ids(fs: &Fs, names: &[String]) -> Result<Vec<u32>, TopoError> {
    let online_file = format!("{NODE_DIR}/online");
    Ok(match fs.read(&online_file) {
        Some(s) => CpuSet::parse_list(&s)
            .map_err(|e| fs.error(&online_file, e))?
            .to_vec(),
        None => {
            let set: BTreeSet<u32> = names
                .iter()
                .filter_map(|n| n.strip_prefix("node")?.parse().ok())
                .collect();
            set.into_iter().collect()
        }
    })
}

/// hwloc's node for a kernel without NUMA: node 0, every PU, the machine's memory.
fn inferred_node(fs: &Fs, pus: &CpuSet) -> NumaTopo {
    let meminfo = fs
        .read("proc/meminfo")
        .map(|t| parse_meminfo(&t))
        .unwrap_or_default();
    let mut hugepages = read_hugepages(fs, "sys/kernel/mm/hugepages");
    if hugepages.is_empty() {
        if let Some(size_kb) = meminfo.hugepage_kb.filter(|&s| s > 0) {
            hugepages.push(HugePages {
                size_kb,
                total: meminfo.hugepages_total,
                free: meminfo.hugepages_free,
            });
        }
    }
    let memory = match meminfo.total {
        Some(_) => "proc/meminfo's MemTotal",
        None => "unknown memory (no MemTotal in proc/meminfo)",
    };
    NumaTopo {
        nodes: vec![NumaNode {
            os_index: 0,
            cpus: pus.clone(),
            memory_bytes: meminfo.total,
            hugepages,
            memory_kind: MemoryKind::Dram,
            free_bytes: meminfo.free,
        }],
        distances: None,
        inferred: true,
        merged: Vec::new(),
        notes: vec![format!(
            "no NUMA nodes in {NODE_DIR} (a kernel without NUMA support): NUMA node 0 inferred with every PU ({pus}) and {memory}, as hwloc does"
        )],
    }
}

/// What the loader takes from `/proc/meminfo`, in bytes (hugepage counts in pages).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Meminfo {
    pub total: Option<u64>,
    pub free: Option<u64>,
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepage_kb: Option<u64>,
}

/// `/proc/meminfo`: `MemTotal:  948304 kB`, `HugePages_Total:  16`, `Hugepagesize: 2048 kB`.
/// Lines that do not parse are skipped; a value that overflows is unknown.
pub fn parse_meminfo(text: &str) -> Meminfo {
    let mut m = Meminfo::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let Some(value) = it.next().and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        let bytes = match it.next() {
            Some("kB") => value.checked_mul(1024),
            None => Some(value),
            Some(_) => None,
        };
        match key.trim() {
            "MemTotal" => m.total = bytes,
            "MemFree" => m.free = bytes,
            "HugePages_Total" => m.hugepages_total = Some(value),
            "HugePages_Free" => m.hugepages_free = Some(value),
            "Hugepagesize" => m.hugepage_kb = bytes.map(|b| b / 1024),
            _ => {}
        }
    }
    m
}

/// `Node 0 MemTotal:  16769836 kB` and `MemFree` → bytes.
pub fn parse_node_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let mut total = None;
    let mut free = None;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("Node") {
            continue;
        }
        let _node = it.next();
        let key = it.next();
        let value = it.next().and_then(|v| v.parse::<u64>().ok());
        let unit = it.next();
        let bytes = match (value, unit) {
            (Some(v), Some("kB")) => v.checked_mul(1024),
            (Some(v), None) => Some(v),
            _ => None,
        };
        match key {
            Some("MemTotal:") => total = bytes,
            Some("MemFree:") => free = bytes,
            _ => {}
        }
    }
    (total, free)
}

/// `hugepages-2048kB/{nr,free}_hugepages` under `dir` (a node's, or the machine's
/// `/sys/kernel/mm/hugepages`).
fn read_hugepages(fs: &Fs, dir: &str) -> Vec<HugePages> {
    let Some(names) = fs.list(dir) else {
        return Vec::new();
    };
    names
        .iter()
        .filter_map(|n| {
            let size_kb = n
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            Some(HugePages {
                size_kb,
                total: read_u64(fs, &format!("{dir}/{n}/nr_hugepages")),
                free: read_u64(fs, &format!("{dir}/{n}/free_hugepages")),
            })
        })
        .collect()
}

/// Nodes that NVIDIA GPUs' memory was onlined into (`numa_status`: `Node: 255`).
fn nvidia_gpu_nodes(fs: &Fs) -> BTreeSet<u32> {
    let base = "proc/driver/nvidia/gpus";
    fs.list(base)
        .unwrap_or_default()
        .iter()
        .filter_map(|bdf| fs.read(&format!("{base}/{bdf}/numa_status")))
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.trim().strip_prefix("Node:"))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .and_then(|n| u32::try_from(n).ok())
        })
        .collect()
}

/// Target nodes of kmem DAX devices backed by NVDIMM (`ndbus`) or CXL regions.
fn dax_nvm_nodes(fs: &Fs) -> BTreeSet<u32> {
    let base = "sys/bus/dax/devices";
    let mut out = BTreeSet::new();
    for dax in fs.list(base).unwrap_or_default() {
        if !fs.exists(&format!("sys/bus/dax/drivers/kmem/{dax}")) {
            continue;
        }
        let Some(node) = fs
            .read(&format!("{base}/{dax}/target_node"))
            .and_then(|s| s.trim().parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok())
        else {
            continue;
        };
        let path = fs.resolve(&format!("{base}/{dax}")).unwrap_or_default();
        if path.contains("/ndbus") || path.contains("ACPI0017") || path.contains("/cxl") {
            out.insert(node);
        }
    }
    out
}

/// CPU-less nodes of unknown kind with at least twice the HMAT read bandwidth of every node
/// with CPUs are high-bandwidth memory.
fn mark_hbm(fs: &Fs, nodes: &mut [NumaNode]) {
    let bw = |id: u32| {
        read_u64(
            fs,
            &format!("{NODE_DIR}/node{id}/access0/initiators/read_bandwidth"),
        )
        .filter(|&b| b > 0)
    };
    let dram: Vec<Option<u64>> = nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| bw(n.os_index))
        .collect();
    let Some(best_dram) = dram
        .iter()
        .copied()
        .collect::<Option<Vec<u64>>>()
        .and_then(|v| v.into_iter().max())
    else {
        return;
    };
    for n in nodes
        .iter_mut()
        .filter(|n| n.memory_kind == MemoryKind::Unknown)
    {
        if bw(n.os_index).is_some_and(|b| b >= best_dram.saturating_mul(2)) {
            n.memory_kind = MemoryKind::Hbm;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_meminfo() {
        let m = parse_meminfo(
            "MemTotal:        4030388 kB\nMemFree:         3512044 kB\nHugePages_Total:      16\nHugePages_Free:       12\nHugepagesize:       1024 kB\nDirectMap4k: junk\n",
        );
        assert_eq!(
            m,
            Meminfo {
                total: Some(4_030_388 * 1024),
                free: Some(3_512_044 * 1024),
                hugepages_total: Some(16),
                hugepages_free: Some(12),
                hugepage_kb: Some(1024),
            }
        );
        assert_eq!(parse_meminfo("garbage\n:\nMemTotal:\n"), Meminfo::default());
        assert_eq!(
            parse_meminfo("MemTotal: 99999999999999999999 kB\nMemFree: 18446744073709551615 kB"),
            Meminfo::default()
        );
    }

    #[test]
    fn meminfo() {
        let m = "Node 0 MemTotal:       16769836 kB\nNode 0 MemFree:        15000000 kB\nNode 0 MemUsed: 1 kB\n";
        assert_eq!(
            parse_node_meminfo(m),
            (Some(16769836 * 1024), Some(15000000 * 1024))
        );
        assert_eq!(parse_node_meminfo("garbage"), (None, None));
        assert_eq!(
            parse_node_meminfo("Node 0 MemTotal: 99999999999999999999 kB"),
            (None, None)
        );
    }
}
