//! Parser throughput against the Kata GPU boot study's `grep | awk | jq` pipeline on the same generated
//! journal (32 MB here, in the page cache; the 1 GB figure in the README was measured with
//! `vmtune boot bench`). Both sides extract one sandbox's console; ours also builds the
//! timeline. Three ways of reading are timed:
//! * `mapped_parallel`: `read_path`, what `vmtune boot analyze FILE` does — the file is
//!   memory-mapped and its blocks are prefiltered on all CPUs;
//! * `mapped_1_thread`: the same, on one thread (what the parallel split buys);
//! * `streamed`: `read` through a 1 MiB `BufReader`, the path for stdin and pipes.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use bootprof::parse::ingest::{Ingest, Ingester, Options, Parallel};
use bootprof::synth::gen::{generate, TEMPLATE_SANDBOX};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn have(bin: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {bin}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn ingester() -> Ingester {
    Ingester::new(Options {
        sandbox: Some(TEMPLATE_SANDBOX.into()),
    })
}

fn timeline(ing: Ingester) -> bootprof::Report {
    let ing: Ingest = ing.finish();
    assert!(ing.stats.events > 800, "the template boot is parsed");
    bootprof::analyze::build(&ing, Some(TEMPLATE_SANDBOX)).expect("timeline")
}

fn mapped(path: &Path, threads: usize) -> bootprof::Report {
    let file = std::fs::File::open(path).expect("open");
    // SAFETY: the temporary file is not changed while the benchmark maps it.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let mut ing = ingester();
    ing.read_slice_with(
        "j",
        &map,
        Parallel {
            threads,
            ..Parallel::default()
        },
    );
    timeline(ing)
}

fn bench(c: &mut Criterion) {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    let mut buf = Vec::new();
    generate(32 << 20, 4, 1, &mut buf).expect("generate");
    f.write_all(&buf).expect("write");
    f.flush().expect("flush");
    let path = f.path().to_path_buf();
    let mut g = c.benchmark_group("journal_32MB");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    g.sample_size(10);
    g.bench_function("mapped_parallel", |b| {
        b.iter(|| {
            let mut ing = ingester();
            ing.read_path("j", &path).expect("read");
            timeline(ing)
        })
    });
    g.bench_function("mapped_1_thread", |b| b.iter(|| mapped(&path, 1)));
    g.bench_function("streamed", |b| {
        b.iter(|| {
            let mut ing = ingester();
            let file = std::fs::File::open(&path).expect("open");
            ing.read("j", std::io::BufReader::with_capacity(1 << 20, file))
                .expect("read");
            timeline(ing)
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
