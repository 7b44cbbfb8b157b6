//! The fourth collection of public Kata / containerd log shapes (issue 26): each fixture
//! `fixtures/r4-*` is written here in the shape of a public issue thread not used before
//! (sources in `fixtures/README.md` and docs/sources.md), and judged below: the outcome,
//! the phases and their durations, the sandbox chosen, the boots `--all` counts, the
//! findings.

mod support;

use bootprof::Report;
use support::{all, analyze, phases, text};

/// A failed boot: its step, a piece of its summary, the first finding on it (with a fix
/// containing `fix`), and `--all` counting one failed boot at that step.
fn assert_failed(name: &str, step: &str, summary: &str, fix: &str) -> Report {
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "failed", "{t}");
    let f = r.state.failure.as_ref().unwrap();
    assert_eq!(f.step, step, "{t}");
    assert!(f.summary.contains(summary), "{}", f.summary);
    assert!(t.contains(&format!("State: FAILED at {step}")), "{t}");
    assert!(!t.contains("The log ends before the boot did"), "{t}");
    let first = &r.findings[0];
    assert_eq!(first.phase, step, "{t}");
    assert!(first.fix.contains(fix), "{}", first.fix);
    let fl = all(name);
    assert_eq!(fl.rows.len(), 1, "{}", bootprof::render::fleet::text(&fl));
    assert_eq!(
        (fl.rows[0].state, fl.rows[0].failure_step),
        ("failed", Some(step))
    );
    assert_eq!(fl.states.get("failed"), Some(&1));
    r
}

/// kata-containers#10341 (Kata 3.6, −07:00): QEMU's `unable to map backing store for guest
/// RAM: Cannot allocate memory`, relayed by the shim at level=error under `kata[PID]` and
/// `containerd[PID]`, then containerd's `shim disconnected`: a boot that failed starting
/// its VM (was: STOPPED by the `shim disconnected` after it, the error unread).
#[test]
fn hugepage_pool_too_small_fails_at_vm_create() {
    let r = assert_failed(
        "r4-hugepages-backing-store.journal",
        "vm_create",
        "unable to map backing store for guest RAM: Cannot allocate memory",
        "vm.nr_hugepages",
    );
    assert_eq!(r.sandbox.as_deref(), Some("hp-test2"));
    assert_eq!(r.stats.duplicates, 4);
    // no guest line: no phase could be timed, and none is made up
    assert!(r.phases.is_empty(), "{}", text(&r));
    assert!(r.total_s.is_none());
}

/// kata-containers/runtime#1210's error chain (`qemu-lite-system-x86_64: -object
/// memory-backend-file,…,mem-path=/dev/hugepages,…: unable to map backing store for guest
/// RAM`) in containerd's `RunPodSandbox … failed` (was: failed at sandbox_start, "the
/// sandbox failed to start").
#[test]
fn a_cri_error_with_qemus_memory_reason_fails_at_vm_create() {
    let r = assert_failed(
        "r4-cri-hugepages-backing-store.journal",
        "vm_create",
        "unable to map backing store for guest RAM",
        "HugePages_Free",
    );
    assert!(r.sandbox.as_deref().unwrap().starts_with("9c2e4a6b"));
}

/// kata-containers#2818 (Firecracker, Kata 2.x, +01:00): `container create failed` with the
/// agent's `failed to mount … (os error 2)`: failed at create_container, the VM's phases
/// measured before it (was: unfinished, "the log ends during kernel_boot").
#[test]
fn container_create_failed_is_a_failed_create_container() {
    let r = assert_failed(
        "r4-fc-container-create-failed.log",
        "create_container",
        "failed to mount",
        "the VM itself booted",
    );
    assert_eq!(r.sandbox.as_deref(), Some("web-fc"));
    assert_eq!(
        phases(&r),
        vec![("vm_create", 0.311), ("kernel_boot", 0.621)]
    );
    let f = r.state.failure.as_ref().unwrap();
    assert!((f.at_s.unwrap() - 1.546).abs() < 0.01, "{:?}", f.at_s);
    // not the timeout's advice
    assert!(!r.findings[0].fix.contains("create_container_timeout"));
}

/// kata-containers#4880 (no journal prefix, +08:00): the agent died 12 h after the
/// container started: `Wait for process failed` with `error="ttrpc: closed"` and a `pid=`
/// that is an exec id, `sandbox stopped unexpectedly`. One boot, complete, the death a
/// stop note (was: a second boot of the sandbox made of the two `Wait` lines, and no stop).
#[test]
fn an_agent_that_died_after_start_is_a_complete_boot_then_a_stop() {
    let name = "r4-agent-dead-ttrpc.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    assert_eq!(
        phases(&r),
        vec![
            ("vm_create", 0.411),
            ("kernel_boot", 0.702),
            ("container_start", 0.292)
        ]
    );
    assert!((r.total_s.unwrap() - 2.189).abs() < 0.01, "{t}");
    let note = r.state.stopped.as_deref().unwrap_or_else(|| panic!("{t}"));
    assert!(note.contains("sandbox stopped unexpectedly"), "{note}");
    assert!(r.other_boots.is_empty(), "{t}");
    let fl = all(name);
    assert_eq!(fl.rows.len(), 1, "{}", bootprof::render::fleet::text(&fl));
    assert_eq!(fl.rows[0].state, "complete");
    // the shim-management line names no sandbox
    assert_eq!(r.stats.unrecognized, 1);
}

/// kata-containers#3621 (Cloud Hypervisor, Kata 2.3.2, UTC, `sandboxid=` and `path=`
/// keys): `Stopping sandbox in the VM`, then the agent's `context deadline exceeded` a
/// minute later: stopped before the container started, 30 s in; the teardown's warnings
/// are not the boot's.
#[test]
fn clh_sandbox_stopped_while_the_agent_hung_is_stopped() {
    let name = "r4-clh-agent-did-not-stop.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "stopped", "{t}");
    assert!(r.state.failure.is_none());
    let during = r.state.ends_during.as_deref().unwrap();
    assert!(
        during.contains("Stopping sandbox in the VM") && during.contains("30.0 s into the boot"),
        "{during}"
    );
    assert_eq!(
        phases(&r),
        vec![("vm_create", 0.273), ("kernel_boot", 0.598)]
    );
    assert_eq!(all(name).states.get("stopped"), Some(&1));
}

/// kata-containers#13313 (containerd 2.x, +08:00): `cleaning up dead shim id=…` stops the
/// sandbox (containerd v2.1.1 names it by `id=`); the shim's own logfmt lines nested in
/// `failed to clean up after shim disconnected`'s `error=` are not records (was:
/// unfinished, the dead shim unread).
#[test]
fn containerds_dead_shim_cleanup_stops_its_sandbox() {
    let name = "r4-dead-shim-nested.journal";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "stopped", "{t}");
    let during = r.state.ends_during.as_deref().unwrap();
    assert!(during.contains("cleaning up dead shim"), "{during}");
    assert_eq!(
        phases(&r),
        vec![("vm_create", 0.21), ("kernel_boot", 0.668)]
    );
    // the nested shim pid 9307 is no boot of its own
    assert_eq!(r.boot.as_ref().and_then(|b| b.shim_pid), Some(8841));
    let fl = all(name);
    assert_eq!(fl.rows.len(), 1, "{}", bootprof::render::fleet::text(&fl));
    assert_eq!(fl.rows[0].state, "stopped");
    // --sandbox by a prefix finds the stop too
    let r = analyze(name, Some("73c0a9e1"));
    assert_eq!(r.state.status, "stopped");
}

/// kata-containers#9340 (UTC, no prefix, `Could not add /dev/mshv` from source=cgroups,
/// `Agent did not stop sandbox` with `sandboxid=`): three sandboxes' boots interleaved
/// line by line: each read as its own boot.
#[test]
fn three_interleaved_sandboxes_are_three_boots() {
    let name = "r4-interleaved-sandboxes.log";
    let fl = all(name);
    let ft = bootprof::render::fleet::text(&fl);
    assert_eq!(fl.rows.len(), 3, "{ft}");
    assert_eq!(fl.states.get("complete"), Some(&2), "{ft}");
    assert_eq!(fl.states.get("unfinished"), Some(&1), "{ft}");
    // the default report: a boot with the most console records, the others listed
    let r = analyze(name, None);
    assert_eq!(r.other_sandboxes.len(), 2);
    for (id, status, want) in [
        (
            "2b9e41c7",
            "complete",
            vec![
                ("vm_create", 0.409),
                ("kernel_boot", 0.722),
                ("container_start", 0.295),
            ],
        ),
        (
            "8d3f5a7c",
            "complete",
            vec![
                // from the shim's first line, its cgroups warning
                ("vm_create", 0.517),
                ("kernel_boot", 0.674),
                ("container_start", 0.308),
            ],
        ),
        ("e5c7a9b1", "unfinished", vec![("vm_create", 0.494)]),
    ] {
        let r = analyze(name, Some(id));
        assert_eq!(r.state.status, status, "{id}: {}", text(&r));
        assert_eq!(phases(&r), want, "{id}");
    }
}

/// kata-containers#2185 (a GPU pod, console over a pty: `console-protocol=pty
/// console-url=/dev/pts/N`): complete; the console read failing at teardown
/// (`Failed to read guest console logs … file already closed`, level=error) fails nothing.
#[test]
fn a_console_read_error_after_start_is_no_failure() {
    let name = "r4-gpu-pty-console.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    assert!(r.state.failure.is_none());
    assert_eq!(
        phases(&r),
        vec![
            ("vm_create", 0.585),
            ("kernel_boot", 0.901),
            // the GPU's one enumeration line; its driver never logged
            ("pci_enumeration", 0.0),
            ("container_start", 0.281)
        ]
    );
    assert_eq!(r.gpu_count, Some(1), "{t}");
    assert!((r.total_s.unwrap() - 2.686).abs() < 0.01, "{t}");
    assert_eq!(all(name).states.get("complete"), Some(&1));
}

/// kata-containers/tests#3267 (Kata 1.x, `name=kata-proxy … source=agent`, +08:00, no
/// journal prefix): kernel lines ending in the proxy's `\n` and the agent's own logfmt
/// nested in `msg=`: the kernel lines time the guest kernel; the nested records and the
/// proxy's `Copy stream error` are read without a bad line; the log ends before the
/// container is started.
#[test]
fn kata1_proxy_lines_with_nested_agent_records() {
    let name = "r4-kata1-proxy-nested-agent.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.stats.bad.total(), 0, "{t}");
    assert_eq!(phases(&r), vec![("kernel_boot", 0.47)]);
    assert_eq!(r.state.status, "unfinished", "{t}");
    assert!(r.sandbox.as_deref().unwrap().starts_with("0b7e2d4f"));
    assert_eq!(all(name).rows.len(), 1);
}

/// kata-containers#11662 (arm64, +01:00, `Replacing OCI mount` and `Delete()`/`Create()`
/// debug lines of source=containerd-kata-shim-v2): the guest kernel timed from `Booting
/// Linux on physical CPU` (arm64's first line); the log ends before the agent is reached.
#[test]
fn arm64_boot_cut_off_before_the_agent_is_unfinished() {
    let name = "r4-arm64-crictl-delete.log";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "unfinished", "{t}");
    assert!(r.state.failure.is_none());
    assert_eq!(
        phases(&r),
        vec![("vm_create", 0.822), ("kernel_boot", 1.252)]
    );
    assert!(r.total_at_least, "{t}");
    assert_eq!(all(name).states.get("unfinished"), Some(&1));
}

/// kata-containers/runtime#1745 (Kata 1.x, `kata-collect-data` output, +02:00): the
/// runtime's `Unable to launch …/nemu-system-x86_64: exit status 1` and QEMU's hugepage
/// error name only `container=`, not `sandbox=`: they join the sandbox their pid names
/// (`load sandbox devices failed … sandbox=`), and the boot fails at vm_create in QEMU's
/// words (was: unfinished, until issue 37).
#[test]
fn kata1_runtime_lines_naming_only_the_container_fail_at_vm_create() {
    assert_failed(
        "r4-kata1-nemu-hugepages.log",
        "vm_create",
        "unable to map backing store for guest RAM",
        "vm.nr_hugepages",
    );
}

/// Every wording of a hypervisor that did not start, or of an agent never reached, names
/// its step; teardown errors do not.
#[test]
fn vm_start_and_agent_wordings_name_their_step() {
    use bootprof::analyze::facts::classify_error;
    for (text, step) in [
        ("qemu-system-x86_64: unable to map backing store for guest RAM: Cannot allocate memory", "vm_create"),
        ("failed to launch qemu: exit status 1, error messages from qemu log: qemu-system-x86_64: -object memory-backend-ram,id=dimm1,size=2048M: cannot set up guest memory 'dimm1': Cannot allocate memory", "vm_create"),
        ("Unable to launch /usr/bin/qemu-system-aarch64: exit status 1", "vm_create"),
        ("Failed to connect to firecrackerinstance (timeout 10s): Get http://localhost/: dial unix /run/vc/sbs/x/firecracker.sock: connect: connection refused", "vm_create"),
        ("Failed to check if grpc server is working: context deadline exceeded", "agent_connect"),
        ("rpc error: code = DeadlineExceeded desc = timed out connecting to vsock 2773716215:1026", "agent_connect"),
        ("container create failed: rpc error: code = Internal desc = failed to mount", "create_container"),
        ("container create failed: QMP command failed: vfio 0000:1a:00.0: group 40 is not viable", "vfio_hotplug"),
    ] {
        assert_eq!(classify_error(text).0, step, "{text}");
    }
    for other in [
        "Failed to read guest console logs: read /dev/pts/1: file already closed",
        "Agent did not stop sandbox: context deadline exceeded",
        "Wait for process failed: ttrpc: closed",
    ] {
        assert_eq!(classify_error(other).0, "shim", "{other}");
    }
}
