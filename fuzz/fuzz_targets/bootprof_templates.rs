#![no_main]
// Differential: a memory hotplug's uevent lines read by their differences from one read the
// long way (the scanning threads' templates) give exactly what reading each the long way
// gives, on any bytes; the first byte picks `--sandbox`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [sb, rest @ ..] = data else {
        return;
    };
    let want = match sb % 3 {
        0 => None,
        1 => Some(""),
        _ => Some("c9f7"),
    };
    if let Err(e) = bootprof::parse::ingest::template_agrees(rest, want) {
        panic!("{e}");
    }
});
