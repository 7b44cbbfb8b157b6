//! Hybrid parts and cores without an L3, on real shapes: the Strix Point APU (Zen 5 and
//! Zen 5c in two L3 groups), the Raptor Lake laptop part (P-cores and E-core clusters in one
//! L3; hwloc XML and the raw sysfs snapshot), and a three-kind part with a low-power island
//! that has no L3 (tests/data/hybrid-3kinds-lp-island.xml, written for these tests in the
//! shape of hwloc's Arrow Lake-U data).
//!
//! What must hold: cores without an L3 come last; one L3 group of one kind before mixing
//! kinds; the fastest kind when it has room; the emulator never on a core outside the VM's
//! own L3 group and the host's.

mod common;

use std::path::{Path, PathBuf};

use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request, Tenant};
use topo::{CpuSet, Host};

fn load(path: &Path) -> Host {
    topo::load_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shared(name: &str) -> Host {
    load(&common::topology_dir().join(name))
}

fn fixture(name: &str) -> Host {
    load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
}

fn req(vcpus: u32) -> Request {
    Request {
        name: Some(format!("vm{vcpus}")),
        vcpus,
        memory_bytes: 2 * common::GIB,
        devices: vec![],
        profile: Profile::Gaming,
        os: GuestOs::Linux,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    }
}

/// (L3 ids, kind labels) of the guest's CPUs.
fn spread(host: &Host, p: &Plan) -> (Vec<Option<u32>>, Vec<Option<String>>) {
    let mut l3: Vec<Option<u32>> = p
        .guest_cpus()
        .iter()
        .map(|c| host.pu(c).and_then(|x| x.l3))
        .collect();
    l3.sort_unstable();
    l3.dedup();
    let mut kinds: Vec<Option<String>> = p
        .guest_cpus()
        .iter()
        .map(|c| host.pu(c).and_then(|x| x.kind.clone()))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    (l3, kinds)
}

fn l3_cpus(host: &Host, l3: u32) -> CpuSet {
    host.pus
        .iter()
        .filter(|x| x.l3 == Some(l3))
        .map(|x| x.os_index)
        .collect()
}

#[test]
fn strix_point_one_l3_of_one_kind_before_mixing() {
    let host = shared("AMD-1Ah-Zen5StrixPoint-RyzenAI9HX370.xml");
    for vcpus in [8, 16] {
        let p = plan::plan(&req(vcpus), &host, &[]).unwrap();
        let (l3, kinds) = spread(&host, &p);
        assert_eq!(l3.len(), 1, "{vcpus} vCPUs span L3s {l3:?}: {:?}", p.vcpus);
        assert_eq!(kinds, vec![Some("efficiency".to_string())], "{vcpus}");
        let group = l3_cpus(&host, l3[0].unwrap());
        assert!(
            !group.intersects(&p.host_cpus),
            "{vcpus}: shares the host's L3"
        );
        assert!(
            p.rationale
                .iter()
                .any(|r| r.contains("one kind rather than mixing")),
            "{:?}",
            p.rationale
        );
    }
    // 4 vCPUs fit on the Zen 5 cores beside the host
    let p = plan::plan(&req(4), &host, &[]).unwrap();
    assert_eq!(spread(&host, &p).1, vec![Some("performance".to_string())]);
}

#[test]
fn raptor_lake_performance_cores_first_and_mixing_only_when_needed() {
    for host in [
        shared("Intel-RaptorLake-Corei7-1370P.xml"),
        load(&common::topology_dir().join("../sysfs/20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2")),
    ] {
        // 5 free P-cores hold 10 vCPUs; 12 need two E-cores, 6 E-cores alone cannot
        let p = plan::plan(&req(10), &host, &[]).unwrap();
        assert_eq!(
            spread(&host, &p).1.len(),
            1,
            "{}: {:?}",
            host.source,
            p.vcpus
        );
        let p = plan::plan(&req(12), &host, &[]).unwrap();
        let eff = p
            .guest_cpus()
            .iter()
            .filter(|&c| host.pu(c).and_then(|x| x.kind.as_deref()) == Some("efficiency"))
            .count();
        assert_eq!(eff, 2, "{}: {:?}", host.source, p.vcpus);
        // the emulator prefers an efficiency core, leaving P-cores to vCPUs
        let p = plan::plan(&req(4), &host, &[]).unwrap();
        let e = p.emulator_cpus.first().unwrap();
        assert_eq!(
            host.pu(e).and_then(|x| x.kind.as_deref()),
            Some("efficiency"),
            "{}",
            host.source
        );
    }
}

#[test]
fn cores_without_an_l3_come_last() {
    let host = fixture("hybrid-3kinds-lp-island.xml");
    let island: CpuSet = [12, 13].into_iter().collect();
    // the free P-core takes 2 vCPUs
    let p = plan::plan(&req(2), &host, &[]).unwrap();
    assert_eq!(p.guest_cpus(), [2, 3].into_iter().collect::<CpuSet>());
    // with the P-core taken, 2 vCPUs go to L3 E-cores, not the low-power island
    let t = Tenant::from_plan(&p);
    let q = plan::plan(&req(2), &host, std::slice::from_ref(&t)).unwrap();
    assert!(!q.guest_cpus().intersects(&island), "{:?}", q.vcpus);
    let (l3, kinds) = spread(&host, &q);
    assert_eq!((l3.len(), kinds.len()), (1, 1), "{:?}", q.vcpus);
    // 10 vCPUs: every core with an L3 (P and E), still no island
    let p = plan::plan(&req(10), &host, &[]).unwrap();
    assert!(!p.guest_cpus().intersects(&island), "{:?}", p.vcpus);
    // 11 need one island core, and say so
    let p = plan::plan(&req(11), &host, &[]).unwrap();
    assert_eq!(p.guest_cpus().intersection(&island).len(), 1);
    assert!(p.rationale.iter().any(|r| r.contains("without an L3")));
    // the emulator never goes to the island (no L3 of the VM's or the host's)
    for vcpus in 1..=9 {
        let p = plan::plan(&req(vcpus), &host, &[]).unwrap();
        assert!(
            !p.emulator_cpus.intersects(&island),
            "{vcpus}: {:?}",
            p.emulator_cpus
        );
    }
}
