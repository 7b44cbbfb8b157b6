//! The analysis recovers the truth of generated boot records (`bootprof::synth`): GPU
//! count, per-GPU pin time, driver init within 0.5 s, memory hotplug, CDI wait, a critical
//! path no longer than the boot, and truncated / failed / late boots labelled as such —
//! across GPU counts, BAR and RAM sizes, page backing, bind timing, enable order, zones and
//! locales, clock offsets, cuts, other VMs' pins, other sandboxes and failures.

use bootprof::parse::ingest::{Ingester, Options};
use bootprof::parse::time::parse_rfc3339;
use bootprof::synth::{
    render, BarWording, Bind, CiClock, JournalFormat, Outcome, ProxyConsole, RamPages, Records,
    Spec, Stop,
};
use bootprof::{build, Report};
use proptest::prelude::*;

fn analyze(rec: &Records, sandbox: Option<&str>) -> Report {
    let mut ing = Ingester::new(Options {
        sandbox: sandbox.map(str::to_string),
    });
    ing.read("journal.log", rec.journal.as_bytes()).unwrap();
    if let Some(b) = &rec.bpftrace {
        ing.read("pins.txt", b.as_bytes()).unwrap();
    }
    if let Some(k) = &rec.kubectl {
        ing.read("pod.txt", k.as_bytes()).unwrap();
    }
    build(&ing.finish(), sandbox).unwrap_or_else(|e| panic!("{e}"))
}

/// Check the report against the truth; `Err` names what differs.
fn check(spec: &Spec, rec: &Records, r: &Report) -> Result<(), String> {
    let t = &rec.truth;
    let ctx = || format!("\n{}", bootprof::render::boot::text(r));
    if r.state.status != t.status {
        return Err(format!(
            "status {} (truth {}){}",
            r.state.status,
            t.status,
            ctx()
        ));
    }
    let step = r.state.failure.as_ref().map(|f| f.step);
    if step != t.failure_step {
        return Err(format!(
            "failure step {step:?} (truth {:?}){}",
            t.failure_step,
            ctx()
        ));
    }
    if let (Some(dev), Some(why)) = (&t.failure_device, &t.failure_reason) {
        let summary = r.state.failure.as_ref().map_or("", |f| f.summary.as_str());
        let first = r.findings.first().map_or("", |f| f.text.as_str());
        let names = |t: &str| t.contains(dev.as_str()) && t.contains(why.as_str());
        if !(names(summary) && names(first)) {
            return Err(format!(
                "the failure does not name {dev} and \"{why}\": {summary:?}{}",
                ctx()
            ));
        }
    }
    if t.stopped_after_start != r.state.stopped.is_some() {
        return Err(format!(
            "stopped after start {:?} (truth {}){}",
            r.state.stopped,
            t.stopped_after_start,
            ctx()
        ));
    }
    if let Some((gpu, bar, size)) = &t.bar_unassigned {
        let size = format!("{} GiB", size >> 30);
        let said = r.findings.iter().any(|f| {
            f.phase == "pci_enumeration"
                && [
                    gpu.as_str(),
                    bar.as_str(),
                    size.as_str(),
                    "could not assign",
                ]
                .iter()
                .all(|w| f.text.contains(w))
        });
        if !said {
            return Err(format!("no finding names {gpu}'s {bar} of {size}{}", ctx()));
        }
    } else if r.bar_assignment.is_some() {
        return Err(format!("a BAR failure the truth does not have{}", ctx()));
    }
    if r.state.started_late.is_empty() == t.started_late {
        return Err(format!(
            "started late {:?} (truth {}){}",
            r.state.started_late,
            t.started_late,
            ctx()
        ));
    }
    let text = bootprof::render::boot::text(r);
    if text.contains("-0.0 s") || text.contains("-0.000 s") {
        return Err(format!("a negative zero is printed{}", ctx()));
    }
    if t.started_late && r.phase("kernel_boot").is_some() {
        return Err(format!(
            "a kernel_boot phase from a log that starts late{}",
            ctx()
        ));
    }
    if r.boot.as_ref().and_then(|b| b.shim_pid) != Some(t.shim_pid) {
        return Err(format!("wrong boot {:?}{}", r.boot, ctx()));
    }
    if spec.outcome == Outcome::ColdPlugFailed {
        return Ok(());
    }
    if r.gpu_count != Some(t.gpus) {
        return Err(format!(
            "{:?} GPUs (truth {}){}",
            r.gpu_count,
            t.gpus,
            ctx()
        ));
    }
    for g in &t.per_gpu {
        let Some(rg) = r.gpus.iter().find(|x| x.bdf == g.bdf) else {
            if g.checkable {
                return Err(format!("GPU {} missing{}", g.bdf, ctx()));
            }
            continue;
        };
        if !g.checkable {
            continue;
        }
        match (g.pin_s, rg.pin_s) {
            (Some(a), Some(b)) if (a - b).abs() <= 0.002 => {}
            (None, None) => {}
            (a, b) => return Err(format!("{} pin {b:?} (truth {a:?}){}", g.bdf, ctx())),
        }
        let init = rg
            .driver_init_s
            .ok_or_else(|| format!("{}: no driver init{}", g.bdf, ctx()))?;
        if rg.driver_init_estimated || (init - g.init_s).abs() > 0.5 {
            return Err(format!(
                "{} driver init {init:.3} s{} (truth {:.3}){}",
                g.bdf,
                if rg.driver_init_estimated {
                    " estimated"
                } else {
                    ""
                },
                g.init_s,
                ctx()
            ));
        }
    }
    if let Some(m) = t.memory_hotplug_s {
        let p = r
            .phase("memory_hotplug")
            .ok_or_else(|| format!("no memory_hotplug{}", ctx()))?;
        if (p.duration_s - m).abs() > 0.5 {
            return Err(format!(
                "memory_hotplug {:.3} (truth {m:.3}){}",
                p.duration_s,
                ctx()
            ));
        }
    }
    if let Some(c) = t.cdi_wait_s {
        let p = r
            .phase("cdi_wait")
            .ok_or_else(|| format!("no cdi_wait{}", ctx()))?;
        if (p.duration_s - c).abs() > 0.5 || p.estimated {
            return Err(format!(
                "cdi_wait {:.3} (truth {c:.3}){}",
                p.duration_s,
                ctx()
            ));
        }
    }
    if let (Some(n), Some(c)) = (t.cdi_tries, &r.cdi) {
        if c.tries != n {
            return Err(format!("{} CDI tries (truth {n}){}", c.tries, ctx()));
        }
    }
    let on_path: f64 = r.critical_path.iter().map(|s| s.on_path_s).sum();
    let tol = if r.total_from == "kubectl" { 1.0 } else { 1e-6 };
    if on_path > r.total_s.unwrap_or(0.0) + tol {
        return Err(format!(
            "critical path {on_path:.3} s of a {:?} s boot{}",
            r.total_s,
            ctx()
        ));
    }
    if let Some(p) = r
        .pins
        .iter()
        .find(|p| p.pid.is_some_and(|x| x != t.qemu_pid))
    {
        return Err(format!("another process's pin counted: {p:?}{}", ctx()));
    }
    if spec.pin_trace && t.trace_shift_h != 0 && r.clocks.trace_shift_h != Some(t.trace_shift_h) {
        return Err(format!(
            "trace shift {:?} (truth {}){}",
            r.clocks.trace_shift_h,
            t.trace_shift_h,
            ctx()
        ));
    }
    if spec.head_cut.is_none() && rec.kubectl.is_none() {
        let t0 = r.t0.as_deref().and_then(parse_rfc3339).ok_or("no t0")?;
        // a line with only a prefix time is known to the second
        let tol = if spec.prefix_only_pct > 0 {
            1_000_000_000
        } else {
            50_000_000
        };
        if (t0 - t.vm_start).abs() > tol {
            return Err(format!(
                "boot starts at {:?} (truth {}){}",
                r.t0,
                bootprof::parse::time::format_rfc3339(t.vm_start),
                ctx()
            ));
        }
    }
    Ok(())
}

fn bind() -> impl Strategy<Value = Bind> {
    prop_oneof![Just(Bind::Before), Just(Bind::After), Just(Bind::Absent)]
}

fn spec() -> impl Strategy<Value = Spec> {
    let sizes = (
        any::<u64>(),
        1usize..=8,
        prop_oneof![Just(16u64), Just(32), Just(64), Just(128), Just(256)],
        any::<bool>(),
        1u64..=16,
        0u64..=64,
        any::<bool>(),
        prop::bool::weighted(0.7),
        prop::collection::vec(bind(), 8),
        prop_oneof![
            6 => Just(None),
            1 => Just(Some(Stop::AfterStart)),
            1 => Just(Some(Stop::BeforeStart)),
        ],
    );
    let clocks = (
        prop_oneof![Just(0i64), Just(480), Just(-240), Just(60), Just(330)],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u8), Just(30), Just(100)],
        prop_oneof![Just(0i64), Just(350), Just(-1200), Just(8 * 3_600_000 + 40)],
        prop_oneof![3 => Just(0i64), 1 => Just(-8), 1 => Just(5)],
        prop_oneof![
            8 => Just(None),
            1 => Just(Some(BarWording::Old)),
            1 => Just(Some(BarWording::New)),
        ],
        prop_oneof![
            6 => Just(None),
            1 => Just(Some(ProxyConsole::WithSandbox)),
            1 => Just(Some(ProxyConsole::NoSandbox)),
        ],
    );
    let world = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            6 => Just(Outcome::Complete),
            1 => Just(Outcome::CdiNeverResolved),
            1 => Just(Outcome::CreateTimeout),
            1 => Just(Outcome::ColdPlugFailed),
            1 => Just(Outcome::HotplugFailed),
        ],
        prop::option::weighted(0.15, 0.0f64..1.0),
        prop::option::weighted(0.15, 0.0f64..1.0),
        any::<bool>(),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
    );
    (sizes, clocks, world).prop_map(|(sz, ck, w)| {
        let (
            seed,
            gpus,
            bar_gib,
            old_bar_lines,
            boot_ram_gib,
            hot_ram_gib,
            huge,
            pin_trace,
            binds,
            stop,
        ) = sz;
        let (
            zone_min,
            zh_prefix,
            zoned_time_field,
            prefix_only_pct,
            agent_offset_ms,
            trace_shift_h,
            bar_unassigned,
            proxy_console,
        ) = ck;
        let (
            foreign_pins,
            concurrent_pins,
            other_sandbox,
            earlier_boot,
            emulated_vga,
            pre314,
            outcome,
            head_cut,
            tail_cut,
            kubectl,
            dup_identifiers,
            rust_shim,
        ) = w;
        // the Rust shim's failures carry no level in journald's text: boots that fail in the
        // guest or not at all; times from precise prefixes or the JSON export (its lines
        // have no `time=`)
        let rust_shim = rust_shim
            && !matches!(
                outcome,
                Outcome::ColdPlugFailed | Outcome::HotplugFailed | Outcome::CreateTimeout
            );
        // a proxy's lines that name no sandbox are the console of a journal of one boot
        let proxy_console = proxy_console
            .filter(|p| *p == ProxyConsole::WithSandbox || !(other_sandbox || earlier_boot));
        // enable order: a shuffle of the enumeration order, from the seed
        let mut order: Vec<usize> = (0..gpus).collect();
        let mut x = seed;
        for i in (1..gpus).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (x >> 33) as usize % (i + 1));
        }
        Spec {
            seed,
            gpus,
            bar_gib,
            old_bar_lines,
            boot_ram_gib,
            hot_ram_gib,
            ram_pages: if huge {
                RamPages::Huge
            } else {
                RamPages::Small
            },
            pin_trace,
            binds,
            enable_order: order,
            zone_min,
            zh_prefix,
            zoned_time_field,
            prefix_only_pct,
            agent_offset_ms,
            trace_shift_h,
            foreign_pins,
            concurrent_pins,
            other_sandbox,
            earlier_boot,
            emulated_vga,
            pre314,
            dup_identifiers,
            bar_unassigned,
            stop,
            proxy_console: proxy_console.filter(|_| !rust_shim),
            rust_shim,
            outcome,
            // a failed boot's log is whole: the cuts are for complete ones
            // (a log that starts late may lose the BAR lines a finding is checked against)
            head_cut: head_cut.filter(|_| {
                outcome == Outcome::Complete
                    && tail_cut.is_none()
                    && bar_unassigned.is_none()
                    && stop != Some(Stop::BeforeStart)
            }),
            tail_cut: tail_cut
                .filter(|_| !matches!(outcome, Outcome::ColdPlugFailed | Outcome::HotplugFailed)),
            kubectl,
            host: "gpu-node-3".to_string(),
            // every `journalctl -o` shape, from the seed (`-o json` included)
            journal_format: if rust_shim {
                [JournalFormat::ShortIsoPrecise, JournalFormat::Json][(seed >> 63) as usize]
            } else {
                JournalFormat::ALL[(seed >> 58) as usize % JournalFormat::ALL.len()]
            },
            // a CI job's log of the journal: every line behind the runner's clock (issue 37)
            ci_clock: [
                None,
                None,
                None,
                None,
                Some(CiClock::Hms),
                Some(CiClock::Bracketed),
                Some(CiClock::Millis),
                Some(CiClock::Rfc3339),
            ][(seed >> 52) as usize % 8],
            start: None,
        }
    })
}

proptest! {
    // PROPTEST_CASES=N runs more (a soak); 64 by default
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn analysis_recovers_the_truth(spec in spec(), by_id in any::<bool>()) {
        let rec = render(&spec);
        // a cold-plug failure has no guest lines, a refused hot-plug a few: they are found
        // by their id (another sandbox's boot is the busiest)
        let id = (by_id
            || matches!(spec.outcome, Outcome::ColdPlugFailed | Outcome::HotplugFailed))
            .then(|| rec.truth.sandbox[..12].to_string());
        let r = analyze(&rec, id.as_deref());
        if let Err(e) = check(&spec, &rec, &r) {
            prop_assert!(false, "{:?}\n{}", spec, e);
        }
        // the Rust shim's journal holds none of the Go shim's console lines
        prop_assert_eq!(
            spec.rust_shim,
            rec.journal.contains("vm console: ") && !rec.journal.contains("vmconsole="),
            "{:?}", spec
        );
        // every copy of a shim record is dropped, and only those (`--sandbox` skips the
        // other sandbox's lines, copies and all, before they are read)
        if id.is_none() || !spec.other_sandbox {
            prop_assert_eq!(r.stats.duplicates, rec.truth.duplicates, "{:?}", spec);
        }
    }
}

/// The study's boot with each variation alone, so a failure names it.
#[test]
fn study_boot_and_single_variations() {
    let base = Spec::study(7);
    let mut cases: Vec<(&str, Spec)> = vec![("study", base.clone())];
    let mut v = |name: &'static str, f: &dyn Fn(&mut Spec)| {
        let mut s = base.clone();
        f(&mut s);
        cases.push((name, s));
    };
    v("bind before the pin ends", &|s| {
        s.binds = vec![Bind::Before; 7]
    });
    v("no bind logged", &|s| s.binds = vec![Bind::Absent; 7]);
    v("no pin trace, no bind", &|s| {
        s.pin_trace = false;
        s.binds = vec![Bind::Absent; 7];
    });
    v("one GPU, no bind", &|s| {
        s.gpus = 1;
        s.binds = vec![Bind::Absent];
        s.enable_order = vec![0];
    });
    v("old BAR lines, 80 GiB-class BARs", &|s| {
        s.old_bar_lines = true;
        s.bar_gib = 64;
    });
    v("zh_CN prefixes, +08:00, prefix-only lines", &|s| {
        s.zone_min = 480;
        s.zh_prefix = true;
        s.zoned_time_field = true;
        s.prefix_only_pct = 100;
    });
    v("-04:00 and an agent clock 8 h off", &|s| {
        s.zone_min = -240;
        s.agent_offset_ms = 8 * 3_600_000;
    });
    v("bpftrace 8 h off", &|s| s.trace_shift_h = -8);
    v("foreign and concurrent pins", &|s| {
        s.foreign_pins = true;
        s.concurrent_pins = true;
    });
    v("other sandbox and an earlier boot of this one", &|s| {
        s.other_sandbox = true;
        s.earlier_boot = true;
    });
    v("emulated VGA", &|s| s.emulated_vga = true);
    v("a GPU BAR with no space (before 6.8)", &|s| {
        s.bar_unassigned = Some(BarWording::Old);
        s.old_bar_lines = true;
    });
    v("a GPU BAR that can't be assigned (6.8)", &|s| {
        s.bar_unassigned = Some(BarWording::New)
    });
    v("one GPU, its BAR unassigned", &|s| {
        s.bar_unassigned = Some(BarWording::New);
        s.gpus = 1;
        s.enable_order = vec![0];
    });
    v("pre-3.14 agent", &|s| s.pre314 = true);
    v("hugepages", &|s| s.ram_pages = RamPages::Huge);
    v("CDI never resolved", &|s| {
        s.outcome = Outcome::CdiNeverResolved
    });
    v("create_container timeout", &|s| {
        s.outcome = Outcome::CreateTimeout
    });
    v("cold plug failed", &|s| s.outcome = Outcome::ColdPlugFailed);
    v("log starts late", &|s| s.head_cut = Some(0.5));
    v("log ends early", &|s| s.tail_cut = Some(0.3));
    v("kubectl", &|s| s.kubectl = true);
    v("the Rust shim through journald", &|s| {
        s.rust_shim = true;
        s.journal_format = JournalFormat::ShortIsoPrecise;
    });
    v(
        "the Rust shim, -o json, other sandboxes and an earlier boot",
        &|s| {
            s.rust_shim = true;
            s.journal_format = JournalFormat::Json;
            s.other_sandbox = true;
            s.earlier_boot = true;
        },
    );
    v("Kata 1.x proxy console with sandbox=", &|s| {
        s.proxy_console = Some(ProxyConsole::WithSandbox);
        s.other_sandbox = true;
    });
    v("Kata 1.x proxy console without sandbox=", &|s| {
        s.proxy_console = Some(ProxyConsole::NoSandbox);
        s.bar_unassigned = Some(BarWording::Old);
        s.old_bar_lines = true;
    });
    for (name, c) in [
        ("behind a CI runner's HH:MM:SS", CiClock::Hms),
        ("behind a CI runner's [HH:MM:SS]", CiClock::Bracketed),
        ("behind a CI runner's HH:MM:SS.mmm", CiClock::Millis),
        ("behind GitHub Actions' RFC 3339 clock", CiClock::Rfc3339),
    ] {
        v(name, &move |s| {
            s.ci_clock = Some(c);
            s.journal_format = JournalFormat::Short;
        });
    }
    v("behind a CI clock, short-full, other sandboxes", &|s| {
        s.ci_clock = Some(CiClock::Hms);
        s.journal_format = JournalFormat::ShortFull;
        s.other_sandbox = true;
    });
    v("shim lines under kata[PID] and containerd[PID]", &|s| {
        s.dup_identifiers = true;
        s.prefix_only_pct = 30;
        s.other_sandbox = true;
    });
    // every wording of a refused VFIO hot-plug (the seed picks it)
    for k in 0..bootprof::synth::HOTPLUG_WORDINGS {
        let mut s = base.clone();
        s.seed = 7 * bootprof::synth::HOTPLUG_WORDINGS + k;
        s.outcome = Outcome::HotplugFailed;
        cases.push(("VFIO hot-plug refused", s));
    }
    for k in 0..5u64 {
        // each wording of the stop (the seed picks it), after and before the start
        for (stop, name) in [
            (Stop::AfterStart, "stopped after the container started"),
            (Stop::BeforeStart, "stopped before the container started"),
        ] {
            let mut s = base.clone();
            s.seed = (base.seed & !(0xff << 8)) | (k << 8);
            s.stop = Some(stop);
            s.kubectl = k % 2 == 0;
            cases.push((name, s));
        }
    }
    let mut failed = Vec::new();
    for (name, spec) in &cases {
        let rec = render(spec);
        let id = rec.truth.sandbox[..12].to_string();
        for sandbox in [Some(id.as_str()), None] {
            if sandbox.is_none() && spec.outcome == Outcome::ColdPlugFailed {
                continue;
            }
            let r = analyze(&rec, sandbox);
            if let Err(e) = check(spec, &rec, &r) {
                failed.push(format!("{name} ({sandbox:?}): {e}"));
            }
            if sandbox.is_none() && r.stats.duplicates != rec.truth.duplicates {
                failed.push(format!(
                    "{name}: {} duplicates dropped (truth {})",
                    r.stats.duplicates, rec.truth.duplicates
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The checks can fail: a report that is off by 1 s in one GPU's driver init, or names
/// the wrong state, is caught.
#[test]
fn the_check_catches_wrong_reports() {
    let spec = Spec::study(3);
    let rec = render(&spec);
    let good = analyze(&rec, None);
    assert!(check(&spec, &rec, &good).is_ok());
    let mut r = good.clone();
    if let Some(g) = r.gpus.first_mut() {
        g.driver_init_s = g.driver_init_s.map(|s| s + 1.0);
    }
    assert!(check(&spec, &rec, &r).is_err());
    let mut r = good.clone();
    r.state.status = "unfinished";
    assert!(check(&spec, &rec, &r).is_err());
    let mut r = good.clone();
    r.gpu_count = r.gpu_count.map(|n| n + 1);
    assert!(check(&spec, &rec, &r).is_err());
    let mut r = good;
    if let Some(s) = r.critical_path.first_mut() {
        s.on_path_s += r.total_s.unwrap_or(0.0);
    }
    assert!(check(&spec, &rec, &r).is_err());
}

/// A log that starts inside the first GPU's enumeration: its register BARs (16 and 32 MiB)
/// are in the log, its 32 GiB VRAM BAR line is not. Its VRAM BAR pin, right after its
/// enable, is still its BAR: read as RAM, its driver init ended at the small pins (5 ms
/// against a true 1.03 s).
#[test]
fn a_gpu_whose_vram_bar_line_was_cut_keeps_its_bar_pin() {
    use Bind::{Absent, After, Before};
    let mut spec = Spec::study(9942064956817237591);
    spec.gpus = 8;
    spec.bar_gib = 32;
    spec.boot_ram_gib = 12;
    spec.hot_ram_gib = 0;
    spec.ram_pages = RamPages::Huge;
    spec.binds = vec![
        Before, After, Absent, Absent, Absent, Absent, Absent, Absent,
    ];
    spec.enable_order = vec![7, 6, 5, 4, 3, 2, 1, 0];
    spec.prefix_only_pct = 30;
    spec.agent_offset_ms = 28_800_040;
    spec.foreign_pins = true;
    spec.emulated_vga = true;
    spec.pre314 = true;
    spec.head_cut = Some(0.3915137299001057);
    spec.host = "gpu-01.dc1.example".into();
    spec.start = Some(1_772_485_599_250_000_000);
    let rec = render(&spec);
    let first = rec.truth.per_gpu.first().unwrap();
    let lines = |what: &str| {
        rec.journal
            .lines()
            .filter(|l| {
                l.contains(&rec.truth.sandbox) && l.contains(&first.bdf) && l.contains(what)
            })
            .count()
    };
    // the condition: its register BARs and its enable are in the log, its VRAM BAR is not
    assert!(lines("BAR 0 [mem") > 0 && lines("enabling device") > 0);
    assert_eq!(lines("BAR 2 [mem"), 0);
    assert!(first.checkable);
    let r = analyze(&rec, None);
    check(&spec, &rec, &r).unwrap_or_else(|e| panic!("{e}"));
}

/// The CI clock shapes are written as a runner prints them, before every journald line
/// (the variations above check the analysis reads the boot through them).
#[test]
fn ci_clocks_stand_before_every_journal_line() {
    for (c, looks) in [
        (
            CiClock::Hms,
            (|w: &str| w.len() == 8 && w.as_bytes()[2] == b':') as fn(&str) -> bool,
        ),
        (CiClock::Bracketed, |w: &str| {
            w.starts_with('[') && w.ends_with(']')
        }),
        (CiClock::Millis, |w: &str| {
            w.len() == 12 && w.as_bytes()[8] == b'.'
        }),
        (CiClock::Rfc3339, |w: &str| {
            w.ends_with('Z') && w.contains('T')
        }),
    ] {
        let mut s = Spec::study(11);
        s.ci_clock = Some(c);
        let r = render(&s);
        assert!(!r.journal.is_empty());
        for line in r.journal.lines() {
            let word = line.split(' ').next().unwrap_or("");
            assert!(looks(word), "{c:?}: {line}");
        }
    }
    // `-o cat` has no prefix to stand before: left as it is
    let mut s = Spec::study(11);
    s.ci_clock = Some(CiClock::Hms);
    s.journal_format = JournalFormat::Cat;
    assert!(render(&s).journal.lines().all(|l| l.starts_with("time=")));
}
