//! Planner invariants on every shared real topology and on random synthetic hosts, with
//! random requests and tenants:
//! - the vCPU count is exact, vCPUs are numbered 0..n and pinned to distinct host PUs;
//! - no core is split between the guest and the host or emulator/iothreads;
//! - nothing overlaps a tenant's pinned CPUs;
//! - the devices' node is chosen when it has room (free whole cores and memory);
//! - the guest topology's product is the vCPU count, and with threads > 1 each group of
//!   vCPUs sits on the siblings of one core;
//! - guest NUMA cells cover every vCPU once and add up to the memory.

mod common;

use plan::{Plan, Request, Tenant};
use proptest::prelude::*;
use topo::{CpuSet, Host};

fn core_of(host: &Host, cpu: u32) -> Option<u32> {
    host.pu(cpu).map(|p| p.core)
}

/// Check every invariant of one plan; `Err` names the broken one.
fn check_plan(host: &Host, req: &Request, tenants: &[Tenant], p: &Plan) -> Result<(), String> {
    let n = req.vcpus as usize;
    if p.vcpus.len() != n {
        return Err(format!("{} vCPUs pinned for {n}", p.vcpus.len()));
    }
    for (i, v) in p.vcpus.iter().enumerate() {
        if v.vcpu != i as u32 {
            return Err(format!("vCPU {i} numbered {}", v.vcpu));
        }
        if host.pu(v.cpu).is_none() {
            return Err(format!(
                "vCPU {i} on CPU {} which the host does not have",
                v.cpu
            ));
        }
    }
    let guest = p.guest_cpus();
    if guest.len() != n {
        return Err(format!("two vCPUs share a host CPU: {:?}", p.vcpus));
    }
    // no split core
    let host_side = p.host_cpus.union(&p.emulator_cpus).union(&p.iothread_cpus);
    for cpu in guest.iter() {
        let core = core_of(host, cpu).ok_or("guest CPU without core")?;
        let sibs = &host.cores[core as usize].pus;
        if sibs.intersects(&host_side) {
            return Err(format!(
                "core {core} ({sibs}) split: guest CPU {cpu}, host side {}",
                sibs.intersection(&host_side)
            ));
        }
    }
    if guest.intersects(&host_side) {
        return Err("guest and host side overlap".into());
    }
    // tenants
    let taken = plan::taken_cpus(tenants);
    if guest.intersects(&taken) {
        return Err(format!(
            "guest CPUs {} taken by tenants",
            guest.intersection(&taken)
        ));
    }
    if p.emulator_cpus != p.host_cpus && p.emulator_cpus.intersects(&taken) {
        return Err("emulator on tenant CPUs".into());
    }
    for t in tenants {
        for d in &p.devices {
            if t.devices.contains(&d.bdf) {
                return Err(format!("device {} of tenant {} reused", d.bdf, t.name));
            }
        }
    }
    // topology
    let t = p.guest_topology;
    if t.sockets * t.dies * t.cores * t.threads != req.vcpus {
        return Err(format!("guest topology {t:?} is not {} vCPUs", req.vcpus));
    }
    if t.threads > 1 {
        for group in p.vcpus.chunks(t.threads as usize) {
            let cores: Vec<Option<u32>> = group.iter().map(|v| core_of(host, v.cpu)).collect();
            if cores.iter().any(|c| *c != cores[0]) {
                return Err(format!("vCPUs {group:?} reported as siblings are not"));
            }
        }
    }
    // guest NUMA
    let mut seen = CpuSet::new();
    for c in &p.guest_numa {
        if c.vcpus.intersects(&seen) {
            return Err("a vCPU in two guest NUMA cells".into());
        }
        seen = seen.union(&c.vcpus);
    }
    if seen != (0..req.vcpus).collect::<CpuSet>() {
        return Err(format!("guest NUMA cells cover {seen}, not every vCPU"));
    }
    let cell_mem: u64 = p.guest_numa.iter().map(|c| c.memory_bytes).sum();
    if cell_mem < req.memory_bytes {
        return Err(format!(
            "guest cells hold {cell_mem} < {}",
            req.memory_bytes
        ));
    }
    if p.memory.hugepage_size_kb > 4
        && p.memory.pages * p.memory.hugepage_size_kb * 1024 < req.memory_bytes
    {
        return Err("too few pages".into());
    }
    // the devices' node when it has room
    let dev_nodes: Vec<Vec<u32>> = p.devices.iter().filter_map(|d| d.numa.clone()).collect();
    if let Some(first) = dev_nodes.first() {
        if first.len() == 1 && dev_nodes.iter().all(|d| d == first) && !host.numa_nodes.is_empty() {
            let node = first[0];
            if device_node_has_room(host, req, tenants, &p.host_cpus, node) {
                let off: Vec<u32> = guest
                    .iter()
                    .filter(|&c| host.pu(c).and_then(|p| p.numa) != Some(node))
                    .collect();
                if !off.is_empty() || p.memory.host_nodes != vec![node] {
                    return Err(format!(
                        "device node {node} has room but guest CPUs {off:?} / memory {:?} are elsewhere",
                        p.memory.host_nodes
                    ));
                }
            }
        }
    }
    if p.rationale.is_empty() {
        return Err("no rationale".into());
    }
    Ok(())
}

/// Independent of the planner: free PUs on whole free cores of `node` and its memory.
fn device_node_has_room(
    host: &Host,
    req: &Request,
    tenants: &[Tenant],
    host_cpus: &CpuSet,
    node: u32,
) -> bool {
    let taken = plan::taken_cpus(tenants).union(host_cpus);
    let free: usize = host
        .cores
        .iter()
        .filter(|c| c.pus.first().and_then(|p| host.pu(p)).and_then(|p| p.numa) == Some(node))
        .filter(|c| !c.pus.intersects(&taken))
        .map(|c| c.pus.len())
        .sum();
    let held: u64 = tenants
        .iter()
        .flat_map(|t| &t.hugepages)
        .filter(|h| h.node.is_none_or(|n| n == node))
        .map(|h| h.pages * h.size_kb * 1024)
        .sum();
    let mem_ok = host
        .numa_node(node)
        .and_then(|n| n.memory_bytes)
        .is_none_or(|m| m.saturating_sub(held) >= req.memory_bytes);
    free >= req.vcpus as usize && mem_ok
}

/// Plan, check, and if refused check that the refusal is one line.
fn run_case(host: &Host, req: &Request, tenants: &[Tenant]) -> Result<Option<Plan>, String> {
    match plan::plan(req, host, tenants) {
        Ok(p) => {
            check_plan(host, req, tenants, &p)
                .map_err(|e| format!("{}: {req:?}: {e}", host.source))?;
            Ok(Some(p))
        }
        Err(e) => {
            let msg = e.to_string();
            if msg.is_empty() || msg.contains('\n') {
                return Err(format!("refusal is not one line: {msg:?}"));
            }
            Ok(None)
        }
    }
}

#[test]
fn invariants_on_every_shared_topology() {
    let hosts = common::shared_hosts();
    // the topologies are in the repository (testdata/): every one of them must load and be
    // checked, so this test cannot pass on an empty or half-loaded set
    let files = std::fs::read_dir(common::topology_dir())
        .expect("testdata/topologies/hwloc")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "xml"))
        })
        .count();
    assert!(files >= 21, "only {files} hwloc files found");
    assert_eq!(hosts.len(), files, "some shared topologies did not load");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    for (name, host) in &hosts {
        let r = runner.run(
            &(common::request_seed(), 0usize..6, 1u32..9),
            |(seed, tenant_count, tenant_vcpus)| {
                let tenants = common::tenants_for(host, tenant_count, tenant_vcpus);
                let req = common::request_for(host, seed);
                run_case(host, &req, &tenants).map_err(TestCaseError::fail)?;
                Ok(())
            },
        );
        if let Err(e) = r {
            panic!("{name}: {e}");
        }
        eprintln!("{name}: {} PUs, invariants hold", host.pus.len());
    }
}

#[test]
fn sequential_tenants_never_overlap_on_shared_topologies() {
    for (name, host) in common::shared_hosts() {
        let mut tenants: Vec<Tenant> = Vec::new();
        let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
        for i in 0..16 {
            let req = Request {
                name: Some(format!("t{i}")),
                vcpus: 2 + (i as u32 % 3) * 2,
                memory_bytes: 4 * common::GIB,
                devices: gpus.get(i).cloned().into_iter().collect(),
                profile: plan::Profile::Compute,
                os: plan::GuestOs::Linux,
                hugepages: plan::HugepagePolicy::Auto,
                host_cpus: None,
            };
            match run_case(&host, &req, &tenants) {
                Ok(Some(p)) => {
                    let t = Tenant::from_plan(&p);
                    for other in &tenants {
                        assert!(
                            !t.cpus.intersects(&other.cpus),
                            "{name}: tenant {i} overlaps {}",
                            other.name
                        );
                    }
                    tenants.push(t);
                }
                Ok(None) => break,
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: Some(Box::new(prop::test_runner::FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariants_on_random_hosts(
        shape in common::shape(256),
        seed in common::request_seed(),
        tenant_count in 0usize..5,
        tenant_vcpus in 1u32..6,
    ) {
        let host = common::synthetic(&shape);
        let tenants = common::tenants_for(&host, tenant_count, tenant_vcpus);
        let req = common::request_for(&host, seed);
        run_case(&host, &req, &tenants).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn refuses_exactly_when_too_big(shape in common::shape(64), extra in 1u32..8) {
        let host = common::synthetic(&shape);
        // more vCPUs than the host has PUs never fits; the message says how many do
        let req = common::request_for(&host, (0, 2, 0, 0, 0, 0, 0));
        let req = Request { vcpus: host.pus.len() as u32 + extra, ..req };
        let err = plan::plan(&req, &host, &[]).unwrap_err().to_string();
        prop_assert!(err.contains("at most"), "{}", err);
    }
}
