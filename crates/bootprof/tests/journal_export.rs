//! A containerd journal exported as JSON (`journalctl -o json`, `-o json-seq`; fields as
//! systemd's journal export formats document them) reads as the same journal printed
//! short: every entry's `MESSAGE` is the logfmt line, `_HOSTNAME` the node,
//! `__REALTIME_TIMESTAMP` the time of a line without `time=`.

use bootprof::parse::ingest::{ingest_str, Options};
use bootprof::Report;

const SHORT: &str = include_str!("fixtures/run2-containerd.journal");

/// The fixture as `journalctl -o json` (or `json-seq`) would have printed it: each short
/// line's host, identifier and pid into journald's fields; every `bytes_every`-th message
/// as an array of its bytes (how journald writes a message it does not print as text).
fn export(seq: bool, bytes_every: usize) -> String {
    let mut out = String::new();
    for (i, line) in SHORT.lines().enumerate() {
        // `Nov 20 17:55:38 host ident[pid]: message`
        let mut w = line.splitn(5, ' ');
        let (Some(mon), Some(day), Some(clock), Some(host), Some(rest)) =
            (w.next(), w.next(), w.next(), w.next(), w.next())
        else {
            panic!("fixture line {i} is not short: {line}")
        };
        let (ident, msg) = rest.split_once(": ").unwrap();
        let (name, pid) = ident.trim_end_matches(']').split_once('[').unwrap();
        assert_eq!((mon, day.len()), ("Nov", 2), "{line}");
        let (h, m, s) = {
            let mut c = clock.split(':').map(|x| x.parse::<i64>().unwrap());
            (c.next().unwrap(), c.next().unwrap(), c.next().unwrap())
        };
        // 2025-11-20 00:00:00 UTC, the fixture's day, its host in UTC
        let us = (1_763_596_800 + h * 3600 + m * 60 + s) * 1_000_000;
        let message = if bytes_every > 0 && i % bytes_every == 0 {
            serde_json::json!(msg.as_bytes())
        } else {
            serde_json::json!(msg)
        };
        let e = serde_json::json!({
            "__CURSOR": format!("s=1;i={i:x}"),
            "__REALTIME_TIMESTAMP": us.to_string(),
            "__MONOTONIC_TIMESTAMP": "4242",
            "_HOSTNAME": host,
            "SYSLOG_IDENTIFIER": name,
            "_PID": pid,
            "MESSAGE": message,
        });
        if seq {
            out.push('\u{1e}');
        }
        out.push_str(&e.to_string());
        out.push('\n');
    }
    out
}

fn report(name: &str, text: &str) -> Report {
    let ing = ingest_str(name, text, Options::default());
    assert_eq!(
        ing.stats.bad.total(),
        0,
        "{name}: {:?}",
        ing.stats.bad_examples
    );
    bootprof::build(&ing, None).unwrap()
}

/// The report as JSON less the file names its sources carry and the input's size.
fn comparable(r: &Report, name: &str) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    if let Some(st) = v.get_mut("stats").and_then(|s| s.as_object_mut()) {
        st.remove("bytes");
    }
    v.to_string().replace(name, "FILE")
}

#[test]
fn a_json_export_reads_as_the_journal_printed_short() {
    let short = report("node.journal", SHORT);
    assert!(short.phases.len() > 5);
    let want = comparable(&short, "node.journal");
    for (seq, bytes_every) in [(false, 0), (true, 0), (false, 3)] {
        let r = report("node.json", &export(seq, bytes_every));
        assert_eq!(
            comparable(&r, "node.json"),
            want,
            "json-seq {seq}, byte-array messages every {bytes_every}"
        );
    }
}

#[test]
fn a_broken_export_entry_is_a_bad_line_with_its_reason() {
    let mut text = export(false, 0);
    text.push_str("{\"__REALTIME_TIMESTAMP\":\"17635968\",\"MESSAGE\":\"time=\\\"2025-11\n");
    text.push_str("{\"__REALTIME_TIMESTAMP\":\"soon\",\"MESSAGE\":\"x\"}\n");
    text.push_str("{\"__REALTIME_TIMESTAMP\":\"1\",\"MESSAGE\":[255,254]}\n");
    let ing = ingest_str("node.json", &text, Options::default());
    assert_eq!(ing.stats.bad.json, 3, "{:?}", ing.stats.bad_examples);
    let ex = ing.stats.bad_examples.join("\n");
    assert!(ex.contains("journal JSON export"), "{ex}");
    assert!(ex.contains("__REALTIME_TIMESTAMP \"soon\""), "{ex}");
    assert!(ex.contains("not UTF-8"), "{ex}");
}
