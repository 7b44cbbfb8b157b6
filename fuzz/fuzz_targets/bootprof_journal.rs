#![no_main]
// containerd journal lines (journald prefix + logfmt, Go-quoted vmconsole payloads; journald
// JSON export entries), then the
// whole pipeline: streaming ingest of the bytes, the timeline and the fleet view.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::journal::parse_line(line);
            let _ = bootprof::parse::journal::export_entry(line);
        }
    }
    let ing = bootprof::ingest_bytes("fuzz", data, bootprof::Options::default());
    if let Ok(r) = bootprof::build(&ing, None) {
        let _ = bootprof::render::boot::text(&r);
        let _ = bootprof::render::boot::html(&r);
    }
    // every boot of the input (`analyze --all`), in every output
    let f = bootprof::fleet::analyze(
        &ing,
        &bootprof::fleet::FleetOptions {
            threads: Some(1),
            ..Default::default()
        },
    );
    let _ = bootprof::render::fleet::text(&f);
    let _ = bootprof::render::fleet::json_lines(&f);
    let _ = bootprof::render::fleet::html(&f);
    let _ = bootprof::render::fleet::prometheus(&f);
});
