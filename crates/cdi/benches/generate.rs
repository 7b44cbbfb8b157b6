//! `vmtune cdi`'s work on the HGX H100 snapshot (11 VFIO devices, 33 names), against loading
//! the snapshot, measured in the same run (report the ratio, not absolute times):
//! - `load_snapshot`: `topo::load_path` of testdata/vfio/hgx-h100-vfio.tar.gz (the baseline);
//! - `generate_legacy` / `generate_iommufd`: the spec from the loaded host, its CDI rules
//!   check included;
//! - `spec_to_json`: the text that is written.

use std::path::Path;

use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn bench(c: &mut Criterion) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vfio/hgx-h100-vfio.tar.gz");
    let host = topo::load_path(&path).expect("snapshot");
    let mut g = c.benchmark_group("cdi_hgx_h100");
    g.bench_function("load_snapshot", |b| {
        b.iter(|| black_box(topo::load_path(&path).expect("load").pci_devices.len()))
    });
    for (name, mode) in [
        ("generate_legacy", cdi::Mode::Legacy),
        ("generate_iommufd", cdi::Mode::Iommufd),
    ] {
        let opts = cdi::Options {
            mode,
            ..Default::default()
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    cdi::generate(&host, &opts)
                        .expect("spec")
                        .spec
                        .devices
                        .len(),
                )
            })
        });
    }
    let spec = cdi::generate(&host, &cdi::Options::default())
        .expect("spec")
        .spec;
    g.bench_function("spec_to_json", |b| {
        b.iter(|| black_box(spec.to_json().len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
