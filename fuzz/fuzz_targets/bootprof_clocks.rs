#![no_main]
// Clock inputs: `--tz` offsets, RFC 3339 with zones, journald prefix stamps in any locale
// (month token, day, time) completed near a reference instant, and the whole analysis with
// each of them as `--tz` / `--year` (the year and zone inference and the trace-shift search).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let tz = bootprof::parse::time::parse_utc_offset(s);
    if let Some(z) = tz {
        let _ = bootprof::parse::time::format_offset(z);
    }
    let zoned = bootprof::parse::time::parse_rfc3339_zoned(s);
    let mut words = s.split_whitespace();
    if let (Some(m), Some(d), Some(hms)) = (words.next(), words.next(), words.next()) {
        if let Some(l) = bootprof::parse::time::LocalStamp::parse(m, d, hms) {
            let reference = zoned.map_or(1_763_661_332_000_000_000, |z| z.0);
            let _ = l.resolve_near(reference, tz.unwrap_or(0));
            let _ = l.zone_against(reference);
        }
    }
    let ing = bootprof::ingest_bytes("fuzz", data, bootprof::Options::default());
    let year = zoned.map(|z| bootprof::parse::time::civil_from_nanos(z.0).0);
    let opts = bootprof::AnalyzeOptions {
        sandbox: None,
        clocks: bootprof::analyze::clocks::ClockOptions {
            year,
            tz,
            trace_shift_h: None,
        },
    };
    if let Ok(r) = bootprof::build_with(&ing, &opts) {
        let _ = bootprof::render::boot::text(&r);
    }
});
