#![no_main]
// Guest kernel lines, with and without initcall_debug, in every dmesg/journalctl shape.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = bootprof::parse::dmesg::parse_line(line);
            let _ = bootprof::parse::dmesg::wall_clock_shape(line);
        }
    }
});
