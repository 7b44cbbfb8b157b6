#![no_main]
// The Rust Kata shim's lines: journald (`kata[PID]: …`, `vm console: "…"` unescaped), its
// JSON records in containerd's journal, and the sandbox named in passing.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::runtime_rs::parse(line);
            let _ = bootprof::parse::runtime_rs::json_record(line);
            let _ = bootprof::parse::runtime_rs::unescape_debug(line);
            let _ = bootprof::parse::runtime_rs::sandbox_named(line);
        }
    }
});
