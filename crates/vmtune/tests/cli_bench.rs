//! `vmtune bench` end to end: the real binary on the real machine.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ok_json, run, vmtune};

const CS_DIR: &str = "/sys/devices/system/clocksource/clocksource0";

fn current_cs() -> String {
    std::fs::read_to_string(format!("{CS_DIR}/current_clocksource"))
        .unwrap()
        .trim()
        .to_string()
}

fn available_cs() -> Vec<String> {
    std::fs::read_to_string(format!("{CS_DIR}/available_clocksource"))
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Whether this test process may switch clocksources (root, writable sysfs, two of them).
fn can_switch() -> bool {
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("{CS_DIR}/current_clocksource"))
        .is_ok();
    writable && available_cs().len() > 1
}

#[test]
fn timer_measures_every_clocksource_and_restores() {
    // switching the clocksource changes the host: one such test at a time, in all binaries
    let _host = testkit::host_lock();
    let before = current_cs();
    let v = ok_json(&[
        "bench",
        "timer",
        "--repeats",
        "2",
        "--ms-per-repeat",
        "5",
        "--json",
    ]);
    assert_eq!(current_cs(), before, "clocksource changed by the run");
    let t = &v["timer"];
    assert_eq!(t["original_clocksource"], before.as_str());
    let probes = t["probes"].as_array().unwrap();
    let measured: Vec<&str> = probes
        .iter()
        .filter_map(|p| p["clocksource"].as_str())
        .collect();
    if can_switch() {
        assert_eq!(t["swept"], true);
        for cs in available_cs() {
            assert!(
                measured.contains(&cs.as_str()),
                "{cs} not measured: {measured:?}"
            );
        }
    } else {
        println!("not switching: current_clocksource not writable here");
        assert!(measured.contains(&before.as_str()));
    }
    for p in probes {
        if p["error"].is_null() {
            let ns = p["summary"]["median"].as_f64().unwrap();
            assert!(ns > 0.0 && ns < 1e6, "implausible read cost {ns} in {p}");
            assert_eq!(p["ns_per_call"].as_array().unwrap().len(), 2);
        }
    }
    if cfg!(target_arch = "x86_64") {
        assert!(probes.iter().any(|p| p["method"] == "rdtsc"));
    }
    // the metric names compare uses
    let names: Vec<&str> = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(
        names.contains(&format!("timer.{before}.vdso").as_str()),
        "{names:?}"
    );
}

#[test]
fn timer_restores_clocksource_on_sigint() {
    if !can_switch() {
        return testkit::skip(
            "timer_restores_clocksource_on_sigint",
            format!(
                "cannot switch clocksources here (needs root and two clocksources; available: {:?})",
                available_cs()
            ),
        );
    }
    let _host = testkit::host_lock();
    let before = current_cs();
    // long repeats so the run is still inside a switched clocksource when the signal comes
    let child = vmtune()
        .args([
            "bench",
            "timer",
            "--repeats",
            "5",
            "--ms-per-repeat",
            "2000",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut switched = false;
    while t0.elapsed() < Duration::from_secs(60) {
        if current_cs() != before {
            switched = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(switched, "the run never switched away from {before}");
    std::thread::sleep(Duration::from_millis(200));
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        current_cs(),
        before,
        "clocksource not restored after SIGINT"
    );
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    assert!(!Path::new("/run/vmtune/bench-clocksource.orig").exists());
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn frametimes_hand_values_and_errors() {
    let d = tempfile::tempdir().unwrap();
    // 10 frames: 8 × 10 ms, 20, 40 → avg 71.43 FPS; linear P99 = 38.2 ms → 1% low 26.18 FPS
    let mut csv = String::from(
        "Application,ProcessID,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange\n",
    );
    for ms in [10, 10, 40, 10, 10, 20, 10, 10, 10, 10] {
        csv.push_str(&format!("game.exe,1,0.0,{ms},{ms}\n"));
    }
    let f = write(d.path(), "pm.csv", &csv);
    let v = ok_json(&["bench", "frametimes", &f, "--json"]);
    let s = &v["frametimes"][0]["stats"];
    assert!((s["avg_fps"].as_f64().unwrap() - 10_000.0 / 140.0).abs() < 1e-9);
    assert!((s["lows"][0]["fps"].as_f64().unwrap() - 1000.0 / 38.2).abs() < 1e-9);
    assert!((s["lows"][0]["avg_slowest_fps"].as_f64().unwrap() - 25.0).abs() < 1e-9);
    assert_eq!(v["frametimes"][0]["format"], "presentmon-1");
    // nearest rank: P99 is the 10th frame, 40 ms → 25 FPS
    let v = ok_json(&[
        "bench",
        "frametimes",
        &f,
        "--percentile",
        "nearest-rank",
        "--json",
    ]);
    assert_eq!(
        v["frametimes"][0]["stats"]["lows"][0]["fps"]
            .as_f64()
            .unwrap(),
        25.0
    );
    // text output names the definition
    let o = run(&["bench", "frametimes", &f, "--lows", "1,5"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1% low") && text.contains("26.18") && text.contains("71.43"),
        "{text}"
    );
    // bad input: one line, exit 2, names the file and line
    let bad = write(d.path(), "bad.csv", "MsBetweenPresents\n16.6\nbanana\n");
    let o = run(&["bench", "frametimes", &bad]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.csv: line 3"), "{err}");
    let o = run(&["bench", "frametimes", "/nonexistent/x.csv"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn membw_pinned_vs_unpinned_compare_and_report() {
    let d = tempfile::tempdir().unwrap();
    let un = d.path().join("unpinned.json");
    let pin = d.path().join("pinned.json");
    let allowed = ok_json(&["bench", "latency", "--seconds", "0.05", "--json"])["environment"]
        ["allowed_cpus"]
        .as_str()
        .unwrap()
        .to_string();
    let v = ok_json(&[
        "bench",
        "membw",
        "--size",
        "4M",
        "--repeats",
        "4",
        "--threads",
        "2",
        "--config",
        "unpinned",
        "--save",
        un.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["membw"]["validated"], true);
    assert_eq!(v["membw"]["threads"], 2);
    assert!(v["membw"]["cpus"].is_null());
    let o = run(&[
        "bench",
        "membw",
        "--size",
        "4M",
        "--repeats",
        "4",
        "--cpus",
        &allowed,
        "--config",
        "pinned",
        "--save",
        pin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("triad") && text.contains(&format!("pinned to CPUs {allowed}")),
        "{text}"
    );

    let c = ok_json(&[
        "bench",
        "compare",
        un.to_str().unwrap(),
        pin.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(c["configs"], serde_json::json!(["unpinned", "pinned"]));
    let triad = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "membw.triad")
        .unwrap();
    assert_eq!(triad["runs"][0]["n"], 3);
    assert!(triad["changes"][1]["pct"].is_number());
    assert!(c["differences"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_str().unwrap().contains("membw.cpus")));

    let html = d.path().join("r.html");
    let o = run(&[
        "bench",
        "compare",
        un.to_str().unwrap(),
        pin.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("membw.triad") && text.contains("What differed"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg class=\"chart bars\"") && page.contains("STREAM"));

    let r = ok_json(&[
        "bench",
        "report",
        un.to_str().unwrap(),
        pin.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["runs"], 2);
    // compare needs result files
    let junk = write(d.path(), "junk.json", "{\"a\": 1}");
    let o = run(&["bench", "compare", &junk, un.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a vmtune bench result"));
}

#[test]
fn latency_short_run() {
    let v = ok_json(&[
        "bench",
        "latency",
        "--seconds",
        "0.3",
        "--interval-us",
        "500",
        "--windows",
        "3",
        "--json",
    ]);
    let l = &v["latency"];
    assert_eq!(l["interval_us"], 500);
    for c in l["cpus"].as_array().unwrap() {
        let n = c["samples"].as_u64().unwrap();
        // each of the 600 deadlines is a wakeup or an overrun
        assert!((1..=600).contains(&n), "{n}");
        assert!(n + c["overruns"].as_u64().unwrap() >= 600, "{c}");
        assert!(c["min_us"].as_f64().unwrap() <= c["p99_us"].as_f64().unwrap());
        assert!(c["p99_us"].as_f64().unwrap() <= c["max_us"].as_f64().unwrap());
        let hist: u64 = c["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(hist + c["overflow"].as_u64().unwrap(), n);
    }
    let o = run(&["bench", "latency", "--cpus", "9999"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn suite_saves_host_and_plan() {
    let d = tempfile::tempdir().unwrap();
    let plan = write(
        d.path(),
        "plan.json",
        r#"{"vcpus": [{"vcpu": 0, "cpu": 1}], "rationale": ["test"]}"#,
    );
    let v = ok_json(&[
        "bench",
        "suite",
        "--config",
        "pinned+numa",
        "--plan",
        &plan,
        "--out",
        d.path().to_str().unwrap(),
        "--skip",
        "timer",
        "--size",
        "2M",
        "--latency-seconds",
        "0.2",
        "--json",
    ]);
    let saved = d.path().join("pinned+numa.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(doc, v);
    assert_eq!(doc["config"], "pinned+numa");
    assert_eq!(doc["plan"]["vcpus"][0]["cpu"], 1);
    assert!(doc["host"].is_object() || doc["host_error"].is_string());
    assert!(doc["timer"].is_null() && doc["membw"].is_object() && doc["latency"].is_object());
    let o = run(&["bench", "suite", "--config", "../x"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_teaches() {
    for sub in [
        "timer",
        "membw",
        "latency",
        "frametimes",
        "compare",
        "suite",
        "report",
    ] {
        let o = run(&["bench", sub, "--help"]);
        assert!(o.status.success(), "{sub}");
        let h = String::from_utf8_lossy(&o.stdout);
        assert!(h.contains("Usage: vmtune bench"), "{h}");
        assert!(h.contains("--json"), "{sub}: {h}");
    }
}

/// `suite --guest` boots a real QEMU guest (TCG) and brings its result back. Needs QEMU,
/// busybox (the guest's userland) and a guest kernel: `VMTUNE_GUEST_KERNEL` (which `.ci/run`
/// sets to Debian's cloud kernel it unpacks) or a `/boot/vmlinuz-*`.
#[test]
fn suite_in_a_qemu_guest() {
    let test = "suite_in_a_qemu_guest";
    if testkit::which("qemu-system-x86_64").is_none() {
        return testkit::skip(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
    }
    if !["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .any(|p| Path::new(p).exists())
    {
        return testkit::skip(test, "busybox is not installed (Debian: busybox-static)");
    }
    let kernel = match testkit::guest_kernel() {
        Ok(k) => k.display().to_string(),
        Err(why) => return testkit::skip(test, why),
    };
    let d = tempfile::tempdir().unwrap();
    let v = ok_json(&[
        "bench",
        "suite",
        "--config",
        "guest-2cpu",
        "--guest",
        "--kernel",
        &kernel,
        "--accel",
        "tcg",
        "--guest-cpus",
        "2",
        "--guest-memory",
        "768M",
        "--skip",
        "membw,latency",
        "--out",
        d.path().to_str().unwrap(),
        "--guest-timeout",
        "500",
        "--json",
    ]);
    assert_eq!(v["config"], "guest-2cpu");
    assert_eq!(v["environment"]["in_guest"], true);
    assert_eq!(v["environment"]["cpus"], "0-1");
    assert_eq!(v["runner"]["kind"], "qemu-guest");
    // the emulated timers of the Windows 7 timer note are there, and were measured
    let probes = v["timer"]["probes"].as_array().unwrap();
    assert!(
        probes
            .iter()
            .any(|p| p["clocksource"] == "acpi_pm" && p["error"].is_null()),
        "{probes:?}"
    );
    assert!(d.path().join("guest-2cpu.json").exists());
}

/// `bench boost` runs its three threads and reports both sides, every trigger counted and the
/// off-CPU subsets inside them (timings are the README's, not asserted here).
#[test]
fn boost_reports_both_sides() {
    testkit::skip_unless!(
        testkit::is_root(),
        "needs root: the agent raises a thread to SCHED_FIFO"
    );
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    testkit::skip_unless!(cpus >= 2, "needs two CPUs");
    let v = common::ok_json(&[
        "bench",
        "boost",
        "--samples",
        "40",
        "--gap-ms",
        "1",
        "--json",
    ]);
    for side in ["boosted", "unboosted"] {
        assert_eq!(v[side]["samples"], 40, "{v}");
        let waiting = v[format!("{side}_waiting")]["samples"].as_u64().unwrap();
        assert!(waiting <= 40, "{v}");
        assert!(v[side]["p50_us"].as_f64().unwrap() <= v[side]["p99_us"].as_f64().unwrap());
    }
    let e = common::run(&["bench", "boost", "--busy-cpu", "0", "--agent-cpu", "0"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("must differ"));
}
