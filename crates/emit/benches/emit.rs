//! How long patching and reading a large domain takes, against the baseline of only parsing
//! it with roxmltree (the floor: patch_domain parses once, then splices).
//! `cargo bench -p emit`; compare `patch_domain` and `tenant_from_domain_xml` with `parse_only`.

use criterion::{criterion_group, criterion_main, Criterion};
use plan::VcpuPin;

fn big_plan() -> plan::Plan {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/plan_seed000_win10_gaming.json"
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut p: plan::Plan = serde_json::from_str(&text).expect("plan");
    // a 384-PU host given whole to one guest: 384 vCPU pins
    p.vcpus = (0..384).map(|i| VcpuPin { vcpu: i, cpu: i }).collect();
    p.request.vcpus = 384;
    p.guest_topology = plan::GuestTopology {
        sockets: 2,
        dies: 1,
        cores: 96,
        threads: 2,
    };
    p
}

fn bench(c: &mut Criterion) {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/domain_win10.xml"
    ))
    .expect("fixture");
    let p = big_plan();
    let patched = emit::libvirt::patch_domain(&base, &p).expect("patch");
    c.bench_function("parse_only (baseline)", |b| {
        b.iter(|| {
            roxmltree::Document::parse(std::hint::black_box(&patched))
                .map(|d| d.descendants().count())
        })
    });
    c.bench_function("patch_domain 384 vCPUs", |b| {
        b.iter(|| emit::libvirt::patch_domain(std::hint::black_box(&patched), &p))
    });
    c.bench_function("tenant_from_domain_xml 384 vCPUs", |b| {
        b.iter(|| emit::libvirt::tenant_from_domain_xml(std::hint::black_box(&patched)))
    });
    c.bench_function("domain_fragment 384 vCPUs", |b| {
        b.iter(|| emit::libvirt::domain_fragment(std::hint::black_box(&p)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
