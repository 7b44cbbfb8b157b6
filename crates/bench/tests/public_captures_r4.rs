//! The fourth collection of public inputs: frame-time captures in the shapes of files published
//! in tools' test data, benchmark sites' test data and issue threads (each source named in
//! tests/fixtures/captures4/README.md and docs/sources.md), written with frame times of our own
//! by `tests/fixtures/captures4/gen.py`, which also computed every figure asserted here
//! (`expected.txt`) without vmtune.

use std::path::{Path, PathBuf};

use bench::frametimes::{
    self, load, select, stats, Capture, FrameLog, Options, Pick, RowKind, DEFAULT_LOWS,
};
use bench::stats::PercentileMethod;

fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/captures4")
        .join(name)
}

fn read(name: &str) -> Capture {
    read_with(name, &Options::default())
}

fn read_with(name: &str, opts: &Options) -> Capture {
    load(&path(name), opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The series `vmtune bench frametimes FILE` reports, and the others it lists.
fn reported(c: Capture, pick: Pick) -> (FrameLog, Vec<frametimes::SeriesSummary>) {
    let sel = select(c, pick).unwrap();
    assert_eq!(sel.logs.len(), 1, "{:#?}", sel.logs);
    (sel.logs.into_iter().next().unwrap(), sel.others)
}

/// Figures computed by gen.py: frames, average FPS, 1/2/5% lows, average of the slowest 1%.
struct Want {
    frames: usize,
    avg_fps: f64,
    lows: [f64; 3],
    avg_slowest1: f64,
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-9 * b.abs().max(1.0),
        "{what}: {a} != {b}"
    );
}

fn check(log: &FrameLog, want: &Want) {
    let s = stats(&log.frame_times_ms, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
    assert_eq!(s.frames, want.frames, "{}", log.source);
    close(s.avg_fps, want.avg_fps, "avg fps");
    for (low, w) in s.lows.iter().zip(want.lows) {
        close(low.fps, w, &format!("{}% low", low.percent));
    }
    close(
        s.lows[0].avg_slowest_fps,
        want.avg_slowest1,
        "avg of slowest 1%",
    );
}

fn label(s: &frametimes::SeriesSummary) -> String {
    format!("{} {}", s.app.label(), s.presents)
}

// --- PresentMon-family captures --------------------------------------------------------------

/// OCAT 1.x as CapFrameX keeps it in its tests (`OCAT-MetroExodus.exe-2019-02-20T101522.csv`):
/// no `MsEstimatedDriverLag` column, the system columns (`Motherboard`, `OS`, ... `Comment`)
/// filled on the first row only, quoted. It is an OCAT capture, not a PresentMon one.
#[test]
fn ocat_capture_without_driver_lag_is_ocat() {
    let c = read("ocat_metroexodus_2019.csv");
    assert_eq!(c.format, "ocat");
    let (log, others) = reported(c, Pick::Busiest);
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(log.app.application.as_deref(), Some("MetroExodus.exe"));
    assert_eq!(log.app.process_id, Some(13840));
    assert_eq!(log.kind, RowKind::Frames);
    assert_eq!(log.presents, 200);
    assert_eq!(log.skipped_rows, 0);
    let d = log.displayed.as_ref().unwrap();
    assert_eq!((d.dropped, d.presents), (3, 200));
    assert_eq!(log.allows_tearing, Some(200));
    assert_eq!(log.present_modes.len(), 1);
    assert_eq!(
        log.present_modes[0].mode,
        "Hardware Composed: Independent Flip"
    );
    check(
        &log,
        &Want {
            frames: 200,
            avg_fps: 93.45794392523365,
            lows: [49.261083743843024, 50.0, 100.0],
            avg_slowest1: 20.0,
        },
    );
    // the display column: the three dropped presents (0.000) are not frames
    let c = read_with(
        "ocat_metroexodus_2019.csv",
        &Options {
            column: Some("MsBetweenDisplayChange"),
            as_samples: false,
        },
    );
    let (log, _) = reported(c, Pick::Busiest);
    assert_eq!(
        (log.frame_times_ms.len(), log.zero_rows, log.skipped_rows),
        (197, 3, 3)
    );
}

/// CapFrameX's own CSV (`CapFrameXFileWithHeader.csv`): `//key=value` lines, `WasBatched` and
/// `DwmNotified`, `TimeInSeconds` with binary noise (`0.00334499999999949`), and three of five
/// presents dropped (a ~290 FPS game on a 120 Hz display). Every present is a frame.
#[test]
fn capframex_csv_with_info_lines_and_mostly_dropped_presents() {
    let c = read("capframex_re2_header.csv");
    assert_eq!(c.format, "capframex-csv");
    let (log, others) = reported(c, Pick::Busiest);
    assert!(others.is_empty());
    assert_eq!(log.app.application.as_deref(), Some("re2.exe"));
    assert_eq!(log.app.swap_chain.as_deref(), Some("0x0000000076F3DB00"));
    let d = log.displayed.as_ref().unwrap();
    assert_eq!((d.dropped, d.presents), (180, 300));
    check(
        &log,
        &Want {
            frames: 300,
            avg_fps: 275.9889604415823,
            lows: [250.0, 250.0, 250.0],
            avg_slowest1: 62.5,
        },
    );
}

/// PresentMon 1.x as CapFrameX ran it (`PresentMon-2019-09-29T145423.csv`): dwm.exe on a
/// 120 Hz display presents more often than the game; "AMD Ryzen Master.exe" (a name with
/// spaces) presents on swap chain 0x0000000000000000 with runtime `Other` and sync interval -1.
#[test]
fn presentmon_1x_game_is_reported_over_dwm_and_a_tool_with_spaces_in_its_name() {
    let (log, others) = reported(read("presentmon_grb_dwm_ryzenmaster.csv"), Pick::Busiest);
    assert_eq!(log.format, "presentmon-1");
    assert_eq!(
        log.app.label(),
        "GRB.exe (pid 13456, swap chain 0x000002604A44FD30)"
    );
    assert_eq!(
        others.iter().map(label).collect::<Vec<_>>(),
        [
            "dwm.exe (pid 1520, swap chain 0x000001927FEB15A0) 120",
            "AMD Ryzen Master.exe (pid 16864, swap chain 0x0000000000000000) 15",
        ]
    );
    assert_eq!(log.displayed.as_ref().unwrap().dropped, 1);
    assert!(log.notes.is_empty(), "{:?}", log.notes);
    check(
        &log,
        &Want {
            frames: 110,
            avg_fps: 115.06276150627615,
            lows: [35.23608174770973, 83.33333333333333, 83.33333333333333],
            avg_slowest1: 33.333333333333336,
        },
    );
    // a name with spaces is picked by its name
    let (tool, _) = reported(
        read("presentmon_grb_dwm_ryzenmaster.csv"),
        Pick::App("AMD Ryzen Master"),
    );
    assert_eq!((tool.app.process_id, tool.presents), (Some(16864), 15));
    close(
        stats(&tool.frame_times_ms, &[], PercentileMethod::Linear)
            .unwrap()
            .avg_fps,
        1000.0 / 66.0,
        "tool fps",
    );
}

/// PresentMon 2.4 with `--qpc_time` (`Tests/Gold/test_case_4.csv`): `TimeInQPC` instead of
/// `TimeInSeconds`, `FrameType`, `MsPCLatency`, `MsVideoBusy`, `MsInstrumentedLatency`,
/// 14-decimal cells; Presenter.exe in two processes (D3D9, then DXGI going from composed to
/// independent flip); a dwm.exe present of mode `Other` never displayed, and a 277 ms hitch.
#[test]
fn presentmon_2_4_qpc_time_two_processes_of_one_name() {
    let c = read("presentmon_2_4_qpc_time.csv");
    assert_eq!(c.format, "presentmon-2.4");
    let (log, others) = reported(c, Pick::Busiest);
    assert_eq!(
        log.app.label(),
        "Presenter.exe (pid 8536, swap chain 0x197B10BAB70)"
    );
    assert_eq!(
        others.iter().map(label).collect::<Vec<_>>(),
        [
            "dwm.exe (pid 10376, swap chain 0x1BF098B1ED0) 92",
            "Presenter.exe (pid 9620, swap chain 0x19E52815138) 20",
        ]
    );
    let d = log.displayed.as_ref().unwrap();
    assert_eq!((d.dropped, d.presents), (1, 30));
    assert!(d.rule.contains("MsUntilDisplayed"), "{}", d.rule);
    let modes: Vec<(String, usize)> = log
        .present_modes
        .iter()
        .map(|m| (m.mode.clone(), m.presents))
        .collect();
    assert_eq!(
        modes,
        [
            ("Hardware: Independent Flip".to_string(), 28),
            ("Composed: Flip".to_string(), 2)
        ]
    );
    let want = Want {
        frames: 30,
        avg_fps: 58.27505827505826,
        lows: [32.05128205128205; 3],
        avg_slowest1: 32.05128205128205,
    };
    check(&log, &want);
    // the name picks the busiest of its processes; the pid the other one
    let (by_name, _) = reported(read("presentmon_2_4_qpc_time.csv"), Pick::App("presenter"));
    assert_eq!(by_name.app.process_id, Some(8536));
    let (d3d9, _) = reported(read("presentmon_2_4_qpc_time.csv"), Pick::App("9620"));
    check(
        &d3d9,
        &Want {
            frames: 20,
            avg_fps: 59.52380952380955,
            lows: [58.139534883720934; 3],
            avg_slowest1: 58.139534883720934,
        },
    );
    let (dwm, _) = reported(read("presentmon_2_4_qpc_time.csv"), Pick::App("dwm"));
    assert_eq!(dwm.displayed.as_ref().unwrap().dropped, 1);
    check(
        &dwm,
        &Want {
            frames: 92,
            avg_fps: 47.90360046064521,
            lows: [6.435946605044261, 25.338228611531918, 59.999880000240005],
            avg_slowest1: 3.607622039540259,
        },
    );
}

/// The same capture with 2.x metrics (`Tests/Gold/test_case_4_v2.csv`): `CPUStartQPC`,
/// `FrameTime` (CPU start to CPU start), `DisplayedTime` `NA` for a present not displayed.
#[test]
fn presentmon_2_v2_metrics_twin_gives_the_same_figures() {
    let c = read("presentmon_2_4_v2_metrics.csv");
    assert_eq!(c.format, "presentmon-2");
    assert_eq!(c.column.as_deref(), Some("FrameTime"));
    let (log, others) = reported(c, Pick::Busiest);
    assert_eq!(log.app.process_id, Some(8536));
    assert_eq!(others.len(), 2);
    let d = log.displayed.as_ref().unwrap();
    assert_eq!((d.dropped, d.presents), (1, 30));
    assert!(d.rule.contains("DisplayedTime"), "{}", d.rule);
    check(
        &log,
        &Want {
            frames: 30,
            avg_fps: 58.27505827505826,
            lows: [32.05128205128205; 3],
            avg_slowest1: 32.05128205128205,
        },
    );
}

/// CapFrameX's `ShortFile.csv`: five presents and no line break after the last.
#[test]
fn five_presents_without_a_final_line_break() {
    let bytes = std::fs::read(path("capframex_shortfile.csv")).unwrap();
    assert_ne!(bytes.last(), Some(&b'\n'));
    let (log, _) = reported(read("capframex_shortfile.csv"), Pick::Busiest);
    assert_eq!(log.app.application.as_deref(), Some("FarCryNewDawn.exe"));
    check(
        &log,
        &Want {
            frames: 5,
            avg_fps: 47.28132387706856,
            lows: [25.5885363357216, 26.205450733752624, 28.248587570621474],
            avg_slowest1: 25.0,
        },
    );
}

/// CapFrameX's `InvalidColumnFile.csv`: PresentMon 1.x columns without `TimeInSeconds`, with a
/// burst of 36-80 ms frames. Rows of a PresentMon capture are presents: no time is needed.
#[test]
fn presentmon_without_time_column_and_a_hitch() {
    let (log, _) = reported(read("presentmon_without_timeinseconds.csv"), Pick::Busiest);
    assert_eq!(log.format, "presentmon-1");
    assert_eq!(log.kind, RowKind::Frames);
    assert!(log.notes.is_empty(), "{:?}", log.notes);
    check(
        &log,
        &Want {
            frames: 80,
            avg_fps: 57.22460658082976,
            lows: [12.5, 13.47708894878706, 57.224606580829935],
            avg_slowest1: 12.5,
        },
    );
}

/// CapFrameX 1.7 JSON (openframetimes_db `CapFrameX-Judgment.exe-2022-12-14T163430.json`):
/// `Info` with `null` fields, one run with `SensorData: null`, `SensorData2` keyed by sensor
/// paths, `PcLatency: null`, `RTSSFrameTimes: null`, present modes 3 and 4.
#[test]
fn capframex_1_7_json_with_sensor_data() {
    let c = read("capframex_judgment_sensors.json");
    assert_eq!(c.format, "capframex-json");
    let (log, others) = reported(c, Pick::Busiest);
    assert!(others.is_empty());
    assert_eq!(log.app.label(), "Judgment.exe (run 1)");
    assert_eq!(log.displayed.as_ref().unwrap().dropped, 0);
    assert_eq!(log.allows_tearing, Some(0));
    let modes: Vec<(String, usize)> = log
        .present_modes
        .iter()
        .map(|m| (m.mode.clone(), m.presents))
        .collect();
    assert_eq!(
        modes,
        [
            ("Hardware: Independent Flip".to_string(), 500),
            ("Composed: Flip".to_string(), 100)
        ]
    );
    check(
        &log,
        &Want {
            frames: 600,
            avg_fps: 59.880239520958085,
            lows: [26.31578947368421, 50.0, 50.0],
            avg_slowest1: 26.31578947368421,
        },
    );
}

// --- monitoring logs ------------------------------------------------------------------------

/// MangoHud 0.4 (flightlessmango/MangoHud#287; `src/logging.cpp` at 99cefe96, 2020-06-19):
/// the `os,cpu,gpu,ram,kernel,driver` lines, then rows `fps,cpu_load,gpu_load,elapsed` with no
/// column names, `elapsed` in µs. Before: "line 1: no frame-time column found".
#[test]
fn mangohud_0_4_log_without_column_names() {
    let c = read("mangohud_0_4_headerless.csv");
    assert_eq!(c.format, "mangohud");
    let (log, _) = reported(c, Pick::Busiest);
    assert_eq!(log.kind, RowKind::Samples);
    assert_eq!(log.presents, 50);
    let s = log.sampling.as_ref().unwrap();
    assert_eq!(s.time_column.as_deref(), Some("elapsed"));
    close(s.interval_ms.unwrap(), 100.00026530612244, "interval");
    close(s.duration_s.unwrap(), 5.000013265306123, "duration");
    assert!(
        log.notes.iter().any(|n| n.contains("no column names")),
        "{:?}",
        log.notes
    );
    check(
        &log,
        &Want {
            frames: 50,
            avg_fps: 85.26817095764576,
            lows: [44.0, 44.0, 88.0],
            avg_slowest1: 44.0,
        },
    );
}

/// MangoHud 0.8 at `log_interval=100` (flightlesssomething `testdata/mangohud/run1.csv`):
/// `cpu_power` and `process_rss` columns, `elapsed` in ns starting at 333 ms.
#[test]
fn mangohud_0_8_sampled_every_100_ms() {
    let c = read("mangohud_0_8_log_interval_100.csv");
    assert_eq!(c.format, "mangohud");
    assert_eq!(c.column.as_deref(), Some("frametime"));
    let (log, _) = reported(c, Pick::Busiest);
    assert_eq!(log.kind, RowKind::Samples);
    let s = log.sampling.as_ref().unwrap();
    close(s.interval_ms.unwrap(), 100.07005946822743, "interval");
    close(s.duration_s.unwrap(), 30.02101784046823, "duration");
    check(
        &log,
        &Want {
            frames: 300,
            avg_fps: 230.59185242121444,
            lows: [80.0, 194.17475728155856, 200.0],
            avg_slowest1: 80.0,
        },
    );
}

/// Afterburner as a user saved it for a benchmark site (flightlesssomething
/// `testdata/afterburner/GOD.OF.WAR_Windows.csv`): a `.csv` name, CRLF, one-digit record
/// types, header records padded with empty cells, `Framerate`/`Frametime` named twice (the
/// first pair is read), `3` records without units, and `N/A` rows after the game closed.
#[test]
fn afterburner_saved_as_csv_with_repeated_columns_and_na_tail() {
    let c = read("afterburner_rx580_na_tail.csv");
    assert_eq!(c.format, "afterburner");
    assert_eq!(c.column.as_deref(), Some("Frametime"));
    let (log, _) = reported(c, Pick::Busiest);
    assert_eq!(log.kind, RowKind::Samples);
    assert_eq!((log.presents, log.skipped_rows, log.zero_rows), (129, 9, 0));
    let s = log.sampling.as_ref().unwrap();
    close(s.interval_ms.unwrap(), 1000.0, "interval");
    assert!(log.notes.is_empty(), "{:?}", log.notes);
    let want = Want {
        frames: 120,
        avg_fps: 88.39779005524862,
        lows: [20.0, 27.97202797202784, 80.0],
        avg_slowest1: 20.0,
    };
    check(&log, &want);
    // the same log's RE3 twin (`RE3_Windows.csv`): after the game, Frametime 0 under N/A
    let (log, _) = reported(read("afterburner_rx580_zero_tail.csv"), Pick::Busiest);
    assert_eq!((log.presents, log.skipped_rows, log.zero_rows), (126, 6, 6));
    check(&log, &want);
}

/// An Afterburner log whose first session stopped inside its header (four of the `03`
/// records) and whose second wrote only its `00` record, before the session that logged
/// (wojciesh/AfterburnerViewerServerWin `InvalidInputTests.cs`, "appeared in the real
/// Afterburner log file"); units in the ANSI code page (`°C` as byte 0xB0). The sessions
/// without rows are not runs and add no time.
#[test]
fn afterburner_sessions_without_rows_are_not_runs() {
    let bytes = std::fs::read(path("afterburner_rx560_restarted.hml")).unwrap();
    assert!(bytes.windows(2).any(|w| w == [0xb0, b'C']));
    let c = read("afterburner_rx560_restarted.hml");
    assert_eq!(c.series.len(), 1);
    let (log, _) = reported(c, Pick::Busiest);
    assert_eq!(log.app.run, None);
    assert!(log.notes.is_empty(), "{:?}", log.notes);
    assert_eq!((log.presents, log.skipped_rows), (60, 2));
    let s = log.sampling.as_ref().unwrap();
    close(s.interval_ms.unwrap(), 1000.0, "interval");
    close(s.duration_s.unwrap(), 60.0, "duration");
    check(
        &log,
        &Want {
            frames: 58,
            avg_fps: 54.29694813705294,
            lows: [30.030030030030034; 3],
            avg_slowest1: 30.030030030030034,
        },
    );
}

/// No fixture of the collection makes any reader panic when cut short anywhere or when a byte
/// is changed (a file copied off a crashed machine, an upload cut off).
#[test]
fn every_fixture_cut_or_damaged_never_panics() {
    let dir = path("");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("csv" | "hml" | "json")
            )
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 13, "{names:?}");
    for p in names {
        let text = frametimes::decode(&std::fs::read(&p).unwrap());
        let chars: Vec<char> = text.chars().collect();
        let step = (chars.len() / 97).max(1);
        for cut in (0..chars.len()).step_by(step) {
            let head: String = chars[..cut].iter().collect();
            let _ = frametimes::parse(&head, &p, &Options::default())
                .and_then(|c| select(c, Pick::Busiest));
            let mut bent = chars.clone();
            bent[cut] = if bent[cut] == ',' { '"' } else { ',' };
            let bent: String = bent.into_iter().collect();
            let _ = frametimes::parse(&bent, &p, &Options::default())
                .and_then(|c| select(c, Pick::All));
        }
    }
}
