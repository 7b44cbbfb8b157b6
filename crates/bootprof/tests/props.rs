//! Property tests: no input makes the parsers panic, and the line accounting holds.

use bootprof::parse::ingest::{ingest_bytes, Options};
use proptest::prelude::*;

const SEEDS: &[&str] = &[
    include_str!("fixtures/run1-vmconsole.txt"),
    include_str!("fixtures/run2-bpftrace.txt"),
    include_str!("fixtures/seed-ftrace.txt"),
    include_str!("fixtures/kubectl-hugepages.txt"),
    include_str!("fixtures/dmesg-initcall.txt"),
];

fn fixture_lines() -> Vec<String> {
    let mut v: Vec<String> = SEEDS
        .iter()
        .flat_map(|s| s.lines().map(str::to_string))
        .collect();
    v.extend(
        include_str!("fixtures/run2-containerd.journal")
            .lines()
            .take(120)
            .map(str::to_string),
    );
    // generated shapes: zh_CN prefixes, prefix-only lines, CRI errors, old BAR lines
    use bootprof::synth::{render, Outcome, Spec};
    for (i, outcome) in [
        Outcome::Complete,
        Outcome::ColdPlugFailed,
        Outcome::CreateTimeout,
    ]
    .into_iter()
    .enumerate()
    {
        let mut spec = Spec::study(i as u64);
        spec.gpus = 2;
        spec.hot_ram_gib = 1;
        spec.zh_prefix = i == 0;
        spec.zone_min = 480;
        spec.prefix_only_pct = 60;
        spec.old_bar_lines = true;
        spec.outcome = outcome;
        let r = render(&spec);
        v.extend(r.journal.lines().take(200).map(str::to_string));
        if let Some(b) = r.bpftrace {
            v.extend(b.lines().take(20).map(str::to_string));
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let ing = ingest_bytes("fuzz", &data, Options::default());
        let _ = bootprof::analyze::build(&ing, None);
    }

    #[test]
    fn mutated_fixture_lines(picks in proptest::collection::vec((0usize..2000, 0usize..400, any::<u8>(), 0u8..4), 1..80)) {
        let lines = fixture_lines();
        let mut data = Vec::new();
        for (i, pos, byte, op) in picks {
            let mut l = lines[i % lines.len()].clone().into_bytes();
            let p = pos.min(l.len());
            match op {
                0 => l.truncate(p),
                1 => l.insert(p, byte),
                2 if p < l.len() => l[p] = byte,
                _ => {}
            }
            data.extend_from_slice(&l);
            data.push(b'\n');
        }
        let ing = ingest_bytes("m", &data, Options::default());
        let s = &ing.stats;
        // every line is an event, unrecognized, another sandbox's, a kernel line with a
        // wall-clock stamp, a copy of a shim record read before, or bad (a bpftrace return
        // printed before its call is both an event and counted bad)
        let accounted = s.events
            + s.unrecognized
            + s.other_sandbox
            + s.wall_clock_kernel
            + s.duplicates
            + s.bad.total();
        prop_assert!(accounted >= s.lines && accounted <= s.lines + s.bad.out_of_order);
        if let Ok(r) = bootprof::analyze::build(&ing, None) {
            for p in &r.phases {
                prop_assert!(p.duration_s >= 0.0 && p.end_s >= p.start_s);
            }
            let _ = bootprof::render::boot::html(&r);
            let _ = bootprof::render::boot::text(&r);
        }
    }

    #[test]
    fn rfc3339_round_trips(secs in 0i64..4_000_000_000, us in 0i64..1_000_000) {
        let ns = secs * 1_000_000_000 + us * 1000;
        let s = bootprof::parse::time::format_rfc3339(ns);
        prop_assert_eq!(bootprof::parse::time::parse_rfc3339(&s), Some(ns));
    }

    #[test]
    fn estimate_is_monotone_in_gpus_and_memory(g in 1u32..16, m in 8u64..2048) {
        use bootprof::estimate::{estimate, Constants, Input};
        let c = Constants::default();
        let base = Input { gpus: g, memory: m << 30, ..Input::seed001() };
        let more_gpus = Input { gpus: g + 1, ..base.clone() };
        let more_mem = Input { memory: (m + 1) << 30, ..base.clone() };
        let t = estimate(&base, &c).total_s;
        prop_assert!(estimate(&more_gpus, &c).total_s > t);
        prop_assert!(estimate(&more_mem, &c).total_s > t);
    }
}

#[test]
fn huge_spans_stay_small() {
    // a guest stamp of ~3 years and a 1e9 ms pin: the page must stay small
    let text = "[    0.000000] Linux version x\n[99999999.000000] Run /init as init process\n";
    let ing = ingest_bytes("t", text.as_bytes(), Options::default());
    let r = bootprof::analyze::build(&ing, None).unwrap();
    assert!(bootprof::render::boot::html(&r).len() < 100_000);
    let text = "2025-11-20T17:56:21.688170596Z: vfio_pin_pages_remote(): vaddr=0x1 npage=1 size=4096B limit=1 pid=1\n2200-12-31T23:59:59.999999999Z: vfio_pin_pages_remote took 999999999 ms\n1970-01-01T00:00:00Z: vfio_pin_pages_remote took 5 ms\n";
    let ing = ingest_bytes("t", text.as_bytes(), Options::default());
    if let Ok(r) = bootprof::analyze::build(&ing, None) {
        assert!(bootprof::render::boot::html(&r).len() < 100_000);
    }
}
