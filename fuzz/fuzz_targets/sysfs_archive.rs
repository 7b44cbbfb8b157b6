#![no_main]
//! Sysfs snapshot archives: any bytes, no panic; an error is one line naming the archive.
//!
//! Two modes. Input starting with `S` is a recipe (sysfs_recipe.rs): the fuzzer picks
//! sysfs/procfs paths from a dictionary (VFIO cdevs and nodes, a port and the function below
//! it with their PCIe link files included), entry types (file,
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
            check_links(&host);
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

/// A PCIe link figure read is a real one (positive, finite, a width of 1-32), never 0; only a
/// link below what it can do is downgraded, and never one a port shares with the function
/// below it; the path walk ends.
fn check_links(host: &topo::Host) {
    for d in &host.pci_devices {
        let Some(l) = &d.link else { continue };
        for s in [l.speed_gts, l.max_speed_gts, l.peer_max_speed_gts]
            .into_iter()
            .flatten()
        {
            assert!(s.is_finite() && s > 0.0, "{l:?}");
        }
        for w in [l.width, l.max_width, l.peer_max_width]
            .into_iter()
            .flatten()
        {
            assert!((1..=32).contains(&w), "{l:?}");
        }
        assert_eq!(
            l.downgraded,
            l.same_link_as.is_none() && (l.speed_below() || l.width_below()),
            "{l:?}"
        );
        assert!(!l.figures().contains('\n'));
        assert!(host.downgraded_links(&d.bdf).len() <= host.pci_devices.len());
    }
}
