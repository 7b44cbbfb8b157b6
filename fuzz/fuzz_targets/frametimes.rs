#![no_main]
//! Frame-time readers (PresentMon 1.x/2.x/2.4+, OCAT, CapFrameX CSV and JSON, FrameView,
//! MangoHud, Afterburner HML, plain lists), the per-application selection and the statistics
//! over whatever they accept: no input may panic, accepted logs hold only plausible frame
//! times, selection keeps every series, and the lows are sane.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

use bench::frametimes::{
    decode, parse, select, stats, Options, Pick, DEFAULT_LOWS, MAX_FRAME_MS, MIN_FRAME_MS,
};
use bench::stats::PercentileMethod;

fuzz_target!(|data: &[u8]| {
    let text = decode(data);
    let path = Path::new("fuzz.csv");
    // the first line may name a column, like --column
    let column = text
        .lines()
        .next()
        .filter(|l| l.len() < 40 && !l.contains(','));
    for col in [None, column] {
        for as_samples in [false, true] {
            let Ok(capture) = parse(
                &text,
                path,
                &Options {
                    column: col,
                    as_samples,
                },
            ) else {
                continue;
            };
            let series = capture.series.len();
            assert!(capture.series.iter().any(|s| !s.frame_times_ms.is_empty()));
            for s in &capture.series {
                assert!(s
                    .frame_times_ms
                    .iter()
                    .all(|x| (MIN_FRAME_MS..=MAX_FRAME_MS).contains(x)));
                assert_eq!(s.presents, s.frame_times_ms.len() + s.skipped_rows);
                assert!(s.zero_rows <= s.skipped_rows);
            }
            let app = capture
                .series
                .iter()
                .find_map(|s| s.app.application.clone())
                .unwrap_or_default();
            for pick in [Pick::Busiest, Pick::All, Pick::App(&app)] {
                let Ok(sel) = select(capture.clone(), pick) else {
                    continue;
                };
                // nothing is lost: reported + listed = every series
                assert!(sel.logs.len() + sel.others.len() == series);
                for log in &sel.logs {
                    for m in [PercentileMethod::Linear, PercentileMethod::NearestRank] {
                        let Some(s) = stats(&log.frame_times_ms, DEFAULT_LOWS, m) else {
                            assert!(log.frame_times_ms.is_empty());
                            continue;
                        };
                        assert_eq!(s.frames, log.frame_times_ms.len());
                        assert!(s.avg_fps.is_finite() && s.duration_s.is_finite());
                        for l in &s.lows {
                            assert!(l.fps.is_finite() && l.avg_slowest_fps.is_finite());
                            assert!(
                                l.frametime_ms >= s.min_ms
                                    && l.frametime_ms <= s.max_ms * (1.0 + 1e-12)
                            );
                            assert!(
                                l.avg_slowest_ms
                                    >= l.frametime_ms - 1e-9 * l.frametime_ms.abs().max(1.0)
                            );
                        }
                    }
                }
            }
        }
    }
});
