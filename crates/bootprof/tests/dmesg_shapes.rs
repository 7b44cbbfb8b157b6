//! One guest kernel log in every shape util-linux `dmesg` and `journalctl -k` print it
//! (formats from util-linux's dmesg.c and journalctl's output modes, written here): the
//! shapes that carry seconds since boot give the same timeline as plain `dmesg`; the
//! wall-clock shapes are counted and named, never placed on a boot.

use bootprof::parse::ingest::{Ingester, Options};
use bootprof::{build, Report};

const PLAIN: &str = include_str!("fixtures/dmesg-plain.txt");

/// (seconds since boot, message) of each line of the plain fixture.
fn records() -> Vec<(f64, String)> {
    PLAIN
        .lines()
        .filter_map(|l| {
            let (stamp, msg) = l.strip_prefix('[')?.split_once("] ")?;
            Some((stamp.trim().parse().ok()?, msg.to_string()))
        })
        .collect()
}

/// The log as `dmesg` with these options prints it.
fn render(shape: &str, recs: &[(f64, String)]) -> String {
    let mut out = String::new();
    let mut last = 0.0;
    for (t, msg) in recs {
        let (s, us) = (
            t.trunc() as u64,
            ((t.fract() * 1e6).round() as u64).min(999_999),
        );
        let stamp = format!("[{s:5}.{us:06}]");
        let delta = t - last;
        last = *t;
        let line = match shape {
            "plain" => format!("{stamp} {msg}"),
            // -r: the raw syslog level
            "raw" => format!("<6>{stamp} {msg}"),
            // -x: facility and level, each padded to six
            "decode" => format!("{:<6}:{:<6}: {stamp} {msg}", "kern", "info"),
            // -d: "[%5ld.%06ld <%12.06f>] "
            "delta" => format!("[{s:5}.{us:06} <{delta:12.6}>] {msg}"),
            "decode+delta" => format!(
                "{:<6}:{:<6}: [{s:5}.{us:06} <{delta:12.6}>] {msg}",
                "kern", "warn"
            ),
            // journalctl -k -o short-monotonic
            "journal-monotonic" => format!("[{s:5}.{us:06}] gpu-vm kernel: {msg}"),
            // -T: ctime, whole seconds
            "ctime" => format!("[Thu Nov 20 17:56:{:02} 2025] {msg}", s % 60),
            // --time-format iso
            "iso" => format!("2025-11-20T17:56:{:02},{us:06}+00:00 {msg}", s % 60),
            // -e: the minute on a new minute, then deltas
            "reltime" => format!("[  {delta:+8.6}] {msg}"),
            other => panic!("no shape {other}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn analyze(text: &str) -> Result<Report, String> {
    let mut ing = Ingester::new(Options::default());
    ing.read("guest-dmesg.txt", text.as_bytes())
        .map_err(|e| e.to_string())?;
    build(&ing.finish(), None).map_err(|e| e.to_string())
}

/// (phase, label, start, end) of a report.
fn phases(r: &Report) -> Vec<(String, String, String, String)> {
    r.phases
        .iter()
        .map(|p| {
            (
                p.name.to_string(),
                p.label.clone(),
                format!("{:?}", p.start_s),
                format!("{:?}", p.end_s),
            )
        })
        .collect()
}

#[test]
fn every_shape_with_seconds_since_boot_gives_plain_dmesgs_timeline() {
    let recs = records();
    assert!(recs.len() > 20, "fixture read: {} lines", recs.len());
    let plain = analyze(&render("plain", &recs)).unwrap();
    let want = phases(&plain);
    assert!(
        want.iter().any(|p| p.0 == "pci_enumeration"),
        "plain dmesg: {want:?}"
    );
    for shape in [
        "raw",
        "decode",
        "delta",
        "decode+delta",
        "journal-monotonic",
    ] {
        let r = analyze(&render(shape, &recs)).unwrap_or_else(|e| panic!("{shape}: {e}"));
        assert_eq!(phases(&r), want, "{shape}");
        assert_eq!(r.stats.events, plain.stats.events, "{shape}");
        assert_eq!(r.stats.wall_clock_kernel, 0, "{shape}");
    }
}

#[test]
fn wall_clock_shapes_are_named_not_placed() {
    let recs = records();
    for (shape, name) in [
        ("ctime", "dmesg -T (--ctime)"),
        ("iso", "dmesg --time-format iso"),
        ("reltime", "dmesg -e (--reltime)"),
    ] {
        let text = render(shape, &recs);
        let err = analyze(&text).expect_err(shape);
        assert!(err.contains("no boot events"), "{shape}: {err}");
        assert!(
            err.contains(&format!(
                "{} guest kernel lines have wall-clock stamps ({name})",
                recs.len()
            )),
            "{shape}: {err}"
        );
    }
}

#[test]
fn wall_clock_lines_beside_a_usable_log_are_a_finding() {
    let recs = records();
    let text = render("plain", &recs) + &render("ctime", &recs[..3]);
    let r = analyze(&text).unwrap();
    assert_eq!(r.stats.wall_clock_kernel, 3);
    assert!(
        r.findings.iter().any(|f| f.phase == "input"
            && f.text.contains("wall-clock")
            && f.text.contains("dmesg -T")),
        "{:?}",
        r.findings
    );
}
