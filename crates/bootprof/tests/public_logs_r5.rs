//! Log shapes of issue 37 (boot-log items 10–13), each fixture `fixtures/r5-*` written here
//! in the shape of Kata's own log calls and of public threads (sources in
//! `fixtures/README.md` and docs/sources.md), with ids, hosts and times of our own: Kata
//! 1.x runtime lines naming only `container=`, QEMU dying during the QMP handshake, a CI
//! runner's clock before the journal, a Cloud Hypervisor shim's agent-client lines.

mod support;

use bootprof::Report;
use support::{all, analyze, phases, text};

/// A failed boot at `step` whose summary holds `summary`, its first finding's fix `fix`,
/// and `--all` counting one failed boot at that step.
fn assert_failed(
    name: &str,
    sandbox: Option<&str>,
    step: &str,
    summary: &str,
    fix: &str,
) -> Report {
    let r = analyze(name, sandbox);
    let t = text(&r);
    assert_eq!(r.state.status, "failed", "{t}");
    let f = r.state.failure.as_ref().unwrap();
    assert_eq!(f.step, step, "{t}");
    assert!(f.summary.contains(summary), "{}", f.summary);
    assert!(!t.contains("The log ends before the boot did"), "{t}");
    assert_eq!(r.findings[0].phase, step, "{t}");
    assert!(r.findings[0].fix.contains(fix), "{}", r.findings[0].fix);
    let fl = all(name);
    assert_eq!(fl.rows.len(), 1, "{}", bootprof::render::fleet::text(&fl));
    assert_eq!(
        (fl.rows[0].state, fl.rows[0].failure_step),
        ("failed", Some(step))
    );
    r
}

/// Item 10, Kata 1.x on a host without KVM: `kata-runtime create`'s first lines (`loaded
/// configuration`, …) and its QEMU launcher's `Unable to launch …: exit status 1` with
/// QEMU's `Could not access KVM kernel module` name only `container=` (the sandbox's own
/// id; the same pid's other lines name `sandbox=`): they join the boot, whose t0 is the
/// first of them, and fail vm_create with QEMU's words and the KVM fix (was: unfinished
/// from the first `sandbox=` line, the errors unread).
#[test]
fn kata1_runtime_lines_naming_the_container_fail_vm_create_without_kvm() {
    let name = "r5-kata1-kvm-missing.journal";
    for sandbox in [None, Some("7e3a90c1")] {
        let r = assert_failed(
            name,
            sandbox,
            "vm_create",
            "QEMU's last error: Could not access KVM kernel module",
            "modprobe kvm_intel",
        );
        assert!(
            r.t0.as_deref()
                .is_some_and(|t| t.starts_with("2019-03-14T08:12:03.118407")),
            "{:?}",
            r.t0
        );
        // the kubelet's line and containerd's CRI error naming no sandbox id
        assert_eq!(r.stats.unrecognized, 2, "{}", text(&r));
        assert_eq!(r.stats.events, 10);
    }
}

/// Item 10, Kata 1.x with a guest that never started its agent: `kata-runtime`'s fatal
/// `Failed to check if grpc server is working: … context deadline exceeded` names only
/// `container=`: failed at agent_connect, 30.7 s in, vm_create timed from the runtime's
/// first line (was: unfinished during kernel_boot, vm_create 0.639 s).
#[test]
fn kata1_grpc_deadline_naming_the_container_fails_agent_connect() {
    let r = assert_failed(
        "r5-kata1-grpc-deadline.journal",
        None,
        "agent_connect",
        "Failed to check if grpc server is working",
        "vhost_vsock",
    );
    assert_eq!(
        phases(&r),
        vec![("vm_create", 1.106), ("kernel_boot", 0.596)]
    );
    let f = r.state.failure.as_ref().unwrap();
    assert!((f.at_s.unwrap() - 30.709).abs() < 0.01, "{:?}", f.at_s);
    assert_eq!(r.stats.unrecognized, 1, "{}", text(&r));
}

/// Item 11, kata-containers' Go shim (3.x, +02:00, `kata[PID]` and `containerd[PID]`
/// copies): QEMU's stderr at level=error with `qemuPid=` (an assertion), `Failed to
/// negotiate QMP Capabilities` with `exiting QMP loop, command cancelled`, `Cannot start
/// VM`, then the stop path's warning that qmp.sock is gone: a failed vm_create naming
/// QEMU's own last error (was: failed at sandbox_start, by containerd's CRI error alone —
/// "the sandbox failed to start"; without that line, unfinished).
#[test]
fn qemu_dying_in_the_qmp_handshake_fails_vm_create_in_its_words() {
    let r = assert_failed(
        "r5-qmp-handshake-assert.journal",
        None,
        "vm_create",
        "QEMU's last error: qemu-system-x86_64: ../hw/pci/pcie.c:698: pcie_cap_slot_init: Assertion",
        "QMP handshake",
    );
    let f = r.state.failure.as_ref().unwrap();
    assert!(
        f.message
            .starts_with("Failed to negotiate QMP Capabilities"),
        "{}",
        f.message
    );
    assert!(
        r.findings[0].text.contains("Assertion"),
        "{}",
        r.findings[0].text
    );
    assert_eq!(r.stats.duplicates, 7);
    assert_eq!(r.sandbox.as_deref(), Some("qmp-assert-5"));
}

/// Item 12, a Jenkins job's console (timestamper's `HH:MM:SS ` in UTC) holding
/// `journalctl -t kata-runtime -t kata-proxy` (syslog prefix at +01:00): read by the lines'
/// own `time=`, the runner's clock (two seconds later) ignored (was: "no boot events
/// found").
#[test]
fn journal_lines_behind_a_ci_runners_clock_are_read_by_their_time() {
    let name = "r5-ci-clock-kata1.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "unfinished", "{t}");
    assert_eq!(
        phases(&r),
        vec![("vm_create", 0.788), ("kernel_boot", 0.605)]
    );
    assert!(
        r.t0.as_deref()
            .is_some_and(|t| t.starts_with("2019-12-02T09:41:50.114082")),
        "{:?}",
        r.t0
    );
    // the job's own lines (`+ sudo journalctl …`, `-- Logs begin …`)
    assert_eq!(r.stats.unrecognized, 2, "{t}");
    assert_eq!(r.stats.events, 8);
    assert_eq!(analyze(name, Some("ab12cd34")).phases.len(), 2);
}

/// Item 13, a Cloud Hypervisor shim (Kata 3.x, UTC): its agent client's hybrid vsock lines
/// (`name=agent-client pid=SHIM source=agent-client`, no `sandbox=`) under `kata[PID]` and
/// their `containerd[PID]` copies join the shim's boot, the copies dropped as copies
/// (was: 6 more lines unrecognised, no copies of them seen).
#[test]
fn a_clh_shims_agent_client_lines_join_its_boot() {
    let name = "r5-clh-agent-client.journal";
    for sandbox in [None, Some("clh-gpu")] {
        let r = analyze(name, sandbox);
        let t = text(&r);
        assert_eq!(r.state.status, "complete", "{t}");
        // containerd's `RunPodSandbox for &PodSandboxMetadata{…}` and the kubelet's line
        assert_eq!(r.stats.unrecognized, 2, "{t}");
        assert_eq!(r.stats.duplicates, 7, "{t}");
        assert_eq!(r.stats.events, 14, "{t}");
        assert_eq!(r.boot.as_ref().map(|b| b.lines), Some(14), "{t}");
        assert_eq!(
            phases(&r),
            vec![
                ("vm_create", 0.609),
                ("kernel_boot", 0.674),
                ("pci_enumeration", 0.0),
                ("container_start", 0.22)
            ]
        );
    }
}
