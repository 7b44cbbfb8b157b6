//! Core, cache, die and package numbers are hwloc's logical indexes (`Core L#n` in `lstopo`):
//! the order of the objects in lstopo's own output, read here from the document order of every
//! lstopo XML export in `testdata/topologies/hwloc/` (a copy of shared/topologies; there are no
//! lstopo text dumps there) with a plain XML reader, not through the loader.
//!
//! The same order is checked for the sysfs loader two ways: on each sysfs snapshot that ships
//! with lstopo's export of it, and on a sysfs twin of every XML (its PU sets written out as
//! `topology/`, `cache/` and `node/` files), since the snapshots alone never number their
//! CPUs across packages.

use std::path::{Path, PathBuf};

use roxmltree::{Document, Node, ParsingOptions};
use topo::{CacheType, CpuSet, Host};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies")
        .join(rel)
}

/// Every lstopo XML export shipped with the topologies.
fn xml_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(shared("hwloc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    assert!(v.len() >= 21, "{v:?}");
    v
}

/// A level whose objects hwloc numbers L#0, L#1, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Core,
    Package,
    Die,
    /// Unified or data cache of this level.
    Cache(u8),
}

/// The level of an `<object>` as lstopo wrote it (v1: `Socket`, `Cache` with `depth`; v2:
/// `L3Cache` ...); instruction caches and everything else: none.
fn level_of(n: Node) -> Option<Level> {
    let t = n.attribute("type")?;
    let cache_level = |l: u8| {
        // cache_type 2 = instruction
        (n.attribute("cache_type") != Some("2")).then_some(Level::Cache(l))
    };
    match t {
        "Core" => Some(Level::Core),
        "Package" | "Socket" => Some(Level::Package),
        "Die" => Some(Level::Die),
        "Group" if n.attribute("subtype") == Some("Die") => Some(Level::Die),
        "L1Cache" => cache_level(1),
        "L2Cache" => cache_level(2),
        "L3Cache" => cache_level(3),
        "Cache" => cache_level(n.attribute("depth")?.parse().ok()?),
        _ => None,
    }
}

/// The PUs (os_index) under an object.
fn pus_under(n: Node) -> CpuSet {
    n.descendants()
        .filter(|d| d.has_tag_name("object") && d.attribute("type") == Some("PU"))
        .filter_map(|d| d.attribute("os_index")?.parse().ok())
        .collect()
}

/// lstopo's objects of `level`, in its order (L#0 first), as PU sets; objects without PUs
/// (none in these files) are skipped.
fn lstopo_order(path: &Path, level: Level) -> Vec<CpuSet> {
    let text = std::fs::read_to_string(path).unwrap();
    let opts = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(&text, opts).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("object") && level_of(*n) == Some(level))
        .map(pus_under)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The model's objects of `level`, in id order.
fn model_order(h: &Host, level: Level) -> Vec<CpuSet> {
    match level {
        Level::Core => {
            for (i, c) in h.cores.iter().enumerate() {
                assert_eq!(c.id as usize, i, "core ids are their positions");
            }
            h.cores.iter().map(|c| c.pus.clone()).collect()
        }
        Level::Package => {
            for (i, p) in h.packages.iter().enumerate() {
                assert_eq!(p.id as usize, i);
            }
            h.packages.iter().map(|p| p.cpus.clone()).collect()
        }
        Level::Die => h.dies.iter().map(|d| d.cpus.clone()).collect(),
        Level::Cache(l) => {
            let v: Vec<_> = h.caches_at(l).collect();
            for (i, c) in v.iter().enumerate() {
                assert_eq!(c.id as usize, i);
            }
            v.iter().map(|c| c.cpus.clone()).collect()
        }
    }
}

fn lists(v: &[CpuSet]) -> Vec<String> {
    v.iter().map(CpuSet::to_list_string).collect()
}

/// `got` numbers the objects lstopo numbers in lstopo's order. Where lstopo has fewer objects
/// of the level (PUs without a Core above them are single-PU cores in the model; a cache
/// merged into an identical one), those it has keep its relative order.
fn assert_same_order(what: &str, got: &[CpuSet], want: &[CpuSet]) {
    let got: Vec<CpuSet> = if got.len() == want.len() {
        got.to_vec()
    } else {
        got.iter().filter(|s| want.contains(s)).cloned().collect()
    };
    assert_eq!(lists(&got), lists(want), "{what}: not lstopo's L# order");
}

fn check_levels(name: &str, h: &Host, xml: &Path) {
    let want = lstopo_order(xml, Level::Core);
    assert!(!want.is_empty(), "{name}: no cores in the XML");
    assert_same_order(
        &format!("{name} cores"),
        &model_order(h, Level::Core),
        &want,
    );
    // each PU's core is the L# of the lstopo core holding it
    for p in &h.pus {
        if let Some(l) = want.iter().position(|c| c.contains(p.os_index)) {
            let core = &h.cores[p.core as usize];
            assert_eq!(core.pus, want[l], "{name}: PU {}", p.os_index);
        }
    }
    for level in [
        Level::Package,
        Level::Die,
        Level::Cache(3),
        Level::Cache(2),
        Level::Cache(1),
    ] {
        let want = lstopo_order(xml, level);
        if want.is_empty() {
            continue;
        }
        let got = model_order(h, level);
        assert_same_order(&format!("{name} {level:?}"), &got, &want);
    }
}

#[test]
fn hwloc_xml_numbers_as_lstopo() {
    for path in xml_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let h = topo::hwloc::load_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_levels(&name, &h, &path);
    }
}

/// The sysfs snapshots that ship with lstopo's export of themselves (`NAME.lstopo-*.xml`).
#[test]
fn sysfs_snapshots_number_as_their_lstopo_export() {
    let mut checked = 0;
    for e in std::fs::read_dir(shared("sysfs")).unwrap() {
        let snap = e.unwrap().path();
        let file = snap.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".tar.bz2") else {
            continue;
        };
        let Some(xml) = xml_files().into_iter().find(|x| {
            let n = x.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("{stem}.lstopo-"))
        }) else {
            continue;
        };
        let h = topo::sysfs::load_archive(&snap).unwrap_or_else(|e| panic!("{file}: {e}"));
        check_levels(&file, &h, &xml);
        checked += 1;
    }
    assert_eq!(checked, 2, "the two snapshots with an lstopo export");
}

/// Write the host's PU sets as a sysfs tree: what the kernel would show for it.
fn write_sysfs_twin(h: &Host, root: &Path) {
    let cpu = root.join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), format!("{}\n", h.all_cpus())).unwrap();
    for p in &h.pus {
        let c = cpu.join(format!("cpu{}", p.os_index));
        let t = c.join("topology");
        std::fs::create_dir_all(&t).unwrap();
        let core = h.cores.iter().find(|k| k.pus.contains(p.os_index)).unwrap();
        std::fs::write(t.join("core_cpus_list"), format!("{}\n", core.pus)).unwrap();
        if let Some(os) = core.os_index {
            std::fs::write(t.join("core_id"), format!("{os}\n")).unwrap();
        }
        if let Some(pkg) = h.packages.iter().find(|k| k.cpus.contains(p.os_index)) {
            std::fs::write(t.join("package_cpus_list"), format!("{}\n", pkg.cpus)).unwrap();
            let id = pkg.os_index.unwrap_or(pkg.id);
            std::fs::write(t.join("physical_package_id"), format!("{id}\n")).unwrap();
        }
        if let Some(die) = h.dies.iter().find(|k| k.cpus.contains(p.os_index)) {
            std::fs::write(t.join("die_cpus_list"), format!("{}\n", die.cpus)).unwrap();
        }
        let caches = h.caches.iter().filter(|k| k.cpus.contains(p.os_index));
        for (i, k) in caches.enumerate() {
            let d = c.join(format!("cache/index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            let ty = match k.cache_type {
                CacheType::Data => "Data",
                CacheType::Instruction => "Instruction",
                CacheType::Unified => "Unified",
            };
            std::fs::write(d.join("level"), format!("{}\n", k.level)).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("shared_cpu_list"), format!("{}\n", k.cpus)).unwrap();
        }
    }
    let node = root.join("sys/devices/system/node");
    std::fs::create_dir_all(&node).unwrap();
    let ids: CpuSet = h.numa_nodes.iter().map(|n| n.os_index).collect();
    std::fs::write(node.join("online"), format!("{ids}\n")).unwrap();
    for n in &h.numa_nodes {
        let d = node.join(format!("node{}", n.os_index));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), format!("{}\n", n.cpus)).unwrap();
    }
}

/// hwloc's Linux backend numbers by the same tree of packages, dies, NUMA nodes and caches:
/// a sysfs twin of each XML numbers as lstopo did. The Xeon R740 of memorysidecaches.xml
/// gives package 0 the even CPUs and each SNC node every fourth, so lstopo's Core L#1 is
/// CPU 4, not CPU 1.
#[test]
fn sysfs_twins_number_as_lstopo() {
    let dir = tempfile::tempdir().unwrap();
    for path in xml_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let xml = topo::hwloc::load_file(&path).unwrap();
        let root = dir.path().join(&name);
        write_sysfs_twin(&xml, &root);
        let h = topo::sysfs::load_root(&root).unwrap_or_else(|e| panic!("{name} twin: {e}"));
        check_levels(&format!("{name} (sysfs twin)"), &h, &path);
    }
}

/// The case by hand: lstopo's Core L#1 on the R740 is the core of CPU 4.
#[test]
fn interleaved_packages_follow_the_tree() {
    let h = topo::hwloc::load_file(&shared("hwloc/memorysidecaches.xml")).unwrap();
    assert!(h.cores[1].pus.contains(4), "{}", h.cores[1].pus);
    assert_eq!(h.pu(4).unwrap().core, 1);
    // PU 1 is in package 1: its core comes after package 0's twenty
    assert_eq!(h.pu(1).unwrap().core, 20);
}
