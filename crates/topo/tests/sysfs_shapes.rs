//! Sysfs shapes the loader must read as hwloc does (issue 37, host-model items 1-3), each on
//! a hand-written tree in the shape of the kernels that write it:
//!
//! 1. a kernel without NUMA support (no `sys/devices/system/node`: 32-bit x86/ARM, s390x,
//!    embedded boards): one node 0 with every PU and `/proc/meminfo`'s MemTotal;
//! 2. NUMA nodes whose cpulists repeat or overlap (buggy firmware tables): the first keeps
//!    the CPUs, the others are dropped or trimmed, with a note naming them;
//! 3. CPUs whose `topology/` has no SMT sibling list (only `physical_package_id` and
//!    `core_siblings`, or `core_id` too, or only `core_siblings_list`): each CPU its own core,
//!    or the CPUs sharing (package, core_id) one core.

use std::path::Path;

use topo::{CpuSet, Host, MemoryKind};

/// A snapshot tree in a temporary directory.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }

    fn put(&self, rel: &str, text: &str) -> &Tree {
        let p = self.0.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    fn dir(&self, rel: &str) -> &Tree {
        std::fs::create_dir_all(self.0.path().join(rel)).unwrap();
        self
    }

    fn error(&self) -> String {
        match topo::sysfs::load_root(self.path()) {
            Ok(h) => panic!("loaded: {h:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn load(&self) -> Host {
        topo::sysfs::load_root(self.path()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `cpuN/topology/NAME` for each CPU of `cpus`.
    fn topo_file(&self, cpus: &str, name: &str, text: impl Fn(u32) -> String) -> &Tree {
        for c in set(cpus).iter() {
            self.put(
                &format!("sys/devices/system/cpu/cpu{c}/topology/{name}"),
                &format!("{}\n", text(c)),
            );
        }
        self
    }

    /// `sys/devices/system/node/nodeN/{cpulist,meminfo}` and `online`.
    fn node(&self, id: u32, cpulist: &str, mem_kb: u64) -> &Tree {
        let d = format!("sys/devices/system/node/node{id}");
        self.put(&format!("{d}/cpulist"), &format!("{cpulist}\n"));
        self.put(
            &format!("{d}/meminfo"),
            &format!(
                "Node {id} MemTotal: {mem_kb} kB\nNode {id} MemFree: {} kB\n",
                mem_kb / 2
            ),
        );
        self
    }
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn note_with<'a>(h: &'a Host, words: &[&str]) -> &'a str {
    h.notes
        .iter()
        .find(|n| words.iter().all(|w| n.contains(w)))
        .unwrap_or_else(|| panic!("no note with {words:?}: {:?}", h.notes))
}

/// A quad Cortex-A7 board on a 32-bit ARM kernel built without CONFIG_NUMA: no node
/// directory at all, the memory in /proc/meminfo only, no hugepages (no LPAE).
fn armv7_board() -> Tree {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-3\n")
        .put("sys/devices/system/cpu/possible", "0-3\n")
        .topo_file("0-3", "core_id", |c| c.to_string())
        .topo_file("0-3", "physical_package_id", |_| "0".into())
        .topo_file("0-3", "core_siblings", |_| "f".into())
        .topo_file("0-3", "core_siblings_list", |_| "0-3".into())
        .topo_file("0-3", "thread_siblings", |c| format!("{:x}", 1u32 << c))
        .topo_file("0-3", "thread_siblings_list", |c| c.to_string())
        .put(
            "proc/meminfo",
            "MemTotal:         948304 kB\nMemFree:          601232 kB\nMemAvailable:     787096 kB\nBuffers:           21452 kB\nCached:           190740 kB\n",
        )
        .put("proc/sys/kernel/arch", "armv7l\n");
    t
}

#[test]
fn a_kernel_without_numa_has_one_node_with_every_pu_and_memtotal() {
    let h = armv7_board().load();
    assert_eq!(h.numa_nodes.len(), 1, "{:?}", h.numa_nodes);
    let n = &h.numa_nodes[0];
    assert_eq!(n.os_index, 0);
    assert_eq!(n.cpus, set("0-3"));
    assert_eq!(n.memory_bytes, Some(948_304 * 1024));
    assert_eq!(n.free_bytes, Some(601_232 * 1024));
    assert_eq!(n.memory_kind, MemoryKind::Dram);
    assert!(n.hugepages.is_empty());
    assert!(h.pus.iter().all(|p| p.numa == Some(0)), "{:?}", h.pus);
    assert_eq!(h.distances, None);
    assert!(h.numa_inferred);
    note_with(&h, &["node 0", "inferred", "sys/devices/system/node"]);
    // the model says so in its JSON too
    let v = serde_json::to_value(&h).unwrap();
    assert_eq!(v["numa_inferred"], true);
    assert!(v["notes"][0].as_str().unwrap().contains("inferred"));
}

/// An s390x kernel built without CONFIG_NUMA: hugepages of every size from
/// /sys/kernel/mm/hugepages, which wins over /proc/meminfo's default-size lines.
#[test]
fn an_inferred_node_takes_hugepages_from_sys_kernel_mm() {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-1\n")
        .topo_file("0-1", "core_id", |c| c.to_string())
        .topo_file("0-1", "physical_package_id", |_| "0".into())
        .topo_file("0-1", "core_siblings_list", |_| "0-1".into())
        .topo_file("0-1", "thread_siblings_list", |c| c.to_string())
        .put(
            "proc/meminfo",
            "MemTotal:        4030388 kB\nMemFree:         3512044 kB\nHugePages_Total:      16\nHugePages_Free:       16\nHugepagesize:       1024 kB\n",
        )
        .put("sys/kernel/mm/hugepages/hugepages-1024kB/nr_hugepages", "16\n")
        .put("sys/kernel/mm/hugepages/hugepages-1024kB/free_hugepages", "12\n")
        .put("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n")
        .put("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "0\n");
    let h = t.load();
    let hp: Vec<_> = h.numa_nodes[0]
        .hugepages
        .iter()
        .map(|p| (p.size_kb, p.total, p.free))
        .collect();
    assert_eq!(
        hp,
        vec![(1024, Some(16), Some(12)), (2048, Some(0), Some(0))]
    );
    assert_eq!(h.numa_nodes[0].memory_bytes, Some(4_030_388 * 1024));

    // without the sysfs directory: the default size from /proc/meminfo
    std::fs::remove_dir_all(t.path().join("sys/kernel")).unwrap();
    let h = t.load();
    let hp: Vec<_> = h.numa_nodes[0]
        .hugepages
        .iter()
        .map(|p| (p.size_kb, p.total, p.free))
        .collect();
    assert_eq!(hp, vec![(1024, Some(16), Some(16))]);
}

/// An empty node directory (a trimmed snapshot) is no NUMA information either; without
/// /proc/meminfo the inferred node's memory is unknown, not 0.
#[test]
fn an_empty_node_directory_and_no_meminfo() {
    let t = armv7_board();
    t.dir("sys/devices/system/node");
    std::fs::remove_file(t.path().join("proc/meminfo")).unwrap();
    let h = t.load();
    assert_eq!(h.numa_nodes.len(), 1);
    assert_eq!(h.numa_nodes[0].cpus, set("0-3"));
    assert_eq!(h.numa_nodes[0].memory_bytes, None);
    assert!(h.numa_inferred);
    // a meminfo that says nothing usable is the same as none
    t.put("proc/meminfo", "MemTotal: lots\n");
    assert_eq!(t.load().numa_nodes[0].memory_bytes, None);
}

/// A kernel with NUMA says so itself: nothing inferred, no note.
#[test]
fn a_numa_kernel_is_not_inferred() {
    let t = armv7_board();
    t.node(0, "0-3", 948_304)
        .put("sys/devices/system/node/online", "0\n");
    let h = t.load();
    assert_eq!(h.numa_nodes.len(), 1);
    assert!(!h.numa_inferred);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
    let v = serde_json::to_value(&h).unwrap();
    assert!(
        v.get("numa_inferred").is_none() && v.get("notes").is_none(),
        "{v}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. NUMA nodes listing the same CPUs (buggy firmware tables)
// ---------------------------------------------------------------------------------------

/// Eight single-thread cores in one package, `thread_siblings_list` and `core_siblings_list`.
fn eight_cores() -> Tree {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-7\n")
        .topo_file("0-7", "core_id", |c| c.to_string())
        .topo_file("0-7", "physical_package_id", |_| "0".into())
        .topo_file("0-7", "core_siblings_list", |_| "0-7".into())
        .topo_file("0-7", "thread_siblings_list", |c| c.to_string());
    t
}

fn node_ids(h: &Host) -> Vec<u32> {
    h.numa_nodes.iter().map(|n| n.os_index).collect()
}

/// A one-socket board whose SRAT describes its memory twice (nodes 0 and 1 with the same
/// CPUs, written as cpumap masks), plus a CPU-less node 2 and a NIC the firmware put on
/// node 1.
#[test]
fn nodes_listing_the_same_cpus_keep_the_first() {
    let t = eight_cores();
    let n = "sys/devices/system/node";
    t.put(&format!("{n}/online"), "0-2\n");
    for (id, mask, kb) in [
        (0, "ff", 8_388_608u64),
        (1, "000000ff", 8_388_608),
        (2, "0", 4_194_304),
    ] {
        t.put(&format!("{n}/node{id}/cpumap"), &format!("{mask}\n"))
            .put(
                &format!("{n}/node{id}/meminfo"),
                &format!("Node {id} MemTotal: {kb} kB\n"),
            );
    }
    t.put(&format!("{n}/node0/distance"), "10 10 20\n")
        .put(&format!("{n}/node1/distance"), "10 10 20\n")
        .put(&format!("{n}/node2/distance"), "20 20 10\n");
    let nic = "sys/bus/pci/devices/0000:01:00.0";
    t.put(&format!("{nic}/vendor"), "0x8086\n")
        .put(&format!("{nic}/device"), "0x1521\n")
        .put(&format!("{nic}/class"), "0x020000\n")
        .put(&format!("{nic}/numa_node"), "1\n");
    let h = t.load();
    assert_eq!(node_ids(&h), vec![0, 2]);
    assert_eq!(h.numa_node(0).unwrap().cpus, set("0-7"));
    // the memory is counted once
    let mem: u64 = h.numa_nodes.iter().filter_map(|n| n.memory_bytes).sum();
    assert_eq!(mem, (8_388_608 + 4_194_304) * 1024);
    // the memory-only node is not a duplicate
    assert!(h.numa_node(2).unwrap().is_cpuless());
    assert!(h.pus.iter().all(|p| p.numa == Some(0)));
    // the distance matrix without the dropped node's row and column
    let d = h.distances.as_ref().unwrap();
    assert_eq!(d.nodes, vec![0, 2]);
    assert_eq!(d.matrix, vec![vec![10, 20], vec![20, 10]]);
    // a device on the dropped node is on the node that kept its CPUs
    assert_eq!(h.pci("01:00.0").unwrap().numa, Some(vec![0]));
    assert!(!h.numa_inferred);
    note_with(&h, &["NUMA node 1", "same CPUs", "node 0", "dropped"]);
}

/// Three copies: both later ones dropped and named; a CPU in two nodes' lists stays in the
/// lower node only; a node listing only CPUs of lower nodes (their union) is dropped.
#[test]
fn repeated_and_overlapping_cpulists() {
    let t = eight_cores();
    t.node(0, "0-7", 1024)
        .node(1, "0-7", 1024)
        .node(3, "0-7", 1024);
    let h = t.load();
    assert_eq!(node_ids(&h), vec![0]);
    note_with(&h, &["NUMA node 1", "node 0"]);
    note_with(&h, &["NUMA node 3", "node 0"]);

    let t = eight_cores();
    t.node(0, "0-3", 1024).node(1, "3-7", 1024);
    let h = t.load();
    assert_eq!(node_ids(&h), vec![0, 1]);
    assert_eq!(h.numa_node(0).unwrap().cpus, set("0-3"));
    assert_eq!(h.numa_node(1).unwrap().cpus, set("4-7"));
    assert_eq!(h.pu(3).unwrap().numa, Some(0));
    assert_eq!(h.pu(4).unwrap().numa, Some(1));
    note_with(&h, &["CPU", "3", "nodes 0 and 1", "node 0"]);

    let t = eight_cores();
    t.node(0, "0-3", 1024)
        .node(1, "4-7", 1024)
        .node(2, "0-7", 2048)
        .node(3, "", 512);
    let h = t.load();
    assert_eq!(node_ids(&h), vec![0, 1, 3]);
    note_with(&h, &["NUMA node 2", "0-7", "nodes 0, 1", "dropped"]);
    // every PU in exactly one node
    for p in &h.pus {
        let holders = h
            .numa_nodes
            .iter()
            .filter(|n| n.cpus.contains(p.os_index))
            .count();
        assert_eq!(holders, 1, "PU {}", p.os_index);
    }
}

/// Distinct cpulists are left alone: nothing noted.
#[test]
fn distinct_nodes_are_left_alone() {
    let t = eight_cores();
    t.node(0, "0-3", 1024).node(1, "4-7", 1024).node(2, "", 512);
    let h = t.load();
    assert_eq!(node_ids(&h), vec![0, 1, 2]);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
}

// ---------------------------------------------------------------------------------------
// 3. CPUs without an SMT sibling list
// ---------------------------------------------------------------------------------------

fn core_sets(h: &Host) -> Vec<String> {
    h.cores.iter().map(|c| c.pus.to_list_string()).collect()
}

fn package_sets(h: &Host) -> Vec<(Option<u32>, String)> {
    h.packages
        .iter()
        .map(|p| (p.os_index, p.cpus.to_list_string()))
        .collect()
}

/// Two packages of two CPUs whose `topology/` holds only `physical_package_id` and the
/// `core_siblings` mask (no core_id, thread_siblings, core_cpus or their lists): each CPU
/// is its own core, the package from physical_package_id.
#[test]
fn package_id_and_core_siblings_only() {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-3\n")
        .topo_file("0-3", "physical_package_id", |c| (c / 2).to_string())
        .topo_file("0-3", "core_siblings", |c| {
            if c < 2 { "3" } else { "c" }.into()
        });
    let h = t.load();
    assert_eq!(core_sets(&h), vec!["0", "1", "2", "3"]);
    assert_eq!(
        package_sets(&h),
        vec![(Some(0), "0-1".into()), (Some(1), "2-3".into())]
    );
    assert_eq!(h.pu(3).unwrap().package, Some(1));
    note_with(&h, &["0-3", "own core"]);
}

/// core_id without thread_siblings: the CPUs sharing (package, core_id) are one core's
/// threads; the same core_id in another package is another core.
#[test]
fn core_id_without_thread_siblings() {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-7\n")
        .topo_file("0-7", "physical_package_id", |c| (c / 4).to_string())
        .topo_file("0-7", "core_id", |c| (c % 2).to_string())
        .topo_file("0-7", "core_siblings_list", |c| {
            if c < 4 { "0-3" } else { "4-7" }.into()
        });
    let h = t.load();
    assert_eq!(core_sets(&h), vec!["0,2", "1,3", "4,6", "5,7"]);
    assert_eq!(
        h.cores.iter().map(|c| c.os_index).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(0), Some(1)]
    );
    assert_eq!(h.packages.len(), 2);
    note_with(&h, &["0-7", "core_id"]);

    // without a package file the package is not known: no guess that core_ids are
    // machine-wide, each CPU its own core
    for c in 0..8 {
        std::fs::remove_file(t.path().join(format!(
            "sys/devices/system/cpu/cpu{c}/topology/physical_package_id"
        )))
        .unwrap();
        std::fs::remove_file(t.path().join(format!(
            "sys/devices/system/cpu/cpu{c}/topology/core_siblings_list"
        )))
        .unwrap();
    }
    let h = t.load();
    assert_eq!(h.cores.len(), 8);
    assert!(h.packages.is_empty());
}

/// Only `core_siblings_list`: one package of unknown number, each CPU its own core; only
/// `physical_package_id`: packages grouped by it.
#[test]
fn core_siblings_list_only_and_package_id_only() {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-3\n")
        .topo_file("0-3", "core_siblings_list", |_| "0-3".into());
    let h = t.load();
    assert_eq!(core_sets(&h), vec!["0", "1", "2", "3"]);
    assert_eq!(package_sets(&h), vec![(None, "0-3".into())]);

    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-3\n")
        .topo_file("0-3", "physical_package_id", |c| (c % 2).to_string());
    let h = t.load();
    assert_eq!(h.cores.len(), 4);
    assert_eq!(
        package_sets(&h),
        vec![(Some(0), "0,2".into()), (Some(1), "1,3".into())]
    );
}

/// A topology directory with none of the files the loader reads is still an error naming
/// the file, on one line; a CPU listed by another's thread_siblings but missing its own is
/// in that core.
#[test]
fn an_empty_topology_directory_and_mixed_cpus() {
    let t = Tree::new();
    t.put("sys/devices/system/cpu/online", "0-1\n")
        .dir("sys/devices/system/cpu/cpu0/topology")
        .topo_file("1", "physical_package_id", |_| "0".into());
    let e = t.error();
    assert!(e.contains("cpu0/topology/core_cpus: missing"), "{e}");
    assert!(!e.contains('\n'), "{e}");

    t.topo_file("0", "thread_siblings_list", |_| "0-1".into())
        .topo_file("0", "physical_package_id", |_| "0".into());
    let h = t.load();
    assert_eq!(core_sets(&h), vec!["0-1"]);
}

// ---------------------------------------------------------------------------------------
// Generated hosts: every shape above on random machines, against the machine written out
// ---------------------------------------------------------------------------------------

/// How a generated machine's `topology/` files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TopoForm {
    /// core_cpus_list, package_cpus_list, core_id, physical_package_id
    Lists,
    /// thread_siblings and core_siblings masks, core_id, physical_package_id
    Masks,
    /// physical_package_id and core_siblings only
    PackageIdSiblings,
    /// physical_package_id, core_id, core_siblings_list
    CoreIdNoThreads,
    /// core_siblings_list only
    SiblingsListOnly,
}

/// How its NUMA directory is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumaForm {
    /// one node per package
    Nodes,
    /// no node directory: a kernel without NUMA
    Absent,
    /// node 0 repeated `n` times under the next ids
    Repeated(u32),
    /// the last node also lists CPU 0 (node 0's), and a memory-only node follows
    Overlap,
}

fn topo_form() -> impl proptest::strategy::Strategy<Value = TopoForm> {
    proptest::sample::select(vec![
        TopoForm::Lists,
        TopoForm::Masks,
        TopoForm::PackageIdSiblings,
        TopoForm::CoreIdNoThreads,
        TopoForm::SiblingsListOnly,
    ])
}

fn numa_form() -> impl proptest::strategy::Strategy<Value = NumaForm> {
    use proptest::prelude::*;
    prop_oneof![
        Just(NumaForm::Nodes),
        Just(NumaForm::Absent),
        (1u32..3).prop_map(NumaForm::Repeated),
        Just(NumaForm::Overlap),
    ]
}

fn mask(s: &CpuSet) -> String {
    format!("{:x}", s.iter().fold(0u64, |m, c| m | 1 << c))
}

/// Write a machine of `packages` × `cores` × `threads` (CPU numbers in that order, one NUMA
/// node per package of `mem_kb` each) in the given forms.
fn write_machine(
    packages: u32,
    cores: u32,
    threads: u32,
    mem_kb: u64,
    form: TopoForm,
    numa: NumaForm,
) -> Tree {
    let t = Tree::new();
    let n = packages * cores * threads;
    t.put("sys/devices/system/cpu/online", &format!("0-{}\n", n - 1));
    let pkg_of = |c: u32| c / (cores * threads);
    let pkg_cpus = |p: u32| CpuSet::range(p * cores * threads, (p + 1) * cores * threads);
    let core_cpus = |c: u32| CpuSet::range(c - c % threads, c - c % threads + threads);
    let put = |c: u32, f: &str, v: String| {
        t.put(
            &format!("sys/devices/system/cpu/cpu{c}/topology/{f}"),
            &format!("{v}\n"),
        );
    };
    for c in 0..n {
        let core_id = (c / threads) % cores;
        match form {
            TopoForm::Lists => {
                put(c, "core_cpus_list", core_cpus(c).to_list_string());
                put(c, "package_cpus_list", pkg_cpus(pkg_of(c)).to_list_string());
            }
            TopoForm::Masks => {
                put(c, "thread_siblings", mask(&core_cpus(c)));
                put(c, "core_siblings", mask(&pkg_cpus(pkg_of(c))));
            }
            TopoForm::PackageIdSiblings => {
                put(c, "core_siblings", mask(&pkg_cpus(pkg_of(c))));
            }
            TopoForm::CoreIdNoThreads => {
                put(
                    c,
                    "core_siblings_list",
                    pkg_cpus(pkg_of(c)).to_list_string(),
                );
            }
            TopoForm::SiblingsListOnly => {
                put(
                    c,
                    "core_siblings_list",
                    pkg_cpus(pkg_of(c)).to_list_string(),
                );
            }
        }
        if matches!(
            form,
            TopoForm::Lists | TopoForm::Masks | TopoForm::CoreIdNoThreads
        ) {
            put(c, "core_id", core_id.to_string());
        }
        if form != TopoForm::SiblingsListOnly {
            put(c, "physical_package_id", pkg_of(c).to_string());
        }
    }
    t.put(
        "proc/meminfo",
        &format!("MemTotal: {} kB\nMemFree: 1 kB\n", mem_kb * packages as u64),
    );
    match numa {
        NumaForm::Absent => {}
        NumaForm::Nodes | NumaForm::Repeated(_) | NumaForm::Overlap => {
            for p in 0..packages {
                let mut cpus = pkg_cpus(p);
                if numa == NumaForm::Overlap && p == packages - 1 {
                    cpus.insert(0);
                }
                t.node(p, &cpus.to_list_string(), mem_kb);
            }
        }
    }
    match numa {
        NumaForm::Repeated(k) => {
            for i in 0..k {
                t.node(packages + i, &pkg_cpus(0).to_list_string(), mem_kb);
            }
        }
        NumaForm::Overlap => {
            t.node(packages, "", 512);
        }
        _ => {}
    }
    t
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, .. Default::default() })]

    /// Whatever the form, the model is the machine written: its PUs, each PU's package and
    /// NUMA node, every PU in one node, memory counted once; cores are the real ones where
    /// the files say them (a sibling list, or core_id in a package) and one per PU where they
    /// cannot; what was inferred or dropped is noted.
    #[test]
    fn generated_machines_read_as_written(
        packages in 1u32..=3, cores in 1u32..=3, threads in 1u32..=2,
        mem_mb in 1u64..4096, form in topo_form(), numa in numa_form(),
    ) {
        use proptest::prop_assert_eq as eq;
        use proptest::prop_assert as check;
        let mem_kb = mem_mb * 1024;
        let h = write_machine(packages, cores, threads, mem_kb, form, numa).load();
        let n = packages * cores * threads;
        let per_pkg = cores * threads;
        eq!(h.all_cpus(), CpuSet::range(0, n));
        let real_cores = matches!(form, TopoForm::Lists | TopoForm::Masks | TopoForm::CoreIdNoThreads);
        eq!(h.cores.len() as u32, if real_cores { packages * cores } else { n });
        for c in &h.cores {
            let first = c.pus.first().unwrap();
            let want = if real_cores { CpuSet::range(first, first + threads) } else { CpuSet::range(first, first + 1) };
            eq!(&c.pus, &want);
        }
        eq!(h.packages.len() as u32, packages);
        for p in &h.packages {
            let id = p.cpus.first().unwrap() / per_pkg;
            eq!(&p.cpus, &CpuSet::range(id * per_pkg, (id + 1) * per_pkg));
            eq!(p.os_index, (form != TopoForm::SiblingsListOnly).then_some(id));
        }
        for p in &h.pus {
            let pkg = p.os_index / per_pkg;
            eq!(h.packages[p.package.unwrap() as usize].os_index.unwrap_or(pkg), pkg);
            let node = if numa == NumaForm::Absent { 0 } else { pkg };
            eq!(p.numa, Some(node), "PU {}", p.os_index);
            let holders = h.numa_nodes.iter().filter(|x| x.cpus.contains(p.os_index)).count();
            eq!(holders, 1, "PU {}", p.os_index);
        }
        let mem: u64 = h.numa_nodes.iter().filter_map(|x| x.memory_bytes).sum();
        let extra = if numa == NumaForm::Overlap { 512 } else { 0 };
        eq!(mem, (mem_kb * packages as u64 + extra) * 1024);
        eq!(h.numa_inferred, numa == NumaForm::Absent);
        match numa {
            NumaForm::Absent => {
                eq!(h.numa_nodes.len(), 1);
                check!(h.notes.iter().any(|x| x.contains("inferred")), "{:?}", h.notes);
            }
            NumaForm::Repeated(k) => {
                eq!(h.numa_nodes.len() as u32, packages);
                for i in 0..k {
                    let id = format!("NUMA node {} lists the same CPUs", packages + i);
                    check!(h.notes.iter().any(|x| x.contains(&id)), "{:?}", h.notes);
                }
            }
            NumaForm::Overlap => {
                eq!(h.numa_nodes.len() as u32, packages + 1);
                check!(h.numa_node(packages).unwrap().is_cpuless());
                if packages > 1 {
                    check!(h.notes.iter().any(|x| x.contains("kept in node 0")), "{:?}", h.notes);
                }
            }
            NumaForm::Nodes => eq!(h.numa_nodes.len() as u32, packages),
        }
        check!(real_cores || h.notes.iter().any(|x| x.contains("own core")), "{:?}", h.notes);
        eq!(form == TopoForm::CoreIdNoThreads, h.notes.iter().any(|x| x.contains("(physical_package_id, core_id)")), "{:?}", h.notes);
    }
}
