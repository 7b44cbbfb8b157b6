//! The Rust Kata shim (runtime-rs) in the host journal: `fixtures/rs-*`, written here in the
//! shapes runtime-rs logs in (its source: `hypervisor/src/qemu/inner.rs`, `qmp.rs`,
//! `virt_container/src/sandbox.rs`, `libs/logging`; the threads kata-containers#12235,
//! #13084, #13395, #11496, #11590), ids, hosts and times ours. Before, every one of them
//! gave "no boot events found": runtime-rs names its sandbox by no key.

mod support;

use bootprof::build;
use bootprof::parse::ingest::{Ingester, Options};
use bootprof::Report;
use support::{all, analyze, fixture, ingest, phases, text};

fn shim_pid(r: &Report) -> Option<u32> {
    r.boot.as_ref().and_then(|b| b.shim_pid)
}

/// Kata ≥ 3.20 through journald (`journalctl -o short-precise`): plain messages under
/// `kata[PID]`, the guest console as `vm console: "…"` (`{:?}`-escaped), the agent's
/// records forwarded as JSON, QMP's multi-line `{:#?}` reply with its indented lines. The
/// sandbox is named only inside `qemu cmd: Command { … }` (`-name sandbox-ID`, the console
/// socket's `/run/kata/ID/`): the shim's earlier lines are its too.
#[test]
fn a_gpu_boot_through_journald_is_read_whole() {
    let name = "rs-qemu-gpu.journal";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    assert_eq!(
        r.sandbox.as_deref(),
        Some("9f3c1d2e4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0")
    );
    assert_eq!(shim_pid(&r), Some(88213));
    // `Preparing QEMU VM` (10:14:02.188410) → the guest's first line (10:14:09.062771)
    assert_eq!(
        phases(&r),
        vec![
            ("vm_create", 6.874),
            ("kernel_boot", 1.302),
            ("pci_enumeration", 0.0),
            ("container_start", 1.712),
        ]
    );
    assert_eq!(r.gpus.len(), 1, "{t}");
    assert_eq!(r.gpus[0].bdf, "0000:02:00.0");
    assert_eq!(r.gpus[0].device_id.as_deref(), Some("2330"));
    // the containerd lines naming no sandbox and QMP's indented lines are not read; none
    // is a bad line, and every runtime-rs line is
    assert_eq!(r.stats.bad.total(), 0, "{t}");
    assert_eq!(r.stats.unrecognized, 8, "{t}");
    assert_eq!(r.stats.events, 26, "{t}");
}

/// kata-containers#13084 / #13395 (runtime-rs, QEMU, two GPUs, 256 GiB): QEMU never answers
/// QMP; runtime-rs retries (`QMP not ready yet: qmp handshake failed`, debug) until its fixed
/// deadline, logs `couldn't initialise QMP: timed out waiting for QMP ready: …` with the
/// chain in indented lines, and containerd's `RunPodSandbox … failed` carries the same
/// chain: a boot that failed creating its VM, with the fix for that deadline.
#[test]
fn a_qmp_timeout_fails_at_vm_create() {
    let name = "rs-qmp-timeout.journal";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "failed", "{t}");
    let f = r.state.failure.as_ref().unwrap();
    assert_eq!(f.step, "vm_create", "{t}");
    assert!(f.message.contains("timed out waiting for QMP ready"), "{t}");
    assert_eq!(shim_pid(&r), Some(2532213));
    let first = &r.findings[0];
    assert_eq!(first.phase, "vm_create", "{t}");
    assert!(first.fix.contains("a fixed deadline"), "{}", first.fix);
    assert!(first.fix.contains("kata-containers#13343"), "{}", first.fix);
    // the retries are not errors: the only error lines are the shim's and containerd's
    let fl = all(name);
    assert_eq!(fl.rows.len(), 1);
    assert_eq!(
        (fl.rows[0].state, fl.rows[0].failure_step),
        ("failed", Some("vm_create"))
    );
    assert_eq!(r.stats.bad.total(), 0, "{t}");
}

/// Two shims starting at once (`-o short-iso`): each names its sandbox only when its QEMU
/// command is logged, shim 41288 after shim 41207's lines are already interleaved with its
/// own. Each pid's lines go to its sandbox — those before the naming too — so `--all` reads
/// two boots and `--sandbox` either one alone, every line counted once.
#[test]
fn interleaved_shims_are_told_apart_by_pid() {
    let name = "rs-two-shims.journal";
    let a = "6a1f0e2d3c4b5a69788796a5b4c3d2e1f0e1d2c3b4a5968778695a4b3c2d1e0f";
    let b = "b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c";
    let fl = all(name);
    let ft = bootprof::render::fleet::text(&fl);
    assert_eq!(fl.rows.len(), 2, "{ft}");
    assert_eq!(fl.states.get("complete"), Some(&1), "{ft}");
    assert_eq!(fl.states.get("unfinished"), Some(&1), "{ft}");
    for (id, pid, status, events, want) in [
        (
            a,
            41207,
            "complete",
            12,
            vec![
                ("vm_create", 3.893),
                ("kernel_boot", 1.197),
                ("pci_enumeration", 0.0),
                ("container_start", 1.554),
            ],
        ),
        // `Preparing QEMU VM` at 10.402765, before 41288 named its sandbox, is its start
        (b, 41288, "unfinished", 8, vec![("vm_create", 8.698)]),
    ] {
        let r = analyze(name, Some(&id[..12]));
        let t = text(&r);
        assert_eq!(r.sandbox.as_deref(), Some(id), "{t}");
        assert_eq!(shim_pid(&r), Some(pid), "{t}");
        assert_eq!(r.state.status, status, "{t}");
        assert_eq!(phases(&r)[..want.len()], want[..], "{t}");
        assert_eq!(r.stats.events, events, "{t}");
        assert_eq!(r.stats.other_sandbox, 20 - events, "{t}");
    }
}

/// `journalctl -o json`: runtime-rs's journald fields name what the message does not — the
/// sandbox (`SOURCE`, its logger's source) and the level (`PRIORITY`). No message names the
/// sandbox here; the boot is read from the fields, and its stop after the container started
/// (`begin stop sandbox`) is said and not counted.
#[test]
fn a_json_export_is_read_by_its_fields() {
    let name = "rs-export.json";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    assert_eq!(
        r.sandbox.as_deref(),
        Some("e4d3c2b1a0f9e8d7c6b5a49382716051f4e3d2c1b0a99887766554433221100f")
    );
    assert_eq!(shim_pid(&r), Some(730144));
    assert!(
        r.state
            .stopped
            .as_deref()
            .is_some_and(|s| s.contains("begin stop sandbox")),
        "{t}"
    );
    assert_eq!(
        phases(&r),
        vec![
            ("vm_create", 4.451),
            ("kernel_boot", 1.244),
            ("pci_enumeration", 0.0),
            ("container_start", 1.509),
        ]
    );
    // another sandbox's shim in the same export is someone else's
    let other = ingest(name, Some("0123456789ab"));
    assert_eq!(other.stats.events, 0);
    assert_eq!(other.stats.other_sandbox, 15);
}

/// Kata 3.0–3.19: runtime-rs wrote slog's JSON into containerd's log pipe, so its records
/// are `containerd[PID]: {"msg":…,"ts":…,"pid":SHIM,"name":"kata-runtime","source":SANDBOX}`
/// (keys in varying order), the agent's records nested in `msg`, `ts` at +08:00; containerd's
/// own logfmt lines around them.
#[test]
fn json_records_in_containerds_journal_are_read() {
    let name = "rs-json-containerd.journal";
    let r = analyze(name, None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    assert_eq!(
        r.sandbox.as_deref(),
        Some("c0ffee1234abcd5678ef90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5")
    );
    assert_eq!(shim_pid(&r), Some(61774));
    // times from `ts` (their zone given): Preparing at 08:27:30.201871Z
    assert!(t.contains("t0 2024-06-04T08:27:30.201871Z"), "{t}");
    assert_eq!(
        phases(&r),
        vec![
            ("vm_create", 3.66),
            ("kernel_boot", 1.26),
            ("pci_enumeration", 0.0),
            ("container_start", 1.129),
        ]
    );
    assert_eq!(r.stats.bad.total(), 0, "{t}");
}

/// The reader does not take the Go shim's lines under the same identifier, nor lines that
/// only look alike: a Go shim journal reads as before.
#[test]
fn go_shim_lines_under_kata_are_not_runtime_rs() {
    use bootprof::parse::runtime_rs;
    let go = r#"Nov 20 16:05:09 node kata[4211]: time="2025-11-20T16:05:09.1Z" level=info msg="Starting VM" name=containerd-shim-v2 pid=4211 sandbox=38f55c4a source=virtcontainers"#;
    assert!(runtime_rs::parse(go).is_none());
    let r = analyze("kata-stopped-after-start.journal", None);
    assert_eq!(r.state.status, "complete");
    // a record of another program named kata-runtime is read only when it is JSON
    assert!(
        runtime_rs::json_record("Jun 04 16:27:30 h containerd[1]: kata-runtime started").is_none()
    );
    assert!(matches!(
        runtime_rs::json_record(
            r#"Jun 04 16:27:30 h containerd[1]: {"msg":"x","name":"kata-runtime","ts":"yesterday"}"#
        ),
        Some(Err(_))
    ));
}

/// A line a Rust shim's pid gives its sandbox does not become the sandbox the next line of
/// another sandbox reuses (`same_sandbox`): a Go shim's stop after it stays the Go boot's.
#[test]
fn a_learned_sandbox_does_not_leak_into_the_next_line() {
    let rs = "6a1f0e2d3c4b5a69788796a5b4c3d2e1f0e1d2c3b4a5968778695a4b3c2d1e0f";
    let go = "1111111111111111111111111111111111111111111111111111111111111111";
    let text = format!(
        "Mar 03 10:00:00.000001 n kata[200]: Starting QEMU VM\n\
         Mar 03 10:00:00.000002 n kata[200]: qemu cmd: Command {{ std: \"q\" \"-name\" \"sandbox-{rs}\" }}\n\
         Mar 03 10:00:01.000000 n containerd[9]: time=\"2026-03-03T10:00:01Z\" level=info msg=\"Starting VM\" pid=300 sandbox={go}\n\
         Mar 03 10:00:01.100000 n kata[200]: vm console: \"[    0.000000] Linux version 6.12\"\n\
         Mar 03 10:00:01.200000 n containerd[9]: time=\"2026-03-03T10:00:01.2Z\" level=info msg=\"Stopping Sandbox\" pid=300 sandbox={go}\n"
    );
    let mut ing = Ingester::new(Options { sandbox: None });
    ing.read("mixed.journal", text.as_bytes()).unwrap();
    let ing = ing.finish();
    let id = |i: u32| ing.sandboxes[i as usize].as_str();
    let of: Vec<(&str, Option<u32>)> = ing
        .events
        .iter()
        .map(|e| (e.sandbox.map_or("-", id), e.pid))
        .collect();
    assert_eq!(
        of,
        vec![
            (rs, Some(200)),
            (rs, Some(200)),
            (go, Some(300)),
            (rs, Some(200)),
            (go, Some(300)),
        ]
    );
}

/// Kata 3.0–3.19's records read from containerd's `-o json` export (the record is the
/// entry's `MESSAGE`) and from `-o cat` (the record alone): the same boot as the short format.
#[test]
fn json_records_read_from_an_export_and_from_cat() {
    let short = analyze("rs-json-containerd.journal", None);
    let journal = fixture("rs-json-containerd.journal");
    let records: Vec<&str> = journal
        .lines()
        .filter_map(|l| l.find("]: ").map(|i| &l[i + 3..]))
        .collect();
    let cat = records.join("\n");
    let export: String = records
        .iter()
        .enumerate()
        .map(|(i, m)| {
            serde_json::json!({
                "__REALTIME_TIMESTAMP": (1_717_489_650_000_000u64 + i as u64 * 1000).to_string(),
                "_HOSTNAME": "node-a100-5",
                "SYSLOG_IDENTIFIER": "containerd",
                "_PID": "2291",
                "MESSAGE": m,
            })
            .to_string()
                + "\n"
        })
        .collect();
    for (name, input) in [("cat", cat), ("export", export)] {
        let mut ing = Ingester::new(Options { sandbox: None });
        ing.read(name, input.as_bytes()).unwrap();
        let r = build(&ing.finish(), None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.state.status, "complete", "{name}: {}", text(&r));
        assert_eq!(r.sandbox, short.sandbox, "{name}");
        assert_eq!(phases(&r), phases(&short), "{name}");
    }
}
