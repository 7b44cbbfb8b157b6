//! Defects a review found, each reproduced on a shared real topology (or the built-in host)
//! before it was fixed.

mod common;

use std::path::Path;

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request};
use topo::Host;

use common::GIB;

/// A shared hwloc topology by file name.
fn shared(name: &str) -> Host {
    let path = common::topology_dir().join(name);
    topo::load_path(Path::new(&path))
        .unwrap_or_else(|e| panic!("shared topology {name} does not load: {e}"))
}

fn request(vcpus: u32, memory_bytes: u64) -> Request {
    Request {
        name: Some("review".into()),
        vcpus,
        memory_bytes,
        devices: vec![],
        profile: Profile::Gaming,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
    }
}

fn plan_ok(req: &Request, host: &Host) -> Plan {
    plan::plan(req, host, &[]).unwrap_or_else(|e| panic!("{req:?}: {e}"))
}

/// Σ of the SLIT distances between the nodes of a set, both directions.
fn pair_distance(host: &Host, nodes: &[u32]) -> u64 {
    let d = host.distances.as_ref().expect("host has a distance matrix");
    let mut sum = 0;
    for &a in nodes {
        for &b in nodes {
            if a != b {
                sum += u64::from(d.get(a, b).expect("distance"));
            }
        }
    }
    sum
}

/// 24 nodes of 8 two-thread cores, SLIT 50 between the two nodes of a pair (0-1, 2-3, …) and
/// 65/79 beyond. 18 vCPUs need two nodes: the planner took nodes 1,2 (distance 65, their CPUs
/// are the lowest free ones) over a pair at distance 50 with the same room.
#[test]
fn a_vm_spanning_nodes_takes_the_nearest_ones() {
    let host = shared("192em64t-24n8c2t.xml");
    let mut req = request(18, 4 * GIB);
    req.hugepages = HugepagePolicy::None;
    let p = plan_ok(&req, &host);
    let nodes = &p.memory.host_nodes;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_eq!(
        pair_distance(&host, nodes),
        100,
        "nodes {nodes:?} are not a nearest pair (SLIT 50)"
    );
    assert!(
        p.rationale
            .iter()
            .any(|r| r.contains("nearest each other") && r.contains("NUMA distance 50")),
        "{:?}",
        p.rationale
    );
}
