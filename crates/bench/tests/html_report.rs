//! The HTML report in a real headless browser (Debian's chromium): it loads offline with no
//! console errors, its DOM holds the SVG charts, and the screenshot is not blank.

use std::path::Path;

use bench::stats::PercentileMethod;
use bench::{frametimes, latency, membw, timer, FrameLogResult, RunFile};

/// A frame-time log like the VFIO gaming-host write-up's: ~16 ms frames with jitter and stutter spikes.
fn frame_log(name: &str, seed: u64, spike_every: usize) -> FrameLogResult {
    let mut x = seed;
    let mut ft = Vec::new();
    for i in 0..6000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let jitter = (x % 1000) as f64 / 1000.0 * 3.0;
        let spike = if i % spike_every == 0 {
            8.0 + (x % 7) as f64
        } else {
            0.0
        };
        ft.push(13.5 + jitter + spike);
    }
    let text: String = ft.iter().map(|x| format!("{x}\n")).collect();
    let capture = frametimes::parse(&text, Path::new(name), &Default::default()).unwrap();
    let log = capture.series.into_iter().next().unwrap();
    FrameLogResult::new(
        log,
        vec![],
        frametimes::DEFAULT_LOWS,
        PercentileMethod::Linear,
    )
    .unwrap()
}

fn make_run(config: &str, pin: bool, seed: u64, spikes: usize) -> RunFile {
    let bar = indicatif::ProgressBar::hidden();
    let mut r = RunFile::new(config);
    // timer on a private copy of the clocksource files: measures the real clock, switches nothing
    let sys = tempfile::tempdir().unwrap();
    std::fs::write(sys.path().join("available_clocksource"), "tsc kvm-clock\n").unwrap();
    std::fs::write(sys.path().join("current_clocksource"), "tsc\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    r.timer = Some(
        timer::run(
            &timer::TimerOptions {
                dir: sys.path().into(),
                state_dir: state.path().into(),
                repeats: 3,
                seconds_per_repeat: 0.005,
                ..Default::default()
            },
            &bar,
        )
        .unwrap(),
    );
    let first = bench::sys::allowed_cpus().unwrap().first().unwrap();
    r.membw = Some(
        membw::run(
            &membw::MembwOptions {
                array_bytes: 2 << 20,
                cpus: pin.then(|| topo::CpuSet::parse_list(&first.to_string()).unwrap()),
                threads: 1,
                repeats: 4,
            },
            &bar,
        )
        .unwrap(),
    );
    r.latency = Some(
        latency::run(
            &latency::LatencyOptions {
                cpus: topo::CpuSet::parse_list(&first.to_string()).unwrap(),
                interval_us: 1000,
                duration: std::time::Duration::from_millis(300),
                fifo_priority: None,
                load_cpus: None,
                hist_max_us: 500,
                windows: 3,
            },
            &bar,
        )
        .unwrap(),
    );
    r.frametimes = vec![frame_log(&format!("sottr-{config}.csv"), seed, spikes)];
    r.refresh_metrics();
    r
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let Some(chromium) = testkit::chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runs = [
        make_run("no-masking", false, 7, 40),
        make_run("masking", true, 11, 90),
    ];
    let html = bench::report::html(&runs, "vmtune benchmark report");
    // self-contained: nothing to fetch, no scripts
    assert!(!html.contains("<script"), "report must not contain scripts");
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    let path = dir.path().join("report.html");
    std::fs::write(&path, &html).unwrap();
    let url = format!("file://{}", path.display());

    // DOM: the browser parsed the charts
    let out = testkit::headless(&chromium, dir.path(), &["--dump-dom"], &url);
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium --dump-dom failed: {stderr}");
    let charts = dom.matches("<svg class=\"chart").count();
    // timer, membw, 2 latency histograms, frame-time plot, FPS bars
    assert_eq!(charts, 6, "charts in DOM: {charts}\n{dom:.2000}");
    assert!(dom.contains("class=\"bar\"") && dom.contains("class=\"series\""));
    assert!(dom.contains("Comparison") && dom.contains("membw.triad"));
    for bad in testkit::BROWSER_PROBLEMS {
        assert!(!stderr.contains(bad), "browser reported {bad:?}: {stderr}");
    }

    // screenshot: not blank
    let png_path = dir.path().join("report.png");
    let out = testkit::headless(
        &chromium,
        dir.path(),
        &[
            &format!("--screenshot={}", png_path.display()),
            "--window-size=1200,900",
        ],
        &url,
    );
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::io::BufReader::new(std::fs::File::open(&png_path).expect("screenshot written"));
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1200, 900));
    let px = &buf[..info.buffer_size()];
    let n = px.len() as f64;
    let mean = px.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = px.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    let distinct: std::collections::BTreeSet<u8> = px.iter().copied().collect();
    assert!(
        var > 100.0 && distinct.len() > 16,
        "screenshot looks blank: variance {var}, {} levels",
        distinct.len()
    );
    // keep a copy for people to look at
    if let Ok(keep) = std::env::var("VMTUNE_KEEP_SCREENSHOT") {
        std::fs::copy(&png_path, &keep).unwrap();
        std::fs::copy(&path, format!("{keep}.html")).ok();
    }
}
