//! `vmtune boot …` end to end on the Kata GPU boot study's fixtures.

mod common;
use common::fixture;
use common::{ok_json, run, vmtune};

/// `vmtune ARGS` must fail with exit 2 and one line on stderr that contains `want`.
fn fails_with(args: &[&str], want: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

#[test]
fn analyze_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("boot.html");
    let v = ok_json(&[
        "boot",
        "analyze",
        &fixture("run2-containerd.journal"),
        &fixture("run2-bpftrace.txt"),
        "--sandbox",
        "c9f7bf13",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 7);
    let phases = v["phases"].as_array().unwrap();
    let largest = phases
        .iter()
        .filter(|p| p["name"] != "vm_create")
        .max_by(|a, b| {
            a["duration_s"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["duration_s"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(largest["name"], "cdi_wait");
    let heavy: Vec<f64> = v["pins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["duration_s"].as_f64())
        .filter(|d| *d >= 1.0)
        .collect();
    assert_eq!(heavy.len(), 7);
    assert!(v["total_s"].as_f64().unwrap() > 100.0);
    assert!(v["stats"]["bad"]["time"].as_u64().unwrap() >= 1);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("cdi_wait") && !page.contains("<script"));
}

#[test]
fn analyze_text_table() {
    let out = vmtune()
        .args(["boot", "analyze", &fixture("run1-vmconsole.txt")])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("GPUs: 7"), "{s}");
    assert!(s.contains("Critical path:") && s.contains("cdi_wait"));
    assert!(s.contains("Findings:"));
}

/// A log that starts mid-boot (the study's journal from its 60th line: CDI try 11 first, no
/// guest kernel start): the single-boot report calls its total and CDI wait lower bounds,
/// as `--all` leaves them out (total null, cdi_wait `started_late`); the whole log's are
/// exact. Failed before the fix (total and CDI wait stated as fact).
#[test]
fn a_log_that_starts_late_gives_lower_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("run2-containerd.journal")).unwrap();
    let late = dir.path().join("late.journal");
    let tail: Vec<&str> = text.lines().skip(59).collect();
    std::fs::write(&late, tail.join("\n") + "\n").unwrap();
    let late = late.to_str().unwrap();

    let v = ok_json(&["boot", "analyze", late, "--json"]);
    assert_eq!(v["state"]["status"], "complete");
    assert!(!v["state"]["started_late"].as_array().unwrap().is_empty());
    assert_eq!(v["total_at_least"], true, "{}", v["total_s"]);
    let cdi: Vec<&serde_json::Value> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == "cdi_wait")
        .collect();
    assert_eq!(cdi.len(), 1);
    assert_eq!(cdi[0]["at_least"], true);
    // the GPUs' driver inits and the container start were seen whole (the memory hotplug
    // is a lower bound for another reason: no host trace)
    for p in v["phases"].as_array().unwrap() {
        if p["name"] == "container_start" || p["name"] == "gpu_driver_init" {
            assert_eq!(p["at_least"], false, "{p}");
        }
    }
    let out = run(&["boot", "analyze", late]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.lines().next().unwrap().contains("total at least 100.3 s"),
        "{s}"
    );
    assert!(s.contains("waited at least 65.2 s"), "{s}");
    assert!(s.contains("≥65.2 s"), "{s}");
    assert!(!s.contains("(to ~"), "{s}");

    // `--all` agrees: no total, and the CDI wait is left out as started late
    let o = run(&["boot", "analyze", "--all", late, "--json"]);
    assert!(o.status.success());
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    assert!(row["total_s"].is_null(), "{row}");
    assert_eq!(row["phases"]["cdi_wait"]["excluded"], "started_late");

    // the whole log with its pin trace: exact
    let v = ok_json(&[
        "boot",
        "analyze",
        &fixture("run2-containerd.journal"),
        &fixture("run2-bpftrace.txt"),
        "--json",
    ]);
    assert_eq!(v["total_at_least"], false);
    assert!(v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["at_least"] == false));
}

/// Missing data is said, never shown as 0 or the epoch: a RunPodSandbox cold-plug failure
/// (no phase, no GPU seen) has no total, no "0.0 s into the boot" and an unknown GPU count
/// (was: total 0.0, `gpu_count` 0 "from the guest's PCI enumeration"); an ftrace trace alone
/// has no origin (was: t0 1970-01-01 and "-0.0 s" of bpftrace calls it does not have); a
/// memory hotplug whose blocks the log lacks is "blocks unknown" (was: "0 blocks"). Failed
/// before the fix.
#[test]
fn missing_data_is_unknown_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    let cold = dir.path().join("cold.log");
    std::fs::write(
        &cold,
        r#"Feb 19 13:45:48 xi kubelet[9136]: I0219 13:45:48.100000    9136 kuberuntime_manager.go:1180] "Creating PodSandbox for pod" pod="default/cuda-vectoradd"
Feb 19 13:45:49 xi containerd[14192]: time="2026-02-19T13:45:49.346103748+01:00" level=error msg="RunPodSandbox for &PodSandboxMetadata{Name:cuda-vectoradd,Uid:01cb0e4f,Namespace:default,Attempt:0,} failed, error" error="rpc error: code = Unknown desc = failed to start sandbox \"269c0f81d5698d68828a456bd95fff5456d0ef3979adedf572670011214c0010\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=vfio1"
"#,
    )
    .unwrap();
    let cold = cold.to_str().unwrap();
    let v = ok_json(&["boot", "analyze", cold, "--json"]);
    assert_eq!(v["state"]["failure"]["step"], "cold_plug");
    assert!(v["total_s"].is_null(), "{}", v["total_s"]);
    assert!(v["gpu_count"].is_null(), "{}", v["gpu_count"]);
    assert!(v["gpu_count_from"].as_str().unwrap().starts_with("unknown"));
    assert!(v["state"]["failure"]["at_s"].is_null());
    let s = String::from_utf8_lossy(&run(&["boot", "analyze", cold]).stdout).into_owned();
    assert!(s.contains("total unknown"), "{s}");
    assert!(s.contains("GPUs: unknown"), "{s}");
    assert!(!s.contains("0.0 s"), "{s}");
    let o = run(&["boot", "analyze", "--all", cold, "--json"]);
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(row["type"], "boot");
    assert!(row["span_s"].is_null() && row["gpus"].is_null(), "{row}");

    // an ftrace trace alone
    let ft = fixture("ftrace-abstime.txt");
    let v = ok_json(&["boot", "analyze", &ft, "--json"]);
    assert!(v["t0"].is_null(), "{}", v["t0"]);
    assert!(v["total_s"].is_null());
    assert!(v["pin_summary"]["total_s"].is_null());
    assert_eq!(v["pin_summary"]["ftrace_calls"], 3);
    let s = String::from_utf8_lossy(&run(&["boot", "analyze", &ft]).stdout).into_owned();
    assert!(s.contains("t0 unknown"), "{s}");
    assert!(!s.contains("1970") && !s.contains("-0.0"), "{s}");
    assert!(s.contains("function_graph: 3 calls"), "{s}");

    // the study's boot with its memory blocks' uevents cut from the log
    let text = std::fs::read_to_string(fixture("run2-containerd.journal")).unwrap();
    let nomem = dir.path().join("nomem.journal");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("devices/system/memory/memory"))
        .collect();
    std::fs::write(&nomem, kept.join("\n") + "\n").unwrap();
    let nomem = nomem.to_str().unwrap();
    let pins = fixture("run2-bpftrace.txt");
    let v = ok_json(&["boot", "analyze", nomem, &pins, "--json"]);
    let mh: Vec<&serde_json::Value> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == "memory_hotplug")
        .collect();
    assert_eq!(mh.len(), 1);
    assert_eq!(mh[0]["label"], "blocks unknown");
    let s = String::from_utf8_lossy(&run(&["boot", "analyze", nomem, &pins]).stdout).into_owned();
    assert!(!s.contains("0 blocks"), "{s}");
}

#[test]
fn analyze_bad_input_exits_2() {
    let out = vmtune()
        .args(["boot", "analyze", "/nonexistent/boot.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/boot.log"));
    // a file with nothing usable: one-line error, exit 2
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("junk.txt");
    std::fs::write(&f, b"hello\n\xff\xfe\n").unwrap();
    let out = vmtune()
        .args(["boot", "analyze", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no boot events"));
}

/// The same journal given twice — the same path, a link to it or a copy — is read once,
/// with a note: the report is the one of the journal given once (was: 1504 memory blocks
/// of the study's 752, its lines counted twice). Failed before the fix.
#[test]
fn a_journal_given_twice_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let j = fixture("run2-containerd.journal");
    let pins = fixture("run2-bpftrace.txt");
    let copy = dir.path().join("copy.journal");
    std::fs::copy(&j, &copy).unwrap();
    let link = dir.path().join("link.journal");
    std::os::unix::fs::symlink(&j, &link).unwrap();
    let (copy, link) = (copy.to_str().unwrap(), link.to_str().unwrap());
    // what differs by design: the notes, and the input list
    let without_notes = |mut v: serde_json::Value| {
        v["clocks"]["notes"] = serde_json::Value::Null;
        v
    };
    let once = ok_json(&["boot", "analyze", &j, &pins, "--json"]);
    let label = |v: &serde_json::Value| {
        v["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "memory_hotplug")
            .map(|p| p["label"].clone())
    };
    assert_eq!(label(&once), Some("752 blocks".into()));
    for twice in [
        vec![j.as_str(), j.as_str(), pins.as_str()],
        vec![j.as_str(), pins.as_str(), j.as_str(), pins.as_str()],
        vec![j.as_str(), link, pins.as_str()],
        vec![j.as_str(), copy, pins.as_str()],
    ] {
        let mut args = vec!["boot", "analyze"];
        args.extend(&twice);
        args.push("--json");
        let v = ok_json(&args);
        let notes: Vec<&str> = v["clocks"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .filter(|n| n.ends_with("read once"))
            .collect();
        assert_eq!(notes.len(), twice.len() - 2, "{twice:?}: {notes:?}");
        assert_eq!(v["files"], once["files"], "{twice:?}");
        assert_eq!(without_notes(v), without_notes(once.clone()), "{twice:?}");
        // and every boot of --all
        let mut args = vec!["boot", "analyze", "--all"];
        args.extend(&twice);
        args.push("--json");
        let o = run(&args);
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(row["phases"]["memory_hotplug"]["s"], 16.605, "{twice:?}");
        let fleet: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(fleet["files"].as_array().unwrap().len(), 2, "{twice:?}");
    }
}

/// A rotated, gzip'd journal (`containerd.log.1.gz`) is read as its text, by path and on
/// stdin; a cut one is refused in one line naming it.
#[test]
fn analyze_reads_a_gzipped_journal() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let plain = fixture("run2-containerd.journal");
    let text = std::fs::read(&plain).unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&text).unwrap();
    let gz = e.finish().unwrap();
    let gz_path = dir.path().join("containerd.log.1.gz");
    std::fs::write(&gz_path, &gz).unwrap();
    let gz_path = gz_path.to_str().unwrap();
    // the report names its inputs (`FILE:LINE`); everything else must be the same
    let strip = |v: serde_json::Value, name: &str| v.to_string().replace(name, "INPUT");
    let want = strip(ok_json(&["boot", "analyze", &plain, "--json"]), &plain);
    assert_eq!(
        strip(ok_json(&["boot", "analyze", gz_path, "--json"]), gz_path),
        want
    );
    // on stdin (read once: no census of the other sandboxes), as the plain text on stdin
    let stdin = |f: &str| {
        let out = vmtune()
            .args(["boot", "analyze", "-", "--json"])
            .stdin(std::fs::File::open(f).unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(stdin(gz_path), stdin(&plain));
    let cut = dir.path().join("cut.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    fails_with(&["boot", "analyze", cut.to_str().unwrap()], "cut.gz");
}

/// `vmtune boot estimate --json` for the Kata GPU boot study's 7 GPUs and 110 GiB, plus `extra`.
fn seed_estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "boot", "estimate", "--memory", "110G", "--gpus", "7", "--json",
    ];
    args.extend_from_slice(extra);
    ok_json(&args)
}

#[test]
fn estimate_seed_configurations() {
    let a = seed_estimate(&[]);
    let b = seed_estimate(&["--page-size", "1G"]);
    let c = seed_estimate(&["--page-size", "1G", "--backend", "iommufd"]);
    for (v, meas) in [(&a, 183.0), (&b, 146.0), (&c, 114.0)] {
        let t = v["total_s"].as_f64().unwrap();
        assert!((t - meas).abs() / meas <= 0.15, "{t} vs {meas}");
    }
    // every constant has a source
    for k in a["constants"].as_array().unwrap() {
        assert!(!k["source"].as_str().unwrap().is_empty());
    }
    let old = ok_json(&[
        "boot", "estimate", "--memory", "110G", "--gpus", "8", "--kernel", "5.15.0", "--json",
    ]);
    assert!(old["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("create_container_timeout")));
    let out = vmtune()
        .args(["boot", "estimate", "--memory", "lots", "--gpus", "7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = vmtune()
        .args([
            "boot",
            "estimate",
            "--memory",
            "8G",
            "--gpus",
            "1",
            "--page-size",
            "3K",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--gpus 0`: no GPU phase is charged and the text says nothing of GPUs the VM does not
/// have (header, phases, page tables, warnings — even on a 5.15 kernel — and constants).
#[test]
fn estimate_without_gpus_has_no_gpu_phases() {
    let args = [
        "boot", "estimate", "--memory", "16G", "--gpus", "0", "--kernel", "5.15",
    ];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v = ok_json(&json_args);
    let names: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vm_create", "kernel_boot", "memory_hotplug"]);
    assert_eq!(v["page_table_bar_bytes"], 0);
    assert_eq!(v["warnings"], serde_json::json!([]));
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let (body, constants) = text.split_once("\nConstants:").unwrap();
    assert!(body.starts_with("Estimated boot: "), "{body}");
    for word in ["GPU", "BAR", "CDI", "pci_enumeration", "gpu_driver_init"] {
        assert!(!body.contains(word), "{word:?} in {body}");
    }
    for name in [
        "driver_load_s",
        "fbhub_per_gpu_s",
        "cdi_generation_s",
        "bar_new_s",
    ] {
        assert!(!constants.contains(name), "{name} listed: {constants}");
    }
    assert!(constants.contains("kernel_boot_s"), "{constants}");
}

/// Inputs the model cannot mean are refused, in one line, with exit 2.
#[test]
fn estimate_inputs_are_range_checked() {
    for (flag, value, want) in [
        ("--memory", "0", "--memory"),
        ("--prealloc-threads", "0", "--prealloc-threads"),
        ("--memory-block", "0", "--memory-block"),
        ("--bar-size", "0", "--bar-size"),
        ("--gpus", "65", "--gpus"),
        ("--kernel", "0.9", "--kernel"),
    ] {
        let mut args = vec!["boot", "estimate", "--memory", "110G", "--gpus", "7"];
        if flag == "--memory" || flag == "--gpus" {
            let i = args.iter().position(|a| *a == flag).unwrap();
            args[i + 1] = value;
        } else {
            args.extend([flag, value]);
        }
        fails_with(&args, want);
    }
}

#[test]
fn validate_and_sandbox_setup() {
    let v = ok_json(&["boot", "validate", "--json"]);
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3);
    for k in checks {
        assert!(
            k["held_out_error_pct"].as_f64().unwrap().abs() <= 15.0,
            "{k}"
        );
        assert!(k["error_pct"].as_f64().unwrap().abs() <= 15.0, "{k}");
    }
    assert!(v["max_held_out_error_pct"].as_f64().unwrap() >= v["max_error_pct"].as_f64().unwrap());
    // published points vary GPU count, BAR size and RAM size; each names its source
    let published = v["published"].as_array().unwrap();
    for varies in ["gpu count", "bar size", "ram size"] {
        assert!(published
            .iter()
            .any(|p| p["varies"] == varies && p["in_sample"] == false));
    }
    assert!(published
        .iter()
        .all(|p| !p["source"].as_str().unwrap().is_empty()));
    // --sandbox-setup moves vm_create (and the total) by exactly the difference
    let base = seed_estimate(&[]);
    let zero = seed_estimate(&["--sandbox-setup", "0"]);
    let setup = v["sandbox_setup_s"].as_f64().unwrap();
    let d = base["total_s"].as_f64().unwrap() - zero["total_s"].as_f64().unwrap();
    assert!((d - setup).abs() < 1e-9, "{d} vs {setup}");
    // page tables: RAM + BARs, about 2 GiB for the Kata GPU boot study's 4 KiB boot
    let pt = base["page_table_bytes"].as_u64().unwrap();
    assert_eq!(
        pt,
        base["page_table_ram_bytes"].as_u64().unwrap()
            + base["page_table_bar_bytes"].as_u64().unwrap()
    );
    for bad in ["-1", "nan", "99999"] {
        let out = vmtune()
            .args([
                "boot",
                "estimate",
                "--memory",
                "8G",
                "--gpus",
                "1",
                &format!("--sandbox-setup={bad}"),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("sandbox-setup"),
            "{bad}"
        );
    }
}

#[test]
fn trace_prints_scripts() {
    let v = ok_json(&["boot", "trace", "--json"]);
    let pin = v["pin-pages.bt"].as_str().unwrap();
    assert!(
        pin.contains("kprobe:vfio_pin_pages_remote")
            && pin.contains("kretprobe:vfio_pin_pages_remote")
    );
    let io = v["map-ioctls.bt"].as_str().unwrap();
    assert!(io.contains("0x3b71") && io.contains("0x3b85"));
    let out = vmtune()
        .args(["boot", "trace", "--script", "ftrace"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("function_graph"));
}

/// The README's example: `gen-journal`, then `analyze` without `--sandbox`, gives the whole
/// timeline of one boot; the other boots are named in a bounded line; an ambiguous or
/// unknown `--sandbox` says so.
#[test]
fn readme_example_gen_journal_then_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j.log");
    let j = j.to_str().unwrap();
    ok_json(&["boot", "gen-journal", "--size", "8M", j, "--json"]);
    let r = ok_json(&["boot", "analyze", j, "--json"]);
    assert_eq!(r["gpu_count"], 7);
    assert_eq!(r["state"]["status"], "complete");
    let phases: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "vm_create",
        "kernel_boot",
        "pci_enumeration",
        "gpu_driver_init",
        "cdi_wait",
        "memory_hotplug",
        "container_start",
    ] {
        assert!(phases.contains(&name), "no {name}: {phases:?}");
    }
    let out = vmtune().args(["boot", "analyze", j]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().all(|l| l.len() < 2000), "a line runs on");
    assert!(text.contains("Other sandboxes in the input") && text.contains("more"));
    assert!(!text.contains("-0.0"), "{text}");
    // `9` starts none of the ids or several; `zzz` none
    let ids: Vec<String> = r["other_sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let shared = (b'0'..=b'9')
        .chain(b'a'..=b'f')
        .map(|c| (c as char).to_string())
        .find(|p| ids.iter().filter(|s| s.starts_with(p.as_str())).count() >= 2)
        .unwrap();
    fails_with(&["boot", "analyze", j, "--sandbox", &shared], "ambiguous");
    fails_with(&["boot", "analyze", j, "--sandbox", "zzz"], "not found");
    fails_with(&["boot", "analyze", j, "--tz", "Mars/Olympus"], "--tz");
}

#[test]
fn gen_journal_then_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j.log");
    let v = ok_json(&[
        "boot",
        "gen-journal",
        "--size",
        "2M",
        j.to_str().unwrap(),
        "--json",
    ]);
    assert!(v["bytes"].as_u64().unwrap() >= 2 << 20);
    let r = ok_json(&[
        "boot",
        "analyze",
        j.to_str().unwrap(),
        "--sandbox",
        v["sandbox"].as_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["gpus"].as_array().unwrap().len(), 7);
    assert!(r["stats"]["other_sandbox"].as_u64().unwrap() > 0);
}

/// `gen-journal --size 0` would write no boot while naming a sandbox to analyze: it is
/// refused in one line (exit 2) and no file is left; the smallest size writes one whole
/// boot, and says so. Failed before the fix (exit 0, an empty file, "0 boots … reports the
/// first, sandbox …").
#[test]
fn gen_journal_size_0_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j.log");
    let p = j.to_str().unwrap();
    for size in ["0", "0B", "0M"] {
        fails_with(&["boot", "gen-journal", "--size", size, p], "--size 0");
        fails_with(
            &["boot", "gen-journal", "--size", size, p, "--json"],
            "--size 0",
        );
        assert!(!j.exists(), "--size {size} left {p}");
    }
    let v = ok_json(&["boot", "gen-journal", "--size", "1B", p, "--json"]);
    assert_eq!(v["boots"], 1);
    assert_eq!(
        v["bytes"].as_u64(),
        Some(std::fs::metadata(&j).unwrap().len())
    );
    let r = ok_json(&["boot", "analyze", p, "--json"]);
    assert_eq!(r["sandbox"], v["sandbox"]);
}

/// `boot bench`: every side timed once per round; medians, spreads, the ratio of each
/// round's runs and the load averages reported, on a small generated journal (the figures
/// in the README come from the 1 GB one).
#[test]
fn bench_reports_medians_spreads_and_paired_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("j.log");
    ok_json(&[
        "boot",
        "gen-journal",
        "--size",
        "3M",
        j.to_str().unwrap(),
        "--json",
    ]);
    let j = j.to_str().unwrap();
    let spread_ok = |v: &serde_json::Value| {
        let (b, m, w) = (
            v["best"].as_f64().unwrap(),
            v["median"].as_f64().unwrap(),
            v["worst"].as_f64().unwrap(),
        );
        b > 0.0 && b <= m && m <= w
    };
    let a = ok_json(&["boot", "bench", "--all", "--runs", "3", "--json", j]);
    assert_eq!(a["runs"], 3);
    assert!(a["boots"].as_u64().unwrap() >= 2, "{a}");
    for k in [
        "all",
        "one",
        "default",
        "all_vs_one_paired",
        "all_vs_one_cpu_paired",
    ] {
        assert!(spread_ok(&a[k]), "{k}: {a}");
    }
    assert_eq!(a["all_s"], a["all"]["best"]);
    // on Linux the load averages are read
    assert!(
        a["load_before"].as_array().is_some_and(|l| l.len() == 3),
        "{a}"
    );
    if which_jq() {
        let o = ok_json(&["boot", "bench", "--runs", "2", "--json", j]);
        for k in [
            "ours",
            "wc",
            "pipeline",
            "vs_wc_paired",
            "speedup_paired",
            "ours_cpu",
        ] {
            assert!(spread_ok(&o[k]), "{k}: {o}");
        }
        assert!(o["events"].as_u64().unwrap() > 800, "{o}");
        assert_eq!(o["pipeline_lines"], 855);
    }
    fails_with(
        &["boot", "bench", "--all", "/nonexistent/j.log"],
        "/nonexistent/j.log",
    );
}

fn which_jq() -> bool {
    std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts QEMU (TCG) three ways with a small preallocated guest; reserves 2 MiB hugepages
/// (as root) and gives them back. The pool is shared with every other process, so the test
/// checks vmtune's own read-back right after restoring it, not a before/after comparison.
#[test]
fn calibrate_restores_hugepages() {
    let test = "calibrate_restores_hugepages";
    if testkit::which("qemu-system-x86_64").is_none() {
        return testkit::skip(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
    }
    // it may reserve hugepages and mount hugetlbfs: one host-changing test at a time
    let _host = testkit::host_lock();
    let mounts = || {
        std::fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("hugetlbfs"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let mounts_before = mounts();
    let v = ok_json(&[
        "boot",
        "calibrate",
        "--memory",
        "128M",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(mounts(), mounts_before, "hugetlbfs mounts restored");
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let restored = notes.iter().find_map(|n| {
        // "nr_hugepages restored to 0: read back 0 (gave back the 72 pages calibration
        // added; the pool was 72)"
        let (a, b) = n
            .strip_prefix("nr_hugepages restored to ")?
            .split_once(": read back ")?;
        let (b, gave) = b.split_once(" (gave back the ")?;
        let (added, was) = gave.split_once(" pages calibration added; the pool was ")?;
        let (added, was): (u64, u64) =
            (added.parse().ok()?, was.trim_end_matches(')').parse().ok()?);
        assert_eq!(
            a.parse::<u64>().ok()?,
            was.saturating_sub(added),
            "lowered by what it added: {n}"
        );
        Some((a.to_string(), b.to_string()))
    });
    match restored {
        Some((to, back)) => assert_eq!(to, back, "nr_hugepages read back after restoring"),
        None => assert!(
            notes
                .iter()
                .any(|n| n.starts_with("nr_hugepages not changed")),
            "{notes:?}"
        ),
    }
    let runs = v["runs"].as_array().unwrap();
    let shm = runs.iter().find(|r| r["backend"] == "shm-4k").unwrap();
    assert!(shm["vm_pte_kb"].as_u64().unwrap() > 0);
    if let Some(huge) = runs.iter().find(|r| r["backend"] == "hugetlbfs-2m") {
        assert!(huge["hugetlb_kb"].as_u64().unwrap() >= 128 * 1024);
        assert!(shm["vm_pte_kb"].as_u64().unwrap() > huge["vm_pte_kb"].as_u64().unwrap());
    } else {
        // without root, or when the pool could not be had (fragmented memory, or another
        // process shrinking it under the run), the 2 MiB half is reported, not measured
        let why = notes
            .iter()
            .find(|n| n.starts_with("2 MiB"))
            .unwrap_or_else(|| panic!("the 2 MiB run neither ran nor said why: {notes:?}"));
        testkit::skip(test, format!("its 2 MiB half did not run: {why}"));
    }
}

/// A QEMU that dies at start-up (here: a memory backend whose alignment is not a power of
/// two, added by a wrapper) is named as such, with the last line it wrote, not as a reset
/// QMP connection. Nothing on the host is touched: the first run (no hugepages) fails.
#[test]
fn calibrate_names_a_qemu_that_exited() {
    let test = "calibrate_names_a_qemu_that_exited";
    let Some(qemu) = testkit::which("qemu-system-x86_64") else {
        return testkit::skip(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
    };
    let d = tempfile::tempdir().unwrap();
    let wrapper = d.path().join("qemu-bad-backend");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} \"$@\" -object memory-backend-file,id=bad,size=2M,mem-path=/dev/shm,align=3M\n",
            qemu.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    fails_with(
        &[
            "boot",
            "calibrate",
            "--qemu",
            wrapper.to_str().unwrap(),
            "--memory",
            "64M",
            "--runs",
            "1",
        ],
        "QEMU (baseline) exited with exit status: 1 before answering QMP: qemu-system-x86_64: alignment 0x300000 must be a power of two",
    );
}
