//! A bpftrace pin trace that holds returns without their call lines — the trace began during
//! a call, or a call line was cut (the Kata GPU boot study's own trace has one) — counts each
//! such call with its duration, names it as of unknown size and process, and never folds it
//! into the guest RAM row (which grew to start 100 s early when one sat before the BAR pins).

use bootprof::parse::ingest::{Ingester, Options};

const JOURNAL: &str = include_str!("fixtures/run2-containerd.journal");
const PINS: &str = include_str!("fixtures/run2-bpftrace.txt");

fn report(pins: &str) -> bootprof::Report {
    let mut ing = Ingester::new(Options::default());
    ing.read("node.journal", JOURNAL.as_bytes()).unwrap();
    ing.read("pins.txt", pins.as_bytes()).unwrap();
    bootprof::build(&ing.finish(), None).unwrap()
}

/// The table row of the folded RAM pins: (label, start s).
fn ram_row(text: &str) -> (String, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with("dma_pinning") && l.contains("RAM ×"))
        .unwrap_or_else(|| panic!("no RAM row:\n{text}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[1..3].join(" "), w[3].parse().unwrap())
}

#[test]
fn returns_without_their_call_are_counted_apart_from_guest_ram() {
    let base = report(PINS);
    let s = &base.pin_summary;
    // the study's trace: one call line is cut (`025-11-20T…`), its return stays alone
    assert_eq!((s.calls, s.size_unknown), (33, 1));
    let text = bootprof::render::boot::text(&base);
    let (label, start) = ram_row(&text);
    assert_eq!(label, "RAM ×25", "{text}");
    assert!((start - 138.459).abs() < 1e-3, "{text}");
    assert!(
        text.contains("1 of them a return whose call line the trace lacks"),
        "{text}"
    );
    assert!(text.contains("at least 1092 GiB"), "{text}");
    // a trace that began during a call: its return is the first line
    let early =
        format!("2025-11-20T17:56:20.000000000Z: vfio_pin_pages_remote took 900 ms\n{PINS}");
    let r = report(&early);
    assert_eq!((r.pin_summary.calls, r.pin_summary.size_unknown), (34, 2));
    let text = bootprof::render::boot::text(&r);
    assert_eq!(ram_row(&text), ("RAM ×25".to_string(), start), "{text}");
    let alone: Vec<_> = r
        .phases
        .iter()
        .filter(|p| p.name == "dma_pinning" && p.label == "pin, size unknown")
        .collect();
    assert_eq!(alone.len(), 2, "{:?}", r.phases);
    assert!(
        alone.iter().all(|p| p.detail.contains("pages unknown")),
        "{alone:?}"
    );
}

#[test]
fn a_pin_trace_alone_does_not_guess_which_pins_are_guest_ram() {
    let mut ing = Ingester::new(Options::default());
    ing.read("pins.txt", PINS.as_bytes()).unwrap();
    let r = bootprof::build(&ing.finish(), None).unwrap();
    // the seven 128 GiB BAR pins were read as RAM: 0.033 s/GiB, "pre-faulted" (the RAM
    // pins alone pace at 0.064 s/GiB: small pages)
    assert_eq!(r.pin_summary.ram_s_per_gib, None);
    assert_eq!(r.pin_summary.ram_backing, None);
    assert!(
        !r.phases.iter().any(|p| p.name == "memory_hotplug"),
        "{:?}",
        r.phases
    );
    assert!(
        r.clocks
            .notes
            .iter()
            .any(|n| n.contains("no guest-side log")),
        "{:?}",
        r.clocks.notes
    );
    let text = bootprof::render::boot::text(&r);
    assert!(!text.contains("RAM ×"), "{text}");
    assert!(text.contains("pins ×32"), "{text}");
    assert_eq!(r.pin_summary.calls, 33);
}

/// The study journal's other sandbox — a VM already running, one console line a minute
/// before the study VM pins its first BARs — took four of those BAR pins (they fell in the
/// 60 s after its last line) while its notes said no call fell inside its window.
#[test]
fn a_sandbox_takes_no_pins_of_a_process_that_pins_nothing_during_its_lines() {
    let mut ing = Ingester::new(Options {
        sandbox: Some("38f55c4a".into()),
    });
    ing.read("node.journal", JOURNAL.as_bytes()).unwrap();
    ing.read("pins.txt", PINS.as_bytes()).unwrap();
    let r = bootprof::build_with(
        &ing.finish(),
        &bootprof::AnalyzeOptions {
            sandbox: Some("38f55c4a".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.pin_summary.calls, 0, "{:?}", r.phases);
    assert!(!r.phases.iter().any(|p| p.name == "dma_pinning"));
    assert_eq!(r.pin_summary.foreign_calls, 33);
    let text = bootprof::render::boot::text(&r);
    assert!(!text.contains("the log ends during"), "{text}");
}
