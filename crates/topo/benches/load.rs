//! Loading the largest shared hwloc XML (2x EPYC 9654, 384 PUs) with `topo::hwloc::load_file`,
//! against two baselines measured in the same run:
//! - `read`: `std::fs::read` of the same file (the floor: I/O only);
//! - `xml_parse_only`: roxmltree parsing the text, without building the model;
//! - `lstopo`: `lstopo --input FILE --of xml -` as a process (hwloc's own XML import and
//!   export, process start included), when `lstopo` is on PATH.
//!
//! Report ratios (our load / lstopo, our load / read), not absolute times.

use std::path::Path;
use std::process::Command;

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/topologies/hwloc/AMD-19h-Zen4-2xEpyc-9654.xml"
);

fn lstopo_available() -> bool {
    Command::new("lstopo")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn load(c: &mut Criterion) {
    let path = Path::new(FILE);
    if !path.exists() {
        eprintln!("skipping: {FILE} not found");
        return;
    }
    let mut g = c.benchmark_group("hwloc_zen4_9654");
    g.bench_function("topo_load_file", |b| {
        b.iter(|| {
            let host = topo::hwloc::load_file(black_box(path)).expect("load");
            black_box(host.pus.len())
        })
    });
    // roxmltree alone (what any Rust reader of this XML pays before looking at it)
    let text = std::fs::read_to_string(path).expect("read");
    g.bench_function("xml_parse_only", |b| {
        b.iter(|| {
            let opts = roxmltree::ParsingOptions {
                allow_dtd: true,
                ..Default::default()
            };
            let doc = roxmltree::Document::parse_with_options(black_box(&text), opts).expect("xml");
            black_box(doc.descendants().count())
        })
    });
    g.bench_function("read", |b| {
        b.iter(|| black_box(std::fs::read(black_box(path)).expect("read").len()))
    });
    if lstopo_available() {
        g.sample_size(20);
        g.bench_function("lstopo_xml_process", |b| {
            b.iter(|| {
                let out = Command::new("lstopo")
                    .args(["--input", FILE, "--of", "xml", "-"])
                    .output()
                    .expect("run lstopo");
                assert!(out.status.success());
                black_box(out.stdout.len())
            })
        });
    } else {
        eprintln!("lstopo not on PATH: skipping the lstopo baseline");
    }
    g.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
