//! What one CreateContainer costs the agent on the 384-PU hosts: the decision for a
//! Guaranteed container of 4 CPUs with 0, 16 and 64 exclusive containers already on the node
//! (each a tenant the planner must place around), and the same for a BestEffort container
//! (the shared pool). The baseline measured in the same run is the agent's own decoding of
//! that CreateContainer request from its protobuf bytes (what every plugin pays before it can
//! decide anything); containerd's own create of the container is measured against the agent
//! connected and not, by `cargo test -p vmtune --test cli_nri -- --ignored bench` (README).

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use nri::agent::Agent;
use nri::devices::CdiRegistry;
use nri::replay::{generated, Class, PodShape};
use nri::Settings;
use nri_proto::nri as api;
use nri_proto::Message as _;

fn host(name: &str) -> topo::Host {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/hwloc")
        .join(name);
    topo::load_path(&p).expect("topology")
}

/// An agent holding `k` exclusive 4-CPU containers.
fn agent_with(host: &topo::Host, k: usize) -> Agent {
    let mut a =
        Agent::new(host.clone(), Settings::default(), CdiRegistry::default()).expect("agent");
    for i in 0..k {
        let (pod, c) = generated(i, &PodShape::guaranteed(4));
        a.create(&pod, &c);
    }
    a
}

/// The CreateContainer request containerd would send for `c`, encoded.
fn request_bytes(pod: &nri::model::Pod, c: &nri::model::Container) -> Vec<u8> {
    let mut p = api::PodSandbox::new();
    p.id = pod.id.clone();
    p.name = pod.name.clone();
    p.namespace = pod.namespace.clone();
    let mut lp = api::LinuxPodSandbox::new();
    lp.cgroup_parent = pod.cgroup_parent.clone();
    p.linux = nri_proto::MessageField::some(lp);
    let mut cpu = api::LinuxCPU::new();
    let mut shares = api::OptionalUInt64::new();
    shares.value = c.cpu_shares.unwrap_or(2);
    cpu.shares = nri_proto::MessageField::some(shares);
    let mut res = api::LinuxResources::new();
    res.cpu = nri_proto::MessageField::some(cpu);
    let mut lc = api::LinuxContainer::new();
    lc.resources = nri_proto::MessageField::some(res);
    let mut ct = api::Container::new();
    ct.id = c.id.clone();
    ct.pod_sandbox_id = c.pod_id.clone();
    ct.linux = nri_proto::MessageField::some(lc);
    for i in 0..30 {
        ct.annotations
            .insert(format!("io.kubernetes.cri.note{i}"), "x".repeat(40));
        ct.env.push(format!("VAR{i}=value{i}"));
    }
    let mut req = api::CreateContainerRequest::new();
    req.pod = nri_proto::MessageField::some(p);
    req.container = nri_proto::MessageField::some(ct);
    req.write_to_bytes().expect("encodes")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("create");
    g.sample_size(20);
    for file in ["AMD-19h-Zen4-2xEpyc-9654.xml", "192em64t-24n8c2t.xml"] {
        let h = host(file);
        let short = file.trim_end_matches(".xml");
        let (pod, ctr) = generated(9999, &PodShape::guaranteed(4));
        let bytes = request_bytes(&pod, &ctr);
        g.bench_function(format!("{short}/decode (baseline)"), |b| {
            b.iter(|| {
                let r = api::CreateContainerRequest::parse_from_bytes(black_box(&bytes))
                    .expect("decodes");
                black_box((
                    nri::convert::pod(&r.pod),
                    nri::convert::container(&r.container),
                ))
            })
        });
        for k in [0usize, 16, 64] {
            let base = agent_with(&h, k);
            g.bench_function(format!("{short}/guaranteed 4 CPUs, {k} tenants"), |b| {
                b.iter_batched(
                    || base.clone(),
                    |mut a| black_box(a.create(&pod, &ctr)),
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        let mut be = PodShape::guaranteed(1);
        be.class = Class::BestEffort;
        let (bpod, bctr) = generated(9998, &be);
        let base = agent_with(&h, 16);
        g.bench_function(format!("{short}/best-effort, 16 tenants"), |b| {
            b.iter_batched(
                || base.clone(),
                |mut a| black_box(a.create(&bpod, &bctr)),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
