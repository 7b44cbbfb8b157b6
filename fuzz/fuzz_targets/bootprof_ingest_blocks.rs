#![no_main]
// Differential: the block-scanning readers (parallel `read_slice_with`, small-buffer `read`)
// must give exactly the `Ingest` of the one-buffer stream (`ingest_bytes`) on any bytes. The
// first four bytes pick the block size, the thread count, the buffer size and `--sandbox`.
// Also the byte-level console census that picks the sandbox to parse without `--sandbox`,
// and the unpacking of compressed input.
// Run with `-- -detect_leaks=0`: LeakSanitizer reports glibc's thread-exit bookkeeping of
// the scanning threads (32 bytes from __cxa_thread_atexit_impl) as a leak.
use std::io::BufReader;

use bootprof::{ingest_bytes, Ingester, Options, Parallel};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [block, threads, cap, sb, rest @ ..] = data else {
        return;
    };
    let sandbox = match sb % 4 {
        0 => None,
        1 => Some(bootprof::synth::gen::TEMPLATE_SANDBOX.to_string()),
        2 => Some("38f55c4a".to_string()),
        _ => Some(String::new()),
    };
    let opts = Options { sandbox };
    let want = ingest_bytes("fuzz", rest, opts.clone());
    let mut ing = Ingester::new(opts.clone());
    ing.read_slice_with(
        "fuzz",
        rest,
        Parallel {
            threads: usize::from(threads % 4) + 1,
            block_bytes: usize::from(*block) + 1,
        },
    );
    assert_eq!(ing.finish(), want, "parallel blocks");
    let mut ing = Ingester::new(opts);
    ing.read(
        "fuzz",
        BufReader::with_capacity(usize::from(*cap) + 1, rest),
    )
    .expect("reading a slice cannot fail");
    assert_eq!(ing.finish(), want, "small-buffer stream");
    // the console census (which sandbox to parse when none is named) on the same bytes
    let mut census = bootprof::parse::ingest::Census::default();
    census.add(rest);
    let _ = census.busiest();
    // compressed input (gzip, bzip2), told by its first bytes: unpacked or refused, never a
    // panic; plain bytes come back untouched
    match bootprof::parse::ingest::unpack(rest) {
        Ok(bootprof::parse::ingest::Unpacked::Text(t)) => {
            let _ = Ingester::new(Options::default()).read("fuzz", t);
        }
        Ok(bootprof::parse::ingest::Unpacked::Plain(r)) => assert_eq!(r, rest, "plain input consumed"),
        Err(_) => {}
    }
});
