//! Captures with known truth, written the way each tool writes them: several processes'
//! presents interleaved in time (PresentMon 1.x / 2.0 / 2.2–2.3 / 2.4+, OCAT, CapFrameX CSV
//! and JSON, FrameView), and sampled logs at a known interval (MangoHud, MSI Afterburner).
//!
//! Frame times are whole microseconds, so every format's precision (OCAT and FrameView write
//! 3 decimals, PresentMon 4 or 14) holds them exactly: a reader must give back exactly the
//! frame times here, per process, in order.

use std::fmt::Write;

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Round to whole microseconds (the precision every format can hold).
pub fn us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// `n` frame times around `base_ms` (± `jitter_ms`), every `spike_every`th one `spike_ms`
/// longer; whole microseconds, at least 0.1 ms.
pub fn frame_times(
    rng: &mut Rng,
    n: usize,
    base_ms: f64,
    jitter_ms: f64,
    spike_every: usize,
    spike_ms: f64,
) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let mut x = base_ms + (rng.unit() * 2.0 - 1.0) * jitter_ms;
            if spike_every > 0 && i % spike_every == spike_every - 1 {
                x += spike_ms;
            }
            us(x.max(0.1))
        })
        .collect()
}

/// One process's presents on one swap chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub application: String,
    pub pid: u32,
    pub swap_chain: u64,
    /// Time of the first present, seconds since the capture started.
    pub start_s: f64,
    /// The truth: time from the previous present to each present, ms (whole µs).
    pub frame_times_ms: Vec<f64>,
    /// Presents not displayed.
    pub dropped: Vec<bool>,
    pub present_mode: String,
    pub allows_tearing: bool,
}

impl Process {
    pub fn new(application: &str, pid: u32, swap_chain: u64, frame_times_ms: Vec<f64>) -> Self {
        let n = frame_times_ms.len();
        Process {
            application: application.to_string(),
            pid,
            swap_chain,
            start_s: 0.0,
            frame_times_ms,
            dropped: vec![false; n],
            present_mode: "Hardware: Independent Flip".into(),
            allows_tearing: false,
        }
    }

    fn dropped(&self, i: usize) -> bool {
        self.dropped.get(i).copied().unwrap_or(false)
    }
}

/// A game at ~88 FPS with a spike every 50 frames, dwm on two swap chains at 60 Hz and a
/// browser at ~30 FPS, overlapping in time: the shape of PresentMon's own multi-process
/// captures.
pub fn desktop(rng: &mut Rng, seconds: f64) -> Vec<Process> {
    let n = |ms: f64| (seconds * 1000.0 / ms) as usize;
    let mut game = Process::new(
        "Game.exe",
        24892,
        0x02A7_0D2C_AC00,
        frame_times(rng, n(11.25), 11.25, 1.5, 50, 9.0),
    );
    game.start_s = 0.004;
    game.present_mode = "Hardware: Independent Flip".into();
    game.allows_tearing = true;
    for (i, d) in game.dropped.iter_mut().enumerate() {
        *d = i % 3 == 1;
    }
    let mut dwm1 = Process::new(
        "dwm.exe",
        2656,
        0x19D_7EF5_E390,
        frame_times(rng, n(16.667), 16.667, 0.3, 0, 0.0),
    );
    dwm1.present_mode = "Hardware: Legacy Flip".into();
    let mut dwm2 = Process::new(
        "dwm.exe",
        2656,
        0x19D_7F1B_A8F0,
        frame_times(rng, n(16.667), 16.667, 0.3, 0, 0.0),
    );
    dwm2.present_mode = "Hardware: Legacy Flip".into();
    dwm2.start_s = 0.008;
    let mut browser = Process::new(
        "firefox.exe",
        3980,
        0x21C_48E8_A710,
        frame_times(rng, n(33.0), 33.0, 8.0, 0, 0.0),
    );
    browser.start_s = 0.013;
    browser.present_mode = "Composed: Flip".into();
    vec![game, dwm1, dwm2, browser]
}

/// Every process's presents as `(process, present, time of present in s)`, in time order.
pub fn presents(procs: &[Process]) -> Vec<(usize, usize, f64)> {
    let mut all = Vec::new();
    for (p, proc_) in procs.iter().enumerate() {
        let mut t = proc_.start_s;
        for (i, ft) in proc_.frame_times_ms.iter().enumerate() {
            t += ft / 1000.0;
            all.push((p, i, t));
        }
    }
    all.sort_by(|a, b| a.2.total_cmp(&b.2));
    all
}

/// Header families the generator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// PresentMon 1.x (and 2.x `--v1_metrics`): `Dropped`, `TimeInSeconds`, `msBetweenPresents`.
    PresentMon1,
    /// PresentMon 2.0: `CPUStartTime`, `CPUBusy`, `CPUWait`, `DisplayedTime` (0 = dropped).
    PresentMon20,
    /// PresentMon 2.2–2.3 (and 2.4+ `--v2_metrics`): `FrameTime`, `DisplayedTime` (NA = dropped).
    PresentMon2,
    /// PresentMon 2.4+ with `--qpc_time`: `TimeInQPC`, `MsBetweenPresents`, `MsUntilDisplayed`.
    PresentMon24,
    /// OCAT: 1.x columns, `MsEstimatedDriverLag`, system columns on each file's first row.
    Ocat,
    /// CapFrameX CSV: `//key=value` lines, then PresentMon 2.4-style columns.
    CapFrameXCsv,
    /// NVIDIA FrameView: `Application,GPU,CPU,Resolution,...` and telemetry columns.
    FrameView,
}

impl Layout {
    pub const ALL: [Layout; 7] = [
        Layout::PresentMon1,
        Layout::PresentMon20,
        Layout::PresentMon2,
        Layout::PresentMon24,
        Layout::Ocat,
        Layout::CapFrameXCsv,
        Layout::FrameView,
    ];

    /// The `format` the reader must report.
    pub fn format(self) -> &'static str {
        match self {
            Layout::PresentMon1 => "presentmon-1",
            Layout::PresentMon20 | Layout::PresentMon2 => "presentmon-2",
            Layout::PresentMon24 => "presentmon-2.4",
            Layout::Ocat => "ocat",
            Layout::CapFrameXCsv => "capframex-csv",
            Layout::FrameView => "frameview",
        }
    }
}

fn header(layout: Layout) -> &'static str {
    match layout {
        Layout::PresentMon1 => "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,Dropped,TimeInSeconds,msInPresentAPI,msBetweenPresents,AllowsTearing,PresentMode,msUntilRenderComplete,msUntilDisplayed,msBetweenDisplayChange,msFlipDelay",
        Layout::PresentMon20 => "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,CPUStartTime,CPUBusy,CPUWait,GPULatency,GPUBusy,GPUWait,DisplayLatency,DisplayedTime",
        Layout::PresentMon2 => "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,FrameType,CPUStartTime,FrameTime,CPUBusy,CPUWait,GPULatency,GPUTime,GPUBusy,GPUWait,VideoBusy,DisplayLatency,DisplayedTime,AnimationError,AnimationTime,MsFlipDelay",
        Layout::PresentMon24 => "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,FrameType,TimeInQPC,MsBetweenSimulationStart,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,CPUStartQPC,MsBetweenAppStart,MsCPUBusy,MsCPUWait,MsGPULatency,MsGPUTime,MsGPUBusy,MsGPUWait,MsVideoBusy,MsAnimationError,AnimationTime,MsFlipDelay",
        Layout::Ocat => "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsUntilRenderComplete,MsUntilDisplayed,MsEstimatedDriverLag,Width,Height,Motherboard,OS,Processor,System RAM,Base Driver Version,Driver Package,GPU #,GPU,GPU Core Clock (MHz),GPU Memory Clock (MHz),GPU Memory (MB)",
        Layout::CapFrameXCsv => "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,TimeInSeconds,MsBetweenSimulationStart,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,CPUStartQPCTimeInMs,MsBetweenAppStart,MsCPUBusy,MsCPUWait,MsGPULatency,MsGPUTime,MsGPUBusy,MsGPUWait,MsAnimationError,AnimationTime,MsFlipDelay,EtwBufferFillPct,EtwBuffersInUse,EtwTotalBuffers,EtwEventsLost,EtwBuffersLost",
        Layout::FrameView => "Application,GPU,CPU,Resolution,Runtime,AllowsTearing,ProcessID,SwapChainAddress,SyncInterval,PresentFlags,PresentMode,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,Render Queue Depth,MsPCLatency,GPU0Clk(MHz),GPU0MemClk(MHz),GPU0Util(%),GPU0Temp(C),GPU1Clk(MHz),GPU1MemClk(MHz),GPU1Util(%),GPU1Temp(C),PCAT Power Total(W),CPUClk(MHz),CPUUtil(%),CPU Package Temp(C)",
    }
}

/// Whole microseconds split in two parts that add up exactly (CPU busy + wait).
fn split_us(ms: f64) -> (f64, f64) {
    let total = (ms * 1000.0).round() as i64;
    let busy = total * 7 / 10;
    (busy as f64 / 1000.0, (total - busy) as f64 / 1000.0)
}

/// A capture of `procs` in `layout`, presents interleaved in time order; `\r\n` line ends
/// (the tools run on Windows).
pub fn capture(procs: &[Process], layout: Layout) -> String {
    let mut out = String::new();
    if layout == Layout::CapFrameXCsv {
        out.push_str("//GameName=Game\r\n//ProcessName=Game.exe\r\n//CreationDate=2024-05-01\r\n//CreationTime=20:15:00\r\n//Comment=a comment, with a comma\r\n");
    }
    out.push_str(header(layout));
    out.push_str("\r\n");
    let mut first_row = vec![true; procs.len()];
    for (p, i, t) in presents(procs) {
        let Some(pr) = procs.get(p) else { continue };
        let ft = pr.frame_times_ms.get(i).copied().unwrap_or_default();
        let dropped = pr.dropped(i);
        let (busy, wait) = split_us(ft);
        let tear = u8::from(pr.allows_tearing);
        let (app, pid, mode) = (&pr.application, pr.pid, &pr.present_mode);
        let sc16 = format!("0x{:016X}", pr.swap_chain);
        let sc = format!("0x{:X}", pr.swap_chain);
        let line = match layout {
            Layout::PresentMon1 => format!(
                "{app},{pid},{sc16},DXGI,0,0,{},{t:.14},0.31200000000000,{ft:.14},{tear},{mode},1.20000000000000,{},{},0.00000000000000",
                u8::from(dropped),
                if dropped { "0.00000000000000".into() } else { format!("{:.14}", ft + 3.0) },
                if dropped { "0.00000000000000".into() } else { format!("{ft:.14}") },
            ),
            Layout::PresentMon20 => format!(
                "{app},{pid},{sc16},DXGI,0,0,{tear},{mode},{:.6},{busy:.6},{wait:.6},0.500000,{:.6},0.100000,{:.6},{}",
                (t * 1000.0 - ft),
                busy * 0.8,
                ft + 3.0,
                if dropped { "0.000000".into() } else { format!("{ft:.6}") },
            ),
            Layout::PresentMon2 => format!(
                "{app},{pid},{sc},DXGI,0,0,{tear},{mode},Application,{:.4},{ft:.4},{busy:.4},{wait:.4},0.5000,{:.4},{:.4},0.1000,0.0000,{},{},NA,NA,NA",
                (t * 1000.0 - ft),
                busy * 0.8,
                busy * 0.8,
                if dropped { "NA".into() } else { format!("{:.4}", ft + 3.0) },
                if dropped { "NA".into() } else { format!("{ft:.4}") },
            ),
            Layout::PresentMon24 => format!(
                "{app},{pid},{sc},DXGI,0,0,{tear},{mode},Application,{},NA,{ft:.14},{},0.37230000000000,0.32520000000000,{},{},{ft:.4},{busy:.4},{wait:.4},0.5000,1.0000,1.0000,0.0000,0.0000,NA,NA,NA",
                (t * 1e7).round() as u64,
                if dropped { "NA".into() } else { format!("{ft:.14}") },
                if dropped { "NA".into() } else { format!("{:.4}", ft + 3.0) },
                ((t * 1000.0 - ft) * 1e4).round() as u64,
            ),
            Layout::Ocat => {
                let mut s = format!(
                    "{app},{pid},{sc16},DXGI,0,0,{tear},{mode},{},{t:.6},{ft:.3},{},0.312,1.200,{},0.250,2560,1440",
                    u8::from(dropped),
                    if dropped { "0.000".into() } else { format!("{ft:.3}") },
                    if dropped { "0.000".into() } else { format!("{:.3}", ft + 3.0) },
                );
                if let Some(f) = first_row.get_mut(p) {
                    if *f {
                        s.push_str(",ASUSTeK COMPUTER INC. PRIME X570-PRO,Windows 10 Pro 19045,AMD Ryzen 7 5800X 8-Core Processor,32 GB,31.0.15.3623,531.79,1,NVIDIA GeForce RTX 3080,1710,9501,10240");
                        *f = false;
                    }
                }
                s
            }
            Layout::CapFrameXCsv => format!(
                "{app},{pid},{sc},DXGI,0,0,{tear},{mode},{t:.7},NA,{ft:.4},{},0.3723,0.3252,{},{:.4},{ft:.4},{busy:.4},{wait:.4},0.5000,1.0000,1.0000,0.0000,NA,NA,NA,12.0,3,64,0,0",
                if dropped { "NA".into() } else { format!("{ft:.4}") },
                if dropped { "NA".into() } else { format!("{:.4}", ft + 3.0) },
                t * 1000.0 - ft,
            ),
            Layout::FrameView => format!(
                "{app},NVIDIA GeForce RTX 3080,AMD Ryzen 7 5800X 8-Core Processor,2560x1440,DXGI,{tear},{pid},{sc16},1,0,{mode},{},{t:.6},{ft:.3},{},0.420,{:.3},{},1,NA,1515,5500,98,70,NA,NA,NA,NA,NA,3617,79, 82",
                u8::from(dropped),
                if dropped { "0.000".into() } else { format!("{ft:.3}") },
                ft + 1.0,
                if dropped { "0.000".into() } else { format!("{:.3}", ft + 3.0) },
            ),
        };
        out.push_str(&line);
        out.push_str("\r\n");
    }
    out
}

/// A CapFrameX JSON capture of `process` with one run per element of `runs` (BOM, Json.NET's
/// layout, `"NaN"` strings where a value is missing).
pub fn capframex_json(process: &str, runs: &[Process]) -> String {
    let runs: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| {
            let mut t = r.start_s;
            let times: Vec<f64> = r
                .frame_times_ms
                .iter()
                .map(|ft| {
                    t += ft / 1000.0;
                    (t * 1e7).round() / 1e7
                })
                .collect();
            let n = r.frame_times_ms.len();
            let display: Vec<f64> = (0..n)
                .map(|i| {
                    if r.dropped(i) {
                        0.0
                    } else {
                        r.frame_times_ms.get(i).copied().unwrap_or(0.0)
                    }
                })
                .collect();
            let mode = match r.present_mode.as_str() {
                "Hardware: Legacy Flip" => 1,
                "Hardware: Independent Flip" => 3,
                "Composed: Flip" => 4,
                _ => 9,
            };
            serde_json::json!({
                "Hash": format!("{:x}", n * 7919),
                "PresentMonRuntime": "DXGI",
                "CaptureData": {
                    "TimeInSeconds": times,
                    "MsBetweenPresents": r.frame_times_ms,
                    "MsInPresentAPI": vec![0.312; n],
                    "MsBetweenDisplayChange": display,
                    "MsUntilRenderComplete": vec![1.2; n],
                    "MsUntilDisplayed": display,
                    "QPCTime": vec![0.0; n],
                    "PresentMode": vec![mode; n],
                    "AllowsTearing": vec![u8::from(r.allows_tearing); n],
                    "SyncInterval": vec![0; n],
                    "Dropped": (0..n).map(|i| r.dropped(i)).collect::<Vec<_>>(),
                    "PcLatency": vec!["NaN"; n],
                    "AnimationError": vec![0.0; n],
                    "GpuActive": vec![5.0; n],
                    "CpuActive": vec![4.0; n],
                },
                "SensorData": null,
                "SensorData2": null,
                "RTSSFrameTimes": null,
                "SampleTime": 0,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "Hash": "0f1e2d3c",
        "Info": {
            "AppVersion": "1.7.2.0",
            "Id": "6c0d8a3e-3d2c-4a55-9b8f-2f1a7e0c9b11",
            "Processor": "AMD Ryzen 7 5800X 8-Core Processor",
            "GameName": "Game",
            "ProcessName": process,
            "CreationDate": "2024-05-01T18:15:00Z",
            "GPU": "NVIDIA GeForce RTX 3080",
            "Comment": "",
            "ApiInfo": "DXGI",
            "PresentationMode": "Hardware: Independent Flip",
        },
        "Runs": runs,
    });
    format!("\u{feff}{doc}")
}

/// A sampled (or per-frame) log and what a reader must recover from it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledLog {
    pub text: String,
    /// Sampled frame times with a value, in order.
    pub samples_ms: Vec<f64>,
    /// Data rows written.
    pub rows: usize,
    /// Rows without a value (`N/A`) and rows at 0.
    pub skipped_na: usize,
    pub skipped_zero: usize,
    /// Mean time between rows as the file's time column says, ms.
    pub interval_ms: f64,
    /// Span of the time column + one interval, s.
    pub duration_s: f64,
}

/// The frame just completed at each tick: ticks every `interval_ms` (± `jitter_ms`) from the
/// first frame's end while frames last. Returns `(tick time s, frame time ms)`.
fn sample(frames: &[f64], interval_ms: f64, jitter_ms: f64, rng: &mut Rng) -> Vec<(f64, f64)> {
    let mut ends = Vec::with_capacity(frames.len());
    let mut t = 0.0;
    for ft in frames {
        t += ft / 1000.0;
        ends.push(t);
    }
    let mut out = Vec::new();
    let (mut k, mut j) = (1usize, 0usize);
    loop {
        let tick = k as f64 * interval_ms / 1000.0 + rng.unit() * jitter_ms / 1000.0;
        if ends.last().is_none_or(|&e| tick > e) {
            break;
        }
        while ends.get(j + 1).is_some_and(|&e| e <= tick) {
            j += 1;
        }
        if ends.first().is_some_and(|&e| e <= tick) {
            if let Some(ft) = frames.get(j) {
                out.push((tick, *ft));
            }
        }
        k += 1;
    }
    out
}

fn finish(times: &[f64]) -> (f64, f64) {
    let (lo, hi) = (
        times.iter().copied().fold(f64::INFINITY, f64::min),
        times.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let interval = (hi - lo) / (times.len().max(2) - 1) as f64;
    (interval * 1000.0, hi - lo + interval)
}

/// A MangoHud log of `frames`: one row per frame (`log_interval = 0`, MangoHud's default
/// since 2023) or one every `interval_ms`; `zeros` rows of frametime 0 (loading) first;
/// `versioned` adds the `log_versioning` lines.
pub fn mangohud(
    frames: &[f64],
    interval_ms: Option<f64>,
    zeros: usize,
    versioned: bool,
    rng: &mut Rng,
) -> SampledLog {
    let mut text = String::new();
    if versioned {
        text.push_str("v1\n0.7.2\n---------------------SYSTEM INFO---------------------\n");
    }
    text.push_str("os,cpu,gpu,ram,kernel,driver,cpuscheduler\n");
    text.push_str("Arch Linux,AMD Ryzen 7 5800X 8-Core Processor,NVIDIA GeForce RTX 3080,32768000,6.9.1-arch1-1,NVIDIA 560.35.03,performance\n");
    if versioned {
        text.push_str("--------------------FRAME METRICS--------------------\n");
    }
    text.push_str("fps,frametime,cpu_load,cpu_power,gpu_load,cpu_temp,gpu_temp,gpu_core_clock,gpu_mem_clock,gpu_vram_used,gpu_power,ram_used,swap_used,process_rss,cpu_mhz,elapsed\n");
    let rows: Vec<(f64, f64)> = match interval_ms {
        Some(i) => sample(frames, i, 2.0, rng),
        None => {
            let mut t = 0.0;
            frames
                .iter()
                .map(|ft| {
                    t += ft / 1000.0;
                    (t, *ft)
                })
                .collect()
        }
    };
    let mut times = Vec::new();
    let step = interval_ms.unwrap_or(16.0) / 1000.0;
    for z in 0..zeros {
        let t = (z + 1) as f64 * step;
        let ns = (t * 1e9).round() as u64;
        times.push(ns as f64 / 1e9);
        let _ = writeln!(
            text,
            "0,0,12.5,31.2,3,55,48,210,405,1.2,35,9.1,0,1.1,3700,{ns}"
        );
    }
    let offset = zeros as f64 * step;
    for (t, ft) in &rows {
        let ns = ((t + offset) * 1e9).round() as u64;
        times.push(ns as f64 / 1e9);
        let _ = writeln!(
            text,
            "{:.1},{ft},34.2,61.5,97,71,66,1905,9501,8.4,301,12.7,0.1,3.2,4450,{ns}",
            1000.0 / ft
        );
    }
    let (interval_ms, duration_s) = finish(&times);
    SampledLog {
        text,
        samples_ms: rows.iter().map(|(_, ft)| *ft).collect(),
        rows: rows.len() + zeros,
        skipped_na: 0,
        skipped_zero: zeros,
        interval_ms,
        duration_s,
    }
}

fn pad(s: &str) -> String {
    format!("{s:<20}")
}

/// An MSI Afterburner log of `frames`, polled every `poll_ms` from 31-12-2024 23:59:50 (so it
/// crosses midnight and a year): `na` rows of `N/A` first (no 3D application yet), then `zeros`
/// rows at 0 (loading), then samples of the last completed frame.
pub fn afterburner(
    frames: &[f64],
    poll_ms: f64,
    na: usize,
    zeros: usize,
    rng: &mut Rng,
) -> SampledLog {
    afterburner_session(frames, poll_ms, na, zeros, 0.0, false, rng)
}

/// One logging session of [`afterburner`], starting `at_s` seconds after its start, with the
/// record types written with one digit where they have two (`0,` … `3,`, as some Afterburner
/// versions and converted logs write them) when `one_digit`. A log of two sessions is two of
/// these one after the other: Afterburner writes a new header block when logging resumes.
pub fn afterburner_session(
    frames: &[f64],
    poll_ms: f64,
    na: usize,
    zeros: usize,
    at_s: f64,
    one_digit: bool,
    rng: &mut Rng,
) -> SampledLog {
    let start = 1_735_689_590.0 + at_s; // 31-12-2024 23:59:50 UTC
    let stamp = |t: f64| {
        let s = (start + t).floor() as i64;
        let (days, secs) = (s.div_euclid(86_400), s.rem_euclid(86_400));
        // civil from days (H. Hinnant)
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        format!(
            "{d:02}-{m:02}-{y} {:02}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    };
    let names = [
        "GPU temperature",
        "GPU usage",
        "Framerate",
        "Frametime",
        "CPU usage",
    ];
    let units = ["°C", "%", "FPS", "ms", "%"];
    let mut text = format!(
        "00, {}, Hardware monitoring log v1.6 \n01, {}, NVIDIA GeForce RTX 3080\n02, {}, {}\n",
        stamp(0.0),
        stamp(0.0),
        stamp(0.0),
        names.iter().map(|n| pad(n)).collect::<Vec<_>>().join(",")
    );
    for (i, u) in units.iter().enumerate() {
        let _ = writeln!(
            text,
            "03, {}, {},{},{},{},{},{},{},",
            stamp(0.0),
            pad(&i.to_string()),
            pad(u),
            pad("0.000"),
            pad("100.000"),
            pad("10"),
            pad(""),
            pad("")
        );
    }
    let samples = sample(frames, poll_ms, 0.0, rng);
    let mut times = Vec::new();
    let mut k = 0usize;
    let mut row = |t: f64, fps: &str, ft: &str, text: &mut String| {
        times.push((start + t).floor());
        let _ = writeln!(
            text,
            "80, {}, {},{},{},{},{}",
            stamp(t),
            pad("65.000"),
            pad("97.000"),
            pad(fps),
            pad(ft),
            pad("12.500")
        );
    };
    for _ in 0..na {
        k += 1;
        row(k as f64 * poll_ms / 1000.0, "N/A", "N/A", &mut text);
    }
    for _ in 0..zeros {
        k += 1;
        row(k as f64 * poll_ms / 1000.0, "0.000", "0.000", &mut text);
    }
    let offset = k as f64 * poll_ms / 1000.0;
    for (t, ft) in &samples {
        row(
            offset + t,
            &format!("{:.3}", 1000.0 / ft),
            &format!("{ft:.3}"),
            &mut text,
        );
    }
    let (interval_ms, duration_s) = finish(&times);
    if one_digit {
        text = text
            .lines()
            .map(|l| match l.get(..3) {
                Some("00," | "01," | "02," | "03,") => format!("{}\n", &l[1..]),
                _ => format!("{l}\n"),
            })
            .collect();
    }
    SampledLog {
        text,
        samples_ms: samples.iter().map(|(_, ft)| *ft).collect(),
        rows: na + zeros + samples.len(),
        skipped_na: na,
        skipped_zero: zeros,
        interval_ms,
        duration_s,
    }
}
