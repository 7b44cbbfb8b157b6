#![no_main]
// kata-agent JSON records (also reached through the journal target's vmconsole payloads).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            if let Ok(r) = bootprof::parse::agent::parse_line(line) {
                if let bootprof::parse::agent::AgentKind::Uevent { bdf: Some(b), .. } = &r.kind {
                    assert!(bootprof::parse::dmesg::is_bdf(b));
                }
            }
        }
    }
});
