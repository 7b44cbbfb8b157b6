//! The host model: PUs, cores and SMT siblings, caches, dies, packages, CPU kinds, NUMA nodes
//! (memory, hugepages, distances), PCI devices and the interrupt table — and its loaders.
//!
//! ```text
//! live sysfs/procfs (any root) ─┐
//! sysfs snapshot dir / tarball ─┼─► RawTopology ──assemble()──► Host
//! hwloc XML v1 / v2 / v3 ───────┤
//! built-in example host ────────┘
//! ```
//!
//! This crate only reads: it never writes to the host.

pub mod builtin;
pub mod cpuset;
pub mod error;
pub mod hwloc;
pub mod interrupts;
pub mod model;
pub mod pcie;
pub mod sysfs;

use std::path::Path;

pub use cpuset::{CpuSet, CpuSetError};
pub use error::TopoError;
pub use model::*;

/// Load the host model from `path` (hwloc XML file, sysfs snapshot directory, or a
/// `.tar`/`.tar.gz`/`.tar.bz2` snapshot), or from the live host when `path` is `None`.
pub fn load(path: Option<&Path>) -> Result<Host, TopoError> {
    match path {
        None => {
            let mut host = sysfs::load_root(Path::new("/"))?;
            if host.arch.is_none() {
                // a kernel without /proc/sys/kernel/arch: the host runs this binary
                host.arch = Some(running_arch().to_string());
            }
            Ok(host)
        }
        Some(p) => load_path(p),
    }
}

/// The architecture this binary was built for, as `uname -m` spells it.
pub fn running_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86" => "i686",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc",
        "arm" => "armv7l",
        other => other,
    }
}

/// Load from a path, choosing the loader by what the path is.
pub fn load_path(path: &Path) -> Result<Host, TopoError> {
    let meta = std::fs::metadata(path).map_err(|e| TopoError::io(path, e))?;
    if meta.is_dir() {
        return sysfs::load_root(path);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let archive = [".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz"]
        .iter()
        .any(|ext| name.ends_with(ext));
    if archive {
        return sysfs::load_archive(path);
    }
    hwloc::load_file(path)
}
