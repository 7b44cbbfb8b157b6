#![no_main]
// bpftrace output of the pin-pages / map-ioctl scripts, including @hist blocks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::bpftrace::parse_line(line);
        }
    }
});
