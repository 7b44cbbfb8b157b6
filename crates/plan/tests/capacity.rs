//! Capacity: VMs planned one after another, each a tenant of the next, until the host is
//! full. The host's housekeeping never moves, and on the 24-node SGI UV (192 cores / 384 PUs)
//! 4-vCPU VMs fit at least as many as the kubelet admits with an emulator core per pod (62,
//! measured with ../shared/peers/kubelet on the same topology).

mod common;

use plan::{GuestOs, HugepagePolicy, Profile, Request, Tenant};
use topo::{CpuSet, Host};

/// Chain `vcpus`-vCPU VMs until one is refused: (plans, the refusal). The VMs pack sibling
/// pairs (`--threads pack`), as the kubelet counts CPUs: the yardstick is density, and a VM
/// with a core per vCPU (what `auto` gives a compute VM on an empty host) takes twice the
/// cores by design.
fn chain(host: &Host, vcpus: u32, max: usize) -> (Vec<plan::Plan>, Option<String>) {
    let mut tenants: Vec<Tenant> = Vec::new();
    let mut plans = Vec::new();
    for i in 0..max {
        let req = Request {
            name: Some(format!("vm{i}")),
            vcpus,
            memory_bytes: 2 * common::GIB,
            devices: vec![],
            profile: Profile::Compute,
            os: GuestOs::Linux,
            hugepages: HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
            threads: plan::ThreadPolicy::Pack,
        };
        match plan::plan(&req, host, &tenants) {
            Ok(p) => {
                tenants.push(Tenant::from_plan(&p));
                plans.push(p);
            }
            Err(e) => return (plans, Some(e.to_string())),
        }
    }
    (plans, None)
}

#[test]
fn four_vcpu_vms_fill_the_24_node_host_and_the_housekeeping_stays() {
    let host = topo::load_path(&common::topology_dir().join("192em64t-24n8c2t.xml")).unwrap();
    let (plans, refusal) = chain(&host, 4, 200);
    let n = plans.len();
    assert!(n >= 62, "only {n} 4-vCPU VMs fit: {refusal:?}");
    let first = plans[0].host_cpus.clone();
    for (i, p) in plans.iter().enumerate() {
        assert_eq!(p.host_cpus, first, "plan {i} moved the housekeeping");
    }
    // every PU is used at the end (host, vCPUs or an emulator core), and nothing twice
    let mut used = first.clone();
    for p in &plans {
        let own = p.guest_cpus().union(&p.emulator_cpus.difference(&first));
        assert!(
            !own.intersects(&used),
            "{}: overlaps",
            p.request.name.as_deref().unwrap_or("")
        );
        used = used.union(&own);
    }
    assert_eq!(
        used,
        host.all_cpus(),
        "PUs left idle after the refusal {refusal:?}"
    );
    eprintln!("{n} VMs of 4 vCPUs; refusal: {refusal:?}");
}

#[test]
fn chains_of_every_size_keep_the_housekeeping_on_every_shared_topology() {
    for (name, host) in common::shared_hosts() {
        for vcpus in [4u32, 8, 16] {
            let (plans, _) = chain(&host, vcpus, 40);
            let Some(first) = plans.first().map(|p| p.host_cpus.clone()) else {
                continue;
            };
            for (i, p) in plans.iter().enumerate() {
                assert_eq!(
                    p.host_cpus, first,
                    "{name}: {vcpus} vCPUs, plan {i} moved it"
                );
            }
            // a VM's emulator core is its own; on the housekeeping CPUs it is shared
            let mut held = CpuSet::new();
            for p in &plans {
                let own = p.guest_cpus().union(&p.emulator_cpus.difference(&first));
                assert!(!own.intersects(&held), "{name}: {vcpus} vCPUs overlap");
                held = held.union(&own);
            }
        }
    }
}
