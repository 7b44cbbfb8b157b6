#![no_main]
// `kubectl describe pod` lines (Start Time / Started / Finished / Name).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::kubectl::parse_line(line);
            let _ = bootprof::parse::time::parse_rfc1123(line);
            let _ = bootprof::parse::time::parse_rfc3339(line);
        }
    }
});
