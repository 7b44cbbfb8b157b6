//! The eBPF preempted-flag reader: the checked-in object is the source's build, and on a KVM
//! guest with steal time it loads, learns every vCPU's `steal_time` and reports preemptions.

use std::process::Command;
use std::time::{Duration, Instant};

use irqbal::ebpf::{self, PreemptReader, OBJECT, OBJECT_CLANG};

fn clang_version() -> Option<String> {
    let out = Command::new("clang").arg("--version").output().ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .next()
        .map(str::to_string)
}

#[test]
fn checked_in_objects_match_a_rebuild_from_source() {
    let Some(v) = clang_version() else {
        testkit::skip(
            &testkit::current_test(),
            "clang is not installed; the object is checked by the load test",
        );
        return;
    };
    if v.trim() != OBJECT_CLANG.trim() {
        eprintln!(
            "SKIPPED: clang is {v:?}, the object was built with {:?}; bytes differ across \
             versions",
            OBJECT_CLANG.trim()
        );
        return;
    }
    if !std::path::Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        testkit::skip(
            &testkit::current_test(),
            "libbpf headers (libbpf-dev) are not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/build.sh");
    let st = Command::new("sh")
        .arg(script)
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success(), "build.sh failed");
    for (name, checked_in) in [
        ("preempt.bpf.o", OBJECT),
        ("irqwait.bpf.o", irqbal::wait::OBJECT),
    ] {
        let fresh = std::fs::read(dir.path().join(name)).unwrap();
        assert!(
            fresh == checked_in,
            "bpf/{name} is stale: rebuild it with crates/irqbal/bpf/build.sh"
        );
    }
}

fn steal_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| irqbal::procstat::parse_proc_stat(&t).ok())
        .map_or(0, |s| {
            s.cpus.iter().map(|(_, c)| c.steal.unwrap_or(0)).sum()
        })
}

#[test]
fn reader_sees_preemptions_of_vcpus_with_steal() {
    if let Err(e) = ebpf::kvm_steal_time_offered() {
        testkit::skip(&testkit::current_test(), format!("{e}"));
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(&testkit::current_test(), "loading eBPF needs root");
        return;
    }
    // on a KVM guest with steal time, as root, the reader must open: no fallback here
    let mut r = PreemptReader::open(Duration::from_micros(100))
        .unwrap_or_else(|e| panic!("eBPF reader unavailable on a KVM guest with steal time: {e}"));
    assert!(!r.cpus.is_empty());
    assert_eq!(r.checks.len(), r.cpus.len());
    assert!(r.offsets.steal_time != r.offsets.runqueues);
    // busy vCPUs get preempted when the host is contended; watch for up to 30 s
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let burners: Vec<_> = r
        .cpus
        .iter()
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let steal0 = steal_ticks();
    let start = Instant::now();
    let mut events = Vec::new();
    let mut pair = None;
    while start.elapsed() < Duration::from_secs(30) && pair.is_none() {
        events.extend(r.poll(Duration::from_millis(100)));
        // a resume and the same vCPU's preemption just before it (not an earlier episode's)
        let mut last_preempt = std::collections::HashMap::new();
        for e in &events {
            if e.preempted {
                last_preempt.insert(e.cpu, *e);
            } else if let Some(p) = last_preempt.remove(&e.cpu) {
                pair = Some((p, *e));
                break;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in burners {
        let _ = b.join();
    }
    let stolen_ms = (steal_ticks() - steal0) * 10;
    let c = r.counters();
    eprintln!(
        "{} events in {:.1} s, {stolen_ms} ms stolen; counters {c:?}",
        events.len(),
        start.elapsed().as_secs_f64()
    );
    let Some((p, q)) = pair else {
        assert!(
            stolen_ms < 20,
            "{stolen_ms} ms of steal but no preemption seen by the eBPF reader: {events:?}"
        );
        testkit::skip(
            &testkit::current_test(),
            "the host did not preempt this guest during the test",
        );
        return;
    };
    eprintln!("preempted {p:?}\nresumed   {q:?}");
    assert!(c.scans > 0 && c.events >= 2);
    assert!(r.cpus.contains(&p.cpu));
    // a preemption is seen by another, running vCPU; after the vCPU's last own event
    assert_ne!(p.observer, p.cpu);
    assert!(p.last_event_ns <= p.ts_ns);
    // the resume: the steal clock grew by the episode, which began before it was seen
    assert!(q.ts_ns >= p.ts_ns);
    assert!(q.steal_ns >= q.steal_at_preempt_ns);
    assert_eq!(q.steal_at_preempt_ns, p.steal_ns);
    let start_ns = q.episode_start_ns().unwrap();
    assert!(start_ns <= q.ts_ns);
    // the episode cannot have begun before the vCPU's last event preceding the report
    // (10 µs slack: the resume is seen a little after the vCPU entered the guest)
    assert!(
        start_ns + 10_000 >= p.last_event_ns,
        "{start_ns} < {}",
        p.last_event_ns
    );
}

/// Per CPU: (idle, steal) from `/proc/stat`, in ns.
fn idle_steal_ns() -> Vec<(u32, u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| irqbal::procstat::parse_proc_stat(&t).ok())
        .map_or_else(Vec::new, |s| {
            s.cpus
                .iter()
                .map(|(c, t)| {
                    let ns = irqbal::procstat::NS_PER_TICK;
                    (*c, t.idle * ns, t.steal.unwrap_or(0) * ns)
                })
                .collect()
        })
}

#[test]
fn wake_counters_count_exits_from_idle_and_their_steal() {
    if let Err(e) = ebpf::kvm_steal_time_offered() {
        testkit::skip(&testkit::current_test(), format!("{e}"));
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(&testkit::current_test(), "loading eBPF needs root");
        return;
    }
    let r = PreemptReader::open(Duration::from_micros(100))
        .unwrap_or_else(|e| panic!("eBPF reader unavailable on a KVM guest with steal time: {e}"));
    if let Some(why) = &r.wakes_unavailable {
        testkit::skip(
            &testkit::current_test(),
            format!("no wake-up counters: {why}"),
        );
        return;
    }
    let before = r.wakes().expect("wake counters");
    let ps0 = idle_steal_ns();
    // let every CPU go idle many times: short sleeps
    std::thread::sleep(Duration::from_millis(1500));
    let after = r.wakes().expect("wake counters");
    let ps1 = idle_steal_ns();
    assert_eq!(before.len(), r.cpus.len());
    let mut idle_cpus = 0;
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(a.cpu, b.cpu);
        let (wakes, wait) = (b.wakes - a.wakes, b.wait_ns - a.wait_ns);
        let idle = |ps: &[(u32, u64, u64)]| ps.iter().find(|x| x.0 == a.cpu).map_or(0, |x| x.1);
        let steal = |ps: &[(u32, u64, u64)]| ps.iter().find(|x| x.0 == a.cpu).map_or(0, |x| x.2);
        let idle_ns = idle(&ps1).saturating_sub(idle(&ps0));
        let steal_ns = steal(&ps1).saturating_sub(steal(&ps0));
        eprintln!(
            "cpu{}: {wakes} exits from idle, {:.2} ms waited after them; /proc/stat idle {:.0} \
             ms, steal {:.0} ms",
            a.cpu,
            wait as f64 / 1e6,
            idle_ns as f64 / 1e6,
            steal_ns as f64 / 1e6
        );
        if idle_ns >= 100_000_000 {
            // a CPU idle for a tenth of a second left idle many times (each tick at least)
            idle_cpus += 1;
            assert!(
                wakes >= 10,
                "cpu{} idle {idle_ns} ns but {wakes} exits",
                a.cpu
            );
        }
        // what the exits waited is steal, so it cannot exceed the steal of the window (plus
        // /proc/stat's tick granularity and the idle period that straddles its start)
        assert!(
            wait <= steal_ns + 50_000_000,
            "cpu{}: waited {wait} ns > steal {steal_ns} ns",
            a.cpu
        );
        assert!(b.wait_sq_us2 >= a.wait_sq_us2);
    }
    if idle_cpus == 0 {
        testkit::skip(
            &testkit::current_test(),
            "no CPU was idle during the test (a busy machine)",
        );
    }
}
