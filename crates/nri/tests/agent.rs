//! The agent against a model of the runtime, on the shared real topologies: containerd applies
//! what the agent answers (the created container's cpuset and annotations, updates of other
//! containers), and after every event of a generated sequence
//!
//! * no CPU is any two containers' own, none is a housekeeping CPU, each exclusive container
//!   has the CPUs it asked for (a Kata VM's first container its own and `default_vcpus`
//!   more, its emulator core beside them),
//! * every container runs where the agent says: exclusive ones on their CPUs, shared ones on
//!   the pool (every CPU nobody holds),
//! * a fresh agent synchronized from the runtime's view (a restart of the agent or of
//!   containerd) holds exactly the same allocations and asks for no change,
//! * and each placement is the planner's own: `plan::plan_for` with the earlier allocations
//!   as tenants gives the same CPUs (the agent is not a second planner).

use std::collections::BTreeMap;
use std::path::Path;

use nri::agent::{Agent, Outcome, Settings, CPUS_ANNOTATION};
use nri::devices::CdiRegistry;
use nri::model::{Container, Pod, State};
use nri::replay::{generated, Class, PodShape};
use proptest::prelude::*;
use topo::{CpuSet, Host};

fn topology(name: &str) -> Host {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/hwloc")
        .join(name);
    topo::load_path(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What containerd holds: each container's spec as the agent's answers left it.
#[derive(Default, Clone)]
struct Runtime {
    pods: BTreeMap<String, Pod>,
    containers: BTreeMap<String, Container>,
}

impl Runtime {
    fn apply(&mut self, created: Option<(&Pod, &Container)>, out: &Outcome) {
        if let Some((pod, c)) = created {
            if out.error.is_some() {
                return; // creation failed: the container does not exist
            }
            let mut c = c.clone();
            if let Some(a) = &out.adjust {
                c.cpuset_cpus = a.cpus.to_list_string();
                if let Some(m) = &a.mems {
                    c.cpuset_mems = m.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
                }
                c.annotations.extend(a.annotations.clone());
            }
            c.state = State::Running;
            self.pods.insert(pod.id.clone(), pod.clone());
            self.containers.insert(c.id.clone(), c);
        }
        for u in &out.updates {
            if let Some(c) = self.containers.get_mut(&u.container_id) {
                c.cpuset_cpus = u.cpus.to_list_string();
                if let Some(m) = &u.mems {
                    c.cpuset_mems = m.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
                }
            }
        }
    }

    fn cpus(&self, id: &str) -> CpuSet {
        CpuSet::parse_list(&self.containers[id].cpuset_cpus).expect("a cpuset")
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        cpus: u32,
        class: u8,
        kata: bool,
        gpu: bool,
    },
    Stop(usize),
    RemovePod(usize),
    RestartAgent,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..9, 0u8..4, proptest::bool::weighted(0.2), proptest::bool::weighted(0.3))
            .prop_map(|(cpus, class, kata, gpu)| Op::Create { cpus, class, kata, gpu }),
        2 => (0usize..64).prop_map(Op::Stop),
        1 => (0usize..64).prop_map(Op::RemovePod),
        1 => Just(Op::RestartAgent),
    ]
}

fn check(agent: &Agent, rt: &Runtime, settings: &Settings, what: &str) {
    let hk = agent.housekeeping().clone();
    let pool = agent.pool();
    let mut seen = CpuSet::new();
    for a in agent.allocations() {
        let mine = a.cpus.union(&a.emulator_cpus);
        assert!(
            !mine.intersects(&seen),
            "{what}: {} double-books {mine}",
            a.name
        );
        assert!(
            !mine.intersects(&hk),
            "{what}: {} holds housekeeping {hk}",
            a.name
        );
        assert!(
            !mine.intersects(&pool),
            "{what}: {} overlaps the pool",
            a.name
        );
        seen = seen.union(&mine);
        let c = &rt.containers[&a.container_id];
        assert_eq!(
            rt.cpus(&a.container_id),
            a.cpus,
            "{what}: {} runs elsewhere",
            a.name
        );
        assert_eq!(
            c.annotations.get(CPUS_ANNOTATION),
            Some(&a.cpus.to_list_string()),
            "{what}: {} lacks its annotation",
            a.name
        );
        let n = (c.cpu_quota.unwrap_or(0) / 100_000) as u32;
        assert_eq!(
            a.default_vcpus,
            if a.default_vcpus > 0 {
                settings.kata_default_vcpus
            } else {
                0
            }
        );
        let want = n + a.default_vcpus;
        assert_eq!(
            a.cpus.len() as u32,
            want,
            "{what}: {} has {} CPUs",
            a.name,
            a.cpus
        );
    }
    // the pool holds every CPU but the cores of the allocations, idle SMT siblings included
    let held = agent.whole_cores(&seen);
    assert!(
        !held.intersects(&pool),
        "{what}: the pool shares a core with a container"
    );
    assert_eq!(
        held.union(&pool),
        agent.host().all_cpus(),
        "{what}: CPUs lost"
    );
    for id in agent.shared_containers() {
        assert_eq!(rt.cpus(id), pool, "{what}: shared {id} is not on the pool");
    }
}

fn shape(cpus: u32, class: u8, kata: bool, gpu: Option<&str>) -> PodShape {
    let mut s = PodShape::guaranteed(cpus);
    s.class = match class {
        0 | 1 => Class::Guaranteed,
        2 => Class::Burstable,
        _ => Class::BestEffort,
    };
    if class == 1 {
        s.milli = u64::from(cpus) * 1000 - 500; // Guaranteed, not whole CPUs: shares the pool
    }
    if kata {
        s.runtime_handler = "kata-qemu".into();
    }
    if let Some(g) = gpu {
        s.cdi_devices = vec![format!("vmtune.io/vfio={g}")];
    }
    s
}

fn run_sequence(host: &Host, ops: &[Op]) {
    let settings = Settings::default();
    let mut agent =
        Agent::new(host.clone(), settings.clone(), CdiRegistry::default()).expect("agent");
    let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
    let mut rt = Runtime::default();
    let mut n = 0usize;
    for (step, op) in ops.iter().enumerate() {
        let what = format!("step {step} {op:?}");
        match op {
            Op::Create {
                cpus,
                class,
                kata,
                gpu,
            } => {
                let g = gpu
                    .then(|| gpus.get(n % gpus.len().max(1)))
                    .flatten()
                    .map(String::as_str);
                let (pod, c) = generated(n, &shape(*cpus, *class, *kata, g));
                n += 1;
                let before: Vec<plan::Tenant> = tenants_of(&agent);
                let out = agent.create(&pod, &c);
                rt.apply(Some((&pod, &c)), &out);
                if let Some(a) = agent.allocations().find(|a| a.container_id == c.id) {
                    same_as_the_planner(&agent, host, &before, a, &c);
                }
            }
            Op::Stop(i) | Op::RemovePod(i) => {
                let ids: Vec<String> = rt.containers.keys().cloned().collect();
                if ids.is_empty() {
                    continue;
                }
                let id = &ids[i % ids.len()];
                let c = rt.containers[id].clone();
                let out = if matches!(op, Op::Stop(_)) {
                    agent.release(&c, "stop", true)
                } else {
                    let pod = rt.pods[&c.pod_id].clone();
                    agent.remove_pod(&pod)
                };
                rt.containers.remove(id);
                rt.apply(None, &out);
            }
            Op::RestartAgent => {
                let before: BTreeMap<String, CpuSet> = agent
                    .allocations()
                    .map(|a| (a.container_id.clone(), a.cpus.clone()))
                    .collect();
                agent = Agent::new(host.clone(), settings.clone(), CdiRegistry::default())
                    .expect("agent");
                let pods: Vec<Pod> = rt.pods.values().cloned().collect();
                let cs: Vec<Container> = rt.containers.values().cloned().collect();
                let out = agent.synchronize(&pods, &cs);
                assert!(
                    out.updates.is_empty(),
                    "{what}: a restart moved {:?}",
                    out.updates
                );
                let after: BTreeMap<String, CpuSet> = agent
                    .allocations()
                    .map(|a| (a.container_id.clone(), a.cpus.clone()))
                    .collect();
                assert_eq!(after, before, "{what}: allocations changed over a restart");
                assert!(agent.allocations().all(|a| a.how == "adopted"));
            }
        }
        check(&agent, &rt, &settings, &what);
    }
}

fn tenants_of(agent: &Agent) -> Vec<plan::Tenant> {
    agent
        .allocations()
        .map(|a| plan::Tenant {
            name: a.name.clone(),
            cpus: a.cpus.union(&a.emulator_cpus),
            emulator_cpus: a.emulator_cpus.clone(),
            host_cpus: Some(agent.housekeeping().clone()),
            devices: a.devices.clone(),
            hugepages: vec![],
            notes: vec![],
        })
        .collect()
}

/// The allocation is what `plan::plan_for` gives the same request with the same tenants.
fn same_as_the_planner(
    agent: &Agent,
    host: &Host,
    before: &[plan::Tenant],
    a: &nri::agent::Allocation,
    c: &Container,
) {
    let n = (c.cpu_quota.unwrap_or(0) / 100_000) as u32;
    let first_of_vm = a.default_vcpus > 0;
    let req = plan::Request {
        name: Some(a.name.clone()),
        vcpus: if first_of_vm { n + 1 } else { n },
        memory_bytes: (c.memory_limit.unwrap_or(0) as u64
            + if first_of_vm { 2048 << 20 } else { 0 })
        .max(plan::MIN_MEMORY_BYTES),
        devices: a.devices.clone(),
        profile: if a.devices.is_empty() {
            plan::Profile::Gaming
        } else {
            plan::Profile::Compute
        },
        os: plan::GuestOs::Linux,
        hugepages: plan::HugepagePolicy::None,
        host_cpus: Some(agent.housekeeping().clone()),
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let workload = if first_of_vm {
        plan::Workload::Vm
    } else {
        plan::Workload::Container
    };
    let p = plan::plan_for(&req, host, before, workload).expect("the planner places it too");
    assert_eq!(
        p.guest_cpus(),
        a.cpus,
        "{}: the agent and the planner differ",
        a.name
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn sequences_on_a_two_socket_epyc(ops in proptest::collection::vec(op(), 1..40)) {
        run_sequence(&topology("AMD-19h-Zen3-2xEpyc-7763.xml"), &ops);
    }

    #[test]
    fn sequences_on_a_four_node_host_with_eight_gpus(ops in proptest::collection::vec(op(), 1..30)) {
        run_sequence(&topology("eas-tioga.xml"), &ops);
    }

    #[test]
    fn sequences_on_a_trimmed_dgx2(ops in proptest::collection::vec(op(), 1..10)) {
        run_sequence(&topology("nvidiaDGX2.xml"), &ops);
    }

    #[test]
    fn sequences_on_a_hybrid_desktop(ops in proptest::collection::vec(op(), 1..20)) {
        run_sequence(&topology("20em64t-hybrid-1p6c2t+2ca4co1t.lstopo-2.9.0.xml"), &ops);
    }
}

/// Containers with the devices of a GPU get CPUs on the GPU's node.
#[test]
fn a_gpu_container_sits_on_its_gpus_node() {
    // 8 NUMA nodes, 4 GPUs on nodes 3, 1, 7 and 5
    let host = topology("topo.jrc0323.xml");
    let mut agent = Agent::new(host.clone(), Settings::default(), CdiRegistry::default()).unwrap();
    for g in host.gpus().take(4) {
        let Some(nodes) = g.numa.clone() else {
            continue;
        };
        let (pod, c) = generated(0, &shape(4, 0, false, Some(&g.bdf)));
        let pod = Pod {
            id: format!("p{}", g.bdf),
            ..pod
        };
        let c = Container {
            id: format!("c{}", g.bdf),
            pod_id: pod.id.clone(),
            ..c
        };
        let out = agent.create(&pod, &c);
        let a = out.adjust.expect("an answer");
        for cpu in a.cpus.iter() {
            let node = host.pu(cpu).and_then(|p| p.numa);
            assert!(
                node.is_some_and(|n| nodes.contains(&n)),
                "GPU {} on {nodes:?}, CPU {cpu} on {node:?}",
                g.bdf
            );
        }
        assert_eq!(
            a.mems.as_deref(),
            Some(&nodes[..]),
            "memory on the GPU's node"
        );
    }
}

/// A container asking for more CPUs than the host has starts in the pool, and says why; with
/// `strict` its creation fails with the planner's reason.
#[test]
fn more_cpus_than_the_host_has() {
    let host = topology("AMD-19h-Zen3-2xEpyc-7763.xml");
    let mut agent = Agent::new(host.clone(), Settings::default(), CdiRegistry::default()).unwrap();
    let (pod, c) = generated(0, &shape(4096, 0, false, None));
    let out = agent.create(&pod, &c);
    assert_eq!(
        out.adjust.as_ref().map(|a| a.cpus.clone()),
        Some(host.all_cpus())
    );
    assert!(out.error.is_none());
    assert!(
        out.log[0].contains("no placement for its 4096 CPUs"),
        "{:?}",
        out.log
    );
    assert_eq!(agent.counters().refused.values().sum::<u64>(), 1);
    let strict = Settings {
        strict: true,
        ..Settings::default()
    };
    let mut agent = Agent::new(host, strict, CdiRegistry::default()).unwrap();
    let out = agent.create(&pod, &c);
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("4096 vCPUs do not fit")),
        "{:?}",
        out.error
    );
    assert!(agent.allocations().next().is_none());
}

/// An exclusive container found running on CPUs someone else gave it keeps them when they are
/// free, whole and off the housekeeping; one on housekeeping CPUs is placed again.
#[test]
fn synchronize_adopts_or_places_again() {
    let host = topology("AMD-19h-Zen3-2xEpyc-7763.xml");
    let mut agent = Agent::new(host, Settings::default(), CdiRegistry::default()).unwrap();
    let hk = agent.housekeeping().clone();
    let (pod_a, mut a) = generated(0, &shape(2, 0, false, None));
    a.cpuset_cpus = "40-41".into();
    let (pod_b, mut b) = generated(1, &shape(2, 0, false, None));
    b.cpuset_cpus = hk.to_list_string();
    let (pod_c, mut c) = generated(2, &shape(1, 3, false, None));
    c.cpuset_cpus = "0-127".into();
    let out = agent.synchronize(&[pod_a, pod_b, pod_c], &[a.clone(), b.clone(), c.clone()]);
    let held: BTreeMap<String, String> = agent
        .allocations()
        .map(|x| (x.container_id.clone(), x.how.clone()))
        .collect();
    assert_eq!(held.get(&a.id).map(String::as_str), Some("adopted"));
    assert_eq!(held.get(&b.id).map(String::as_str), Some("placed"));
    let moved: Vec<&str> = out
        .updates
        .iter()
        .map(|u| u.container_id.as_str())
        .collect();
    assert!(
        moved.contains(&b.id.as_str()) && moved.contains(&c.id.as_str()),
        "{moved:?}"
    );
    assert!(!moved.contains(&a.id.as_str()));
}

/// The metrics file is Prometheus' text format as promtool checks it (every family with HELP
/// and TYPE, counters ending in _total, label values escaped), and says what the agent holds.
#[test]
fn metrics_pass_promtool() {
    let host = topology("AMD-19h-Zen3-2xEpyc-7763.xml");
    let mut agent = Agent::new(host, Settings::default(), CdiRegistry::default()).unwrap();
    for (i, cpus) in [2u32, 4, 4096].iter().enumerate() {
        let (pod, c) = generated(i, &shape(*cpus, 0, i == 1, None));
        agent.create(&pod, &c);
    }
    let status = nri::report::Status::of(&agent, true);
    let text = nri::report::metrics(&status);
    assert!(text.contains("vmtune_nri_allocations 2\n"), "{text}");
    assert!(
        text.contains("vmtune_nri_decisions_total{result=\"placed\"} 2\n"),
        "{text}"
    );
    assert!(text.contains("vmtune_nri_refusals_total{reason="), "{text}");
    let Some(promtool) = testkit::which("promtool") else {
        testkit::skip(
            "metrics_pass_promtool",
            "no promtool (apt-get install prometheus)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    nri::report::write(dir.path(), &status).unwrap();
    let out = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(dir.path().join("metrics.prom")).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // and the status file reads back as written
    let back = nri::report::read(dir.path()).unwrap();
    assert_eq!(back.allocations, status.allocations);
    assert!(
        back.text().contains("2 containers hold CPUs of their own"),
        "{}",
        back.text()
    );
}

/// The events a real containerd sent (tests/data/containerd-2.4.2.jsonl), replayed on every
/// shared topology: the kubelet-made pods are read as their classes (BestEffort and
/// Burstable share, the Guaranteed ones get whole CPUs of their own wherever there is room),
/// the Synchronize events after the restarts keep what the agent gave and place what it had
/// not, the stopped container's CPUs come back, and no CPU is ever held twice.
#[test]
fn a_recorded_containerd_sequence_on_every_shared_topology() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/containerd-2.4.2.jsonl"),
    )
    .expect("the recording");
    let events = nri::replay::parse(&text).expect("it parses");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc");
    let mut hosts = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let host = topo::load_path(&path).unwrap();
        let mut agent =
            Agent::new(host.clone(), Settings::default(), CdiRegistry::default()).unwrap();
        let roomy = host.all_cpus().len() >= 16;
        for (i, ev) in events.iter().enumerate() {
            let step = nri::replay::apply(&mut agent, ev);
            let mut seen = CpuSet::new();
            for a in agent.allocations() {
                assert!(
                    !a.cpus.intersects(&seen),
                    "{}: event {i}: {} double-booked",
                    path.display(),
                    a.name
                );
                assert!(
                    !a.cpus.intersects(agent.housekeeping()),
                    "{}: {} on housekeeping",
                    path.display(),
                    a.name
                );
                seen = seen.union(&a.cpus);
            }
            if step.event == "create" && roomy {
                let name = step.log.first().cloned().unwrap_or_default();
                let shared = name.contains("/be/") || name.contains("/bu/");
                assert_eq!(step.exclusive, Some(!shared), "{}: {name}", path.display());
            }
        }
        let held: Vec<String> = agent.allocations().map(|a| a.name.clone()).collect();
        if roomy {
            // g1 stopped; g2 (placed at the first synchronize if not at its create) and gv hold CPUs
            assert_eq!(
                held,
                vec!["default/g2/main".to_string(), "default/gv/main".into()],
                "{}",
                path.display()
            );
        }
        hosts += 1;
    }
    assert!(hosts >= 20, "only {hosts} topologies");
}

/// A Guaranteed container refused CPUs of its own at creation (no room) runs in the shared
/// pool; when room appears later and the agent restarts, it stays there: a restart moves
/// nothing (found by `sequences_on_a_hybrid_desktop`: the restarted agent placed it anew).
#[test]
fn a_container_refused_at_creation_stays_shared_over_a_restart() {
    let c = |cpus, kata| Op::Create {
        cpus,
        class: 0,
        kata,
        gpu: false,
    };
    // on 14 cores (2 housekeeping) the 3-CPU container finds no room; the Kata VM's stop
    // frees four CPUs, then the agent restarts
    let ops = [
        c(5, false),
        c(1, false),
        c(1, false),
        c(1, false),
        c(2, true),
        c(1, false),
        c(3, false),
        c(1, false),
        c(1, false),
        Op::Stop(4),
        Op::RestartAgent,
    ];
    run_sequence(
        &topology("20em64t-hybrid-1p6c2t+2ca4co1t.lstopo-2.9.0.xml"),
        &ops,
    );
}
