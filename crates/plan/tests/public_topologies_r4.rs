//! The planner on the fourth collection of public host topologies (issue 26), the files of
//! `crates/topo/tests/data/public4/` (README.md there names each source and its model).

use std::path::{Path, PathBuf};

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};
use topo::{CpuSet, Host};

const GIB: u64 = 1 << 30;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topo/tests/data/public4")
}

fn hosts() -> Vec<(String, Host)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("crates/topo/tests/data/public4")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    files
        .into_iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let h = topo::load_path(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, h)
        })
        .collect()
}

fn request(vcpus: u32, memory_bytes: u64, devices: Vec<String>) -> Request {
    Request {
        name: None,
        vcpus,
        memory_bytes,
        devices,
        profile: Profile::Gaming,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    }
}

fn core_of(h: &Host, cpu: u32) -> &topo::Core {
    &h.cores[h.pu(cpu).expect("a host PU").core as usize]
}

/// The node's whole cores that no housekeeping CPU touches, and whether its memory (where
/// known) holds `bytes` with the host's reserve (max(2 GiB, 5 %)) left.
fn room(h: &Host, node: u32, host_cpus: &CpuSet, bytes: u64) -> (usize, bool) {
    let n = h.numa_node(node).expect("node");
    let free: usize = h
        .cores
        .iter()
        .filter(|c| c.pus.is_subset(&n.cpus) && !c.pus.intersects(host_cpus))
        .map(|c| c.pus.len())
        .sum();
    let mem = n
        .memory_bytes
        .is_none_or(|m| m.saturating_sub(bytes) >= (2 * GIB).max(m / 20));
    (free, mem)
}

/// The plan's invariants on one host; `Err` names the broken one.
fn check(h: &Host, req: &Request, p: &Plan) -> Result<(), String> {
    let guest = p.guest_cpus();
    if p.vcpus.len() != req.vcpus as usize || guest.len() != req.vcpus as usize {
        return Err(format!(
            "{} vCPUs on {guest} for {}",
            p.vcpus.len(),
            req.vcpus
        ));
    }
    if guest.iter().any(|c| h.pu(c).is_none()) {
        return Err(format!("guest CPUs {guest} not all the host's"));
    }
    // housekeeping left, and no core split between the guest and the host side
    if p.host_cpus.is_empty() || p.host_cpus.intersects(&guest) {
        return Err(format!(
            "housekeeping {} against guest {guest}",
            p.host_cpus
        ));
    }
    let host_side = p.host_cpus.union(&p.emulator_cpus).union(&p.iothread_cpus);
    for c in guest.iter() {
        if core_of(h, c).pus.intersects(&host_side) {
            return Err(format!(
                "core of CPU {c} split with the host side {host_side}"
            ));
        }
    }
    // siblings together: the guest's threads of a core are one guest core
    let t = p.guest_topology;
    if t.sockets * t.dies * t.cores * t.threads != req.vcpus {
        return Err(format!("guest topology {t:?}"));
    }
    if t.threads > 1 {
        for group in p.vcpus.chunks(t.threads as usize) {
            if group
                .iter()
                .any(|v| core_of(h, v.cpu).id != core_of(h, group[0].cpu).id)
            {
                return Err(format!("vCPUs {group:?} are not one core's threads"));
            }
        }
    }
    // one node's cores when the VM fits a node: the device's node first
    let nodes: std::collections::BTreeSet<u32> =
        guest.iter().filter_map(|c| h.pu(c)?.numa).collect();
    let fits = |n: u32| {
        let (free, mem) = room(h, n, &p.host_cpus, req.memory_bytes);
        free >= req.vcpus as usize && mem
    };
    let dev_node = p
        .devices
        .iter()
        .find_map(|d| d.numa.as_ref().filter(|n| n.len() == 1).map(|n| n[0]));
    let spans = match dev_node {
        Some(n) if fits(n) => nodes.iter().ne([n].iter()) || p.memory.host_nodes != vec![n],
        _ => h.numa_nodes.iter().any(|n| fits(n.os_index)) && nodes.len() != 1,
    };
    if spans {
        return Err(format!(
            "a node ({dev_node:?} first) has room; guest on {nodes:?}, memory on {:?}",
            p.memory.host_nodes
        ));
    }
    if p.rationale.is_empty() {
        return Err("no rationale".into());
    }
    Ok(())
}

fn plan_ok(name: &str, h: &Host, req: &Request) -> Plan {
    let p = plan::plan(req, h, &[]).unwrap_or_else(|e| panic!("{name}: {req:?}: {e}"));
    if let Err(e) = check(h, req, &p) {
        panic!("{name}: {} vCPUs {:?}: {e}", req.vcpus, req.devices);
    }
    p
}

#[test]
fn a_vm_with_each_gpu_and_without_gets_a_valid_plan_on_every_host() {
    let mut plans = 0;
    for (name, h) in hosts() {
        for vcpus in [2, 4, 8] {
            plan_ok(&name, &h, &request(vcpus, 4 * GIB, vec![]));
            plans += 1;
        }
        for gpu in h.gpus() {
            plan_ok(&name, &h, &request(4, 4 * GIB, vec![gpu.bdf.clone()]));
            plans += 1;
        }
    }
    assert!(plans >= 50, "{plans}");
}

/// (file, GPU, the node its VM lands on)
const GPU_NODES: &[(&str, &str, u32)] = &[
    ("r4-power8-nvlink.xml", "000b:01:00.0", 1),
    ("r4-westmere-sl390s.xml", "0000:06:00.0", 0),
    ("r4-westmere-sl390s.xml", "0000:14:00.0", 1),
    ("r4-lassen-ac922.xml", "0004:05:00.0", 0),
    ("r4-lassen-ac922.xml", "0035:03:00.0", 8),
    ("r4-thunderx2-apollo70.v1.xml", "0000:02:00.0", 0),
    ("r4-thunderx2-apollo70.v1.xml", "0000:82:00.0", 1),
    ("r4-deep-dam01.v1.xml", "0000:af:00.0", 1),
];

#[test]
fn each_gpu_brings_its_vm_to_its_node() {
    let hosts = hosts();
    for &(file, gpu, node) in GPU_NODES {
        let (_, h) = hosts.iter().find(|(n, _)| n == file).unwrap();
        let p = plan_ok(file, h, &request(8, 8 * GIB, vec![gpu.into()]));
        for c in p.guest_cpus().iter() {
            assert_eq!(h.pu(c).unwrap().numa, Some(node), "{file} {gpu}: CPU {c}");
        }
        assert_eq!(p.memory.host_nodes, vec![node], "{file} {gpu}");
    }
    // GPUs local to the whole machine (host bridges under the Machine): any one node
    let (_, h) = hosts
        .iter()
        .find(|(n, _)| n == "r4-juropa3-j3c053.v1.xml")
        .unwrap();
    let p = plan_ok(
        "j3c053",
        h,
        &request(8, 16 * GIB, vec!["0000:82:00.0".into()]),
    );
    let nodes: std::collections::BTreeSet<_> = p
        .guest_cpus()
        .iter()
        .map(|c| h.pu(c).unwrap().numa)
        .collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
}

#[test]
fn odd_shapes_are_planned_as_their_cores_allow() {
    let hosts = hosts();
    let host = |f: &str| &hosts.iter().find(|(n, _)| n == f).unwrap().1;
    // GB10: the X925 performance cores, in one L3
    let h = host("r4-dgx-spark-gb10.v3.xml");
    let p = plan_ok("gb10", h, &request(4, 8 * GIB, vec![]));
    let perf = &h
        .cpu_kinds
        .iter()
        .find(|k| k.label == "performance")
        .unwrap()
        .cpus;
    assert!(p.guest_cpus().is_subset(perf), "{}", p.guest_cpus());
    let l3: std::collections::BTreeSet<_> =
        p.guest_cpus().iter().map(|c| h.pu(c).unwrap().l3).collect();
    assert_eq!(l3.len(), 1);
    // Knights Corner: the core of PU 0 (0,241-243) is the host's, the guest a whole core
    let h = host("r4-knc-se10p.xml");
    let p = plan_ok("knc", h, &request(4, 2 * GIB, vec![]));
    assert!([0, 241, 242, 243].iter().all(|&c| p.host_cpus.contains(c)));
    assert_eq!(p.guest_topology.threads, 4);
    // 8 Opteron nodes of 2 cores: 4 vCPUs take two nodes of one group (distance 16)
    let h = host("r4-opteron-8n-4distances.xml");
    let p = plan_ok("opteron", h, &request(4, 4 * GIB, vec![]));
    let nodes: Vec<u32> = {
        let s: std::collections::BTreeSet<u32> = p
            .guest_cpus()
            .iter()
            .filter_map(|c| h.pu(c).unwrap().numa)
            .collect();
        s.into_iter().collect()
    };
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_eq!(h.distance(nodes[0], nodes[1]), Some(16), "{nodes:?}");
    // SNC4 hybrid: vCPUs on a DRAM node's cores, never "on" an HBM node
    let h = host("r4-knl-heteromem.xml");
    let p = plan_ok("knl", h, &request(4, GIB / 2, vec![]));
    for c in p.guest_cpus().iter() {
        assert!(h.pu(c).unwrap().numa.is_some_and(|n| n < 4));
    }
}
