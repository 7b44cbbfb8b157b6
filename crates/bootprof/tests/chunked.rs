//! The parallel, block-scanning paths (`read_slice_with`, `read_path` on a mapped file) give
//! exactly the `Ingest` of the streaming path (`ingest_bytes`, `read`): same events with the
//! same line numbers and offsets, same stats, same bad-line examples in the same order.

use std::io::{BufReader, Write};

use bootprof::parse::ingest::{ingest_bytes, Body, Ingest, Ingester, Options, Parallel};
use bootprof::synth::gen::{generate, TEMPLATE_SANDBOX};
use proptest::prelude::*;

fn opts(sandbox: Option<&str>) -> Options {
    Options {
        sandbox: sandbox.map(str::to_string),
    }
}

fn sliced(data: &[u8], o: &Options, threads: usize, block_bytes: usize) -> Ingest {
    let mut ing = Ingester::new(o.clone());
    ing.read_slice_with(
        "j",
        data,
        Parallel {
            threads,
            block_bytes,
        },
    );
    ing.finish()
}

fn by_path(data: &[u8], o: &Options) -> Ingest {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
    let mut ing = Ingester::new(o.clone());
    ing.read_path("j", f.path()).unwrap();
    ing.finish()
}

/// Each event's line number and offset point at its line in `data`, independently of how
/// the reader counted them.
fn check_positions(data: &[u8], ing: &Ingest) {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            data.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let mut srcs = Vec::new();
    for e in &ing.events {
        srcs.push((e.src.line, e.src.offset));
        if let Body::AgentRun(run) = &e.body {
            srcs.extend(run.lines.iter().skip(1).map(|l| (l.line, l.offset)));
        }
    }
    for (at, off) in srcs {
        let off = usize::try_from(off).unwrap();
        let line = starts.binary_search(&off).expect("offset starts a line") as u64 + 1;
        assert_eq!(at, line, "line number of offset {off}");
    }
}

fn journal(size: u64, noise: u32, seed: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    generate(size, noise, seed, &mut buf).unwrap();
    buf
}

#[test]
fn mapped_generated_journal_matches_stream() {
    // over 1 MiB: read_path maps it and scans blocks on all CPUs
    let data = journal(3 << 20, 4, 11);
    for sandbox in [Some(TEMPLATE_SANDBOX), None] {
        let o = opts(sandbox);
        let want = ingest_bytes("j", &data, o.clone());
        let lines: u64 = want.events.iter().map(|e| e.lines()).sum();
        assert!(lines > 800, "the template boot is found");
        assert_eq!(lines, want.stats.events);
        assert!(want.stats.unrecognized > 1000, "noise lines are counted");
        assert_eq!(want.stats.other_sandbox > 0, sandbox.is_some());
        assert_eq!(by_path(&data, &o), want);
        assert_eq!(sliced(&data, &o, 2, 64 << 10), want);
        assert_eq!(sliced(&data, &o, 7, 4099), want);
        check_positions(&data, &want);
    }
}

/// A journal whose shim lines are each there twice (`kata[PID]` and `containerd[PID]`, a
/// copy sometimes after the next line): every path drops the same copies — the memory
/// hotplug's uevent lines that templates read included — and keeps the same events.
#[test]
fn copies_under_two_identifiers_are_dropped_alike_on_every_path() {
    use bootprof::synth::{fleet, Spec};
    let mut spec = Spec::study(5);
    spec.hot_ram_gib = 64;
    spec.dup_identifiers = true;
    let start = bootprof::parse::time::parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
    let node = fleet(
        &[("gpu-01".to_string(), vec![spec.clone(), spec])],
        start,
        3600,
    )
    .remove(0);
    let data = node.journal.as_bytes();
    let copies: u64 = node.boots.iter().map(|(_, t)| t.duplicates).sum();
    assert!(copies > 1000, "{copies}");
    let o = opts(None);
    let want = ingest_bytes("j", data, o.clone());
    assert_eq!(want.stats.duplicates, copies);
    assert_eq!(sliced(data, &o, 2, 64 << 10), want);
    assert_eq!(sliced(data, &o, 5, 4099), want);
    check_positions(data, &want);
}

#[test]
fn small_and_odd_files_by_path() {
    let fixtures: &[&[u8]] = &[
        include_bytes!("fixtures/run2-containerd.journal"),
        include_bytes!("fixtures/bad-lines.txt"),
        include_bytes!("fixtures/run2-bpftrace.txt"),
        b"",
        b"\n",
        b"no line end",
        b"\r\n\r\n[    1.0] x\r",
    ];
    for f in fixtures {
        let o = opts(Some(TEMPLATE_SANDBOX));
        let want = ingest_bytes("j", f, o.clone());
        assert_eq!(by_path(f, &o), want);
        assert_eq!(sliced(f, &o, 3, 1), want);
        check_positions(f, &want);
    }
    // a missing file is an error, not a panic
    let mut ing = Ingester::new(Options::default());
    assert!(ing
        .read_path("x", std::path::Path::new("/nonexistent/vmtune/journal"))
        .is_err());
}

#[test]
fn fifo_by_path_is_streamed() {
    // not a regular file: read_path must stream it (a map of a pipe would fail)
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("journal.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let data = journal(1 << 20, 2, 5);
    let o = opts(Some(TEMPLATE_SANDBOX));
    let want = ingest_bytes("j", &data, o.clone());
    let writer = {
        let (fifo, data) = (fifo.clone(), data.clone());
        std::thread::spawn(move || std::fs::write(fifo, data).unwrap())
    };
    let mut ing = Ingester::new(o);
    ing.read_path("j", &fifo).unwrap();
    writer.join().unwrap();
    assert_eq!(ing.finish(), want);
}

#[test]
fn bad_examples_keep_file_order_across_blocks() {
    // bad lines spread over many blocks: the first eight, in file order, are reported
    let mut data = Vec::new();
    for i in 0..200 {
        data.extend_from_slice(format!("[{:>12.6}] guest line\n", f64::from(200 - i)).as_bytes());
        data.extend_from_slice(b"{\"msg\":\"broken\n");
    }
    let want = ingest_bytes("j", &data, Options::default());
    assert_eq!(want.stats.bad_examples.len(), 8);
    assert!(want.stats.bad.total() >= 200);
    for threads in 1..5 {
        assert_eq!(sliced(&data, &Options::default(), threads, 33), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Generated journals of random size and noise, with CRLF line ends, bytes that are not
    /// UTF-8 and a cut last line mixed in, read in random block sizes and thread counts
    /// (blocks end mid-line before they are aligned to the next line end).
    #[test]
    fn random_journals_and_blocks(
        size in 1u64..200_000,
        noise in 0u32..6,
        seed in any::<u64>(),
        crlf_every in 1usize..50,
        junk_every in 1usize..80,
        cut in 0usize..200,
        block in 1usize..20_000,
        threads in 1usize..5,
        all_sandboxes in any::<bool>(),
    ) {
        let raw = journal(size, noise, seed);
        let mut data = Vec::with_capacity(raw.len() + raw.len() / 8);
        for (i, line) in raw.split_inclusive(|b| *b == b'\n').enumerate() {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            data.extend_from_slice(body);
            if i % junk_every == 0 {
                data.extend_from_slice(&[0xfe, 0x80]);
            }
            if i % crlf_every == 0 {
                data.push(b'\r');
            }
            data.push(b'\n');
        }
        data.truncate(data.len().saturating_sub(cut));
        let o = opts(if all_sandboxes { None } else { Some(TEMPLATE_SANDBOX) });
        let want = ingest_bytes("j", &data, o.clone());
        prop_assert_eq!(&sliced(&data, &o, threads, block), &want);
        let mut ing = Ingester::new(o.clone());
        ing.read("j", BufReader::with_capacity(block % 512 + 1, &data[..])).unwrap();
        prop_assert_eq!(&ing.finish(), &want);
        check_positions(&data, &want);
    }
}
