//! `vmtune topo` end to end: the live host, JSON keys, and bad `--topology` input, which must
//! give exit code 2 and exactly one stderr line naming the file and the problem.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{run, vmtune};

/// Run `vmtune topo --topology PATH` on bad input and check the failure contract. Returns
/// the error line.
fn fails(path: &Path, problem: &str) -> String {
    let p = path.to_str().unwrap();
    let out = run(&["topo", "--topology", p]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{p}: exit code; stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{p}: panic: {stderr}");
    assert!(out.stdout.is_empty(), "{p}: stdout not empty");
    let line = stderr.strip_suffix('\n').unwrap_or(&stderr);
    assert!(
        !line.is_empty() && !line.contains('\n'),
        "{p}: not one line: {stderr:?}"
    );
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(line.contains(name), "{p}: file not named: {line}");
    assert!(
        line.contains(problem),
        "{p}: expected {problem:?} in: {line}"
    );
    assert!(
        line.chars().all(|c| c == ' ' || !c.is_control()),
        "{line:?}"
    );
    line.to_string()
}

/// Deterministic pseudo-random bytes (xorshift).
fn junk(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies")
        .join(rel)
}

#[test]
fn missing_file() {
    let d = tempfile::tempdir().unwrap();
    fails(&d.path().join("no-such-host.xml"), "No such file");
}

#[test]
fn truncated_and_malformed_xml() {
    let d = tempfile::tempdir().unwrap();
    let full = std::fs::read(shared("hwloc/32intel64-2p8co2t+8ve.lstopo-2.9.0.xml")).unwrap();
    let cut = d.path().join("truncated.xml");
    std::fs::write(&cut, &full[..full.len() / 3]).unwrap();
    fails(&cut, "XML");
    let bad = d.path().join("malformed.xml");
    std::fs::write(
        &bad,
        "<topology version=\"2.0\"><object type=\"Machine\"><info></object></topology>",
    )
    .unwrap();
    fails(&bad, "XML");
}

#[test]
fn junk_archives() {
    let d = tempfile::tempdir().unwrap();
    // random bytes with an archive name
    let rnd = d.path().join("random.tar.bz2");
    std::fs::write(&rnd, junk(8192, 0x9e3779b97f4a7c15)).unwrap();
    fails(&rnd, "not a tar archive");
    // bzip2 magic, then garbage
    let mut fake = b"BZh91AY&SY".to_vec();
    fake.extend(junk(4096, 7));
    let fakebz = d.path().join("fake.tar.bz2");
    std::fs::write(&fakebz, fake).unwrap();
    fails(&fakebz, "bzip2");
    // a real snapshot cut in half
    let snap = std::fs::read(shared("sysfs/64amd64-4s2n4ca2co.tar.bz2")).unwrap();
    let half = d.path().join("half.tar.bz2");
    std::fs::write(&half, &snap[..snap.len() / 2]).unwrap();
    fails(&half, "truncated");
    // a valid tar of garbage files: no sysfs tree inside (built with Debian's tar)
    let src = d.path().join("garbage");
    std::fs::create_dir(&src).unwrap();
    for i in 0..3u64 {
        std::fs::write(src.join(format!("file{i}.bin")), junk(1000, i + 1)).unwrap();
    }
    let garbage = d.path().join("garbage.tar");
    let st = Command::new("tar")
        .arg("-cf")
        .arg(&garbage)
        .arg("-C")
        .arg(d.path())
        .arg("garbage")
        .status()
        .expect("tar");
    assert!(st.success());
    fails(&garbage, "not a sysfs snapshot");
    // an empty file
    let empty = d.path().join("empty.tgz");
    std::fs::write(&empty, b"").unwrap();
    fails(&empty, "empty");
}

#[test]
fn sysfs_trees_with_missing_files() {
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().join("emptyroot");
    std::fs::create_dir(&empty).unwrap();
    fails(&empty, "sys/devices/system/cpu: missing");

    let root = d.path().join("notopology");
    let cpu = root.join("sys/devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0")).unwrap();
    std::fs::create_dir_all(cpu.join("cpu1/topology")).unwrap();
    std::fs::write(cpu.join("online"), "0-1\n").unwrap();
    std::fs::write(cpu.join("cpu1/topology/core_cpus_list"), "1\n").unwrap();
    let line = fails(&root, "missing");
    assert!(line.contains("cpu0/topology/core_cpus"), "{line}");

    // a NUMA directory whose online list names a node that is not there
    std::fs::create_dir_all(cpu.join("cpu0/topology")).unwrap();
    std::fs::write(cpu.join("cpu0/topology/core_cpus_list"), "0\n").unwrap();
    let node = root.join("sys/devices/system/node");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    let line = fails(&root, "lists node 0");
    assert!(line.contains("node/node0"), "{line}");

    // the same tree completed loads
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-1\n").unwrap();
    let out = run(&["topo", "--topology", root.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pus"].as_array().unwrap().len(), 2);
    assert_eq!(v["numa_nodes"][0]["cpus"], serde_json::json!([0, 1]));
}

#[test]
fn live_host_tree() {
    let out = run(&["topo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("live:/"), "{stdout}");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n: usize = online
        .trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    assert!(stdout.contains(&format!("{n} PUs")), "{stdout}");
}

#[test]
fn live_host_json_has_the_design_keys() {
    let out = run(&["topo", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let pus = v["pus"].as_array().expect("pus");
    assert!(!pus.is_empty());
    for p in pus {
        for k in ["os_index", "core", "package", "numa", "l3", "kind"] {
            assert!(p.get(k).is_some(), "pus[].{k} missing: {p}");
        }
        assert!(p["os_index"].is_u64() && p["core"].is_u64());
    }
    let nodes = v["numa_nodes"].as_array().expect("numa_nodes");
    for n in nodes {
        for k in ["os_index", "cpus", "memory_bytes", "hugepages"] {
            assert!(n.get(k).is_some(), "numa_nodes[].{k} missing: {n}");
        }
        for hp in n["hugepages"].as_array().unwrap() {
            for k in ["size_kb", "total", "free"] {
                assert!(hp.get(k).is_some(), "hugepages[].{k} missing: {hp}");
            }
        }
    }
    let devs = v["pci_devices"].as_array().expect("pci_devices");
    assert!(!devs.is_empty(), "this host has PCI devices");
    for d in devs {
        for k in [
            "bdf",
            "vendor_id",
            "device_id",
            "class",
            "kind",
            "numa",
            "local_cpus",
        ] {
            assert!(d.get(k).is_some(), "pci_devices[].{k} missing: {d}");
        }
        let kind = d["kind"].as_str().unwrap();
        assert!(["gpu", "nic", "storage", "accelerator", "bridge", "other"].contains(&kind));
        assert!(d["numa"].is_null() || d["numa"].is_array());
    }
}

#[test]
fn snapshot_archive_json() {
    let p = shared("sysfs/32intel64-2p8co2t+8ve.tar.bz2");
    let out = run(&["topo", "--topology", p.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ves: Vec<&serde_json::Value> = v["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["class"] == "0x0b40")
        .collect();
    assert_eq!(ves.len(), 8);
    assert!(ves
        .iter()
        .all(|d| d["numa"] == serde_json::json!([0]) && d["kind"] == "accelerator"));
}

/// Memory-only NUMA nodes (Xeon Max HBM in flat mode, POWER9 GPU memory) name the CPU nodes
/// nearest to them by the distance matrix, ties included.
#[test]
fn memory_only_nodes_name_their_nearest_cpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies");
    let text = |p: PathBuf| {
        let out = run(&["topo", "--topology", p.to_str().unwrap()]);
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let max = text(dir.join("hwloc/topo.dp-intelmax01-flat.xml"));
    // HBM node 8 sits next to DRAM node 0 (SLIT 13), node 15 next to node 7
    assert!(
        max.contains("NUMANode N#8 (16 GiB, memory only, nearest CPUs: N#0, distance 13)"),
        "{max}"
    );
    assert!(
        max.contains("N#15 (16 GiB, memory only, nearest CPUs: N#7, distance 13)"),
        "{max}"
    );
    let power = text(dir.join("sysfs/nvidiagpunumanodes.tar.bz2"));
    assert!(
        power.contains("GPU memory, no CPUs, nearest CPUs: N#0 N#8, distance 80"),
        "{power}"
    );
}

/// `vmtune topo | head -1`: a reader that goes away ends a read-only command quietly (by
/// SIGPIPE, like a Unix filter), never with a panic.
#[test]
fn closed_output_pipe_is_not_a_panic() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    for args in [
        vec!["topo", "--topology", "builtin"],
        vec![],
        vec!["boot", "validate"],
    ] {
        let mut child = vmtune()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // read nothing: close our end at once, as `head -0` would
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // either it finished writing before we closed (exit 0) or SIGPIPE ended it
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?} {err}"
        );
    }
}

/// PCI functions whose ids the source does not give (the POWER9 snapshot keeps no `vendor`
/// files; hwloc shows "id=0000:0000") are "unknown id" in the tree and `null` in JSON, not
/// vendor 0x0000.
#[test]
fn unknown_pci_ids_are_said_to_be_unknown() {
    let p = shared("sysfs/nvidiagpunumanodes.tar.bz2");
    let p = p.to_str().unwrap();
    let out = run(&["topo", "--topology", p]);
    assert!(out.status.success());
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(!tree.contains("0000:0000"), "{tree}");
    assert!(tree.contains("GPU 0035:05:00.0 [unknown id]"), "{tree}");
    let out = run(&["topo", "--topology", p, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devs = v["pci_devices"].as_array().unwrap();
    assert_eq!(devs.len(), 6);
    for d in devs {
        assert!(d["vendor_id"].is_null() && d["device_id"].is_null(), "{d}");
    }
}

/// A source without cache information: the tree says the L3 count is unknown, not "0 L3".
#[test]
fn l3_count_unknown_without_cache_information() {
    let d = tempfile::tempdir().unwrap();
    let root = common::sysfs_without_caches(d.path());
    let out = run(&["topo", "--topology", root.to_str().unwrap()]);
    assert!(out.status.success());
    let tree = String::from_utf8(out.stdout).unwrap();
    let head = tree.lines().nth(1).unwrap();
    assert!(head.contains("2 cores, L3 unknown,"), "{head}");
    assert!(!tree.contains("0 L3"), "{tree}");
    // a source with caches keeps its count
    let out = run(&["topo", "--topology", "builtin"]);
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.lines().nth(1).unwrap().contains(" 1 L3,"), "{tree}");
}

fn vfio_snapshot(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vfio")
        .join(format!("{name}.tar.gz"))
        .to_string_lossy()
        .into_owned()
}

/// Issue 42, item 6: a GPU whose link trained at 2.5 of 16 GT/s (the RTX 5090) or at x4 of
/// x16 (the 4090) is said on its line of the tree, `"downgraded": true` with both figures in
/// JSON, and a warning of `plan --gpu`; the same desktop with healthy links is not.
#[test]
fn downgraded_pcie_links_in_topo_and_plan() {
    let snap = vfio_snapshot("desktop-pcie-downgraded");
    let out = run(&["topo", "--topology", &snap]);
    assert!(out.status.success());
    let tree = String::from_utf8(out.stdout).unwrap();
    let line = |bdf: &str| {
        tree.lines()
            .find(|l| l.contains(bdf))
            .unwrap_or_else(|| panic!("{bdf} not in {tree}"))
            .to_string()
    };
    assert!(
        line("GPU 0000:01:00.0").ends_with(", PCIe 2.5 GT/s x16 of 16 GT/s x16 DOWNGRADED"),
        "{tree}"
    );
    assert!(
        line("GPU 0000:02:00.0").ends_with(", PCIe 16 GT/s x4 of 16 GT/s x16 DOWNGRADED"),
        "{tree}"
    );
    assert!(!line("Storage 0000:05:00.0").contains("PCIe"), "{tree}");

    let v = common::ok_json(&["topo", "--topology", &snap, "--json"]);
    let dev = |bdf: &str| {
        v["pci_devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["bdf"] == bdf)
            .unwrap()
            .clone()
    };
    let l = &dev("0000:01:00.0")["link"];
    assert_eq!(l["downgraded"], true, "{l}");
    assert_eq!((&l["speed_gts"], &l["width"]), (&2.5.into(), &16.into()));
    assert_eq!(l["max_speed_gts"], 32.0, "the card's own maximum");
    assert_eq!(l["peer_max_speed_gts"], 16.0, "the port's: the link's");
    assert_eq!(dev("0000:02:00.0")["link"]["width"], 4);
    assert_eq!(dev("0000:02:00.0")["link"]["max_width"], 16);
    // the root port reports the same link: not a second finding
    let rp = &dev("0000:00:01.1")["link"];
    assert_eq!(rp["downgraded"], false);
    assert_eq!(rp["same_link_as"], "0000:01:00.0");

    let plan = |snap: &str, gpu: &str| {
        let v = common::ok_json(&[
            "plan",
            "--topology",
            snap,
            "--vcpus",
            "4",
            "--memory",
            "4G",
            "--gpu",
            gpu,
            "--json",
        ]);
        let w: Vec<String> = v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .filter(|w| w.contains("PCIe link"))
            .collect();
        w
    };
    let w = plan(&snap, "01:00.0");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("0000:01:00.0's PCIe link runs at 2.5 GT/s x16 of 16 GT/s x16"),
        "{w:?}"
    );
    assert!(w[0].contains("at idle"), "{w:?}");
    let w = plan(&snap, "02:00.0");
    assert!(w[0].contains("16 GT/s x4 of 16 GT/s x16"), "{w:?}");

    let healthy = vfio_snapshot("desktop-pcie-healthy");
    let out = run(&["topo", "--topology", &healthy]);
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(!tree.contains("DOWNGRADED"), "{tree}");
    let v = common::ok_json(&["topo", "--topology", &healthy, "--json"]);
    assert!(v["pci_devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["link"]["downgraded"] != true));
    assert!(plan(&healthy, "01:00.0").is_empty());
    assert!(plan(&healthy, "02:00.0").is_empty());
}
