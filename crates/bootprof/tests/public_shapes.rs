//! Logs in the shapes of public Kata Containers issue threads — written here, line by line,
//! not copied: a failed `ctr run … test` on a +08:00 host with the pre-3.14 agent
//! (kata-containers#10888), a sandbox named `arch` on a −04:00 host booted twice
//! (kata-containers#11671), a RunPodSandbox cold-plug failure on a +01:00 host
//! (kata-containers#12549), a zh_CN journal whose agent stamps `+00:00` (kata-containers PR
//! #3491), one sandbox id reused by two shims on a −07:00 host (kata-containers#2269), the
//! Kata GPU boot study's driver bind logged while the host still pins the BAR, an IOMMUFD
//! boot with no pin trace, and an emulated VGA next to the GPUs.

use bootprof::parse::ingest::{Ingester, Options};
use bootprof::{build_with, AnalyzeOptions, Report};

fn go_quote(s: &str) -> String {
    let mut o = String::from('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A containerd journal line of a shim: `prefix host ident: time=… msg=… pid sandbox [vmconsole]`.
#[allow(clippy::too_many_arguments)]
fn line(
    prefix: &str,
    ident: &str,
    time: Option<&str>,
    level: &str,
    msg: &str,
    pid: u32,
    sandbox: &str,
    console: Option<&str>,
) -> String {
    let mut l = format!("{prefix} node-1 {ident}: ");
    if let Some(t) = time {
        l += &format!("time=\"{t}\" ");
    }
    l += &format!(
        "level={level} msg={} name=containerd-shim-v2 pid={pid} sandbox={sandbox} source=virtcontainers subsystem=sandbox",
        go_quote(msg)
    );
    if let Some(c) = console {
        l += &format!(" vmconsole={}", go_quote(c));
    }
    l.push('\n');
    l
}

fn agent(ts: &str, msg: &str) -> String {
    serde_json::json!({"msg": msg, "level": "INFO", "ts": ts, "subsystem": "rpc", "name": "kata-agent", "pid": "100", "version": "0.1.0", "source": "agent"}).to_string()
}

fn agent_event(ts: &str, action: &str, devpath: &str, subsystem: &str) -> String {
    serde_json::json!({"msg": "got uevent message", "level": "INFO", "ts": ts, "subsystem": "uevent", "name": "kata-agent", "pid": "1", "source": "agent",
        "event": format!("Uevent {{ action: \"{action}\", devpath: \"{devpath}\", devname: \"\", subsystem: \"{subsystem}\", seqnum: \"1\", interface: \"\" }}")}).to_string()
}

fn analyze(files: &[(&str, &str)], sandbox: Option<&str>, tz: Option<i64>) -> Report {
    let mut ing = Ingester::new(Options {
        sandbox: sandbox.map(str::to_string),
    });
    for (name, text) in files {
        ing.read(name, text.as_bytes()).unwrap();
    }
    build_with(
        &ing.finish(),
        &AnalyzeOptions {
            sandbox: sandbox.map(str::to_string),
            clocks: bootprof::analyze::clocks::ClockOptions {
                year: None,
                tz,
                trace_shift_h: None,
            },
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `ctr run --device /dev/vfio/N … test bash` on a +08:00 host, Kata < 3.14: the agent logs
/// `error injecting devices: "unresolvable CDI devices nvidia.com/gpu=0"` once a second
/// (no try numbers) until the shim's CreateContainerRequest times out.
#[test]
fn pre_314_agent_and_create_container_timeout() {
    let mut j = String::new();
    let p = |s: u32| format!("Feb 17 13:43:{s:02}");
    j += &line(
        &p(20),
        "containerd[140205]",
        Some("2025-02-17T13:43:20.100000000+08:00"),
        "info",
        "Starting VM",
        140809,
        "test",
        None,
    );
    j += &line(
        &p(22),
        "containerd[140205]",
        Some("2025-02-17T13:43:22.000000000+08:00"),
        "debug",
        "reading guest console",
        140809,
        "test",
        Some("[    0.000000] Linux version 6.12.8-nvidia-gpu"),
    );
    j += &line(
        &p(23),
        "containerd[140205]",
        Some("2025-02-17T13:43:23.200000000+08:00"),
        "debug",
        "reading guest console",
        140809,
        "test",
        Some("[    1.200000] Run /init as init process"),
    );
    j += &line(
        &p(26),
        "containerd[140205]",
        Some("2025-02-17T13:43:26.000000000+08:00"),
        "debug",
        "reading guest console",
        140809,
        "test",
        Some("[    4.000000] pci 0000:02:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint"),
    );
    for i in 0..30u32 {
        let s = 30 + i;
        let (m, sec) = (43 + s / 60, s % 60);
        let host = format!("2025-02-17T13:{m:02}:{sec:02}.659236575+08:00");
        let ts = format!("2025-02-17T05:{m:02}:{sec:02}.654738876Z");
        j += &line(
            &format!("Feb 17 13:{m:02}:{sec:02}"),
            "containerd[140205]",
            Some(&host),
            "debug",
            "reading guest console",
            140809,
            "test",
            Some(&agent(
                &ts,
                "error injecting devices: \"unresolvable CDI devices nvidia.com/gpu=0\"",
            )),
        );
    }
    j += &line("Feb 17 13:44:00", "containerd[140205]", Some("2025-02-17T13:44:00.100000000+08:00"), "error", "createContainer failed", 140809, "test", None)
        .replace(" name=", " error=\"rpc error: code = DeadlineExceeded desc = CreateContainerRequest timed out\" name=");
    let r = analyze(&[("containerd.log", &j)], Some("test"), None);
    assert_eq!(r.sandbox.as_deref(), Some("test"));
    assert_eq!(
        r.state.status,
        "failed",
        "{}",
        bootprof::render::boot::text(&r)
    );
    let f = r.state.failure.as_ref().unwrap();
    assert_eq!(f.step, "create_container");
    assert!(f.summary.contains("CDI never resolved"), "{}", f.summary);
    let c = r.cdi.as_ref().unwrap();
    assert_eq!(
        (c.tries, c.max_tries, c.devices, c.resolved),
        (30, None, 1, false)
    );
    // one try a second: the pace is measured, not the study's
    assert!((c.interval_s.unwrap() - 1.0).abs() < 0.01);
    assert_eq!(r.gpu_count, Some(1));
    // the findings lead with the failure, and suggest no tuning for a wait that failed
    assert_eq!(r.findings[0].phase, "create_container");
    assert!(!r
        .findings
        .iter()
        .any(|f| f.phase == "cdi_wait" && f.fix.contains("hugepages")));
    let text = bootprof::render::boot::text(&r);
    assert!(text.contains("State: FAILED at create_container"), "{text}");
    assert!(!text.contains("-0.0"), "{text}");
}

/// `ctr run … archlinux:latest arch sh` on a −04:00 host, Kata ≥ 3.14 numbering; the same
/// sandbox name booted again two days later by another shim.
#[test]
fn sandbox_arch_booted_twice_on_a_minus_four_host() {
    let mut j = String::new();
    for (day, pid, tries) in [(9u32, 7001u32, 3u32), (11, 9491, 5)] {
        let host = |s: f64| format!("2025-08-{day:02}T21:53:{s:09.6}-04:00");
        let ts = |s: f64| format!("2025-08-{:02}T01:53:{s:09.6}Z", day + 1);
        let p = format!("Aug {day:02} 21:53:10");
        j += &line(
            &p,
            "containerd[2334]",
            Some(&host(10.0)),
            "info",
            "Starting VM",
            pid,
            "arch",
            None,
        );
        j += &line(
            &p,
            "containerd[2334]",
            Some(&host(11.0)),
            "debug",
            "reading guest console",
            pid,
            "arch",
            Some("[    0.000000] Linux version 6.12.36"),
        );
        j += &line(
            &p,
            "containerd[2334]",
            Some(&host(12.2)),
            "debug",
            "reading guest console",
            pid,
            "arch",
            Some("[    1.200000] Run /init as init process"),
        );
        for i in 0..tries {
            let s = 14.0 + 2.05 * f64::from(i);
            j += &line(&p, "containerd[2334]", Some(&host(s + 0.011)), "debug", "reading guest console", pid, "arch", Some(&agent(&ts(s), &format!("waiting for CDI spec(s) to be generated ({i} of 100 max tries) \"unresolvable CDI devices nvidia.com/gpu=0\""))));
        }
    }
    let r = analyze(&[("j.log", &j)], Some("arch"), None);
    let b = r.boot.as_ref().unwrap();
    assert_eq!((b.shim_pid, b.boot, b.boots_of_sandbox), (Some(9491), 2, 2));
    assert_eq!(r.other_boots.len(), 1);
    let c = r.cdi.as_ref().unwrap();
    // "(0 of 100 max tries)" is the first try: 0 … 4 are five
    assert_eq!((c.tries, c.first_try, c.max_tries), (5, Some(0), Some(100)));
    assert!(
        r.cdi_wait_under_two_days(),
        "boots two days apart are not merged"
    );
    assert_eq!(r.state.status, "unfinished");
    let r1 = analyze(&[("j.log", &j)], Some("arch@1"), None);
    assert_eq!(r1.cdi.as_ref().unwrap().tries, 3);
    assert_eq!(r1.boot.as_ref().unwrap().shim_pid, Some(7001));
    // the zone of the host is read from the lines, not assumed
    assert!(bootprof::render::boot::text(&r).contains("Other boots of this sandbox"));
}

trait Span {
    fn cdi_wait_under_two_days(&self) -> bool;
}

impl Span for Report {
    fn cdi_wait_under_two_days(&self) -> bool {
        self.total_s.is_some_and(|t| t < 3600.0)
            && self.phases.iter().all(|p| p.duration_s < 3600.0)
    }
}

/// A pod whose RunPodSandbox fails before the VM starts (+01:00 host): the CRI plugin names
/// the sandbox only inside its error text, and no guest line exists.
#[test]
fn run_pod_sandbox_cold_plug_failure() {
    let id = "269c0f81d5698d68828a456bd95fff5456d0ef3979adedf572670011214c0010";
    let mut j = String::new();
    j += "Feb 19 13:45:48 xi kubelet[9136]: I0219 13:45:48.100000    9136 kuberuntime_manager.go:1180] \"Creating PodSandbox for pod\" pod=\"default/cuda-vectoradd\"\n";
    j += &format!("Feb 19 13:45:49 xi containerd[14192]: time=\"2026-02-19T13:45:49.346103748+01:00\" level=error msg=\"RunPodSandbox for &PodSandboxMetadata{{Name:cuda-vectoradd,Uid:01cb0e4f,Namespace:default,Attempt:0,}} failed, error\" error=\"rpc error: code = Unknown desc = failed to start sandbox \\\"{id}\\\": failed to create containerd task: failed to create shim task: device cold plug failed: cold plug: CDI device injection failed: unresolvable CDI devices nvidia.com/pgpu=vfio1\"\n");
    j += &format!("Feb 19 13:45:49 xi kubelet[9136]: E0219 13:45:49.346352    9136 log.go:32] \"RunPodSandbox from runtime service failed\" err=\"rpc error: code = Unknown desc = failed to start sandbox \\\"{id}\\\": device cold plug failed\"\n");
    for sandbox in [None, Some("269c0f81")] {
        let r = analyze(&[("containerd.log", &j)], sandbox, None);
        assert_eq!(r.sandbox.as_deref(), Some(id));
        assert_eq!(r.state.status, "failed");
        let f = r.state.failure.as_ref().unwrap();
        assert_eq!(f.step, "cold_plug");
        assert!(f
            .message
            .contains("unresolvable CDI devices nvidia.com/pgpu=vfio1"));
        assert!(r.findings[0].fix.contains("/var/run/cdi"));
    }
}

/// A zh_CN journal (`1月 19 21:11:37`) from a +08:00 host whose agent stamps `+00:00`, with
/// shim lines that carry only the prefix: their year comes from the `time=` values, their
/// zone from lines that have both.
#[test]
fn zh_cn_journal_prefix_only_lines() {
    let sb = "b7d3dab4442907201781cd1d77e5abf2d1c07699d3108b8ea5f06cf456db06b7";
    let mut j = String::new();
    j += &line(
        "1月 19 21:11:20",
        "kata[46036]",
        None,
        "info",
        "Creating sandbox",
        46036,
        sb,
        None,
    );
    j += &line(
        "1月 19 21:11:30",
        "kata[46036]",
        Some("2022-01-19T21:11:30.100000000+08:00"),
        "debug",
        "reading guest console",
        46036,
        sb,
        Some("[    0.000000] Linux version 5.19.2"),
    );
    j += &line(
        "1月 19 21:11:31",
        "kata[46036]",
        Some("2022-01-19T21:11:31.300000000+08:00"),
        "debug",
        "reading guest console",
        46036,
        sb,
        Some("[    1.200000] Run /init as init process"),
    );
    j += &line(
        "1月 19 21:11:31",
        "kata[46036]",
        Some("2022-01-19T21:11:31.500000000+08:00"),
        "debug",
        "reading guest console",
        46036,
        sb,
        Some(&agent(
            "2022-01-19T13:11:31.491110316+00:00",
            "rpc call from shim to agent: \"create_sandbox\"",
        )),
    );
    j += &line(
        "1月 19 21:11:37",
        "kata[46036]",
        Some("2022-01-19T21:11:37.961651988+08:00"),
        "debug",
        "reading guest console",
        46036,
        sb,
        Some(&agent(
            "2022-01-19T13:11:37.913110316+00:00",
            "rpc call from shim to agent: \"start_container\"",
        )),
    );
    for tz in [None, Some(8 * 3600)] {
        let r = analyze(&[("journal-zh.log", &j)], None, tz);
        let vm = r
            .phase("vm_create")
            .unwrap_or_else(|| panic!("{}", bootprof::render::boot::text(&r)));
        // 21:11:20 local (+08:00) is 13:11:20Z; guest boot at 13:11:30.1Z
        assert_eq!(r.t0.as_deref(), Some("2022-01-19T13:11:20.000000Z"));
        assert!((vm.duration_s - 10.1).abs() < 0.01, "{}", vm.duration_s);
        assert_eq!(r.clocks.journal_zone.as_deref(), Some("+08:00"));
        assert_eq!(r.state.status, "complete");
    }
    // a wrong --tz is taken at its word: the prefix-only line moves by the difference
    let r = analyze(&[("journal-zh.log", &j)], None, Some(0));
    assert_eq!(r.clocks.journal_zone_from, "--tz");
    assert_ne!(r.t0.as_deref(), Some("2022-01-19T13:11:20.000000Z"));
}

/// One sandbox id, two shims (a restart on a −07:00 host): two boots, not one.
#[test]
fn sandbox_reused_by_a_second_shim() {
    let mut j = String::new();
    j += "time=\"2021-07-19T07:34:02.011798587-07:00\" level=error msg=\"Failed to read guest console logs\" console-protocol=unix console-url=/run/vc/vm/test_kata/console.sock error=\"read unix @->/run/vc/vm/test_kata/console.sock: use of closed network connection\" name=containerd-shim-v2 pid=93915 sandbox=test_kata source=virtcontainers subsystem=sandbox\n";
    j += "time=\"2021-07-19T07:34:02.028689641-07:00\" level=warning msg=\"sandbox cgroups path is empty\" name=containerd-shim-v2 pid=93915 sandbox=test_kata source=virtcontainers subsystem=sandbox\n";
    j += "time=\"2021-07-19T07:35:52.372837756-07:00\" level=debug msg=\"restore sandbox failed\" error=\"open /run/vc/sbs/test_kata/persist.json: no such file or directory\" name=containerd-shim-v2 pid=94029 sandbox=test_kata source=virtcontainers subsystem=sandbox\n";
    j += "time=\"2021-07-19T07:35:53.000000000-07:00\" level=debug msg=\"reading guest console\" name=containerd-shim-v2 pid=94029 sandbox=test_kata source=virtcontainers subsystem=sandbox vmconsole=\"[    0.000000] Linux version 5.10\"\n";
    let r = analyze(&[("j", &j)], Some("test_kata"), None);
    let b = r.boot.as_ref().unwrap();
    assert_eq!((b.shim_pid, b.boots_of_sandbox), (Some(94029), 2));
    // a console read failing at teardown is not a failed boot
    let r1 = analyze(&[("j", &j)], Some("test_kata@1"), None);
    assert_ne!(r1.state.status, "failed");
}

/// The study's own ordering: the driver's bind uevent arrives 0.26 s after the host starts
/// pinning the GPU's 128 GiB BAR and seconds before the pin ends. The GPU's driver init
/// runs until the pin ends, not until the bind.
#[test]
fn bind_logged_while_the_bar_is_still_pinned() {
    let sb = "c9f7bf13";
    let console = |host: &str, payload: &str| {
        line(
            "Nov 20 17:56:19",
            "containerd[2771108]",
            Some(host),
            "debug",
            "reading guest console",
            3454180,
            sb,
            Some(payload),
        )
    };
    let mut j = String::new();
    j += &console(
        "2025-11-20T17:55:58.500000000Z",
        "[    0.000000] Linux version 6.12.47",
    );
    j += &console(
        "2025-11-20T17:55:59.700000000Z",
        "[    1.200000] Run /init as init process",
    );
    for (k, t) in [(2u32, "12.582377"), (7, "12.790000")] {
        j += &console(
            "2025-11-20T17:56:11.300000000Z",
            &format!(
                "[   {t}] pci 0000:0{k}:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint"
            ),
        );
        j += &console(
            "2025-11-20T17:56:11.310000000Z",
            &format!("[   {t}] pci 0000:0{k}:00.0: BAR 2 [mem 0x00000000-0x1fffffffff 64bit pref]"),
        );
    }
    j += &console(
        "2025-11-20T17:56:19.600000000Z",
        "[   21.101954] nvidia 0000:02:00.0: enabling device (0140 -> 0142)",
    );
    j += &console(
        "2025-11-20T17:56:19.958000000Z",
        &agent_event(
            "2025-11-20T17:56:19.947065025Z",
            "bind",
            "/devices/pci0000:00/0000:00:05.0/0000:02:00.0",
            "pci",
        ),
    );
    j += &console(
        "2025-11-20T17:56:23.100000000Z",
        "[   24.600000] nvidia 0000:07:00.0: enabling device (0140 -> 0142)",
    );
    j += &console(
        "2025-11-20T17:56:23.400000000Z",
        &agent_event(
            "2025-11-20T17:56:23.390000000Z",
            "bind",
            "/devices/pci0000:00/0000:00:0a.0/0000:07:00.0",
            "pci",
        ),
    );
    let pins = "2025-11-20T17:56:19.688170596Z: vfio_pin_pages_remote(): vaddr=0x786c40000000 npage=33554432 size=137438953472B limit=2048 pid=3454228\n\
2025-11-20T17:56:22.954170596Z: vfio_pin_pages_remote took 3266 ms\n\
2025-11-20T17:56:23.188170596Z: vfio_pin_pages_remote(): vaddr=0x784c00000000 npage=33554432 size=137438953472B limit=2048 pid=3454228\n\
2025-11-20T17:56:26.356170596Z: vfio_pin_pages_remote took 3168 ms\n";
    let r = analyze(&[("containerd.log", &j), ("pins.txt", pins)], None, None);
    let g2 = r.gpus.iter().find(|g| g.bdf == "0000:02:00.0").unwrap();
    // enable 17:56:19.60 → pin end 17:56:22.954: 3.35 s (the bind at +0.35 s is not the end)
    assert!((g2.driver_init_s.unwrap() - 3.354).abs() < 0.02, "{g2:?}");
    assert!((g2.pin_s.unwrap() - 3.266).abs() < 1e-9);
    let g7 = r.gpus.iter().find(|g| g.bdf == "0000:07:00.0").unwrap();
    assert!((g7.pin_s.unwrap() - 3.168).abs() < 1e-9);
    assert!(r.pins.iter().all(|p| p.kind == "bar"));
    // the BAR pins are inside gpu_driver_init, not memory hotplug
    assert!(r.phase("memory_hotplug").is_none());
}

/// An IOMMUFD boot: no vfio_pin_pages_remote calls, only IOMMU_IOAS_MAP ioctls. Host
/// pinning is not measured, and is said to be missing rather than reported as 0 s.
#[test]
fn iommufd_boot_without_pin_lines() {
    let sb = "fd01";
    let c = |host: &str, payload: &str| {
        line(
            "Dec 08 20:10:00",
            "containerd[1]",
            Some(host),
            "debug",
            "reading guest console",
            4242,
            sb,
            Some(payload),
        )
    };
    let mut j = String::new();
    j += &c(
        "2025-12-08T20:10:00.000000000Z",
        "[    0.000000] Linux version 6.12.47",
    );
    j += &c(
        "2025-12-08T20:10:05.000000000Z",
        "[    5.000000] pci 0000:02:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint",
    );
    j += &c("2025-12-08T20:10:05.000100000Z", "[    5.000100] pci 0000:00:01.0: [1234:1111] type 00 class 0x030000 conventional PCI endpoint");
    j += &c(
        "2025-12-08T20:10:09.000000000Z",
        "[    9.000000] nvidia 0000:02:00.0: enabling device (0140 -> 0142)",
    );
    j += &c(
        "2025-12-08T20:10:09.400000000Z",
        &agent_event(
            "2025-12-08T20:10:09.390000000Z",
            "bind",
            "/devices/pci0000:00/0000:00:05.0/0000:02:00.0",
            "pci",
        ),
    );
    let trace =
        "2025-12-08T20:10:01.000000000Z: IOMMU_IOAS_MAP pid=4300 size=10737418240B took 35000 us\n";
    let r = analyze(&[("j", &j), ("maps.txt", trace)], None, None);
    assert_eq!(r.gpu_count, Some(1), "{}", r.gpu_count_from);
    assert!(r.gpu_count_from.contains("1234:1111"));
    assert!(!r.pin_summary.traced);
    assert_eq!(r.pin_summary.iommufd_maps, 1);
    assert_eq!(r.gpus[0].pin_s, None);
    assert!((r.gpus[0].driver_init_s.unwrap() - 0.4).abs() < 0.02);
    let f = r.findings.iter().find(|f| f.phase == "input").unwrap();
    assert!(
        f.text.contains("IOMMUFD") && f.text.contains("not known"),
        "{}",
        f.text
    );
    let text = bootprof::render::boot::text(&r);
    assert!(!text.contains("0 GiB pinned in 0.0 s"), "{text}");
    assert!(!r
        .findings
        .iter()
        .any(|f| f.fix.contains("IOMMUFD backend skips")));
}
