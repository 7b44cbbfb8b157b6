//! Parser throughput against seed 001's `grep | awk | jq` pipeline on the same generated
//! journal (8 MB here; the 1 GB figure in the README was measured with `vmtune boot bench`).
//! Both sides extract one sandbox's console; ours also builds the timeline.

use std::io::Write;
use std::process::Command;

use bootprof::gen::{generate, TEMPLATE_SANDBOX};
use bootprof::ingest::{Ingester, Options};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn have(bin: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {bin}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn bench(c: &mut Criterion) {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    let mut buf = Vec::new();
    generate(8 << 20, 4, 1, &mut buf).expect("generate");
    f.write_all(&buf).expect("write");
    let path = f.path().to_path_buf();
    let mut g = c.benchmark_group("journal_8MB");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    g.sample_size(10);
    g.bench_function("bootprof_analyze", |b| {
        b.iter(|| {
            let mut ing = Ingester::new(Options {
                sandbox: Some(TEMPLATE_SANDBOX.into()),
                ..Default::default()
            });
            let file = std::fs::File::open(&path).expect("open");
            ing.read("j", std::io::BufReader::with_capacity(1 << 20, file))
                .expect("read");
            bootprof::timeline::build(&ing.finish(), None).expect("timeline")
        })
    });
    if have("jq") {
        g.bench_function("grep_awk_jq_pipeline", |b| {
            b.iter(|| {
                Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "grep 'sandbox={TEMPLATE_SANDBOX}' \"$1\" | awk -F'vmconsole=' '{{ print $2 }}' | jq -r . >/dev/null 2>&1"
                    ))
                    .arg("sh")
                    .arg(&path)
                    .status()
                    .expect("pipeline")
            })
        });
    } else {
        eprintln!("jq not installed: the grep | awk | jq baseline is skipped (apt-get install jq)");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
