//! Readers on hand-written files in each tool's shape, and on generated captures whose truth is
//! known; the statistics on hand-computed examples.

use super::synth::{self, Layout, Process, Rng};
use super::*;

fn p() -> &'static Path {
    Path::new("log.csv")
}

fn opts() -> Options<'static> {
    Options::default()
}

fn col(c: &str) -> Options<'_> {
    Options {
        column: Some(c),
        as_samples: false,
    }
}

/// The one series of a log that names no applications.
fn only(text: &str, o: &Options) -> FrameLog {
    let c = parse(text, p(), o).unwrap();
    assert_eq!(c.series.len(), 1, "{:?}", c.series);
    c.series.into_iter().next().unwrap()
}

fn series<'a>(c: &'a Capture, app: &str, swap: Option<&str>) -> &'a FrameLog {
    c.series
        .iter()
        .find(|s| {
            s.app.application.as_deref() == Some(app)
                && swap.is_none_or(|w| s.app.swap_chain.as_deref() == Some(w))
        })
        .unwrap_or_else(|| panic!("no {app} {swap:?} in {:?}", c.series))
}

#[test]
fn hand_computed_small_example() {
    // 10 frames: 8 × 10 ms, 20 ms, 40 ms. Σ = 140 ms → avg FPS = 10 000 / 140 = 71.428…
    let ft = [10.0, 10.0, 40.0, 10.0, 10.0, 20.0, 10.0, 10.0, 10.0, 10.0];
    let s = stats(&ft, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
    assert_eq!(s.frames, 10);
    assert!((s.avg_fps - 1000.0 * 10.0 / 140.0).abs() < 1e-9);
    // sorted: 10×8, 20, 40. Linear P99: h = 9·0.99 = 8.91 → 20 + 0.91·20 = 38.2 ms
    let l1 = &s.lows[0];
    assert!((l1.frametime_ms - 38.2).abs() < 1e-9, "{}", l1.frametime_ms);
    assert!((l1.fps - 1000.0 / 38.2).abs() < 1e-9);
    // P98: h = 8.82 → 20 + 0.82·20 = 36.4; P95: h = 8.55 → 20 + 0.55·20 = 31.0
    assert!((s.lows[1].frametime_ms - 36.4).abs() < 1e-9);
    assert!((s.lows[2].frametime_ms - 31.0).abs() < 1e-9);
    // slowest 1%, 2%, 5% of 10 frames = the one slowest (k = ⌈0.1⌉ = 1): 40 ms → 25 FPS
    assert!((l1.avg_slowest_fps - 25.0).abs() < 1e-9);
    assert!((s.lows[2].avg_slowest_ms - 40.0).abs() < 1e-9);

    // Nearest rank: rank ⌈0.99·10⌉ = 10 → 40 ms; ⌈0.95·10⌉ = 10 → 40 ms
    let s = stats(&ft, &[1.0, 5.0, 20.0], PercentileMethod::NearestRank).unwrap();
    assert_eq!(s.lows[0].frametime_ms, 40.0);
    assert_eq!(s.lows[1].frametime_ms, 40.0);
    // P80: rank 8 → 10 ms; avg slowest 20% = (20 + 40)/2 = 30 ms
    assert_eq!(s.lows[2].frametime_ms, 10.0);
    assert!((s.lows[2].avg_slowest_ms - 30.0).abs() < 1e-9);
}

#[test]
fn presentmon1_csv() {
    // PresentMon 1.x (OCAT-era) columns, one process
    let text = "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,WasBatched,DwmNotified,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsUntilRenderComplete,MsUntilDisplayed\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,0,0.0166,16.6,16.7,0.2,3.1,5.0\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,0,0.0333,16.7,16.6,0.2,3.1,5.0\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,1,0.0500,16.7,NA,0.2,3.1,NA\n";
    let c = parse(text, p(), &opts()).unwrap();
    assert_eq!(c.format, "presentmon-1");
    let log = series(&c, "SOTTR.exe", None);
    assert_eq!(log.column.as_deref(), Some("MsBetweenPresents"));
    assert_eq!(log.frame_times_ms, vec![16.6, 16.7, 16.7]);
    assert_eq!(log.kind, RowKind::Frames);
    assert_eq!(log.app.process_id, Some(4242));
    let d = log.displayed.as_ref().unwrap();
    assert_eq!((d.dropped, d.presents), (1, 3));
    assert!(d.rule.starts_with("Dropped = 1"), "{}", d.rule);
    assert_eq!(log.allows_tearing, Some(3));
    assert_eq!(log.present_modes[0].mode, "Hardware: Independent Flip");
    // the display column, with its NA
    let c = parse(text, p(), &col("msbetweendisplaychange")).unwrap();
    let log = series(&c, "SOTTR.exe", None);
    assert_eq!(log.frame_times_ms, vec![16.7, 16.6]);
    assert_eq!(log.skipped_rows, 1);
}

#[test]
fn presentmon2_and_quotes() {
    let text = "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,CPUStartTime,FrameTime,CPUBusy\r\n\
\"My, Game.exe\",1,0x1,DXGI,0,0,0,\"Composed: Flip\",0.1,8.5,4.0\r\n\
\"My, Game.exe\",1,0x1,DXGI,0,0,0,\"Composed: Flip\",0.2,9.5,4.0\r\n";
    let c = parse(text, p(), &opts()).unwrap();
    assert_eq!(c.format, "presentmon-2");
    let log = series(&c, "My, Game.exe", Some("0x1"));
    assert_eq!(log.frame_times_ms, vec![8.5, 9.5]);
    assert_eq!(log.present_modes[0].mode, "Composed: Flip");
}

/// A PresentMon capture with a game, dwm on two swap chains, a browser and a present with an
/// unknown swap chain, in each header family (the shape of PresentMon's own gold test files).
const PM_ROWS: &[(&str, u32, u64, f64, bool)] = &[
    ("Game.exe", 8120, 0x2A70D2CAC00, 11.2, false),
    ("dwm.exe", 2656, 0x19D7EF5E390, 16.6, false),
    ("Game.exe", 8120, 0x2A70D2CAC00, 11.4, true),
    ("dwm.exe", 2656, 0x19D7F1BA8F0, 16.7, false),
    ("Game.exe", 8120, 0x2A70D2CAC00, 20.1, false),
    ("chrome.exe", 11024, 0x27943F86F20, 33.3, false),
    ("dwm.exe", 2656, 0x19D7EF5E390, 16.7, false),
    ("Game.exe", 8120, 0x2A70D2CAC00, 11.0, false),
    ("Game.exe", 8120, 0x0, 11.0, true),
    ("dwm.exe", 2656, 0x19D7F1BA8F0, 16.6, false),
    ("Game.exe", 8120, 0x2A70D2CAC00, 11.1, true),
    ("chrome.exe", 11024, 0x27943F86F20, 34.0, false),
];

fn pm_file(version: u8) -> String {
    let mut s = match version {
        1 => "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,Dropped,TimeInSeconds,msInPresentAPI,msBetweenPresents,AllowsTearing,PresentMode,msUntilRenderComplete,msUntilDisplayed,msBetweenDisplayChange,msFlipDelay,msUntilRenderStart,msGPUActive,msGPUVideoActive,msSinceInput,QPCTime\n",
        2 => "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,FrameType,CPUStartQPC,FrameTime,CPUBusy,CPUWait,GPULatency,GPUTime,GPUBusy,GPUWait,VideoBusy,DisplayLatency,DisplayedTime,AnimationError,AnimationTime,MsFlipDelay,AllInputToPhotonLatency,ClickToPhotonLatency,InstrumentedLatency\n",
        _ => "\u{feff}Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,FrameType,TimeInQPC,MsBetweenSimulationStart,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,MsPCLatency,CPUStartQPC,MsBetweenAppStart,MsCPUBusy,MsCPUWait,MsGPULatency,MsGPUTime,MsGPUBusy,MsGPUWait,MsVideoBusy,MsAnimationError,AnimationTime,MsFlipDelay,MsAllInputToPhotonLatency,MsClickToPhotonLatency,MsInstrumentedLatency\n",
    }
    .to_string();
    let mut qpc = 2_466_961_432_001u64;
    for (app, pid, sc, ft, dropped) in PM_ROWS {
        qpc += 13_000;
        let mode = if *app == "dwm.exe" {
            "Hardware: Legacy Flip"
        } else {
            "Composed: Flip"
        };
        let tear = u8::from(*app == "Game.exe");
        s += &match version {
            1 => format!(
                "{app},{pid},0x{sc:016X},DXGI,1,0,{},1.{qpc},0.37230000000000,{ft:.14},{tear},{mode},0.32520000000000,{},{},0.00000000000000,-0.20230000000000,0.52750000000000,0.00000000000000,0.00000000000000,{qpc}\n",
                u8::from(*dropped),
                if *dropped { "0.00000000000000".into() } else { format!("{:.14}", 14.163) },
                if *dropped { "0.00000000000000".into() } else { format!("{ft:.14}") },
            ),
            2 => format!(
                "{app},{pid},0x{sc:X},DXGI,1,0,{tear},{mode},Application,{qpc},{ft:.4},{:.4},{:.4},0.3386,17.0888,0.6061,16.4827,0.0000,{},{},NA,1939.1382,NA,NA,NA,NA\n",
                ft - 0.5,
                0.5,
                if *dropped { "NA".into() } else { "31.8110".to_string() },
                if *dropped { "NA".into() } else { format!("{ft:.4}") },
            ),
            _ => format!(
                "{app},{pid},0x{sc:X},DXGI,1,0,{tear},{mode},Application,{qpc},NA,{ft:.14},{},0.37230000000000,0.32520000000000,{},NA,{},{ft:.4},{:.4},0.3723,17.0327,0.5275,0.5275,0.0000,0.0000,NA,1939.5329,NA,NA,NA,NA\n",
                if *dropped { "NA".into() } else { format!("{ft:.14}") },
                if *dropped { "NA".into() } else { "14.1630".to_string() },
                qpc - 100_000,
                ft - 0.5,
            ),
        };
    }
    s
}

#[test]
fn presentmon_versions_split_by_application_process_and_swap_chain() {
    for (v, format) in [
        (1, "presentmon-1"),
        (2, "presentmon-2"),
        (3, "presentmon-2.4"),
    ] {
        let c = parse(&pm_file(v), p(), &opts()).unwrap();
        assert_eq!(c.format, format, "v{v}");
        assert_eq!(c.series.len(), 5, "v{v}: {:?}", c.series);
        let game = series(
            &c,
            "Game.exe",
            Some(&format!(
                "0x{:0w$X}",
                0x2A70D2CAC00u64,
                w = if v == 1 { 16 } else { 0 }
            )),
        );
        assert_eq!(
            game.frame_times_ms,
            vec![11.2, 11.4, 20.1, 11.0, 11.1],
            "v{v}"
        );
        assert_eq!(game.app.process_id, Some(8120));
        // dropped: rows 3 and 11 of the game's swap chain, by each version's rule
        let d = game.displayed.as_ref().unwrap();
        assert_eq!((d.dropped, d.presents), (2, 5), "v{v}: {}", d.rule);
        assert_eq!(game.allows_tearing, Some(5));
        assert_eq!(
            game.present_modes,
            vec![ModeCount {
                mode: "Composed: Flip".into(),
                presents: 5
            }]
        );
        // default: the game's own figures, the others listed
        let sel = select(c.clone(), Pick::Busiest).unwrap();
        assert_eq!(sel.logs.len(), 1);
        assert_eq!(sel.logs[0].app.application.as_deref(), Some("Game.exe"));
        assert_eq!(sel.logs[0].frame_times_ms.len(), 5);
        let others: Vec<(String, usize)> = sel
            .others
            .iter()
            .map(|o| (o.app.application.clone().unwrap_or_default(), o.presents))
            .collect();
        assert_eq!(
            others,
            [
                ("dwm.exe".into(), 2),
                ("dwm.exe".into(), 2),
                ("chrome.exe".into(), 2),
                ("Game.exe".into(), 1)
            ]
        );
        // --app by name (busiest swap chain of dwm), by pid, by swap chain, without .exe
        let dwm = select(c.clone(), Pick::App("DWM")).unwrap();
        assert_eq!(dwm.logs[0].app.application.as_deref(), Some("dwm.exe"));
        assert_eq!(dwm.logs[0].frame_times_ms, vec![16.6, 16.7]);
        let by_pid = select(c.clone(), Pick::App("11024")).unwrap();
        assert_eq!(by_pid.logs[0].frame_times_ms, vec![33.3, 34.0]);
        let by_swap = select(c.clone(), Pick::App("0x19d7f1ba8f0")).unwrap();
        assert_eq!(by_swap.logs[0].frame_times_ms, vec![16.7, 16.6]);
        assert_eq!(select(c.clone(), Pick::All).unwrap().logs.len(), 5);
        let e = select(c, Pick::App("firefox")).unwrap_err().to_string();
        assert!(
            e.starts_with("log.csv: --app firefox: no such application")
                && e.contains("Game.exe (pid 8120, swap chain 0x")
                && e.contains("chrome.exe (pid 11024"),
            "{e}"
        );
    }
}

#[test]
fn default_passes_over_the_compositor() {
    // a 30 FPS game on a 60 Hz desktop: dwm has twice the presents, the game is reported
    let mut rng = Rng::new(2);
    let game = Process::new(
        "Game.exe",
        10,
        0x10,
        synth::frame_times(&mut rng, 90, 33.3, 2.0, 0, 0.0),
    );
    let dwm = Process::new(
        "dwm.exe",
        20,
        0x20,
        synth::frame_times(&mut rng, 180, 16.7, 0.2, 0, 0.0),
    );
    let c = parse(
        &synth::capture(&[dwm.clone(), game], Layout::PresentMon24),
        p(),
        &opts(),
    )
    .unwrap();
    let sel = select(c, Pick::Busiest).unwrap();
    assert_eq!(sel.logs[0].app.application.as_deref(), Some("Game.exe"));
    assert_eq!(sel.others[0].app.application.as_deref(), Some("dwm.exe"));
    // only dwm: dwm
    let c = parse(&synth::capture(&[dwm], Layout::PresentMon24), p(), &opts()).unwrap();
    let sel = select(c, Pick::Busiest).unwrap();
    assert_eq!(sel.logs[0].app.application.as_deref(), Some("dwm.exe"));
}

#[test]
fn tied_series_are_named_not_passed_over_silently() {
    // two processes with as many presents: the first is reported and a note names the other
    let mut rng = Rng::new(3);
    let a = Process::new(
        "GameA.exe",
        10,
        0x10,
        synth::frame_times(&mut rng, 120, 16.7, 1.0, 0, 0.0),
    );
    let b = Process::new(
        "GameB.exe",
        11,
        0x11,
        synth::frame_times(&mut rng, 120, 8.3, 1.0, 0, 0.0),
    );
    let c = parse(
        &synth::capture(&[a.clone(), b], Layout::PresentMon24),
        p(),
        &opts(),
    )
    .unwrap();
    let sel = select(c, Pick::Busiest).unwrap();
    let note = sel.logs[0].notes.join("\n");
    let (reported, other) = if sel.logs[0].app.application.as_deref() == Some("GameA.exe") {
        ("GameA.exe", "GameB.exe")
    } else {
        ("GameB.exe", "GameA.exe")
    };
    assert!(
        note.contains(other) && note.contains("ties with it"),
        "{note}"
    );
    assert!(!note.contains(reported), "{note}");
    // one more present and nothing ties
    let mut rng = Rng::new(3);
    let busier = Process::new(
        "GameB.exe",
        11,
        0x11,
        synth::frame_times(&mut rng, 121, 8.3, 1.0, 0, 0.0),
    );
    let c = parse(
        &synth::capture(&[a, busier], Layout::PresentMon24),
        p(),
        &opts(),
    )
    .unwrap();
    let sel = select(c, Pick::Busiest).unwrap();
    assert!(
        sel.logs[0].notes.iter().all(|n| !n.contains("tie")),
        "{:?}",
        sel.logs[0].notes
    );
}

#[test]
fn ocat_vr_capture() {
    let text = "Application,ProcessID,MsBetweenAppPresents,MsBetweenReprojections,AppRenderStart,AppRenderEnd,ReprojectionStart,ReprojectionEnd,VSync,AppMissed,WarpMissed,Motherboard,OS,Processor,System RAM,Base Driver Version,Driver Package,GPU #,GPU,GPU Core Clock (MHz),GPU Memory Clock (MHz),GPU Memory (MB)\n\
vrgame.exe,3300,11.110,11.111,0.1,0.2,0.3,0.4,0.5,0,0,B450,Windows 10,Ryzen 5 3600,16 GB,27.21,21.10,1,RX 5700,1750,875,8176\n\
vrgame.exe,3300,11.112,11.111,0.1,0.2,0.3,0.4,0.5,0,0\n";
    let c = parse(text, p(), &opts()).unwrap();
    assert_eq!(c.format, "ocat");
    assert_eq!(c.column.as_deref(), Some("MsBetweenAppPresents"));
    assert_eq!(
        series(&c, "vrgame.exe", None).frame_times_ms,
        vec![11.11, 11.112]
    );
}

#[test]
fn presentmon_display_columns_read_zero_as_not_displayed() {
    // 1.x writes 0 in msBetweenDisplayChange for dropped presents: skipped, not an error
    let c = parse(&pm_file(1), p(), &col("msBetweenDisplayChange")).unwrap();
    let game = series(&c, "Game.exe", Some("0x000002A70D2CAC00"));
    assert_eq!(game.frame_times_ms, vec![11.2, 20.1, 11.0]);
    assert_eq!((game.skipped_rows, game.zero_rows), (2, 2));
    // 2.4+: NA
    let c = parse(&pm_file(3), p(), &col("MsBetweenDisplayChange")).unwrap();
    let game = series(&c, "Game.exe", Some("0x2A70D2CAC00"));
    assert_eq!(game.frame_times_ms, vec![11.2, 20.1, 11.0]);
    assert_eq!((game.skipped_rows, game.zero_rows), (2, 0));
    // MsBetweenAppStart, PresentMon 2.4's CPU frame time
    let c = parse(&pm_file(3), p(), &col("msbetweenappstart")).unwrap();
    assert_eq!(
        series(&c, "chrome.exe", None).frame_times_ms,
        vec![33.3, 34.0]
    );
}

#[test]
fn presentmon_2_0_frame_time_is_cpu_busy_plus_wait() {
    let text = "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,CPUStartTime,CPUBusy,CPUWait,GPULatency,GPUBusy,GPUWait,DisplayLatency,DisplayedTime\n\
Game.exe,10,0x000001F0FF310E98,DXGI,0,0,0,Hardware: Legacy Flip,1000.000000,9.500000,1.500000,0.5,8.0,1.0,20.0,16.666667\n\
Game.exe,10,0x000001F0FF310E98,DXGI,0,0,0,Hardware: Legacy Flip,1011.000000,10.000000,2.500000,0.5,8.0,1.0,20.0,0.000000\n";
    let c = parse(text, p(), &opts()).unwrap();
    assert_eq!(c.format, "presentmon-2");
    let s = &c.series[0];
    assert_eq!(s.column.as_deref(), Some("CPUBusy+CPUWait"));
    assert_eq!(s.frame_times_ms, vec![11.0, 12.5]);
    assert_eq!(s.displayed.as_ref().map(|d| d.dropped), Some(1));
}

#[test]
fn ocat_capframex_frameview_shapes() {
    // OCAT: system columns on the first row only
    let ocat = "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsUntilRenderComplete,MsUntilDisplayed,MsEstimatedDriverLag,Width,Height,Motherboard,OS,Processor,System RAM,Base Driver Version,Driver Package,GPU #,GPU,GPU Core Clock (MHz),GPU Memory Clock (MHz),GPU Memory (MB)\n\
MetroExodus.exe,5012,0x0000022E6AFA2560,DXGI,0,0,0,Hardware: Independent Flip,0,1.250113,16.912,16.700,0.221,2.010,17.505,0.412,2560,1440,MSI X470 GAMING PLUS,Windows 10 Pro 18362,AMD Ryzen 7 2700X Eight-Core Processor,16 GB,26.20.13001.29010,19.9.1,1,Radeon RX Vega,1630,945,8176\n\
MetroExodus.exe,5012,0x0000022E6AFA2560,DXGI,0,0,0,Hardware: Independent Flip,Error,1.267001,16.888,0.000,0.301,2.105,0.000,0.377,2560,1440\n\
MetroExodus.exe,5012,0x0000022E6AFA2560,DXGI,0,0,0,Hardware: Independent Flip,0,1.284122,17.121,33.400,0.250,1.998,17.312,0.398,2560,1440\n";
    let c = parse(ocat, p(), &opts()).unwrap();
    assert_eq!(c.format, "ocat");
    assert_eq!(c.series[0].frame_times_ms, vec![16.912, 16.888, 17.121]);
    assert_eq!(c.series[0].displayed.as_ref().map(|d| d.dropped), Some(1));

    // CapFrameX CSV: //key=value lines, then PresentMon columns
    let cx = "//Id=2b3a\n//GameName=Cyberpunk 2077\n//ProcessName=Cyberpunk2077.exe\n//Comment=1440p, RT on\n\
Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,TimeInSeconds,MsBetweenSimulationStart,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,CPUStartQPCTimeInMs,MsBetweenAppStart,MsCPUBusy,MsCPUWait,MsGPULatency,MsGPUTime,MsGPUBusy,MsGPUWait,MsAnimationError,AnimationTime,MsFlipDelay,EtwBufferFillPct,EtwBuffersInUse,EtwTotalBuffers,EtwEventsLost,EtwBuffersLost\n\
Cyberpunk2077.exe,9932,0x1F2E3D4C5B6,DXGI,0,512,1,Hardware: Independent Flip,0.0213,NA,21.3012,21.2990,0.4410,18.2200,20.1002,1023.2,21.3001,19.1,2.2001,0.9,17.2,17.1,0.1,NA,NA,NA,10.0,2,64,0,0\n\
Cyberpunk2077.exe,9932,0x1F2E3D4C5B6,DXGI,0,512,1,Hardware: Independent Flip,0.0420,NA,20.7000,NA,0.4410,18.2200,NA,1044.5,20.7020,19.1,1.6020,0.9,17.2,17.1,0.1,NA,NA,NA,10.0,2,64,0,0\n";
    let c = parse(cx, p(), &opts()).unwrap();
    assert_eq!(c.format, "capframex-csv");
    let s = series(&c, "Cyberpunk2077.exe", None);
    assert_eq!(s.frame_times_ms, vec![21.3012, 20.7]);
    assert_eq!(
        s.displayed.as_ref().map(|d| (d.dropped, d.presents)),
        Some((1, 2))
    );
    assert_eq!(s.allows_tearing, Some(2));

    // FrameView: hardware columns, padded numbers
    let fv = "Application,GPU,CPU,Resolution,Runtime,AllowsTearing,ProcessID,SwapChainAddress,SyncInterval,PresentFlags,PresentMode,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,Render Queue Depth,MsPCLatency,GPU0Clk(MHz),GPU0MemClk(MHz),GPU0Util(%),GPU0Temp(C),CPUClk(MHz),CPUUtil(%),CPU Package Temp(C)\n\
eldenring.exe,NVIDIA GeForce RTX 4070,Intel(R) Core(TM) i5-13600K,2560x1440,D3D12,0,7788,0x000002900C071B50,1,0,Hardware Composed: Independent Flip,0,812.100221,16.672,16.668,0.438,10.730,18.686,1,NA,2610,10501,97,66,5100,41, 58\n\
eldenring.exe,NVIDIA GeForce RTX 4070,Intel(R) Core(TM) i5-13600K,2560x1440,D3D12,0,7788,0x000002900C071B50,1,0,Hardware Composed: Independent Flip,0,812.116870,16.649,16.660,0.420,10.717,19.181,1,NA,2610,10501,97,66,5100,41, 58\n";
    let c = parse(fv, p(), &opts()).unwrap();
    assert_eq!(c.format, "frameview");
    let s = series(&c, "eldenring.exe", None);
    assert_eq!(s.frame_times_ms, vec![16.672, 16.649]);
    assert_eq!(
        s.present_modes[0].mode,
        "Hardware Composed: Independent Flip"
    );
    assert_eq!(s.displayed.as_ref().map(|d| d.dropped), Some(0));
}

#[test]
fn capframex_json_runs_are_repeats() {
    let text = "\u{feff}{\"Hash\":\"ab\",\"Info\":{\"ProcessName\":\"Hades.exe\",\"GameName\":\"Hades\"},\"Runs\":[\
{\"Hash\":\"1\",\"PresentMonRuntime\":\"DXGI\",\"CaptureData\":{\"TimeInSeconds\":[0.0069,0.0139,0.0208],\"MsBetweenPresents\":[6.9,7.0,6.9],\"MsBetweenDisplayChange\":[6.9,0.0,13.9],\"Dropped\":[false,true,false],\"PresentMode\":[3,3,3],\"AllowsTearing\":[1,1,1],\"PcLatency\":[\"NaN\",\"NaN\",\"NaN\"]},\"SensorData\":null,\"SensorData2\":null,\"RTSSFrameTimes\":null},\
{\"Hash\":\"2\",\"CaptureData\":{\"TimeInSeconds\":[0.0071,0.0140],\"MsBetweenPresents\":[7.1,6.9],\"MsBetweenDisplayChange\":[7.1,6.9],\"Dropped\":[false,false],\"PresentMode\":[8,8],\"AllowsTearing\":[0,0]}}]}";
    let c = parse(
        text,
        Path::new("CapFrameX-Hades.exe-2024-05-01T201500.json"),
        &opts(),
    )
    .unwrap();
    assert_eq!(c.format, "capframex-json");
    assert_eq!(c.series.len(), 2);
    let sel = select(c, Pick::Busiest).unwrap();
    assert_eq!(sel.logs.len(), 2, "one per run");
    assert!(sel.others.is_empty());
    let (r1, r2) = (&sel.logs[0], &sel.logs[1]);
    assert_eq!(r1.frame_times_ms, vec![6.9, 7.0, 6.9]);
    assert_eq!(r1.app.label(), "Hades.exe (run 1)");
    assert_eq!(r1.displayed.as_ref().map(|d| d.dropped), Some(1));
    assert_eq!(r1.present_modes[0].mode, "Hardware: Independent Flip");
    assert_eq!(r1.allows_tearing, Some(3));
    assert_eq!(r2.frame_times_ms, vec![7.1, 6.9]);
    assert_eq!(
        r2.present_modes[0].mode,
        "Hardware Composed: Independent Flip"
    );
    // another array; its 0 on a dropped frame is "not displayed"
    let c = parse(text, p(), &col("MsBetweenDisplayChange")).unwrap();
    assert_eq!(c.series[0].frame_times_ms, vec![6.9, 13.9]);
    assert_eq!(c.series[0].zero_rows, 1);
    // JSON that is not a capture
    let e = parse("{\"a\": 1}", p(), &opts()).unwrap_err().to_string();
    assert!(e.contains("not a CapFrameX capture"), "{e}");
    let e = parse("{\"schema\": \"vmtune-bench/1\"}", p(), &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("vmtune bench result"), "{e}");
    let e = parse(
        "{\"Runs\": [{\"CaptureData\": {\"MsBetweenPresents\": [1, true]}}]}",
        p(),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("run 1, present 2"), "{e}");
}

#[test]
fn mangohud_per_frame_and_sampled() {
    // log_interval=0 (MangoHud's default since 2023): a row per frame, elapsed in ns
    let per_frame = "os,cpu,gpu,ram,kernel,driver,cpuscheduler\n\
Debian,AMD Ryzen 7,NVIDIA GeForce RTX 3080,32768000,6.1.0,NVIDIA 535,performance\n\
fps,frametime,cpu_load,gpu_load,cpu_temp,gpu_temp,elapsed\n\
60.1,16.64,20,90,55,70,16640000\n\
59.8,16.72,21,91,55,70,33360000\n\
60.0,16.66,21,91,55,70,50020000\n\
60.0,16.67,21,91,55,70,66690000\n";
    let log = only(per_frame, &opts());
    assert_eq!(log.format, "mangohud");
    assert_eq!(log.kind, RowKind::Frames);
    assert_eq!(log.frame_times_ms, vec![16.64, 16.72, 16.66, 16.67]);
    assert!(log.sampling.is_none());
    // log_interval=100: a row every ~100 ms holding the last frame's time
    let sampled = "v1\n0.6.9\n---------------------SYSTEM INFO---------------------\n\
os,cpu,gpu,ram,kernel,driver,cpuscheduler\n\
Debian,AMD Ryzen 7,NVIDIA GeForce RTX 3080,32768000,6.1.0,NVIDIA 535,performance\n\
--------------------FRAME METRICS--------------------\n\
fps,frametime,cpu_load,gpu_load,cpu_temp,gpu_temp,elapsed\n\
60.1,16.64,20,90,55,70,100000000\n\
0,0,21,91,55,70,200000000\n\
59.8,16.72,21,91,55,70,300000000\n\
60.0,16.66,21,91,55,70,400000000\n\
60.0,16.67,21,91,55,70,500000000\n";
    let log = only(sampled, &opts());
    assert_eq!(log.kind, RowKind::Samples);
    assert_eq!(log.frame_times_ms, vec![16.64, 16.72, 16.66, 16.67]);
    assert_eq!((log.skipped_rows, log.zero_rows), (1, 1));
    let s = log.sampling.unwrap();
    assert!((s.interval_ms.unwrap() - 100.0).abs() < 1e-9);
    assert!((s.duration_s.unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(s.time_column.as_deref(), Some("elapsed"));
    // a header without a time column cannot tell: frames
    let old = "fps,frametime,cpu_load\n60,16.6,1\n61,16.4,1\n";
    let log = only(old, &opts());
    assert_eq!(log.kind, RowKind::Frames);
    assert_eq!(log.frame_times_ms, vec![16.6, 16.4]);
}

/// MangoHud 0.4 wrote no column names (rows `fps,cpu_load,gpu_load,elapsed`, µs): the columns
/// are named as it wrote them; `--column` names one of them or is refused, never read from
/// another column.
#[test]
fn mangohud_0_4_rows_without_column_names() {
    let log = "os,cpu,gpu,ram,kernel,driver\nArch Linux,Example CPU,,16384,5.7.2-arch1-1,4.6 Mesa 20.1.1\n\
               62.5,12,99,169\n31.25,13,99,100230\n62.5,12,98,200290\n";
    let c = parse(log, p(), &opts()).unwrap();
    assert_eq!(c.format, "mangohud");
    let s = &c.series[0];
    assert_eq!(s.frame_times_ms, vec![16.0, 32.0, 16.0]);
    assert_eq!(s.kind, RowKind::Samples);
    let interval = s.sampling.as_ref().and_then(|x| x.interval_ms).unwrap();
    assert!((interval - 100.0605).abs() < 1e-9, "{interval}");
    let c = parse(log, p(), &col("gpu_load")).unwrap();
    assert_eq!(c.series[0].frame_times_ms, vec![99.0, 99.0, 98.0]);
    let e = parse(log, p(), &col("frametime")).unwrap_err().to_string();
    assert!(e.contains("no column named"), "{e}");
    // a log with column names is not taken for one without
    let named = "os,cpu,gpu,ram,kernel,driver\nArch Linux,CPU,,16384,5.8,Mesa\nfps,cpu_load,gpu_load,elapsed\n\
                 62.5,12,99,169\n62.5,12,99,100230\n";
    assert!(parse(named, p(), &opts()).unwrap().series[0]
        .notes
        .iter()
        .all(|n| !n.contains("no column names")));
}

#[test]
fn afterburner_hml_is_read_as_samples() {
    let text = "00, 07-12-2024 23:49:46, Hardware monitoring log v1.6 \n\
01, 07-12-2024 23:49:46, NVIDIA GeForce RTX 3060\n\
02, 07-12-2024 23:49:46, GPU temperature     ,GPU usage           ,Framerate           ,Frametime           ,CPU usage           \n\
03, 07-12-2024 23:49:46, 0                   ,°C                  ,0.000               ,100.000             ,10                  ,                    ,                    ,\n\
03, 07-12-2024 23:49:46, 3                   ,ms                  ,0.000               ,200.000             ,10                  ,                    ,                    ,\n\
80, 07-12-2024 23:49:46, 46.000              ,0.000               ,N/A                 ,N/A                 ,9.245               \n\
80, 07-12-2024 23:49:47, 51.000              ,97.000              ,0.000               ,0.000               ,21.100              \n\
80, 07-12-2024 23:49:48, 55.000              ,98.000              ,141.200             ,7.082               ,30.867              \n\
80, 07-12-2024 23:49:49, 56.000              ,98.000              ,139.900             ,7.148               ,31.000              \n\
80, 07-12-2024 23:49:50, 56.000              ,99.000              ,144.100             ,6.940               ,30.100              \n";
    let c = parse(text, Path::new("HardwareMonitoring.hml"), &opts()).unwrap();
    assert_eq!(c.format, "afterburner");
    let log = &c.series[0];
    assert_eq!(log.kind, RowKind::Samples);
    assert_eq!(log.column.as_deref(), Some("Frametime"));
    assert_eq!(log.frame_times_ms, vec![7.082, 7.148, 6.94]);
    assert_eq!((log.presents, log.skipped_rows, log.zero_rows), (5, 2, 1));
    let s = log.sampling.as_ref().unwrap();
    assert!((s.interval_ms.unwrap() - 1000.0).abs() < 1e-9);
    assert!((s.duration_s.unwrap() - 5.0).abs() < 1e-9);
    assert!(s.reason.contains("one row per poll"), "{}", s.reason);
    // --app has nothing to match
    let e = select(c, Pick::App("game.exe")).unwrap_err().to_string();
    assert!(e.contains("names no applications"), "{e}");
    // Framerate only: 1000/fps
    let fr = text.replace("Frametime    ", "Power        ");
    let log = only(&fr, &opts());
    assert_eq!(log.column.as_deref(), Some("Framerate (as 1000/fps)"));
    assert!((log.frame_times_ms[0] - 1000.0 / 141.2).abs() < 1e-12);
    // neither
    let none = fr.replace("Framerate   ", "Fan speed   ");
    let e = parse(&none, p(), &opts()).unwrap_err().to_string();
    assert!(
        e.contains("no Frametime or Framerate column") && e.contains("line 3"),
        "{e}"
    );
    let e = parse(
        &text.replace("07-12-2024 23:49:48", "2024/13/45 99:00"),
        p(),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 8: timestamp"), "{e}");
}

#[test]
fn utf16_files_from_powershell() {
    let text = pm_file(3);
    let mut le = vec![0xff, 0xfe];
    le.extend(
        text.trim_start_matches('\u{feff}')
            .encode_utf16()
            .flat_map(u16::to_le_bytes),
    );
    let mut be = vec![0xfe, 0xff];
    be.extend(
        text.trim_start_matches('\u{feff}')
            .encode_utf16()
            .flat_map(u16::to_be_bytes),
    );
    for bytes in [le, be] {
        let c = parse(&decode(&bytes), p(), &opts()).unwrap();
        assert_eq!(c.format, "presentmon-2.4");
        assert_eq!(c.series.len(), 5);
    }
    assert_eq!(decode(b"16.6\n\xb0C"), "16.6\n\u{fffd}C");
}

#[test]
fn plain_list() {
    let log = only("frametime_ms_plain\n16.6\n\n# comment\n17.0\n", &opts());
    assert_eq!(log.format, "plain");
    assert_eq!(log.frame_times_ms, vec![16.6, 17.0]);
    let log = only("\u{feff}16.6\n17\n", &opts());
    assert_eq!(log.frame_times_ms.len(), 2);
    // --as-samples: the same numbers, labelled samples, no time to measure
    let log = only(
        "16.6\n0\n17\n",
        &Options {
            column: None,
            as_samples: true,
        },
    );
    assert_eq!(log.kind, RowKind::Samples);
    assert_eq!(log.zero_rows, 1);
    assert_eq!(log.sampling.as_ref().and_then(|s| s.duration_s), None);
}

#[test]
fn errors_name_file_and_line() {
    let e = parse("a,b\n1,2\n", p(), &opts()).unwrap_err().to_string();
    assert!(
        e.starts_with("log.csv: line 1: no frame-time column"),
        "{e}"
    );
    let e = parse("16.6\nbanana\n", p(), &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2") && e.contains("banana"), "{e}");
    let e = parse("16.6\n-3\n", p(), &opts()).unwrap_err().to_string();
    assert!(e.contains("non-negative"), "{e}");
    assert!(parse("", p(), &opts()).is_err());
    assert!(parse("MsBetweenPresents\nNA\n", p(), &opts()).is_err());
    let e = parse("x,y\n1,2\n", p(), &col("FrameTime"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no column named"), "{e}");
    // a frame of 0 ms: refused with its line (and how to read the log as samples)
    let e = parse("16.6\n0\n0.0\n", p(), &opts())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("log.csv: line 2: frame time is 0 ms") && e.contains("--as-samples"),
        "{e}"
    );
    let e = parse(
        &pm_file(3).replace(",11.40000000000000,", ",0.00000000000000,"),
        p(),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 4: MsBetweenPresents is 0 ms"), "{e}");
    let e = parse(
        "Application,ProcessID,MsBetweenPresents\ng,x1,16\n",
        p(),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 2: ProcessID value \"x1\""), "{e}");
}

/// A generated 10,000-frame log with a known distribution: 9,800 frames of 10 ms,
/// 150 of 20 ms, 50 of 50 ms (shuffled deterministically).
#[test]
fn generated_10000_frames() {
    let mut ft = Vec::with_capacity(10_000);
    ft.extend(std::iter::repeat_n(10.0, 9_800));
    ft.extend(std::iter::repeat_n(20.0, 150));
    ft.extend(std::iter::repeat_n(50.0, 50));
    // deterministic shuffle (LCG Fisher–Yates) so order does not matter
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..ft.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = (state >> 33) as usize % (i + 1);
        ft.swap(i, j);
    }
    let mut csv = String::from("Application,TimeInSeconds,MsBetweenPresents\n");
    let mut t = 0.0;
    for x in &ft {
        t += x / 1000.0;
        csv.push_str(&format!("game.exe,{t:.4},{x}\n"));
    }
    let log = only(&csv, &opts());
    assert_eq!(log.frame_times_ms.len(), 10_000);
    let s = stats(&log.frame_times_ms, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
    // Σ = 98 000 + 3 000 + 2 500 = 103 500 ms → 10 000 / 103.5 s = 96.618… FPS
    assert!((s.avg_fps - 10_000.0 / 103.5).abs() < 1e-9);
    assert!((s.duration_s - 103.5).abs() < 1e-9);
    // sorted index 9 800..9 949 = 20 ms, 9 950.. = 50 ms.
    // P99: h = 9 999·0.99 = 9 899.01 → 20 ms → 1% low = 50 FPS
    assert!((s.lows[0].fps - 50.0).abs() < 1e-9);
    // P98: h = 9 799.02 → between idx 9 799 (10) and 9 800 (20): 10 + 0.02·10 = 10.2 ms
    assert!(
        (s.lows[1].frametime_ms - 10.2).abs() < 1e-6,
        "{}",
        s.lows[1].frametime_ms
    );
    // P95: h = 9 499.05 → 10 ms → 100 FPS
    assert!((s.lows[2].fps - 100.0).abs() < 1e-9);
    // slowest 1% = 100 frames: 50 × 50 + 50 × 20 = 3 500 ms → 35 ms → 28.571… FPS
    assert!((s.lows[0].avg_slowest_ms - 35.0).abs() < 1e-9);
    // slowest 2% = 200 frames = exactly the 50 + 150 slow ones: 5 500 ms → 27.5 ms
    assert!((s.lows[1].avg_slowest_ms - 27.5).abs() < 1e-9);
    // slowest 5% = 500 frames: 2 500 + 3 000 + 300·10 = 8 500 → 17 ms
    assert!((s.lows[2].avg_slowest_ms - 17.0).abs() < 1e-9);
    assert_eq!(s.max_ms, 50.0);
    assert_eq!(s.median_ms, 10.0);
    // nearest rank: P98 rank ⌈9 800⌉ = 9 800 → idx 9 799 → 10 ms
    let s = stats(&ft, DEFAULT_LOWS, PercentileMethod::NearestRank).unwrap();
    assert_eq!(s.lows[1].frametime_ms, 10.0);
    assert_eq!(s.lows[0].frametime_ms, 20.0);
}

/// The per-process truth of a generated capture comes back from every layout, exactly.
fn check_split(procs: &[Process], layout: Layout) {
    let text = synth::capture(procs, layout);
    let c =
        parse(&text, Path::new("gen.csv"), &opts()).unwrap_or_else(|e| panic!("{layout:?}: {e}"));
    assert_eq!(c.format, layout.format(), "{layout:?}");
    assert_eq!(c.series.len(), procs.len(), "{layout:?}");
    for pr in procs {
        let s = c
            .series
            .iter()
            .find(|s| {
                s.app.process_id == Some(pr.pid)
                    && s.app.swap_chain.as_deref().and_then(hex) == Some(pr.swap_chain)
            })
            .unwrap_or_else(|| panic!("{layout:?}: {} missing", pr.application));
        assert_eq!(s.app.application.as_deref(), Some(pr.application.as_str()));
        assert_eq!(s.kind, RowKind::Frames);
        assert_eq!(
            s.frame_times_ms.len(),
            pr.frame_times_ms.len(),
            "{layout:?}"
        );
        for (a, b) in s.frame_times_ms.iter().zip(&pr.frame_times_ms) {
            assert!(
                (a - b).abs() < 1e-9,
                "{layout:?} {}: {a} vs {b}",
                pr.application
            );
        }
        let dropped = pr.dropped.iter().filter(|d| **d).count();
        assert_eq!(
            s.displayed.as_ref().map(|d| d.dropped),
            Some(dropped),
            "{layout:?}"
        );
        assert_eq!(
            s.allows_tearing,
            Some(if pr.allows_tearing {
                pr.frame_times_ms.len()
            } else {
                0
            })
        );
        assert_eq!(
            s.present_modes.first().map(|m| m.mode.as_str()),
            Some(pr.present_mode.as_str())
        );
    }
    // split then merged = every row of the file
    let all: Vec<f64> = procs
        .iter()
        .flat_map(|p| p.frame_times_ms.iter().copied())
        .collect();
    let merged = merge(&c.series);
    let (a, b) = (
        stats(&all, DEFAULT_LOWS, PercentileMethod::Linear).unwrap(),
        stats(&merged, DEFAULT_LOWS, PercentileMethod::Linear).unwrap(),
    );
    assert_eq!(a.frames, b.frames);
    assert!((a.avg_fps - b.avg_fps).abs() < 1e-9 * a.avg_fps);
    for (x, y) in a.lows.iter().zip(&b.lows) {
        assert!((x.frametime_ms - y.frametime_ms).abs() < 1e-9, "{layout:?}");
        assert!(
            (x.avg_slowest_ms - y.avg_slowest_ms).abs() < 1e-9,
            "{layout:?}"
        );
    }
}

#[test]
fn generated_desktop_capture_in_every_layout() {
    let procs = synth::desktop(&mut Rng::new(7), 3.0);
    for layout in Layout::ALL {
        check_split(&procs, layout);
        // by default the game's own figures: exactly what its frame times give
        let c = parse(&synth::capture(&procs, layout), p(), &opts()).unwrap();
        let sel = select(c, Pick::Busiest).unwrap();
        assert_eq!(
            sel.logs[0].app.application.as_deref(),
            Some("Game.exe"),
            "{layout:?}"
        );
        let want = stats(
            &procs[0].frame_times_ms,
            DEFAULT_LOWS,
            PercentileMethod::Linear,
        )
        .unwrap();
        let got = stats(
            &sel.logs[0].frame_times_ms,
            DEFAULT_LOWS,
            PercentileMethod::Linear,
        )
        .unwrap();
        assert!((want.avg_fps - got.avg_fps).abs() < 1e-9, "{layout:?}");
        assert!(
            (want.lows[0].fps - got.lows[0].fps).abs() < 1e-9,
            "{layout:?}"
        );
        assert_eq!(sel.others.len(), 3);
    }
}

#[test]
fn generated_capframex_json() {
    let mut rng = Rng::new(11);
    let runs: Vec<Process> = (0..3)
        .map(|r| {
            let mut p = Process::new(
                "Game.exe",
                1,
                1,
                synth::frame_times(&mut rng, 400 + r * 10, 8.0, 2.0, 40, 12.0),
            );
            p.dropped = (0..p.frame_times_ms.len()).map(|i| i % 17 == 3).collect();
            p
        })
        .collect();
    let c = parse(&synth::capframex_json("Game.exe", &runs), p(), &opts()).unwrap();
    let sel = select(c, Pick::Busiest).unwrap();
    assert_eq!(sel.logs.len(), 3);
    for (log, truth) in sel.logs.iter().zip(&runs) {
        assert_eq!(log.frame_times_ms, truth.frame_times_ms);
        assert_eq!(
            log.displayed.as_ref().map(|d| d.dropped),
            Some(truth.dropped.iter().filter(|d| **d).count())
        );
    }
}

#[test]
fn generated_mangohud_30s_at_100ms() {
    let mut rng = Rng::new(3);
    let frames = synth::frame_times(&mut rng, 2000, 15.0, 4.0, 25, 20.0);
    let total_s: f64 = frames.iter().sum::<f64>() / 1000.0;
    for versioned in [false, true] {
        let log = synth::mangohud(&frames, Some(100.0), 2, versioned, &mut rng);
        let got = only(&log.text, &opts());
        assert_eq!(got.format, "mangohud");
        assert_eq!(got.kind, RowKind::Samples);
        assert_eq!(got.frame_times_ms, log.samples_ms);
        assert_eq!((got.presents, got.zero_rows), (log.rows, log.skipped_zero));
        let s = got.sampling.unwrap();
        assert!((s.interval_ms.unwrap() - log.interval_ms).abs() < 1e-6);
        assert!(
            (s.interval_ms.unwrap() - 100.0).abs() < 1.0,
            "{:?}",
            s.interval_ms
        );
        assert!((s.duration_s.unwrap() - log.duration_s).abs() < 1e-6);
        // the log covers the whole run (plus the loading rows), not Σ of the sampled values
        assert!(
            (s.duration_s.unwrap() - total_s).abs() < 0.5,
            "{:?} vs {total_s}",
            s.duration_s
        );
    }
    // the same frames logged every frame: frames, all of them
    let log = synth::mangohud(&frames, None, 0, true, &mut rng);
    let got = only(&log.text, &opts());
    assert_eq!(got.kind, RowKind::Frames);
    assert_eq!(got.frame_times_ms, frames);
}

#[test]
fn afterburner_one_digit_record_types_read_as_two_digit_ones() {
    // `0,` … `3,` instead of `00,` … `03,`: before, the header records were read as frames
    let mut rng = Rng::new(8);
    let frames = synth::frame_times(&mut rng, 3000, 8.0, 1.0, 10, 20.0);
    for one_digit in [false, true] {
        let mut r = Rng::new(9);
        let log = synth::afterburner_session(&frames, 1000.0, 2, 1, 0.0, one_digit, &mut r);
        assert_eq!(log.text.starts_with("0, "), one_digit);
        let c = parse(&log.text, p(), &opts()).unwrap();
        assert_eq!(c.format, "afterburner", "one digit: {one_digit}");
        let got = only(&log.text, &opts());
        assert_eq!(got.frame_times_ms, log.samples_ms);
        assert_eq!(got.skipped_rows, 3);
    }
}

#[test]
fn afterburner_sessions_are_runs_without_the_pause() {
    // logging stopped for 5 minutes and resumed: a second header block mid-file. Before, the
    // interval was span / rows (~1221 ms) and the pause counted as logged time
    let mut rng = Rng::new(10);
    let frames = synth::frame_times(&mut rng, 4000, 7.0, 1.0, 10, 20.0);
    let a = synth::afterburner_session(&frames, 1000.0, 0, 0, 0.0, false, &mut rng);
    let b =
        synth::afterburner_session(&frames, 1000.0, 1, 0, a.duration_s + 300.0, false, &mut rng);
    let text = format!("{}{}", a.text, b.text);
    let c = parse(&text, p(), &opts()).unwrap();
    let sel = select(c, Pick::All).unwrap();
    assert_eq!(sel.logs.len(), 2);
    for (log, want, run) in [(&sel.logs[0], &a, 1), (&sel.logs[1], &b, 2)] {
        assert_eq!(log.app.run, Some(run));
        assert_eq!(&log.frame_times_ms, &want.samples_ms);
        let s = log.sampling.as_ref().unwrap();
        assert!(
            (s.interval_ms.unwrap() - want.interval_ms).abs() < 1e-6,
            "{s:?}"
        );
        assert!(
            (s.duration_s.unwrap() - want.duration_s).abs() < 1e-6,
            "{s:?}"
        );
        assert!(
            log.notes.iter().any(
                |n| n.contains("logging session 2 starts at line") && n.contains("pause of 30")
            ),
            "{:?}",
            log.notes
        );
    }
    // the default report takes one series per run: both sessions
    let c = parse(&text, p(), &opts()).unwrap();
    assert_eq!(select(c, Pick::Busiest).unwrap().logs.len(), 2);
}

#[test]
fn generated_afterburner_logs() {
    let mut rng = Rng::new(5);
    let frames = synth::frame_times(&mut rng, 9000, 6.9, 1.0, 100, 30.0);
    for poll in [1000.0, 100.0] {
        let log = synth::afterburner(&frames, poll, 3, 2, &mut rng);
        let got = only(&log.text, &opts());
        assert_eq!(got.kind, RowKind::Samples);
        assert_eq!(got.frame_times_ms, log.samples_ms, "{poll}");
        assert_eq!(
            (got.skipped_rows, got.zero_rows),
            (log.skipped_na + log.skipped_zero, log.skipped_zero)
        );
        let s = got.sampling.unwrap();
        assert!(
            (s.interval_ms.unwrap() - log.interval_ms).abs() < 1e-6,
            "{poll}"
        );
        assert!(
            (s.interval_ms.unwrap() - poll).abs() < poll * 0.05 + 20.0,
            "{poll}: {:?}",
            s.interval_ms
        );
        assert!((s.duration_s.unwrap() - log.duration_s).abs() < 1e-6);
    }
}

proptest::proptest! {
    #[test]
    fn parse_never_panics(s in "\\PC{0,400}") {
        for o in [opts(), col("x"), Options { column: None, as_samples: true }] {
            if let Ok(c) = parse(&s, p(), &o) {
                let _ = select(c.clone(), Pick::Busiest);
                let _ = select(c, Pick::App("1"));
            }
        }
    }

    #[test]
    fn lows_are_ordered(v in proptest::collection::vec(0.1f64..200.0, 1..500)) {
        let s = stats(&v, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
        // 1% low ≤ 2% low ≤ 5% low ≤ the median's FPS; avg-of-slowest ≤ the percentile low
        proptest::prop_assert!(s.lows[0].fps <= s.lows[1].fps + 1e-9);
        proptest::prop_assert!(s.lows[1].fps <= s.lows[2].fps + 1e-9);
        for l in &s.lows {
            proptest::prop_assert!(l.avg_slowest_fps <= l.fps + 1e-9);
        }
    }

    /// Any processes, any interleaving, any layout: the split recovers each process's frame
    /// times (so its figures), the busiest is the default, and splitting then merging gives
    /// the figures of all rows.
    #[test]
    fn split_recovers_each_process(
        seed in 0u64..u64::MAX,
        layout in 0usize..7,
        spec in proptest::collection::vec((1usize..120, 0.5f64..60.0, 0.0f64..0.05, proptest::bool::ANY), 1..5),
    ) {
        let mut rng = Rng::new(seed);
        let procs: Vec<Process> = spec
            .iter()
            .enumerate()
            .map(|(i, (n, base, start, tear))| {
                let mut p = Process::new(
                    ["Game.exe", "dwm.exe", "chrome.exe", "obs64.exe", "Discord.exe"][i % 5],
                    1000 + i as u32,
                    0x1000 + i as u64 * 0x10,
                    synth::frame_times(&mut rng, *n, *base, base / 3.0, 7, *base),
                );
                p.start_s = *start;
                p.allows_tearing = *tear;
                p.dropped = (0..*n).map(|_| rng.unit() < 0.2).collect();
                p.present_mode = ["Composed: Flip", "Hardware: Legacy Flip"][i % 2].into();
                p
            })
            .collect();
        let layout = Layout::ALL[layout];
        check_split(&procs, layout);
        let c = parse(&synth::capture(&procs, layout), p(), &opts()).unwrap();
        let sel = select(c, Pick::Busiest).unwrap();
        // the busiest, passing over the compositor when anything else presented
        let apps: Vec<&Process> = procs.iter().filter(|p| p.application != COMPOSITOR).collect();
        let pool = if apps.is_empty() { procs.iter().collect() } else { apps };
        let most = pool.iter().map(|p| p.frame_times_ms.len()).max().unwrap_or(0);
        proptest::prop_assert_eq!(sel.logs[0].frame_times_ms.len(), most);
        proptest::prop_assert!(
            pool.iter().any(|p| Some(p.application.as_str()) == sel.logs[0].app.application.as_deref())
        );
        proptest::prop_assert_eq!(sel.others.len(), procs.len() - 1);
    }

    /// Sampled logs at any interval: the samples, the skipped rows, the interval and the
    /// duration come back from the time column.
    #[test]
    fn sampled_logs_recover_interval_and_duration(
        seed in 0u64..u64::MAX,
        base in 4.0f64..40.0,
        interval in 60.0f64..1000.0,
        zeros in 0usize..4,
        na in 0usize..4,
    ) {
        let mut rng = Rng::new(seed);
        let frames = synth::frame_times(&mut rng, (20_000.0 / base) as usize, base, base / 4.0, 0, 0.0);
        let m = synth::mangohud(&frames, Some(interval), zeros, seed % 2 == 0, &mut rng);
        let got = only(&m.text, &opts());
        proptest::prop_assert_eq!(got.kind, RowKind::Samples);
        proptest::prop_assert_eq!(&got.frame_times_ms, &m.samples_ms);
        let s = got.sampling.unwrap();
        proptest::prop_assert!((s.interval_ms.unwrap() - m.interval_ms).abs() < 1e-6);
        proptest::prop_assert!((s.duration_s.unwrap() - m.duration_s).abs() < 1e-6);
        let poll = (interval / 100.0).round().max(1.0) * 100.0;
        let a = synth::afterburner_session(&frames, poll, na, zeros, 0.0, seed % 3 == 0, &mut rng);
        let got = only(&a.text, &opts());
        proptest::prop_assert_eq!(&got.frame_times_ms, &a.samples_ms);
        proptest::prop_assert_eq!(got.skipped_rows, na + zeros);
        let s = got.sampling.unwrap();
        proptest::prop_assert!((s.duration_s.unwrap() - a.duration_s).abs() < 1e-6);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Real shapes with damage (a byte replaced, a line cut): never a panic, and what is
    /// accepted keeps the invariants the fuzz target checks.
    #[test]
    fn damaged_captures_never_panic(
        seed in 0u64..1000,
        kind in 0usize..10,
        at in 0usize..100_000,
        with in proptest::char::any(),
        cut in proptest::bool::ANY,
    ) {
        let mut rng = Rng::new(seed);
        let frames = synth::frame_times(&mut rng, 200, 10.0, 3.0, 9, 20.0);
        let procs = synth::desktop(&mut rng, 0.3);
        let text = match kind {
            0..=6 => synth::capture(&procs, Layout::ALL[kind]),
            7 => synth::capframex_json("Game.exe", &procs[..1]),
            8 => synth::mangohud(&frames, Some(50.0), 1, true, &mut rng).text,
            _ => synth::afterburner(&frames, 100.0, 1, 1, &mut rng).text,
        };
        let chars: Vec<char> = text.chars().collect();
        let i = at % chars.len().max(1);
        let damaged: String = if cut {
            chars.iter().take(i).collect()
        } else {
            chars.iter().enumerate().map(|(j, c)| if j == i { with } else { *c }).collect()
        };
        if let Ok(c) = parse(&damaged, p(), &opts()) {
            for s in &c.series {
                proptest::prop_assert_eq!(s.presents, s.frame_times_ms.len() + s.skipped_rows);
                proptest::prop_assert!(s.frame_times_ms.iter().all(|x| (MIN_FRAME_MS..=MAX_FRAME_MS).contains(x)));
            }
            let n = c.series.len();
            for pick in [Pick::Busiest, Pick::All, Pick::App("dwm")] {
                if let Ok(sel) = select(c.clone(), pick) {
                    proptest::prop_assert_eq!(sel.logs.len() + sel.others.len(), n);
                }
            }
        }
    }
}

#[test]
fn a_capture_resaved_with_decimal_commas_reads_the_same() {
    // a PresentMon 1.x capture opened and saved again by a spreadsheet in a comma-decimal
    // locale: `;` between cells, `0,0166` in them; names with dots stay as they are
    let dot = "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,Dropped,TimeInSeconds,MsBetweenPresents\n\
Hogwarts Legacy.exe,9120,0x0000021A7C3F1E50,DXGI,0,512,1,Hardware: Independent Flip,0,0.0166,16.6\n\
Hogwarts Legacy.exe,9120,0x0000021A7C3F1E50,DXGI,0,512,1,Hardware: Independent Flip,1,0.0521,35.5\n\
Hogwarts Legacy.exe,9120,0x0000021A7C3F1E50,DXGI,0,512,1,Hardware: Independent Flip,0,0.0688,16.7\n";
    let comma: String = dot
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let cells: Vec<String> = l
                .split(',')
                .enumerate()
                .map(|(j, c)| {
                    if i > 0 && j >= 9 {
                        c.replace('.', ",")
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            cells.join(";") + "\n"
        })
        .collect();
    assert!(comma.contains(";0,0521;35,5"), "{comma}");
    let a = parse(dot, p(), &opts()).unwrap();
    let b = parse(&comma, p(), &opts()).unwrap();
    let (a, b) = (
        series(&a, "Hogwarts Legacy.exe", None),
        series(&b, "Hogwarts Legacy.exe", None),
    );
    assert_eq!(a.frame_times_ms, vec![16.6, 35.5, 16.7]);
    assert_eq!(a.frame_times_ms, b.frame_times_ms);
    assert_eq!(a.displayed, b.displayed);
    // a cell that is not one number stays an error
    let bad = comma.replace("35,5", "35,5,1");
    assert!(parse(&bad, p(), &opts())
        .unwrap_err()
        .to_string()
        .contains("line 3"));
}

#[test]
fn summaries_written_beside_logs_are_named() {
    let mh = "0.1% Min FPS,1% Min FPS,97% Percentile FPS,Average FPS,GPU Load\n25,25,60,58,88\n";
    assert_eq!(
        summary_of(Path::new("game_2024_summary.csv"), mh),
        Some("a MangoHud summary")
    );
    assert_eq!(
        summary_of(Path::new("x.csv"), mh),
        Some("a MangoHud summary")
    );
    let e = parse(mh, Path::new("g_summary.csv"), &opts())
        .unwrap_err()
        .to_string();
    assert!(e.contains("a MangoHud summary, not a capture"), "{e}");
    let fv = "Application,Avg FPS,99%ile\nw.exe,98,80\n";
    assert!(summary_of(Path::new("FrameView-w.exe_Summary.csv"), fv).is_some());
    assert!(summary_of(Path::new("w.csv"), fv).is_none());
    assert!(summary_of(Path::new("a_summary.csv"), "MsBetweenPresents\n16.6\n").is_none());
}
