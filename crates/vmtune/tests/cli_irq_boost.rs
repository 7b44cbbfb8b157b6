//! `vmtune irq boost` on this host, with a real KVM VM held by the test process: a thread
//! named `CPU 0/KVM` sits in KVM_RUN (the vCPU halted: these machines never enter a guest),
//! its scheduling made unusual first (nice 3, a 500 µs EEVDF slice) so that a restore that
//! only resets defaults would show. An MSI sent to the vCPU is accepted for it; the agent
//! (`--on any`: the program cannot see this vCPU's state, it never entered the guest) makes the
//! thread SCHED_FIFO, and lowers it back to exactly what it was when the budget ends. Then a
//! SIGKILL before any boost and another while it is raised, each followed by `vmtune restore
//! --journal`: the thread as before.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::vmtune;

/// policy, prio and se.slice of a thread of this process.
fn sched_of(tid: u32) -> String {
    common::sched_of(std::process::id(), tid)
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Start the agent; `None` (a named skip) where its program cannot load here.
fn agent(journal: &std::path::Path, budget_us: u32) -> Option<Child> {
    let me = std::process::id().to_string();
    let mut child = vmtune()
        .args(["irq", "boost", "--on", "any", "--pid", &me, "--json"])
        .args(["--budget-us", &budget_us.to_string(), "--duration", "60"])
        // the whole CPU may go to boosts here: the test watches one long boost
        .args(["--max-share", "1", "--window-ms", "2000"])
        .arg("--journal")
        .arg(journal)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let line = common::line_with(&mut err, "boosting", 20);
    if !line.contains("boosting") {
        let _ = child.kill();
        let _ = child.wait();
        if line.contains("irq boost:") {
            testkit::skip(&testkit::current_test(), line.trim());
            return None;
        }
        panic!("the agent did not start: {line}");
    }
    assert!(line.contains("1 thread(s) journaled"), "{line}");
    // keep draining stderr so the agent never blocks on it
    std::thread::spawn(move || for _ in err.lines() {});
    Some(child)
}

#[test]
fn raises_the_waiting_vcpu_thread_and_puts_it_back_exactly_even_after_sigkill() {
    let test = testkit::current_test();
    if !testkit::is_root() {
        testkit::skip(&test, "needs root: it changes a thread's scheduling policy");
        return;
    }
    let vm = match testkit::kvm::Vm::new(1) {
        Ok(v) => v,
        Err(e) => {
            testkit::skip(&test, format!("no KVM VM here: {e}"));
            return;
        }
    };
    let tid = vm.run_vcpu(0).unwrap();
    // an unusual starting point: nice 3 and a custom slice
    let unusual = apply::sched::SchedState {
        policy: apply::sched::Policy::Other,
        nice: 3,
        priority: 0,
        slice_ns: 500_000,
        custom_slice: true,
    };
    let slices = apply::sched::base_slice_ns().is_some();
    let start = if slices {
        unusual
    } else {
        apply::sched::SchedState {
            slice_ns: 0,
            custom_slice: false,
            ..unusual
        }
    };
    apply::sched::set(tid as i32, &start).unwrap();
    let before = sched_of(tid);
    assert!(before.starts_with("policy=0 prio=123"), "{before}");
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("boost.journal");

    // a boost that ends at its budget
    let Some(child) = agent(&journal, 300_000) else {
        return;
    };
    vm.msi(0, 0x41).unwrap();
    wait_for("the thread raised to SCHED_FIFO", 5, || {
        sched_of(tid).starts_with("policy=1 ")
    });
    wait_for("the budget to end the boost", 5, || sched_of(tid) == before);
    // SIGTERM: a clean stop restores and archives the journal
    // SAFETY: kill(2) on the agent's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["stats"]["raised"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["stats"]["lowered_budget"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["restored"], true);
    assert!(v["reaction_us"]["p50"].as_f64().is_some(), "{v}");
    assert!(!journal.exists());
    assert_eq!(sched_of(tid), before);

    // SIGKILL before any boost (every thread journaled, none raised), then restore
    std::fs::remove_file(journal.with_extension("journal.restored")).ok();
    let Some(mut child) = agent(&journal, 1_000_000) else {
        return;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    common::restore(&journal);
    assert_eq!(
        sched_of(tid),
        before,
        "restore after a kill before any boost"
    );
    std::fs::remove_file(journal.with_extension("journal.restored")).ok();

    // SIGKILL while raised (a long budget), then restore
    let Some(mut child) = agent(&journal, 1_000_000) else {
        return;
    };
    vm.msi(0, 0x41).unwrap();
    wait_for("the thread raised to SCHED_FIFO", 5, || {
        sched_of(tid).starts_with("policy=1 ")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        sched_of(tid).starts_with("policy=1 "),
        "still raised after the kill"
    );
    let r = common::restore(&journal);
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["steps"][0]["actuator"], "thread_sched", "{r}");
    assert_eq!(sched_of(tid), before, "restore put the thread back exactly");
    assert_eq!(
        apply::sched::get(tid as i32, apply::sched::base_slice_ns()).unwrap(),
        start
    );
}
