//! Cost of the journal's durability: one step (intended record + outcome record, each
//! fsync'd) against the same records written without fsync (the baseline), in the same run.
//! Run: `cargo bench -p apply --bench journal`.

use std::io::Write;
use std::path::PathBuf;

use apply::journal::{Header, Journal, State};
use apply::step::{IrqClass, Target};
use criterion::{criterion_group, criterion_main, Criterion};

fn target() -> Target {
    Target::Irq(apply::step::Irq {
        irq: 38,
        path: PathBuf::from("/proc/irq/38/smp_affinity_list"),
        name: "vfio-msix[0](0000:01:00.0)".into(),
        class: IrqClass::Vfio,
        previous_effective: Some("1".into()),
    })
}

fn bench(c: &mut Criterion) {
    // where journals live by default: /run (tmpfs); VMTUNE_BENCH_DIR to measure a disk
    let base = std::env::var("VMTUNE_BENCH_DIR").unwrap_or_else(|_| "/run".into());
    let dir = tempfile::tempdir_in(&base)
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    eprintln!("journal in {}", dir.path().display());
    let header = Header {
        journal: "vmtune".into(),
        version: 1,
        created_unix: 0,
        apply_pid: 1,
        qemu_pid: None,
    };
    let mut g = c.benchmark_group("journal_step");
    let mut j = Journal::create(&dir.path().join("journal"), &header).unwrap();
    let t = target();
    g.bench_function("fsync_before_change", |b| {
        b.iter(|| {
            let n = j.intend(&t, "0-15", "2-3").unwrap();
            j.outcome(n, State::Done, None).unwrap();
        })
    });
    let mut plain = std::fs::File::create(dir.path().join("plain")).unwrap();
    g.bench_function("baseline_no_fsync", |b| {
        b.iter(|| {
            let rec = serde_json::json!({"step": 1, "state": "intended", "target": &t, "previous": "0-15", "new": "2-3"});
            writeln!(plain, "{rec}").unwrap();
            writeln!(plain, "{{\"step\":1,\"state\":\"done\"}}").unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
