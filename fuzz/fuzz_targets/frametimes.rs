#![no_main]
//! Frame-time log parser (PresentMon/OCAT/CapFrameX/MangoHud CSV, plain lists) and the
//! statistics over whatever it accepts: no input may panic, and accepted logs give sane lows.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

use bench::frametimes::{parse, stats, DEFAULT_LOWS};
use bench::stats::PercentileMethod;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("fuzz.csv");
    // the first line may name a column, like --column
    let column = text
        .lines()
        .next()
        .filter(|l| l.len() < 40 && !l.contains(','));
    for col in [None, column] {
        if let Ok(log) = parse(&text, path, col) {
            assert!(!log.frame_times_ms.is_empty());
            assert!(log
                .frame_times_ms
                .iter()
                .all(|x| x.is_finite() && *x >= 0.0));
            for m in [PercentileMethod::Linear, PercentileMethod::NearestRank] {
                let s =
                    stats(&log.frame_times_ms, DEFAULT_LOWS, m).expect("non-empty log has stats");
                assert_eq!(s.frames, log.frame_times_ms.len());
                for l in &s.lows {
                    assert!(
                        l.frametime_ms >= s.min_ms && l.frametime_ms <= s.max_ms * (1.0 + 1e-12)
                    );
                    assert!(
                        l.avg_slowest_ms >= l.frametime_ms - 1e-9 * l.frametime_ms.abs().max(1.0)
                    );
                }
            }
        }
    }
});
