#![no_main]
// Differential: the one-pass readers of the common journald prefix and of a kata-agent record
// inside a Go-quoted `vmconsole=` value give what the long ways give (word-by-word prefix;
// unquoting, then reading the record), whenever they take a line.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            if let Err(e) = bootprof::parse::journal::fast_paths_agree(line) {
                panic!("{e}: {line:?}");
            }
        }
    }
});
