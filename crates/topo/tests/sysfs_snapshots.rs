//! The sysfs loader on the four real snapshots in `shared/topologies/sysfs/` (hwloc's test
//! snapshots), checked against what SOURCES.txt and the files themselves say, and against
//! hwloc's own XML export of two of them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use topo::{CpuSet, DeviceKind, Host, MemoryKind};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies")
        .join(rel)
}

fn snapshot(name: &str) -> Host {
    let p = shared(&format!("sysfs/{name}.tar.bz2"));
    topo::sysfs::load_archive(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn l3_sets(h: &Host) -> BTreeSet<String> {
    h.caches_at(3).map(|c| c.cpus.to_list_string()).collect()
}

fn core_sets(h: &Host) -> BTreeSet<String> {
    h.cores.iter().map(|c| c.pus.to_list_string()).collect()
}

#[test]
fn amd_opteron_4_sockets_8_nodes() {
    let h = snapshot("64amd64-4s2n4ca2co");
    assert_eq!(h.pus.len(), 64);
    // Bulldozer compute units: thread_siblings pairs with distinct core_ids are two cores
    assert_eq!(h.cores.len(), 64);
    assert!(h.cores.iter().all(|c| c.pus.len() == 1));
    assert_eq!(h.packages.len(), 4);
    assert_eq!(h.packages[2].cpus, set("32-47"));
    assert_eq!(
        h.packages[0].model.as_deref(),
        Some("AMD Opteron(TM) Processor 6276")
    );
    assert_eq!(h.numa_nodes.len(), 8);
    for n in &h.numa_nodes {
        let first = n.os_index * 8;
        assert_eq!(
            n.cpus,
            CpuSet::range(first, first + 8),
            "node {}",
            n.os_index
        );
        assert_eq!(n.memory_kind, MemoryKind::Dram);
        assert_eq!(n.hugepages.len(), 1);
        assert_eq!(n.hugepages[0].size_kb, 2048);
    }
    // node5 has half the memory of the others (8388608 kB in its meminfo)
    assert_eq!(h.numa_node(5).unwrap().memory_bytes, Some(8_388_608 * 1024));
    // one 6 MiB L3 per node, a 2 MiB L2 per compute unit (two cores)
    assert_eq!(h.caches_at(3).count(), 8);
    assert!(h.caches_at(3).all(|c| c.size_bytes == Some(6 << 20)));
    assert_eq!(h.caches_at(2).count(), 32);
    assert!(h.caches_at(2).all(|c| c.cpus.len() == 2));
    assert_eq!(h.pu(9).unwrap().l3, Some(1));
    assert_eq!(h.pu(9).unwrap().numa, Some(1));
    assert_eq!(h.distance(0, 1), Some(16));
    assert_eq!(h.distance(0, 3), Some(22));
    assert_eq!(h.distance(5, 5), Some(10));
    assert!(h.cpu_kinds.is_empty());
    assert!(h.pci_devices.is_empty());
    assert_eq!(h.tsc_stable, Some(true));
}

#[test]
fn hybrid_laptop_two_kinds() {
    let h = snapshot("20em64t-hybrid-1p6c2t+2ca4co1t");
    assert_eq!(h.pus.len(), 20);
    assert_eq!(h.cores.len(), 14);
    assert_eq!(h.cores.iter().filter(|c| c.pus.len() == 2).count(), 6);
    assert_eq!(h.packages.len(), 1);
    assert_eq!(
        h.packages[0].model.as_deref(),
        Some("13th Gen Intel(R) Core(TM) i7-1370P")
    );
    assert_eq!(h.numa_nodes.len(), 1);
    assert_eq!(l3_sets(&h), BTreeSet::from(["0-19".to_string()]));
    assert_eq!(h.caches_at(3).next().unwrap().size_bytes, Some(24 << 20));
    // 6 P-core L2s and 2 E-core cluster L2s (4 cores each)
    assert_eq!(h.caches_at(2).count(), 8);
    assert!(h.caches_at(2).any(|c| c.cpus == set("12-15")));
    // kinds from cpuinfo_max_freq / base_frequency (no cpu_core/cpu_atom PMU dirs here)
    assert_eq!(h.cpu_kinds.len(), 2);
    let p = &h.cpu_kinds[0];
    assert_eq!(
        (p.label.as_str(), p.cpus.clone(), p.max_freq_mhz),
        ("performance", set("0-11"), Some(5000))
    );
    let e = &h.cpu_kinds[1];
    assert_eq!(
        (e.label.as_str(), e.cpus.clone(), e.max_freq_mhz),
        ("efficiency", set("12-19"), Some(3900))
    );
    assert_eq!(h.pu(11).unwrap().kind.as_deref(), Some("performance"));
    assert_eq!(h.pu(12).unwrap().kind.as_deref(), Some("efficiency"));
    assert_eq!(h.name.as_deref(), Some("vesubie"));
}

#[test]
fn dual_xeon_with_eight_vector_engines_on_node0() {
    let h = snapshot("32intel64-2p8co2t+8ve");
    assert_eq!(h.pus.len(), 32);
    assert_eq!(h.cores.len(), 16);
    // SMT siblings are N and N+16
    for c in &h.cores {
        let first = c.pus.first().unwrap();
        assert_eq!(c.pus, set(&format!("{},{}", first, first + 16)));
    }
    assert_eq!(h.packages.len(), 2);
    assert_eq!(
        l3_sets(&h),
        BTreeSet::from(["0-7,16-23".to_string(), "8-15,24-31".to_string()])
    );
    assert_eq!(h.numa_nodes.len(), 2);
    assert_eq!(h.numa_node(0).unwrap().cpus, set("0-7,16-23"));
    assert_eq!(h.numa_node(1).unwrap().cpus, set("8-15,24-31"));
    assert_eq!(h.distance(0, 1), Some(21));
    let hp = &h.numa_node(1).unwrap().hugepages;
    assert_eq!(
        (hp[0].size_kb, hp[0].total, hp[0].free),
        (2048, Some(2048), Some(2048))
    );
    assert_eq!((hp[1].size_kb, hp[1].total), (1_048_576, Some(0)));

    let ves: Vec<_> = h.pci_devices.iter().filter(|d| d.class == 0x0b40).collect();
    assert_eq!(ves.len(), 8);
    for d in &ves {
        assert_eq!((d.vendor_id, d.device_id), (Some(0x1bcf), Some(0x001c)));
        assert_eq!(d.kind, DeviceKind::Accelerator);
        assert_eq!(d.numa, Some(vec![0]), "{}", d.bdf);
        assert_eq!(d.local_cpus, Some(set("0-7,16-23")));
        assert_eq!(d.driver.as_deref(), Some("ve_drv"));
        assert_eq!(d.os_devices.len(), 1);
        let g = d.link_gbps.unwrap();
        assert!((g - 15.75).abs() < 0.01, "{g}");
        // behind a PLX (10b5) switch port, itself behind the PLX upstream port
        let port = h.pci(d.parent.as_deref().unwrap()).unwrap();
        assert_eq!(
            (port.vendor_id, port.kind),
            (Some(0x10b5), DeviceKind::Bridge)
        );
        let upstream = h.pci(port.parent.as_deref().unwrap()).unwrap();
        assert_eq!(upstream.vendor_id, Some(0x10b5));
        let root_port = upstream.parent.as_deref().unwrap();
        assert!(
            ["0000:17:00.0", "0000:3a:00.0"].contains(&root_port),
            "{root_port}"
        );
    }
    // four behind each of the two switch trees
    let under_17 = ves
        .iter()
        .filter(|d| {
            let p = h.pci(d.parent.as_deref().unwrap()).unwrap();
            h.pci(p.parent.as_deref().unwrap())
                .unwrap()
                .parent
                .as_deref()
                == Some("0000:17:00.0")
        })
        .count();
    assert_eq!(under_17, 4);
    let plx = h
        .pci_devices
        .iter()
        .filter(|d| d.vendor_id == Some(0x10b5))
        .count();
    assert_eq!(plx, 12);
    // VE BARs from `resource`: a 64 GiB 64-bit prefetchable BAR0 (flags 0x14220c), then
    // four 32-bit non-prefetchable ones (flags 0x40200) at lines 2-5
    let bars: Vec<_> = ves[0]
        .bars
        .iter()
        .map(|b| (b.index, b.size_bytes, b.prefetchable, b.bits64))
        .collect();
    assert_eq!(
        bars,
        vec![
            (0, 64 << 30, Some(true), Some(true)),
            (2, 32 << 20, Some(false), Some(false)),
            (3, 256 << 10, Some(false), Some(false)),
            (4, 4096, Some(false), Some(false)),
            (5, 4096, Some(false), Some(false)),
        ]
    );
    let nic = h.pci("60:00.0").unwrap();
    assert_eq!(nic.kind, DeviceKind::Nic);
    assert_eq!(nic.os_devices, vec!["enp96s0f0".to_string()]);
    assert_eq!(nic.msi_irqs.as_ref().map(Vec::len), Some(99));
    assert!(h
        .numa_nodes
        .iter()
        .all(|n| n.memory_kind == MemoryKind::Dram));
}

#[test]
fn power9_gpu_memory_nodes_are_flagged() {
    let h = snapshot("nvidiagpunumanodes");
    // online CPUs are 0-15,88-103 (the rest are offline: not PUs)
    assert_eq!(h.all_cpus(), set("0-15,88-103"));
    assert_eq!(h.cores.len(), 8);
    assert!(h.cores.iter().all(|c| c.pus.len() == 4));
    assert_eq!(h.cores[4].os_index, Some(2056));
    assert_eq!(h.packages.len(), 2);
    assert_eq!(h.packages[1].os_index, Some(8));
    assert_eq!(
        h.packages[0].model.as_deref(),
        Some("POWER9, altivec supported")
    );
    assert_eq!(h.caches_at(3).count(), 4);
    assert_eq!(h.numa_nodes.len(), 8);
    for n in &h.numa_nodes {
        if n.os_index >= 250 {
            // named by /proc/driver/nvidia/gpus/*/numa_status
            assert_eq!(n.memory_kind, MemoryKind::Gpu, "node {}", n.os_index);
            assert!(n.is_cpuless());
            assert_eq!(n.memory_bytes, Some(15_728_640 * 1024));
        } else {
            assert_eq!(n.memory_kind, MemoryKind::Dram);
            assert!(!n.is_cpuless());
        }
    }
    assert_eq!(h.distance(0, 8), Some(40));
    assert_eq!(h.distance(8, 250), Some(80));
    assert_eq!(h.gpus().count(), 6);
    // the snapshot keeps no vendor/device files or config space (hwloc: "id=0000:0000"):
    // the ids are unknown, not 0x0000
    for g in h.gpus() {
        assert_eq!(
            (g.vendor_id, g.device_id, g.pci_id()),
            (None, None, None),
            "{}",
            g.bdf
        );
    }
    let g = h.pci("0035:05:00.0").unwrap();
    assert_eq!(g.local_cpus, Some(set("88-103")));
    // no numa_node file in this snapshot: locality from local_cpus
    assert_eq!(g.numa, Some(vec![8]));
    assert_eq!(h.name.as_deref(), Some("c685f8n02"));
    assert_eq!(h.tsc_stable, None);
}

/// The architecture from the `Architecture:` line hwloc's snapshot tool wrote
/// (proc/hwloc-nofile-info), or from /proc/sys/kernel/arch where a snapshot has it; a
/// snapshot with neither says nothing.
#[test]
fn architecture_is_read_where_the_snapshot_says_it() {
    let p9 = snapshot("nvidiagpunumanodes");
    assert_eq!(p9.arch.as_deref(), Some("ppc64le"));
    assert_eq!(p9.is_x86(), Some(false));
    for x86 in [
        "20em64t-hybrid-1p6c2t+2ca4co1t",
        "32intel64-2p8co2t+8ve",
        "64amd64-4s2n4ca2co",
    ] {
        let h = snapshot(x86);
        assert_eq!(h.arch.as_deref(), Some("x86_64"), "{x86}");
        assert_eq!(h.is_x86(), Some(true), "{x86}");
    }
    // the kernel's own file wins over hwloc's note; without either: unknown
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let out = std::process::Command::new("tar")
        .args(["xjf"])
        .arg(shared("sysfs/64amd64-4s2n4ca2co.tar.bz2"))
        .arg("-C")
        .arg(root)
        .status()
        .unwrap();
    assert!(out.success());
    let top = root.join("64amd64-4s2n4ca2co");
    std::fs::create_dir_all(top.join("proc/sys/kernel")).unwrap();
    std::fs::write(top.join("proc/sys/kernel/arch"), "aarch64\n").unwrap();
    assert_eq!(
        topo::load_path(&top).unwrap().arch.as_deref(),
        Some("aarch64")
    );
    std::fs::remove_file(top.join("proc/sys/kernel/arch")).unwrap();
    std::fs::remove_file(top.join("proc/hwloc-nofile-info")).unwrap();
    let h = topo::load_path(&top).unwrap();
    assert_eq!((h.arch.as_deref(), h.is_x86()), (None, None));
}

/// The same snapshot extracted on disk (relative and absolute links resolved by the
/// loader inside the root), re-packed as .tar.gz and as plain .tar, gives the same model.
#[test]
fn directory_and_every_compression_agree() {
    let src = shared("sysfs/32intel64-2p8co2t+8ve.tar.bz2");
    let from_archive = topo::sysfs::load_archive(&src).unwrap();
    let raw = {
        let mut v = Vec::new();
        let f = std::fs::File::open(&src).unwrap();
        std::io::Read::read_to_end(&mut bzip2::read::BzDecoder::new(f), &mut v).unwrap();
        v
    };
    let dir = tempfile::tempdir().unwrap();
    tar::Archive::new(&raw[..]).unpack(dir.path()).unwrap();
    // the extracted tree has a top directory; load_root finds the root below it
    let mut from_dir = topo::sysfs::load_root(dir.path()).unwrap();
    from_dir.source = from_archive.source.clone();
    assert_eq!(from_dir, from_archive);

    let tar_path = dir.path().join("snap.tar");
    std::fs::write(&tar_path, &raw).unwrap();
    let mut from_tar = topo::load_path(&tar_path).unwrap();
    from_tar.source = from_archive.source.clone();
    assert_eq!(from_tar, from_archive);

    let gz_path = dir.path().join("snap.tgz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    std::fs::write(&gz_path, gz.finish().unwrap()).unwrap();
    let mut from_gz = topo::load_path(&gz_path).unwrap();
    from_gz.source = from_archive.source.clone();
    assert_eq!(from_gz, from_archive);
}

#[test]
fn missing_and_broken_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = topo::sysfs::load_root(dir.path()).unwrap_err().to_string();
    assert!(e.contains("sys/devices/system/cpu: missing"), "{e}");

    let cpu = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0")).unwrap();
    std::fs::write(cpu.join("online"), "0\n").unwrap();
    let e = topo::sysfs::load_root(dir.path()).unwrap_err().to_string();
    assert!(e.contains("cpu0/topology/core_cpus: missing"), "{e}");
    assert!(!e.contains('\n'));

    std::fs::create_dir_all(cpu.join("cpu0/topology")).unwrap();
    std::fs::write(cpu.join("cpu0/topology/core_cpus_list"), "zero\n").unwrap();
    let e = topo::sysfs::load_root(dir.path()).unwrap_err().to_string();
    assert!(e.contains("core_cpus_list: invalid cpu set"), "{e}");

    std::fs::write(cpu.join("cpu0/topology/core_cpus_list"), "0\n").unwrap();
    let h = topo::sysfs::load_root(dir.path()).unwrap();
    assert_eq!(h.pus.len(), 1);
    // no node directory: one node inferred, as hwloc does (no /proc/meminfo: memory unknown)
    assert_eq!(h.numa_nodes.len(), 1);
    assert_eq!(h.numa_nodes[0].cpus, set("0"));
    assert_eq!(h.numa_nodes[0].memory_bytes, None);
    assert!(h.numa_inferred);
    assert_eq!(h.interrupts, None);
    assert_eq!(h.tsc_stable, None);

    // an absolute symlink is re-rooted in the snapshot, never followed to the host's file
    // (the host's /etc/hostname is not a CPU list and would fail to parse)
    std::fs::remove_file(cpu.join("online")).unwrap();
    std::os::unix::fs::symlink(
        "/../../../../etc/hostname",
        dir.path().join("sys/devices/system/cpu/online"),
    )
    .unwrap();
    let h = topo::sysfs::load_root(dir.path()).unwrap();
    assert_eq!(h.pus.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Against hwloc's own export of the same snapshots (lstopo 2.9.0, HWLOC_FSROOT=snapshot).
// ---------------------------------------------------------------------------------------

fn numa_sets(h: &Host) -> Vec<(u32, String)> {
    h.numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.to_list_string()))
        .collect()
}

fn assert_agree(sys: &Host, xml: &Host) {
    assert_eq!(sys.all_cpus(), xml.all_cpus(), "PUs");
    assert_eq!(
        core_sets(sys),
        core_sets(xml),
        "SMT siblings (cores' PU sets)"
    );
    assert_eq!(l3_sets(sys), l3_sets(xml), "L3 groups");
    assert_eq!(numa_sets(sys), numa_sets(xml), "NUMA node cpusets");
    for p in &sys.pus {
        let q = xml.pu(p.os_index).unwrap();
        assert_eq!(
            (p.core, p.l3, p.numa, p.package),
            (q.core, q.l3, q.numa, q.package),
            "PU {}",
            p.os_index
        );
    }
    // every PCI function hwloc shows is in the sysfs model, with the same NUMA locality
    for d in &xml.pci_devices {
        let s = sys
            .pci(&d.bdf)
            .unwrap_or_else(|| panic!("{} in the XML but not in sysfs", d.bdf));
        assert_eq!(
            (s.vendor_id, s.device_id, s.class),
            (d.vendor_id, d.device_id, d.class),
            "{}",
            d.bdf
        );
        if d.numa.is_some() {
            assert_eq!(s.numa, d.numa, "NUMA locality of {}", d.bdf);
        }
    }
}

#[test]
fn agrees_with_hwloc_on_the_dual_xeon() {
    let sys = snapshot("32intel64-2p8co2t+8ve");
    let xml = topo::hwloc::load_file(&shared("hwloc/32intel64-2p8co2t+8ve.lstopo-2.9.0.xml"))
        .unwrap_or_else(|e| panic!("hwloc XML loader: {e}"));
    assert_agree(&sys, &xml);
    // all eight VEs are in the XML too, local to NUMA 0
    let xml_ves = xml.pci_devices.iter().filter(|d| d.class == 0x0b40).count();
    assert_eq!(xml_ves, 8);
}

#[test]
fn agrees_with_hwloc_on_the_hybrid_laptop() {
    let sys = snapshot("20em64t-hybrid-1p6c2t+2ca4co1t");
    let xml = topo::hwloc::load_file(&shared(
        "hwloc/20em64t-hybrid-1p6c2t+2ca4co1t.lstopo-2.9.0.xml",
    ))
    .unwrap_or_else(|e| panic!("hwloc XML loader: {e}"));
    assert_agree(&sys, &xml);
    let kinds = |h: &Host| -> BTreeSet<String> {
        h.cpu_kinds
            .iter()
            .map(|k| k.cpus.to_list_string())
            .collect()
    };
    assert_eq!(kinds(&sys), kinds(&xml), "CPU kinds");
}
