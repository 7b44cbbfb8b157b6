//! `vmtune bench frametimes` end to end on captures in each tool's shape (written by
//! `bench::frametimes::synth`, whose truth is known, and by hand), and `compare` / `report`
//! on every result it saves.

use std::path::Path;

use bench::frametimes::synth::{self, Layout, Process, Rng};
use bench::frametimes::{stats, DEFAULT_LOWS};
use bench::stats::PercentileMethod;

mod common;
use common::{ok_json, run};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn text_of(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Fails with exit 2 and one line on stderr; the line.
fn fails(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

/// A game, dwm on two swap chains and a browser: the game's own figures by default, the others
/// named; `--app` picks any of them by name, pid or swap chain; `--all-apps` reports each.
#[test]
fn presentmon_capture_reports_the_game_and_names_the_others() {
    let d = tempfile::tempdir().unwrap();
    let procs = synth::desktop(&mut Rng::new(42), 4.0);
    let truth = |i: usize| {
        stats(
            &procs[i].frame_times_ms,
            DEFAULT_LOWS,
            PercentileMethod::Linear,
        )
        .unwrap()
    };
    for layout in Layout::ALL {
        let file = write(d.path(), "capture.csv", &synth::capture(&procs, layout));
        let v = ok_json(&["bench", "frametimes", &file, "--json"]);
        let logs = v["frametimes"].as_array().unwrap();
        assert_eq!(logs.len(), 1, "{layout:?}");
        let l = &logs[0];
        assert_eq!(l["format"], layout.format());
        assert_eq!(l["app"]["application"], "Game.exe", "{layout:?}");
        assert_eq!(l["kind"], "frames");
        assert_eq!(l["lows_approximate"], false);
        let want = truth(0);
        assert_eq!(l["stats"]["frames"], want.frames);
        assert!(
            (f(&l["stats"]["avg_fps"]) - want.avg_fps).abs() < 1e-9,
            "{layout:?}"
        );
        assert!((f(&l["stats"]["lows"][0]["fps"]) - want.lows[0].fps).abs() < 1e-9);
        let dropped = procs[0].dropped.iter().filter(|x| **x).count();
        assert_eq!(l["displayed"]["dropped"], dropped, "{layout:?}");
        assert_eq!(l["allows_tearing"], procs[0].frame_times_ms.len());
        let others: Vec<&str> = l["others"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["app"]["application"].as_str().unwrap())
            .collect();
        assert_eq!(others, ["dwm.exe", "dwm.exe", "firefox.exe"], "{layout:?}");

        // the text names the others and how to pick them
        let text = text_of(&["bench", "frametimes", &file]);
        assert!(
            text.contains("capture.csv: Game.exe (pid 24892, swap chain 0x")
                && text.contains("also in capture.csv (--app NAME|PID|SWAPCHAIN picks one")
                && text.contains("firefox.exe (pid 3980")
                && text.contains(&format!("{:.2}", want.avg_fps)),
            "{text}"
        );

        // --app by name, by pid, by swap chain
        for (q, i) in [
            ("dwm", 1),
            ("3980", 3),
            ("0x19D7F1BA8F0", 2),
            ("firefox.exe", 3),
        ] {
            let v = ok_json(&["bench", "frametimes", &file, "--app", q, "--json"]);
            let l = &v["frametimes"][0];
            assert_eq!(
                l["app"]["application"],
                procs[i].application.as_str(),
                "{q}"
            );
            assert_eq!(l["stats"]["frames"], truth(i).frames, "{layout:?} {q}");
            assert!((f(&l["stats"]["avg_fps"]) - truth(i).avg_fps).abs() < 1e-9);
        }
        let v = ok_json(&["bench", "frametimes", &file, "--all-apps", "--json"]);
        assert_eq!(v["frametimes"].as_array().unwrap().len(), 4);
        let names: Vec<&str> = v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"frametimes[Game.exe].avg_fps")
                && names.contains(&"frametimes[firefox.exe].low_1pct"),
            "{names:?}"
        );
    }
    let file = write(
        d.path(),
        "c.csv",
        &synth::capture(&procs, Layout::PresentMon24),
    );
    let err = fails(&["bench", "frametimes", &file, "--app", "notepad"]);
    assert!(
        err.contains("c.csv: --app notepad: no such application") && err.contains("dwm.exe"),
        "{err}"
    );
    let o = run(&["bench", "frametimes", &file, "--app", "dwm", "--all-apps"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A 30 s MangoHud log at log_interval=100: 30 s of ~100 ms samples, lows labelled approximate.
#[test]
fn mangohud_30s_log_is_30s_of_100ms_samples() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(9);
    // ~60 FPS for 30 s, a stutter every 40 frames
    let frames = synth::frame_times(&mut rng, 1870, 15.5, 2.0, 40, 25.0);
    let log = synth::mangohud(&frames, Some(100.0), 0, true, &mut rng);
    assert!((log.duration_s - 30.0).abs() < 0.3, "{}", log.duration_s);
    let file = write(d.path(), "Cyberpunk2077_2024-05-01_20-15-00.csv", &log.text);
    let v = ok_json(&["bench", "frametimes", &file, "--json"]);
    let l = &v["frametimes"][0];
    assert_eq!(l["format"], "mangohud");
    assert_eq!(l["kind"], "samples");
    assert_eq!(l["lows_approximate"], true);
    assert_eq!(l["stats"]["frames"], log.samples_ms.len());
    let s = &l["sampling"];
    assert!((f(&s["interval_ms"]) - 100.0).abs() < 1.5, "{s}");
    assert!((f(&s["duration_s"]) - log.duration_s).abs() < 1e-6, "{s}");
    assert_eq!(s["time_column"], "elapsed");
    let text = text_of(&["bench", "frametimes", &file]);
    let dur = format!("over {:.1} s (elapsed)", log.duration_s);
    assert!(
        text.contains(&format!("{} samples", log.samples_ms.len()))
            && text.contains("one every ~100")
            && text.contains(&dur)
            && text.contains("samples, not frames (rows are ~100 ms apart in elapsed")
            && text.contains("~ = approximate, from samples")
            && text.contains(&format!("~{:.2}", f(&l["stats"]["lows"][0]["fps"]))),
        "{text}"
    );
    // the same game logged every frame (MangoHud's default log_interval=0): frames
    let log = synth::mangohud(&frames, None, 0, false, &mut rng);
    let file = write(d.path(), "per-frame.csv", &log.text);
    let v = ok_json(&["bench", "frametimes", &file, "--json"]);
    assert_eq!(v["frametimes"][0]["kind"], "frames");
    assert_eq!(v["frametimes"][0]["stats"]["frames"], frames.len());
}

/// An Afterburner log: per-second samples, N/A and 0 rows skipped and counted.
#[test]
fn afterburner_log_is_read_as_per_second_samples() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(12);
    let frames = synth::frame_times(&mut rng, 12_000, 8.3, 1.0, 120, 40.0);
    let log = synth::afterburner(&frames, 1000.0, 4, 3, &mut rng);
    let file = write(d.path(), "HardwareMonitoring.hml", &log.text);
    let v = ok_json(&["bench", "frametimes", &file, "--json"]);
    let l = &v["frametimes"][0];
    assert_eq!(l["format"], "afterburner");
    assert_eq!(l["kind"], "samples");
    assert_eq!(l["skipped_rows"], 7);
    assert_eq!(l["zero_rows"], 3);
    assert_eq!(l["stats"]["frames"], log.samples_ms.len());
    assert!((f(&l["sampling"]["interval_ms"]) - 1000.0).abs() < 1e-9);
    assert!((f(&l["sampling"]["duration_s"]) - log.duration_s).abs() < 1e-9);
    assert!(
        f(&l["stats"]["min_ms"]) > 0.0,
        "0 ms rows must not be frames"
    );
    let text = text_of(&["bench", "frametimes", &file]);
    assert!(
        text.contains("MSI Afterburner log (HML), column Frametime")
            && text.contains("one every ~1000 ms")
            && text.contains("7 rows without a value skipped (3 at 0 ms)")
            && text.contains("samples, not frames (one row per poll of the sensors"),
        "{text}"
    );
}

#[test]
fn capframex_json_and_zero_frames() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(1);
    let runs: Vec<Process> = (0..2)
        .map(|_| {
            Process::new(
                "Game.exe",
                1,
                1,
                synth::frame_times(&mut rng, 300, 7.0, 1.0, 30, 5.0),
            )
        })
        .collect();
    let file = write(
        d.path(),
        "CapFrameX-Game.exe-2024-05-01T201500.json",
        &synth::capframex_json("Game.exe", &runs),
    );
    let v = ok_json(&["bench", "frametimes", &file, "--json"]);
    let logs = v["frametimes"].as_array().unwrap();
    assert_eq!(logs.len(), 2, "one result per run");
    assert_eq!(logs[1]["app"]["run"], 2);
    assert_eq!(v["metrics"][0]["name"], "frametimes.avg_fps");
    assert_eq!(v["metrics"][0]["samples"].as_array().unwrap().len(), 2);
    // a frame of 0 ms is refused with its row
    let zeros = write(d.path(), "zeros.txt", "16.6\n0\n0\n");
    let err = fails(&["bench", "frametimes", &zeros, "--save", "z.json"]);
    assert!(
        err.contains("zeros.txt: line 2: frame time is 0 ms"),
        "{err}"
    );
    assert!(!d.path().join("z.json").exists());
}

/// Every result `frametimes --save` writes reads back in `compare` and `report`.
#[test]
fn compare_and_report_read_back_every_saved_result() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut rng = Rng::new(77);
    let procs = synth::desktop(&mut rng, 2.0);
    let frames = synth::frame_times(&mut rng, 3000, 12.0, 3.0, 30, 20.0);
    let mut inputs: Vec<(String, Vec<&str>)> = Vec::new();
    for (i, layout) in Layout::ALL.iter().enumerate() {
        let file = write(dir, &format!("pm{i}.csv"), &synth::capture(&procs, *layout));
        inputs.push((file.clone(), vec![]));
        inputs.push((file, vec!["--all-apps"]));
    }
    let runs = vec![Process::new("Game.exe", 1, 1, frames.clone())];
    inputs.push((
        write(dir, "cx.json", &synth::capframex_json("Game.exe", &runs)),
        vec![],
    ));
    inputs.push((
        write(
            dir,
            "m.csv",
            &synth::mangohud(&frames, Some(100.0), 2, true, &mut rng).text,
        ),
        vec![],
    ));
    inputs.push((
        write(
            dir,
            "ab.hml",
            &synth::afterburner(&frames, 1000.0, 2, 2, &mut rng).text,
        ),
        vec![],
    ));
    inputs.push((write(dir, "plain.txt", "16.6\n17.1\n33.4\n"), vec![]));
    inputs.push((
        write(dir, "sampled.txt", "16.6\n0\n33.4\n"),
        vec!["--as-samples"],
    ));
    let mut saved = Vec::new();
    for (k, (file, extra)) in inputs.iter().enumerate() {
        let out = dir.join(format!("r{k}.json")).display().to_string();
        let mut args = vec![
            "bench",
            "frametimes",
            file.as_str(),
            "--save",
            out.as_str(),
            "--json",
        ];
        args.extend(extra.iter().copied());
        ok_json(&args);
        // every figure is a number (an infinity would have been written as null)
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        for l in doc["frametimes"].as_array().unwrap() {
            let s = &l["stats"];
            for k in [
                "avg_fps",
                "duration_s",
                "mean_ms",
                "median_ms",
                "min_ms",
                "max_ms",
            ] {
                assert!(s[k].is_number(), "{file} {k}: {s}");
            }
            for low in s["lows"].as_array().unwrap() {
                assert!(
                    low["fps"].is_number() && low["avg_slowest_fps"].is_number(),
                    "{low}"
                );
            }
        }
        saved.push(out);
    }
    for pair in saved.windows(2) {
        let c = ok_json(&["bench", "compare", &pair[0], &pair[1], "--json"]);
        assert_eq!(c["configs"].as_array().unwrap().len(), 2, "{pair:?}");
        // no --config: the columns are the file names
        assert_ne!(c["configs"][0], c["configs"][1], "{c}");
    }
    let html = dir.join("all.html").display().to_string();
    let mut args = vec!["bench", "report", "-o", html.as_str(), "--json"];
    args.extend(saved.iter().map(String::as_str));
    let r = ok_json(&args);
    assert_eq!(r["runs"], saved.len());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Frame times") && page.contains("(samples)"),
        "report"
    );
    // a result saved before this release (no kind, app, ...) still reads
    let old = std::fs::read_to_string(&saved[0]).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&old).unwrap();
    for l in v["frametimes"].as_array_mut().unwrap() {
        let o = l.as_object_mut().unwrap();
        for k in [
            "kind",
            "lows_approximate",
            "app",
            "presents",
            "zero_rows",
            "displayed",
            "present_modes",
            "allows_tearing",
            "sampling",
            "others",
            "notes",
        ] {
            o.remove(k);
        }
    }
    v.as_object_mut().unwrap().remove("config_given");
    let old = write(dir, "old.json", &v.to_string());
    let c = ok_json(&["bench", "compare", &old, &saved[1], "--json"]);
    assert_eq!(
        c["configs"][0], "frametimes",
        "old files keep their saved config"
    );
    // frames vs samples is said in what differed
    let c = ok_json(&[
        "bench",
        "compare",
        &saved[0],
        &saved[saved.len() - 3],
        "--json",
    ]);
    assert!(
        c["differences"].as_array().unwrap().iter().any(|x| x
            .as_str()
            .unwrap()
            .contains("frametimes.rows: \"frames\" → \"samples\"")),
        "{c}"
    );
    // a log that names no application says so, not ""
    let diffs = c["differences"].to_string();
    assert!(!diffs.contains("→ \\\"\\\""), "{diffs}");
    // the sampled run's figures are marked approximate, as `bench frametimes` marks them
    let rows = c["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["approximate"] == serde_json::json!([false, true])),
        "{c}"
    );
    let t = text_of(&["bench", "compare", &saved[0], &saved[saved.len() - 3]]);
    let avg = t
        .lines()
        .find(|l| l.starts_with("frametimes.avg_fps"))
        .unwrap();
    assert_eq!(avg.matches('~').count(), 3, "{avg}");
    assert!(t.contains("~ = approximate"), "{t}");
}

/// Without `--config`, `compare` labels runs by their file names, not by the benchmark.
#[test]
fn compare_labels_runs_by_file_name_without_config() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (
        d.path().join("unpinned.json").display().to_string(),
        d.path().join("pinned.json").display().to_string(),
    );
    for (out, threads) in [(&a, "1"), (&b, "2")] {
        let o = run(&[
            "bench",
            "membw",
            "--size",
            "1M",
            "--repeats",
            "2",
            "--threads",
            threads,
            "--save",
            out,
            "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let c = ok_json(&["bench", "compare", &a, &b, "--json"]);
    assert_eq!(c["configs"], serde_json::json!(["unpinned", "pinned"]));
    let text = text_of(&["bench", "compare", &a, &b]);
    assert!(
        text.contains("unpinned median") && text.contains("pinned median"),
        "{text}"
    );
    assert!(!text.contains("membw median"), "{text}");
    // a given --config is what shows
    let c2 = d.path().join("c2.json").display().to_string();
    let o = run(&[
        "bench",
        "membw",
        "--size",
        "1M",
        "--repeats",
        "2",
        "--threads",
        "1",
        "--config",
        "numa0",
        "--save",
        &c2,
    ]);
    assert!(o.status.success());
    let c = ok_json(&["bench", "compare", &a, &c2, "--json"]);
    assert_eq!(c["configs"], serde_json::json!(["unpinned", "numa0"]));
}

/// A capture read on another machine than the one it was taken on (PresentMon 2.4 with
/// `--ms_time`, from a Windows guest): the result does not record this machine's kernel, CPU,
/// clocksource or host model as the capture's, also with `--plan`; the report says "not
/// recorded".
#[test]
fn a_capture_is_not_given_this_machines_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,TimeInMs,MsBetweenSimulationStart,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsRenderPresentLatency,MsUntilDisplayed,CPUStartTimeInMs,MsBetweenAppStart,MsCPUBusy,MsCPUWait\n");
    let mut t = 0.0;
    for i in 0..200 {
        let ft = if i % 50 == 49 { 33.3 } else { 8.3 };
        t += ft;
        csv.push_str(&format!(
            "eldenring.exe,7312,0x1C2D3E4F5A0,DXGI,1,0,0,Hardware: Independent Flip,{t:.4},NA,{ft:.4},{ft:.4},0.1,1.2,5.1,{t:.4},{ft:.4},6.0,2.3\n"
        ));
    }
    let cap = write(dir.path(), "elden.csv", &csv);
    let plan = write(dir.path(), "plan.json", "{\"vcpus\": []}");
    let html = dir.path().join("r.html").display().to_string();
    let v = ok_json(&[
        "bench",
        "frametimes",
        &cap,
        "--plan",
        &plan,
        "--html",
        &html,
        "--json",
    ]);
    let e = &v["environment"];
    for k in [
        "hostname",
        "kernel",
        "cpu_model",
        "clocksource",
        "in_guest",
        "cpus",
    ] {
        assert!(e[k].is_null(), "{k}: {e}");
    }
    assert!(v["host"].is_null(), "{}", v["host"]);
    assert_eq!(v["plan"]["vcpus"], serde_json::json!([]));
    assert_eq!(v["frametimes"][0]["stats"]["frames"], 200);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<td>not recorded</td>"), "{page}");
    assert!(!page.contains(">guest<") && !page.contains(">bare metal<"));
}

/// `vmtune bench frametimes ~/mangologs/*.csv`: MangoHud writes `NAME_summary.csv` beside
/// each log (FrameView `_Summary.csv`, OCAT `perf_summary.csv`); among logs a summary is
/// passed over with a note, alone it is an error naming it.
#[test]
fn a_glob_over_a_mangohud_folder_passes_over_the_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("v1\n0.8.1\n---------------------SYSTEM INFO---------------------\nos,cpu,gpu,ram,kernel,driver,cpuscheduler\nSteamOS,AMD Custom APU 0405,AMD Custom GPU 0405,15 GB,6.5.0-valve22-1-neptune,Mesa 24.1,\n--------------------FRAME METRICS--------------------\nfps,frametime,cpu_load,cpu_power,gpu_load,cpu_temp,gpu_temp,gpu_core_clock,gpu_mem_clock,gpu_vram_used,gpu_power,ram_used,swap_used,process_rss,cpu_mhz,elapsed\n");
    let mut el: u64 = 0;
    for i in 0..600 {
        let ft = if i % 100 == 99 { 40.0 } else { 16.7 };
        el += (ft * 1e6) as u64;
        log.push_str(&format!(
            "{:.1},{ft},41,9.5,88,71,64,1600,5500,3.1,12,9.8,0.2,2.1,2800,{el}\n",
            1000.0 / ft
        ));
    }
    let a = write(dir.path(), "eldenring_2024-05-01_20-11-02.csv", &log);
    let s = write(
        dir.path(),
        "eldenring_2024-05-01_20-11-02_summary.csv",
        "0.1% Min FPS,1% Min FPS,97% Percentile FPS,Average FPS,GPU Load,CPU Load,Average Frame Time,Average GPU Temp,Average CPU Temp,Average VRAM Used,Average RAM Used,Average Swap Used,Peak GPU Load,Peak CPU Load,Peak GPU Temp,Peak CPU Temp,Peak VRAM Used,Peak RAM Used,Peak Swap Used\n25.0,25.0,59.9,58.0,88.0,41.0,17.2,64,71,3.1,9.8,0.2,88,41,64,71,3.1,9.8,0.2",
    );
    let o = run(&["bench", "frametimes", &a, &s, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["frametimes"].as_array().unwrap().len(), 1);
    assert_eq!(v["frametimes"][0]["stats"]["frames"], 600);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("_summary.csv: a MangoHud summary, not a capture: passed over"),
        "{e}"
    );
    let err = fails(&["bench", "frametimes", &s]);
    assert!(err.contains("a MangoHud summary, not a capture"), "{err}");
    // a FrameView summary by its name; a capture named so is still read
    let fv = write(
        dir.path(),
        "FrameView-witcher3.exe_Summary.csv",
        "Application,GPU,Resolution,Runtime,Avg FPS,90%ile,95%ile,99%ile\nwitcher3.exe,RTX 3080,2560x1440,DXGI,98.1,90.2,88.0,80.4\n",
    );
    assert!(fails(&["bench", "frametimes", &fv]).contains("a summary file"));
    let named = write(
        dir.path(),
        "run1_summary.csv",
        "MsBetweenPresents\n16.6\n16.7\n",
    );
    assert!(text_of(&["bench", "frametimes", &named]).contains("2 frames"));
}
