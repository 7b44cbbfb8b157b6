//! Sibling pairs or a core per vCPU (`--threads auto|pack|spread`), and vCPUs split across
//! nodes by their free cores. The big VM is the r/VFIO pinning benchmark's: a 4-node host of
//! 96 cores / 192 threads (the Xeon Platinum 8558 shape), written by
//! `lstopo-no-graphics -i "pack:2 numa:2(memory=512GB) core:24 pu:2" --of xml`.

mod common;

use std::collections::BTreeSet;

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request, ThreadPolicy, Threads};
use topo::Host;

fn big_host() -> Host {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/xeon-8558-shape-4n96c2t.xml");
    topo::load_path(&path).expect("the 4-node fixture loads")
}

fn request(vcpus: u32, gib: u64, profile: Profile, threads: ThreadPolicy) -> Request {
    Request {
        name: Some("big".into()),
        vcpus,
        memory_bytes: gib * common::GIB,
        devices: vec![],
        profile,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::None,
        host_cpus: None,
        move_host_cpus: false,
        threads,
    }
}

fn cores(host: &Host, p: &Plan) -> BTreeSet<u32> {
    p.vcpus
        .iter()
        .map(|v| host.pu(v.cpu).expect("a host PU").core)
        .collect()
}

fn node_of(host: &Host, cpu: u32) -> u32 {
    host.pu(cpu).and_then(|p| p.numa).expect("a NUMA node")
}

#[test]
fn a_big_membw_vm_gets_a_core_per_vcpu_on_every_node() {
    let host = big_host();
    assert_eq!(
        (host.cores.len(), host.pus.len(), host.numa_nodes.len()),
        (96, 192, 4)
    );
    let p = plan::plan(
        &request(88, 1400, Profile::Membw, ThreadPolicy::Auto),
        &host,
        &[],
    )
    .expect("88 vCPUs fit");
    assert_eq!(p.threads, Threads::Spread);
    assert_eq!(cores(&host, &p).len(), 88, "88 distinct cores");
    assert_eq!(p.guest_topology.threads, 1);
    // every idle thread is the sibling of a vCPU's thread
    assert_eq!(p.idle_cpus.len(), 88);
    assert!(!p.idle_cpus.intersects(&p.host_cpus.union(&p.emulator_cpus)));
    // a guest cell per host node, each with vCPUs, its memory on its node in proportion
    assert_eq!(p.guest_numa.len(), 4);
    let total: u64 = p.guest_numa.iter().map(|c| c.memory_bytes).sum();
    for c in &p.guest_numa {
        assert!(!c.vcpus.is_empty(), "cell {} has no vCPUs", c.cell);
        assert_eq!(c.host_nodes.len(), 1);
        for v in c.vcpus.iter() {
            assert_eq!(node_of(&host, p.vcpus[v as usize].cpu), c.host_nodes[0]);
        }
        let want = total as f64 * c.vcpus.len() as f64 / 88.0;
        let got = c.memory_bytes as f64;
        assert!(
            (got - want).abs() <= 4096.0 * 88.0,
            "cell {}: {got} vs {want}",
            c.cell
        );
    }
    // vCPUs split by free cores (node 0 keeps the housekeeping cores): each node within one
    // vCPU of its share
    let free: Vec<usize> = p
        .guest_numa
        .iter()
        .map(|c| {
            host.cores
                .iter()
                .filter(|k| !k.pus.intersects(&p.host_cpus))
                .filter(|k| node_of(&host, k.pus.first().unwrap()) == c.host_nodes[0])
                .count()
        })
        .collect();
    let all: usize = free.iter().sum();
    for (c, f) in p.guest_numa.iter().zip(&free) {
        let share = 88.0 * *f as f64 / all as f64;
        let got = c.vcpus.len() as f64;
        assert!(
            (got - share).abs() < 1.0,
            "cell {}: {got} vCPUs for a share of {share:.1} ({free:?})",
            c.cell
        );
    }
    let why = p.rationale.join("\n");
    assert!(why.contains("one vCPU per core (--threads auto"), "{why}");
    assert!(why.contains("+2–3 % CPU throughput"), "{why}");
}

#[test]
fn pack_keeps_sibling_pairs_and_still_gives_every_cell_vcpus() {
    let host = big_host();
    let p = plan::plan(
        &request(88, 1400, Profile::Membw, ThreadPolicy::Pack),
        &host,
        &[],
    )
    .expect("88 vCPUs fit");
    assert_eq!(p.threads, Threads::Pack);
    assert_eq!(cores(&host, &p).len(), 44);
    assert_eq!(p.guest_topology.threads, 2);
    assert!(p.idle_cpus.is_empty());
    assert!(p.guest_numa.len() > 1);
    for c in &p.guest_numa {
        assert!(
            !c.vcpus.is_empty(),
            "cell {} has no vCPUs: {:?}",
            c.cell,
            p.guest_numa
        );
    }
    assert!(p
        .rationale
        .iter()
        .any(|r| r.contains("vCPUs in sibling pairs (--threads pack)")));
}

#[test]
fn spread_is_refused_in_one_line_when_the_cores_are_too_few() {
    let host = topo::builtin::default_host();
    let e = plan::plan(
        &request(12, 8, Profile::Compute, ThreadPolicy::Spread),
        &host,
        &[],
    )
    .expect_err("12 vCPUs on 7 free cores")
    .to_string();
    assert!(
        e.contains("--threads spread") && e.contains("need 12 free cores"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

#[test]
fn the_desktop_still_pairs_siblings() {
    let host = topo::builtin::default_host();
    for profile in [Profile::Gaming, Profile::Compute] {
        let p = plan::plan(&request(12, 16, profile, ThreadPolicy::Auto), &host, &[]).unwrap();
        assert_eq!(p.guest_cpus().to_string(), "2-7,10-15", "{profile:?}");
        assert_eq!(p.threads, Threads::Pack);
        assert_eq!(p.guest_topology.threads, 2);
    }
    // the gaming profile pairs siblings even where a core each would fit
    let p = plan::plan(
        &request(4, 8, Profile::Gaming, ThreadPolicy::Auto),
        &host,
        &[],
    )
    .unwrap();
    assert_eq!(cores(&host, &p).len(), 2);
    // a compute VM that fits a core per vCPU on the same node gets them
    let p = plan::plan(
        &request(4, 8, Profile::Compute, ThreadPolicy::Auto),
        &host,
        &[],
    )
    .unwrap();
    assert_eq!((p.threads, cores(&host, &p).len()), (Threads::Spread, 4));
    assert_eq!(p.guest_topology.threads, 1);
    // and a container keeps the kubelet's meaning: threads of whole cores
    let c = plan::plan_for(
        &request(4, 2, Profile::Compute, ThreadPolicy::Auto),
        &host,
        &[],
        plan::Workload::Container,
    )
    .unwrap();
    assert_eq!((c.threads, cores(&host, &c).len()), (Threads::Pack, 2));
}

#[test]
fn a_later_plan_never_takes_a_spread_vms_idle_siblings() {
    let host = topo::builtin::default_host();
    let a = plan::plan(
        &request(4, 4, Profile::Compute, ThreadPolicy::Spread),
        &host,
        &[],
    )
    .unwrap();
    let t = plan::Tenant::from_plan(&a);
    assert!(a.idle_cpus.is_subset(&t.cpus));
    let b = plan::plan(
        &request(2, 4, Profile::Compute, ThreadPolicy::Pack),
        &host,
        &[t],
    )
    .unwrap();
    assert!(!b.held_cpus().intersects(&a.held_cpus()));
}
