//! `analyze --all` says of every boot exactly what analyzing that boot alone says
//! (`analyze --sandbox ID@N`, which reads only that sandbox's lines): the generated
//! benchmark journal (every boot, and every sandbox that shows no boot) and the fixtures of
//! the Kata GPU boot study (a journal with its host pin trace and `kubectl describe`). The
//! generated fleets of `tests/fleet.rs` check the same against the truth. Whatever makes
//! `--all` faster must keep these equal.

use std::path::PathBuf;

use bootprof::fleet::{self, Fleet, FleetOptions};
use bootprof::parse::ingest::{Ingest, Ingester, Options, Parallel};
use bootprof::synth::gen::generate;
use bootprof::{AnalyzeOptions, Report};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Read `files` (name, bytes) as the CLI does, in blocks on several threads, keeping the
/// lines of `sandbox` (all with `None`).
fn ingest(files: &[(String, Vec<u8>)], sandbox: Option<&str>) -> Ingest {
    let mut ing = Ingester::new(Options {
        sandbox: sandbox.map(str::to_string),
    });
    for (name, data) in files {
        ing.read_slice_with(
            name,
            data,
            Parallel {
                threads: 3,
                block_bytes: 256 << 10,
            },
        );
    }
    ing.finish()
}

/// `analyze --sandbox ID@N` of the same files, on the node's trace clock when the fleet
/// found one.
fn single(files: &[(String, Vec<u8>)], id: &str, boot: usize, shift: Option<i64>) -> Report {
    let want = format!("{id}@{boot}");
    let ing = ingest(files, Some(&want));
    bootprof::build_with(
        &ing,
        &AnalyzeOptions {
            sandbox: Some(want),
            clocks: bootprof::analyze::clocks::ClockOptions {
                trace_shift_h: shift,
                ..Default::default()
            },
        },
    )
    .unwrap()
}

/// A report as JSON, less what differs by design between the fleet's and one boot's:
/// the other sandboxes (the fleet lists none) and the reading's counts, with the finding
/// that reports them (one boot's reading skips the other sandboxes' lines, bad ones too).
fn comparable(r: &Report) -> Value {
    let mut v = serde_json::to_value(r).unwrap();
    if let Some(o) = v.as_object_mut() {
        o.remove("other_sandboxes");
        o.remove("stats");
        if let Some(Value::Array(f)) = o.get_mut("findings") {
            f.retain(|x| x["phase"] != "input");
        }
    }
    v
}

/// Every row is the single analysis's row, every charted report its report, and every
/// sandbox without a boot shows none alone either. Returns how many rows were checked.
/// The files are one node's: the fleet gives each node's boots that node's lines that name
/// no sandbox, where one boot's analysis takes every such line.
fn check(files: &[(String, Vec<u8>)], f: &Fleet) -> usize {
    for (i, r) in f.rows.iter().enumerate() {
        let id = r.sandbox.as_deref().expect("a row names its sandbox");
        let shift = r
            .node
            .as_ref()
            .and_then(|n| f.trace_shift_h.get(n))
            .copied();
        let one = single(files, id, r.boot, shift);
        let mut mine = r.clone();
        mine.slow_phase = None;
        assert_eq!(
            serde_json::to_value(&mine).unwrap(),
            serde_json::to_value(fleet::row(&one)).unwrap(),
            "row {i} ({id}@{}) differs from the single-boot analysis",
            r.boot
        );
        if let Some(c) = f.charts.get(&i) {
            let (a, b) = (comparable(c), comparable(&one));
            let differ: Vec<(&String, &Value, Option<&Value>)> = a
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| b.get(k.as_str()) != Some(*v))
                .map(|(k, v)| (k, v, b.get(k.as_str())))
                .collect();
            assert!(
                differ.is_empty() && a == b,
                "report of row {i} ({id}@{}) differs from the single-boot analysis: {differ:#?}",
                r.boot
            );
        }
    }
    for nb in &f.without_boot {
        let id = nb
            .sandbox
            .as_deref()
            .expect("a sandbox without a boot is named");
        let want = format!("{id}@1");
        let ing = ingest(files, Some(&want));
        let one = single(files, id, 1, None);
        // its own lines (those that name its sandbox) open or close no phase, and show no
        // failure; its node's trace may still put pin calls in its window
        let own: std::collections::HashSet<(u32, u64)> = ing
            .events
            .iter()
            .filter(|e| e.sandbox.is_some())
            .map(|e| (e.src.file, e.src.line))
            .collect();
        assert!(
            !fleet::shows_boot(&one, |s| own.contains(&(s.file, s.line))),
            "{id}"
        );
        assert_eq!(one.boot.as_ref().map(|b| b.lines), Some(nb.lines), "{id}");
    }
    f.rows.len()
}

fn analyze(files: &[(String, Vec<u8>)]) -> Fleet {
    fleet::analyze(
        &ingest(files, None),
        &FleetOptions {
            threads: Some(2),
            ..FleetOptions::default()
        },
    )
}

#[test]
fn generated_journal_every_row_is_its_single_analysis() {
    for seed in [1u64, 7] {
        let mut data = Vec::new();
        let (_, boots) = generate(3 << 20, 4, seed, &mut data).unwrap();
        let files = vec![("j.log".to_string(), data)];
        let f = analyze(&files);
        assert_eq!(f.rows.len() as u64, boots, "seed {seed}");
        assert_eq!(f.without_boot.len() as u64, boots, "seed {seed}");
        assert!(!f.charts.is_empty());
        assert_eq!(check(&files, &f) as u64, boots);
    }
}

#[test]
fn study_fixtures_every_row_is_its_single_analysis() {
    let read = |names: &[&str]| -> Vec<(String, Vec<u8>)> {
        names
            .iter()
            .map(|n| (n.to_string(), std::fs::read(fixture(n)).unwrap()))
            .collect()
    };
    for names in [
        &["run2-containerd.journal"][..],
        &["run2-containerd.journal", "run2-bpftrace.txt"],
        &[
            "run2-containerd.journal",
            "run2-bpftrace.txt",
            "kubectl-hugepages.txt",
        ],
        // the trace first: it goes with the journal after it
        &[
            "run2-bpftrace.txt",
            "run2-containerd.journal",
            "kubectl-nohugepages.txt",
        ],
    ] {
        let files = read(names);
        let f = analyze(&files);
        assert!(!f.rows.is_empty(), "{names:?}");
        assert!(check(&files, &f) >= 1, "{names:?}");
    }
}

/// The check fails on a fleet that says something else of a boot: a row's phase, a
/// charted report's finding, a sandbox without a boot that has one.
#[test]
fn the_check_catches_a_differing_fleet() {
    let mut data = Vec::new();
    generate(1 << 20, 4, 3, &mut data).unwrap();
    let files = vec![("j.log".to_string(), data)];
    let good = analyze(&files);
    check(&files, &good);
    let fails = |f: Fleet| {
        let files = files.clone();
        std::panic::catch_unwind(move || {
            check(&files, &f);
        })
        .is_err()
    };
    let mut f = good.clone();
    if let Some(c) = f.rows[0].phases.get_mut("cdi_wait") {
        c.s = c.s.map(|s| s + 0.001);
    }
    assert!(fails(f));
    let mut f = good.clone();
    let i = *f.charts.keys().next().unwrap();
    f.charts.get_mut(&i).unwrap().findings[0].text.push('.');
    assert!(fails(f));
    let mut f = good;
    f.without_boot[0].lines += 1;
    assert!(fails(f));
}
