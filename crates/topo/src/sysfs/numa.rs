//! NUMA nodes from `/sys/devices/system/node`: CPUs, memory, hugepages, distances, and what
//! kind of memory a CPU-less node holds.
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
use crate::model::{Distances, HugePages, MemoryKind, NumaNode};

use super::cpu::{read_set, read_u64};
use super::fs::Fs;

pub const NODE_DIR: &str = "sys/devices/system/node";

/// Nodes and distances; empty when the kernel has no NUMA directory.
pub fn read_nodes(fs: &Fs) -> Result<(Vec<NumaNode>, Option<Distances>), TopoError> {
    let Some(names) = fs.list(NODE_DIR) else {
        return Ok((Vec::new(), None));
    };
    let online_file = format!("{NODE_DIR}/online");
    let ids: Vec<u32> = match fs.read(&online_file) {
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
    };

    let gpu_nodes = nvidia_gpu_nodes(fs);
    let nvm_nodes = dax_nvm_nodes(fs);
    let mut nodes = Vec::with_capacity(ids.len());
    let mut rows: Vec<Option<Vec<u32>>> = Vec::with_capacity(ids.len());
    for &id in &ids {
        let d = format!("{NODE_DIR}/node{id}");
        if !fs.is_dir(&d) {
            return Err(fs.error(&d, format!("missing, but {online_file} lists node {id}")));
        }
        let cpus =
            read_set(fs, &format!("{d}/cpulist"), &format!("{d}/cpumap"))?.unwrap_or_default();
        let (total, free) = fs
            .read(&format!("{d}/meminfo"))
            .map(|m| parse_node_meminfo(&m))
            .unwrap_or((None, None));
        let hugepages = read_hugepages(fs, &d);
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
    mark_hbm(fs, &mut nodes);

    // each node's distance row lists every online node, in os_index order
    let distances = if !rows.is_empty()
        && rows
            .iter()
            .all(|r| r.as_ref().is_some_and(|r| r.len() == ids.len()))
    {
        Some(Distances {
            nodes: ids.clone(),
            matrix: rows.into_iter().flatten().collect(),
        })
    } else {
        None
    };
    Ok((nodes, distances))
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

fn read_hugepages(fs: &Fs, node_dir: &str) -> Vec<HugePages> {
    let dir = format!("{node_dir}/hugepages");
    let Some(names) = fs.list(&dir) else {
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
