//! Live sysfs/procfs loader under a configurable root, and sysfs snapshot archives.
//!
//! ```text
//! root/sys/devices/system/cpu   online PUs, cores, packages, dies, caches, CPU kinds   (cpu.rs, kinds.rs)
//! root/sys/devices/system/node  NUMA nodes, memory, hugepages, distances, memory kind  (numa.rs)
//!                               (none: one node inferred from /proc/meminfo,
//!                               /sys/kernel/mm/hugepages)
//! root/sys/bus/pci/devices      PCI functions, locality, IOMMU group, driver, BARs,    (pci.rs)
//!                               VFIO cdev (vfio-dev/vfioN)
//! root/sys/class/{misc,vfio}    VFIO nodes: /dev/vfio/vfio, /dev/iommu, /dev/vfio/GROUP (vfio.rs)
//! root/proc                     cpuinfo, hostname, interrupts + affinities            (procfs.rs)
//! ```
//!
//! The root is `/` for the live host, or a snapshot: a directory, or a `.tar`/`.tar.gz`/
//! `.tar.bz2` archive read into memory (archive.rs). Snapshots usually keep the tree under a
//! top directory; the root is the directory that holds `sys/`. Symlinks are resolved inside
//! the root (fs.rs). Optional files that are missing give `None`; a missing required file
//! (no CPU directory, an online CPU without topology) is an error naming the file.

mod archive;
mod cpu;
mod fs;
mod kinds;
mod numa;
mod pci;
mod procfs;
mod vfio;

use std::path::{Path, PathBuf};

use crate::error::TopoError;
use crate::model::{Host, RawTopology};

pub use archive::{MAX_ENTRIES, MAX_ENTRY_BYTES, MAX_UNPACKED_BYTES};
pub use procfs::{parse_cpuinfo, CpuInfoProc};

use fs::Fs;

/// Read the host under `root` (`/` for the live host, or an extracted snapshot: either its
/// root or a directory with exactly one snapshot root below it).
pub fn load_root(root: &Path) -> Result<Host, TopoError> {
    let meta = std::fs::metadata(root).map_err(|e| TopoError::io(root, e))?;
    if !meta.is_dir() {
        return Err(TopoError::format(root, "not a directory"));
    }
    let root = find_dir_root(root)?;
    load(&Fs::dir(&root))
}

/// Read a `.tar`, `.tar.gz` or `.tar.bz2` sysfs snapshot (compression is recognized by its
/// magic bytes, not the name).
pub fn load_archive(path: &Path) -> Result<Host, TopoError> {
    let tree = archive::read_file(path)?;
    load_tree(tree, path)
}

/// Read a snapshot archive held in memory; `name` names it in errors and `Host::source`.
/// The fuzz target's entry point.
pub fn load_archive_bytes(bytes: &[u8], name: &Path) -> Result<Host, TopoError> {
    let tree = archive::read_bytes(bytes, name)?;
    load_tree(tree, name)
}

fn load_tree(tree: fs::MemTree, name: &Path) -> Result<Host, TopoError> {
    let roots = tree.dirs_containing_sys(3);
    let Some(first) = roots.first() else {
        return Err(TopoError::format(
            name,
            "no sys/ directory in the archive (not a sysfs snapshot)",
        ));
    };
    let depth = |d: &str| d.split('/').filter(|c| !c.is_empty()).count();
    if let Some(second) = roots.get(1).filter(|s| depth(s) == depth(first)) {
        return Err(TopoError::format(
            name,
            format!("two snapshot roots ({first}/ and {second}/) in one archive"),
        ));
    }
    let prefix = first.clone();
    load(&Fs::mem(tree, prefix, name))
}

/// `root` itself when it has `sys/`; else the one directory up to two levels below that has
/// it (an extracted archive's top directory); else `root` (and the loader reports what is
/// missing).
fn find_dir_root(root: &Path) -> Result<PathBuf, TopoError> {
    if root.join("sys").is_dir() {
        return Ok(root.to_path_buf());
    }
    let mut found: Vec<PathBuf> = Vec::new();
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    for level1 in subdirs(root) {
        if level1.join("sys").is_dir() {
            found.push(level1);
            continue;
        }
        for level2 in subdirs(&level1) {
            if level2.join("sys").is_dir() {
                found.push(level2);
            }
        }
    }
    match found.len() {
        0 => Ok(root.to_path_buf()),
        1 => Ok(found.swap_remove(0)),
        _ => {
            found.sort();
            Err(TopoError::format(
                root,
                format!(
                    "several snapshot roots below it ({} and {})",
                    found[0].display(),
                    found[1].display()
                ),
            ))
        }
    }
}

/// Read everything under one root and assemble the host.
fn load(fs: &Fs) -> Result<Host, TopoError> {
    let cpuinfo = fs
        .read("proc/cpuinfo")
        .map(|t| procfs::parse_cpuinfo(&t))
        .unwrap_or_default();
    let cpus = cpu::read_cpus(fs, &cpuinfo)?;
    let numa = numa::read_nodes(fs, &cpus.pus)?;
    let mut pci_devices = pci::read_devices(fs, &cpus.pus, &numa.nodes);
    numa.follow_devices(&mut pci_devices);
    let interrupts = procfs::interrupts(fs)?;
    let clocksource = fs.read("sys/devices/system/clocksource/clocksource0/available_clocksource");
    let raw = RawTopology {
        source: fs.source_name(),
        name: procfs::hostname(fs),
        pus: cpus.pus,
        cores: cpus.cores,
        packages: cpus.packages,
        dies: cpus.dies,
        caches: cpus.caches,
        groups: Vec::new(),
        cpu_kinds: cpus.kinds,
        numa_nodes: numa.nodes,
        distances: numa.distances,
        pci_devices,
        interrupts,
        tsc_stable: procfs::tsc_stable(&cpuinfo, clocksource.as_deref()),
        vfio: vfio::read_nodes(fs),
        arch: procfs::arch(fs),
        numa_inferred: numa.inferred,
        notes: cpus.notes.into_iter().chain(numa.notes).collect(),
    };
    raw.assemble()
}
