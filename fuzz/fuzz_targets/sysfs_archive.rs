#![no_main]
//! Sysfs snapshot archives: any bytes, no panic; an error is one line naming the archive.
//!
//! Two modes. Input starting with `S` is a recipe (sysfs_recipe.rs): the fuzzer picks
//! sysfs/procfs paths from a dictionary (VFIO cdevs and nodes included), entry types (file,
//! symlink, directory) and contents, and the target writes them as a ustar archive — so the
//! loader's parsers and link resolution see real trees. Any other input goes to the archive
//! reader as is (compression sniffing, tar framing, limits).
//! Seed the corpus with the snapshots in shared/topologies/sysfs/.

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "sysfs_recipe.rs"]
mod sysfs_recipe;
use sysfs_recipe::recipe;

fuzz_target!(|data: &[u8]| {
    let name = Path::new("fuzz.tar");
    let bytes = match data.split_first() {
        Some((b'S', rest)) => recipe(rest),
        _ => data.to_vec(),
    };
    match topo::sysfs::load_archive_bytes(&bytes, name) {
        Ok(host) => {
            // the model is internally consistent
            assert!(!host.pus.is_empty());
            for p in &host.pus {
                assert!(host.cores[p.core as usize].pus.contains(p.os_index));
            }
            check_numa(&host);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fuzz.tar"), "{msg}");
            assert!(!msg.contains('\n'), "{msg:?}");
        }
    }
});

/// Every PU a NUMA node lists is a PU of the host, and in no other node (repeated cpulists
/// are repaired); a host without a node directory has its one inferred node; each note is
/// one line.
fn check_numa(host: &topo::Host) {
    let all = host.all_cpus();
    let mut seen = topo::CpuSet::new();
    for n in &host.numa_nodes {
        assert!(n.cpus.is_subset(&all));
        assert!(!n.cpus.intersects(&seen), "{:?}", host.numa_nodes);
        seen = seen.union(&n.cpus);
    }
    assert!(!host.numa_nodes.is_empty());
    if host.numa_inferred {
        assert_eq!(host.numa_nodes.len(), 1);
        assert_eq!(host.numa_nodes[0].cpus, all);
    }
    for note in &host.notes {
        assert!(!note.contains('\n'), "{note:?}");
    }
}
