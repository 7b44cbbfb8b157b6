//! Shared by the integration tests: synthetic hosts, random requests, the shared topologies.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use plan::{GuestOs, HugepagePolicy, Profile, Request, Tenant};
use proptest::prelude::*;
use topo::{
    CacheType, CpuKind, CpuSet, DeviceKind, Distances, Host, HugePages, MemoryKind, NumaNode,
    PciDevice, RawCache, RawGroup, RawTopology,
};

pub const GIB: u64 = 1 << 30;

/// Shape of a synthetic host.
#[derive(Debug, Clone)]
pub struct Shape {
    pub packages: u32,
    pub nodes_per_package: u32,
    pub l3_per_node: u32,
    pub cores_per_l3: u32,
    pub smt: u32,
    /// Linux numbering of siblings: N and N + cores (Intel/AMD servers) or adjacent.
    pub siblings_far: bool,
    /// Efficiency cores (single-threaded) per L3 on a hybrid part.
    pub e_cores_per_l3: u32,
    /// The efficiency cores of one L3 share an L2 (a cluster, as on Raptor Lake).
    pub e_cluster: bool,
    /// Low-power cores per package with no L3, sharing one L2: the slowest kind (the SoC-tile
    /// island of Meteor Lake / Arrow Lake laptop parts).
    pub lp_cores: u32,
    pub node_gib: u64,
    /// Free (2 MiB, 1 GiB) pages per node; `None` = unknown (hwloc XML).
    pub free_pages: Vec<Option<(u64, u64)>>,
    /// GPU on each of these nodes.
    pub gpu_nodes: Vec<u32>,
    pub with_distances: bool,
    pub tsc_stable: Option<bool>,
}

pub fn shape(max_pus: u32) -> impl Strategy<Value = Shape> {
    (
        (
            any::<bool>(),
            prop_oneof![3 => Just(0u32), 1 => 1u32..=2],
            1u32..=2,
        ),
        1u32..=2,
        1u32..=3,
        1u32..=4,
        1u32..=2,
        any::<bool>(),
        prop_oneof![3 => Just(0u32), 1 => 1u32..=4],
        prop::collection::vec(
            prop_oneof![1 => Just(None), 3 => (0u64..=8192, 0u64..=32).prop_map(Some)],
            4,
        ),
        prop::collection::vec(0u32..4, 0..=3),
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(true)), Just(Some(false))],
        prop_oneof![Just(16u64), Just(64), Just(256)],
    )
        .prop_map(
            |((cluster, lp, packages), npp, l3, cpl3, smt, far, e, free, gpus, dist, tsc, gib)| {
                Shape {
                    packages,
                    nodes_per_package: npp,
                    l3_per_node: l3,
                    cores_per_l3: cpl3,
                    smt,
                    siblings_far: far,
                    e_cores_per_l3: e,
                    e_cluster: cluster,
                    lp_cores: lp,
                    node_gib: gib,
                    free_pages: free,
                    gpu_nodes: gpus,
                    with_distances: dist,
                    tsc_stable: tsc,
                }
            },
        )
        .prop_filter("host too big", move |s| pus_of(s) <= max_pus)
}

pub fn pus_of(s: &Shape) -> u32 {
    s.packages * s.nodes_per_package * s.l3_per_node * (s.cores_per_l3 * s.smt + s.e_cores_per_l3)
        + s.packages * s.lp_cores
}

/// A shared L2 over `cpus` (a cluster of cores).
fn l2(cpus: CpuSet) -> RawCache {
    RawCache {
        level: 2,
        cache_type: CacheType::Unified,
        size_bytes: Some(2 << 20),
        line_bytes: Some(64),
        ways: None,
        cpus,
    }
}

/// Build the host of a shape through the same `RawTopology::assemble` the loaders use.
pub fn synthetic(s: &Shape) -> Host {
    let nodes = s.packages * s.nodes_per_package;
    let l3s = nodes * s.l3_per_node;
    let p_cores = l3s * s.cores_per_l3;
    // PU numbering: first threads of all P-cores, then the second threads (far) or
    // adjacent; E-cores after all P-core PUs
    let mut raw = RawTopology {
        source: format!("synthetic:{s:?}"),
        ..Default::default()
    };
    let mut p_pus = CpuSet::new();
    let mut e_pus = CpuSet::new();
    let mut next_e = p_cores * s.smt;
    let mut node_cpus: Vec<CpuSet> = vec![CpuSet::new(); nodes as usize];
    let mut pkg_cpus: Vec<CpuSet> = vec![CpuSet::new(); s.packages as usize];
    for l in 0..l3s {
        let node = l / s.l3_per_node;
        let pkg = node / s.nodes_per_package;
        let mut l3_cpus = CpuSet::new();
        for c in 0..s.cores_per_l3 {
            let core = l * s.cores_per_l3 + c;
            let pus: CpuSet = (0..s.smt)
                .map(|t| {
                    if s.siblings_far {
                        core + t * p_cores
                    } else {
                        core * s.smt + t
                    }
                })
                .collect();
            raw.cores.push(RawGroup {
                os_index: Some(core),
                cpus: pus.clone(),
            });
            l3_cpus = l3_cpus.union(&pus);
            p_pus = p_pus.union(&pus);
        }
        let mut cluster = CpuSet::new();
        for _ in 0..s.e_cores_per_l3 {
            let pus: CpuSet = std::iter::once(next_e).collect();
            next_e += 1;
            raw.cores.push(RawGroup {
                os_index: None,
                cpus: pus.clone(),
            });
            l3_cpus = l3_cpus.union(&pus);
            e_pus = e_pus.union(&pus);
            cluster = cluster.union(&pus);
        }
        if s.e_cluster && cluster.len() > 1 {
            raw.caches.push(l2(cluster));
        }
        raw.caches.push(RawCache {
            level: 3,
            cache_type: CacheType::Unified,
            size_bytes: Some(32 << 20),
            line_bytes: Some(64),
            ways: None,
            cpus: l3_cpus.clone(),
        });
        node_cpus[node as usize] = node_cpus[node as usize].union(&l3_cpus);
        pkg_cpus[pkg as usize] = pkg_cpus[pkg as usize].union(&l3_cpus);
    }
    // low-power island: per package, cores with no L3 sharing one L2, on the package's
    // first node
    let mut lp_pus = CpuSet::new();
    for pkg in 0..s.packages {
        let mut island = CpuSet::new();
        for _ in 0..s.lp_cores {
            let pus: CpuSet = std::iter::once(next_e).collect();
            next_e += 1;
            raw.cores.push(RawGroup {
                os_index: None,
                cpus: pus.clone(),
            });
            island = island.union(&pus);
        }
        if island.is_empty() {
            continue;
        }
        if island.len() > 1 {
            raw.caches.push(l2(island.clone()));
        }
        let node = (pkg * s.nodes_per_package) as usize;
        node_cpus[node] = node_cpus[node].union(&island);
        pkg_cpus[pkg as usize] = pkg_cpus[pkg as usize].union(&island);
        lp_pus = lp_pus.union(&island);
    }
    raw.pus = p_pus.union(&e_pus).union(&lp_pus);
    let kind = |efficiency: i32, cpus: CpuSet| CpuKind {
        label: String::new(),
        efficiency: Some(efficiency),
        name: None,
        max_freq_mhz: None,
        cpus,
    };
    raw.cpu_kinds = [(2, p_pus), (1, e_pus), (0, lp_pus)]
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(e, c)| kind(e, c))
        .collect();
    raw.packages = pkg_cpus
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                RawGroup {
                    os_index: Some(i as u32),
                    cpus: c.clone(),
                },
                None,
            )
        })
        .collect();
    raw.numa_nodes = node_cpus
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let free = s.free_pages.get(i).copied().flatten();
            NumaNode {
                os_index: i as u32,
                cpus: c.clone(),
                memory_bytes: Some(s.node_gib * GIB),
                hugepages: vec![
                    HugePages {
                        size_kb: 2048,
                        total: Some(free.map_or(1024, |f| f.0)),
                        free: free.map(|f| f.0),
                    },
                    HugePages {
                        size_kb: 1048576,
                        total: Some(free.map_or(4, |f| f.1)),
                        free: free.map(|f| f.1),
                    },
                ],
                memory_kind: MemoryKind::Dram,
                free_bytes: None,
            }
        })
        .collect();
    if s.with_distances {
        let ids: Vec<u32> = (0..nodes).collect();
        raw.distances = Some(Distances {
            matrix: ids
                .iter()
                .map(|&a| {
                    ids.iter()
                        .map(|&b| {
                            if a == b {
                                10
                            } else if a / s.nodes_per_package == b / s.nodes_per_package {
                                12
                            } else {
                                32
                            }
                        })
                        .collect()
                })
                .collect(),
            nodes: ids,
        });
    }
    for (i, &n) in s.gpu_nodes.iter().enumerate() {
        if n >= nodes {
            continue;
        }
        let bdf = format!("0000:{:02x}:00.0", 0x10 + i);
        raw.pci_devices.push(PciDevice {
            bdf: bdf.clone(),
            vendor_id: Some(0x10de),
            device_id: Some(0x20b0),
            subsystem_vendor_id: None,
            subsystem_device_id: None,
            class: 0x0302,
            prog_if: None,
            kind: DeviceKind::Gpu,
            name: None,
            numa: Some(vec![n]),
            local_cpus: node_cpus.get(n as usize).cloned(),
            iommu_group: Some(10 + i as u32),
            driver: Some("vfio-pci".into()),
            bars: vec![],
            msi_irqs: None,
            irq: None,
            parent: None,
            os_devices: vec![],
            link_gbps: None,
            link: None,
            vfio_cdev: None,
        });
    }
    raw.tsc_stable = s.tsc_stable;
    match raw.assemble() {
        Ok(h) => h,
        Err(e) => panic!("synthetic host does not assemble: {e}"),
    }
}

/// A random request for `host`: vCPUs up to the PUs, memory, some of its GPUs.
pub fn request_for(host: &Host, seed: (u32, u64, u8, u8, u8, u8, u16)) -> Request {
    let (v, mem_pick, prof, os, hp, gpu_mask, threads) = seed;
    let pus = host.pus.len() as u32;
    let vcpus = 1 + v % pus.max(1);
    let node_mem: u64 = host
        .numa_nodes
        .iter()
        .filter_map(|n| n.memory_bytes)
        .max()
        .unwrap_or(64 * GIB);
    // mostly fits one node, sometimes needs several, sometimes a size not a GiB multiple
    let memory_bytes = match mem_pick % 8 {
        0 => node_mem + GIB,
        1 => (3 * 512) << 20,
        _ => (1 + mem_pick % (node_mem / GIB).max(1)) * GIB,
    };
    let gpus: Vec<String> = host
        .gpus()
        .enumerate()
        .filter(|(i, _)| gpu_mask & (1 << (i % 8)) != 0)
        .map(|(_, g)| g.bdf.clone())
        .take(2)
        .collect();
    Request {
        name: Some(format!("vm{v}")),
        vcpus,
        memory_bytes,
        devices: gpus,
        profile: [
            Profile::Gaming,
            Profile::Compute,
            Profile::Membw,
            Profile::Collective,
        ][prof as usize % 4],
        os: [GuestOs::Linux, GuestOs::Windows, GuestOs::Windows7][os as usize % 3],
        hugepages: [
            HugepagePolicy::Auto,
            HugepagePolicy::Auto,
            HugepagePolicy::None,
            HugepagePolicy::Size2M,
            HugepagePolicy::Size1G,
        ][hp as usize % 5],
        host_cpus: None,
        move_host_cpus: false,
        threads: [
            plan::ThreadPolicy::Auto,
            plan::ThreadPolicy::Auto,
            plan::ThreadPolicy::Pack,
            plan::ThreadPolicy::Spread,
        ][threads as usize % 4],
    }
}

pub fn request_seed() -> impl Strategy<Value = (u32, u64, u8, u8, u8, u8, u16)> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
    )
}

/// Plan `count` small VMs one after another, each becoming a tenant of the next; stops at
/// the first refusal.
pub fn tenants_for(host: &Host, count: usize, vcpus: u32) -> Vec<Tenant> {
    let mut tenants = Vec::new();
    for i in 0..count {
        let req = Request {
            name: Some(format!("tenant{i}")),
            vcpus,
            memory_bytes: 2 * GIB,
            devices: vec![],
            profile: Profile::Compute,
            os: GuestOs::Linux,
            hugepages: HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
            threads: plan::ThreadPolicy::Auto,
        };
        match plan::plan(&req, host, &tenants) {
            Ok(p) => tenants.push(Tenant::from_plan(&p)),
            Err(_) => break,
        }
    }
    tenants
}

/// The shared hwloc files: `$VMTUNE_TOPOLOGIES/hwloc`, else the repository's
/// `testdata/topologies/hwloc`, else the shared folder beside the checkout.
pub fn topology_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        std::env::var_os("VMTUNE_TOPOLOGIES").map(|p| PathBuf::from(p).join("hwloc")),
        Some(root.join("testdata/topologies/hwloc")),
        Some(root.join("../shared/topologies/hwloc")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_dir())
        .unwrap_or_else(|| root.join("../shared/topologies/hwloc"))
}

/// Every shared hwloc topology. The repository ships them, so an unreadable directory or a
/// file that does not load fails the test (it must not pass over zero hosts).
pub fn shared_hosts() -> Vec<(String, Host)> {
    let dir = topology_dir();
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("shared topologies: cannot read {}: {e}", dir.display()),
    };
    files.sort();
    let mut out = Vec::new();
    for f in files {
        if f.extension().and_then(|e| e.to_str()) != Some("xml") {
            continue;
        }
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match topo::load_path(Path::new(&f)) {
            Ok(h) => out.push((name, h)),
            Err(e) => panic!("shared topology {name} does not load: {e}"),
        }
    }
    assert!(!out.is_empty(), "no hwloc XML in {}", dir.display());
    out
}
