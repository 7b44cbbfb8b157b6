//! Tenants' hugepages count once, on the tenant's own nodes: named (plan JSON, `<numatune>`),
//! else where its CPUs are, else spread evenly as a stated assumption. Tenants pinned to
//! CPUs or nodes the host lacks are refused; devices it does not list are warned about.
//! Real two-node topologies: `32em64t-2n8c2t-pci-normalio.xml` (2 × 32 GiB) and
//! `cts1-pascal.xml` (2 × 126 GiB, two GPUs on node 0).

mod common;

use plan::context::Context;
use plan::{GuestOs, HugepagePolicy, Profile, Request, Tenant, TenantHugepages};
use proptest::prelude::*;
use topo::{CpuSet, Host};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn host(name: &str) -> Host {
    let p = common::topology_dir().join(name);
    topo::load_path(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn req(vcpus: u32, memory: u64) -> Request {
    Request {
        name: Some("new".into()),
        vcpus,
        memory_bytes: memory,
        devices: vec![],
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        // these tenants pin CPU 0 (the default housekeeping core): accept the move, as a user
        // would with --move-host-cpus; what is tested here is memory accounting
        move_host_cpus: true,
        threads: plan::ThreadPolicy::Auto,
    }
}

fn tenant(cpus: &str, node: Option<u32>, bytes: u64) -> Tenant {
    Tenant {
        name: "big".into(),
        cpus: if cpus.is_empty() {
            CpuSet::new()
        } else {
            CpuSet::parse_list(cpus).unwrap()
        },
        emulator_cpus: CpuSet::new(),
        host_cpus: None,
        devices: vec![],
        hugepages: vec![TenantHugepages {
            node,
            size_kb: 2048,
            pages: bytes / (2 * MIB),
        }],
        notes: vec![],
    }
}

fn node_memory(h: &Host, n: u32) -> u64 {
    h.numa_node(n).and_then(|n| n.memory_bytes).unwrap()
}

/// Bytes the planner sees free on one node.
fn capacity(h: &Host, tenants: &[Tenant], n: u32) -> u64 {
    let ctx = Context::new(&req(1, GIB), h, tenants).expect("context");
    ctx.memory.capacity(&[n]).expect("known size")
}

#[test]
fn a_tenant_on_one_node_leaves_the_other_free() {
    let h = host("32em64t-2n8c2t-pci-normalio.xml");
    let held = 30 * GIB + GIB / 2;
    // named node (plan JSON, <numatune nodeset='0'>), or found through its CPUs on node 0
    for t in [
        tenant("0-3", Some(0), held),
        tenant("0-3,16-19", None, held),
    ] {
        assert_eq!(
            capacity(&h, std::slice::from_ref(&t), 0),
            node_memory(&h, 0) - held
        );
        assert_eq!(
            capacity(&h, std::slice::from_ref(&t), 1),
            node_memory(&h, 1)
        );
        let p = plan::plan(&req(4, 8 * GIB), &h, std::slice::from_ref(&t)).expect("8G fits");
        assert_eq!(p.memory.host_nodes, vec![1], "{:?}", p.rationale);
        assert!(p
            .rationale
            .iter()
            .any(|r| r.contains("tenant \"big\" holds") && r.contains("on node 0")));
        if t.hugepages[0].node.is_none() {
            assert!(p.rationale.iter().any(|r| r.contains("where its CPUs are")));
        }
    }
    // no node, no CPUs: an even split, said as an assumption; 8G still fits
    let t = tenant("", None, held);
    let half = held / 2;
    assert_eq!(
        capacity(&h, std::slice::from_ref(&t), 0),
        node_memory(&h, 0) - half
    );
    assert_eq!(
        capacity(&h, std::slice::from_ref(&t), 1),
        node_memory(&h, 1) - half
    );
    let p = plan::plan(&req(4, 8 * GIB), &h, &[t]).expect("fits");
    assert!(p
        .rationale
        .iter()
        .any(|r| r.contains("assumed spread evenly")));
}

#[test]
fn a_24_gib_tenant_caps_only_its_node() {
    let h = host("cts1-pascal.xml");
    let t = tenant("18-21", None, 24 * GIB);
    assert_eq!(
        capacity(&h, std::slice::from_ref(&t), 0),
        node_memory(&h, 0)
    );
    assert_eq!(
        capacity(&h, std::slice::from_ref(&t), 1),
        node_memory(&h, 1) - 24 * GIB
    );
    // a VM as big as node 0 holds beside the host's reserve (125.5 GiB less 5 %) still goes
    // there, next to its GPU
    let mut r = req(8, 118 * GIB);
    r.devices = vec!["04:00.0".into()];
    let p = plan::plan(&r, &h, &[t]).expect("fits on node 0");
    assert_eq!(p.memory.host_nodes, vec![0]);
}

#[test]
fn tenants_from_elsewhere_are_refused_or_warned() {
    let h = host("32em64t-2n8c2t-pci-normalio.xml");
    let e = plan::plan(&req(2, GIB), &h, &[tenant("0-39", None, 0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("pins CPUs 32-39") && !e.contains('\n'), "{e}");
    let e = plan::plan(&req(2, GIB), &h, &[tenant("0", Some(3), GIB)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("NUMA node 3"), "{e}");
    let mut t = tenant("0", Some(0), GIB);
    t.devices = vec!["0000:99:00.0".into()];
    let p = plan::plan(&req(2, GIB), &h, &[t]).expect("plan");
    assert!(
        p.warnings.iter().any(|w| w.contains("0000:99:00.0")),
        "{:?}",
        p.warnings
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the tenants say, their pages are counted exactly once over the nodes, and a
    /// tenant that names a node or pins CPUs on one node touches that node only.
    #[test]
    fn pages_count_once(
        specs in proptest::collection::vec(
            (0u32..3, proptest::collection::btree_set(0u32..32, 0..6), 1u64..2048),
            1..5,
        )
    ) {
        let h = host("32em64t-2n8c2t-pci-normalio.xml");
        let node_of = |c: u32| h.pu(c).and_then(|p| p.numa).unwrap();
        let mut tenants = Vec::new();
        let mut total = 0u64;
        let mut want = [0u64; 2];
        let mut exact = true;
        for (i, (kind, cpus, pages)) in specs.iter().enumerate() {
            let cpus: CpuSet = cpus.iter().copied().collect();
            let node = match kind {
                0 => Some(0),
                1 => Some(1),
                _ => None,
            };
            let bytes = pages * 2 * MIB;
            total += bytes;
            match node {
                Some(n) => want[n as usize] += bytes,
                None => {
                    let nodes: std::collections::BTreeSet<u32> =
                        cpus.iter().map(node_of).collect();
                    if nodes.len() == 1 {
                        want[*nodes.iter().next().unwrap() as usize] += bytes;
                    } else {
                        exact = false;
                    }
                }
            }
            tenants.push(Tenant {
                name: format!("t{i}"),
                cpus,
                emulator_cpus: CpuSet::new(),
                host_cpus: None,
                devices: vec![],
                hugepages: vec![TenantHugepages { node, size_kb: 2048, pages: *pages }],
                notes: vec![],
            });
        }
        let used: Vec<u64> = (0..2)
            .map(|n| node_memory(&h, n) - capacity(&h, &tenants, n))
            .collect();
        prop_assert_eq!(used.iter().sum::<u64>(), total);
        if exact {
            prop_assert_eq!(used, want.to_vec());
        }
    }
}
