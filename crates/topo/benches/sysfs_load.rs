//! The sysfs loader against baselines measured in the same run:
//! - `live`: `topo::sysfs::load_root("/")` vs `lstopo --of xml -` on the live host (hwloc's
//!   Linux backend reading the same files, process start included);
//! - `snapshot_dir`: the extracted 32intel64 snapshot (2 sockets, 28 PCI functions) vs
//!   `lstopo` with `HWLOC_FSROOT` on the same directory;
//! - `snapshot_archive`: `load_archive` of the .tar.bz2 vs bzip2 decoding alone (the floor).
//!
//! Report ratios (ours / lstopo, archive / decode), not absolute times.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const SNAPSHOT: &str = "32intel64-2p8co2t+8ve";

fn archive() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/sysfs")
        .join(format!("{SNAPSHOT}.tar.bz2"))
}

fn lstopo_available() -> bool {
    Command::new("lstopo")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn lstopo_xml(fsroot: Option<&Path>) -> usize {
    let mut cmd = Command::new("lstopo");
    cmd.args(["--of", "xml", "-"]);
    if let Some(root) = fsroot {
        cmd.env("HWLOC_FSROOT", root)
            .env("HWLOC_COMPONENTS", "linux,stop");
    }
    let out = cmd.output().expect("run lstopo");
    assert!(out.status.success());
    out.stdout.len()
}

fn bench(c: &mut Criterion) {
    let lstopo = lstopo_available();
    if !lstopo {
        eprintln!("lstopo not on PATH: skipping the lstopo baselines");
    }

    let mut g = c.benchmark_group("sysfs_live");
    g.sample_size(20);
    g.bench_function("topo_load_root", |b| {
        b.iter(|| {
            black_box(
                topo::sysfs::load_root(Path::new("/"))
                    .expect("live")
                    .pus
                    .len(),
            )
        })
    });
    if lstopo {
        g.bench_function("lstopo_xml_process", |b| {
            b.iter(|| black_box(lstopo_xml(None)))
        });
    }
    g.finish();

    let src = archive();
    if !src.exists() {
        eprintln!("skipping snapshots: {} not found", src.display());
        return;
    }
    let compressed = std::fs::read(&src).expect("read archive");
    let decode = |bytes: &[u8]| {
        let mut v = Vec::new();
        bzip2::read::BzDecoder::new(bytes)
            .read_to_end(&mut v)
            .expect("bzip2");
        v
    };
    let dir = tempfile::tempdir().expect("tempdir");
    tar::Archive::new(&decode(&compressed)[..])
        .unpack(dir.path())
        .expect("unpack");
    let root = dir.path().join(SNAPSHOT);

    let mut g = c.benchmark_group("sysfs_snapshot_dir");
    g.sample_size(20);
    g.bench_function("topo_load_root", |b| {
        b.iter(|| black_box(topo::sysfs::load_root(&root).expect("dir").pus.len()))
    });
    if lstopo {
        g.bench_function("lstopo_fsroot_process", |b| {
            b.iter(|| black_box(lstopo_xml(Some(&root))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("sysfs_snapshot_archive");
    g.sample_size(20);
    g.bench_function("topo_load_archive_bytes", |b| {
        b.iter(|| {
            black_box(
                topo::sysfs::load_archive_bytes(black_box(&compressed), &src)
                    .expect("archive")
                    .pus
                    .len(),
            )
        })
    });
    g.bench_function("bzip2_decode_only", |b| {
        b.iter(|| black_box(decode(black_box(&compressed)).len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
