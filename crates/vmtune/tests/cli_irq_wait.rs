//! `vmtune irq wait` end to end on this host: with no VM to measure it says so (no zeros); with
//! a real KVM VM held by this test process (vCPUs that never run: these machines cannot enter
//! a guest) the MSIs sent during the window come back as interrupts still waiting for their
//! vCPUs, the recording replays to the same figures, and a recorded sequence with guest
//! entries (tests/data/irqwait-contended.jsonl) reads as the advice a user needs.

use std::io::BufReader;
use std::process::Stdio;

mod common;
use common::{run, vmtune};

/// Run `irq wait` args; `None` (and a named skip) where the program cannot load here.
fn wait_or_skip(args: &[&str]) -> Option<serde_json::Value> {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("irq wait:") {
        testkit::skip(&testkit::current_test(), err.trim());
        return None;
    }
    assert!(out.status.success(), "{args:?}: {err}");
    Some(serde_json::from_slice(&out.stdout).expect("JSON"))
}

#[test]
fn a_process_that_is_no_vm_is_said_not_measured() {
    let Some(v) = wait_or_skip(&["irq", "wait", "--pid", "1", "--duration", "0.2", "--json"])
    else {
        return;
    };
    assert_eq!(v["status"], "no-vm");
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("process 1 is not a KVM VM"));
    assert!(v.get("vms").is_none(), "no figures without a VM: {v}");
}

#[test]
fn interrupts_sent_to_a_real_vm_are_reported_per_vcpu_and_replay_the_same() {
    let vm = match testkit::kvm::Vm::new(2) {
        Ok(v) => v,
        Err(e) => {
            testkit::skip(&testkit::current_test(), format!("no KVM VM here: {e}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("waits.jsonl");
    let me = std::process::id().to_string();
    let mut child = vmtune()
        .args(["irq", "wait", "--duration", "3", "--json", "--pid", &me])
        .arg("--record")
        .arg(&rec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the window opens when it says what it measures
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let line = common::line_with(&mut err, "measuring", 20);
    if !line.contains("measuring") {
        let out = child.wait_with_output().unwrap();
        testkit::skip(
            &testkit::current_test(),
            format!(
                "irq wait did not start: {line} {}",
                String::from_utf8_lossy(&out.stdout)
            ),
        );
        return;
    }
    assert!(line.contains(&format!("pid {me}")), "{line}");
    for _ in 0..30 {
        vm.msi(0, 0x41).unwrap();
    }
    for _ in 0..12 {
        vm.msi(1, 0x42).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vms = v["vms"].as_array().unwrap();
    assert_eq!(vms.len(), 1, "{v}");
    assert_eq!(vms[0]["pid"].to_string(), me);
    assert_eq!(vms[0]["running"], true);
    assert!(vms[0]["name"].is_string());
    let still = |v: &serde_json::Value| -> Vec<u64> {
        v["vms"][0]["vcpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["still_waiting"]["count"].as_u64().unwrap_or(0))
            .collect()
    };
    assert_eq!(still(&v), vec![30, 12]);
    assert!(v["window_s"].as_f64().unwrap() >= 2.9);
    assert_eq!(v["lost"], 0);
    assert!(v["partial"].is_null());
    // the recording gives the same accounting
    let r = wait_or_skip(&["irq", "wait", "--json", "--replay", rec.to_str().unwrap()]).unwrap();
    assert_eq!(still(&r), vec![30, 12]);
    assert_eq!(r["accepts"], v["accepts"]);
}

#[test]
fn a_contended_recording_reads_as_preempted_waits_with_advice() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/irqwait-contended.jsonl"
    );
    let out = run(&["irq", "wait", "--replay", path]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("preempted (runnable, no CPU)"), "{text}");
    assert!(text.contains("give the vCPUs CPUs of their own"), "{text}");
    assert!(
        text.contains("Not seen: interrupts the IOMMU posts"),
        "{text}"
    );
    let prom = run(&["irq", "wait", "--replay", path, "--prometheus"]);
    let prom = String::from_utf8(prom.stdout).unwrap();
    assert!(
        prom.lines()
            .any(|l| l.starts_with("vmtune_irq_wait_seconds{")
                && l.contains("state=\"preempted\"")
                && l.contains("quantile=\"0.99\"")),
        "{prom}"
    );
    let Some(promtool) = testkit::which("promtool") else {
        testkit::skip(
            &testkit::current_test(),
            "promtool is not installed (Debian: prometheus)",
        );
        return;
    };
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), prom.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_broken_recording_is_one_line_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.jsonl");
    std::fs::write(
        &p,
        "{\"kind\":\"entry\",\"ts_ns\":1,\"vm\":2,\"vcpu\":0}\nnot json\n",
    )
    .unwrap();
    let out = run(&["irq", "wait", "--replay", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("line 2"), "{err}");
}
