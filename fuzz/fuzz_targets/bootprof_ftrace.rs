#![no_main]
// ftrace function_graph output (CPU column, abstime, proc, delay markers).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::ftrace::parse_line(line);
        }
    }
});
