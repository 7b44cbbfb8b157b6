#![no_main]
//! What an output says about how it ran: nccl-tests' facts (NCCL_* settings, ranks), STREAM's numactl binding lines and file names, repeats made one; never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = bench::readers::nccl::facts(text);
    for line in text.lines() {
        if let Some(b) = bench::readers::stream::Binding::from_line(line) {
            assert!(b.cpunodebind.is_some() || b.membind.is_some());
            let _ = b.locality();
        }
        let _ = bench::readers::stream::Binding::from_name(line);
    }
    if let Ok((tool, ms)) = bench::readers::read_any(text) {
        let one = bench::readers::collapse(&ms, tool.repeat_rule());
        assert!(one.len() <= ms.len());
        let _ = bench::readers::facts(tool, text, &ms);
    }
});
