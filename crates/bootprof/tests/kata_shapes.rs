//! Kata logs in the shapes of issue 26's research (each fixture's source is in
//! `fixtures/README.md`): a VFIO hot-plug that QEMU or Cloud Hypervisor refuses, a sandbox
//! stopped after (or before) its container started, shim records logged twice under two
//! syslog identifiers, a GPU whose BARs the guest could not assign, and Kata 1.x
//! `kata-proxy` lines that carry the guest's console.

use bootprof::fleet::{self, FleetOptions};
use bootprof::parse::ingest::{Ingest, Ingester, Options};
use bootprof::{build, Report};

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ingest(files: &[(&str, &str)], sandbox: Option<&str>) -> Ingest {
    let mut ing = Ingester::new(Options {
        sandbox: sandbox.map(str::to_string),
    });
    for (name, text) in files {
        ing.read(name, text.as_bytes()).unwrap();
    }
    ing.finish()
}

fn analyze(files: &[(&str, &str)], sandbox: Option<&str>) -> Report {
    build(&ingest(files, sandbox), sandbox).unwrap_or_else(|e| panic!("{e}"))
}

fn text(r: &Report) -> String {
    bootprof::render::boot::text(r)
}

/// What a VFIO hot-plug failure must say: failed at `vfio_hotplug`, naming the device and
/// QEMU's (or Cloud Hypervisor's) reason, in the state, the first finding, the fleet's row
/// and its JSON.
fn assert_hotplug_failure(files: &[(&str, &str)], device: &str, reason: &str) {
    let r = analyze(files, None);
    let t = text(&r);
    assert_eq!(r.state.status, "failed", "{t}");
    let f = r.state.failure.as_ref().unwrap();
    assert_eq!(f.step, "vfio_hotplug", "{t}");
    assert!(f.summary.contains(device), "{}", f.summary);
    assert!(f.summary.contains(reason), "{}", f.summary);
    assert!(t.contains("State: FAILED at vfio_hotplug"), "{t}");
    assert!(!t.contains("The log ends before the boot did"), "{t}");
    let first = &r.findings[0];
    assert_eq!(first.phase, "vfio_hotplug");
    assert!(
        first.text.contains(device) && first.text.contains(reason),
        "{}",
        first.text
    );
    assert!(!first.fix.is_empty());
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["state"]["failure"]["step"], "vfio_hotplug");
    // --all: a row failed at that step, not an unfinished boot nor a sandbox with no boot
    let fl = fleet::analyze(&ingest(files, None), &FleetOptions::default());
    assert_eq!(fl.rows.len(), 1, "{}", bootprof::render::fleet::text(&fl));
    let row = &fl.rows[0];
    assert_eq!(
        (row.state, row.failure_step),
        ("failed", Some("vfio_hotplug"))
    );
    assert_eq!(fl.states.get("failed"), Some(&1));
    assert!(bootprof::render::fleet::text(&fl).contains("failed:vfio_hotplug"));
}

#[test]
fn vfio_group_not_viable_is_a_failed_hotplug() {
    let j = fixture("kata-vfio-not-viable.journal");
    assert_hotplug_failure(
        &[("kata.log", &j)],
        "0000:1a:00.0",
        "group 40 is not viable",
    );
}

#[test]
fn vfio_group_in_multiple_address_spaces_is_a_failed_hotplug() {
    let j = fixture("kata-vfio-multiple-address-spaces.journal");
    assert_hotplug_failure(
        &[("kata.log", &j)],
        "0000:01:00.1",
        "group 1 used in multiple address spaces",
    );
    // QEMU's stderr relayed at level=error ("Failed to mmap … BAR 3") is not the failure
    let r = analyze(&[("kata.log", &j)], None);
    assert!(!r.state.failure.as_ref().unwrap().message.contains("mmap"));
}

#[test]
fn cloud_hypervisor_vfio_map_region_is_a_failed_hotplug() {
    let j = fixture("clh-vfio-map-region.log");
    assert_hotplug_failure(
        &[("clh.log", &j)],
        "0000:19:00.0",
        "VfioMapRegion(DmaMap(IommuDmaMap(Error(17))))",
    );
}

#[test]
fn vfio_device_not_found_is_a_failed_hotplug() {
    let j = fixture("kata-vfio-device-not-found.journal");
    // the device named by the shim's vfio-device-BDF field (QEMU names only its id)
    assert_hotplug_failure(
        &[("kata.log", &j)],
        "0000:d8:00.0",
        "Device 'vfio-0ed733c34bded7f30' not found",
    );
}

#[test]
fn a_cri_error_with_qemus_vfio_reason_is_a_failed_hotplug() {
    let j = fixture("cri-vfio-not-viable.journal");
    assert_hotplug_failure(&[("c.log", &j)], "0000:06:00.0", "group 5 is not viable");
}

/// Every QEMU wording of a VFIO device it cannot attach, across versions, names the
/// hot-plug step; QEMU's other VFIO messages do not.
#[test]
fn qemu_vfio_wordings_name_the_hotplug_step() {
    use bootprof::analyze::facts::{classify_error, vfio_failure};
    for (text, device, reason) in [
        ("QMP command failed: vfio 0000:1a:00.0: group 40 is not viable", Some("0000:1a:00.0"), "group 40 is not viable"),
        ("QMP command failed: vfio error: 0000:01:00.0: group 1 is not viable", Some("0000:01:00.0"), "group 1 is not viable"),
        ("QMP command failed: vfio 0000:01:00.1: group 1 used in multiple address spaces: unknown", Some("0000:01:00.1"), "group 1 used in multiple address spaces"),
        ("QMP command failed: vfio 0000:00:03.0: failed to setup container for group 3: memory listener initialization failed for container: Bad address", Some("0000:00:03.0"), "failed to setup container for group 3: memory listener initialization failed for container: Bad address"),
        ("QMP command failed: vfio 0000:b8:00.0: error getting device from group 0: Inappropriate ioctl for device", Some("0000:b8:00.0"), "error getting device from group 0: Inappropriate ioctl for device"),
        ("VFIO_MAP_DMA failed: No space left on device", None, "VFIO_MAP_DMA failed: No space left on device"),
        ("QMP command failed: Device 'vfio-bf35ce81cd1f15c20' not found: not found", None, "Device 'vfio-bf35ce81cd1f15c20' not found"),
    ] {
        assert_eq!(classify_error(text).0, "vfio_hotplug", "{text}");
        let v = vfio_failure(text).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(v.device.as_deref(), device, "{text}");
        assert_eq!(v.reason, reason, "{text}");
    }
    for other in [
        "Failed to mmap 0000:01:00.0 BAR 3. Performance may be slow",
        "vfio: Cannot reset device 0000:04:00.0, depends on group 37 which is not owned.",
        "Failed to read guest console logs",
    ] {
        assert_ne!(classify_error(other).0, "vfio_hotplug", "{other}");
    }
}

/// The journal of kata-containers#10622 holds every shim record twice: under `kata[17889]`
/// (the shim's syslog hook) and `containerd[979]` (containerd copying the shim's log
/// FIFO), with the same `time=`, `pid=` and message, not always next to each other. Read
/// once each: the report is the one of the journal without the copies, and the input
/// summary says how many were dropped.
#[test]
fn a_shim_record_under_two_identifiers_counts_once() {
    let j = fixture("kata-vfio-multiple-address-spaces.journal");
    let once: String = j
        .lines()
        .filter(|l| !(l.contains("containerd[979]") && l.contains("name=containerd-shim-v2")))
        .map(|l| format!("{l}\n"))
        .collect();
    let copies = j.lines().count() - once.lines().count();
    assert_eq!(copies, 8);
    let both = ingest(&[("kata.log", &j)], None);
    let single = ingest(&[("kata.log", &once)], None);
    assert_eq!(both.stats.duplicates, copies as u64);
    assert_eq!(both.stats.events, single.stats.events);
    assert_eq!(both.events.len(), single.events.len());
    let (a, b) = (build(&both, None).unwrap(), build(&single, None).unwrap());
    // the same facts: phases, state, findings (line numbers aside)
    let strip = |r: &Report| {
        let mut v = serde_json::to_value(r).unwrap();
        v["stats"] = serde_json::Value::Null;
        v.to_string()
            .split("kata.log:")
            .map(|p| p.trim_start_matches(char::is_numeric).to_string())
            .collect::<String>()
    };
    assert_eq!(strip(&a), strip(&b));
    let t = text(&a);
    assert!(t.contains("8 duplicate records dropped"), "{t}");
    assert!(!text(&b).contains("duplicate"));
}

/// Two journals of one node, `journalctl -t kata` and `journalctl -u containerd`, hold
/// the same shim records: given both, each is read once.
#[test]
fn the_same_records_in_two_files_count_once() {
    let j = fixture("kata-vfio-multiple-address-spaces.journal");
    let kata: String = j
        .lines()
        .filter(|l| l.contains("kata["))
        .map(|l| format!("{l}\n"))
        .collect();
    let ctrd: String = j
        .lines()
        .filter(|l| !l.contains("kata["))
        .map(|l| format!("{l}\n"))
        .collect();
    let both = ingest(&[("kata.log", &kata), ("containerd.log", &ctrd)], None);
    let single = ingest(&[("kata.log", &kata)], None);
    assert_eq!(both.stats.duplicates, 8);
    // containerd's own lines (`shim disconnected`, `cleaning up after shim disconnected`,
    // naming the sandbox by `id=`) are not copies
    assert_eq!(both.stats.events, single.stats.events + 2);
}

/// The finding about a GPU BAR the guest could not assign.
fn bar_finding(r: &Report) -> Option<&bootprof::analyze::Finding> {
    r.findings
        .iter()
        .find(|f| f.phase == "pci_enumeration" && f.text.contains("could not assign"))
}

/// What a BAR-assignment finding must say: the GPU, its BAR and the BAR's size, and the
/// fixes with their sources.
fn assert_bar_finding(r: &Report, gpu: &str, bar: &str, size: &str) {
    let t = text(r);
    let f = bar_finding(r).unwrap_or_else(|| panic!("no BAR finding:\n{t}"));
    for want in [gpu, bar, size] {
        assert!(f.text.contains(want), "{want}: {}", f.text);
    }
    for want in [
        "X-PciMmio64Mb",
        "pref64-reserve",
        "hot_plug_vfio = \"root-port\"",
        "pci=realloc",
        "edk2 OVMF",
        "QEMU pcie-root-port",
        "Kata GPU passthrough guide",
    ] {
        assert!(f.fix.contains(want), "{want}: {}", f.fix);
    }
}

/// A pre-6.8 guest kernel (`BAR 1: no space for [mem size …]`, `BAR 1: failed to assign`),
/// in kata-containers#4211's shape, and the NVIDIA driver's two-line `This PCI I/O region …
/// is invalid:` / `BAR1 is 0M` whose second line has no stamp.
#[test]
fn a_gpu_bar_with_no_space_is_a_finding() {
    let d = fixture("dmesg-bar-no-space.txt");
    let r = analyze(&[("dmesg.txt", &d)], None);
    assert_bar_finding(&r, "0000:01:01.0", "BAR 1", "256 MiB");
    let f = bar_finding(&r).unwrap();
    assert!(f.text.contains("BAR1 is 0M"), "{}", f.text);
    assert!(f.text.contains("probe"), "{}", f.text);
    // its other BARs failed too; its I/O BAR was assigned
    assert!(
        f.text.contains("BAR 3") && f.text.contains("BAR 0"),
        "{}",
        f.text
    );
    assert!(!f.text.contains("BAR 5"), "{}", f.text);
    assert_eq!(r.gpu_count, Some(1));
}

/// A 6.8+ guest kernel (and 6.1.167+ / 6.6.y with the backport): `BAR 2 [mem size …]:
/// can't assign; no space`, the bridge window above it, the `pci=realloc` hint, through
/// Kata's console relay (kata-containers#11671's shape), the stampless second NVRM line a
/// console record of its own.
#[test]
fn a_gpu_bar_that_cant_be_assigned_is_a_finding() {
    let j = fixture("kata-bar-cant-assign.journal");
    let r = analyze(&[("containerd.log", &j)], None);
    assert_bar_finding(&r, "0000:02:00.0", "BAR 2", "128 GiB");
    let f = bar_finding(&r).unwrap();
    assert!(f.text.contains("bridge window"), "{}", f.text);
    assert!(f.text.contains("pci=realloc"), "{}", f.text);
    assert!(f.text.contains("BAR2 is 0M"), "{}", f.text);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["bar_assignment"]["failures"][0]["bdf"], "0000:02:00.0");
}

/// The study's boot (every BAR assigned) has no such finding, and its JSON no such field.
#[test]
fn assigned_bars_are_no_finding() {
    let j = fixture("run2-containerd.journal");
    let r = analyze(&[("containerd.log", &j)], None);
    assert!(bar_finding(&r).is_none());
    assert!(serde_json::to_value(&r)
        .unwrap()
        .get("bar_assignment")
        .is_none());
}

/// kata-containers#5594's shape: a boot whose container started, its sandbox stopped 40
/// min later (`virtiofsd quits`, `Stopping Sandbox`, containerd's `shim disconnected`):
/// complete, the stop said as a note, its time not in the boot.
#[test]
fn a_sandbox_stopped_after_its_container_started_is_complete() {
    let j = fixture("kata-stopped-after-start.journal");
    let r = analyze(&[("kata.log", &j)], None);
    let t = text(&r);
    assert_eq!(r.state.status, "complete", "{t}");
    let note = r.state.stopped.as_deref().unwrap_or_else(|| panic!("{t}"));
    assert!(
        note.contains("Stopping Sandbox") && note.contains("after"),
        "{note}"
    );
    assert!(t.contains("stopped"), "{t}");
    assert!(!t.contains("The log ends before the boot did"), "{t}");
    // 17:48:50.2 → start_container at 17:49:01.77: not 40 min
    let total = r.total_s.unwrap();
    assert!((total - 11.57).abs() < 0.05, "{total}\n{t}");
    assert!(!r.total_at_least);
    let fl = fleet::analyze(&ingest(&[("kata.log", &j)], None), &FleetOptions::default());
    assert_eq!(fl.rows[0].state, "complete");
    assert!(fl.rows[0].total_s.is_some_and(|s| s < 12.0));
}

/// kata-containers#3440's shape (Kata 2.0.1, Cloud Hypervisor, no `name=`): the sandbox
/// stopped while the agent still waited for CDI: stopped, not "the log ends".
#[test]
fn a_sandbox_stopped_before_its_container_started_is_stopped() {
    let j = fixture("clh-stopped-before-start.journal");
    let r = analyze(&[("clh.log", &j)], None);
    let t = text(&r);
    assert_eq!(r.state.status, "stopped", "{t}");
    assert!(r.state.failure.is_none());
    let during = r.state.ends_during.as_deref().unwrap_or("");
    assert!(during.contains("Stopping sandbox in the VM"), "{during}");
    assert!(t.contains("State: STOPPED"), "{t}");
    assert!(!t.contains("The log ends before the boot did"), "{t}");
    // the guest's power-down after the stop is not part of the boot
    assert!(r.phases.iter().all(|p| p.end_s < 40.0), "{t}");
    let fl = fleet::analyze(&ingest(&[("clh.log", &j)], None), &FleetOptions::default());
    assert_eq!(fl.rows[0].state, "stopped");
    assert_eq!(fl.states.get("stopped"), Some(&1));
    assert!(bootprof::render::fleet::text(&fl).contains("1 stopped"));
}

/// kubernetes#111469's shape (containerd 1.6): `StopPodSandbox for "ID"` and `shim
/// disconnected id=ID` name the sandbox only in their text and `id=`.
#[test]
fn containerds_stop_pod_sandbox_stops_its_sandbox() {
    let j = fixture("cri-stop-pod-sandbox.journal");
    for sandbox in [None, Some("6ebefcaa")] {
        let r = analyze(&[("c.log", &j)], sandbox);
        assert_eq!(r.state.status, "stopped", "{}", text(&r));
        let during = r.state.ends_during.as_deref().unwrap_or("");
        assert!(during.contains("StopPodSandbox"), "{during}");
    }
}

/// Kata 1.x: the guest's console through `kata-proxy` (`msg="[   67.48…] …\n" name=kata-proxy
/// pid=… sandbox=… source=agent`, kata-containers/runtime#1551, #1128): read as the
/// sandbox's kernel lines, so its phases and the BAR finding work on Kata 1.x logs too.
#[test]
fn kata_proxy_lines_are_the_guests_console() {
    let j = fixture("kata1-proxy-console.journal");
    for sandbox in [None, Some("52e7aef4")] {
        let r = analyze(&[("proxy.log", &j)], sandbox);
        let t = text(&r);
        assert_eq!(
            r.sandbox.as_deref(),
            Some("52e7aef4e1998c4444d379a9e26310144c99a74bdd1afa33fa9fc32e7c82d397")
        );
        assert!(r.phase("kernel_boot").is_some(), "{t}");
        assert_eq!(r.stats.bad.total(), 0, "{t}");
        assert_bar_finding(&r, "0000:00:06.0", "BAR 1", "16 GiB");
        // the proxy's pid is not a shim's: its lines join the sandbox's boot
        assert_eq!(r.boot.as_ref().and_then(|b| b.shim_pid), Some(65290), "{t}");
    }
}

/// Kata 1.0's proxy lines name no sandbox (kata-containers/osbuilder#118): they are the
/// console of the boot they fall in, like a dmesg file's.
#[test]
fn kata_proxy_lines_without_a_sandbox_are_read_too() {
    let j = fixture("kata1-proxy-no-sandbox.journal");
    let ing = ingest(&[("proxy.log", &j)], None);
    assert_eq!(ing.stats.events, 5, "{:?}", ing.stats);
    let r = build(&ing, None).unwrap();
    let k = r
        .phase("kernel_boot")
        .unwrap_or_else(|| panic!("{}", text(&r)));
    assert!((k.duration_s - 0.77).abs() < 0.01, "{}", text(&r));
    // on the host's clock: the proxy's time= dates them (the guest's boot a console delay
    // before the first line reached the journal)
    let t0 =
        r.t0.as_deref()
            .and_then(bootprof::parse::time::parse_rfc3339)
            .unwrap();
    let first = bootprof::parse::time::parse_rfc3339("2018-06-12T19:45:40.121203411Z").unwrap();
    assert!((first - t0).abs() < 5_000_000, "{:?}", r.t0);
}
