//! The benchmark matrix's four layouts on every shared topology and on generated hosts:
//! each is what its name says (one vCPU per core, cells on their nodes, siblings together),
//! nothing lands on a tenant's or the host's CPUs, and every fallback is said.

mod common;

use plan::layouts::{matrix, LayoutKind, Matrix};
use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request, Tenant};
use proptest::prelude::*;
use topo::{CpuSet, Host};

fn request(vcpus: u32, gib: u64, devices: Vec<String>) -> Request {
    Request {
        name: Some("matrix".into()),
        vcpus,
        memory_bytes: gib << 30,
        devices,
        profile: Profile::Compute,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    }
}

fn core_of(host: &Host, cpu: u32) -> u32 {
    host.pu(cpu).expect("pinned CPU is in the host").core
}

fn node_of(host: &Host, cpu: u32) -> Option<u32> {
    host.pu(cpu).and_then(|p| p.numa)
}

fn said(m: &Matrix, kind: LayoutKind, what: &str) -> bool {
    m.layouts
        .iter()
        .find(|l| l.kind == kind)
        .is_some_and(|l| l.notes.iter().any(|n| n.contains(what)))
}

/// What every layout of `m` must be on `host` for `req` beside `tenants`.
fn check(host: &Host, req: &Request, tenants: &[Tenant], m: &Matrix, label: &str) {
    let taken: CpuSet = plan::taken_cpus(tenants);
    let n = req.vcpus as usize;
    assert_eq!(m.layouts.len(), LayoutKind::ALL.len(), "{label}");
    let pin_numa = m
        .layouts
        .iter()
        .find(|l| l.kind == LayoutKind::PinNuma)
        .and_then(|l| l.plan.as_ref());
    for l in &m.layouts {
        let Some(p) = &l.plan else {
            assert!(
                l.kind == LayoutKind::Default || (l.kind == LayoutKind::Plan && m.chosen.is_none()),
                "{label} {}: no plan",
                l.kind.name()
            );
            continue;
        };
        let k = l.kind.name();
        let n = if l.kind == LayoutKind::SmtDouble {
            2 * n
        } else {
            n
        };
        assert_eq!(p.vcpus.len(), n, "{label} {k}: vCPU count");
        let t = &p.guest_topology;
        assert_eq!(
            (t.sockets * t.dies * t.cores * t.threads) as usize,
            n,
            "{label} {k}: topology {t:?}"
        );
        let overcommitted = l.notes.iter().any(|s| s.contains("overcommitted"));
        let cpus: Vec<u32> = p.vcpus.iter().map(|v| v.cpu).collect();
        for (i, v) in p.vcpus.iter().enumerate() {
            assert_eq!(v.vcpu as usize, i, "{label} {k}");
            assert!(
                host.pu(v.cpu).is_some(),
                "{label} {k}: CPU {} unknown",
                v.cpu
            );
            assert!(!taken.contains(v.cpu), "{label} {k}: tenant CPU {}", v.cpu);
            if !l.notes.iter().any(|s| s.contains("share them")) {
                assert!(
                    !p.host_cpus.contains(v.cpu) && !p.emulator_cpus.contains(v.cpu),
                    "{label} {k}: vCPU {i} on housekeeping/emulator CPU {}",
                    v.cpu
                );
            }
        }
        let distinct: CpuSet = cpus.iter().copied().collect();
        assert_eq!(
            distinct.len() == n,
            !overcommitted && !l.notes.iter().any(|s| s.contains("share one host CPU")),
            "{label} {k}: distinct CPUs {} of {n}, notes {:?}",
            distinct.len(),
            l.notes
        );
        match l.kind {
            LayoutKind::Pin => {
                assert!(p.guest_numa.is_empty(), "{label} pin: guest NUMA");
                assert_eq!(t.threads, 1, "{label} pin");
                one_per_core(host, &cpus, l, label);
            }
            LayoutKind::PinNuma | LayoutKind::PinNumaSmt => {
                cells(host, req, p, l, label);
                if l.kind == LayoutKind::PinNuma {
                    assert_eq!(t.threads, 1, "{label} {k}");
                    one_per_core(host, &cpus, l, label);
                } else {
                    siblings_together(host, p, l, label);
                }
            }
            LayoutKind::Plan => {
                let chosen = m
                    .chosen
                    .as_ref()
                    .expect("a plan layout has the planner's plan");
                assert_eq!(p.vcpus, chosen.vcpus, "{label} plan: the planner's pins");
                assert_eq!(p.guest_numa, chosen.guest_numa, "{label} plan: cells");
                assert_eq!(p.guest_topology, chosen.guest_topology, "{label} plan");
                assert_eq!(
                    p.memory.host_nodes, chosen.memory.host_nodes,
                    "{label} plan"
                );
            }
            LayoutKind::PinSpan => {
                let from = pin_numa.expect("pin-numa under pin-span");
                assert_eq!(p.vcpus, from.vcpus, "{label} pin-span: pin-numa's CPUs");
                assert_eq!(
                    p.memory.host_nodes, from.memory.host_nodes,
                    "{label} pin-span"
                );
                assert!(
                    p.guest_numa.is_empty(),
                    "{label} pin-span: the guest sees one node"
                );
                assert_eq!(t.threads, 1, "{label} pin-span");
            }
            LayoutKind::SmtDouble => {
                let from = pin_numa.expect("pin-numa under smt-double");
                assert_eq!(t.threads, 2, "{label} smt-double: threads");
                for (i, v) in from.vcpus.iter().enumerate() {
                    let pair = &p.vcpus[2 * i..2 * i + 2];
                    assert_eq!(
                        pair[0].cpu, v.cpu,
                        "{label} smt-double: pin-numa's CPU first"
                    );
                    assert_eq!(
                        core_of(host, pair[1].cpu),
                        core_of(host, v.cpu),
                        "{label} smt-double: the pair on one core"
                    );
                }
                assert_eq!(
                    p.guest_numa.len(),
                    from.guest_numa.len(),
                    "{label} smt-double"
                );
                for (c, f) in p.guest_numa.iter().zip(&from.guest_numa) {
                    assert_eq!(c.vcpus.len(), 2 * f.vcpus.len(), "{label} smt-double cell");
                    assert_eq!(c.host_nodes, f.host_nodes, "{label} smt-double cell node");
                    assert_eq!(
                        c.memory_bytes, f.memory_bytes,
                        "{label} smt-double cell memory"
                    );
                }
            }
            LayoutKind::Default => unreachable!(),
        }
    }
}

fn one_per_core(host: &Host, cpus: &[u32], l: &plan::layouts::Layout, label: &str) {
    if l.notes.iter().any(|s| {
        s.contains("overcommitted") || s.contains("second threads") || s.contains("share them")
    }) {
        return;
    }
    let cores: std::collections::BTreeSet<u32> = cpus.iter().map(|&c| core_of(host, c)).collect();
    assert_eq!(
        cores.len(),
        cpus.len(),
        "{label} {}: two vCPUs on one core",
        l.kind.name()
    );
}

fn cells(host: &Host, req: &Request, p: &Plan, l: &plan::layouts::Layout, label: &str) {
    let k = l.kind.name();
    assert!(
        p.guest_numa.len() >= 2,
        "{label} {k}: cells {:?}",
        p.guest_numa
    );
    let mut all = CpuSet::new();
    for c in &p.guest_numa {
        assert!(!c.vcpus.intersects(&all), "{label} {k}: cells overlap");
        all = all.union(&c.vcpus);
        for v in c.vcpus.iter() {
            let cpu = p.vcpus[v as usize].cpu;
            assert_eq!(
                node_of(host, cpu).unwrap_or(0),
                c.host_nodes[0],
                "{label} {k}: vCPU {v} of cell {} on CPU {cpu}",
                c.cell
            );
        }
    }
    assert_eq!(
        all.len(),
        req.vcpus as usize,
        "{label} {k}: cells cover the vCPUs"
    );
    assert_eq!(
        p.guest_numa.iter().map(|c| c.memory_bytes).sum::<u64>(),
        req.memory_bytes,
        "{label} {k}: memory"
    );
    let one_node = p.guest_numa[0].host_nodes == p.guest_numa[1].host_nodes;
    assert_eq!(
        one_node,
        l.notes.iter().any(|s| s.contains("both on node")),
        "{label} {k}: a shared node is said"
    );
}

fn siblings_together(host: &Host, p: &Plan, l: &plan::layouts::Layout, label: &str) {
    let t = p.guest_topology.threads as usize;
    if t < 2 {
        assert!(
            l.notes.iter().any(|s| s.contains("1 thread per core")),
            "{label}: threads=1 unsaid"
        );
        return;
    }
    for pair in p.vcpus.chunks(t) {
        let cores: std::collections::BTreeSet<u32> =
            pair.iter().map(|v| core_of(host, v.cpu)).collect();
        if !l.notes.iter().any(|s| s.contains("overcommitted")) {
            assert_eq!(
                cores.len(),
                1,
                "{label} pin-numa-smt: guest core {pair:?} spans host cores"
            );
        }
    }
}

#[test]
fn every_shared_topology_gets_the_four_layouts() {
    let hosts = common::shared_hosts();
    assert!(hosts.len() >= 20, "shared topologies: {}", hosts.len());
    for (name, host) in &hosts {
        for vcpus in [2, 4, 8] {
            let gpu: Vec<String> = host.gpus().take(1).map(|g| g.bdf.clone()).collect();
            let req = request(vcpus, 4, gpu);
            let m = matrix(&req, host, &[], &LayoutKind::ALL)
                .unwrap_or_else(|e| panic!("{name} {vcpus}: {e}"));
            check(host, &req, &[], &m, &format!("{name} {vcpus} vCPUs"));
            if m.chosen.is_some() {
                assert_eq!(
                    m.chosen_kind,
                    Some(LayoutKind::Plan),
                    "{name}: the plan is measured"
                );
            }
            let study = matrix(&req, host, &[], &LayoutKind::STUDY).unwrap();
            if let Some(p) = &study.chosen {
                assert_eq!(study.chosen_kind, Some(plan::layouts::kind_of(p)));
            }
        }
    }
}

#[test]
fn a_two_node_smt_host_spreads_and_pairs() {
    let hosts = common::shared_hosts();
    // a two-socket host with SMT and spare cores on both nodes
    let (name, host) = hosts
        .iter()
        .find(|(_, h)| {
            h.numa_nodes.iter().filter(|n| !n.is_cpuless()).count() == 2
                && h.cores.iter().all(|c| c.pus.len() == 2)
                && h.cores.len() >= 32
        })
        .expect("a two-node SMT host among the shared topologies");
    let req = request(8, 8, vec![]);
    let m = matrix(&req, host, &[], &LayoutKind::ALL).unwrap();
    let numa = m.layouts[2].plan.as_ref().unwrap();
    let nodes: Vec<u32> = numa.guest_numa.iter().map(|c| c.host_nodes[0]).collect();
    assert_eq!(nodes.len(), 2, "{name}");
    assert_ne!(nodes[0], nodes[1], "{name}: two host nodes");
    assert!(
        m.layouts.iter().all(|l| l.notes.is_empty()),
        "{name}: {:?}",
        m.layouts
    );
    let smt = m.layouts[3].plan.as_ref().unwrap();
    assert_eq!(smt.guest_topology.threads, 2, "{name}");
    assert_eq!(smt.guest_topology.sockets, 2, "{name}");
    // pin-numa-smt uses half pin-numa's cores
    let cores = |p: &Plan| {
        p.vcpus
            .iter()
            .map(|v| core_of(host, v.cpu))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!(cores(numa), 8, "{name}");
    assert_eq!(cores(smt), 4, "{name}");
}

#[test]
fn a_host_smaller_than_the_vm_says_so_in_every_layout() {
    // the CI machine's shape: one node, two CPUs, no SMT
    let s = common::Shape {
        packages: 1,
        nodes_per_package: 1,
        l3_per_node: 1,
        cores_per_l3: 2,
        smt: 1,
        siblings_far: false,
        e_cores_per_l3: 0,
        e_cluster: false,
        lp_cores: 0,
        node_gib: 16,
        free_pages: vec![],
        gpu_nodes: vec![],
        with_distances: false,
        tsc_stable: Some(true),
    };
    let host = common::synthetic(&s);
    let req = request(4, 1, vec![]);
    let m = matrix(&req, &host, &[], &LayoutKind::ALL).unwrap();
    check(&host, &req, &[], &m, "2-CPU host");
    for kind in [LayoutKind::Pin, LayoutKind::PinNuma] {
        assert!(said(&m, kind, "overcommitted"), "{kind:?}: {:?}", m.layouts);
    }
    assert!(said(&m, LayoutKind::PinNuma, "both on node 0"));
    assert!(said(&m, LayoutKind::PinNumaSmt, "share one host CPU"));
    assert!(m.chosen.is_none() || !m.chosen_note.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn generated_hosts_with_tenants(
        shape in common::shape(256),
        vcpus in 1u32..24,
        tenants in 0usize..3,
    ) {
        let host = common::synthetic(&shape);
        let ten = common::tenants_for(&host, tenants, 2);
        let req = request(vcpus, 2, vec![]);
        match matrix(&req, &host, &ten, &LayoutKind::ALL) {
            Ok(m) => check(&host, &req, &ten, &m, &format!("{shape:?} {vcpus}")),
            Err(e) => prop_assert!(
                e.to_string().contains("no CPU left") || (vcpus < 2 && e.to_string().contains("at least 2 vCPUs")),
                "{e}"
            ),
        }
    }
}

/// pin-numa split its vCPUs evenly over the nodes whatever each had free: on the 2-node,
/// 8-core-a-node host of hwloc's tests with a tenant holding 5 of node 1's cores, 8 vCPUs as
/// 4 + 4 put one on a second thread of node 1 while node 0 had cores to spare. The layouts
/// are the planner's placements now: 5 + 3, a core each (node 0 keeps the housekeeping and
/// the emulator cores); pin-numa-smt pairs siblings on the same nodes.
#[test]
fn pin_numa_splits_by_free_cores_as_the_planner_does() {
    let host =
        topo::load_path(&common::topology_dir().join("32em64t-2n8c2t-pci-normalio.xml")).unwrap();
    let node1: Vec<u32> = host.numa_nodes[1].cpus.iter().collect();
    assert_eq!(node1.len(), 16);
    let tenant = Tenant {
        name: "five cores of node 1".into(),
        cpus: host
            .cores
            .iter()
            .filter(|c| c.pus.iter().all(|p| node1.contains(&p)))
            .take(5)
            .flat_map(|c| c.pus.iter())
            .collect(),
        ..Tenant::default()
    };
    let tenants = [tenant];
    let get = |m: &Matrix, k: LayoutKind| {
        let l = m.layouts.iter().find(|l| l.kind == k).unwrap();
        assert!(l.notes.is_empty(), "{k:?}: {:?}", l.notes);
        l.plan.clone().unwrap()
    };
    let cores = |p: &Plan| -> std::collections::BTreeSet<u32> {
        p.vcpus.iter().map(|v| core_of(&host, v.cpu)).collect()
    };
    let m = matrix(&request(8, 8, vec![]), &host, &tenants, &LayoutKind::ALL).unwrap();
    check(
        &host,
        &request(8, 8, vec![]),
        &tenants,
        &m,
        "8 vCPUs beside a tenant",
    );
    let numa = get(&m, LayoutKind::PinNuma);
    assert_eq!(cores(&numa).len(), 8, "a core per vCPU: {:?}", numa.vcpus);
    let per_cell: Vec<usize> = numa.guest_numa.iter().map(|c| c.vcpus.len()).collect();
    assert_eq!(per_cell, vec![5, 3], "{:?}", numa.guest_numa);
    for c in &numa.guest_numa {
        for v in c.vcpus.iter() {
            assert_eq!(
                node_of(&host, numa.vcpus[v as usize].cpu),
                Some(c.host_nodes[0])
            );
        }
    }
    let pin = get(&m, LayoutKind::Pin);
    assert_eq!(cores(&pin).len(), 8);
    assert!(pin.guest_numa.is_empty());
    let smt = get(&m, LayoutKind::PinNumaSmt);
    assert_eq!(smt.guest_topology.threads, 2);
    assert_eq!(cores(&smt).len(), 4);
    assert_eq!(smt.guest_numa.len(), 2);
}
